//! Planted implementations, written in Rust, that F2's detectors must flag or pass. None of
//! them is a subject; each runs through the same code path as llama.cpp's samplers (the
//! permutation audit, the chain comparison, the census, the oracle gate) so a detector that
//! cannot fire, or fires on sound code, shows up as a failed control.

use oracle::stage::Stage;
use oracle::truncation::{self, Pool, Step};
use oracle::TokenId;
use std::ffi::CStr;
use subject::{ArrayView, CustomSampler};

/// What a shadow truncator keeps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ShadowRule {
    /// The `k` largest logits.
    TopK { k: usize },
    /// The shortest top prefix whose probability mass reaches `p`.
    TopP { p: f32 },
}

/// top_k or top_p written from scratch. With `trusts_flag` it skips sorting when the array
/// says it is sorted and takes the first entry as the maximum, as llama.cpp's truncators do
/// (known-bad on a stale flag); without it, it always sorts first (known-good).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShadowTruncator {
    pub rule: ShadowRule,
    pub trusts_flag: bool,
}

impl CustomSampler for ShadowTruncator {
    fn name(&self) -> &'static CStr {
        match (self.rule, self.trusts_flag) {
            (ShadowRule::TopK { .. }, true) => c"shadow-top-k-trusting",
            (ShadowRule::TopK { .. }, false) => c"shadow-top-k-honest",
            (ShadowRule::TopP { .. }, true) => c"shadow-top-p-trusting",
            (ShadowRule::TopP { .. }, false) => c"shadow-top-p-honest",
        }
    }

    fn apply(&mut self, view: &mut ArrayView<'_>) {
        if view.is_empty() {
            return;
        }
        if !(self.trusts_flag && view.sorted()) {
            view.sort_descending();
            view.set_sorted(true);
        }
        let keep = match self.rule {
            ShadowRule::TopK { k } => k.max(1),
            ShadowRule::TopP { p } => {
                // Softmax relative to the first entry, which is the maximum only if the array
                // really is sorted.
                let max = view.logit(0) as f64;
                let w: Vec<f64> = (0..view.len())
                    .map(|i| (view.logit(i) as f64 - max).exp())
                    .collect();
                let sum: f64 = w.iter().sum();
                let mut cum = 0.0;
                let mut keep = view.len();
                for (i, x) in w.iter().enumerate() {
                    cum += x / sum;
                    if cum >= p as f64 {
                        keep = i + 1;
                        break;
                    }
                }
                keep
            }
        };
        view.truncate(keep);
    }

    fn clone_sampler(&self) -> Box<dyn CustomSampler> {
        Box::new(*self)
    }
}

/// logit_bias written from scratch: adds `bias` to `id` and leaves the `sorted` flag as it
/// found it (as llama.cpp's logit_bias does). The planted chain controls use it so that they
/// rest on no llama.cpp stage at all.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShadowBias {
    pub id: TokenId,
    pub bias: f32,
}

impl CustomSampler for ShadowBias {
    fn name(&self) -> &'static CStr {
        c"shadow-logit-bias"
    }

    fn apply(&mut self, view: &mut ArrayView<'_>) {
        for i in 0..view.len() {
            if view.id(i) == self.id {
                view.set_logit(i, view.logit(i) + self.bias);
            }
        }
    }

    fn clone_sampler(&self) -> Box<dyn CustomSampler> {
        Box::new(*self)
    }
}

/// Moves the last entry's logit above the first one's: an injector. With `clears_flag` it
/// then clears `sorted` (known-good); without, it leaves the flag as it found it (known-bad).
/// `Identity` changes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Injector {
    KeepsFlag,
    ClearsFlag,
    Identity,
    /// Aborts the process on its first apply: the census runs each row in a child, so this
    /// one must be recorded as a contained crash while every other row still completes.
    Aborts,
}

impl CustomSampler for Injector {
    fn name(&self) -> &'static CStr {
        match self {
            Injector::KeepsFlag => c"planted-injector-keeps-flag",
            Injector::ClearsFlag => c"planted-injector-clears-flag",
            Injector::Identity => c"planted-identity",
            Injector::Aborts => c"planted-injector-aborts",
        }
    }

    fn apply(&mut self, view: &mut ArrayView<'_>) {
        if *self == Injector::Aborts {
            std::process::abort();
        }
        if *self == Injector::Identity || view.len() < 2 {
            return;
        }
        let last = view.len() - 1;
        view.set_logit(last, view.logit(0) + 1.0);
        if *self == Injector::ClearsFlag {
            view.set_sorted(false);
        }
    }

    fn clone_sampler(&self) -> Box<dyn CustomSampler> {
        Box::new(*self)
    }
}

/// The oracle with one arithmetic error planted in a copy of its `temp` stage: it multiplies
/// by the rounded reciprocal of the temperature instead of dividing, which is off by one f32
/// rounding on some logits and changes no survivor set. The oracle gate must catch it.
pub fn oracle_with_reciprocal_temp(stage: &Stage, pool: &Pool, history: &[TokenId]) -> Step {
    match stage {
        Stage::Temp { t } if *t > 0.0 => {
            let r = 1.0 / *t;
            Step {
                pool: Pool::new(pool.entries().iter().map(|e| truncation::Entry {
                    id: e.id,
                    logit: e.logit * r,
                })),
                edge: None,
                selected: None,
            }
        }
        other => truncation::apply(other, pool, history),
    }
}
