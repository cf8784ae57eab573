//! Summary statistics over prompts: the mean with a percentile bootstrap interval (F4's rule
//! reads `differing_share` through `bootstrap_mean`; F5's medians use the same bootstrap), and
//! the text measures of F4's free-running design. The bootstrap starts from a fixed seed, so
//! the same values always give the same interval, whatever else ran before.

use crate::rng::Rng;
use crate::TokenId;
use std::collections::HashSet;

/// Resamples per interval.
pub const BOOTSTRAP_RESAMPLES: usize = 10_000;
/// The fixed seed every interval starts from.
pub const BOOTSTRAP_SEED: u64 = 20_261_130;

/// A mean and its 95% percentile-bootstrap interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    pub mean: f64,
    pub lo: f64,
    pub hi: f64,
    pub n: usize,
}

pub fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len().max(1) as f64
}

/// `statistic` of `values`, with the 2.5% and 97.5% quantiles (nearest rank) of its value on
/// [`BOOTSTRAP_RESAMPLES`] resamples drawn with replacement from [`BOOTSTRAP_SEED`], as
/// `(point, lo, hi)`. `statistic` may reorder the slice it is given (a median sorts it). Empty
/// input gives NaN throughout.
pub fn bootstrap(values: &[f64], statistic: impl Fn(&mut [f64]) -> f64) -> (f64, f64, f64) {
    let n = values.len();
    if n == 0 {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    let mut rng = Rng::new(BOOTSTRAP_SEED);
    let mut resample = vec![0.0; n];
    let mut stats: Vec<f64> = (0..BOOTSTRAP_RESAMPLES)
        .map(|_| {
            for x in resample.iter_mut() {
                *x = values[rng.below(n)];
            }
            statistic(&mut resample)
        })
        .collect();
    stats.sort_by(f64::total_cmp);
    let at = |q: f64| {
        stats[((q * BOOTSTRAP_RESAMPLES as f64).ceil() as usize).clamp(1, BOOTSTRAP_RESAMPLES) - 1]
    };
    (statistic(&mut values.to_vec()), at(0.025), at(0.975))
}

/// The mean of `values` with its bootstrap interval ([`bootstrap`]). Each resample's mean sums
/// its draws in draw order, as the point estimate sums `values` in order.
pub fn bootstrap_mean(values: &[f64]) -> Estimate {
    let (mean, lo, hi) = bootstrap(values, |v| mean(v));
    Estimate {
        mean,
        lo,
        hi,
        n: values.len(),
    }
}

/// Distinct bigrams over bigrams (1 when there is no bigram).
pub fn distinct2(tokens: &[TokenId]) -> f64 {
    if tokens.len() < 2 {
        return 1.0;
    }
    let set: HashSet<(TokenId, TokenId)> = tokens.windows(2).map(|w| (w[0], w[1])).collect();
    set.len() as f64 / (tokens.len() - 1) as f64
}

/// Share of tokens after the first that already occurred earlier in the same sequence
/// (0 when there are fewer than two tokens).
pub fn rep_rate(tokens: &[TokenId]) -> f64 {
    if tokens.len() < 2 {
        return 0.0;
    }
    let mut seen = HashSet::new();
    seen.insert(tokens[0]);
    let repeats = tokens[1..].iter().filter(|t| !seen.insert(**t)).count();
    repeats as f64 / (tokens.len() - 1) as f64
}

/// Positions (up to the longer length) where two sequences hold different tokens, over that
/// length (0 for two empty sequences).
pub fn differing_share(a: &[TokenId], b: &[TokenId]) -> f64 {
    let n = a.len().max(b.len());
    if n == 0 {
        return 0.0;
    }
    (0..n).filter(|&i| a.get(i) != b.get(i)).count() as f64 / n as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::token_ids as ids;

    #[test]
    fn text_measures_by_hand() {
        // Bigrams 1-2, 2-1, 1-2, 2-3: three distinct of four.
        assert_eq!(distinct2(&ids(&[1, 2, 1, 2, 3])), 0.75);
        // After the first: 2 new, 1 repeat, 2 repeat, 3 new.
        assert_eq!(rep_rate(&ids(&[1, 2, 1, 2, 3])), 0.5);
        assert_eq!(differing_share(&ids(&[1, 2, 3]), &ids(&[1, 5, 3, 4])), 0.5);
        assert_eq!(differing_share(&[], &[]), 0.0);
    }

    #[test]
    fn bootstrap_of_a_constant_is_that_constant() {
        let e = bootstrap_mean(&[0.25; 16]);
        assert_eq!((e.mean, e.lo, e.hi), (0.25, 0.25, 0.25));
    }

    #[test]
    fn bootstrap_interval_is_ordered_contains_the_mean_and_repeats() {
        let v: Vec<f64> = (0..16).map(|i| (i * i % 7) as f64 / 7.0).collect();
        let e = bootstrap_mean(&v);
        assert!(e.lo < e.mean && e.mean < e.hi, "{e:?}");
        assert_eq!(e, bootstrap_mean(&v));
        // Within the range of the data, and narrower than it.
        assert!(e.lo > 0.0 && e.hi < 6.0 / 7.0);
    }
}
