//! `sorted-guard`: makes a stale `sorted` flag harmless.

use anyhow::Result;
use llama_cpp_sys_2 as sys;
use std::sync::OnceLock;
use subject::Sampler;

unsafe extern "C" fn name(_smpl: *const sys::llama_sampler) -> *const std::os::raw::c_char {
    c"sorted-guard".as_ptr()
}

/// One pass: if the array claims to be sorted but is not, clear the claim.
unsafe extern "C" fn apply(
    _smpl: *mut sys::llama_sampler,
    cur_p: *mut sys::llama_token_data_array,
) {
    // SAFETY: llama.cpp passes NULL or a live array header whose data holds `size` entries.
    let Some(arr) = (unsafe { cur_p.as_mut() }) else {
        return;
    };
    if !arr.sorted || arr.data.is_null() || arr.size < 2 {
        return;
    }
    // SAFETY: as above.
    let data = unsafe { std::slice::from_raw_parts(arr.data, arr.size) };
    // "Not >=" rather than "<": a NaN breaks the order too.
    #[allow(clippy::neg_cmp_op_on_partial_ord)]
    let broken = data.windows(2).any(|w| !(w[0].logit >= w[1].logit));
    if broken {
        arr.sorted = false;
    }
}

unsafe extern "C" fn clone(_smpl: *const sys::llama_sampler) -> *mut sys::llama_sampler {
    raw_guard()
}

fn iface() -> *mut sys::llama_sampler_i {
    static IFACE: OnceLock<sys::llama_sampler_i> = OnceLock::new();
    let i = IFACE.get_or_init(|| {
        // SAFETY: every field is an Option of a function pointer; all-zero is all None, which
        // is how llama.cpp spells "not implemented" (both releases have different field sets).
        let mut i: sys::llama_sampler_i = unsafe { std::mem::zeroed() };
        i.name = Some(name);
        i.apply = Some(apply);
        i.clone = Some(clone);
        i
    });
    // llama.cpp never writes through the iface pointer.
    i as *const sys::llama_sampler_i as *mut sys::llama_sampler_i
}

fn raw_guard() -> *mut sys::llama_sampler {
    // SAFETY: a static iface and no context (the guard has no state, so no free is needed).
    unsafe { sys::llama_sampler_init(iface(), std::ptr::null_mut()) }
}

/// A new guard stage.
pub fn sorted_guard() -> Result<Sampler> {
    // SAFETY: fresh sampler from llama_sampler_init, owned by nobody else; its iface functions
    // check their arguments and never unwind.
    unsafe { Sampler::adopt(raw_guard(), None) }
}
