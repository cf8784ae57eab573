//! One prompt under several scopes, the single-vector table and the cross-checks.

use crate::decode::{Decoder, Trajectory};
use crate::scope::ScopeSpec;
use crate::vector::{self, VectorTable};
use anyhow::Result;
use oracle::scope::Scope;
use oracle::TokenId;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use subject::BuildInfo;

#[derive(Debug, Clone, PartialEq)]
pub struct RunConfig {
    pub prompt: String,
    pub theta: f32,
    pub max_new: usize,
    pub scopes: Vec<ScopeSpec>,
    pub threads: i32,
    /// Generated tokens (under `all`) in the single-vector context.
    pub vector_at: usize,
}

pub use harness::LoadedModel;

pub struct RunReport {
    pub build: BuildInfo,
    pub model_label: String,
    pub model_desc: String,
    pub config: RunConfig,
    pub prompt_ids: Vec<TokenId>,
    pub trajectories: Vec<Trajectory>,
    pub texts: Vec<String>,
    /// `N` and `llama:N` with N = prompt + max_new: both must equal `all`.
    pub long_windows: Vec<Trajectory>,
    pub vector: VectorTable,
}

pub fn run(m: &LoadedModel, cfg: &RunConfig) -> Result<RunReport> {
    let prompt_ids = m.chat_ids(&cfg.prompt)?;
    let mut dec = Decoder::new(
        Arc::clone(&m.model),
        prompt_ids.clone(),
        cfg.theta,
        cfg.max_new,
        cfg.threads,
    )?;
    let mut trajectories = Vec::new();
    for &s in &cfg.scopes {
        trajectories.push(dec.greedy(s, cfg.max_new)?);
    }
    let whole = prompt_ids.len() + cfg.max_new;
    let long_windows = vec![
        dec.greedy(ScopeSpec::Oracle(Scope::Last(whole)), cfg.max_new)?,
        dec.greedy(ScopeSpec::Llama(whole), cfg.max_new)?,
    ];
    let texts = trajectories
        .iter()
        .map(|t| m.model.detokenize(&t.tokens))
        .collect::<Result<Vec<_>>>()?;
    let vector = vector::table(&mut dec, &trajectories[0], &cfg.scopes, cfg.vector_at)?;
    Ok(RunReport {
        build: BuildInfo::current(),
        model_label: m.choice.label.clone(),
        model_desc: m.model.describe(),
        config: cfg.clone(),
        prompt_ids,
        trajectories,
        texts,
        long_windows,
        vector,
    })
}

/// The cross-checks of one run, each a count that must be 0 (or a flag that must be true).
#[derive(Debug, Clone, PartialEq)]
pub struct CrossChecks {
    pub all_vs_llama_full_window_steps: usize,
    pub all_vs_llama_full_window_mismatches: usize,
    pub changed_count_mismatches: usize,
    pub greedy_mismatches: usize,
    pub long_window_equals_all: bool,
    pub llama_long_window_equals_all: bool,
    pub vector_rule_holds: bool,
}

impl CrossChecks {
    pub fn pass(&self) -> bool {
        self.all_vs_llama_full_window_steps > 0
            && self.all_vs_llama_full_window_mismatches == 0
            && self.changed_count_mismatches == 0
            && self.greedy_mismatches == 0
            && self.long_window_equals_all
            && self.llama_long_window_equals_all
            && self.vector_rule_holds
    }

    pub fn to_json(&self) -> Value {
        json!({
            "all_vs_llama_full_window": {
                "steps": self.all_vs_llama_full_window_steps,
                "mismatching_steps": self.all_vs_llama_full_window_mismatches,
            },
            "changed_count_mismatches": self.changed_count_mismatches,
            "greedy_tie_rule_mismatches": self.greedy_mismatches,
            "window_covering_sequence_equals_all": self.long_window_equals_all,
            "llama_window_covering_sequence_equals_all": self.llama_long_window_equals_all,
            "vector_changed_equals_nonzero_ids_in_scope": self.vector_rule_holds,
            "pass": self.pass(),
        })
    }
}

impl RunReport {
    pub fn all(&self) -> &Trajectory {
        &self.trajectories[0]
    }

