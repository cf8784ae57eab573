//! Pearson's chi-square goodness of fit, for judging seeded draws from a sampler (F7) against
//! the oracle's renormalized distribution, and [`bonferroni`] to spread one error budget over
//! the tests stated in advance. A draw on a token the oracle gives probability zero is an
//! error naming the token, never pooled away.
//!
//! The p-value is a Monte Carlo one where a category expects fewer than 5 draws
//! ([`monte_carlo_sf`]), else the regularized upper incomplete gamma function Q(df/2, x/2), written here
//! from the textbook mathematics (the power series of the lower function, Legendre's
//! continued fraction for the upper one, Stirling's series for ln Γ), so the crate keeps no
//! dependency and each step can be checked against the formula quoted beside it.

use std::f64::consts::PI;

/// Expected count below which a category is pooled (Cochran's rule of thumb: below it the
/// chi-square approximation to Pearson's statistic is no longer trustworthy).
pub const MIN_EXPECTED: f64 = 5.0;

/// Label of the bin that gathers the categories expected fewer than [`MIN_EXPECTED`] times;
/// where they fill several bins, `pooled 1`, `pooled 2`, ...
pub const POOLED_LABEL: &str = "pooled";

/// Replicates of the Monte Carlo p-value (taken where a category expects fewer than
/// [`MIN_EXPECTED`] draws): its smallest value is 1 / (R + 1) = 1e-5, below every per-test
/// level in the suite, and its standard error at p = 4e-4 is about 6e-5.
pub const MONTE_CARLO_REPLICATES: usize = 99_999;

/// Seed of the Monte Carlo replicates: the p-value depends only on the bins and the statistic.
pub const MONTE_CARLO_SEED: u64 = 20_261_203;

/// How far the probabilities handed to [`goodness_of_fit`] may sum from 1.
pub const SUM_TOLERANCE: f64 = 1e-9;

/// One bin of a goodness-of-fit test: what was observed and what was expected.
#[derive(Debug, Clone, PartialEq)]
pub struct Bin {
    pub label: String,
    pub observed: u64,
    pub expected: f64,
}

/// The outcome of [`goodness_of_fit`].
#[derive(Debug, Clone, PartialEq)]
pub struct GoodnessOfFit {
    /// Pearson's statistic, the sum over bins of (observed - expected)² / expected.
    pub statistic: f64,
    /// Degrees of freedom: bins - 1 (0 when there was nothing to test).
    pub df: usize,
    /// P(chi-square with `df` degrees of freedom >= `statistic`); 1 when there was nothing to
    /// test.
    pub p_value: f64,
    /// The bins the statistic was computed over, in the order described at
    /// [`goodness_of_fit`].
    pub bins: Vec<Bin>,
    /// How many categories went into pooled bins (0 when none did).
    pub pooled: usize,
    /// The number of replicates where the p-value is a Monte Carlo one (some category expected
    /// fewer than [`MIN_EXPECTED`] draws); `None` where it is chi-square's.
    pub monte_carlo: Option<usize>,
}

/// Pearson's chi-square test of `observed` counts against probabilities `expected_p` (one
/// per label, summing to 1 within [`SUM_TOLERANCE`]); with n the total, category i expects
/// n·p_i. Binning:
/// 1. Categories expected at least [`MIN_EXPECTED`] times get a bin each, in input order.
/// 2. The rest (Cochran's rule), in input order, fill pooled bins placed last: each takes
///    categories until it expects at least [`MIN_EXPECTED`]. Callers list categories from
///    the most probable down, so each pooled bin is a band of the tail, and a long tail keeps
///    its shape in several bins instead of one. One pooled bin is labelled [`POOLED_LABEL`];
///    several are `pooled 1`, `pooled 2`, ....
/// 3. A last pooled bin that expects fewer than [`MIN_EXPECTED`] joins the pooled bin before
///    it. If it is the only one, it is merged into the bin of step 1 with the smallest
///    expected count (the first on ties), labelled `"<label>+pooled"`, which leaves the most
///    informative bins untouched; if step 1 made no bin, it stays on its own.
///
/// Categories with probability 0 never observed are left out. `df` is bins - 1; with fewer
/// than 2 bins there is nothing to test: statistic 0, df 0, p-value 1.
///
/// The p-value is chi-square's upper tail, except where a category expected fewer than
/// [`MIN_EXPECTED`] draws: there the pooled bins may still be few and uneven, and the p-value
/// is a Monte Carlo one ([`monte_carlo_sf`]) over the same bins and statistic.
///
/// Errors (one line): lengths that differ, a probability negative or not finite, a sum that
/// is not 1, and a count on a category of probability 0 (a definite defect of the sampler,
/// which must not be diluted into a p-value; the first such, by label).
pub fn goodness_of_fit(
    labels: &[String],
    observed: &[u64],
    expected_p: &[f64],
) -> Result<GoodnessOfFit, String> {
    check_inputs(labels, observed, expected_p)?;
    let (bins, pooled) = bin(labels, observed, expected_p);
    let (statistic, df, p_value, monte_carlo) = match bins.len() {
        0 | 1 => (0.0, 0, 1.0, None),
        n if pooled > 0 => {
            let statistic = pearson(&bins);
            let p = monte_carlo_sf(&bins, statistic, MONTE_CARLO_REPLICATES, MONTE_CARLO_SEED);
            (statistic, n - 1, p, Some(MONTE_CARLO_REPLICATES))
        }
        n => {
            let statistic = pearson(&bins);
            (statistic, n - 1, chi_square_sf(statistic, n - 1), None)
        }
    };
    Ok(GoodnessOfFit {
        statistic,
        df,
        p_value,
        bins,
        pooled,
        monte_carlo,
    })
}

