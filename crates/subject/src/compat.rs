//! The one place where llama.cpp releases' C APIs differ for this wrapper.
//!
//! Every module calls llama.cpp through `use crate::compat as sys;`: the bindings of the linked
//! release, with the names below put in front of them where a release spells an operation
//! differently. Which spelling a release has is read from its header at build time (see
//! `build.rs`: `llama_fn`, `llama_arity`, `llama_field`), not kept per release. A sampler a
//! release does not have at all is not shimmed: `SamplerSpec::not_offered` reports it.

#![allow(non_camel_case_types)]

pub use llama_cpp_sys_2::*;

// Before b4524 there is no separate vocabulary: the model answers for it, and every function
// taking a vocabulary (tokenize, token_to_piece, grammar, infill) takes the model, so a
// vocabulary pointer is the model pointer.
#[cfg(not(llama_fn = "llama_model_get_vocab"))]
pub type llama_vocab = llama_cpp_sys_2::llama_model;

/// # Safety
/// `model` is a live model.
#[cfg(not(llama_fn = "llama_model_get_vocab"))]
pub unsafe fn llama_model_get_vocab(model: *const llama_model) -> *const llama_vocab {
    model
}

/// # Safety
/// `vocab` is a live vocabulary.
#[cfg(not(llama_fn = "llama_vocab_n_tokens"))]
pub unsafe fn llama_vocab_n_tokens(vocab: *const llama_vocab) -> i32 {
    // SAFETY: the caller's contract.
    unsafe { llama_cpp_sys_2::llama_n_vocab(vocab) }
}

/// # Safety
/// `vocab` is a live vocabulary.
#[cfg(not(llama_fn = "llama_vocab_is_eog"))]
pub unsafe fn llama_vocab_is_eog(vocab: *const llama_vocab, id: llama_token) -> bool {
    // SAFETY: the caller's contract.
    unsafe { llama_cpp_sys_2::llama_token_is_eog(vocab, id) }
}

/// # Safety
/// `path` is a NUL-terminated string.
#[cfg(not(llama_fn = "llama_model_load_from_file"))]
pub unsafe fn llama_model_load_from_file(
    path: *const std::os::raw::c_char,
    params: llama_model_params,
) -> *mut llama_model {
    // SAFETY: the caller's contract.
    unsafe { llama_cpp_sys_2::llama_load_model_from_file(path, params) }
}

/// # Safety
/// `model` is a live model no context uses any more.
#[cfg(not(llama_fn = "llama_model_free"))]
pub unsafe fn llama_model_free(model: *mut llama_model) {
    // SAFETY: the caller's contract.
    unsafe { llama_cpp_sys_2::llama_free_model(model) }
}

/// # Safety
/// `model` is a live model.
#[cfg(not(llama_fn = "llama_init_from_model"))]
pub unsafe fn llama_init_from_model(
    model: *mut llama_model,
    params: llama_context_params,
) -> *mut llama_context {
    // SAFETY: the caller's contract.
    unsafe { llama_cpp_sys_2::llama_new_context_with_model(model, params) }
}

/// The model's own chat template. Before b4524 the C API has no call for it, so a model is
/// treated as carrying none (a caller's fallback template is used).
///
/// # Safety
/// `model` is a live model.
#[cfg(not(llama_fn = "llama_model_chat_template"))]
pub unsafe fn llama_model_chat_template(
    _model: *const llama_model,
    _name: *const std::os::raw::c_char,
) -> *const std::os::raw::c_char {
    std::ptr::null()
}

/// # Safety
/// As llama.cpp's `llama_chat_apply_template`.
#[cfg(llama_arity = "llama_chat_apply_template:7")]
pub unsafe fn llama_chat_apply_template(
    tmpl: *const std::os::raw::c_char,
    chat: *const llama_chat_message,
    n_msg: usize,
    add_ass: bool,
    buf: *mut std::os::raw::c_char,
    length: i32,
) -> i32 {
    // SAFETY: the caller's contract; with a template given, the model is not read.
    unsafe {
        llama_cpp_sys_2::llama_chat_apply_template(
            std::ptr::null(),
            tmpl,
            chat,
            n_msg,
            add_ass,
            buf,
            length,
        )
    }
}

