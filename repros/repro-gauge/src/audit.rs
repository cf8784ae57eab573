//! `--audit`: the gauge table for SmolLM2 and Gemma3, then the structured-output corpus on
//! SmolLM2, with both plots. F4 is `present` on a build when the sign-branched sampler changes
//! some greedy choice under a shift; the planted controls show the flip detector firing on a
//! known case and staying quiet on a known gauge-free sampler.

use crate::json::{self, JsonReport};
use crate::plot;
use crate::shift::{self, GaugeConfig, GaugeReport, SamplerKind};
use anyhow::{Context, Result};
use harness::LoadedModel;
use oracle::gauge::Operator;
use report::{Control, Report, Verdict};
use serde_json::json;
use std::path::Path;
use subject::BuildInfo;

pub const AUDIT_PROMPT: &str = "Write a short paragraph about why people enjoy walking by the sea.";
pub const JSON_MAX_NEW: usize = 256;

/// The verdict's name, and the fix's.
pub const NAME: &str = "penalty-gauge-dependence";
pub const LEDGER_NAME: &str = "penalty-gauge-dependence+ledger-normalized";

pub struct Audit {
    pub build: BuildInfo,
    pub gauge: Vec<GaugeReport>,
    /// The structured-output measurement (no verdict of its own; empty for the ledger rerun).
    pub json: JsonReport,
    pub planted: Vec<Control>,
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
        planted: shift::planted_controls()?,
    })
}

/// The gauge reports' controls: the sampler's sign branch against the oracle's, and the
/// planted flip cases.
pub fn controls(gauge: &[GaugeReport], planted: &[Control]) -> Vec<Control> {
    let (mm, steps): (usize, usize) = gauge.iter().fold((0, 0), |(a, b), g| {
        (a + g.sign_mismatches, b + g.sign_steps)
    });
    let mut c = vec![Control::oracle_check(
        "sign-branched sampler = the oracle's sign branch",
        steps > 0 && mm == 0,
        format!("{mm} of {steps} unshifted steps choose differently (every model and theta)"),
    )];
    c.extend(planted.iter().cloned());
    c
}

/// Per model: positive share, and per operator how many (theta, shift) cells changed a choice
/// and the largest teacher-forced flip rate.
pub fn gauge_evidence(gauge: &[GaugeReport]) -> String {
    gauge
        .iter()
        .map(|g| {
            let per: Vec<String> = Operator::ALL
                .iter()
                .map(|&op| {
                    let rows: Vec<&shift::Row> =
                        g.rows.iter().filter(|r| r.operator() == op).collect();
                    let max = rows.iter().map(|r| r.flip_rate()).fold(0.0, f64::max);
                    let by_construction = rows
                        .iter()
                        .all(|r| r.implementation.invariant_by_construction());
                    format!(
                        "{} {} of {} cells flip (max {:.1}%){}",
                        op.as_str(),
                        g.flagged(op),
                        rows.len(),
                        100.0 * max,
                        if by_construction {
                            " by construction"
                        } else {
                            ""
                        }
                    )
                })
                .collect();
            format!(
                "{}: {:.0}% of seen ids positive; {}",
                g.model_label,
                100.0 * g.positive_share(),
                per.join(", ")
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

impl Audit {
    fn ledger(&self) -> bool {
        self.gauge
            .first()
            .is_some_and(|g| g.sampler == SamplerKind::Ledger)
    }

    /// Built-ins: `present` when the sign-branched sampler changes a choice somewhere. The
    /// fix's rerun: `present` when the normalized ledger sampler does.
    pub fn measured(&self) -> Verdict {
        let op = if self.ledger() {
            Operator::Normalized
        } else {
            Operator::Sign
        };
        Verdict::found(self.gauge.iter().any(|g| g.flagged(op) > 0))
    }

    pub fn evidence(&self) -> String {
        let gauge = gauge_evidence(&self.gauge);
        if self.ledger() {
            return gauge;
        }
        let n = self.json.prompts.len();
        let rows: Vec<String> = self
            .json
            .totals()
            .iter()
            .map(|t| format!("{} {}/{}", t.label, t.schema_valid, n))
            .collect();
        format!(
            "{gauge}; schema-valid JSON per variant (SmolLM2, no threshold): {}",
            rows.join(", ")
        )
    }

    pub fn report(&self) -> Report {
        let name = if self.ledger() { LEDGER_NAME } else { NAME };
        let mut body = json!({
            "models": self.gauge.iter().map(|g| g.to_json()).collect::<Vec<_>>(),
        });
        if !self.ledger() {
            body["json_corpus"] = self.json.to_json();
        }
        Report::new(
            self.build.report_subject(crate::FINDING, name),
            self.measured(),
            self.evidence(),
            controls(&self.gauge, &self.planted),
        )
        .with_body(body)
        .with_text(self.text())
    }

    fn text(&self) -> String {
        let mut parts: Vec<String> = self.gauge.iter().map(GaugeReport::to_text).collect();
        if !self.ledger() {
            parts.push(self.json.to_text());
        }
        parts.join("\n")
    }

    pub fn write(&self, dir: &Path) -> Result<()> {
        let tag = self.build.tag();
        if self.ledger() {
            self.report().write(dir, "gauge-ledger")?;
            return Ok(());
        }
        self.report().write(dir, "gauge")?;
        let files = [
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

/// A single gauge run's report (no corpus).
pub fn single_report(g: GaugeReport, build: &BuildInfo) -> Result<Report> {
    let name = if g.sampler == SamplerKind::Ledger {
        LEDGER_NAME
    } else {
        NAME
    };
    let op = if g.sampler == SamplerKind::Ledger {
        Operator::Normalized
    } else {
        Operator::Sign
    };
    let gauge = [g];
    Ok(Report::new(
        build.report_subject(crate::FINDING, name),
        Verdict::found(gauge[0].flagged(op) > 0),
        gauge_evidence(&gauge),
        controls(&gauge, &shift::planted_controls()?),
    )
    .with_body(gauge[0].to_json())
    .with_text(gauge[0].to_text()))
}
