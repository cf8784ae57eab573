//! Planted samplers, written in Rust and run through llama.cpp's custom-sampler interface, so
//! the clone detectors can be shown to fire and to stay quiet on code whose answer we know.
//! None of these is a subject; each exists only as a control.

use oracle::TokenId;
use std::ffi::CStr;
use subject::{ArrayView, CustomSampler};

/// A stateful sampler: every accept of an id lowers that id's logit by 1/4 from then on.
/// With `complete_clone` its clone copies the counts (known-good); without, the clone starts
/// from zero counts (known-bad, the same shape as llama.cpp b10200's penalties clone).
#[derive(Debug, Clone)]
pub struct Tally {
    counts: Vec<u32>,
    complete_clone: bool,
}

impl Tally {
    pub fn new(n_vocab: usize, complete_clone: bool) -> Tally {
        Tally {
            counts: vec![0; n_vocab],
            complete_clone,
        }
    }
}

impl CustomSampler for Tally {
    fn name(&self) -> &'static CStr {
        if self.complete_clone {
            c"planted-tally-complete-clone"
        } else {
            c"planted-tally-forgetful-clone"
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
}

/// A sampler whose `accept` reads the 4 bytes just past the end of a heap buffer: the positive control
/// for the memcheck probe. It is built only by the probe, which runs only under valgrind.
#[derive(Debug, Clone)]
pub struct ReadsPastEnd {
    buf: Vec<u32>,
}

impl ReadsPastEnd {
    pub fn new() -> ReadsPastEnd {
        ReadsPastEnd { buf: vec![7; 4] }
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
        // SAFETY: none; this is the planted out-of-bounds read the memcheck probe must report.
        // It runs only in a child process under valgrind (see `stateful::probe_main`).
        let x = unsafe { std::ptr::read_volatile(self.buf.as_ptr().add(self.buf.len())) };
        std::hint::black_box(x);
    }

    fn clone_sampler(&self) -> Box<dyn CustomSampler> {
        Box::new(self.clone())
    }
}
