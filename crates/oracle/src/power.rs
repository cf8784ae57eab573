//! A detector's power, stated before it runs: the chance that F7's tests flag a sampler that
//! is wrong by a given amount, at the draw count and level used.
//!
//! Two kinds of evidence, as in F7's rule:
//! - a draw outside the survivor set is a defect outright, so a sampler that puts mass `q`
//!   outside is caught unless all `n` draws miss it: power `1 - (1 - q)^n`
//!   ([`outside_power`]);
//! - otherwise Pearson's chi-square. Under an alternative whose bin probabilities are `a`
//!   against the expected `e`, the statistic over `n` draws is approximately noncentral
//!   chi-square with `k - 1` degrees of freedom and noncentrality `λ = n Σ (a_i - e_i)² / e_i`
//!   (the standard large-sample result; Cohen, *Statistical Power Analysis for the
//!   Behavioral Sciences*, 1988, ch. 7, whose effect size is `w² = λ / n`). The power is
//!   the chance that it exceeds the level's critical value ([`chi_square_power`]).
//!
//! The noncentral distribution is the Poisson mixture of central ones,
//! `P(X > x) = Σ_j e^(-λ/2) (λ/2)^j / j! · Q((df + 2j)/2, x/2)`, summed here with
//! [`crate::fit::chi_square_sf`] for each term; the critical value inverts that function by
//! bisection. Both are checked against closed forms in the tests.

use crate::fit::chi_square_sf;

