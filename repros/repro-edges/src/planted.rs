//! Planted samplers, written by us, that the edge-input detector must classify: each is a
//! `top_k = 2` with one known defect (or none), run through the same child, the same C call
//! (`llama_sampler_apply` on a custom sampler) and the same judge as llama.cpp's samplers.

use anyhow::Result;
use std::ffi::CStr;
use subject::{ArrayView, CustomSampler, Sampler};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Planted {
    /// Calls `abort()` on an empty array: must be classed `aborts: SIGABRT`.
    AbortsOnEmpty,
    /// Writes `p = exp(logit) / sum exp(logit)` without subtracting the maximum: NaN on the
    /// `large` input; must be classed `returns NaN`.
    NanOnLarge,
    /// Keeps three entries: must be classed `disagrees` wherever three are kept.
    KeepsExtra,
    /// Spins forever on a single candidate: must be classed `times out`.
    HangsOnOne,
    /// A correct `top_k = 2`: must be classed `behaves` on every judged input.
    Exact,
}

impl Planted {
    pub const ALL: [Planted; 5] = [
        Planted::AbortsOnEmpty,
        Planted::NanOnLarge,
        Planted::KeepsExtra,
        Planted::HangsOnOne,
        Planted::Exact,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Planted::AbortsOnEmpty => "planted-aborts-on-empty",
            Planted::NanOnLarge => "planted-nan-on-large",
            Planted::KeepsExtra => "planted-keeps-extra",
            Planted::HangsOnOne => "planted-hangs-on-one",
            Planted::Exact => "planted-exact-top-k",
        }
    }

    pub fn what(self) -> &'static str {
        match self {
            Planted::AbortsOnEmpty => "top_k=2 that aborts on an empty array",
            Planted::NanOnLarge => "top_k=2 that writes an unshifted softmax into p",
            Planted::KeepsExtra => "top_k=2 that keeps three entries",
            Planted::HangsOnOne => "top_k=2 that never returns on one candidate",
            Planted::Exact => "a correct top_k=2",
        }
    }

    /// The input the detector must flag this control on (`None` for the known-good one).
    pub fn must_flag_on(self) -> Option<&'static str> {
        match self {
            Planted::AbortsOnEmpty => Some("empty"),
            Planted::NanOnLarge => Some("large"),
            Planted::KeepsExtra => Some("plain"),
            Planted::HangsOnOne => Some("one"),
            Planted::Exact => None,
        }
    }
}

/// Sorts descending by logit (stable, so equal logits keep their order) and keeps `keep`.
fn keep_top(view: &mut ArrayView<'_>, keep: usize) {
    view.sort_descending();
    view.set_sorted(true);
    view.truncate(keep.min(view.len()));
}

struct Probe(Planted);

impl CustomSampler for Probe {
    fn name(&self) -> &'static CStr {
        match self.0 {
            Planted::AbortsOnEmpty => c"planted-aborts-on-empty",
            Planted::NanOnLarge => c"planted-nan-on-large",
            Planted::KeepsExtra => c"planted-keeps-extra",
            Planted::HangsOnOne => c"planted-hangs-on-one",
            Planted::Exact => c"planted-exact-top-k",
        }
    }

    fn apply(&mut self, view: &mut ArrayView<'_>) {
        match self.0 {
            Planted::AbortsOnEmpty => {
                if view.is_empty() {
                    std::process::abort();
                }
                keep_top(view, 2);
            }
            Planted::NanOnLarge => {
                keep_top(view, 2);
                let sum: f32 = (0..view.len()).map(|i| view.logit(i).exp()).sum();
                for i in 0..view.len() {
                    let p = view.logit(i).exp() / sum;
                    view.set_p(i, p);
                }
            }
            Planted::KeepsExtra => keep_top(view, 3),
            Planted::HangsOnOne => {
                while view.len() == 1 {
                    std::hint::spin_loop();
                }
                keep_top(view, 2);
            }
            Planted::Exact => keep_top(view, 2),
        }
    }

    fn clone_sampler(&self) -> Box<dyn CustomSampler> {
        Box::new(Probe(self.0))
    }
}

pub fn build(p: Planted) -> Result<Sampler> {
    Sampler::custom(Probe(p))
}
