//! The in-graph rows on the linked build: one per case (`ingraph-<case>`), the planted
//! controls through the same comparison, and the report.

use crate::case::{self, Case, MIN_KEEP};
use crate::compare::{self, Outcome};
use anyhow::Result;
use harness::LoadedModel;
use report::{Control, ControlKind, Report, Table, Verdict};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;
use subject::{graph_offered, BuildInfo, NotOffered};

/// Every row's name starts with this.
pub const ROW: &str = "ingraph";

/// The prompt every case decodes, through the model's chat template.
pub const PROMPT: &str = "Name three rivers.";

/// Everything measured on a build that samples in the graph.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    pub model: String,
    pub prompt: String,
    pub prompt_tokens: usize,
    pub rows: Vec<Outcome>,
    /// The planted exact stage and the one that ignores min_keep in the graph.
    pub planted: [Outcome; 2],
}

/// The finding on the linked build.
pub struct Audit {
    pub build: BuildInfo,
    pub measured: Result<Measured, NotOffered>,
}

/// Runs `cases` (and the planted controls) on `m` after `prompt`.
pub fn run(m: &LoadedModel, prompt: &str, cases: &[Case], threads: i32) -> Result<Audit> {
    let build = BuildInfo::current();
    if let Err(why) = graph_offered() {
        return Ok(Audit {
            build,
            measured: Err(why),
        });
    }
    let ids = m.chat_ids(prompt)?;
    let raw = compare::raw_logits(&m.model, &ids, threads)?;
    let go = |c: &Case| compare::run(&m.model, &ids, &raw, c, threads);
    let rows = cases.iter().map(go).collect::<Result<Vec<_>>>()?;
    let [exact, ignores] = case::planted();
    let planted = [go(&exact)?, go(&ignores)?];
    Ok(Audit {
        build,
        measured: Ok(Measured {
            model: m.choice.label.clone(),
            prompt: prompt.to_string(),
            prompt_tokens: ids.len(),
            rows,
            planted,
        }),
    })
}

const EXACT: &str = "planted min_p=0.5:8 in the graph, exact";
const IGNORES: &str = "planted min_p=0.5:8 in the graph, ignoring min_keep there";

/// The planted rows' protocol: the graph path must be taken, min_keep must bind.
fn planted_ran(o: &Outcome) -> bool {
    o.places.iter().all(|p| p.in_graph) && o.kept_without_min_keep.is_some_and(|k| k < MIN_KEEP)
}

#[derive(Serialize)]
struct Protocol<'a> {
    model: &'a str,
    prompt: &'a str,
    prompt_tokens: usize,
    comparison: &'static str,
}

const COMPARISON: &str = "the chain in a context that samples in the graph, and its CPU tail if any; the same chain on the CPU over the raw logits of the same prompt from a plain context of the same shape (checked to be the graph's starting row bit for bit through a greedy-only graph context); the oracle's composition of the same stages over those logits";

impl Audit {
    pub fn controls(&self) -> Vec<Control> {
        let m = match &self.measured {
            Ok(m) => m,
            Err(why) => {
                return vec![
                    Control::not_run(ControlKind::Positive, IGNORES, why),
                    Control::not_run(ControlKind::Negative, EXACT, why),
                ]
            }
        };
        let [exact, ignores] = &m.planted;
        vec![
            Control::positive(
                IGNORES,
                planted_ran(ignores) && ignores.verdict() == Verdict::Present,
                ignores.evidence(),
            ),
            Control::negative(
                EXACT,
                planted_ran(exact) && exact.verdict() == Verdict::Absent,
                exact.evidence(),
            ),
        ]
    }

