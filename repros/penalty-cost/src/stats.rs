//! Medians and their percentile-bootstrap intervals.
//!
//! The interval is `oracle::stats::bootstrap` (the workspace's one resampler) with the median
//! as the statistic: a shared machine's slow rounds pull a mean, not a median.

use oracle::stats::bootstrap;

/// The median of `values` (the mean of the middle two for an even count); NaN when empty.
pub fn median(values: &[f64]) -> f64 {
    median_in_place(&mut values.to_vec())
}

fn median_in_place(v: &mut [f64]) -> f64 {
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// A median and its 95% percentile-bootstrap interval over `n` values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MedianCi {
    pub median: f64,
    pub lo: f64,
    pub hi: f64,
    pub n: usize,
}

/// The median of `values` with its bootstrap interval (`oracle::stats::bootstrap`: nearest
/// rank 2.5% and 97.5% quantiles of the resamples' medians). Empty input gives NaN throughout.
pub fn bootstrap_median(values: &[f64]) -> MedianCi {
    let (median, lo, hi) = bootstrap(values, median_in_place);
    MedianCi {
        median,
        lo,
        hi,
        n: values.len(),
    }
}

/// How much slower `x` is than `base`, in percent of `base`.
pub fn overhead_percent(base: f64, x: f64) -> f64 {
    100.0 * (x - base) / base
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_by_hand() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[5.0]), 5.0);
        assert!(median(&[]).is_nan());
        // The input is left as it was.
        let v = [3.0, 1.0, 2.0];
        median(&v);
        assert_eq!(v, [3.0, 1.0, 2.0]);
    }

    #[test]
    fn overhead_by_hand() {
        assert_eq!(overhead_percent(8.0, 10.0), 25.0);
        assert_eq!(overhead_percent(8.0, 6.0), -25.0);
        assert_eq!(overhead_percent(2.0, 2.0), 0.0);
    }

    #[test]
    fn bootstrap_of_a_constant_is_that_constant() {
        let e = bootstrap_median(&[1.5; 21]);
        assert_eq!((e.median, e.lo, e.hi, e.n), (1.5, 1.5, 1.5, 21));
        assert!(bootstrap_median(&[]).median.is_nan());
    }

    #[test]
    fn bootstrap_interval_holds_the_median_ignores_an_outlier_and_repeats() {
        // 24 rounds near 10 and one far-off round (a neighbour's burst on a shared machine).
        let mut v: Vec<f64> = (0..24).map(|i| 10.0 + (i * 7 % 5) as f64 / 10.0).collect();
        v.push(500.0);
        let e = bootstrap_median(&v);
        assert!(e.lo <= e.median && e.median <= e.hi, "{e:?}");
        assert!(e.lo >= 10.0 && e.hi <= 10.4, "{e:?}");
        assert_eq!(e, bootstrap_median(&v));
        // The order of the values does not matter.
        let mut r = v.clone();
        r.reverse();
        assert_eq!(bootstrap_median(&r).median, e.median);
    }

    #[test]
    fn a_single_value_is_its_own_interval() {
        let e = bootstrap_median(&[7.0]);
        assert_eq!((e.median, e.lo, e.hi), (7.0, 7.0, 7.0));
    }
}