// Before b5686 a context's cache is cleared and copied through the context itself, so the
// "memory" handle is the context.
#[cfg(not(llama_fn = "llama_get_memory"))]
pub type llama_memory_t = *mut llama_context;

/// # Safety
/// `ctx` is a live context.
#[cfg(not(llama_fn = "llama_get_memory"))]
pub unsafe fn llama_get_memory(ctx: *const llama_context) -> llama_memory_t {
    ctx.cast_mut()
}

/// # Safety
/// `mem` is a live context's memory.
#[cfg(not(llama_fn = "llama_memory_clear"))]
pub unsafe fn llama_memory_clear(mem: llama_memory_t, _data: bool) {
    // SAFETY: the caller's contract.
    #[cfg(llama_fn = "llama_kv_self_clear")]
    unsafe {
        llama_cpp_sys_2::llama_kv_self_clear(mem)
    }
    // SAFETY: the caller's contract.
    #[cfg(not(llama_fn = "llama_kv_self_clear"))]
    unsafe {
        llama_cpp_sys_2::llama_kv_cache_clear(mem)
    }
}

/// # Safety
/// `mem` is a live context's memory; both ids are below its sequence count.
#[cfg(not(llama_fn = "llama_memory_seq_cp"))]
pub unsafe fn llama_memory_seq_cp(
    mem: llama_memory_t,
    src: llama_seq_id,
    dst: llama_seq_id,
    p0: llama_pos,
    p1: llama_pos,
) {
    // SAFETY: the caller's contract.
    #[cfg(llama_fn = "llama_kv_self_seq_cp")]
    unsafe {
        llama_cpp_sys_2::llama_kv_self_seq_cp(mem, src, dst, p0, p1)
    }
    // SAFETY: the caller's contract.
    #[cfg(not(llama_fn = "llama_kv_self_seq_cp"))]
    unsafe {
        llama_cpp_sys_2::llama_kv_cache_seq_cp(mem, src, dst, p0, p1)
    }
}

/// Turns flash attention off: an enum from b6482 (`flash_attn_type`), a switch before.
pub fn plain_attention(p: &mut llama_context_params) {
    #[cfg(llama_field = "llama_context_params.flash_attn_type")]
    {
        p.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    }
    #[cfg(not(llama_field = "llama_context_params.flash_attn_type"))]
    {
        p.flash_attn = false;
    }
}

/// The penalties sampler in the four-parameter form the audits describe.
///
/// # Safety
/// Parameters checked by `SamplerSpec::validate`.
pub unsafe fn penalties(
    n_vocab: i32,
    last_n: i32,
    repeat: f32,
    freq: f32,
    present: f32,
) -> *mut llama_sampler {
    // b10405 on: the vocabulary size first.
    // SAFETY (all three): plain values in, an owned sampler or NULL out.
    #[cfg(llama_arity = "llama_sampler_init_penalties:5")]
    let raw = unsafe { llama_sampler_init_penalties(n_vocab, last_n, repeat, freq, present) };
    // b4524 to b10200: the four penalty parameters only.
    #[cfg(llama_arity = "llama_sampler_init_penalties:4")]
    let raw = {
        let _ = n_vocab;
        unsafe { llama_sampler_init_penalties(last_n, repeat, freq, present) }
    };
    // b4240 and older: vocabulary size, EOS and newline ids and two switches. No ids (-1),
    // `penalize_nl` true and `ignore_eos` false make it the same sampler: only the newline
    // restore (skipped when penalize_nl) and the EOS mask (skipped unless ignore_eos) read
    // those ids.
    #[cfg(llama_arity = "llama_sampler_init_penalties:9")]
    let raw = unsafe {
        llama_sampler_init_penalties(n_vocab, -1, -1, last_n, repeat, freq, present, true, false)
    };
    raw
}
