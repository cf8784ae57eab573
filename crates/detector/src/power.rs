//! The detector's power against a stated alternative, two ways:
//! - [`simulate`]: by running [`judge`] itself on simulated draws, so pooling, the tie-class
//!   rule and the level are the ones a real run meets (the planted samplers' power, F7);
//! - [`stated`]: in closed form, the chi-square's power against one named effect over the
//!   bins the detector will form, cheap enough for any row (a 262,144-entry vector whose
//!   p-value is a Monte Carlo one cannot be simulated 400 times): the power every draw row
//!   states before its verdict.

use crate::{judge, Call, Expectation};
use oracle::fit::bin_probabilities;
use oracle::power::chi_square_power;
use oracle::rng::Rng;
use oracle::TokenId;
use report::Verdict;
use serde::Serialize;

/// The effect every draw row states its power against (PREREG F7, addendum of 2026-12-05):
/// this much probability moved from the most probable survivor to the least probable one,
/// the survivor set left as it is, so only the chi-square can see it (the planted sampler
/// "1 point moved" of F7's controls).
pub const ONE_POINT: f64 = 0.01;

/// The effect, in words.
pub const ONE_POINT_EFFECT: &str =
    "one point of probability moved from the most probable survivor to the least probable";

/// Below this power against [`ONE_POINT`] a row's `absent` does not rule the effect out, and
/// the row says so.
pub const ENOUGH_POWER: f64 = 0.8;

/// A row's power against [`ONE_POINT`], computed from the oracle's expectation, the draw
/// count and the level alone, before any draw.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stated {
    pub effect: &'static str,
    pub draws: usize,
    pub alpha: f64,
    /// The chi-square's bins at this draw count (the tail pooled as the test pools it).
    pub bins: usize,
    pub df: usize,
    /// `draws` times the sum over bins of (moved - expected)² / expected.
    pub noncentrality: f64,
    pub power: f64,
    /// Whether `power` reaches [`ENOUGH_POWER`].
    pub enough: bool,
    /// Why the effect has nothing to act on, where it has not (then `power` is 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub none: Option<String>,
}

impl Stated {
    /// `power 0.973 against one point ...`, or `power 0.412 < 0.8 against ...`.
    pub fn describe(&self) -> String {
        let short = if self.enough {
            String::new()
        } else {
            format!(" < {ENOUGH_POWER}")
        };
        let none = self
            .none
            .as_ref()
            .map(|w| format!(" ({w})"))
            .unwrap_or_default();
        format!(
            "power {:.3}{short} against {} in {} draws{none}",
            self.power, self.effect, self.draws
        )
    }
}

/// The survivors one by one, most probable first, as the detector lists them: every id of a
/// whole class, and of a split class its first `kept` (the bins the test forms when every call
/// keeps the same ids of a tie; where calls keep different ones the class is one bin, and a
/// move inside it is not seen at all).
fn survivors(exp: &Expectation) -> Vec<f64> {
    (exp.classes.iter())
        .flat_map(|c| std::iter::repeat_n(c.p_each, c.kept.min(c.ids.len())))
        .collect()
}

/// The chi-square's power at level `alpha` over `draws` draws against [`ONE_POINT`] moved from
/// the most probable survivor of `exp` to the least probable one, over the bins the detector
/// forms at that draw count (`oracle::fit`'s pooling): the noncentral chi-square's upper tail
/// past the level's critical value (`oracle::power::chi_square_power`, a large-sample
/// approximation where the p-value is a Monte Carlo one).
pub fn stated(exp: &Expectation, draws: usize, alpha: f64) -> Stated {
    let expected = survivors(exp);
    let mut out = Stated {
        effect: ONE_POINT_EFFECT,
        draws,
        alpha,
        bins: 0,
        df: 0,
        noncentrality: 0.0,
        power: 0.0,
        enough: false,
        none: None,
    };
    if expected.len() < 2 {
        out.none = Some("one survivor: no mass to move".into());
        return out;
    }
    if expected[0] < ONE_POINT {
        out.none = Some("the most probable survivor holds less than one point".into());
        return out;
    }
    let mut moved = expected.clone();
    moved[0] -= ONE_POINT;
    *moved.last_mut().expect("two survivors") += ONE_POINT;
    let (e, a) = bin_probabilities(&expected, &moved, draws as u64);
    out.bins = e.len();
    if e.len() < 2 {
        out.none = Some("one bin at this draw count: nothing to test".into());
        return out;
    }
    let p = chi_square_power(&e, &a, draws as u64, alpha);
    out.df = p.df;
    out.noncentrality = p.noncentrality;
    out.power = p.power;
    out.enough = p.power >= ENOUGH_POWER;
    out
}

