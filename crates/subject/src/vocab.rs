//! A model's vocabulary, loaded on its own (no weights), for the samplers that need one.

use anyhow::{bail, Context, Result};
use llama_cpp_sys_2 as sys;
use oracle::TokenId;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::Arc;

/// The folder `make models` fills: `$MODELS_CACHE` if set, else `models-cache/` at the
/// repository root (found from this crate's own source folder, so it is the same from the
/// root workspace and from `legacy/`).
pub fn models_cache() -> PathBuf {
    std::env::var_os("MODELS_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models-cache"))
}

/// Owns a `llama_model` loaded with `vocab_only = true` and frees it once, on drop.
///
/// Samplers built from it keep an `Arc` to it, so the vocabulary outlives every sampler
/// that points into it.
#[derive(Debug)]
pub struct Vocab {
    model: NonNull<sys::llama_model>,
}

impl Drop for Vocab {
    fn drop(&mut self) {
        // SAFETY: `model` came from llama_model_load_from_file and is freed only here.
        unsafe { sys::llama_model_free(self.model.as_ptr()) }
    }
}

impl Vocab {
    /// Loads only the vocabulary of the GGUF file at `path`.
    pub fn load(path: &Path) -> Result<Arc<Vocab>> {
        crate::sampler::quiet_logs();
        if !path.is_file() {
            bail!("model file {} does not exist", path.display());
        }
        let c_path = CString::new(path.as_os_str().as_encoded_bytes())
            .context("model path contains a NUL byte")?;
        // SAFETY: default params by value; the path is a live NUL-terminated string. llama.cpp
        // catches its own loading exceptions and returns NULL.
        let raw = unsafe {
            let mut params = sys::llama_model_default_params();
            params.vocab_only = true;
            sys::llama_model_load_from_file(c_path.as_ptr(), params)
        };
        let model = NonNull::new(raw)
            .with_context(|| format!("llama.cpp could not load {}", path.display()))?;
        Ok(Arc::new(Vocab { model }))
    }

    pub(crate) fn raw(&self) -> *const sys::llama_vocab {
        // SAFETY: live model; the vocab it returns lives as long as the model.
        unsafe { sys::llama_model_get_vocab(self.model.as_ptr()) }
    }

    /// Number of token ids.
    pub fn n_tokens(&self) -> i32 {
        // SAFETY: live vocab.
        unsafe { sys::llama_vocab_n_tokens(self.raw()) }
    }

    /// The ids of `text`, without special tokens.
    pub fn tokenize(&self, text: &str) -> Result<Vec<TokenId>> {
        let len = i32::try_from(text.len()).context("text too long to tokenize")?;
        let mut out = vec![0i32; text.len() + 8];
        // SAFETY: `text` and `out` are live for the call; `out` holds `out.len()` ids.
        let n = unsafe {
            sys::llama_tokenize(
                self.raw(),
                text.as_ptr().cast(),
                len,
                out.as_mut_ptr(),
                out.len() as i32,
                false,
                false,
            )
        };
        if n < 0 {
            bail!("tokenizing {text:?} needs {} ids", -n);
        }
        out.truncate(n as usize);
        Ok(out.into_iter().map(TokenId).collect())
    }

    /// The text of one token (lossy UTF-8).
    pub fn piece(&self, id: TokenId) -> Result<String> {
        if id.0 < 0 || id.0 >= self.n_tokens() {
            bail!(
                "token id {id} is outside the vocabulary of {}",
                self.n_tokens()
            );
        }
        let mut buf = vec![0u8; 256];
        // SAFETY: `buf` is live and holds `buf.len()` bytes.
        let n = unsafe {
            sys::llama_token_to_piece(
                self.raw(),
                id.0,
                buf.as_mut_ptr().cast(),
                buf.len() as i32,
                0,
                true,
            )
        };
        if n < 0 {
            bail!("token {id} has a piece longer than {} bytes", buf.len());
        }
        buf.truncate(n as usize);
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }
}
