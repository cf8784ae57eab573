//! An owned llama.cpp sampler handle.

use crate::candidates::{id_ordered, lend, Candidates};
use crate::compat as sys;
use crate::logs::quiet_logs;
use crate::vocab::Vocab;
use anyhow::{bail, Context, Result};
use oracle::TokenId;
use std::ffi::CStr;
use std::ffi::CString;
use std::ptr::NonNull;
use std::sync::Arc;

/// Owns one `llama_sampler *` and frees it exactly once, on drop.
///
/// A sampler moved into a chain with [`Sampler::chain`] is owned by the chain from then on
/// (llama.cpp frees chain members with the chain), so its handle is consumed, not dropped.
#[derive(Debug)]
pub struct Sampler {
    raw: NonNull<sys::llama_sampler>,
    /// The smallest vocabulary any part of this sampler was built for, if any.
    n_vocab: Option<i32>,
    /// Vocabularies that stages of this sampler point into. Fields drop after `drop` runs,
    /// so they are freed only once the sampler is.
    vocabs: Vec<Arc<Vocab>>,
    /// Where a grammar stage sits: llama.cpp throws a C++ exception when a grammar accepts a
    /// token it rejects, so [`Sampler::accept`] asks the grammar first.
    grammar: GrammarAt,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GrammarAt {
    Nowhere,
    /// This sampler is a grammar.
    Here,
    /// A stage of this chain is a grammar.
    InChain,
}

// SAFETY: a `llama_sampler` is a heap object with no tie to the thread that made it; it may
// move to another thread as long as one thread uses it at a time, which `&mut self` on every
// state-changing call enforces (the type is deliberately not Sync). Custom stages are `Send`
// by their trait bound; the vocabularies grammar and infill stages point into are `Sync`.
unsafe impl Send for Sampler {}

impl Drop for Sampler {
    fn drop(&mut self) {
        // SAFETY: `raw` is owned by this handle alone and has not been freed: handles are
        // created only from fresh init/clone results and consumed (not dropped) by `chain`.
        unsafe { ffi!(sys::llama_sampler_free(self.raw.as_ptr())) }
    }
}

impl Sampler {
    /// Takes ownership of a pointer llama.cpp just returned.
    ///
    /// # Safety
    /// `raw` must be NULL or a live sampler that no one else owns or will free.
    pub(crate) unsafe fn from_raw(
        raw: *mut sys::llama_sampler,
        n_vocab: Option<i32>,
    ) -> Result<Sampler> {
        quiet_logs();
        let raw = NonNull::new(raw).context("llama.cpp returned a null sampler")?;
        Ok(Sampler {
            raw,
            n_vocab,
            vocabs: Vec::new(),
            grammar: GrammarAt::Nowhere,
        })
    }

    /// Gives up ownership: the caller (for example `llama_sampler_chain_add`, which frees
    /// what it is given) must free the pointer exactly once.
    pub fn into_raw(self) -> *mut sys::llama_sampler {
        let raw = self.raw.as_ptr();
        // Vocabularies this sampler points into would be released with the handle; a caller
        // taking the raw pointer must keep them alive, so grammar samplers are leaked here
        // rather than dangle. Ledger and built-in samplers hold none.
        std::mem::forget(self);
        raw
    }

    /// `llama_sampler_init_grammar`: masks every candidate the GBNF `grammar` (starting at
    /// rule `root`) cannot take next.
    pub fn grammar(vocab: &Arc<Vocab>, grammar: &str, root: &str) -> Result<Sampler> {
        let g = CString::new(grammar).context("grammar contains a NUL byte")?;
        let r = CString::new(root).context("grammar root contains a NUL byte")?;
        // SAFETY: live vocab and NUL-terminated strings; llama.cpp catches its own parse
        // exceptions and returns NULL for a grammar it rejects.
        let raw = unsafe {
            ffi!(sys::llama_sampler_init_grammar(
                vocab.raw(),
                g.as_ptr(),
                r.as_ptr()
            ))
        };
        // SAFETY: fresh result of an init function.
        let mut s = unsafe { Sampler::pointing_into(raw, vocab) }
            .context("llama.cpp rejected the grammar")?;
        s.grammar = GrammarAt::Here;
        Ok(s)
    }

