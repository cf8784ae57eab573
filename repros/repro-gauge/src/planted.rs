//! A planted sampler written in Rust for the flip detector's controls: the subtractive penalty
//! (`z - ln theta` on every id accepted so far), which depends only on differences of logits.
//! It runs through a real llama.cpp chain, handed `z + c` in f32, exactly as the subject is,
//! so its 0 flips on the planted case are measured, not constructed. It is no subject: the
//! repro never judges it, it only checks the detector with it.

use oracle::TokenId;
use std::ffi::CStr;
use subject::{ArrayView, CustomSampler};

#[derive(Debug, Clone)]
pub struct Subtractive {
    /// `ln theta` in f32.
    cut: f32,
    seen: Vec<bool>,
}

impl Subtractive {
    pub fn new(n_vocab: usize, theta: f32) -> Subtractive {
        Subtractive {
            cut: theta.ln(),
            seen: vec![false; n_vocab],
        }
    }
}

impl CustomSampler for Subtractive {
    fn name(&self) -> &'static CStr {
        c"planted-subtractive"
    }

    fn apply(&mut self, view: &mut ArrayView<'_>) {
        for i in 0..view.len() {
            if self.seen.get(view.id(i).0 as usize) == Some(&true) {
                view.set_logit(i, view.logit(i) - self.cut);
            }
        }
    }

    fn accept(&mut self, id: TokenId) {
        if let Some(s) = self.seen.get_mut(id.0 as usize) {
            *s = true;
        }
    }

    fn reset(&mut self) {
        self.seen.fill(false);
    }

    fn clone_sampler(&self) -> Box<dyn CustomSampler> {
        Box::new(self.clone())
    }
}
