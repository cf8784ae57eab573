//! `llama_sampler_copy(src, dst)` (b10405 on): copies `src`'s mutable state into `dst`, which
//! keeps its own configuration and its references to the sampling graph. llama.cpp's header
//! requires that "src and dst must have the same type and configuration"; it asserts the
//! type (`GGML_ASSERT(src->iface == dst->iface)`, an abort) and, for chains, the length, and
//! leaves the configuration to the caller. A sampler without `copy_state` gets a clone of
//! `src` in place of its old state.
//!
//! [`Sampler::copy_from`] refuses up front what llama.cpp would abort on. The state-copy
//! finding (F9) also asks what llama.cpp does with a copy it should refuse, so
//! [`Sampler::copy_unchecked`] hands any pair over; it may abort the process, so it runs only
//! inside a contained child.

#[cfg(llama_fn = "llama_sampler_copy")]
use crate::compat as sys;
use crate::sampler::Sampler;
#[cfg(llama_fn = "llama_sampler_copy")]
use anyhow::bail;
use anyhow::Result;
#[cfg(llama_fn = "llama_sampler_copy")]
use std::sync::Arc;

/// Whether the linked build has `llama_sampler_copy`, or what it lacks.
pub fn copy_offered() -> std::result::Result<(), crate::NotOffered> {
    if cfg!(llama_fn = "llama_sampler_copy") {
        Ok(())
    } else {
        Err(crate::NotOffered {
            what: "a sampler state copy (llama_sampler_copy)",
        })
    }
}

impl Sampler {
    /// `llama_sampler_copy(src, self)`, refused where llama.cpp would abort: a pair of
    /// different types, chains of different shapes (lengths, or member types at some
    /// position), or a copy that falls back to cloning a sampler that cannot be cloned.
    pub fn copy_from(&mut self, src: &Sampler) -> Result<()> {
        #[cfg(llama_fn = "llama_sampler_copy")]
        {
            if let Some(why) = copy_refusal(src.raw_ptr(), self.raw_ptr()) {
                bail!(
                    "cannot copy '{}' onto '{}': {why} (llama.cpp would abort)",
                    src.name(),
                    self.name()
                );
            }
        }
        // SAFETY: `copy_refusal` found nothing llama.cpp asserts on.
        unsafe { self.copy_raw(src) }
    }

    /// `llama_sampler_copy(src, self)` without the checks of [`Sampler::copy_from`]. **May
    /// abort the process**: run it in a contained child.
    pub fn copy_unchecked(&mut self, src: &Sampler) -> Result<()> {
        // SAFETY: none beyond both handles being live; an abort is the point of the call, and
        // it ends this (contained) process, not the caller's.
        unsafe { self.copy_raw(src) }
    }

    /// # Safety
    /// llama.cpp aborts the process on a pair it refuses.
    unsafe fn copy_raw(&mut self, src: &Sampler) -> Result<()> {
        #[cfg(llama_fn = "llama_sampler_copy")]
        {
            // SAFETY: both handles are live and distinct (`&mut self` and `&Sampler`).
            unsafe { ffi!(sys::llama_sampler_copy(src.raw_ptr(), self.raw_ptr())) };
            // A sampler without copy_state now holds a clone of src's state, which may point
            // into src's vocabularies: keep them alive as long as this handle.
            let extra: Vec<Arc<_>> = src.vocabs_held().to_vec();
            self.hold_vocabs(extra);
            Ok(())
        }
        #[cfg(not(llama_fn = "llama_sampler_copy"))]
        {
            let _ = src;
            copy_offered()?;
            unreachable!("copy_offered is Err on a build without llama_sampler_copy")
        }
    }
}

impl Sampler {
    /// Every stage with whether it has its own `copy_state` (a stage without one is copied
    /// as a clone): the sampler itself, or each member of a chain. Empty on a build without
    /// `llama_sampler_copy`.
    pub fn copy_paths(&self) -> Vec<(String, bool)> {
        #[cfg(llama_fn = "llama_sampler_copy")]
        {
            use crate::sampler::chain_iface;
            let raw = self.raw_ptr();
            // SAFETY: live handle; ifaces are static tables; chain calls on a chain only,
            // with in-range indices; names are copied at once.
            unsafe {
                let own = |s: *mut sys::llama_sampler| {
                    let name = ffi!(sys::llama_sampler_name(s));
                    let name = if name.is_null() {
                        String::new()
                    } else {
                        std::ffi::CStr::from_ptr(name)
                            .to_string_lossy()
                            .into_owned()
                    };
                    (name, (*(*s).iface).copy_state.is_some())
                };
                if !std::ptr::eq((*raw).iface, chain_iface()) {
                    return vec![own(raw)];
                }
                let n = ffi!(sys::llama_sampler_chain_n(raw));
                (0..n)
                    .map(|i| own(ffi!(sys::llama_sampler_chain_get(raw, i))))
                    .collect()
            }
        }
        #[cfg(not(llama_fn = "llama_sampler_copy"))]
        Vec::new()
    }
}

/// Why llama.cpp would abort on `llama_sampler_copy(src, dst)`, if it would.
#[cfg(llama_fn = "llama_sampler_copy")]
fn copy_refusal(src: *mut sys::llama_sampler, dst: *mut sys::llama_sampler) -> Option<String> {
    use crate::sampler::{chain_iface, clonable};
    // SAFETY: both are live; ifaces are static tables; chain calls are made on chains only,
    // with in-range indices.
    unsafe {
        if !std::ptr::eq((*src).iface, (*dst).iface) {
            return Some("they are different sampler types".to_string());
        }
        if std::ptr::eq((*src).iface, chain_iface()) {
            let (n, m) = (
                ffi!(sys::llama_sampler_chain_n(src)),
                ffi!(sys::llama_sampler_chain_n(dst)),
            );
            if n != m {
                return Some(format!("chains of {n} and {m} samplers"));
            }
            return (0..n).find_map(|i| {
                copy_refusal(
                    ffi!(sys::llama_sampler_chain_get(src, i)),
                    ffi!(sys::llama_sampler_chain_get(dst, i)),
                )
                .map(|why| format!("at chain position {i}, {why}"))
            });
        }
        if (*(*dst).iface).copy_state.is_none() && !clonable(src) {
            return Some("src has no copy_state and cannot be cloned".to_string());
        }
        None
    }
}