    /// `llama_sampler_init_infill`: merges candidates that are prefixes of one another.
    pub fn infill(vocab: &Arc<Vocab>) -> Result<Sampler> {
        // SAFETY: live vocab; plain constructor.
        let raw = unsafe { ffi!(sys::llama_sampler_init_infill(vocab.raw())) };
        // SAFETY: fresh result of an init function.
        unsafe { Sampler::pointing_into(raw, vocab) }
    }

    /// [`Sampler::from_raw`] for a sampler that points into `vocab`, which it keeps alive.
    ///
    /// # Safety
    /// As for `from_raw`.
    unsafe fn pointing_into(raw: *mut sys::llama_sampler, vocab: &Arc<Vocab>) -> Result<Sampler> {
        // SAFETY: the caller's promise is `from_raw`'s.
        let mut s = unsafe { Sampler::from_raw(raw, Some(vocab.n_tokens())) }?;
        s.vocabs.push(Arc::clone(vocab));
        Ok(s)
    }

    /// A `llama_sampler_chain` that owns `stages` and runs them in order.
    pub fn chain(stages: Vec<Sampler>) -> Result<Sampler> {
        // SAFETY: plain constructor; the params struct is passed by value.
        let mut chain = unsafe {
            let mut params = ffi!(sys::llama_sampler_chain_default_params());
            params.no_perf = true;
            Sampler::from_raw(ffi!(sys::llama_sampler_chain_init(params)), None)?
        };
        for mut stage in stages {
            chain.n_vocab = [chain.n_vocab, stage.n_vocab].into_iter().flatten().min();
            // Taken, not appended: `stage` is forgotten below and must hold no allocation.
            chain.vocabs.extend(std::mem::take(&mut stage.vocabs));
            if stage.grammar != GrammarAt::Nowhere {
                chain.grammar = GrammarAt::InChain;
            }
            let raw = stage.raw.as_ptr();
            // The chain frees it from now on; this handle must not.
            std::mem::forget(stage);
            // SAFETY: both pointers are live; chain_add takes ownership of `raw`.
            unsafe { ffi!(sys::llama_sampler_chain_add(chain.raw.as_ptr(), raw)) };
        }
        Ok(chain)
    }

    /// The sampler's own name (`penalties`, `?penalties` for the empty stand-in, `chain`, ...).
    pub fn name(&self) -> String {
        // SAFETY: the name is a static or owned-by-the-sampler C string, copied at once.
        unsafe {
            let p = ffi!(sys::llama_sampler_name(self.raw.as_ptr()));
            if p.is_null() {
                return String::new();
            }
            CStr::from_ptr(p).to_string_lossy().into_owned()
        }
    }

    /// Feeds one chosen token to the sampler's state.
    pub fn accept(&mut self, id: TokenId) -> Result<()> {
        if id.0 < 0 {
            bail!("cannot accept negative token id {id}");
        }
        if let Some(n) = self.n_vocab {
            if id.0 >= n {
                bail!("cannot accept token id {id}: the sampler's vocabulary has {n} ids");
            }
        }
        if !self.grammar_allows(id)? {
            bail!("the grammar rejects token {id}; llama.cpp would throw on accepting it");
        }
        // SAFETY: live handle, plain value; a grammar inside allows `id` (checked above).
        unsafe { ffi!(sys::llama_sampler_accept(self.raw.as_ptr(), id.0)) };
        Ok(())
    }

