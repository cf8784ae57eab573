//! The F4 report: the A1 design on each model, its controls and the two verdicts (the
//! subject's, and the fix's `+ledger-normalized`), by the rules in PREREG.md (addendum
//! 2026-11-30). A single run (not `--audit`) adds a teacher-forced table; the audit's
//! reported-only tables are [`crate::tables`].

use crate::free_running::{self, Cell, Design, ModelRuns};
use crate::implementation::short;
use crate::plot;
use crate::shift;
use crate::teacher_forced::{self, TeacherForcedReport};
use anyhow::{Context, Result};
use engine::{EngineInfo, EngineName};
use harness::LoadedModel;
use oracle::gauge::Operator;
use report::{Control, Report, Verdict};
use serde::Serialize;
use std::path::Path;
use subject::BuildInfo;

/// The verdict's name, and the fix's.
pub const NAME: &str = "penalty-gauge-dependence";
pub const LEDGER_NAME: &str = "penalty-gauge-dependence+ledger-normalized";

pub use crate::rule::{divergences, fix_verdict_of, gauge_free_divergences, strongest, verdict_of};

/// The prompts of the A1 design (one per line; `#` lines and blank lines skipped).
pub const DEFAULT_PROMPTS: &str = include_str!("../prompts/a1.txt");

pub fn parse_prompts(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

/// The report's JSON after the header and the verdict rows.
#[derive(Serialize)]
struct Body<'a> {
    design: DesignData,
    #[serde(flatten)]
    one_model: Option<&'a ModelRuns>,
    #[serde(skip_serializing_if = "Option::is_none")]
    models: Option<&'a [ModelRuns]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    teacher_forced: Option<OneOrList<'a, TeacherForcedReport>>,
}

