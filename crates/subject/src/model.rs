//! A model and a decoding context, through llama.cpp's C API.
//!
//! Loading, chat templating, tokenizing and decoding go through llama-cpp-sys-2 directly,
//! so the same code builds against both pinned releases and no second binding (with its own
//! llama.cpp build) enters the workspace. Decoding is deterministic on one machine: a fixed
//! thread count, the prompt in one batch, then one token per batch, CPU only.

use crate::compat as sys;
use crate::vocab::{decode_piece, filled, load_raw};
use anyhow::{bail, ensure, Context as _, Result};
use oracle::TokenId;
use std::ffi::CString;
use std::path::Path;
use std::ptr::NonNull;
use std::sync::Arc;

/// Owns a loaded `llama_model` and frees it once, on drop.
#[derive(Debug)]
pub struct Model {
    pub(crate) raw: NonNull<sys::llama_model>,
    weights: Weights,
}

impl Drop for Model {
    fn drop(&mut self) {
        // SAFETY: `raw` came from llama_model_load_from_file and is freed only here; every
        // context holds an Arc to this model, so none outlives it.
        unsafe { ffi!(sys::llama_model_free(self.raw.as_ptr())) }
    }
}

/// One turn of a chat.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub role: String,
    pub content: String,
}

/// How the quantized weights are laid out in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weights {
    /// llama.cpp's default: where the CPU backend has an interleaved kernel for a type
    /// (`use_extra_bufts`), the weights are repacked for it. Then a matrix product over a batch
    /// sends rows in groups of four through one kernel and the rest through another, so a row's
    /// result depends on how many rows share its batch.
    Repacked,
    /// As stored in the file: every row of a batch goes through the same kernel. Probed on
    /// 0.1.161 (Gemma3 Q4_K_M, six sequences decoding the same tokens): repacked, the four
    /// rows of the group-of-four kernel differed from lone decoding by up to 1.66 in a logit;
    /// as stored, all six were bit-identical. Batched rows compared with lone ones need this.
    AsStored,
}

impl Model {
    /// Loads all weights of the GGUF file at `path` on the CPU (on the GPU in a build with the
    /// `cuda` feature), repacked where llama.cpp can.
    pub fn load(path: &Path) -> Result<Arc<Model>> {
        Model::load_with(path, Weights::Repacked)
    }

    /// [`Model::load`] with a chosen weight layout.
    pub fn load_with(path: &Path, weights: Weights) -> Result<Arc<Model>> {
        // Before b6097 llama.cpp repacks whatever it is asked, so weights as stored cannot be
        // had, and a multi-sequence context's guard on them would pass without meaning.
        if weights == Weights::AsStored && !cfg!(llama_field = "llama_model_params.use_extra_bufts")
        {
            return Err(crate::NotOffered {
                what: "weights as stored (llama_model_params.use_extra_bufts)",
            }
            .into());
        }
        let raw = load_raw(path, true, " (not a GGUF model?)", |params| {
            // Every layer on the GPU in a CUDA build (999: llama.cpp's "all"), none otherwise.
            params.n_gpu_layers = if cfg!(feature = "cuda") { 999 } else { 0 };
            // Repacking is a switch from b6097; before it, weights are always repacked where
            // the CPU backend can (AsStored is refused above).
            #[cfg(llama_field = "llama_model_params.use_extra_bufts")]
            {
                params.use_extra_bufts = weights == Weights::Repacked;
            }
        })?;
        // Arc, not Rc: contexts, vocabularies and samplers share the model, and the harness
        // hands them to worker threads only behind its own Send wrappers.
        #[allow(clippy::arc_with_non_send_sync)]
        let model = Arc::new(Model { raw, weights });
        Ok(model)
    }

    pub fn weights(&self) -> Weights {
        self.weights
    }

    fn vocab(&self) -> *const sys::llama_vocab {
        // SAFETY: live model; the vocab lives as long as it.
        unsafe { ffi!(sys::llama_model_get_vocab(self.raw.as_ptr())) }
    }

    pub fn n_vocab(&self) -> i32 {
        // SAFETY: live vocab.
        unsafe { ffi!(sys::llama_vocab_n_tokens(self.vocab())) }
    }

    /// End of generation (eos, eot, im_end, ...).
    pub fn is_eog(&self, id: TokenId) -> bool {
        // SAFETY: live vocab; any id is accepted.
        unsafe { ffi!(sys::llama_vocab_is_eog(self.vocab(), id.0)) }
    }

