//! F4's reported-only tables: teacher forcing on every model, the JSON corpus free-running on
//! the first model, and its prompt/schema pairs along grammar references on every model. No
//! verdict rests on them (PREREG F4), and none of the verdict's controls run through them, so
//! they are their own run (`repro-gauge --tables`, `make audit-tables`), written under
//! `results/tables/` beside their charts, and their own checks stop that run when one fails.

use crate::audit::per_model;
use crate::free_running::Design;
use crate::json::{self, JsonReport};
use crate::reference::{self, StructuralReport};
use crate::teacher_forced::{self, TeacherForcedReport};
use anyhow::{bail, Context, Result};
use harness::LoadedModel;
use report::Control;
use serde::Serialize;
use std::path::Path;
use subject::BuildInfo;

/// The folder under the results directory the tables are written to.
pub const DIR: &str = "tables";

/// New tokens per free-running JSON answer.
pub const JSON_MAX_NEW: usize = 256;

pub struct Tables {
    pub build: BuildInfo,
    pub tf: Vec<TeacherForcedReport>,
    pub json: JsonReport,
    pub structural: Vec<StructuralReport>,
}

/// How many of the JSON corpus's prompts each table takes (`usize::MAX`: all of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub json_prompts: usize,
    pub structural_pairs: usize,
}

impl Tables {
    /// Teacher forcing over `positions` of `text` at the design's thetas and shifts on every
    /// model; the JSON corpus free-running on the first model; the grammar walks on every model.
    pub fn run(
        models: &[LoadedModel],
        design: &Design,
        (text, positions): (&str, usize),
        counts: Counts,
    ) -> Result<Tables> {
        let (thetas, shifts, threads) = (&design.thetas, &design.shifts, design.threads);
        let tf = per_model(models, "teacher forcing", |m| {
            teacher_forced::run(m, text, positions, thetas, shifts, threads)
        })?;
        let corpus =
            |n: usize| -> Result<Vec<_>> { Ok(json::corpus()?.into_iter().take(n).collect()) };
        let first = models.first().context("no model")?;
        let json = json::run(first, &corpus(counts.json_prompts)?, JSON_MAX_NEW, threads)?;
        let pairs = corpus(counts.structural_pairs)?;
        let structural = per_model(models, "grammar references", |m| {
            reference::run(m, &pairs, threads)
        })?;
        Ok(Tables {
            build: BuildInfo::current(),
            tf,
            json,
            structural,
        })
    }

    /// The tables' own checks: the teacher-forced harness shifts whole rows (at theta 1 no
    /// choice flips off a knife edge); the
    /// grammar walks' planted stages (one that must break the JSON at every structural
    /// position, one that must break it exactly where the unpenalized choice does) and their
    /// oracle checks (the references finish and pass their schemas; the shortlist shortcut
    /// chooses like the whole row).
    pub fn checks(&self) -> Vec<Control> {
        let mut c = Vec::new();
        for t in &self.tf {
            c.push(no_op_check(t));
        }
        c.extend(self.structural.iter().flat_map(StructuralReport::controls));
        c
    }

    /// One line per table: what it measured, in numbers.
    pub fn summary(&self) -> Vec<String> {
        let mut parts: Vec<String> = self.tf.iter().map(TeacherForcedReport::summary).collect();
        {
            let j = &self.json;
            let n = j.prompts.len();
            let rows: Vec<String> = (j.totals().iter())
                .map(|t| format!("{} {}/{}", t.label, t.schema_valid, n))
                .collect();
            parts.push(format!(
                "schema-valid JSON per variant ({}, no threshold): {}",
                j.model_label,
                rows.join(", ")
            ));
        }
        for r in &self.structural {
            let rows: Vec<String> = (r.shares().iter())
                .filter(|s| !s.control)
                .map(|s| {
                    format!(
                        "{} {:.3} [{:.3}, {:.3}]",
                        s.label, s.break_share, s.break_ci[0], s.break_ci[1]
                    )
                })
                .collect();
            parts.push(format!(
                "{}: share of structural positions where the greedy choice breaks the JSON along grammar references ({} of {} walks finished, no threshold): {}; llama 1.3 whole over normalized 1.3: {}",
                r.model_label,
                r.finished().len(),
                r.pairs.len(),
                rows.join(", "),
                r.ratio_text()
            ));
        }
        parts
    }

