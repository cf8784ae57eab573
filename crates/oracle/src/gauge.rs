//! Three repetition-penalty operators and their dependence on the logits' zero point (F4:
//! `sign` is under audit, `normalized` is behind the fix's row; the ledger's tests check its
//! modes against `normalized` and `subtractive`).
//!
//! Softmax cannot tell `z` from `z + c`, so a penalty that means something on the probability
//! scale must not either. The sign-branched operator (CTRL, shipped by llama.cpp,
//! transformers, vLLM and candle) divides positive logits and multiplies the others, so where
//! a seen id's logit sits relative to an arbitrary 0 decides how hard it is hit. The
//! subtractive (`z - ln theta`) and normalized (the sign branch on `log_softmax(z)`, never
//! positive) operators depend only on differences of logits.
//!
//! Exactness: the gauge-free operators add the shift in f64 (exact for the f32 magnitudes
//! used here) and return results relative to the maximum (also exact), so their outputs, and
//! any argmax, are bit-identical across shifts, not merely close.

use crate::TokenId;
use std::collections::BTreeSet;

/// Which operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operator {
    /// `z > 0 ? z / theta : z * theta` on the raw (shifted) logits, in f32.
    Sign,
    /// `z - ln theta` for seen ids.
    Subtractive,
    /// The sign branch on `log_softmax(z)`: `lp * theta` for seen ids.
    Normalized,
}

impl Operator {
    pub const ALL: [Operator; 3] = [Operator::Sign, Operator::Subtractive, Operator::Normalized];

    pub fn as_str(self) -> &'static str {
        match self {
            Operator::Sign => "sign",
            Operator::Subtractive => "subtractive",
            Operator::Normalized => "normalized",
        }
    }
}

/// `z + shift` as llama.cpp would see it: an f32 array.
pub fn shifted_f32(z: &[f32], shift: f32) -> Vec<f32> {
    z.iter().map(|&v| v + shift).collect()
}

/// The sign-branched operator on `z + shift` (shift applied in f32, then the branch in f32,
/// the arithmetic of llama.cpp's penalties stage with only `penalty_repeat` set).
pub fn sign(z: &[f32], shift: f32, seen: &BTreeSet<TokenId>, theta: f32) -> Vec<f64> {
    let mut x = shifted_f32(z, shift);
    crate::scope::apply_repetition(&mut x, seen, theta);
    x.into_iter().map(f64::from).collect()
}

/// `z + shift - max(z + shift)` in f64: exact, so independent of the shift.
fn centered(z: &[f32], shift: f32) -> Vec<f64> {
    let x: Vec<f64> = z.iter().map(|&v| v as f64 + shift as f64).collect();
    let max = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    x.into_iter().map(|v| v - max).collect()
}

/// Subtractive: `z - ln theta` for seen ids, returned relative to the maximum of `z + shift`.
pub fn subtractive(z: &[f32], shift: f32, seen: &BTreeSet<TokenId>, theta: f32) -> Vec<f64> {
    let mut x = centered(z, shift);
    let d = (theta as f64).ln();
    for_seen(&mut x, seen, |v| *v -= d);
    x
}

/// `f` on the entry of every seen id inside `x`.
fn for_seen(x: &mut [f64], seen: &BTreeSet<TokenId>, f: impl Fn(&mut f64)) {
    for id in seen {
        if let Some(v) = usize::try_from(id.0).ok().and_then(|i| x.get_mut(i)) {
            f(v);
        }
    }
}

/// Normalized: `log_softmax(z + shift)`, then `lp * theta` for seen ids (the sign branch on a
/// value that is never positive).
pub fn normalized(z: &[f32], shift: f32, seen: &BTreeSet<TokenId>, theta: f32) -> Vec<f64> {
    let c = centered(z, shift);
    let log_sum = c.iter().map(|v| v.exp()).sum::<f64>().ln();
    let mut lp: Vec<f64> = c.into_iter().map(|v| v - log_sum).collect();
    for_seen(&mut lp, seen, |v| {
        *v = if *v > 0.0 {
            *v / theta as f64
        } else {
            *v * theta as f64
        }
    });
    lp
}

pub fn apply(
    op: Operator,
    z: &[f32],
    shift: f32,
    seen: &BTreeSet<TokenId>,
    theta: f32,
) -> Vec<f64> {
    match op {
        Operator::Sign => sign(z, shift, seen, theta),
        Operator::Subtractive => subtractive(z, shift, seen, theta),
        Operator::Normalized => normalized(z, shift, seen, theta),
    }
}