/// P(T >= `statistic`) for Pearson's statistic T of a multinomial sample of the bins' total
/// over the bins' expected shares, estimated from `reps` samples drawn from a generator
/// seeded with `seed`: (1 + #{T* >= statistic}) / (reps + 1), the estimate that counts the
/// observed sample as one of the replicates, so it is never 0 and a test at level a that
/// rejects when it is below a keeps its level (Davison and Hinkley, Bootstrap Methods and
/// their Application, 1997, section 4.2). A replicate's statistic within a relative 1e-12 of
/// `statistic` counts as reaching it, so rounding in the sum never decides.
pub fn monte_carlo_sf(bins: &[Bin], statistic: f64, reps: usize, seed: u64) -> f64 {
    let n: u64 = bins.iter().map(|b| b.observed).sum();
    let total: f64 = bins.iter().map(|b| b.expected).sum();
    let cdf: Vec<f64> = (bins.iter())
        .scan(0.0, |cum, b| {
            *cum += b.expected / total;
            Some(*cum)
        })
        .collect();
    let mut rng = crate::rng::Rng::new(seed);
    let mut counts = vec![0u64; bins.len()];
    let reach = statistic * (1.0 - 1e-12);
    let mut at_least = 0usize;
    for _ in 0..reps {
        counts.iter_mut().for_each(|c| *c = 0);
        for _ in 0..n {
            let u = rng.unit();
            let i = cdf.partition_point(|&c| c <= u).min(bins.len() - 1);
            counts[i] += 1;
        }
        let t: f64 = (bins.iter().zip(&counts))
            .map(|(b, &o)| {
                let d = o as f64 - b.expected;
                d * d / b.expected
            })
            .sum();
        if t >= reach {
            at_least += 1;
        }
    }
    (1 + at_least) as f64 / (reps + 1) as f64
}

/// The per-test level that keeps the family-wise error rate at `alpha` over `tests` tests
/// stated before any data is seen: `alpha / tests` (Bonferroni; holds whatever the tests'
/// dependence). `tests` must be at least 1.
pub fn bonferroni(alpha: f64, tests: usize) -> f64 {
    assert!(
        tests >= 1,
        "bonferroni: the number of tests must be at least 1"
    );
    alpha / tests as f64
}

/// P(X >= x) for a chi-square X with `df` degrees of freedom: Q(df/2, x/2). NaN gives NaN,
/// `x <= 0` gives 1, `x = +inf` gives 0; `df == 0` is the point mass at 0 (1 for `x <= 0`,
/// else 0: a test with no degrees of freedom never rejects by chance, and never panics).
///
/// Accurate to a relative 1e-9 or better for every result down to 1e-300 (within 1e-12 of
/// mpmath in the tests, and in a sweep of df 1 to 10^5); results below the smallest f64 are
/// 0, never NaN. The work grows like the square root of `df` near the mean.
pub fn chi_square_sf(x: f64, df: usize) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    if x <= 0.0 {
        return 1.0;
    }
    if df == 0 || x == f64::INFINITY {
        return 0.0;
    }
    upper_gamma_q(df as f64 / 2.0, x / 2.0)
}

fn check_inputs(labels: &[String], observed: &[u64], expected_p: &[f64]) -> Result<(), String> {
    if labels.len() != observed.len() || observed.len() != expected_p.len() {
        return Err(format!(
            "{} labels, {} observed counts and {} probabilities: each category needs one of each",
            labels.len(),
            observed.len(),
            expected_p.len()
        ));
    }
    if let Some(i) = expected_p
        .iter()
        .position(|p| !(p.is_finite() && *p >= 0.0))
    {
        return Err(format!(
            "category {} has probability {}, not a finite number >= 0",
            labels[i], expected_p[i]
        ));
    }
    let total: f64 = expected_p.iter().sum();
    if (total - 1.0).abs() > SUM_TOLERANCE {
        return Err(format!(
            "the probabilities sum to {total}, not 1 (within {SUM_TOLERANCE:e})"
        ));
    }
    if let Some(i) = (0..observed.len()).find(|&i| expected_p[i] == 0.0 && observed[i] > 0) {
        return Err(format!(
            "category {} was observed {} times but has probability 0",
            labels[i], observed[i]
        ));
    }
    Ok(())
}

