//! Planted samplers, written by us, that the edge-input detector must classify: each imitates
//! `top_k = 2`, greedy or a draw, with one known defect (or none), and runs through the same
//! child, the same C call (`llama_sampler_apply` on a custom sampler) and the same judge as
//! llama.cpp's samplers.

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
    /// A `top_k = 2` that leaves `selected` one past the end: must be classed
    /// `selects outside` on the plain input.
    SelectsOutside,
    /// A draw that picks a masked (`-inf`) entry when there is one: must be classed
    /// `disagrees` on the input with `-inf` entries.
    DrawsMasked,
    /// A greedy that picks the last entry: must be classed `disagrees` on the plain input.
    GreedyLast,
    /// A correct `top_k = 2`: its row must be `absent`.
    Exact,
    /// A correct draw (the first entry of highest logit): its row must be `absent`.
    ExactDraw,
    /// A correct greedy (the first entry of highest logit): its row must be `absent`.
    ExactGreedy,
}

/// What a planted sampler imitates, and so how the judge reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Imitates {
    TopK2,
    Draw,
    Greedy,
}

impl Planted {
    pub const ALL: [Planted; 10] = [
        Planted::AbortsOnEmpty,
        Planted::NanOnLarge,
        Planted::KeepsExtra,
        Planted::HangsOnOne,
        Planted::SelectsOutside,
        Planted::DrawsMasked,
        Planted::GreedyLast,
        Planted::Exact,
        Planted::ExactDraw,
        Planted::ExactGreedy,
    ];

    pub fn imitates(self) -> Imitates {
        match self {
            Planted::DrawsMasked | Planted::ExactDraw => Imitates::Draw,
            Planted::GreedyLast | Planted::ExactGreedy => Imitates::Greedy,
            _ => Imitates::TopK2,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Planted::AbortsOnEmpty => "planted-aborts-on-empty",
            Planted::NanOnLarge => "planted-nan-on-large",
            Planted::KeepsExtra => "planted-keeps-extra",
            Planted::HangsOnOne => "planted-hangs-on-one",
            Planted::SelectsOutside => "planted-selects-outside",
            Planted::DrawsMasked => "planted-draws-masked",
            Planted::GreedyLast => "planted-greedy-last",
            Planted::Exact => "planted-exact-top-k",
            Planted::ExactDraw => "planted-exact-draw",
            Planted::ExactGreedy => "planted-exact-greedy",
        }
    }

    pub fn what(self) -> &'static str {
        match self {
            Planted::AbortsOnEmpty => "top_k=2 that aborts on an empty array",
            Planted::NanOnLarge => "top_k=2 that writes an unshifted softmax into p",
            Planted::KeepsExtra => "top_k=2 that keeps three entries",
            Planted::HangsOnOne => "top_k=2 that never returns on one candidate",
            Planted::SelectsOutside => "top_k=2 that sets selected one past the end",
            Planted::DrawsMasked => "a draw that picks a -inf entry when there is one",
            Planted::GreedyLast => "a greedy that picks the last entry",
            Planted::Exact => "a correct top_k=2",
            Planted::ExactDraw => "a correct draw (the first entry of highest logit)",
            Planted::ExactGreedy => "a correct greedy",
        }
    }

    /// The input the detector must flag this control on (`None` for the known-good one).
    pub fn must_flag_on(self) -> Option<&'static str> {
        match self {
            Planted::AbortsOnEmpty => Some("empty"),
            Planted::NanOnLarge => Some("large"),
            Planted::KeepsExtra => Some("plain"),
            Planted::HangsOnOne => Some("one"),
            Planted::SelectsOutside => Some("plain"),
            Planted::DrawsMasked => Some("some-neg-inf"),
            Planted::GreedyLast => Some("plain"),
            Planted::Exact | Planted::ExactDraw | Planted::ExactGreedy => None,
        }
    }
}

/// Sorts descending by logit (stable, so equal logits keep their order) and keeps `keep`.
fn keep_top(view: &mut ArrayView<'_>, keep: usize) {
    view.sort_descending();
    view.set_sorted(true);
    view.truncate(keep.min(view.len()));
}

/// The first entry of highest logit, if any.
fn first_max(view: &ArrayView<'_>) -> Option<usize> {
    (0..view.len()).reduce(|best, i| {
        if view.logit(i) > view.logit(best) {
            i
        } else {
            best
        }
    })
}

struct Probe(Planted);

impl CustomSampler for Probe {
    fn name(&self) -> &'static CStr {
        match self.0 {
            Planted::AbortsOnEmpty => c"planted-aborts-on-empty",
            Planted::NanOnLarge => c"planted-nan-on-large",
            Planted::KeepsExtra => c"planted-keeps-extra",
            Planted::HangsOnOne => c"planted-hangs-on-one",
            Planted::SelectsOutside => c"planted-selects-outside",
            Planted::DrawsMasked => c"planted-draws-masked",
            Planted::GreedyLast => c"planted-greedy-last",
            Planted::Exact => c"planted-exact-top-k",
            Planted::ExactDraw => c"planted-exact-draw",
            Planted::ExactGreedy => c"planted-exact-greedy",
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
            Planted::SelectsOutside => {
                keep_top(view, 2);
                let past = view.len();
                view.set_selected(past);
            }
            Planted::DrawsMasked => {
                let masked = (0..view.len()).find(|&i| view.logit(i) == f32::NEG_INFINITY);
                if let Some(i) = masked.or_else(|| first_max(view)) {
                    view.set_selected(i);
                }
            }
            Planted::GreedyLast => {
                if !view.is_empty() {
                    let last = view.len() - 1;
                    view.set_selected(last);
                }
            }
            Planted::Exact => keep_top(view, 2),
            Planted::ExactDraw | Planted::ExactGreedy => {
                if let Some(i) = first_max(view) {
                    view.set_selected(i);
                }
            }
        }
    }

    fn clone_sampler(&self) -> Box<dyn CustomSampler> {
        Box::new(Probe(self.0))
    }
}

pub fn build(p: Planted) -> Result<Sampler> {
    Sampler::custom(Probe(p))
}
