//! The oracle of `dist` (`llama_sampler_init_dist`): the distribution its draw promises,
//! which is the softmax of the logits of the candidates it is handed.
//!
//! Serves F2's chains that end in `dist`: the chain CLI prints this distribution after every
//! stage, compares the `p` llama.cpp writes into the array with it, and hands it to F7's
//! detector (`detector::judge`) to judge the draws.
//!
//! Computed exactly in the sense that matters here: in f64, with the maximum found by
//! scanning every entry (never assumed to be the first), every weight `exp(l_i - max)` in
//! [0, 1], so nothing overflows, and the sum over n entries is at least 1. Each `p` is then
//! within a relative [`relative_accuracy`] of the real softmax of the given f32 logits
//! (one rounding for `l_i - max`, which is exact in f64 for f32 inputs, about one for `exp`,
//! n for the sum, one for the division).

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

/// How far llama.cpp's `p` may be from the oracle's, absolutely, over `n` entries: it
/// computes each weight with `expf` on an f32 difference and divides in f32, so each `p`
/// carries a few f32 roundings plus the sum's: `8 (n + 2) 2^-23`, the bound the oracle gives
/// every f32 sum of n probabilities (`truncation`).
pub fn subject_tolerance(n: usize) -> f64 {
    8.0 * (n as f64 + 2.0) * f32::EPSILON as f64
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
    if let Some(e) = entries
        .iter()
        .find(|e| e.logit.is_nan() || e.logit == f32::INFINITY)
    {
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
/// further than [`subject_tolerance`] from the oracle's, and the oracle's ids it lacks.
pub fn wrong_p(subject: &[(TokenId, f32)], oracle: &[Share]) -> Vec<WrongP> {
    let tol = subject_tolerance(oracle.len());
    let mut out = Vec::new();
    for share in oracle {
        let got = subject.iter().find(|(id, _)| *id == share.id).map(|x| x.1);
        let ok = got.is_some_and(|p| p.is_finite() && (p as f64 - share.p).abs() <= tol);
        if !ok {
            out.push(WrongP {
                id: share.id,
                subject: got,
                oracle: share.p,
            });
        }
    }
    out
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
        assert_eq!(p_of(&s, 1), p_of(&s, 3));
        assert_eq!(p_of(&s, 0), p_of(&s, 2));
        assert_eq!(p_of(&s, 2), p_of(&s, 4));
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
        assert_eq!(p_of(&s, 0), 0.0);
        assert_eq!(p_of(&s, 2), 0.0);
        assert_eq!(p_of(&s, 1), 0.5);
        assert_eq!(p_of(&s, 3), 0.5);
    }

    #[test]
    fn a_huge_logit_neither_overflows_nor_needs_to_come_first() {
        // The maximum is found by scanning: a pool built in any order gives the same answer,
        // and a logit 1e4 above the rest takes all the mass without an overflow.
        let entries = [(0, -3.0), (1, 1e4), (2, 1e4 - 1.0), (3, -1e4)];
        let p = Pool::new(entries.iter().map(|&(id, logit)| Entry {
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
        assert!(softmax(&pool(&[])).is_err());
        assert!(softmax(&pool(&[f32::NEG_INFINITY; 3])).is_err());
        assert!(softmax(&pool(&[0.0, f32::NAN])).is_err());
        assert!(softmax(&pool(&[0.0, f32::INFINITY])).is_err());
    }

    #[test]
    fn wrong_p_flags_non_finite_missing_and_distant_values_only() {
        let s = softmax(&pool(&[0.0, 0.0])).unwrap();
        let tol = subject_tolerance(2);
        let near = (0.5 + tol / 2.0) as f32;
        assert!(wrong_p(&[(TokenId(0), 0.5), (TokenId(1), near)], &s).is_empty());
        let w = wrong_p(&[(TokenId(0), f32::NAN), (TokenId(1), 0.5)], &s);
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].id, TokenId(0));
        let w = wrong_p(&[(TokenId(0), 0.5)], &s);
        assert_eq!((w.len(), w[0].subject), (1, None));
        let w = wrong_p(&[(TokenId(0), 0.4), (TokenId(1), 0.6)], &s);
        assert_eq!(w.len(), 2);
        assert!(w[0].describe().contains("id 0"));
    }
}
