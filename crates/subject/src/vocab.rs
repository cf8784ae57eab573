//! A model's vocabulary, loaded on its own (no weights), for the samplers that need one.

use anyhow::{bail, Context, Result};
use llama_cpp_sys_2 as sys;
use oracle::TokenId;
use std::ffi::CString;
use std::path::Path;
use std::ptr::NonNull;
use std::sync::Arc;

/// Owns a `llama_model` loaded with `vocab_only = true` and frees it once, on drop.
///
/// Samplers built from it keep an `Arc` to it, so the vocabulary outlives every sampler
/// that points into it.
#[derive(Debug)]
pub struct Vocab {
    model: NonNull<sys::llama_model>,
}

// SAFETY: after loading, nothing writes to a vocabulary: tokenizing, piece lookup and the
// grammar's token matching only call llama.cpp's const `llama_vocab` accessors, which is how
// upstream's server shares one model among the threads of its slots. Freeing happens once,
// in Drop, when the last Arc goes.
unsafe impl Send for Vocab {}
unsafe impl Sync for Vocab {}

impl Drop for Vocab {
    fn drop(&mut self) {
        // SAFETY: `model` came from llama_model_load_from_file and is freed only here.
        unsafe { ffi!(sys::llama_model_free(self.model.as_ptr())) }
    }
}

impl Vocab {
    /// Loads only the vocabulary of the GGUF file at `path`.
    pub fn load(path: &Path) -> Result<Arc<Vocab>> {
        crate::logs::quiet_logs();
        if !path.is_file() {
            bail!("model file {} does not exist", path.display());
        }
        let c_path = CString::new(path.as_os_str().as_encoded_bytes())
            .context("model path contains a NUL byte")?;
        // SAFETY: default params by value; the path is a live NUL-terminated string. llama.cpp
        // catches its own loading exceptions and returns NULL.
        let raw = unsafe {
            let mut params = ffi!(sys::llama_model_default_params());
            params.vocab_only = true;
            ffi!(sys::llama_model_load_from_file(c_path.as_ptr(), params))
        };
        let model = NonNull::new(raw)
            .with_context(|| format!("llama.cpp could not load {}", path.display()))?;
        Ok(Arc::new(Vocab { model }))
    }

    pub(crate) fn raw(&self) -> *const sys::llama_vocab {
        // SAFETY: live model; the vocab it returns lives as long as the model.
        unsafe { ffi!(sys::llama_model_get_vocab(self.model.as_ptr())) }
    }

    /// Number of token ids.
    pub fn n_tokens(&self) -> i32 {
        // SAFETY: live vocab.
        unsafe { ffi!(sys::llama_vocab_n_tokens(self.raw())) }
    }

    /// The ids of `text`, without special tokens.
    pub fn tokenize(&self, text: &str) -> Result<Vec<TokenId>> {
        tokenize_raw(self.raw(), text, false, false)
    }

    /// The text of one token (lossy UTF-8).
    pub fn piece(&self, id: TokenId) -> Result<String> {
        if id.0 < 0 || id.0 >= self.n_tokens() {
            bail!(
                "token id {id} is outside the vocabulary of {}",
                self.n_tokens()
            );
        }
        Ok(String::from_utf8_lossy(&decode_piece(self.raw(), id)?).into_owned())
    }
}

/// `llama_tokenize` into an owned vector.
pub(crate) fn tokenize_raw(
    vocab: *const sys::llama_vocab,
    text: &str,
    add_special: bool,
    parse_special: bool,
) -> Result<Vec<TokenId>> {
    let len = i32::try_from(text.len()).context("text too long to tokenize")?;
    let mut out = vec![0i32; text.len() + 8];
    for _ in 0..2 {
        // SAFETY: `text` and `out` are live for the call; `out` holds `out.len()` ids.
        let n = unsafe {
            ffi!(sys::llama_tokenize(
                vocab,
                text.as_ptr().cast(),
                len,
                out.as_mut_ptr(),
                out.len() as i32,
                add_special,
                parse_special,
            ))
        };
        if n >= 0 {
            out.truncate(n as usize);
            return Ok(out.into_iter().map(TokenId).collect());
        }
        out = vec![0i32; (-n) as usize];
    }
    bail!("tokenizing {text:?} kept growing")
}

/// The bytes of one in-range token, control tokens rendered.
pub(crate) fn decode_piece(vocab: *const sys::llama_vocab, id: TokenId) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; 64];
    for _ in 0..2 {
        // SAFETY: `buf` is live and holds `buf.len()` bytes; the id was range-checked.
        let n = unsafe {
            ffi!(sys::llama_token_to_piece(
                vocab,
                id.0,
                buf.as_mut_ptr().cast(),
                buf.len() as i32,
                0,
                true,
            ))
        };
        if n >= 0 {
            buf.truncate(n as usize);
            return Ok(buf);
        }
        buf = vec![0u8; (-n) as usize];
    }
    bail!("token {id} has a piece that kept growing")
}