    pub fn cross_checks(&self) -> CrossChecks {
        let all = self.all();
        let sum = |f: fn(&Trajectory) -> usize| {
            self.trajectories
                .iter()
                .chain(&self.long_windows)
                .map(f)
                .sum::<usize>()
        };
        CrossChecks {
            all_vs_llama_full_window_steps: all.checks.steps,
            all_vs_llama_full_window_mismatches: all.checks.llama_full_window_mismatches,
            changed_count_mismatches: sum(|t| t.checks.changed_count_mismatches),
            greedy_mismatches: sum(|t| t.checks.greedy_mismatches),
            long_window_equals_all: self.long_windows[0].tokens == all.tokens,
            llama_long_window_equals_all: self.long_windows[1].tokens == all.tokens,
            vector_rule_holds: self.vector.rule_holds(),
        }
    }

    /// Scopes other than `all` whose trajectory differs from it.
    pub fn diverging(&self) -> Vec<&Trajectory> {
        self.trajectories[1..]
            .iter()
            .filter(|t| t.diverges_from(self.all()).is_some())
            .collect()
    }

    pub fn verdict(&self) -> &'static str {
        if !self.cross_checks().pass() {
            "invalid"
        } else if self.diverging().is_empty() {
            "absent"
        } else {
            "present"
        }
    }

    pub fn to_json(&self) -> Value {
        let mut scopes = Map::new();
        for (t, text) in self.trajectories.iter().zip(&self.texts) {
            scopes.insert(
                t.scope.to_string(),
                json!({
                    "tokens": t.tokens.iter().map(|i| i.0).collect::<Vec<_>>(),
                    "text": text,
                    "diverges_at": t.diverges_from(self.all()),
                    "stopped_at": t.stopped_at(),
                    "stop": t.stop.as_str(),
                }),
            );
        }
        json!({
            "finding": "F3",
            "name": "penalty-scope-divergence",
            "build": self.build.tag(),
            "model": self.model_label,
            "model_desc": self.model_desc,
            "prompt": self.config.prompt,
            "prompt_tokens": self.prompt_ids.len(),
            "prompt_ids": self.prompt_ids.iter().map(|i| i.0).collect::<Vec<_>>(),
            "penalty": self.config.theta,
            "max_new": self.config.max_new,
            "threads": self.config.threads,
            "scopes": scopes,
            "vector": self.vector.to_json(),
            "cross_checks": self.cross_checks().to_json(),
            "verdict": self.verdict(),
        })
    }

    pub fn to_text(&self) -> String {
        let mut out = format!(
            "{} on {}, {} greedy, penalty {} once per distinct id, up to {} new tokens\nprompt ({} tokens through the chat template): {:?}\n",
            self.model_label,
            self.build.describe(),
            self.model_desc,
            self.config.theta,
            self.config.max_new,
            self.prompt_ids.len(),
            self.config.prompt
        );
        out.push_str("  scope        diverges at  stopped at\n");
        for t in &self.trajectories {
            out.push_str(&format!(
                "  {:<12} {:>11}  {:>4} ({})\n",
                t.scope.to_string(),
                t.diverges_from(self.all())
                    .map_or("-".to_string(), |d| d.to_string()),
                t.stopped_at(),
                t.stop.as_str()
            ));
        }
        for (t, text) in self.trajectories.iter().zip(&self.texts) {
            out.push_str(&format!("  [{}] {:?}\n", t.scope, text));
        }
        out.push_str(&self.vector.to_text());
        let c = self.cross_checks();
        out.push_str(&format!(
            "cross-checks: oracle all = llama.cpp full window, bit for bit, on {} of {} steps; changed = non-zero ids in scope on every step: {}; a window covering the sequence gives all: {} (oracle), {} (llama.cpp); greedy tie rule: {}\n",
            c.all_vs_llama_full_window_steps - c.all_vs_llama_full_window_mismatches,
            c.all_vs_llama_full_window_steps,
            if c.changed_count_mismatches == 0 && c.vector_rule_holds { "yes" } else { "NO" },
            if c.long_window_equals_all { "yes" } else { "NO" },
            if c.llama_long_window_equals_all { "yes" } else { "NO" },
            if c.greedy_mismatches == 0 { "first maximum" } else { "DIFFERS" },
        ));
        out.push_str(&format!(
            "penalty-scope-divergence: {} on {} ({} of {} scopes differ from all)\n",
            self.verdict(),
            self.build.tag(),
            self.diverging().len(),
            self.trajectories.len() - 1
        ));
        out
    }
}
