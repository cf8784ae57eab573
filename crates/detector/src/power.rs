//! The detector's power against a stated alternative, found by running [`judge`] itself on
//! simulated draws: pooling, the tie-class rule and the level are then the ones a real run
//! meets, which a closed form for the chi-square alone would not capture.

use crate::{judge, Call, Expectation};
use oracle::rng::Rng;
use oracle::TokenId;
use report::Verdict;
use serde::Serialize;

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