    /// Tokenizes `text`; `add_special` adds BOS/EOS as the model asks, `parse_special` reads
    /// control tokens such as `<|im_start|>` written in the text.
    pub fn tokenize(
        &self,
        text: &str,
        add_special: bool,
        parse_special: bool,
    ) -> Result<Vec<TokenId>> {
        crate::vocab::tokenize_raw(self.vocab(), text, add_special, parse_special)
    }

    /// The bytes of one token, control tokens rendered as their text.
    pub fn token_bytes(&self, id: TokenId) -> Result<Vec<u8>> {
        ensure!(
            id.0 >= 0 && id.0 < self.n_vocab(),
            "token id {id} is outside the vocabulary of {}",
            self.n_vocab()
        );
        decode_piece(self.vocab(), id)
    }

    /// The text of a token sequence: bytes joined first, then decoded once, so a character
    /// split over several tokens comes out whole.
    pub fn detokenize(&self, ids: &[TokenId]) -> Result<String> {
        let mut bytes = Vec::new();
        for &id in ids {
            bytes.extend(self.token_bytes(id)?);
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// The conversation rendered with the model's own chat template (llama.cpp's built-in
    /// implementation of it), ending with the assistant's turn opened. `fallback` names one of
    /// llama.cpp's built-in templates (`gemma`, `chatml`, ...) for a file that carries none.
    pub fn chat_prompt(&self, messages: &[Message], fallback: Option<&str>) -> Result<String> {
        // SAFETY: live model; NULL name asks for the default template.
        let own = unsafe {
            ffi!(sys::llama_model_chat_template(
                self.raw.as_ptr(),
                std::ptr::null()
            ))
        };
        let fallback = fallback
            .map(CString::new)
            .transpose()
            .context("template name contains a NUL byte")?;
        let tmpl = match (own.is_null(), &fallback) {
            (false, _) => own,
            (true, Some(name)) => name.as_ptr(),
            (true, None) => bail!("the model file carries no chat template"),
        };
        let strings = messages
            .iter()
            .map(|m| {
                let role = CString::new(m.role.as_str()).context("a role contains a NUL byte")?;
                let text =
                    CString::new(m.content.as_str()).context("a message contains a NUL byte")?;
                Ok((role, text))
            })
            .collect::<Result<Vec<_>>>()?;
        let chat: Vec<sys::llama_chat_message> = strings
            .iter()
            .map(|(r, c)| sys::llama_chat_message {
                role: r.as_ptr(),
                content: c.as_ptr(),
            })
            .collect();
        let room = 4096 + messages.iter().map(|m| 2 * m.content.len()).sum::<usize>();
        let text = filled(room, |buf: &mut [u8]| {
            // SAFETY: `chat` points into `strings`, alive for the call; `buf` holds
            // `buf.len()` bytes.
            let n = unsafe {
                ffi!(sys::llama_chat_apply_template(
                    tmpl,
                    chat.as_ptr(),
                    chat.len(),
                    true,
                    buf.as_mut_ptr().cast(),
                    buf.len() as i32,
                ))
            };
            ensure!(
                n >= 0,
                "llama.cpp does not support this model's chat template"
            );
            Ok(n)
        })?
        .context("the rendered chat template kept growing")?;
        String::from_utf8(text).context("the rendered template is not UTF-8")
    }

    /// The model's description, e.g. `llama 135M Q4_1`.
    pub fn describe(&self) -> String {
        let mut buf = vec![0u8; 256];
        // SAFETY: `buf` holds `buf.len()` bytes.
        let n = unsafe {
            ffi!(sys::llama_model_desc(
                self.raw.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len()
            ))
        };
        buf.truncate(n.max(0) as usize);
        String::from_utf8_lossy(&buf).into_owned()
    }
}

/// Which attention kernel a context uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attention {
    /// llama.cpp's own choice (`flash_attn_type = auto`; on this CPU it picks flash attention).
    Auto,
    /// Flash attention off. [`crate::MultiContext`] always uses it (see there for why), and a
    /// single-sequence context that is compared with one must use it too.
    Plain,
}

/// A llama.cpp context over `model`: `n_ctx` cells, at most `n_batch` tokens per decode,
/// `n_seq` sequences (each in its own stream of the cache), `threads` CPU threads.
pub(crate) fn init_context(
    model: &Arc<Model>,
    n_ctx: u32,
    n_batch: u32,
    n_seq: u32,
    attention: Attention,
    threads: i32,
) -> Result<RawContext> {
    ensure!(n_ctx >= 8, "context size must be at least 8, got {n_ctx}");
    ensure!(
        (1..=n_ctx).contains(&n_batch),
        "batch size must be in 1..={n_ctx}, got {n_batch}"
    );
    ensure!(
        (1..=256).contains(&n_seq),
        "sequence count must be in 1..=256 (llama.cpp's LLAMA_MAX_SEQ), got {n_seq}"
    );
    ensure!(
        threads >= 1,
        "thread count must be at least 1, got {threads}"
    );
    // SAFETY: params by value; live model. NULL means failure (exceptions are caught).
    let raw = unsafe {
        let mut p = ffi!(sys::llama_context_default_params());
        p.n_ctx = n_ctx;
        p.n_batch = n_batch;
        p.n_ubatch = n_batch;
        p.n_seq_max = n_seq;
        p.n_threads = threads;
        p.n_threads_batch = threads;
        p.no_perf = true;
        if attention == Attention::Plain {
            crate::compat::plain_attention(&mut p);
        }
        ffi!(sys::llama_init_from_model(model.raw.as_ptr(), p))
    };
    let raw = NonNull::new(raw).context("llama.cpp could not create a context")?;
    Ok(RawContext {
        raw,
        model: Arc::clone(model),
    })
}

/// Owns a `llama_context` and the model it was made from.
#[derive(Debug)]
pub(crate) struct RawContext {
    pub(crate) raw: NonNull<sys::llama_context>,
    pub(crate) model: Arc<Model>,
}

impl RawContext {
    pub(crate) fn ptr(&self) -> *mut sys::llama_context {
        self.raw.as_ptr()
    }
}

/// A decoding context over one model: a KV cache of `n_ctx` positions.
#[derive(Debug)]
pub struct Context {
    ctx: RawContext,
    n_ctx: usize,
    /// Tokens decoded since the last clear.
    n_past: usize,
}

impl Drop for RawContext {
    fn drop(&mut self) {
        // SAFETY: `raw` came from llama_init_from_model and is freed only here, before the
        // Arc to its model is released (fields drop after this body).
        unsafe { ffi!(sys::llama_free(self.raw.as_ptr())) }
    }
}

impl Context {
    /// A context of `n_ctx` positions decoding on `threads` CPU threads with `attention`.
    pub fn with_attention(
        model: &Arc<Model>,
        n_ctx: u32,
        attention: Attention,
        threads: i32,
    ) -> Result<Context> {
        Ok(Context {
            ctx: init_context(model, n_ctx, n_ctx, 1, attention, threads)?,
            n_ctx: n_ctx as usize,
            n_past: 0,
        })
    }

