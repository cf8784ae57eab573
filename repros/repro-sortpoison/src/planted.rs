//! Planted implementations, written in Rust, that F2's detectors must flag or pass. None of
//! them is a subject; each runs through the same code path as llama.cpp's samplers (the
//! permutation audit, the chain comparison, the census, the oracle gate) so a detector that
//! cannot fire, or fires on sound code, shows up as a failed control.

use oracle::stage::Stage;
use oracle::truncation::{self, Pool, Step};
use oracle::TokenId;
use std::ffi::CStr;
use subject::{ArrayView, CustomSampler};

/// What a planted truncator keeps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PlantedRule {
    /// The `k` largest logits.
    TopK { k: usize },
    /// The shortest top prefix whose probability mass reaches `p`.
    TopP { p: f32 },
}

/// top_k or top_p written from scratch. With `trusts_flag` it skips sorting when the array
/// says it is sorted and takes the first entry as the maximum, as llama.cpp's truncators do
/// (known-bad on a stale flag); without it, it always sorts first (known-good).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlantedTruncator {
    pub rule: PlantedRule,
    pub trusts_flag: bool,
}

impl CustomSampler for PlantedTruncator {
    fn name(&self) -> &'static CStr {
        match (self.rule, self.trusts_flag) {
            (PlantedRule::TopK { .. }, true) => c"shadow-top-k-trusting",
            (PlantedRule::TopK { .. }, false) => c"shadow-top-k-honest",
            (PlantedRule::TopP { .. }, true) => c"shadow-top-p-trusting",
            (PlantedRule::TopP { .. }, false) => c"shadow-top-p-honest",
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
            PlantedRule::TopK { k } => k.max(1),
            PlantedRule::TopP { p } => {
                // Softmax relative to the first entry, which is the maximum only if the array
                // really is sorted.
                let max = view.logit(0) as f64;
                let w: Vec<f64> = (0..view.len())
                    .map(|i| (view.logit(i) as f64 - max).exp())
                    .collect();
                let sum: f64 = w.iter().sum();
                let mut cum = 0.0;
                let reached = w.iter().position(|x| {
                    cum += x / sum;
                    cum >= p as f64
                });
                reached.map_or(view.len(), |i| i + 1)
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
pub struct PlantedBias {
    pub id: TokenId,
    pub bias: f32,
}

impl CustomSampler for PlantedBias {
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

/// What a planted dist does wrong, if anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DistRule {
    /// llama.cpp's arithmetic with an honest maximum (found by scanning): `expf` in f32 on
    /// an f32 difference, the sum in f64, each weight divided by it and rounded to f32. Its
    /// `p` passes the p check only if the tolerance covers that arithmetic (known-good).
    Exact,
    /// llama.cpp's arithmetic: `data[0]` taken as the maximum when the array says it is
    /// sorted, `expf` in f32. On a stale flag a logit far above `data[0]` overflows to `inf`,
    /// and the first such entry takes every draw (known-bad).
    TrustsFlag,
    /// Draws against the weights `exp(l - max)` without dividing by their sum, so the first
    /// entries take more than their share (known-bad).
    Unnormalized,
    /// Draws as `Exact`, but writes `p` renormalized over all entries but the last, so every
    /// other `p` is too large by the last's share: a small real error in `p` (known-bad).
    DropsLastFromSum,
}

impl DistRule {
    pub const ALL: [DistRule; 4] = [
        DistRule::Exact,
        DistRule::TrustsFlag,
        DistRule::Unnormalized,
        DistRule::DropsLastFromSum,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DistRule::Exact => "exact",
            DistRule::TrustsFlag => "trusting",
            DistRule::Unnormalized => "unnormalized",
            DistRule::DropsLastFromSum => "drops-last",
        }
    }
}

/// A planted dist: its seed and its rule. [`PlantedDist::sampler`] is the running sampler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlantedDist {
    pub seed: u32,
    pub rule: DistRule,
}

impl PlantedDist {
    /// A fresh sampler, its generator seeded by `seed`.
    pub fn sampler(self) -> DistSampler {
        DistSampler {
            spec: self,
            rng: oracle::rng::Rng::new(self.seed as u64),
        }
    }
}

/// A running planted dist: one uniform draw per apply, from the suite's SplitMix64.
#[derive(Debug, Clone)]
pub struct DistSampler {
    spec: PlantedDist,
    rng: oracle::rng::Rng,
}

impl DistSampler {
    /// Uniform in [0, 1) with 53 random bits.
    fn uniform(&mut self) -> f64 {
        (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

impl CustomSampler for DistSampler {
    fn name(&self) -> &'static CStr {
        match self.spec.rule {
            DistRule::Exact => c"shadow-dist-exact",
            DistRule::TrustsFlag => c"shadow-dist-trusting",
            DistRule::Unnormalized => c"shadow-dist-unnormalized",
            DistRule::DropsLastFromSum => c"shadow-dist-drops-last",
        }
    }

    fn apply(&mut self, view: &mut ArrayView<'_>) {
        if view.is_empty() {
            return;
        }
        let (n, rule) = (view.len(), self.spec.rule);
        let trusts = rule == DistRule::TrustsFlag;
        let scan = (0..n)
            .map(|i| view.logit(i))
            .fold(f32::NEG_INFINITY, f32::max);
        let max = if trusts && view.sorted() {
            view.logit(0)
        } else {
            scan
        };
        let weights: Vec<f64> = (0..n).map(|i| (view.logit(i) - max).exp() as f64).collect();
        let sum: f64 = weights.iter().sum();
        let total = if rule == DistRule::Unnormalized {
            1.0
        } else {
            sum
        };
        let target = self.uniform() * total;
        let mut run = 0.0;
        // llama.cpp stops at `>=`; the exact rule stops past the target, so an entry of
        // weight 0 is never drawn.
        let reached = weights.iter().position(|w| {
            run += w;
            (trusts && run >= target) || (!trusts && run > target)
        });
        let selected = reached.unwrap_or(n - 1);
        let written = if rule == DistRule::DropsLastFromSum {
            sum - weights[n - 1]
        } else {
            total
        };
        for (i, w) in weights.iter().enumerate() {
            view.set_p(i, (w / written) as f32);
        }
        view.set_selected(selected);
    }

    fn clone_sampler(&self) -> Box<dyn CustomSampler> {
        Box::new(self.clone())
    }
}