/// The bins and the number of categories pooled, by the rule at [`goodness_of_fit`].
fn bin(labels: &[String], observed: &[u64], expected_p: &[f64]) -> (Vec<Bin>, usize) {
    let n = observed.iter().sum::<u64>() as f64;
    let (bins, pooled) = bin_with(n, expected_p, observed, |i| labels[i].clone());
    let bins = (bins.into_iter())
        .map(|b| Bin {
            label: b.label,
            observed: b.carried,
            expected: b.expected,
        })
        .collect();
    (bins, pooled)
}

/// The bins [`goodness_of_fit`] forms for `draws` draws over the categories' probabilities
/// `expected_p` (listed as a caller lists them, most probable first), with the probabilities
/// `actual_p` of another distribution over the same categories summed into the same bins:
/// each bin's expected probability and its actual one. What the test will see of an
/// alternative, for stating its power before any draw (the bins depend on the draw count,
/// not on the draws).
pub fn bin_probabilities(expected_p: &[f64], actual_p: &[f64], draws: u64) -> (Vec<f64>, Vec<f64>) {
    assert_eq!(
        expected_p.len(),
        actual_p.len(),
        "bin_probabilities: one actual probability per category"
    );
    let n = draws as f64;
    let (bins, _) = bin_with(n, expected_p, actual_p, |_| String::new());
    bins.into_iter()
        .map(|b| (b.expected / n, b.carried))
        .unzip()
}

/// One bin under construction: its label, what it carries of each category (observed counts,
/// or another distribution's probabilities) and its expected count.
struct Binned<T> {
    label: String,
    carried: T,
    expected: f64,
}

/// The rule at [`goodness_of_fit`] for `n` draws, carrying `carried[i]` along with each
/// category `i` into its bin; the bins and the number of categories pooled.
fn bin_with<T: Copy + std::ops::AddAssign>(
    n: f64,
    expected_p: &[f64],
    carried: &[T],
    label: impl Fn(usize) -> String,
) -> (Vec<Binned<T>>, usize) {
    let mut bins = Vec::new();
    // The pooled bins, in order; the last one is still taking categories.
    let mut tail: Vec<Binned<T>> = Vec::new();
    let mut pooled = 0;
    for (i, (&c, &p)) in carried.iter().zip(expected_p).enumerate() {
        if p == 0.0 {
            continue;
        }
        let expected = n * p;
        if expected >= MIN_EXPECTED {
            bins.push(Binned {
                label: label(i),
                carried: c,
                expected,
            });
            continue;
        }
        pooled += 1;
        match tail.last_mut() {
            Some(open) if open.expected < MIN_EXPECTED => {
                open.carried += c;
                open.expected += expected;
            }
            _ => tail.push(Binned {
                label: String::new(),
                carried: c,
                expected,
            }),
        }
    }
    if tail.len() >= 2 && tail.last().is_some_and(|b| b.expected < MIN_EXPECTED) {
        let short = tail.pop().expect("two pooled bins");
        let before = tail.last_mut().expect("one left");
        before.carried += short.carried;
        before.expected += short.expected;
    }
    match tail.len() {
        0 => return (bins, 0),
        1 => tail[0].label = POOLED_LABEL.to_string(),
        _ => (tail.iter_mut().enumerate()).for_each(|(i, b)| {
            b.label = format!("{POOLED_LABEL} {}", i + 1);
        }),
    }
    let smallest = bins
        .iter_mut()
        .min_by(|a, b| a.expected.total_cmp(&b.expected));
    match smallest {
        Some(host) if tail.len() == 1 && tail[0].expected < MIN_EXPECTED => {
            host.label = format!("{}+{POOLED_LABEL}", host.label);
            host.carried += tail[0].carried;
            host.expected += tail[0].expected;
        }
        _ => bins.extend(tail),
    }
    (bins, pooled)
}

/// Pearson's statistic over bins that all expect a positive count.
fn pearson(bins: &[Bin]) -> f64 {
    bins.iter()
        .map(|b| {
            let d = b.observed as f64 - b.expected;
            d * d / b.expected
        })
        .sum()
}

// The incomplete gamma function: a > 0 the shape, x > 0 the argument, P(a, x) = γ(a, x) / Γ(a)
// the lower regularized function, Q = 1 - P the upper one.

/// Stop summing once a step changes the result by less than this, relative.
const EPS: f64 = 1e-15;

/// A bound on iterations, so no input can loop for ever. Both expansions need a few times
/// √a steps at their slowest (x near a), so this covers a into the billions.
const MAX_ITERATIONS: usize = 1_000_000;

/// Where Stirling's series takes over from the recurrence. From z = 10 the first omitted term
/// (B_20 / (20·19·z^19)) is about 1e-19, far below the rounding of the result.
const STIRLING_FROM: f64 = 10.0;

