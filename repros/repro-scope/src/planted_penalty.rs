//! The planted controls of the penalty comparison: two repetition penalties written here, from
//! the definition, not from the oracle's code and not from any engine's. The comparison that
//! holds llama.cpp's penalties and another engine's own penalty to the oracle bit for bit
//! (`decode::Tally::compare`) must pass the exact one at every step (negative control) and
//! catch the wrong one (positive control); both are handed the same raw logits and the same
//! tokens as the engine's own penalty (`decode::engine_context`).
//!
//! The wrong one divides and multiplies by theta one f32 step too high. That is about the
//! smallest change a penalty can make to its values, a rounding or two in some of the
//! penalized logits, so catching it shows that the comparison sees single bits; a penalty that
//! skipped an id would move that logit by a factor of theta and would be caught by any
//! tolerance.

use anyhow::{ensure, Result};
use oracle::TokenId;
use serde::Serialize;

/// Which planted penalty.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PlantedPenalty {
    /// The repetition penalty as defined: every distinct id of the tokens handed to it, once,
    /// `z / theta` when `z > 0`, else `z * theta`, in f32.
    Exact,
    /// [`PlantedPenalty::Exact`] with theta one f32 step above the one it is given.
    ThetaOneStepHigher,
}

impl PlantedPenalty {
    pub const ALL: [PlantedPenalty; 2] =
        [PlantedPenalty::Exact, PlantedPenalty::ThetaOneStepHigher];

    /// `raw` penalized over the distinct ids of `context` with `theta`.
    pub fn apply(self, raw: &[f32], theta: f32, context: &[TokenId]) -> Result<Vec<f32>> {
        let theta = match self {
            PlantedPenalty::Exact => theta,
            PlantedPenalty::ThetaOneStepHigher => one_step_higher(theta)?,
        };
        let mut out = raw.to_vec();
        let mut done = vec![false; raw.len()];
        for t in context {
            let i = usize::try_from(t.0).ok().filter(|&i| i < raw.len());
            let Some(i) = i else {
                anyhow::bail!("token id {t} is outside the {} logits", raw.len());
            };
            // Once per distinct id: a second occurrence leaves the logit as the first left it.
            if std::mem::replace(&mut done[i], true) {
                continue;
            }
            let z = out[i];
            out[i] = if z > 0.0 { z / theta } else { z * theta };
        }
        Ok(out)
    }
}

/// The next f32 above a positive finite `theta`.
fn one_step_higher(theta: f32) -> Result<f32> {
    ensure!(
        theta.is_finite() && theta > 0.0,
        "theta must be finite and > 0, got {theta}"
    );
    Ok(f32::from_bits(theta.to_bits() + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[i32]) -> Vec<TokenId> {
        v.iter().copied().map(TokenId).collect()
    }

    /// Values worked by hand: a positive logit divided, a negative one multiplied, zero kept,
    /// an id seen twice penalized once, an unseen id untouched.
    #[test]
    fn the_exact_penalty_follows_the_definition() {
        let raw = [2.6f32, -2.0, 0.0, 1.0];
        let out = PlantedPenalty::Exact
            .apply(&raw, 1.3, &ids(&[0, 1, 0, 2]))
            .unwrap();
        assert_eq!(out, vec![2.6f32 / 1.3, -2.0f32 * 1.3, 0.0, 1.0]);
        assert!(PlantedPenalty::Exact.apply(&raw, 1.3, &ids(&[4])).is_err());
        assert!(PlantedPenalty::Exact.apply(&raw, 1.3, &ids(&[-1])).is_err());
    }

    /// The wrong one differs from the exact one by a rounding or two in some penalized logits,
    /// and leaves the ids it is not handed alone, as the exact one does.
    #[test]
    fn the_wrong_penalty_is_a_rounding_off() {
        let raw: Vec<f32> = (0..64).map(|i| (i as f32 - 31.5) * 0.37).collect();
        let context = ids(&(0..64).filter(|i| i % 2 == 0).collect::<Vec<i32>>());
        let exact = PlantedPenalty::Exact.apply(&raw, 1.3, &context).unwrap();
        let wrong = (PlantedPenalty::ThetaOneStepHigher)
            .apply(&raw, 1.3, &context)
            .unwrap();
        let ulps: Vec<u32> = (exact.iter().zip(&wrong))
            .map(|(a, b)| a.to_bits().abs_diff(b.to_bits()))
            .collect();
        assert!(ulps.iter().step_by(2).any(|&d| d > 0), "{ulps:?}");
        assert!(ulps.iter().all(|&d| d <= 2), "{ulps:?}");
        for i in (1..64).step_by(2) {
            assert_eq!((exact[i], wrong[i]), (raw[i], raw[i]));
        }
    }
}