/// How often the detector flagged `reps` simulated runs of `draws` draws each.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Power {
    pub draws: usize,
    pub alpha: f64,
    pub reps: usize,
    pub caught: usize,
    pub rate: f64,
    /// Wilson's 95% interval for the rate.
    pub low: f64,
    pub high: f64,
}

impl Power {
    /// `0.993 [0.987, 0.996]`.
    pub fn describe(&self) -> String {
        format!("{:.3} [{:.3}, {:.3}]", self.rate, self.low, self.high)
    }
}

/// `draws` inverse-CDF draws from `dist` (ids with weights summing to 1), one 53-bit uniform
/// number from `rng` each; a number past the last cumulative weight lands on the last id.
pub fn sample(dist: &[(TokenId, f64)], draws: usize, rng: &mut Rng) -> Vec<TokenId> {
    let cdf: Vec<f64> = (dist.iter())
        .scan(0.0, |cum, (_, w)| {
            *cum += w;
            Some(*cum)
        })
        .collect();
    (0..draws)
        .map(|_| {
            let u = rng.unit();
            let i = cdf.partition_point(|&c| c <= u).min(dist.len() - 1);
            dist[i].0
        })
        .collect()
}

/// [`sample`]'s draws as calls of a sampler whose survivors are `dist`'s ids, each call
/// showing which of `exp`'s split-class ids it kept (as the planted samplers' calls do).
pub fn sample_calls(
    exp: &Expectation,
    dist: &[(TokenId, f64)],
    draws: usize,
    rng: &mut Rng,
) -> Vec<Call> {
    let watch = exp.watch();
    let mut kept: Vec<TokenId> = (dist.iter())
        .map(|(id, _)| *id)
        .filter(|id| watch.contains(id))
        .collect();
    kept.sort();
    (sample(dist, draws, rng).into_iter())
        .map(|drawn| Call {
            drawn,
            kept: Some(kept.clone()),
        })
        .collect()
}

/// The share of `reps` runs, each of `draws` draws from `alternative`, that [`judge`] at
/// level `alpha` reads as `present` against `exp`.
pub fn simulate(
    exp: &Expectation,
    alternative: &[(TokenId, f64)],
    draws: usize,
    alpha: f64,
    reps: usize,
    seed: u64,
) -> Power {
    let mut rng = Rng::new(seed);
    let caught = (0..reps)
        .filter(|_| {
            let calls = sample_calls(exp, alternative, draws, &mut rng);
            judge(&calls, exp, alpha).verdict == Verdict::Present
        })
        .count();
    let (low, high) = wilson(caught, reps);
    Power {
        draws,
        alpha,
        reps,
        caught,
        rate: caught as f64 / reps as f64,
        low,
        high,
    }
}

