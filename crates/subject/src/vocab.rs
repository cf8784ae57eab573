//! A model's vocabulary, loaded on its own (no weights), for the samplers that need one.

use crate::compat as sys;
use anyhow::{bail, ensure, Context, Result};
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
        let model = load_raw(path, false, "", |params| params.vocab_only = true)?;
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

/// Loads the GGUF file at `path` with llama.cpp's default model parameters as `adjust` leaves
/// them, after `llama_backend_init` when `backend`; `hint` ends the error for a NULL result.
pub(crate) fn load_raw(
    path: &Path,
    backend: bool,
    hint: &str,
    adjust: impl FnOnce(&mut sys::llama_model_params),
) -> Result<NonNull<sys::llama_model>> {
    crate::logs::quiet_logs();
    ensure!(
        path.is_file(),
        "model file {} does not exist",
        path.display()
    );
    let c_path = CString::new(path.as_os_str().as_encoded_bytes())
        .context("model path contains a NUL byte")?;
    // SAFETY: params by value, a live NUL-terminated path; llama.cpp catches its own loading
    // exceptions and returns NULL.
    let raw = unsafe {
        if backend {
            ffi!(sys::llama_backend_init());
        }
        let mut params = ffi!(sys::llama_model_default_params());
        adjust(&mut params);
        ffi!(sys::llama_model_load_from_file(c_path.as_ptr(), params))
    };
    NonNull::new(raw).with_context(|| format!("llama.cpp could not load {}{hint}", path.display()))
}

/// Calls `fill` with a buffer of `len` items, then once more with the length it asks for:
/// llama.cpp's fill functions return the length written, or the length needed (negated by
/// some). `None` when the second buffer is still too small.
pub(crate) fn filled<T: Copy + Default>(
    mut len: usize,
    mut fill: impl FnMut(&mut [T]) -> Result<i32>,
) -> Result<Option<Vec<T>>> {
    for _ in 0..2 {
        let mut buf = vec![T::default(); len];
        let n = fill(&mut buf)?;
        if n >= 0 && n as usize <= len {
            buf.truncate(n as usize);
            return Ok(Some(buf));
        }
        len = n.unsigned_abs() as usize;
    }
    Ok(None)
}

/// `llama_tokenize` into an owned vector.
pub(crate) fn tokenize_raw(
    vocab: *const sys::llama_vocab,
    text: &str,
    add_special: bool,
    parse_special: bool,
) -> Result<Vec<TokenId>> {
    let len = i32::try_from(text.len()).context("text too long to tokenize")?;
    let ids = filled(text.len() + 8, |out: &mut [i32]| {
        // SAFETY: `text` and `out` are live for the call; `out` holds `out.len()` ids.
        Ok(unsafe {
            ffi!(sys::llama_tokenize(
                vocab,
                text.as_ptr().cast(),
                len,
                out.as_mut_ptr(),
                out.len() as i32,
                add_special,
                parse_special,
            ))
        })
    })?;
    let ids = ids.with_context(|| format!("tokenizing {text:?} kept growing"))?;
    Ok(ids.into_iter().map(TokenId).collect())
}

/// The bytes of one in-range token, control tokens rendered.
pub(crate) fn decode_piece(vocab: *const sys::llama_vocab, id: TokenId) -> Result<Vec<u8>> {
    let piece = filled(64, |buf: &mut [u8]| {
        // SAFETY: `buf` is live and holds `buf.len()` bytes; the id was range-checked.
        Ok(unsafe {
            ffi!(sys::llama_token_to_piece(
                vocab,
                id.0,
                buf.as_mut_ptr().cast(),
                buf.len() as i32,
                0,
                true,
            ))
        })
    })?;
    piece.with_context(|| format!("token {id} has a piece that kept growing"))
}