    pub fn model(&self) -> &Arc<Model> {
        &self.ctx.model
    }

    /// Forgets everything decoded so far.
    pub fn clear(&mut self) {
        // SAFETY: live context; its memory handle lives as long as it.
        unsafe {
            ffi!(sys::llama_memory_clear(
                ffi!(sys::llama_get_memory(self.ctx.ptr())),
                true
            ))
        };
        self.n_past = 0;
    }

    /// Decodes `tokens` as one batch after what is already in the cache.
    pub fn decode(&mut self, tokens: &[TokenId]) -> Result<()> {
        ensure!(!tokens.is_empty(), "nothing to decode");
        ensure!(
            self.n_past + tokens.len() <= self.n_ctx,
            "the sequence would exceed the context of {} tokens",
            self.n_ctx
        );
        let n_vocab = self.ctx.model.n_vocab();
        let mut ids = tokens
            .iter()
            .map(|t| {
                ensure!(
                    t.0 >= 0 && t.0 < n_vocab,
                    "token id {t} is outside the vocabulary"
                );
                Ok(t.0)
            })
            .collect::<Result<Vec<i32>>>()?;
        // SAFETY: `ids` lives for the call; the batch only borrows it.
        let rc = unsafe {
            let batch = ffi!(sys::llama_batch_get_one(ids.as_mut_ptr(), ids.len() as i32));
            ffi!(sys::llama_decode(self.ctx.ptr(), batch))
        };
        ensure!(rc == 0, "llama_decode failed with code {rc}");
        self.n_past += tokens.len();
        Ok(())
    }

    /// The logits after the last decoded token, one per vocabulary id.
    pub fn logits(&self) -> Result<Vec<f32>> {
        ensure!(self.n_past > 0, "nothing decoded yet");
        let n = self.ctx.model.n_vocab() as usize;
        // SAFETY: the last batch asked for the last token's logits (llama_batch_get_one does);
        // the row holds n_vocab floats, copied at once.
        let row = unsafe { ffi!(sys::llama_get_logits_ith(self.ctx.ptr(), -1)) };
        ensure!(!row.is_null(), "llama.cpp returned no logits");
        Ok(unsafe { std::slice::from_raw_parts(row, n) }.to_vec())
    }
}