/// Greedy choice over an operator's output (the crate's one rule, [`crate::argmax`]).
pub use crate::argmax;

/// Softmax in f64 (for comparing distributions across shifts).
pub fn softmax(x: &[f64]) -> Vec<f64> {
    let max = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let w: Vec<f64> = x.iter().map(|v| (v - max).exp()).collect();
    let s: f64 = w.iter().sum();
    w.into_iter().map(|v| v / s).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(v: &[i32]) -> BTreeSet<TokenId> {
        crate::token_ids(v).into_iter().collect()
    }

    /// Seeded pseudo-random logits in [-8, 8) with 1/1024 resolution.
    fn logits(seed: u64, n: usize) -> Vec<f32> {
        let mut rng = crate::rng::Rng::new(seed);
        (0..n)
            .map(|_| rng.below(16384) as f32 / 1024.0 - 8.0)
            .collect()
    }

    #[test]
    fn hand_made_flip_under_the_sign_branch() {
        // Id 0 was seen. At c = 0 its logit 0.1 becomes 0.077 and still beats id 1 at 0.
        // Shifted by +5 it becomes 5.1 / 1.3 = 3.92 and loses to 5: the choice flips.
        let z = [0.1f32, 0.0];
        let s = seen(&[0]);
        assert_eq!(argmax(&sign(&z, 0.0, &s, 1.3)), TokenId(0));
        assert_eq!(argmax(&sign(&z, 5.0, &s, 1.3)), TokenId(1));
        // The gauge-free operators keep their choice.
        for op in [Operator::Subtractive, Operator::Normalized] {
            assert_eq!(
                argmax(&apply(op, &z, 0.0, &s, 1.3)),
                argmax(&apply(op, &z, 5.0, &s, 1.3))
            );
        }
    }

    #[test]
    fn gauge_free_operators_are_exactly_invariant() {
        for seed in 0..200u64 {
            let z = logits(seed, 64);
            let s: BTreeSet<TokenId> = (0..64)
                .filter(|i| (i * 7 + seed as i32) % 3 == 0)
                .map(TokenId)
                .collect();
            for op in [Operator::Subtractive, Operator::Normalized] {
                let base = apply(op, &z, 0.0, &s, 1.3);
                for c in [-5.0f32, -2.0, -1.0, -0.375, 1.0, 2.0, 5.0, 17.25] {
                    let shifted = apply(op, &z, c, &s, 1.3);
                    // Bit-identical outputs, hence identical choices.
                    assert_eq!(base, shifted, "{op:?} seed {seed} c {c}");
                    // And the distributions agree; the stated tolerance (1e-12) is never needed.
                    let (p, q) = (softmax(&base), softmax(&shifted));
                    assert!(p.iter().zip(&q).all(|(a, b)| (a - b).abs() <= 1e-12));
                }
            }
        }
    }

    #[test]
    fn sign_branch_is_not_invariant_on_straddling_logits() {
        let mut flips = 0;
        for seed in 0..200u64 {
            let z = logits(seed, 64);
            let s: BTreeSet<TokenId> = (0..32).map(TokenId).collect();
            if argmax(&sign(&z, 0.0, &s, 1.3)) != argmax(&sign(&z, 5.0, &s, 1.3)) {
                flips += 1;
            }
        }
        assert!(flips > 0, "a +5 shift must change some choices");
    }

    #[test]
    fn normalized_is_the_multiply_branch_on_log_probabilities() {
        let z = [2.0f32, 1.0, 0.0];
        let out = normalized(&z, 0.0, &seen(&[1]), 2.0);
        let lse = (1.0f64 + (-1.0f64).exp() + (-2.0f64).exp()).ln();
        assert!((out[0] - (0.0 - lse)).abs() < 1e-15);
        assert!((out[1] - 2.0 * (-1.0 - lse)).abs() < 1e-15);
    }

    #[test]
    fn subtractive_is_ln_theta_on_the_probability_scale() {
        let z = [1.0f32, 1.0];
        let p = softmax(&subtractive(&z, 0.0, &seen(&[0]), 2.0));
        // The seen id's probability is divided by theta relative to the unseen one.
        assert!((p[0] / p[1] - 0.5).abs() < 1e-12);
    }
}
