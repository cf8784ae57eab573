//! Planted samplers, written by us, that the edge-input detector must classify: each imitates
//! `top_k = 2`, greedy or a draw, with one known defect (or none), and runs through the same
//! child, the same C call (`llama_sampler_apply` on a custom sampler) and the same judge as
//! llama.cpp's samplers.

use crate::outcome::Outcome;
use anyhow::Result;
use contain::Ended;
use std::ffi::CStr;
use subject::{ArrayView, CustomSampler, Sampler};

/// What a planted sampler imitates, and so how the judge reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Imitates {
    TopK2,
    Draw,
    Greedy,
}

/// Which of F6's questions (`crate::rows`) a positive control must be caught by.
#[derive(Debug, Clone, Copy)]
pub enum Flag {
    /// The robustness rule, with the outcome the cell must be classed with.
    Robustness(fn(&Outcome) -> bool),
    /// The set check: a set or draw no tie-break explains.
    Set,
    /// dist's fallback path: `p` left not finite on two or more clean candidates.
    Fallback,
}

/// A positive control's input and the question that must flag it there.
pub type MustFlag = Option<(&'static str, Flag)>;

/// What one control is: its name (in C for llama.cpp), what it does, what it imitates and
/// where it must be flagged.
struct Row {
    name: &'static str,
    c_name: &'static CStr,
    what: &'static str,
    imitates: Imitates,
    must_flag: MustFlag,
}

/// Declares [`Planted`] and each control's [`Row`] from one table: a row per control.
macro_rules! planted {
    ($($(#[$doc:meta])* $variant:ident => $name:literal, $what:literal, $imitates:ident, $flag:expr;)+) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Planted {
            $($(#[$doc])* $variant,)+
        }

        impl Planted {
            pub const ALL: &'static [Planted] = &[$(Planted::$variant,)+];

            fn row(self) -> Row {
                match self {
                    $(Planted::$variant => Row {
                        name: $name,
                        c_name: const { c_name(concat!($name, "\0")) },
                        what: $what,
                        imitates: Imitates::$imitates,
                        must_flag: $flag,
                    },)+
                }
            }
        }
    };
}

/// A name with its closing NUL as a C string (evaluated at compile time).
const fn c_name(with_nul: &'static str) -> &'static CStr {
    match CStr::from_bytes_with_nul(with_nul.as_bytes()) {
        Ok(c) => c,
        Err(_) => panic!("a control's name holds a NUL"),
    }
}

fn aborts(o: &Outcome) -> bool {
    matches!(o, Outcome::Crashed(Ended::Signal(s)) if contain::signal_name(*s) == "SIGABRT")
}

planted! {
    /// Calls `abort()` on an empty array.
    AbortsOnEmpty => "planted-aborts-on-empty", "top_k=2 that aborts on an empty array",
        TopK2, Some(("empty", Flag::Robustness(aborts)));
    /// Writes `p = exp(logit) / sum exp(logit)` without subtracting the maximum: NaN on the
    /// `large` input.
    NanOnLarge => "planted-nan-on-large", "top_k=2 that writes an unshifted softmax into p",
        TopK2, Some(("large", Flag::Robustness(|o| *o == Outcome::ReturnsNan)));
    /// Keeps three entries.
    KeepsExtra => "planted-keeps-extra", "top_k=2 that keeps three entries",
        TopK2, Some(("plain", Flag::Set));
    /// Spins forever on a single candidate.
    HangsOnOne => "planted-hangs-on-one", "top_k=2 that never returns on one candidate",
        TopK2, Some(("one", Flag::Robustness(|o| matches!(o, Outcome::Crashed(Ended::TimedOut(_))))));
    /// A `top_k = 2` that leaves `selected` one past the end.
    SelectsOutside => "planted-selects-outside", "top_k=2 that sets selected one past the end",
        TopK2, Some(("plain", Flag::Robustness(|o| *o == Outcome::SelectsOutside)));
    /// A draw that picks a masked (`-inf`) entry when there is one.
    DrawsMasked => "planted-draws-masked", "a draw that picks a -inf entry when there is one",
        Draw, Some(("some-neg-inf", Flag::Set));
    /// A greedy that picks the last entry.
    GreedyLast => "planted-greedy-last", "a greedy that picks the last entry",
        Greedy, Some(("plain", Flag::Set));
    /// dist's draw loop without a guard: `p = exp(logit - max)`, NaN when every logit is
    /// `-inf`, so no running sum reaches the target and the last entry is taken.
    DrawFallsBack => "planted-draw-falls-back",
        "a draw with dist's loop that leaves NaN p on an all -inf array and takes the last entry",
        Draw, Some(("all-neg-inf", Flag::Fallback));
    /// A correct `top_k = 2`: its row must be `absent`.
    Exact => "planted-exact-top-k", "a correct top_k=2", TopK2, None;
    /// A correct draw (the first entry of highest logit): its row must be `absent`.
    ExactDraw => "planted-exact-draw", "a correct draw (the first entry of highest logit)",
        Draw, None;
    /// A correct greedy (the first entry of highest logit): its row must be `absent`.
    ExactGreedy => "planted-exact-greedy", "a correct greedy", Greedy, None;
    /// A softmax draw that leaves a sensible `p` on every input: shifted by the largest
    /// logit, all of it on the first entry when every logit is `-inf`, nothing selected on
    /// an empty array. Every
    /// one of its rows must be `absent`: the robustness rule can be met by a sampler that
    /// computes `p`.
    SensibleDraw => "planted-sensible-draw",
        "a softmax draw with a finite p on every input (the first entry when every logit is -inf)",
        Draw, None;
}

impl Planted {
    pub fn imitates(self) -> Imitates {
        self.row().imitates
    }

    pub fn name(self) -> &'static str {
        self.row().name
    }

    pub fn what(self) -> &'static str {
        self.row().what
    }

    /// The input the detector must flag this control on, and the outcome it must be classed
    /// with there (`None` for the known-good ones).
    pub fn must_flag(self) -> MustFlag {
        self.row().must_flag
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

/// The fixed point of the unit interval the planted draws take (no RNG: a probe is one call).
const DRAW_AT: f64 = 0.5;

/// A softmax draw by running sums, as dist draws: `p = exp(logit - max)`, the first entry
/// whose running sum reaches `DRAW_AT` of the total, the last entry when none does, then `p`
/// normalized. With `guarded`, an array whose logits are all `-inf` gets a uniform `p`
/// instead of `exp(-inf - -inf)`, which is NaN.
fn draw_by_running_sum(view: &mut ArrayView<'_>, guarded: bool) {
    let n = view.len();
    if n == 0 {
        return;
    }
    let max = (0..n)
        .map(|i| view.logit(i))
        .fold(f32::NEG_INFINITY, f32::max);
    let p: Vec<f32> = (0..n)
        // Guarded, an all -inf array puts all the mass on its first entry: a rule of our own,
        // not the uniform draw of the upstream patch, so the patched build is never judged
        // against its own fix.
        .map(|i| match guarded && max == f32::NEG_INFINITY {
            true => f32::from(u8::from(i == 0)),
            false => (view.logit(i) - max).exp(),
        })
        .collect();
    let total: f64 = p.iter().map(|&x| f64::from(x)).sum();
    let target = total * DRAW_AT;
    let mut run = 0.0;
    let found = p.iter().position(|&x| {
        run += f64::from(x);
        run >= target
    });
    view.set_selected(found.unwrap_or(n - 1));
    for (i, x) in p.iter().enumerate() {
        view.set_p(i, (f64::from(*x) / total) as f32);
    }
}

struct Probe(Planted);

impl CustomSampler for Probe {
    fn name(&self) -> &'static CStr {
        self.0.row().c_name
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
            Planted::DrawFallsBack => draw_by_running_sum(view, false),
            Planted::SensibleDraw => draw_by_running_sum(view, true),
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