/// Wilson's score interval at 95% for `k` successes in `n` trials.
pub fn wilson(k: usize, n: usize) -> (f64, f64) {
    const Z: f64 = 1.959_963_984_540_054;
    let (k, n) = (k as f64, n as f64);
    let p = k / n;
    let centre = (p + Z * Z / (2.0 * n)) / (1.0 + Z * Z / n);
    let half = Z / (1.0 + Z * Z / n) * (p * (1.0 - p) / n + Z * Z / (4.0 * n * n)).sqrt();
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Class;
    use oracle::token_ids as ids;

    fn fair_coin() -> Expectation {
        let class = |i: i32| Class {
            ids: ids(&[i]),
            kept: 1,
            p_each: 0.5,
        };
        Expectation {
            classes: vec![class(0), class(1)],
            undecided: None,
        }
    }

    #[test]
    fn the_null_is_flagged_at_about_its_level_and_a_gross_skew_always() {
        let exp = fair_coin();
        let fair = [(TokenId(0), 0.5), (TokenId(1), 0.5)];
        // At level 0.05, 2,000 runs of the null: the false-alarm rate's interval holds 0.05.
        let null = simulate(&exp, &fair, 200, 0.05, 2000, 7);
        assert!(null.low < 0.05 && 0.05 < null.high, "{null:?}");
        let skew = [(TokenId(0), 0.7), (TokenId(1), 0.3)];
        assert_eq!(simulate(&exp, &skew, 200, 0.05, 200, 7).caught, 200);
        // An id the oracle never keeps is caught by the outside-draw rule alone.
        let outside = [(TokenId(0), 0.5), (TokenId(1), 0.49), (TokenId(2), 0.01)];
        assert!(simulate(&exp, &outside, 1000, 1e-9, 100, 7).rate > 0.99);
    }

    /// Softmax of `logits`, one whole class per id, most probable first.
    fn softmax_classes(logits: &[f64]) -> Expectation {
        let w: Vec<f64> = logits.iter().map(|l| l.exp()).collect();
        let sum: f64 = w.iter().sum();
        let mut classes: Vec<Class> = (w.iter().enumerate())
            .map(|(i, x)| Class {
                ids: ids(&[i as i32]),
                kept: 1,
                p_each: x / sum,
            })
            .collect();
        classes.sort_by(|a, b| b.p_each.total_cmp(&a.p_each));
        Expectation {
            classes,
            undecided: None,
        }
    }

    /// The stated power can fail: one point between two large probabilities (0.731 and
    /// 0.269, F7's `published top_k=2`) is beyond 20,000 draws at 0.01/24, and far beyond 200;
    /// onto a small one (0.032, `published all`) it is seen. The closed form agrees with the
    /// simulation through `judge` (an independent route: draws, pooling and the test itself)
    /// within 0.1 where both are away from 0 and 1.
    #[test]
    fn the_stated_power_is_low_where_the_effect_is_small_for_the_draws() {
        let alpha = 0.01 / 24.0;
        let top2 = softmax_classes(&[3.0, 2.0]);
        let few = stated(&top2, 200, alpha);
        assert!(few.power < 0.01 && !few.enough, "{few:?}");
        assert!(
            few.describe().contains("< 0.8 against one point"),
            "{}",
            few.describe()
        );
        let grid = stated(&top2, 20_000, alpha);
        assert!(!grid.enough, "{grid:?}");
        // n (0.01² / 0.731 + 0.01² / 0.269) = 10.17.
        let want = 20_000.0 * (1e-4 / 0.731_058_6 + 1e-4 / 0.268_941_4);
        assert!((grid.noncentrality - want).abs() < 1e-3, "{grid:?}");
        let mut shifted = [0.731_058_6 - 0.01, 0.268_941_4 + 0.01];
        let total: f64 = shifted.iter().sum();
        shifted.iter_mut().for_each(|x| *x /= total);
        let dist = [(TokenId(0), shifted[0]), (TokenId(1), shifted[1])];
        let sim = simulate(&top2, &dist, 20_000, alpha, 400, 20_261_202);
        assert!(
            (sim.rate - grid.power).abs() < 0.1,
            "{sim:?} against {grid:?}"
        );
        assert!(stated(&top2, 200_000, alpha).enough);
        let all = stated(&softmax_classes(&[3.0, 2.0, 1.0, 0.0]), 20_000, alpha);
        assert!(all.enough && all.power > 0.99, "{all:?}");
        assert_eq!(all.df, 3);
    }

    /// A long tail is pooled as the test pools it, so the moved point lands in the last band;
    /// a single survivor has nothing to move, and a split class counts its kept ids.
    #[test]
    fn the_stated_power_sees_the_bins_of_the_test() {
        // One head id at 0.5 and 4,096 tail ids sharing 0.5: at 1,024 draws each tail id
        // expects 0.125 (exact in binary), so the tail fills 102 bands of 40 ids, and the 16
        // ids left join the last of them.
        let tail_p = 0.5 / 4096.0;
        let mut classes = vec![Class {
            ids: ids(&[0]),
            kept: 1,
            p_each: 0.5,
        }];
        classes.extend((1..=4096).map(|i| Class {
            ids: ids(&[i]),
            kept: 1,
            p_each: tail_p,
        }));
        let tail = Expectation {
            classes,
            undecided: None,
        };
        let s = stated(&tail, 1024, 0.01);
        assert_eq!(s.bins, 103, "{s:?}");
        // The moved point leaves the head and lands in the last band (56 ids).
        let last = 56.0 * tail_p;
        let want = 1024.0 * (1e-4 / 0.5 + 1e-4 / last);
        assert!((s.noncentrality - want).abs() < 1e-9 * want, "{s:?}");
        let one = Expectation {
            classes: vec![Class {
                ids: ids(&[0]),
                kept: 1,
                p_each: 1.0,
            }],
            undecided: None,
        };
        let s = stated(&one, 1000, 0.01);
        assert_eq!((s.power, s.enough), (0.0, false));
        assert!(s.none.is_some());
        let tie = Expectation {
            classes: vec![Class {
                ids: ids(&[0, 1, 2]),
                kept: 2,
                p_each: 0.5,
            }],
            undecided: None,
        };
        assert_eq!(stated(&tie, 1000, 0.01).bins, 2);
    }

    #[test]
    fn wilson_matches_a_known_interval() {
        // 0 of 10: the textbook upper bound 0.2775.
        let (low, high) = wilson(0, 10);
        assert_eq!(low, 0.0);
        assert!((high - 0.2775).abs() < 1e-4, "{high}");
        let (low, high) = wilson(5, 10);
        assert!((low - 0.2366).abs() < 1e-4 && (high - 0.7634).abs() < 1e-4);
    }
}
