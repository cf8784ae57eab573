//! `--audit`: the gauge table for SmolLM2 and Gemma3, then the structured-output corpus on
//! SmolLM2, with both plots. F4 is `present` on a build when the sign-branched operator flips
//! some choice under a shift while both gauge-free operators stay exactly invariant.

use crate::json::{self, JsonReport};
use crate::plot;
use crate::shift::{self, GaugeConfig, GaugeReport, SamplerKind};
use anyhow::{Context, Result};
use harness::LoadedModel;
use oracle::gauge::Operator;
use serde_json::{json, Value};
use std::path::Path;
use subject::BuildInfo;

pub const AUDIT_PROMPT: &str = "Write a short paragraph about why people enjoy walking by the sea.";
pub const JSON_MAX_NEW: usize = 256;

pub struct Audit {
    pub build: BuildInfo,
    pub gauge: Vec<GaugeReport>,
    pub json: JsonReport,
}

/// `models`: the gauge models (all of them), then the JSON corpus on the first; `json_limit`
/// keeps the first prompts of the corpus only (the tests use a fixed subset).
pub fn run(models: &[LoadedModel], cfg: &GaugeConfig, json_limit: Option<usize>) -> Result<Audit> {
    let mut gauge = Vec::new();
    for m in models {
        gauge.push(shift::run(m, cfg).with_context(|| format!("gauge run on {}", m.choice.label))?);
    }
    let mut corpus = json::corpus()?;
    if let Some(n) = json_limit {
        corpus.truncate(n);
    }
    // The ledger audit is about the fix's gauge run; the corpus is the built-ins' consequence.
    if cfg.sampler == SamplerKind::Ledger {
        corpus.clear();
    }
    let json = json::run(&models[0], &corpus, JSON_MAX_NEW, cfg.threads)?;
    Ok(Audit {
        build: BuildInfo::current(),
        gauge,
        json,
    })
}

impl Audit {
    pub fn controls_pass(&self) -> bool {
        self.gauge
            .iter()
            .all(|g| g.gauge_free_exact() && g.sign_mismatches == 0)
    }

    pub fn sign_flips(&self) -> bool {
        self.gauge.iter().any(|g| {
            g.rows
                .iter()
                .any(|r| r.operator == Operator::Sign && r.flips > 0)
        })
    }

    fn ledger(&self) -> bool {
        self.gauge
            .first()
            .is_some_and(|g| g.sampler == SamplerKind::Ledger)
    }

    pub fn verdict(&self) -> &'static str {
        if self.ledger() {
            // The fix's row: normalized mode through a real llama.cpp chain must never flip.
            return if self.controls_pass() {
                "absent"
            } else {
                "present"
            };
        }
        match (self.controls_pass(), self.sign_flips()) {
            (false, _) => "invalid",
            (true, true) => "present",
            (true, false) => "absent",
        }
    }

    pub fn evidence(&self) -> String {
        let per: Vec<String> = self
            .gauge
            .iter()
            .map(|g| {
                let max = g
                    .rows
                    .iter()
                    .filter(|r| r.operator == Operator::Sign)
                    .map(|r| r.flip_rate())
                    .fold(0.0, f64::max);
                let free_max = g
                    .rows
                    .iter()
                    .filter(|r| r.operator != Operator::Sign)
                    .map(|r| r.flip_rate())
                    .fold(0.0, f64::max);
                format!(
                    "{}: {:.0}% of seen ids positive, sign flips up to {:.0}%, subtractive/normalized {:.0}%",
                    g.model_label,
                    100.0 * g.positive_share(),
                    100.0 * max,
                    100.0 * free_max
                )
            })
            .collect();
        let t = self.json.totals();
        let n = self.json.prompts.len().max(1) as f64;
        let share = |label: &str| {
            t.iter()
                .find(|x| x.label == label)
                .map_or("?".to_string(), |x| {
                    format!("{:.0}%", 100.0 * x.schema_valid as f64 / n)
                })
        };
        if self.ledger() {
            return per.join("; ").replace(
                "subtractive/normalized",
                "subtractive (oracle)/normalized (ledger chain)",
            );
        }
        format!(
            "{}; schema-valid JSON none {} / llama 1.3 whole {} / normalized 1.3 {}",
            per.join("; "),
            share("none"),
            share("llama 1.3 whole"),
            share("normalized 1.3")
        )
    }

    pub fn gauge_json(&self) -> Value {
        json!({
            "finding": "F4",
            "name": if self.ledger() { "penalty-gauge-dependence+ledger-normalized" } else { "penalty-gauge-dependence" },
            "build": self.build.tag(),
            "build_detail": self.build.describe(),
            "verdict": self.verdict(),
            "evidence": self.evidence(),
            "controls_pass": self.controls_pass(),
            "models": self.gauge.iter().map(|g| g.to_json()).collect::<Vec<_>>(),
        })
    }

    pub fn json_json(&self) -> Value {
        let mut v = self.json.to_json();
        v["build"] = json!(self.build.tag());
        v
    }

    pub fn to_text(&self) -> String {
        let mut out = format!(
            "F4 penalty-gauge-dependence on {}\n\n",
            self.build.describe()
        );
        for g in &self.gauge {
            out.push_str(&g.to_text());
            out.push('\n');
        }
        out.push_str(&self.json.to_text());
        out.push_str(&format!(
            "penalty-gauge-dependence: {} on {}\n",
            self.verdict(),
            self.build.tag()
        ));
        out
    }

    pub fn write(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let tag = self.build.tag();
        if self.ledger() {
            let p = dir.join(format!("gauge-ledger.{tag}.json"));
            std::fs::write(&p, serde_json::to_string_pretty(&self.gauge_json())? + "\n")
                .with_context(|| format!("writing {}", p.display()))?;
            return Ok(());
        }
        let files = [
            (
                format!("gauge.{tag}.json"),
                serde_json::to_string_pretty(&self.gauge_json())? + "\n",
            ),
            (
                format!("json.{tag}.json"),
                serde_json::to_string_pretty(&self.json_json())? + "\n",
            ),
            (
                format!("gauge-flips.{tag}.svg"),
                plot::flips_svg(
                    &self.gauge,
                    &format!("F4: greedy choices that flip when every logit moves by c ({tag})"),
                ),
            ),
            (
                format!("json-valid.{tag}.svg"),
                plot::json_svg(
                    &self.json,
                    &format!(
                        "F4: JSON answers per penalty variant ({}, {tag})",
                        self.json.model_label
                    ),
                ),
            ),
        ];
        for (name, body) in files {
            let p = dir.join(&name);
            std::fs::write(&p, body).with_context(|| format!("writing {}", p.display()))?;
        }
        Ok(())
    }
}
