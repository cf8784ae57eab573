//! One logits vector, every scope: how many logits each scope's penalty changes, how far
//! they end up from `all`, and which ids `all` penalizes that the scope does not.

use crate::decode::{
    count_changed, ids_of, llama_penalties, through_llama, Decoder, Stop, Trajectory,
};
use crate::scope::ScopeSpec;
use anyhow::Result;
use oracle::scope::{apply_repetition, Scope};
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

#[derive(Debug, Clone, PartialEq)]
pub struct VectorTable {
    pub prompt_tokens: usize,
    pub generated_used: usize,
    pub rows: Vec<Row>,
}

impl Serialize for VectorTable {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Written<'a> {
            prompt_tokens: usize,
            generated_tokens: usize,
            context_tokens: usize,
            rows: &'a [Row],
        }
        Written {
            prompt_tokens: self.prompt_tokens,
            generated_tokens: self.generated_used,
            context_tokens: self.context_len(),
            rows: &self.rows,
        }
        .serialize(s)
    }
}

impl VectorTable {
    pub fn context_len(&self) -> usize {
        self.prompt_tokens + self.generated_used
    }
}

/// The table on the context `prompt ++ all.tokens[..k]` (fewer if `all` stopped earlier).
pub fn table(
    dec: &mut Decoder,
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
    let mut z_all = raw.clone();
    apply_repetition(&mut z_all, &all_ids, dec.theta);
    let mut rows = Vec::new();
    for &scope in scopes {
        let ids = ids_of(scope, &prompt, &generated);
        let z = match scope {
            ScopeSpec::Oracle(_) | ScopeSpec::Planted(_) => {
                let mut z = raw.clone();
                apply_repetition(&mut z, &ids, dec.theta);
                z
            }
            ScopeSpec::Llama(n) => {
                let mut s = llama_penalties(&dec.model, n, dec.theta)?;
                for &t in &context {
                    s.accept(t)?;
                }
                through_llama(&mut s, &raw)?
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
        rows,
    })
}

impl VectorTable {
    pub fn to_text(&self) -> String {
        let mut out = format!(
            "one logits vector: context = {} prompt + {} generated (under all) = {} tokens\n  scope        changed  non-zero ids in scope  max |diff| vs all  ids only all penalizes (last position)\n",
            self.prompt_tokens,
            self.generated_used,
            self.context_len()
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
            let items: Vec<String> = r
                .missing
                .iter()
                .map(|m| {
                    format!(
                        "{:?}@{}",
                        m.text,
                        m.positions
                            .iter()
                            .map(|p| p.to_string())
                            .collect::<Vec<_>>()
                            .join("/")
                    )
                })
                .collect();
            out.push_str(&format!("  {} misses: {}\n", r.scope, items.join(" ")));
        }
        out
    }
}