    /// Whether this sampler's grammar, if it has one, can take `id` next. A bare grammar is
    /// asked directly (its apply changes no state); a chain is asked through a clone, so its
    /// other stages' state is untouched.
    fn grammar_allows(&mut self, id: TokenId) -> Result<bool> {
        let mut probe = match self.grammar {
            GrammarAt::Nowhere => return Ok(true),
            GrammarAt::Here => None,
            GrammarAt::InChain => Some(self.try_clone().context(
                "a chain with a grammar must be clonable to check a token before accepting it",
            )?),
        };
        let mut one = Candidates::new([(id, 0.0f32)]);
        probe.as_mut().unwrap_or(self).apply(&mut one)?;
        Ok(one
            .entries
            .first()
            .is_some_and(|c| c.logit > f32::NEG_INFINITY))
    }

    /// Runs the sampler on the candidates, in place.
    pub fn apply(&mut self, candidates: &mut Candidates) -> Result<()> {
        candidates.validate(self.n_vocab)?;
        let raw = self.raw.as_ptr();
        // SAFETY: `with_raw` hands C a header over a buffer that lives for the whole call.
        candidates.with_raw(|arr| unsafe { ffi!(sys::llama_sampler_apply(raw, arr)) })
    }

    /// Applies a stage that keeps the array's order and length (penalties, logit_bias, temp,
    /// a chain of those) to `logits` laid out as ids `0..n`, and returns the logits it left.
    ///
    /// The fast path for large vocabularies: ids are `0..n` by construction, so the per-call
    /// duplicate check of [`Sampler::apply`] is not needed; the logits are still checked.
    pub fn apply_in_id_order(&mut self, logits: &[f32]) -> Result<Vec<f32>> {
        let mut data: Vec<sys::llama_token_data> = id_ordered(logits, self.n_vocab)?.collect();
        let len = data.len();
        // SAFETY: `lend` hands C a header over `data`, which lives for the whole call.
        let left = lend(&mut data, -1, false, |arr| unsafe { self.apply_raw(arr) });
        let in_place = left.is_some_and(|l| l.offset == 0 && l.size == len)
            && data.iter().enumerate().all(|(i, d)| d.id == i as i32);
        if !in_place {
            bail!("sampler '{}' reordered or resized the array", self.name());
        }
        Ok(data.into_iter().map(|d| d.logit).collect())
    }

    /// Calls `llama_sampler_apply` on a header the caller built.
    ///
    /// # Safety
    /// `arr` must describe a live, validated buffer of `size` entries.
    pub(crate) unsafe fn apply_raw(&mut self, arr: *mut sys::llama_token_data_array) {
        // SAFETY: our handle is live; the caller vouches for `arr`.
        unsafe { ffi!(sys::llama_sampler_apply(self.raw.as_ptr(), arr)) }
    }

    /// Clears the sampler's state.
    pub fn reset(&mut self) {
        // SAFETY: live handle.
        unsafe { ffi!(sys::llama_sampler_reset(self.raw.as_ptr())) }
    }

    /// `llama_sampler_clone`, refused up front where llama.cpp would abort (a sampler with
    /// state but no clone function, anywhere inside a chain).
    pub fn try_clone(&self) -> Result<Sampler> {
        if !clonable(self.raw.as_ptr()) {
            bail!(
                "sampler '{}' cannot be cloned (llama.cpp would abort)",
                self.name()
            );
        }
        // SAFETY: live handle; the result is a fresh sampler owned by the new handle.
        let mut c = unsafe {
            Sampler::from_raw(
                ffi!(sys::llama_sampler_clone(self.raw.as_ptr())),
                self.n_vocab,
            )
        }?;
        c.vocabs = self.vocabs.clone();
        c.grammar = self.grammar;
        Ok(c)
    }

    /// The vocabulary bound enforced on ids, if any part of the sampler has one.
    pub fn n_vocab(&self) -> Option<i32> {
        self.n_vocab
    }

    /// Whether this is a `llama_sampler_chain`.
    pub fn is_chain(&self) -> bool {
        // SAFETY: live handle; its iface is a static table.
        std::ptr::eq(unsafe { (*self.raw.as_ptr()).iface }, chain_iface())
    }

