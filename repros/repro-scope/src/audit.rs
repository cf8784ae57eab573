//! `--audit`: the published prompt with its cross-checks and single-vector table, then the
//! scope sweep over the prompt corpus, with the plot. The published prompt's verdict is the
//! finding's verdict on this build.

use crate::run::{self, LoadedModel, RunConfig, RunReport};
pub use crate::sweep::SweepPlan;
use crate::{plot, sweep};
use anyhow::{Context, Result};
use serde_json::{json, Value};
use std::path::Path;

pub struct Audit {
    pub published: RunReport,
    pub sweep: sweep::Sweep,
}

pub fn run(m: &LoadedModel, cfg: &RunConfig, plan: SweepPlan) -> Result<Audit> {
    let published = run::run(m, cfg)?;
    let sweep = sweep::run(m, &plan, cfg.theta, cfg.threads)?;
    Ok(Audit { published, sweep })
}

impl Audit {
    pub fn controls_pass(&self) -> bool {
        self.published.cross_checks().pass() && self.sweep.checks_pass()
    }

    pub fn verdict(&self) -> &'static str {
        if !self.controls_pass() {
            "invalid"
        } else {
            self.published.verdict()
        }
    }

    pub fn evidence(&self) -> String {
        let p = &self.published;
        let per: Vec<String> = p.trajectories[1..]
            .iter()
            .map(|t| {
                format!(
                    "{} {}",
                    t.scope,
                    t.diverges_from(p.all())
                        .map_or("same".to_string(), |d| format!("diverges at {d}"))
                )
            })
            .collect();
        let s = self.sweep.summary();
        let sweep: Vec<String> = s
            .iter()
            .map(|w| format!("{}:{}", w.window, w.diverged))
            .collect();
        format!(
            "{} {} prompt tokens: {}; all stops at {}; sweep diverged (window:prompts of {}) {}",
            p.model_label,
            p.prompt_ids.len(),
            per.join(", "),
            p.all().stopped_at(),
            self.sweep.rows.len(),
            sweep.join(" ")
        )
    }

    pub fn to_json(&self) -> Value {
        let mut v = self.published.to_json();
        v["verdict"] = json!(self.verdict());
        v["evidence"] = json!(self.evidence());
        v["build_detail"] = json!(self.published.build.describe());
        v["sweep"] = self.sweep.to_json();
        v["controls_pass"] = json!(self.controls_pass());
        v
    }

    pub fn to_text(&self) -> String {
        let mut out = format!(
            "F3 penalty-scope-divergence on {}\n\n",
            self.published.build.describe()
        );
        out.push_str(&self.published.to_text());
        out.push('\n');
        out.push_str(&self.sweep.to_text());
        if !self.controls_pass() {
            out.push_str("CROSS-CHECKS FAILED: the verdict is not valid\n");
        }
        out
    }

    /// `results/scope.<build>.json` and `results/scope-sweep.<build>.svg`.
    pub fn write(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let tag = self.published.build.tag();
        let json_path = dir.join(format!("scope.{tag}.json"));
        std::fs::write(
            &json_path,
            serde_json::to_string_pretty(&self.to_json())? + "\n",
        )
        .with_context(|| format!("writing {}", json_path.display()))?;
        let svg_path = dir.join(format!("scope-sweep.{tag}.svg"));
        let title = format!(
            "F3: where a last-N penalty window parts from the whole-sequence penalty ({}, {}, theta {})",
            self.published.model_label, tag, self.sweep.theta
        );
        std::fs::write(&svg_path, plot::svg(&self.sweep, &title))
            .with_context(|| format!("writing {}", svg_path.display()))?;
        Ok(())
    }
}
