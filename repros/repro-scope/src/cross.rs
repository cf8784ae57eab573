//! The cross-engine comparison: the same model file, the same prompt ids, the same scope,
//! decoded greedily by llama.cpp (oracle penalty) and by another engine (its own penalty).
//! Where the two trajectories part, the top-2 margin of each engine's penalized logits there;
//! on the shared prefix, the largest difference between the two engines' raw logits.

use crate::decode::{engine_context, ids_of, penalized, top2_margin, ScopeDecoder, Trajectory};
use crate::scope::ScopeSpec;
use anyhow::Result;
use serde::Serialize;

/// One scope decoded by both engines.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Parting {
    pub scope: ScopeSpec,
    /// Tokens both engines generated alike before they part (all of them if they never do).
    pub shared_prefix: usize,
    /// The step where they part, llama.cpp's token and the other engine's there, and each
    /// engine's top-2 margin of its penalized logits there (all `None` if they never part).
    pub parts_at: Option<usize>,
    pub llama_token: Option<i32>,
    pub engine_token: Option<i32>,
    pub top2_margin_llama: Option<f32>,
    pub top2_margin_engine: Option<f32>,
    /// Over the steps whose logits both engines computed from the same tokens: the largest
    /// |llama.cpp - other| raw logit, and where.
    pub max_logit_diff: f32,
    pub max_logit_diff_at: LogitDiffAt,
}

/// Where the largest raw logit difference is, and the two engines' values there.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct LogitDiffAt {
    pub step: usize,
    pub id: i32,
    pub llama: f32,
    pub engine: f32,
}

/// Every scope of `other` (`all`, `N`, `gen:N`) decoded by llama.cpp (`llama`) as well.
pub fn compare(
    llama: &mut ScopeDecoder,
    other: &mut ScopeDecoder,
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
        let (mut max_diff, mut max_at) = (0.0f32, LogitDiffAt::default());
        let prefix = &t.tokens[..shared];
        for s in 0..=last {
            let a = llama.logits_after(&prefix[..s.min(prefix.len())])?;
            let b = other.logits_after(&prefix[..s.min(prefix.len())])?;
            for (i, (&x, &y)) in a.iter().zip(&b).enumerate() {
                if (x - y).abs() > max_diff {
                    max_diff = (x - y).abs();
                    max_at = LogitDiffAt {
                        step: s,
                        id: i as i32,
                        llama: x,
                        engine: y,
                    };
                }
            }
        }
        let mut parting = Parting {
            scope: t.scope,
            shared_prefix: shared,
            parts_at: at,
            llama_token: None,
            engine_token: None,
            top2_margin_llama: None,
            top2_margin_engine: None,
            max_logit_diff: max_diff,
            max_logit_diff_at: max_at,
        };
        if let Some(step) = at {
            let tokens = &prefix[..step];
            let ids = ids_of(t.scope, &llama.prompt, tokens);
            let z_l = penalized(&llama.logits_after(tokens)?, &ids, llama.theta);
            let raw_o = other.logits_after(tokens)?;
            let context = engine_context(scope, &other.prompt, tokens);
            let z_o = (other.side.engine).repeat_penalty(&raw_o, other.theta, &context)?;
            parting.llama_token = Some(l.tokens[step].0);
            parting.engine_token = Some(t.tokens[step].0);
            parting.top2_margin_llama = Some(top2_margin(&z_l));
            parting.top2_margin_engine = Some(top2_margin(&z_o));
        }
        out.push(parting);
    }
    Ok(out)
}

impl Parting {
    pub fn describe(&self, other: &str) -> String {
        let LogitDiffAt {
            step,
            id,
            llama,
            engine,
        } = self.max_logit_diff_at;
        let parts = match (self.parts_at, self.llama_token, self.engine_token) {
            (Some(s), Some(a), Some(b)) => format!(
                "part at step {s}: llama.cpp {a}, {other} {b}; top-2 margin {} (llama.cpp) vs {} ({other})",
                self.top2_margin_llama.unwrap_or_default(),
                self.top2_margin_engine.unwrap_or_default()
            ),
            _ => format!("never part in {} tokens", self.shared_prefix),
        };
        format!(
            "{:<6} {parts}; largest raw logit difference on the shared prefix {} (step {step}, id {id}: {llama} vs {engine})",
            self.scope.to_string(),
            self.max_logit_diff
        )
    }
}