/// The `x` with `P(X >= x) = alpha` for a chi-square `X` with `df` degrees of freedom
/// (`alpha` in (0, 1), `df >= 1`), to a relative 1e-12.
pub fn chi_square_isf(alpha: f64, df: usize) -> f64 {
    assert!(
        alpha > 0.0 && alpha < 1.0,
        "chi_square_isf: alpha {alpha} outside (0, 1)"
    );
    assert!(df >= 1, "chi_square_isf: df must be at least 1");
    let (mut lo, mut hi) = (0.0, df as f64 + 10.0);
    while chi_square_sf(hi, df) > alpha {
        lo = hi;
        hi *= 2.0;
    }
    // The survival function falls strictly, so bisection on it converges to the one root.
    while hi - lo > 1e-12 * hi {
        let mid = 0.5 * (lo + hi);
        if chi_square_sf(mid, df) > alpha {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// `P(X > x)` for a noncentral chi-square `X` with `df` degrees of freedom and noncentrality
/// `lambda >= 0`: the Poisson mixture above, summed in log space from the Poisson mode out
/// until the terms left hold less than 1e-16 of the weight.
pub fn noncentral_chi_square_sf(x: f64, df: usize, lambda: f64) -> f64 {
    assert!(
        lambda >= 0.0,
        "noncentral_chi_square_sf: lambda {lambda} is negative"
    );
    if lambda == 0.0 {
        return chi_square_sf(x, df);
    }
    let half = lambda / 2.0;
    let mode = half.floor() as usize;
    // ln of the Poisson(λ/2) weight of the mode, by ln j! summed once; the neighbours follow
    // from w(j+1) = w(j)·(λ/2)/(j+1), in log space.
    let ln_fact: f64 = (1..=mode).map(|k| (k as f64).ln()).sum();
    let ln_mode = -half + mode as f64 * half.ln() - ln_fact;
    let term = |j: usize, ln_w: f64| ln_w.exp() * chi_square_sf(x, df + 2 * j);
    let mut sum = term(mode, ln_mode);
    // Outwards from the mode, where the weights fall monotonically on both sides.
    let (mut j, mut ln_w) = (mode, ln_mode);
    loop {
        j += 1;
        ln_w += half.ln() - (j as f64).ln();
        if ln_w.exp() <= 1e-17 {
            break;
        }
        sum += term(j, ln_w);
    }
    let (mut j, mut ln_w) = (mode, ln_mode);
    while j > 0 {
        ln_w -= half.ln() - (j as f64).ln();
        j -= 1;
        if ln_w.exp() < 1e-17 {
            break;
        }
        sum += term(j, ln_w);
    }
    sum.clamp(0.0, 1.0)
}

/// What a chi-square test can see of one alternative, stated before it runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChiSquarePower {
    /// Bins less one.
    pub df: usize,
    /// `n Σ (a_i - e_i)² / e_i`.
    pub noncentrality: f64,
    /// The statistic's critical value at the level.
    pub critical: f64,
    /// The chance that the test rejects under the alternative.
    pub power: f64,
}

/// The power of Pearson's test at level `alpha` over `draws` draws, for bins whose expected
/// probabilities are `expected` (each > 0) when the sampler's are `actual` (same length, at
/// least two bins, each summing to 1 within 1e-9).
pub fn chi_square_power(
    expected: &[f64],
    actual: &[f64],
    draws: u64,
    alpha: f64,
) -> ChiSquarePower {
    assert_eq!(
        expected.len(),
        actual.len(),
        "chi_square_power: bins differ"
    );
    assert!(expected.len() >= 2, "chi_square_power: at least two bins");
    for p in [expected, actual] {
        let total: f64 = p.iter().sum();
        assert!(
            (total - 1.0).abs() < 1e-9,
            "chi_square_power: bins sum to {total}"
        );
    }
    assert!(
        expected.iter().all(|&e| e > 0.0),
        "chi_square_power: an expected bin is empty"
    );
    let w2: f64 = (expected.iter().zip(actual))
        .map(|(e, a)| (a - e) * (a - e) / e)
        .sum();
    let df = expected.len() - 1;
    let noncentrality = draws as f64 * w2;
    let critical = chi_square_isf(alpha, df);
    ChiSquarePower {
        df,
        noncentrality,
        critical,
        power: noncentral_chi_square_sf(critical, df, noncentrality),
    }
}

/// The chance that at least one of `draws` draws lands on mass `outside` that the oracle
/// gives none (each such draw is a defect outright): `1 - (1 - outside)^draws`.
pub fn outside_power(outside: f64, draws: u64) -> f64 {
    assert!(
        (0.0..=1.0).contains(&outside),
        "outside_power: mass {outside}"
    );
    -(draws as f64 * (-outside).ln_1p()).exp_m1()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(got: f64, want: f64, tol: f64, what: &str) {
        assert!((got - want).abs() <= tol, "{what}: got {got}, want {want}");
    }

    /// Critical values against closed forms: df 1 from the normal quantile, df 2 from
    /// `-2 ln alpha`, df 3 from `erfc(√(x/2)) + √(2x/π) e^(-x/2)` evaluated at the value.
    #[test]
    fn critical_values() {
        close(
            chi_square_isf(0.05, 1),
            3.841_458_820_694_124,
            1e-9,
            "df 1, 0.05",
        );
        close(
            chi_square_isf(0.01, 1),
            6.634_896_601_021_214,
            1e-9,
            "df 1, 0.01",
        );
        for alpha in [0.1, 0.01, 1e-4, 1e-8] {
            close(
                chi_square_isf(alpha, 2),
                -2.0 * f64::ln(alpha),
                1e-9,
                "df 2",
            );
        }
        close(
            chi_square_isf(0.01, 3),
            11.344_866_730_144_373,
            1e-9,
            "df 3, 0.01",
        );
        for (alpha, df) in [(0.01, 7), (1e-5, 40), (0.3, 200)] {
            let x = chi_square_isf(alpha, df);
            close(chi_square_sf(x, df), alpha, 1e-9 * alpha, "round trip");
        }
    }

    /// With one degree of freedom a noncentral chi-square is `(Z + δ)²`, so its survival
    /// function is `Φ(δ - √x) + Φ(-δ - √x)`: values from that formula (Python's `math.erfc`).
    /// With three, the values come from integrating `(Z₁ + δ)²` against the df-2 survival
    /// function `e^(-t/2)` numerically (Simpson's rule, 200,000 panels).
    #[test]
    fn noncentral_against_independent_formulas() {
        let cases = [
            (3.841_458_820_694_124, 1, 1.0, 0.170_075_045_753_087_6),
            (6.634_896_601_021_214, 1, 4.0, 0.282_367_653_960_204_1),
            (10.0, 1, 9.0, 0.435_543_603_406_752_86),
            (1.0, 1, 0.25, 0.375_344_739_994_845),
            (11.344_866_730_144_373, 3, 10.0, 0.541_929_898_970_500_7),
            (20.0, 3, 30.0, 0.886_525_913_825_027_9),
            (3.841_458_820_694_124, 1, 16.0, 0.979_326_631_902_575_7),
            (6.634_896_601_021_214, 1, 100.0, 0.999_999_999_999_943_3),
            (3.841_458_820_694_124, 1, 2_500.0, 1.0),
        ];
        for (x, df, lambda, want) in cases {
            close(
                noncentral_chi_square_sf(x, df, lambda),
                want,
                1e-9,
                "noncentral sf",
            );
        }
        // No noncentrality is the central distribution.
        close(
            noncentral_chi_square_sf(5.0, 4, 0.0),
            chi_square_sf(5.0, 4),
            0.0,
            "lambda 0",
        );
    }

    /// The power of the test against itself is its level; a larger effect or more draws
    /// only raise it.
    #[test]
    fn power_is_the_level_at_no_effect_and_grows() {
        let e = [0.5, 0.3, 0.2];
        let p = chi_square_power(&e, &e, 20_000, 0.01);
        close(p.power, 0.01, 1e-9, "no effect");
        let shifted = |d: f64| [0.5 - d, 0.3 + d, 0.2];
        let small = chi_square_power(&e, &shifted(0.01), 20_000, 0.01);
        let large = chi_square_power(&e, &shifted(0.02), 20_000, 0.01);
        let more = chi_square_power(&e, &shifted(0.01), 80_000, 0.01);
        assert!(
            0.01 < small.power && small.power < large.power,
            "{small:?} {large:?}"
        );
        assert!(small.power < more.power, "{small:?} {more:?}");
        // λ = 20,000 (0.01²/0.5 + 0.01²/0.3) = 10.67.
        close(
            small.noncentrality,
            20_000.0 * (1e-4 / 0.5 + 1e-4 / 0.3),
            1e-9,
            "lambda",
        );
    }

    #[test]
    fn outside_power_is_one_minus_all_misses() {
        close(outside_power(0.0, 1_000), 0.0, 0.0, "no mass");
        close(
            outside_power(0.032, 20_000),
            1.0,
            1e-12,
            "published top_k=3",
        );
        close(
            outside_power(0.001, 1_000),
            1.0 - 0.999f64.powi(1_000),
            1e-12,
            "small",
        );
    }
}
