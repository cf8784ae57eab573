//! The oracle of `dist` (`llama_sampler_init_dist`): the softmax of the candidates it is
//! handed. F2's chains that end in `dist` print it after every stage, compare llama.cpp's `p`
//! with it, and hand it to F7's detector to judge the draws.
//!
//! Computed in f64 with the maximum found by scanning every entry (never assumed to be the
//! first), so every weight `exp(l_i - max)` is in [0, 1], nothing overflows and the sum is
//! at least 1. Each `p` is then within a relative [`relative_accuracy`] of the real softmax
//! of the f32 logits (`l_i - max` is exact in f64; about one rounding for `exp`, n for the
//! sum, one for the division).

use crate::truncation::Pool;
use crate::TokenId;

/// One candidate and the probability the oracle gives it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Share {
    pub id: TokenId,
    pub logit: f32,
    pub p: f64,
}

/// Relative accuracy of every `p` of [`softmax`] over `n` entries: `(n + 4) 2^-52`.
pub fn relative_accuracy(n: usize) -> f64 {
    (n as f64 + 4.0) * f64::EPSILON
}

/// The smallest positive normal f32. llama.cpp's `p` below it is subnormal (its weight
/// `expf(l - m)` is), where a relative bound means nothing: such a `p` is checked only to be
/// within this absolute floor.
pub const SUBNORMAL_FLOOR: f64 = f32::MIN_POSITIVE as f64;

/// How far llama.cpp's `p` may be from the oracle's, relatively, entry by entry, given `m`,
/// the logit llama.cpp subtracts (`data[0]`'s when the array is flagged sorted, else the
/// scanned maximum).
///
/// llama.cpp's dist (`llama_sampler_dist_apply`, the same arithmetic in b10200 and b11429)
/// writes `p_i = (float)((double)expf(l_i - m) / sum)`, `sum` a double accumulating the f32
/// weights. Each weight carries the f32 rounding of `l_i - m` (a relative `2^-24` of the
/// difference, so an error of `|l_i - m| 2^-24` in the exponent, hence relatively in the
/// weight) and expf's own (at most 2 ulps, `2^-22`, assumed); the sum carries its weights'
/// errors averaged by their shares plus `n 2^-53` for the additions; the division in double
/// adds `2^-53` and the final f32 rounding `2^-24`. The oracle's own error
/// ([`relative_accuracy`]) is added, and the first-order total is doubled to cover the
/// products of the terms. It is a few tens of f32 ulps for moderate differences and grows
/// with n only through `n 2^-53`, so a wrong renormalization of even one share in a million
/// fails it.
pub fn subject_relative_tolerance(oracle: &[Share], m: f64) -> Vec<f64> {
    let n = oracle.len() as f64;
    let weight = |s: &Share| (s.logit as f64 - m).abs() * 2f64.powi(-24) + 2f64.powi(-22);
    let sum = oracle.iter().map(|s| s.p * weight(s)).sum::<f64>() + n * 2f64.powi(-53);
    oracle
        .iter()
        .map(|s| {
            2.0 * (weight(s)
                + sum
                + 2f64.powi(-53)
                + 2f64.powi(-24)
                + relative_accuracy(oracle.len()))
        })
        .collect()
}

/// The absolute tolerance of each entry: its relative tolerance times the oracle's `p`, at
/// least [`SUBNORMAL_FLOOR`].
pub fn subject_tolerance(oracle: &[Share], m: f64) -> Vec<f64> {
    oracle
        .iter()
        .zip(subject_relative_tolerance(oracle, m))
        .map(|(s, r)| (r * s.p).max(SUBNORMAL_FLOOR))
        .collect()
}

/// The softmax of `pool`'s logits, in the pool's canonical order (largest logit first, ids
/// ascending among equal logits). A `-inf` entry gets probability 0 exactly; equal logits get
/// equal probabilities exactly.
///
/// Errors (one line): an empty pool, a NaN or `+inf` logit, or no finite logit (there is
/// nothing to draw).
pub fn softmax(pool: &Pool) -> Result<Vec<Share>, String> {
    let entries = pool.entries();
    if entries.is_empty() {
        return Err("dist: no candidates to draw from".to_string());
    }
    let bad = entries
        .iter()
        .find(|e| e.logit.is_nan() || e.logit == f32::INFINITY);
    if let Some(e) = bad {
        return Err(format!("dist: id {} has logit {}", e.id, e.logit));
    }
    let max = entries
        .iter()
        .map(|e| e.logit as f64)
        .fold(f64::NEG_INFINITY, f64::max);
    if max == f64::NEG_INFINITY {
        return Err("dist: every logit is -inf; there is nothing to draw".to_string());
    }
    let weights: Vec<f64> = entries
        .iter()
        .map(|e| (e.logit as f64 - max).exp())
        .collect();
    let sum: f64 = weights.iter().sum();
    Ok(entries
        .iter()
        .zip(weights)
        .map(|(e, w)| Share {
            id: e.id,
            logit: e.logit,
            p: w / sum,
        })
        .collect())
}

