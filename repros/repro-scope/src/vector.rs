//! One logits vector, every scope: how many logits each scope's penalty changes, how far
//! they end up from `all`, and which ids `all` penalizes that the scope does not.

use crate::decode::{
    count_changed, ids_of, llama_penalties, penalized, ScopeDecoder, Stop, Trajectory,
};
use crate::scope::ScopeSpec;
use anyhow::Result;
use oracle::scope::Scope;
use oracle::TokenId;
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Missing {
    #[serde(serialize_with = "crate::decode::token")]
    pub id: TokenId,
    /// Positions (0-based, prompt first) where the id occurs in the context.
    pub positions: Vec<usize>,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub scope: ScopeSpec,
    pub changed: usize,
    /// Distinct ids in scope whose raw logit is non-zero (the penalty moves exactly these).
    #[serde(rename = "nonzero_ids_in_scope")]
    pub nonzero_in_scope: usize,
    pub max_abs_diff_vs_all: f32,
    #[serde(rename = "penalized_by_all_only")]
    pub missing: Vec<Missing>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VectorTable {
    pub prompt_tokens: usize,
    #[serde(rename = "generated_tokens")]
    pub generated_used: usize,
    /// `prompt_tokens + generated_used`.
    pub context_tokens: usize,
    pub rows: Vec<Row>,
}

/// The table on the context `prompt ++ all.tokens[..k]` (fewer if `all` stopped earlier).
pub fn table(
    dec: &mut ScopeDecoder,
    all: &Trajectory,
    scopes: &[ScopeSpec],
    k: usize,
) -> Result<VectorTable> {
    let usable = all.tokens.len() - usize::from(all.stop == Stop::Eos);
    let generated: Vec<TokenId> = all.tokens[..k.min(usable)].to_vec();
    let raw = dec.logits_after(&generated)?;
    let prompt = dec.prompt.clone();
    let context: Vec<TokenId> = prompt.iter().chain(&generated).copied().collect();
    let all_ids = ids_of(ScopeSpec::Oracle(Scope::All), &prompt, &generated);
    let z_all = penalized(&raw, &all_ids, dec.theta);
    let mut rows = Vec::new();
    for &scope in scopes {
        let ids = ids_of(scope, &prompt, &generated);
        let z = match scope {
            ScopeSpec::Oracle(_) | ScopeSpec::Planted(_) | ScopeSpec::PlantedSampler(_) => {
                penalized(&raw, &ids, dec.theta)
            }
            ScopeSpec::Llama(n) => {
                let mut s = llama_penalties(&dec.model, n, dec.theta)?;
                for &t in &context {
                    s.accept(t)?;
                }
                s.apply_in_id_order(&raw)?
            }
        };
        let max_abs_diff_vs_all = z
            .iter()
            .zip(&z_all)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        let missing = all_ids
            .difference(&ids)
            .map(|&id| {
                Ok(Missing {
                    id,
                    positions: context
                        .iter()
                        .enumerate()
                        .filter(|(_, t)| **t == id)
                        .map(|(i, _)| i)
                        .collect(),
                    text: dec.model.detokenize(&[id])?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        rows.push(Row {
            scope,
            changed: count_changed(&raw, &z),
            nonzero_in_scope: ids.iter().filter(|id| raw[id.0 as usize] != 0.0).count(),
            max_abs_diff_vs_all,
            missing,
        });
    }
    Ok(VectorTable {
        prompt_tokens: prompt.len(),
        generated_used: generated.len(),
        context_tokens: context.len(),
        rows,
    })
}

impl VectorTable {
    pub fn to_text(&self) -> String {
        let mut out = format!(
            "one logits vector: context = {} prompt + {} generated (under all) = {} tokens\n  scope        changed  non-zero ids in scope  max |diff| vs all  ids only all penalizes (last position)\n",
            self.prompt_tokens,
            self.generated_used,
            self.context_tokens
        );
        for r in &self.rows {
            let last = r.missing.iter().filter_map(|m| m.positions.last()).max();
            out.push_str(&format!(
                "  {:<12} {:>7}  {:>21}  {:>17.6}  {}{}\n",
                r.scope.to_string(),
                r.changed,
                r.nonzero_in_scope,
                r.max_abs_diff_vs_all,
                r.missing.len(),
                last.map_or(String::new(), |p| format!(" (all at positions <= {p})"))
            ));
        }
        for r in self.rows.iter().filter(|r| !r.missing.is_empty()) {
            let items: Vec<String> = (r.missing.iter())
                .map(|m| {
                    let at: Vec<String> = m.positions.iter().map(|p| p.to_string()).collect();
                    format!("{:?}@{}", m.text, at.join("/"))
                })
                .collect();
            out.push_str(&format!("  {} misses: {}\n", r.scope, items.join(" ")));
        }
        out
    }
}