/// One run's object, or the list of all of them (of none, too).
#[derive(Serialize)]
#[serde(untagged)]
enum OneOrList<'a, T> {
    One(&'a T),
    List(&'a [T]),
}

#[derive(Serialize)]
struct DesignData {
    thetas: Vec<f64>,
    shifts: Vec<f64>,
    max_new: usize,
    bootstrap: Bootstrap,
    normalized_tolerance_at_theta_1_3: f64,
    knife_edge_ulps: f32,
}

#[derive(Serialize)]
struct Bootstrap {
    resamples: usize,
    seed: u64,
    /// The interval's percentiles of the bootstrap mean.
    percentiles: [f64; 2],
    /// 0.95 when every model ran at least `interval::MIN_FOR_95` prompts; otherwise none: the
    /// percentiles over fewer prompts are not called a 95% interval.
    level: Option<f64>,
    prompts: usize,
    interval: String,
}

pub struct Audit {
    pub build: BuildInfo,
    /// The engine in the sign slot (llama.cpp, or another engine's penalty through the seam).
    pub engine: EngineInfo,
    /// Another engine: its penalty and llama.cpp's at logits of exactly 0 (a note).
    pub zero_boundary: Option<crate::engine_slot::ZeroBoundary>,
    pub design: Design,
    pub models: Vec<ModelRuns>,
    /// Teacher-forced flips, one table per model (a single run's; empty in the audit).
    pub tf: Vec<TeacherForcedReport>,
    pub planted: Vec<Control>,
    /// The fix on the planted case, judged by its own rule: reported beside the fix's row
    /// (a note), never one of that row's controls.
    pub fix_on_planted: (Verdict, String),
}

/// `f` on every model, each error naming its model.
pub(crate) fn per_model<T>(
    models: &[LoadedModel],
    what: &str,
    f: impl Fn(&LoadedModel) -> Result<T>,
) -> Result<Vec<T>> {
    let each = models
        .iter()
        .map(|m| f(m).with_context(|| format!("{what} on {}", m.choice.label)));
    each.collect()
}

/// The design on every model; then, with `teacher`, the teacher-forced table on each.
pub fn run(
    models: &[LoadedModel],
    design: &Design,
    prompts: &[String],
    teacher: Option<(&str, usize)>,
) -> Result<Audit> {
    let runs = per_model(models, "the A1 design", |m| {
        ModelRuns::run(m, design, prompts)
    })?;
    let (thetas, shifts, threads) = (&design.thetas, &design.shifts, design.threads);
    let tf = match teacher {
        Some((text, n)) => per_model(models, "teacher forcing", |m| {
            teacher_forced::run(m, text, n, thetas, shifts, threads)
        })?,
        None => Vec::new(),
    };
    let engine_name = design.engine();
    let engine = harness::engines::get(engine_name)?;
    let zero_boundary = (engine_name != EngineName::Llama)
        .then(|| crate::engine_slot::ZeroBoundary::measure(engine.as_ref()))
        .transpose()?;
    Ok(Audit {
        build: BuildInfo::current(),
        engine: engine.info(),
        zero_boundary,
        design: design.clone(),
        models: runs,
        tf,
        planted: shift::planted_controls()?,
        fix_on_planted: shift::fix_on_planted_case()?,
    })
}

impl Audit {
    fn cells(&self) -> Result<Vec<Vec<Cell>>> {
        self.models.iter().map(ModelRuns::cells).collect()
    }

    pub fn controls(&self) -> Vec<Control> {
        let no_op = ModelRuns::no_op_leg(&self.models);
        let fork = ModelRuns::fork_check(&self.models);
        let (tf_flips, tf_positions, tf_edges) = (self.tf.iter().map(TeacherForcedReport::no_op))
            .fold((0, 0, 0), |(f, p, e), (f1, p1, e1)| {
                (f + f1, p + p1, e + e1)
            });
        let tf_words = if self.tf.is_empty() {
            String::new()
        } else {
            format!("; teacher-forced at theta 1: {tf_flips} flips in {tf_positions} position-cells, {tf_edges} of them at knife edges")
        };
        let first = |f: Option<String>| f.map(|f| format!("; first: {f}")).unwrap_or_default();
        let mut c = vec![
            Control::negative(
                "no-op leg: theta 1 runs identical to the unshifted one",
                no_op.compared > 0 && no_op.failures == 0 && tf_flips == tf_edges,
                format!(
                    "{} of {} theta-1 runs (every model, prompt, operator and shift, the reference itself excluded; those at c = 0 get the reference's bits and are equal by construction, those at c != 0 get other bits) differ from the sign slot's theta-1 c = 0 run, {} more at knife edges{}{tf_words}",
                    no_op.failures,
                    no_op.compared,
                    no_op.knife_edges,
                    first(no_op.first),
                ),
            ),
            Control::oracle_check(
                "forked decoding = single-sequence decoding",
                fork.compared > 0 && fork.failures == 0,
                format!(
                    "the sign runs at the largest theta, c = 0 and the largest c, decoded on forked sequences of the shared batch, against the same runs decoded alone: {} of {} part anywhere ({} tokens){}",
                    fork.failures,
                    fork.compared,
                    fork.tokens,
                    first(fork.first)
                ),
            ),
        ];
        let needs_values = self.design.thetas.iter().any(|&t| t != 1.0);
        for (op, check) in free_running::checks(self.models.iter().flat_map(ModelRuns::runs)) {
            c.push(Control::oracle_check(
                format!("{} = the oracle's arithmetic at every step", op.as_str()),
                (check.compared > 0 || !needs_values) && check.untouched > 0 && check.clean(),
                format!(
                    "{} of {} seen-id values differ (largest deviation {:e}); {} of {} other ids moved{}",
                    check.mismatches,
                    check.compared,
                    check.max_deviation,
                    check.moved,
                    check.untouched,
                    first(check.first_mismatch)
                ),
            ));
        }
        c.extend(self.planted.iter().cloned());
        c
    }

    /// Per model: the sign operator at the strongest cells with intervals and the gauge-free
    /// operators' divergences; then each teacher-forced table a single run adds.
    pub fn evidence(&self) -> Result<String> {
        let mut parts: Vec<String> = self
            .models
            .iter()
            .zip(self.cells()?)
            .map(|(m, cells)| {
                let strong: Vec<String> = strongest(&cells)
                    .iter()
                    .map(|c| {
                        let d = c.differing();
                        format!(
                            "theta {} c={:+}: {:.2} [{:.2}, {:.2}]",
                            c.theta, c.shift, d.mean, d.lo, d.hi
                        )
                    })
                    .collect();
                let (div, knife, runs) = gauge_free_divergences(&cells);
                format!(
                    "{}: sign differing share {} over {} prompts ({}); subtractive and normalized parted from c = 0 in {div} of {runs} shifted prompt-cells with theta > 1 ({knife} at knife edges)",
                    m.model_label,
                    strong.join(", "),
                    m.prompts.len(),
                    crate::interval::words(m.prompts.len(), "prompts")
                )
            })
            .collect();
        parts.extend(self.tf.iter().map(TeacherForcedReport::summary));
        Ok(parts.join("; "))
    }

    fn body(&self) -> Result<serde_json::Value> {
        // The fewest prompts any model ran: what the intervals may be called.
        let prompts = (self.models.iter().map(|m| m.prompts.len()).min()).unwrap_or(0);
        let design = DesignData {
            thetas: self.design.thetas.iter().map(|&t| short(t)).collect(),
            shifts: self.design.shifts.iter().map(|&c| short(c)).collect(),
            max_new: self.design.max_new,
            bootstrap: Bootstrap {
                resamples: oracle::stats::BOOTSTRAP_RESAMPLES,
                seed: oracle::stats::BOOTSTRAP_SEED,
                percentiles: [2.5, 97.5],
                level: crate::interval::is_95(prompts).then_some(0.95),
                prompts,
                interval: crate::interval::words(prompts, "prompts"),
            },
            normalized_tolerance_at_theta_1_3: free_running::NORMALIZED_TOLERANCE,
            knife_edge_ulps: free_running::KNIFE_ULPS,
        };
        // One model (a single run): its fields at the top level; several: a list.
        let (one_model, models) = match self.models.as_slice() {
            [one] => (Some(one), None),
            many => (None, Some(many)),
        };
        let teacher_forced = match self.tf.as_slice() {
            [] => None,
            [one] => Some(OneOrList::One(one)),
            many => Some(OneOrList::List(many)),
        };
        let body = Body {
            design,
            one_model,
            models,
            teacher_forced,
        };
        Ok(serde_json::to_value(body)?)
    }

    fn model_texts(&self) -> Result<Vec<String>> {
        self.models.iter().map(free_running::to_text).collect()
    }

    fn text(&self) -> Result<String> {
        let mut parts = self.model_texts()?;
        parts.extend(self.tf.iter().map(TeacherForcedReport::to_text));
        Ok(parts.join("\n"))
    }

    pub fn report(&self) -> Result<Report> {
        let subject = report::ReportId::new(
            &crate::FINDING,
            NAME,
            self.engine.name.label(),
            self.engine.tag.clone(),
            self.engine.detail.clone(),
            report::Sources(self.engine.sources),
        );
        let mut evidence = self.evidence()?;
        let mut measured = verdict_of(&self.models)?;
        let own = self.own_verdict();
        if self.engine.name != EngineName::Llama {
            evidence = format!(
                "{} penalty on the logits of {}: {evidence}",
                self.engine.name.label(),
                self.build.describe()
            );
        }
        if !own {
            // Too few prompts for the rule's 95% interval: the report says what it shows (its
            // note) and takes no verdict of its own.
            measured = Verdict::Undecided;
            evidence = format!(
                "no verdict of its own: {} prompts, and the rule's interval needs {} (see the note {NAME}-{}-arithmetic); {evidence}",
                self.fewest_prompts(),
                crate::interval::MIN_FOR_95,
                self.engine.name.as_str()
            );
        }
        let mut r = Report::new(subject, measured, evidence, self.controls());
        let text = self.text()?;
        if !own {
            let (name, note, data) = self.arithmetic_note();
            r.add_note(name, note, data);
        }
        if let Some(z) = &self.zero_boundary {
            // Where the two branch rules meet, shown with its bits: IEEE arithmetic fixes the
            // answer there, so it is a note and never a verdict.
            r.add_note(format!("{NAME}-zero-boundary"), z.note(), z.data());
        }
        Ok(r.with_body(self.body()?).with_text(text))
    }

    /// The fewest prompts any model ran.
    fn fewest_prompts(&self) -> usize {
        (self.models.iter().map(|m| m.prompts.len()).min()).unwrap_or(0)
    }

    /// Whether the report gives a verdict of its own. llama.cpp's always does (its subsets are
    /// registered as they are, PREREG F4). Another engine's penalty does only over enough
    /// prompts for a 95% interval; with fewer, what the run shows is that engine's penalty is
    /// llama.cpp's arithmetic, bit for bit, which is a note (PREREG F4, addendum 2026-12-03).
    pub fn own_verdict(&self) -> bool {
        self.engine.name == EngineName::Llama || crate::interval::is_95(self.fewest_prompts())
    }

    /// Another engine's penalty without a verdict of its own: the sign slot's value check,
    /// which holds every seen id's value to the sign-branched arithmetic bit for bit and every
    /// other id to its input, as the note's evidence.
    fn arithmetic_note(&self) -> (String, String, serde_json::Value) {
        let runs = self.models.iter().flat_map(ModelRuns::runs);
        let sign = (free_running::checks(runs).into_iter())
            .find(|(op, _)| *op == Operator::Sign)
            .map(|(_, c)| c)
            .unwrap_or_default();
        let engine = self.engine.name.label();
        let same = sign.compared > 0 && sign.clean();
        let note = format!(
            "{engine}'s penalty in the sign slot, over {} prompts: {} of {} seen-id values differ from the sign-branched arithmetic (one f32 division above 0, one multiplication at or below), {} of {} other ids moved; {} Its gauge dependence is therefore the operator's, which llama.cpp's report on {} measures over 16 prompts with a 95% interval; these {} prompts are fewer than that interval needs, so this report gives no verdict of its own.",
            self.fewest_prompts(),
            sign.mismatches,
            sign.compared,
            sign.moved,
            sign.untouched,
            if same {
                "every value is bit for bit what llama.cpp's penalties compute (their own value check in llama.cpp's report, and the zero-boundary note), so on the same logits the two make the same choices."
            } else {
                "the values differ, so the two penalties are not the same arithmetic here."
            },
            self.build.tag(),
            self.fewest_prompts(),
        );
        let data = serde_json::json!({
            "prompts": self.fewest_prompts(),
            "seen_values_compared": sign.compared,
            "seen_values_differing": sign.mismatches,
            "other_ids": sign.untouched,
            "other_ids_moved": sign.moved,
            "same_arithmetic": same,
        });
        (
            format!("{NAME}-{}-arithmetic", self.engine.name.as_str()),
            note,
            data,
        )
    }

    /// The fix's report, from the same runs.
    pub fn fix_report(&self) -> Result<Report> {
        let evidence: Vec<String> = (self.models.iter().zip(self.cells()?))
            .map(|(m, cells)| {
                let (div, knife, n) = divergences(&cells, |op| op == Operator::Normalized);
                format!(
                    "{}: ledger-penalties normalized parted from its c = 0 run in {div} of {n} shifted prompt-cells with theta > 1 ({knife} at knife edges)",
                    m.model_label
                )
            })
            .collect();
        let models = serde_json::to_value(&self.models)?;
        let text = self.model_texts()?;
        let mut r = Report::new(
            self.build.report_subject(&crate::FINDING, LEDGER_NAME),
            fix_verdict_of(&self.models)?,
            evidence.join("; "),
            self.controls(),
        );
        let (verdict, line) = &self.fix_on_planted;
        r.add_note(
            format!("{LEDGER_NAME}-on-the-planted-case"),
            line.clone(),
            serde_json::json!({ "fix_rule_reads": verdict }),
        );
        Ok(
            r.with_body(std::collections::BTreeMap::from([("models", models)]))
                .with_text(text.join("\n")),
        )
    }

    pub fn write(&self, dir: &Path) -> Result<()> {
        let report = self.report()?;
        report.write(dir, "gauge")?;
        if self.engine.name != EngineName::Llama {
            // Another engine's sign slot: its verdict only (the fix and the plots are
            // llama.cpp's runs).
            return Ok(());
        }
        self.fix_report()?.write(dir, "gauge-ledger")?;
        for (name, body) in plot::files(&report.to_json())? {
            let p = dir.join(&name);
            std::fs::write(&p, body).with_context(|| format!("writing {}", p.display()))?;
        }
        Ok(())
    }
}