/// One `p` llama.cpp wrote that is not the oracle's.
#[derive(Debug, Clone, PartialEq)]
pub struct WrongP {
    pub id: TokenId,
    /// What llama.cpp wrote (`None`: the id is not in its array).
    pub subject: Option<f32>,
    pub oracle: f64,
}

impl WrongP {
    pub fn describe(&self) -> String {
        match self.subject {
            Some(p) => format!(
                "id {}: p {p} where the oracle has {:.9}",
                self.id, self.oracle
            ),
            None => format!(
                "id {}: missing, the oracle has p {:.9}",
                self.id, self.oracle
            ),
        }
    }
}

/// The entries of `subject` (`(id, p)` as llama.cpp left them) whose `p` is not finite or is
/// further than [`subject_tolerance`] (for the subtracted logit `m`) from the oracle's, and
/// the oracle's ids it lacks.
pub fn wrong_p(subject: &[(TokenId, f32)], oracle: &[Share], m: f64) -> Vec<WrongP> {
    let tolerances = subject_tolerance(oracle, m);
    (oracle.iter().zip(tolerances))
        .filter_map(|(share, tol)| {
            let got = subject.iter().find(|(id, _)| *id == share.id).map(|x| x.1);
            let ok = got.is_some_and(|p| p.is_finite() && (p as f64 - share.p).abs() <= tol);
            (!ok).then_some(WrongP {
                id: share.id,
                subject: got,
                oracle: share.p,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::truncation::Entry;

    fn pool(logits: &[f32]) -> Pool {
        Pool::from_logits(logits)
    }

    fn p_of(shares: &[Share], id: i32) -> f64 {
        shares.iter().find(|s| s.id == TokenId(id)).unwrap().p
    }

    #[test]
    fn a_hand_computed_softmax() {
        // ln 1, ln 2, ln 3 and ln 4 give 1/10 .. 4/10.
        let logits: Vec<f32> = [1.0f64, 2.0, 3.0, 4.0]
            .iter()
            .map(|x| x.ln() as f32)
            .collect();
        let s = softmax(&pool(&logits)).unwrap();
        for (id, want) in [(0, 0.1), (1, 0.2), (2, 0.3), (3, 0.4)] {
            // The logits are f32 roundings of ln k, so p is within 2^-24 relative of k/10.
            let got = p_of(&s, id);
            assert!((got - want).abs() <= 1e-7 * want, "id {id}: {got}");
        }
        assert_eq!(s[0].id, TokenId(3), "largest first");
        let sum: f64 = s.iter().map(|x| x.p).sum();
        assert!((sum - 1.0).abs() <= relative_accuracy(4));
    }

    #[test]
    fn ties_get_exactly_equal_probabilities() {
        let s = softmax(&pool(&[0.5, 2.0, 0.5, 2.0, 0.5])).unwrap();
        assert_eq!(
            (p_of(&s, 1), p_of(&s, 0), p_of(&s, 0)),
            (p_of(&s, 3), p_of(&s, 2), p_of(&s, 4))
        );
        // e^1.5 / (2 e^1.5 + 3) for each of the top pair.
        let want = 1.5f64.exp() / (2.0 * 1.5f64.exp() + 3.0);
        assert!((p_of(&s, 1) - want).abs() <= relative_accuracy(5) * want);
        // Canonical order: ids ascending among equal logits.
        let ids: Vec<i32> = s.iter().map(|x| x.id.0).collect();
        assert_eq!(ids, [1, 3, 0, 2, 4]);
    }

    #[test]
    fn minus_infinity_gets_zero_and_takes_no_mass() {
        let s = softmax(&pool(&[f32::NEG_INFINITY, 0.0, f32::NEG_INFINITY, 0.0])).unwrap();
        let p: Vec<f64> = (0..4).map(|id| p_of(&s, id)).collect();
        assert_eq!(p, [0.0, 0.5, 0.0, 0.5]);
    }

    #[test]
    fn a_huge_logit_neither_overflows_nor_needs_to_come_first() {
        // The maximum is found by scanning: a pool built in any order gives the same answer,
        // and a logit 1e4 above the rest takes all the mass without an overflow.
        let entries = [(0, -3.0), (1, 1e4), (2, 1e4 - 1.0), (3, -1e4)];
        let p = Pool::new(entries.map(|(id, logit)| Entry {
            id: TokenId(id),
            logit,
        }));
        let s = softmax(&p).unwrap();
        assert!(s.iter().all(|x| x.p.is_finite()));
        let e = (-1.0f64).exp();
        assert!((p_of(&s, 1) - 1.0 / (1.0 + e)).abs() <= 1e-15);
        assert!((p_of(&s, 2) - e / (1.0 + e)).abs() <= 1e-15);
        assert_eq!(p_of(&s, 0), 0.0, "e^-10003 is below every f64");
        assert_eq!(p_of(&s, 3), 0.0);
        // One finite entry among -inf ones takes everything.
        let s = softmax(&pool(&[f32::NEG_INFINITY, 7.5])).unwrap();
        assert_eq!(p_of(&s, 1), 1.0);
    }

    #[test]
    fn nothing_to_draw_is_an_error() {
        let ninf = f32::NEG_INFINITY;
        for logits in [&[][..], &[ninf; 3], &[0.0, f32::NAN], &[0.0, f32::INFINITY]] {
            assert!(softmax(&pool(logits)).is_err(), "{logits:?}");
        }
    }

    #[test]
    fn wrong_p_flags_non_finite_missing_and_distant_values_only() {
        let s = softmax(&pool(&[0.0, 0.0])).unwrap();
        let tol = subject_tolerance(&s, 0.0);
        let near = (0.5 + tol[1] / 2.0) as f32;
        assert!(wrong_p(&[(TokenId(0), 0.5), (TokenId(1), near)], &s, 0.0).is_empty());
        let w = wrong_p(&[(TokenId(0), f32::NAN), (TokenId(1), 0.5)], &s, 0.0);
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].id, TokenId(0));
        let w = wrong_p(&[(TokenId(0), 0.5)], &s, 0.0);
        assert_eq!((w.len(), w[0].subject), (1, None));
        let w = wrong_p(&[(TokenId(0), 0.4), (TokenId(1), 0.6)], &s, 0.0);
        assert_eq!(w.len(), 2);
        assert!(w[0].describe().contains("id 0"));
    }

    #[test]
    fn the_tolerance_is_relative_and_does_not_let_zero_pass_on_a_large_pool() {
        // 100,000 equal logits: each p is 1e-5; writing 0 everywhere must fail, as must a
        // renormalization that is off by one share in a million.
        let n = 100_000;
        let s = softmax(&pool(&vec![0.0; n])).unwrap();
        let r = subject_relative_tolerance(&s, 0.0);
        assert!(r.iter().all(|&x| x < 1e-5), "{}", r[0]);
        let zeros: Vec<(TokenId, f32)> = s.iter().map(|x| (x.id, 0.0)).collect();
        assert_eq!(wrong_p(&zeros, &s, 0.0).len(), n);
        let off: Vec<(TokenId, f32)> = s
            .iter()
            .map(|x| (x.id, (x.p * (1.0 + 1e-5)) as f32))
            .collect();
        assert_eq!(wrong_p(&off, &s, 0.0).len(), n);
        // A p below the smallest normal f32 is held to the absolute floor only.
        let s = softmax(&pool(&[0.0, -95.0])).unwrap();
        assert!(s[1].p < SUBNORMAL_FLOOR);
        let w = wrong_p(&[(TokenId(0), 1.0), (TokenId(1), 0.0)], &s, 0.0);
        assert!(w.is_empty(), "{w:?}");
    }

    #[test]
    fn llama_cpp_arithmetic_with_an_honest_maximum_passes() {
        // expf in f32 on an f32 difference, the sum in f64, the division in f64, rounded to
        // f32: what llama.cpp writes when the maximum is right.
        let logits: Vec<f32> = (0..4096)
            .map(|i| ((i * 37) % 1000) as f32 * -0.05)
            .collect();
        let s = softmax(&pool(&logits)).unwrap();
        let w: Vec<f32> = logits.iter().map(|l| (l - 0.0f32).exp()).collect();
        let sum: f64 = w.iter().map(|&x| x as f64).sum();
        let subject: Vec<(TokenId, f32)> = w
            .iter()
            .enumerate()
            .map(|(i, &x)| (TokenId(i as i32), (x as f64 / sum) as f32))
            .collect();
        assert!(wrong_p(&subject, &s, 0.0).is_empty());
    }
}
