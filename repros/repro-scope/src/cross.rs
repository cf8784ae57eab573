//! The cross-engine comparison: the same model file, the same prompt ids, the same scope,
//! decoded greedily by llama.cpp (oracle penalty) and by another engine (its own penalty).
//! Where the two trajectories part, the top-2 margin of each engine's penalized logits there;
//! on the shared prefix, the largest difference between the two engines' raw logits.

use crate::decode::{engine_context, ids_of, top2_margin, Decoder, Trajectory};
use crate::scope::ScopeSpec;
use anyhow::Result;
use oracle::scope::apply_repetition;
use oracle::TokenId;
use serde::Serialize;

/// One scope decoded by both engines.
#[derive(Debug, Clone, PartialEq)]
pub struct Parting {
    pub scope: ScopeSpec,
    /// Tokens both engines generated alike before they part (all of them if they never do).
    pub shared: usize,
    /// The step where they part: llama.cpp's token and the other engine's, and each engine's
    /// top-2 margin of its penalized logits there.
    pub parts: Option<(usize, TokenId, TokenId, f32, f32)>,
    /// Over the steps whose logits both engines computed from the same tokens: the largest
    /// |llama.cpp - other| raw logit, its step and id, and the two values.
    pub max_diff: (f32, usize, TokenId, f32, f32),
}

/// Every scope of `other` (`all`, `N`, `gen:N`) decoded by llama.cpp (`llama`) as well.
pub fn compare(
    llama: &mut Decoder,
    other: &mut Decoder,
    trajectories: &[Trajectory],
    max_new: usize,
) -> Result<Vec<Parting>> {
    let mut out = Vec::new();
    for t in trajectories {
        let ScopeSpec::Oracle(scope) = t.scope else {
            continue;
        };
        let l = llama.greedy(t.scope, max_new, None)?;
        let at = harness::divergence(&l.tokens, &t.tokens);
        let shared = at.unwrap_or(l.tokens.len());
        // The logits of step s follow tokens[..s]; both engines computed steps 0..=shared
        // from the same tokens (step `shared` is where they part, or one past the end).
        let last = at.unwrap_or(shared.saturating_sub(1));
        let mut max_diff = (0.0f32, 0, TokenId(0), 0.0, 0.0);
        let prefix = &t.tokens[..shared];
        for s in 0..=last {
            let a = llama.logits_after(&prefix[..s.min(prefix.len())])?;
            let b = other.logits_after(&prefix[..s.min(prefix.len())])?;
            for (i, (x, y)) in a.iter().zip(&b).enumerate() {
                let d = (x - y).abs();
                if d > max_diff.0 {
                    max_diff = (d, s, TokenId(i as i32), *x, *y);
                }
            }
        }
        let parts = match at {
            None => None,
            Some(step) => {
                let tokens = &prefix[..step];
                let raw_l = llama.logits_after(tokens)?;
                let mut z_l = raw_l.clone();
                apply_repetition(
                    &mut z_l,
                    &ids_of(t.scope, &llama.prompt, tokens),
                    llama.theta,
                );
                let raw_o = other.logits_after(tokens)?;
                let context = engine_context(scope, &other.prompt, tokens);
                let z_o = other
                    .side
                    .engine
                    .repeat_penalty(&raw_o, other.theta, &context)?;
                Some((
                    step,
                    l.tokens[step],
                    t.tokens[step],
                    top2_margin(&z_l),
                    top2_margin(&z_o),
                ))
            }
        };
        out.push(Parting {
            scope: t.scope,
            shared,
            parts,
            max_diff,
        });
    }
    Ok(out)
}

impl Serialize for Parting {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct At {
            step: usize,
            id: i32,
            llama: f32,
            engine: f32,
        }
        #[derive(Serialize)]
        struct Written {
            scope: String,
            shared_prefix: usize,
            parts_at: Option<usize>,
            llama_token: Option<i32>,
            engine_token: Option<i32>,
            top2_margin_llama: Option<f32>,
            top2_margin_engine: Option<f32>,
            max_logit_diff: f32,
            max_logit_diff_at: At,
        }
        let (d, step, id, llama, engine) = self.max_diff;
        Written {
            scope: self.scope.to_string(),
            shared_prefix: self.shared,
            parts_at: self.parts.map(|p| p.0),
            llama_token: self.parts.map(|p| p.1 .0),
            engine_token: self.parts.map(|p| p.2 .0),
            top2_margin_llama: self.parts.map(|p| p.3),
            top2_margin_engine: self.parts.map(|p| p.4),
            max_logit_diff: d,
            max_logit_diff_at: At {
                step,
                id: id.0,
                llama,
                engine,
            },
        }
        .serialize(s)
    }
}

impl Parting {
    pub fn describe(&self, other: &str) -> String {
        let (d, step, id, x, y) = self.max_diff;
        let parts = match self.parts {
            None => format!("never part in {} tokens", self.shared),
            Some((s, a, b, ma, mb)) => format!(
                "part at step {s}: llama.cpp {a}, {other} {b}; top-2 margin {ma} (llama.cpp) vs {mb} ({other})"
            ),
        };
        format!(
            "{:<6} {parts}; largest raw logit difference on the shared prefix {d} (step {step}, id {id}: {x} vs {y})",
            self.scope.to_string()
        )
    }
}
