//! Planted samplers written in Rust for the detector's controls, each a gauge-free penalty
//! that depends only on differences of logits:
//! - [`Subtractive`]: `z - ln theta` on every id accepted so far (the subject's rule must read
//!   it absent in the sign slot);
//! - [`Normalized`]: the sign branch on log-softmax values, written plainly in f64 (the fix's
//!   rule must read it absent in the normalized slot, where `ledger-penalties` normalized,
//!   the fix under test, otherwise sits).
//!
//! They run through a real llama.cpp chain, handed `z + c` in f32, exactly as the subject is,
//! so their 0 flips on the planted case are measured, not constructed. They are no subjects:
//! the repro never judges them, it only checks the detector with them.

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

/// The normalized penalty as its definition reads, independent of `ledger-penalties`' fast
/// pass: per call, the log-sum-exp of the whole array in f64 (the maximum, then the sum of
/// `exp(z - max)` with the standard library's `exp`), each seen id's log-probability
/// `lp = z - lse` taken through the sign branch (`lp > 0 ? lp / theta : lp * theta`, always
/// the multiply, since `lp <= 0`), and written back on the array's scale as `lse + lp'`,
/// rounded once to f32. Unseen ids are left as they came.
#[derive(Debug, Clone)]
pub struct Normalized {
    theta: f64,
    seen: Vec<bool>,
}

impl Normalized {
    pub fn new(n_vocab: usize, theta: f32) -> Normalized {
        Normalized {
            theta: theta as f64,
            seen: vec![false; n_vocab],
        }
    }
}

impl CustomSampler for Normalized {
    fn name(&self) -> &'static CStr {
        c"planted-normalized"
    }

    fn apply(&mut self, view: &mut ArrayView<'_>) {
        let z: Vec<f64> = (0..view.len()).map(|i| view.logit(i) as f64).collect();
        let max = z.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if !max.is_finite() {
            return;
        }
        let lse = max + z.iter().map(|v| (v - max).exp()).sum::<f64>().ln();
        let mut changed = false;
        for (i, &zi) in z.iter().enumerate() {
            if self.seen.get(view.id(i).0 as usize) != Some(&true) {
                continue;
            }
            let lp = zi - lse;
            let penalized = if lp > 0.0 {
                lp / self.theta
            } else {
                lp * self.theta
            };
            view.set_logit(i, (lse + penalized) as f32);
            changed = true;
        }
        if changed {
            view.set_sorted(false);
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