/// Bernoulli numbers B_2, B_4, ..., B_18 as (numerator, denominator).
const BERNOULLI: [(f64, f64); 9] = [
    (1.0, 6.0),
    (-1.0, 30.0),
    (1.0, 42.0),
    (-1.0, 30.0),
    (5.0, 66.0),
    (-691.0, 2730.0),
    (7.0, 6.0),
    (-3617.0, 510.0),
    (43867.0, 798.0),
];

/// Q(a, x), choosing the expansion that converges fast where it is used: the series for P
/// below x = a + 1, where P is at most about 0.92 so 1 - P loses at most one digit, and the
/// continued fraction for Q above, which stays accurate however small Q gets.
fn upper_gamma_q(a: f64, x: f64) -> f64 {
    if x < a + 1.0 {
        1.0 - lower_by_series(a, x)
    } else {
        upper_by_continued_fraction(a, x)
    }
}

/// P(a, x) = x^a e^-x / Γ(a + 1) · Σ_{k>=0} x^k / ((a+1)(a+2)···(a+k)), which follows from
/// integrating the series of e^-t term by term. Used for x < a + 1, where the ratio of
/// successive terms, x / (a + k), is below 1 from the start.
fn lower_by_series(a: f64, x: f64) -> f64 {
    let mut term = 1.0;
    let mut sum = 1.0;
    let mut denominator = a;
    for _ in 0..MAX_ITERATIONS {
        denominator += 1.0;
        term *= x / denominator;
        sum += term;
        if term < sum * EPS {
            break;
        }
    }
    // Γ(a + 1) = a Γ(a), so the prefactor is the kernel over a.
    (ln_kernel(a, x) + (sum / a).ln()).exp()
}

/// Q(a, x) = x^a e^-x / Γ(a) · 1/f, with Legendre's continued fraction
/// f = b_0 + c_1/(b_1 + c_2/(b_2 + ...)), b_j = x + 2j + 1 - a, c_j = -j (j - a).
/// Evaluated front to back by the modified Lentz method (Lentz 1976; Thompson and Barnett
/// 1986), which needs no bound on the depth in advance. Used for x >= a + 1, so b_0 >= 2.
fn upper_by_continued_fraction(a: f64, x: f64) -> f64 {
    // Lentz divides by these running ratios; nudging an exact zero off zero keeps the
    // recurrence going without changing the limit.
    const TINY: f64 = 1e-300;
    let nonzero = |v: f64| if v.abs() < TINY { TINY } else { v };
    let mut f = x + 1.0 - a;
    // With A_j / B_j the j-th convergent, c holds A_j / A_{j-1} and d holds B_{j-1} / B_j:
    // ratios stay near 1 where the convergents themselves could overflow.
    let mut c = f;
    let mut d = 0.0;
    for j in 1..=MAX_ITERATIONS {
        let jf = j as f64;
        let c_j = -jf * (jf - a);
        let b_j = x + 2.0 * jf + 1.0 - a;
        d = 1.0 / nonzero(b_j + c_j * d);
        c = nonzero(b_j + c_j / c);
        let step = c * d;
        f *= step;
        if (step - 1.0).abs() < EPS {
            break;
        }
    }
    (ln_kernel(a, x) - f.ln()).exp()
}

/// ln(x^a e^-x / Γ(a)), the factor both expansions share, kept in logs so that tail
/// probabilities far below the smallest f64 underflow cleanly to 0 instead of becoming
/// inf / inf.
fn ln_kernel(a: f64, x: f64) -> f64 {
    if a < STIRLING_FROM {
        return a * x.ln() - x - ln_gamma(a);
    }
    // With Stirling's form of ln Γ(a) written out, a ln x - x - ln Γ(a) becomes
    // a (ln(1 + t) - t) + ln(a)/2 - ln(2π)/2 - tail(a), t = (x - a) / a. The large terms a ln a
    // and a then cancel exactly rather than in rounding, so the error grows with |x - a|
    // instead of with a: this is what keeps thousands of degrees of freedom accurate.
    let t = (x - a) / a;
    a * (t.ln_1p() - t) + 0.5 * a.ln() - 0.5 * (2.0 * PI).ln() - stirling_tail(a)
}

/// ln Γ(a) for a > 0: Stirling's series at z = a + k >= [`STIRLING_FROM`], brought back
/// down by Γ(a) = Γ(a + k) / (a (a+1) ··· (a+k-1)). Within 1e-13 relative for a >= 0.5
/// (absolute near its zeros at 1 and 2), which is all this module asks of it.
fn ln_gamma(a: f64) -> f64 {
    let mut z = a;
    let mut product = 1.0;
    while z < STIRLING_FROM {
        product *= z;
        z += 1.0;
    }
    (z - 0.5) * z.ln() - z + 0.5 * (2.0 * PI).ln() + stirling_tail(z) - product.ln()
}