    pub fn report(&self) -> Report {
        let subject = self.build.report_subject(crate::FINDING, "ingraph");
        let m = match &self.measured {
            Ok(m) => m,
            Err(why) => {
                let mut r = Report::new(
                    subject,
                    Verdict::NotOffered,
                    why.to_string(),
                    self.controls(),
                );
                for c in case::registered() {
                    r.add_row(
                        format!("{ROW}-{}", c.name),
                        Verdict::NotOffered,
                        why.to_string(),
                        BTreeMap::from([("not_offered", why.to_string())]),
                    );
                }
                return r;
            }
        };
        let verdicts: Vec<(&Outcome, Verdict)> =
            (m.rows.iter()).map(|o| (o, o.verdict())).collect();
        let named = |v: Verdict| -> Vec<&str> {
            (verdicts.iter())
                .filter(|(_, x)| *x == v)
                .map(|(o, _)| o.case.as_str())
                .collect()
        };
        let list = |v: Vec<&str>| {
            if v.is_empty() {
                "none".to_string()
            } else {
                v.join(", ")
            }
        };
        let present = named(Verdict::Present);
        let undecided = named(Verdict::Undecided);
        let overall = if !present.is_empty() {
            Verdict::Present
        } else if !undecided.is_empty() {
            Verdict::Undecided
        } else {
            Verdict::Absent
        };
        let evidence = format!(
            "{} chains on {} after a {}-token prompt, in the graph against the same chain on the CPU and the oracle: {} differ ({}), {} undecided ({})",
            m.rows.len(),
            m.model,
            m.prompt_tokens,
            present.len(),
            list(present.clone()),
            undecided.len(),
            list(undecided.clone()),
        );
        let mut r = Report::new(subject, overall, evidence, self.controls());
        for (o, v) in &verdicts {
            r.add_row(format!("{ROW}-{}", o.case), *v, o.evidence(), o);
        }
        let body = BTreeMap::from([(
            "protocol",
            Protocol {
                model: &m.model,
                prompt: &m.prompt,
                prompt_tokens: m.prompt_tokens,
                comparison: COMPARISON,
            },
        )]);
        r.with_body(body).with_text(text(m, &verdicts))
    }

    /// Writes `ingraph.<build>.{json,txt}`.
    pub fn write(&self, dir: &Path) -> Result<()> {
        self.report().write(dir, "ingraph")?;
        Ok(())
    }
}

fn text(m: &Measured, rows: &[(&Outcome, Verdict)]) -> String {
    let mut out = format!(
        "in-graph sampling on {}, prompt {:?} ({} tokens): each chain in the graph, on the CPU over the same raw logits, and in the oracle\n",
        m.model, m.prompt, m.prompt_tokens
    );
    let mut table = Table::new()
        .left("  ", 28)
        .left(" ", 14)
        .right(" ", 8)
        .right(" ", 8)
        .right(" ", 8)
        .right(" ", 6)
        .right(" ", 7)
        .right(" ", 7)
        .left(" ", 0);
    table.row([
        "case".to_string(),
        "verdict".to_string(),
        "graph".to_string(),
        "cpu".to_string(),
        "oracle".to_string(),
        "ulps".to_string(),
        "g.chose".to_string(),
        "c.chose".to_string(),
        "stages (cpu: run on the CPU)".to_string(),
    ]);
    for (o, v) in rows
        .iter()
        .copied()
        .chain(m.planted.iter().map(|o| (o, o.verdict())))
    {
        let places: Vec<String> = (o.places.iter())
            .map(|p| {
                if p.in_graph {
                    p.stage.clone()
                } else {
                    format!("{}(cpu)", p.stage)
                }
            })
            .collect();
        table.row([
            o.case.clone(),
            v.as_str().to_string(),
            o.graph.survivors.len().to_string(),
            o.cpu.survivors.len().to_string(),
            o.oracle.survivors.len().to_string(),
            o.max_ulps.to_string(),
            o.graph.selected.map_or("-".to_string(), |t| t.to_string()),
            o.cpu.selected.map_or("-".to_string(), |t| t.to_string()),
            places.join(" "),
        ]);
    }
    out += &table.render();
    out
}
