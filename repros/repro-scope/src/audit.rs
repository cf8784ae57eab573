//! `--audit`: the published prompt with its single-vector table, then the scope sweep over the
//! prompt corpus, with the plot. The published prompt's verdict (its `llama:N` scope against
//! `all`) is the finding's verdict on this build; the controls (llama.cpp twins, planted
//! scopes) cover every prompt that ran, and the planted penalties samplers the published one.

use crate::controls::{planted_controls, twin_controls};
use crate::run::{self, LoadedModel, RunConfig, RunReport};
pub use crate::sweep::SweepPlan;
use crate::{plot, sweep};
use anyhow::{Context, Result};
use report::{Control, Report};
use std::collections::BTreeMap;
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
    pub fn controls(&self) -> Vec<Control> {
        let sweep_trajectories = self.sweep.rows.iter().flat_map(|r| &r.trajectories);
        let mut c = twin_controls(self.published.trajectories.iter().chain(sweep_trajectories));
        let sweep = (self.sweep.rows.iter().enumerate())
            .map(|(i, r)| (format!("sweep {} {}", i + 1, r.kind), &r.planted));
        let published = ("published".to_string(), &self.published.planted);
        c.extend(planted_controls(std::iter::once(published).chain(sweep)));
        c.extend(self.published.samplers.iter().flat_map(|s| s.controls()));
        c
    }

    /// The published run's scopes, then every window of the sweep.
    pub fn evidence(&self) -> String {
        let s = self.sweep.summary();
        let sweep: Vec<String> = s
            .iter()
            .map(|w| format!("{}:{} ({} undecided)", w.window, w.diverged, w.undecided))
            .collect();
        format!(
            "{}; sweep, reported (the oracle's last-N windows), diverged (window:prompts of {}) {}",
            self.published.evidence(),
            self.sweep.rows.len(),
            sweep.join(" ")
        )
    }

    pub fn report(&self) -> Report {
        let mut r = Report::new(
            self.published.subject(),
            self.published.measured(),
            self.evidence(),
            self.controls(),
        );
        self.published.add_notes(&mut r);
        r.with_body(&self.published)
            .with_body(BTreeMap::from([("sweep", &self.sweep)]))
            .with_text(format!(
                "{}\n{}",
                self.published.to_text(),
                self.sweep.to_text()
            ))
    }

    /// `results/scope.<build>.{json,txt}` and `results/scope-sweep.<build>.svg`.
    pub fn write(&self, dir: &Path) -> Result<()> {
        let report = self.report();
        report.write(dir, "scope")?;
        for (name, body) in plot::files(&report.to_json())? {
            let p = dir.join(&name);
            std::fs::write(&p, body).with_context(|| format!("writing {}", p.display()))?;
        }
        Ok(())
    }
}