    pub fn to_json(&self) -> Result<serde_json::Value> {
        #[derive(Serialize)]
        struct Bootstrap {
            resamples: usize,
            seed: u64,
        }
        #[derive(Serialize)]
        struct Body<'a> {
            finding: &'static str,
            what: &'static str,
            build: &'a str,
            build_detail: String,
            checks: Vec<Control>,
            summary: Vec<String>,
            bootstrap: Bootstrap,
            teacher_forced: &'a [TeacherForcedReport],
            json_corpus: &'a JsonReport,
            structural: &'a [StructuralReport],
        }
        Ok(serde_json::to_value(Body {
            finding: crate::FINDING.id,
            what: "reported-only tables (no verdict rests on them)",
            build: self.build.tag(),
            build_detail: self.build.describe(),
            checks: self.checks(),
            summary: self.summary(),
            bootstrap: Bootstrap {
                resamples: oracle::stats::BOOTSTRAP_RESAMPLES,
                seed: oracle::stats::BOOTSTRAP_SEED,
            },
            teacher_forced: &self.tf,
            json_corpus: &self.json,
            structural: &self.structural,
        })?)
    }

    pub fn to_text(&self) -> String {
        let mut out = format!(
            "F4 reported-only tables on {} (no verdict rests on them)\n",
            self.build.describe()
        );
        for c in self.checks() {
            let mark = if c.passed { "pass" } else { "FAIL" };
            out.push_str(&format!("  check [{mark}] {}: {}\n", c.name, c.detail));
        }
        for s in self.summary() {
            out.push_str(&format!("  {s}\n"));
        }
        let mut parts: Vec<String> = self.tf.iter().map(TeacherForcedReport::to_text).collect();
        parts.push(self.json.to_text());
        parts.extend(self.structural.iter().map(StructuralReport::to_text));
        out.push('\n');
        out.push_str(&parts.join("\n"));
        out
    }

    /// `dir/tables/gauge.<build>.{json,txt}`, then, when every check passed, the JSON charts
    /// beside them; a failed check is the error, after the tables are written.
    pub fn write(&self, dir: &Path) -> Result<()> {
        let dir = dir.join(DIR);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let tag = self.build.tag();
        let value = self.to_json()?;
        let put = |name: String, body: String| {
            let p = dir.join(name);
            std::fs::write(&p, body).with_context(|| format!("writing {}", p.display()))
        };
        put(
            format!("gauge.{tag}.json"),
            serde_json::to_string_pretty(&value)? + "\n",
        )?;
        put(format!("gauge.{tag}.txt"), self.to_text())?;
        self.failed_checks()?;
        for (name, svg) in crate::plot::table_files(&value)? {
            put(name, svg)?;
        }
        Ok(())
    }

    /// An error naming every failed check, or nothing.
    pub fn failed_checks(&self) -> Result<()> {
        let failed: Vec<String> = (self.checks().into_iter())
            .filter(|c| !c.passed)
            .map(|c| c.name)
            .collect();
        if failed.is_empty() {
            Ok(())
        } else {
            bail!(
                "{} of the tables' checks failed: {}",
                failed.len(),
                failed.join("; ")
            )
        }
    }
}

/// Theta 1 is the identity on every operator, and adding c to every logit keeps their order
/// except where two values round to a tie: a teacher-forced choice at theta 1 may flip only at
/// a knife edge. A flip elsewhere means the harness shifted part of a row, or compared rows of
/// different positions: a check of the measurement, not of a sampler.
pub fn no_op_check(t: &TeacherForcedReport) -> Control {
    let (flips, positions, edges) = t.no_op();
    Control::oracle_check(
        format!(
            "{}: teacher forcing shifts whole rows (at theta 1 no choice flips off a knife edge)",
            t.model_label
        ),
        positions > 0 && flips == edges,
        format!("{flips} flips in {positions} position-cells at theta 1, {edges} of them at knife edges"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::implementation::Implementation;
    use crate::teacher_forced::{NaturalGauge, TfCell};

    fn report(flips: usize, knife_edge_flips: usize) -> TeacherForcedReport {
        let cell = TfCell {
            imp: Implementation::LlamaSign,
            theta: 1.0,
            shift: 5.0,
            positions: 10,
            flips,
            predicted_flips: 0,
            agree: 10,
            knife_edge_disagreements: 0,
            knife_edge_flips,
        };
        TeacherForcedReport {
            model_label: "planted".into(),
            positions: 10,
            text: "planted",
            chunk: 512,
            normalized_stride: 1,
            gauge: NaturalGauge::default(),
            cells: vec![cell],
        }
    }

    #[test]
    fn the_no_op_check_flags_a_flip_off_a_knife_edge_and_passes_one_on_it() {
        assert!(!no_op_check(&report(1, 0)).passed);
        assert!(no_op_check(&report(1, 1)).passed);
        assert!(no_op_check(&report(0, 0)).passed);
    }
}