    /// Whether this sampler has an in-graph implementation (`backend_init` in its iface; a
    /// chain: every member). Without one it always runs on the CPU.
    pub fn has_graph_implementation(&self) -> bool {
        #[cfg(llama_fn = "llama_get_sampled_token_ith")]
        {
            let raw = self.raw.as_ptr();
            // SAFETY: live handle; ifaces are static tables; chain calls on a chain only, with
            // in-range indices.
            unsafe {
                let has = |s: *mut sys::llama_sampler| (*(*s).iface).backend_init.is_some();
                if !self.is_chain() {
                    return has(raw);
                }
                let n = ffi!(sys::llama_sampler_chain_n(raw));
                (0..n).all(|i| has(ffi!(sys::llama_sampler_chain_get(raw, i))))
            }
        }
        #[cfg(not(llama_fn = "llama_get_sampled_token_ith"))]
        false
    }

    /// Each member's name as llama.cpp reports it now (the sampler's own name if it is no
    /// chain).
    pub fn member_names(&self) -> Vec<String> {
        let raw = self.raw.as_ptr();
        // SAFETY: live handle; chain calls on a chain only, with in-range indices; names are
        // static or owned by their sampler, copied at once.
        unsafe {
            let name = |s: *mut sys::llama_sampler| {
                let p = ffi!(sys::llama_sampler_name(s));
                if p.is_null() {
                    String::new()
                } else {
                    CStr::from_ptr(p).to_string_lossy().into_owned()
                }
            };
            if !self.is_chain() {
                return vec![name(raw)];
            }
            let n = ffi!(sys::llama_sampler_chain_n(raw));
            (0..n)
                .map(|i| name(ffi!(sys::llama_sampler_chain_get(raw, i))))
                .collect()
        }
    }

    /// The live handle, for calls that take the sampler itself (it stays owned here).
    pub(crate) fn raw_ptr(&self) -> *mut sys::llama_sampler {
        self.raw.as_ptr()
    }

    /// The vocabularies this sampler's stages point into (read by the state copy, on builds
    /// that have one).
    #[cfg_attr(not(llama_fn = "llama_sampler_copy"), allow(dead_code))]
    pub(crate) fn vocabs_held(&self) -> &[Arc<Vocab>] {
        &self.vocabs
    }

    /// Keeps `more` alive as long as this sampler (a copy may now point into them); each
    /// vocabulary is held once, however often it is copied in.
    #[cfg_attr(not(llama_fn = "llama_sampler_copy"), allow(dead_code))]
    pub(crate) fn hold_vocabs(&mut self, more: Vec<Arc<Vocab>>) {
        for v in more {
            if !self.vocabs.iter().any(|h| Arc::ptr_eq(h, &v)) {
                self.vocabs.push(v);
            }
        }
    }
}

pub(crate) fn clonable(raw: *mut sys::llama_sampler) -> bool {
    // SAFETY: `raw` is live; iface is a static table; chain_n and chain_get are only called on
    // a chain (its iface is the chain table) with in-range indices.
    unsafe {
        let iface = &*(*raw).iface;
        if iface.clone.is_none() && !(*raw).ctx.is_null() {
            return false;
        }
        if std::ptr::eq((*raw).iface, chain_iface()) {
            let n = ffi!(sys::llama_sampler_chain_n(raw));
            return (0..n).all(|i| clonable(ffi!(sys::llama_sampler_chain_get(raw, i))));
        }
        true
    }
}

/// The interface table every chain shares. Asked of a chain made for the purpose, because
/// before b10200 `llama_sampler_chain_get` reads any sampler's context as a chain's, so it
/// cannot tell a chain apart.
pub(crate) fn chain_iface() -> *const sys::llama_sampler_i {
    static IFACE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *IFACE.get_or_init(|| {
        // SAFETY: a fresh chain, read once and freed; the table it points to is static.
        unsafe {
            let chain = ffi!(sys::llama_sampler_chain_init(ffi!(
                sys::llama_sampler_chain_default_params()
            )));
            let iface = (*chain).iface as usize;
            ffi!(sys::llama_sampler_free(chain));
            iface
        }
    }) as *const sys::llama_sampler_i
}
