//! Planted samplers, written in Rust and run through llama.cpp's custom-sampler interface, so
//! the clone detectors can be shown to fire and to stay quiet on code whose answer we know.
//! None of these is a subject; each exists only as a control.

use oracle::TokenId;
use std::any::Any;
use std::ffi::CStr;
use subject::{ArrayView, CustomSampler};

/// A stateful sampler: every accept of an id lowers that id's logit by 1/4 from then on.
/// With `complete_clone` its clone copies the counts (known-good); without, the clone starts
/// from zero counts (known-bad, the same shape as llama.cpp b10200's penalties clone).
///
/// With a [`TallyCopy`] it also has its own `copy_state` (`llama_sampler_copy`, b10405 on);
/// without, a copy onto it gets its clone, as for llama.cpp's samplers without one.
#[derive(Debug, Clone)]
pub struct Tally {
    counts: Vec<u32>,
    complete_clone: bool,
    copy: Option<TallyCopy>,
}

/// What a planted tally's `copy_state` does with the source's counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TallyCopy {
    /// Takes them in place of its own (known-good).
    Complete,
    /// Ignores them, keeping its own (known-bad: an incomplete copy).
    Nothing,
    /// Adds them to its own (known-bad: the destination's old state leaks into the copy;
    /// onto a fresh tally it is complete).
    Adds,
}

impl Tally {
    pub fn new(n_vocab: usize, complete_clone: bool) -> Tally {
        Tally {
            counts: vec![0; n_vocab],
            complete_clone,
            copy: None,
        }
    }

    /// A tally whose clone is complete and whose `copy_state` does `copy`.
    pub fn with_copy(n_vocab: usize, copy: TallyCopy) -> Tally {
        Tally {
            copy: Some(copy),
            ..Tally::new(n_vocab, true)
        }
    }
}

impl CustomSampler for Tally {
    fn name(&self) -> &'static CStr {
        match (self.copy, self.complete_clone) {
            (Some(TallyCopy::Complete), _) => c"planted-tally-complete-copy",
            (Some(TallyCopy::Nothing), _) => c"planted-tally-forgetful-copy",
            (Some(TallyCopy::Adds), _) => c"planted-tally-leaky-copy",
            (None, true) => c"planted-tally-complete-clone",
            (None, false) => c"planted-tally-forgetful-clone",
        }
    }

    fn apply(&mut self, view: &mut ArrayView<'_>) {
        for i in 0..view.len() {
            if let Some(&c) = self.counts.get(view.id(i).0 as usize) {
                view.set_logit(i, view.logit(i) - 0.25 * c as f32);
            }
        }
    }

    fn accept(&mut self, id: TokenId) {
        if let Some(c) = self.counts.get_mut(id.0 as usize) {
            *c += 1;
        }
    }

    fn reset(&mut self) {
        self.counts.fill(0);
    }

    fn clone_sampler(&self) -> Box<dyn CustomSampler> {
        if self.complete_clone {
            Box::new(self.clone())
        } else {
            Box::new(Tally::new(self.counts.len(), false))
        }
    }

    fn has_copy_state(&self) -> bool {
        self.copy.is_some()
    }

    fn copy_state(&mut self, src: &dyn Any) {
        let Some(mode) = self.copy else {
            return;
        };
        // Another Rust sampler with a copy_state shares this iface, so llama.cpp's type
        // assertion lets it through: taking nothing from it and returning is the planted copy
        // a caller's mistake passes unrefused.
        let Some(src) = src.downcast_ref::<Tally>() else {
            return;
        };
        // The planted refusal, worded as llama.cpp's assertions are: a tally of another size
        // is another configuration.
        if src.counts.len() != self.counts.len() {
            eprintln!(
                "planted.rs: GGML_ASSERT(src tally of {} ids == dst tally of {} ids) failed",
                src.counts.len(),
                self.counts.len()
            );
            std::process::abort();
        }
        match mode {
            TallyCopy::Complete => self.counts.clone_from(&src.counts),
            TallyCopy::Nothing => {}
            TallyCopy::Adds => {
                for (d, s) in self.counts.iter_mut().zip(&src.counts) {
                    *d += s;
                }
            }
        }
    }
}

/// A sampler whose `accept` reads the 4 bytes just past the end of a heap buffer: the positive control
/// for the memcheck probe. It is built only by the probe, which runs only under valgrind.
///
/// Only its duplicates read past the end: the sampler made by [`ReadsPastEnd::new`] accepts
/// cleanly, so the probe's error can only come from the clone (or the copy) it checks.
#[derive(Debug, Clone)]
pub struct ReadsPastEnd {
    buf: Vec<u32>,
    armed: bool,
}

impl ReadsPastEnd {
    pub fn new() -> ReadsPastEnd {
        ReadsPastEnd {
            buf: vec![7; 4],
            armed: false,
        }
    }
}

impl Default for ReadsPastEnd {
    fn default() -> Self {
        ReadsPastEnd::new()
    }
}

impl CustomSampler for ReadsPastEnd {
    fn name(&self) -> &'static CStr {
        c"planted-reads-past-end"
    }

    fn apply(&mut self, _view: &mut ArrayView<'_>) {}

    fn accept(&mut self, _id: TokenId) {
        if !self.armed {
            return;
        }
        // SAFETY: none; this is the planted out-of-bounds read the memcheck probe must report.
        // It runs only in a child process under valgrind (see `stateful::probe_main`).
        let x = unsafe { std::ptr::read_volatile(self.buf.as_ptr().add(self.buf.len())) };
        std::hint::black_box(x);
    }

    fn clone_sampler(&self) -> Box<dyn CustomSampler> {
        Box::new(ReadsPastEnd {
            armed: true,
            ..self.clone()
        })
    }
}