/// The correction in Stirling's series, ln Γ(z) - ((z - 1/2) ln z - z + ln(2π)/2)
/// = Σ_{k>=1} B_2k / (2k (2k-1) z^(2k-1)), truncated after B_18, for z >= [`STIRLING_FROM`].
fn stirling_tail(z: f64) -> f64 {
    let w = 1.0 / (z * z);
    // Horner's rule in 1/z², from the smallest term up.
    let mut sum = 0.0;
    for (k, &(num, den)) in BERNOULLI.iter().enumerate().rev() {
        let two_k = 2.0 * (k + 1) as f64;
        sum = sum * w + num / (den * two_k * (two_k - 1.0));
    }
    sum / z
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    fn assert_close(got: f64, want: f64, rel: f64, what: &str) {
        assert!(
            (got - want).abs() <= rel * want.abs(),
            "{what}: got {got:e}, want {want:e} (relative error {:e})",
            ((got - want) / want).abs()
        );
    }

    /// The words of `names`, as category labels.
    fn labels(names: &str) -> Vec<String> {
        names.split(' ').map(str::to_string).collect()
    }

    /// x from 0.01 to 200, spaced evenly in log x.
    fn grid() -> impl Iterator<Item = f64> {
        (0..=200).map(|i| 0.01 * 20_000f64.powf(i as f64 / 200.0))
    }

    #[test]
    fn ln_gamma_matches_factorials_and_known_values() {
        let mut factorial = 1.0f64;
        for n in 1..=30 {
            // Γ(n) = (n - 1)!, exact in f64 this far.
            let want = factorial.ln();
            let got = ln_gamma(n as f64);
            assert!(
                (got - want).abs() <= 1e-13 * want.abs().max(1.0),
                "ln Γ({n}) = {got}, want {want}"
            );
            factorial *= n as f64;
        }
        // Half-integer and larger values from mpmath.loggamma at 60 digits.
        let table = [
            (0.5, 0.572_364_942_924_700_1),
            (1.5, -0.120_782_237_635_245_22),
            (2.5, 0.284_682_870_472_919_2),
            (3.5, 1.200_973_602_347_074_3),
            (9.5, 11.689_333_420_797_269),
            (10.5, 13.940_625_219_403_763),
            (50.0, 144.565_743_946_344_9),
            (500.0, 2_605.115_850_361_734),
            (100_000.5, 1_051_293.465_435_139_4),
        ];
        for (a, want) in table {
            assert_close(ln_gamma(a), want, 1e-13, &format!("ln Γ({a})"));
        }
        // Γ(1/2) = √π.
        assert_close(ln_gamma(0.5), 0.5 * PI.ln(), 1e-14, "ln Γ(1/2)");
    }

    #[test]
    fn sf_matches_closed_forms_for_two_and_four_degrees_of_freedom() {
        for x in grid() {
            assert_close(
                chi_square_sf(x, 2),
                (-x / 2.0).exp(),
                1e-12,
                &format!("df 2, x {x}"),
            );
            let want = (-x / 2.0).exp() * (1.0 + x / 2.0);
            assert_close(chi_square_sf(x, 4), want, 1e-12, &format!("df 4, x {x}"));
        }
    }

    #[test]
    fn sf_matches_erfc_for_one_degree_of_freedom() {
        // Q(1/2, x/2) = erfc(√(x/2)). Values from python3's math.erfc(math.sqrt(x / 2)), each
        // checked against mpmath.gammainc(0.5, x/2, inf, regularized=True) at 60 digits to a
        // relative 1e-14.
        let table = [
            (0.01, 0.920_344_325_445_942),
            (0.1, 0.751_829_634_045_849_2),
            (0.5, 0.479_500_122_186_953_5),
            (1.0, 0.317_310_507_862_914_04),
            (1.5, 0.220_671_361_919_846_82),
            (2.0, 0.157_299_207_050_285_13),
            (3.0, 0.083_264_516_663_550_43),
            (5.0, 0.025_347_318_677_468_252),
            (10.0, 0.001_565_402_258_002_548_8),
            (20.0, 7.744_216_431_044_074e-6),
            (50.0, 1.537_459_794_428_035_1e-12),
            (100.0, 1.523_970_604_832_099_5e-23),
            (200.0, 2.088_487_583_762_545e-45),
        ];
        for (x, want) in table {
            assert_close(chi_square_sf(x, 1), want, 1e-12, &format!("df 1, x {x}"));
        }
    }

    #[test]
    fn sf_meets_critical_values_many_degrees_of_freedom_and_far_tails() {
        // Textbook critical values, then (df, x, Q(df/2, x/2)) from mpmath.gammainc(df/2, x/2,
        // inf, regularized=True) at 60 significant digits, rounded to the nearest f64.
        let table = [
            (1, 3.841_458_820_694_124, 0.05),
            (10, 18.307_038_053_275_146, 0.05),
            (5, 15.086_272_469_388_99, 0.01),
            (1000, 1000.0, 0.494_052_853_829_239_64),
            (1000, 950.0, 0.869_124_065_745_688_5),
            (1000, 1050.0, 0.132_474_056_821_477_1),
            (1000, 1100.0, 0.014_614_408_126_295_194),
            (1000, 900.0, 0.989_282_761_908_710_2),
            (999, 1000.0, 0.485_131_489_274_901_47),
            (100_000, 100_000.0, 0.499_405_291_895_206_7),
            (100_000, 101_000.0, 0.012_868_840_377_233_67),
            (1, 1370.0, 6.942_937_364_643_268e-300),
            (3, 1390.0, 4.356_067_937_864_678e-301),
            (10, 1400.0, 9.920_391_479_800_145e-295),
            (1000, 3000.0, 1.643_684_584_356_954_3e-198),
            (7, 0.001, 0.999_999_999_999_759_8),
        ];
        for (df, x, want) in table {
            assert_close(chi_square_sf(x, df), want, 1e-9, &format!("df {df}, x {x}"));
        }
        // Q is 1 - 2e-61 here, and below every f64 (2.3e-353) further out.
        assert_eq!(chi_square_sf(500.0, 1000), 1.0);
        assert_eq!(chi_square_sf(4000.0, 1000), 0.0);
    }

    #[test]
    fn sf_edge_cases() {
        assert!(chi_square_sf(f64::NAN, 3).is_nan());
        assert!(chi_square_sf(f64::NAN, 0).is_nan());
        for df in [0, 1, 2, 7] {
            assert_eq!(chi_square_sf(0.0, df), 1.0);
            assert_eq!(chi_square_sf(-1.0, df), 1.0);
            assert_eq!(chi_square_sf(f64::NEG_INFINITY, df), 1.0);
        }
        assert_eq!(chi_square_sf(1e-300, 0), 0.0);
        assert_eq!(chi_square_sf(5.0, 0), 0.0);
        for df in [1, 2, 3, 10, 1000, 100_000] {
            for x in [1e7, 1e300, f64::MAX, f64::INFINITY] {
                let q = chi_square_sf(x, df);
                assert!((0.0..1e-300).contains(&q), "df {df}, x {x}: {q}");
            }
            // Tiny x leaves all the mass above it, to within rounding (P < 1e-150).
            assert_eq!(chi_square_sf(f64::MIN_POSITIVE, df), 1.0, "df {df}");
        }
        // The sf never rises with x.
        let mut last = 1.0;
        for x in grid() {
            let q = chi_square_sf(x, 6);
            assert!(q <= last);
            last = q;
        }
    }

    /// The fit of `observed` against `p`, categories named by the words of `names`.
    fn fit(names: &str, observed: &[u64], p: &[f64]) -> Result<GoodnessOfFit, String> {
        goodness_of_fit(&labels(names), observed, p)
    }

    fn bin_labels(fit: &GoodnessOfFit) -> Vec<&str> {
        fit.bins.iter().map(|b| b.label.as_str()).collect()
    }

    #[test]
    fn a_perfect_fit_has_statistic_zero_and_p_one() {
        let fit = fit("a b c", &[10, 20, 30], &[1.0 / 6.0, 1.0 / 3.0, 0.5]).unwrap();
        assert!(fit.statistic < 1e-20, "{}", fit.statistic);
        assert_eq!((fit.df, fit.pooled, fit.bins.len()), (2, 0, 3));
        assert_close(fit.p_value, 1.0, 1e-15, "p");
    }

    #[test]
    fn a_hand_computed_statistic() {
        // n = 60, 20 expected each: (10² + 0 + 10²) / 20 = 10 on 2 df, p = e^-5.
        let fit = fit("a b c", &[30, 20, 10], &[1.0 / 3.0; 3]).unwrap();
        assert_close(fit.statistic, 10.0, 1e-12, "statistic");
        assert_eq!(fit.df, 2);
        assert_close(fit.p_value, (-5.0f64).exp(), 1e-12, "p");
    }

    #[test]
    fn small_categories_are_pooled_into_one_bin_placed_last() {
        // n = 100: expected 40, 30, 20 stand alone; 4 + 3 + 2 + 1 = 10 pool, observed 12.
        // Statistic by hand: 4/40 + 9/30 + 9/20 + 4/10 = 1.25 on 3 df; p = Q(3/2, 0.625)
        // = 0.74103888881652940 (mpmath.gammainc, 60 digits).
        let p = [0.4, 0.3, 0.2, 0.04, 0.03, 0.02, 0.01];
        let fit = fit("a b c d e f g", &[38, 33, 17, 5, 2, 4, 1], &p).unwrap();
        assert_eq!(fit.pooled, 4);
        assert_eq!(bin_labels(&fit), ["a", "b", "c", POOLED_LABEL]);
        assert_eq!(fit.bins[3].observed, 12);
        assert_close(fit.bins[3].expected, 10.0, 1e-12, "pooled expected");
        assert_eq!(fit.df, 3);
        assert_close(fit.statistic, 1.25, 1e-12, "statistic");
        assert_close(chi_square_sf(1.25, 3), 0.741_038_888_816_529_4, 1e-12, "Q");
        // Four categories expected fewer than 5 draws: the p-value is a Monte Carlo one, which
        // on bins this full lands within 0.005 (3.5 standard errors) of chi-square's.
        assert_eq!(fit.monte_carlo, Some(MONTE_CARLO_REPLICATES));
        assert!((fit.p_value - 0.741).abs() < 0.005, "{}", fit.p_value);
    }

    #[test]
    fn a_long_tail_fills_several_pooled_bins_in_order() {
        // n = 100: a stands alone (60); the tail 4, 3 | 2, 2, 2 | 4, 3 | 2 closes a bin at 7,
        // 6 and 7; the last (2) is short and joins the third.
        let p = [0.6, 0.04, 0.03, 0.02, 0.02, 0.02, 0.04, 0.03, 0.02, 0.18];
        let o = [60, 4, 3, 2, 2, 2, 4, 3, 2, 18];
        let fit = fit("a b c d e f g h i j", &o, &p).unwrap();
        assert_eq!(
            bin_labels(&fit),
            ["a", "j", "pooled 1", "pooled 2", "pooled 3"]
        );
        let expected: Vec<f64> = fit.bins.iter().map(|b| b.expected).collect();
        for (got, want) in expected.iter().zip([60.0, 18.0, 7.0, 6.0, 9.0]) {
            assert_close(*got, want, 1e-12, "expected");
        }
        assert_eq!(fit.pooled, 8);
        assert_eq!(fit.df, 4);
    }

    /// The bins a power calculation sees are the test's: the same tail case at n = 100, with
    /// another distribution's probabilities summed into the bins its categories fall in
    /// (two points moved from `a` onto `i`, the last category of the third pooled bin).
    #[test]
    fn an_alternative_is_binned_as_the_test_bins_the_draws() {
        let p = [0.6, 0.04, 0.03, 0.02, 0.02, 0.02, 0.04, 0.03, 0.02, 0.18];
        let mut q = p;
        (q[0], q[8]) = (0.58, 0.04);
        let (expected, actual) = bin_probabilities(&p, &q, 100);
        for (got, want) in expected.iter().zip([0.60, 0.18, 0.07, 0.06, 0.09]) {
            assert_close(*got, want, 1e-12, "expected");
        }
        for (got, want) in actual.iter().zip([0.58, 0.18, 0.07, 0.06, 0.11]) {
            assert_close(*got, want, 1e-12, "actual");
        }
        // Fewer draws pool more: at n = 20 only `a` (12) stands alone, and the other nine
        // (0.8, 0.6, ..., 3.6) fill one band of 8, which then holds both moved points' ends
        // apart: `a` loses them, the band gains them.
        let (expected, actual) = bin_probabilities(&p, &q, 20);
        assert_eq!(expected.len(), 2, "{expected:?}");
        assert_close(expected[0], 0.6, 1e-12, "a alone");
        assert_close(actual[1], 0.42, 1e-12, "the band");
    }

    #[test]
    fn the_monte_carlo_p_value_matches_an_exact_binomial_tail() {
        // Two bins of n = 10 at 1/2 each: T = (o - 5)² · 2/5, so T >= 3.6 is |o - 5| >= 3,
        // whose probability is 2 · (45 + 10 + 1) / 1024 = 0.109375 exactly; 99,999 replicates
        // have a standard error of 0.001.
        let bins = |o: u64| {
            [("x", o), ("y", 10 - o)].map(|(label, observed)| Bin {
                label: label.to_string(),
                observed,
                expected: 5.0,
            })
        };
        let p = monte_carlo_sf(&bins(8), 3.6, MONTE_CARLO_REPLICATES, MONTE_CARLO_SEED);
        assert!((p - 0.109_375).abs() < 0.004, "{p}");
        assert_eq!(
            p,
            monte_carlo_sf(&bins(8), 3.6, MONTE_CARLO_REPLICATES, MONTE_CARLO_SEED)
        );
        // A statistic no replicate reaches gives the smallest value, never 0.
        let p = monte_carlo_sf(&bins(10), 1e9, 999, 1);
        assert_eq!(p, 1.0 / 1000.0);
        // The perfect fit: every replicate reaches T = 0.
        assert_eq!(monte_carlo_sf(&bins(5), 0.0, 999, 1), 1.0);
    }

    #[test]
    fn a_pooled_bin_still_too_small_joins_the_smallest_bin() {
        // n = 100: c and d pool to 3 + 1 = 4 < 5, so they join b (46, smaller than a's 50).
        let merged = fit("a b c d", &[47, 45, 6, 2], &[0.5, 0.46, 0.03, 0.01]).unwrap();
        assert_eq!(merged.pooled, 2);
        assert_eq!(bin_labels(&merged), ["a", "b+pooled"]);
        assert_eq!(merged.bins[1].observed, 53);
        assert_close(merged.bins[1].expected, 50.0, 1e-12, "merged expected");
        // (47 - 50)² / 50 + (53 - 50)² / 50 = 0.36 on 1 df.
        assert_eq!(merged.df, 1);
        assert_close(merged.statistic, 0.36, 1e-12, "statistic");
        // Ties go to the first: here a and b both expect 48.
        let tied = fit("a b c", &[50, 46, 4], &[0.48, 0.48, 0.04]).unwrap();
        assert_eq!(bin_labels(&tied), ["a+pooled", "b"]);
    }

    #[test]
    fn fewer_than_two_bins_leave_nothing_to_test() {
        // n = 4 over four equal categories: everything pools into one bin, still short of 5.
        let one = fit("a b c d", &[2, 1, 1, 0], &[0.25; 4]).unwrap();
        assert_eq!(
            (one.statistic, one.df, one.p_value, one.pooled),
            (0.0, 0, 1.0, 4)
        );
        assert_eq!(one.bins.len(), 1);
        // No draws at all.
        let none = fit("a b", &[0, 0], &[0.5, 0.5]).unwrap();
        assert_eq!((none.statistic, none.df, none.p_value), (0.0, 0, 1.0));
    }

    #[test]
    fn a_draw_on_a_zero_probability_category_is_an_error_not_pooled() {
        let names = "a b tok_7 c";
        let err = fit(names, &[50, 48, 1, 1], &[0.5, 0.49, 0.0, 0.01]).unwrap_err();
        assert!(
            err.contains("tok_7") && err.contains("probability 0"),
            "{err}"
        );
        // Never observed, it is simply left out: c still pools alone (and joins b).
        let fit = fit(names, &[50, 49, 0, 1], &[0.5, 0.49, 0.0, 0.01]).unwrap();
        assert_eq!(fit.pooled, 1);
        assert_eq!(bin_labels(&fit), ["a", "b+pooled"]);
    }

    #[test]
    fn malformed_inputs_are_errors() {
        assert!(fit("a b", &[1, 2, 3], &[0.5, 0.5]).is_err());
        assert!(fit("a b", &[1, 2], &[0.5, 0.6]).is_err());
        let negative = fit("a b", &[1, 2], &[1.5, -0.5]).unwrap_err();
        assert!(negative.contains("category b "), "{negative}");
        assert!(fit("a b", &[1, 2], &[f64::NAN, 0.5]).is_err());
        // Within the tolerance is fine.
        assert!(fit("a b", &[1, 2], &[0.5, 0.5 + 1e-12]).is_ok());
    }

    /// Weights in hundredths, so one draw is `below(100)` mapped through the cumulative
    /// weights: an exact categorical draw (SplitMix64's modulo bias is about 5e-18).
    const WEIGHTS: [usize; 6] = [30, 25, 20, 12, 8, 5];

    fn draw_counts(weights: &[usize; 6], n: usize, seed: u64) -> [u64; 6] {
        let mut rng = Rng::new(seed);
        let mut counts = [0u64; 6];
        for _ in 0..n {
            let mut u = rng.below(100);
            let mut k = 0;
            while u >= weights[k] {
                u -= weights[k];
                k += 1;
            }
            counts[k] += 1;
        }
        counts
    }

    fn p_values(true_weights: &[usize; 6], n: usize) -> Vec<f64> {
        let names = labels("a b c d e f");
        let claimed: Vec<f64> = WEIGHTS.iter().map(|&w| w as f64 / 100.0).collect();
        (0..200)
            .map(|seed| {
                let counts = draw_counts(true_weights, n, seed);
                let fit = goodness_of_fit(&names, &counts, &claimed).unwrap();
                assert_eq!((fit.df, fit.pooled), (5, 0));
                fit.p_value
            })
            .collect()
    }

    #[test]
    fn p_values_are_calibrated_under_the_null() {
        // A wrong statistic or a wrong sf shows up as a rejection rate far from 5%: with 200
        // seeds the rate's standard error is 1.5 points.
        let p = p_values(&WEIGHTS, 2000);
        let share = |level: f64| p.iter().filter(|&&v| v < level).count() as f64 / p.len() as f64;
        let at_5 = share(0.05);
        assert!((0.01..=0.12).contains(&at_5), "share below 0.05: {at_5}");
        // The bulk too: about half the p-values fall below 0.5.
        let at_50 = share(0.5);
        assert!((0.38..=0.62).contains(&at_50), "share below 0.5: {at_50}");
    }

    #[test]
    fn a_shift_of_five_points_is_found() {
        // 0.05 of mass moved from the first category to the second.
        let shifted = [25, 30, 20, 12, 8, 5];
        let p = p_values(&shifted, 20_000);
        let rejected = p.iter().filter(|&&v| v < 1e-3).count();
        assert!(rejected >= 195, "rejected in {rejected} of 200 seeds");
    }

    #[test]
    fn bonferroni_divides_the_budget() {
        assert_eq!(bonferroni(0.05, 1), 0.05);
        assert_close(bonferroni(0.05, 10), 0.005, 1e-15, "10 tests");
    }
}
