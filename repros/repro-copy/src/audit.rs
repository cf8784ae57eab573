//! The state-copy rows on the linked build: per stateful sampler `copy-incomplete-<sampler>`
//! and `copy-leaks-<sampler>`, per documented refusal `copy-unrefused-<pair>`, the planted
//! controls through the same comparisons, probe and child, and the report.

use crate::refusal::{self, CopyOutcome, Pair, PLANTED_REFUSED, PLANTED_UNREFUSED};
use anyhow::Result;
use report::{Control, ControlKind, Report, Table, Verdict};
use repro_clone::stateful::{
    check, check_leak, leak_visible, memcheck, memcheck_controls, planted, planted_copy, subjects,
    Duplicate, Equivalence, Memcheck, SamplerRecipe, CONTINUE, HISTORY, OTHER_HISTORY, SEED, VOCAB,
};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use subject::{copy_offered, offered, BuildInfo, NotOffered};

/// A copy onto a fresh sampler that does not behave like its source.
pub const INCOMPLETE: &str = "copy-incomplete";
/// A copy whose result depends on what its destination held before.
pub const LEAKS: &str = "copy-leaks";
/// A copy llama.cpp documents as refused that is not refused.
pub const UNREFUSED: &str = "copy-unrefused";

/// One stateful sampler, measured.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplerRow {
    pub sampler: &'static str,
    /// Each stage, and whether it has its own `copy_state` (without, the copy is a clone).
    pub copy_paths: Vec<(String, bool)>,
    /// The copy onto a fresh sampler against the original.
    pub incomplete: Equivalence,
    /// The copy onto a used sampler against the copy onto a fresh one.
    pub leak: Equivalence,
    /// Whether that comparison could show a leak: the used sampler, before the copy, behaves
    /// differently from the original.
    pub leak_visible: bool,
    /// The copy accepts a token before any apply, under valgrind memcheck.
    pub accept_before_apply: Memcheck,
}

/// One pair of samplers llama.cpp documents as refused, and what the copy did.
#[derive(Debug, Clone, PartialEq)]
pub struct PairRow {
    pub pair: &'static str,
    pub src: &'static str,
    pub dst: &'static str,
    pub outcome: CopyOutcome,
}

/// The planted controls' results, each through the path of the rows it guards.
#[derive(Debug, Clone, PartialEq)]
pub struct Planted {
    /// llama.cpp's own fallback path (no copy_state: clone, free, transplant) on a Rust
    /// sampler whose clone forgets its counts (must differ).
    pub fallback_forgetful: Equivalence,
    /// The same path on one whose clone copies them (must be equivalent).
    pub fallback_complete: Equivalence,
    /// A copy_state that copies nothing, onto a fresh tally (must differ).
    pub forgetful: Equivalence,
    /// A complete copy_state, onto a fresh tally (must be equivalent).
    pub complete: Equivalence,
    /// A copy_state that adds to what the destination held, onto a used tally against onto a
    /// fresh one (must differ).
    pub leaky: Equivalence,
    /// The complete copy_state in the same leak comparison (must be equivalent).
    pub complete_leak: Equivalence,
    /// The memcheck probe on a planted accept that reads past a heap buffer, copied (must be
    /// reported), and on the complete copy (must be clean); `None` without valgrind.
    pub memcheck: Option<(Memcheck, Memcheck)>,
    /// A copy between two Rust types that goes through (must read as unrefused).
    pub unrefused: CopyOutcome,
    /// A copy the planted copy_state refuses by aborting (must read as refused).
    pub refused: CopyOutcome,
}

/// Everything measured on a build that has `llama_sampler_copy`.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    pub rows: Vec<Result<SamplerRow, (&'static str, NotOffered)>>,
    pub pairs: Vec<PairRow>,
    /// Same type, other configuration: a note, not a verdict (the API leaves it to the caller).
    pub configuration: PairRow,
    pub planted: Planted,
}

/// The state-copy finding on the linked build.
pub struct Audit {
    pub build: BuildInfo,
    pub measured: Result<Measured, NotOffered>,
}

/// Runs every row and control; `exe` is the `repro-copy` binary the memcheck probe starts.
pub fn run(exe: &Path) -> Result<Audit> {
    let build = BuildInfo::current();
    if let Err(why) = copy_offered() {
        return Ok(Audit {
            build,
            measured: Err(why),
        });
    }
    let have_valgrind = Command::new("valgrind").arg("--version").output().is_ok();
    let probe = |name: &str| {
        if have_valgrind {
            memcheck(exe, name)
        } else {
            Memcheck::no_valgrind()
        }
    };
    let [forgetful, complete, leaky] = planted_copy();
    let [forgetful_clone, complete_clone] = planted();
    let planted = Planted {
        fallback_forgetful: check(&forgetful_clone, Duplicate::CopyOntoFresh)?,
        fallback_complete: check(&complete_clone, Duplicate::CopyOntoFresh)?,
        forgetful: check(&forgetful, Duplicate::CopyOntoFresh)?,
        complete: check(&complete, Duplicate::CopyOntoFresh)?,
        leaky: check_leak(&leaky)?,
        complete_leak: check_leak(&complete)?,
        memcheck: have_valgrind.then(|| (probe("planted-reads-past-end"), probe(complete.name))),
        unrefused: refusal::run(PLANTED_UNREFUSED)?,
        refused: refusal::run(PLANTED_REFUSED)?,
    };
    let rows = subjects()
        .iter()
        .map(|s| Ok(offered(measure(s, &probe))?.map_err(|why| (s.name, why))))
        .collect::<Result<Vec<_>>>()?;
    let pair_row = |p: Pair| -> Result<PairRow> {
        Ok(PairRow {
            pair: p.name,
            src: p.src.name,
            dst: p.dst.name,
            outcome: refusal::run(p.name)?,
        })
    };
    let pairs = (refusal::refused_pairs().into_iter())
        .map(pair_row)
        .collect::<Result<Vec<_>>>()?;
    let configuration = pair_row(refusal::configuration_pair())?;
    Ok(Audit {
        build,
        measured: Ok(Measured {
            rows,
            pairs,
            configuration,
            planted,
        }),
    })
}

/// One subject's copy paths, both comparisons and the memcheck probe.
fn measure(s: &SamplerRecipe, probe: &dyn Fn(&str) -> Memcheck) -> Result<SamplerRow> {
    Ok(SamplerRow {
        sampler: s.name,
        copy_paths: s.build()?.copy_paths(),
        incomplete: check(s, Duplicate::CopyOntoFresh)?,
        leak: check_leak(s)?,
        leak_visible: leak_visible(s)?,
        accept_before_apply: probe(s.name),
    })
}

const FALLBACK_FORGETFUL: &str =
    "planted sampler without copy_state whose clone forgets its counts, copied by llama.cpp's fallback";
const FALLBACK_COMPLETE: &str =
    "planted sampler without copy_state whose clone copies its counts, copied by llama.cpp's fallback";
const FORGETFUL: &str = "planted copy_state that copies nothing";
const COMPLETE: &str = "planted copy_state that copies the counts";
const LEAKY: &str = "planted copy_state that adds the counts to the destination's";
const COMPLETE_LEAK: &str = "planted complete copy_state, onto a used tally";
const PAST_END: &str = "memcheck probe on a planted accept that reads past a heap buffer, copied";
const CLEAN: &str = "memcheck probe on the planted complete copy";
const GOES_THROUGH: &str = "planted copy between two Rust types that goes through";
const ABORTS: &str = "planted copy refused by an abort";

impl SamplerRow {
    fn stages_cloned(&self) -> Vec<&str> {
        (self.copy_paths.iter())
            .filter(|(_, own)| !own)
            .map(|(name, _)| name.as_str())
            .collect()
    }

    fn incomplete_evidence(&self) -> String {
        let mut e = format!(
            "{}; accept on the copy before any apply: {}",
            self.incomplete.describe("copy", "the original"),
            self.accept_before_apply.summary()
        );
        let cloned = self.stages_cloned();
        if !cloned.is_empty() {
            e += &format!(
                " [without a copy_state of their own, copied as clones: {}]",
                cloned.join(", ")
            );
        }
        e
    }

    fn leak_evidence(&self) -> String {
        let e = self
            .leak
            .describe("copy onto a used sampler", "the copy onto a fresh one");
        if self.leak_visible {
            e
        } else {
            format!("{e}; but the used sampler already behaved like the original before the copy, so this comparison cannot show a leak")
        }
    }

    fn leak_verdict(&self) -> Verdict {
        if self.leak_visible {
            Verdict::found(self.leak.differs())
        } else {
            Verdict::Inconclusive
        }
    }
}

/// A row's JSON after its verdict keys.
#[derive(Serialize)]
struct RowData<'a> {
    sampler: &'static str,
    first_differing_step: Option<usize>,
    #[serde(flatten)]
    equivalence: &'a Equivalence,
    #[serde(skip_serializing_if = "Option::is_none")]
    accept_before_apply: Option<&'a Memcheck>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    copied_as_clones: Vec<&'a str>,
}

#[derive(Serialize)]
struct PairData<'a> {
    src: &'static str,
    dst: &'static str,
    #[serde(flatten)]
    outcome: &'a CopyOutcome,
}

/// How the rows were run.
#[derive(Serialize)]
struct Protocol {
    vocabulary: i32,
    history_steps: usize,
    other_history_steps: usize,
    continuation_steps: usize,
    seed: u32,
}

impl Audit {
    pub fn controls(&self) -> Vec<Control> {
        use ControlKind::{Negative, Positive};
        let m = match &self.measured {
            Ok(m) => &m.planted,
            Err(why) => {
                let names = [
                    (Positive, FALLBACK_FORGETFUL),
                    (Negative, FALLBACK_COMPLETE),
                    (Positive, FORGETFUL),
                    (Negative, COMPLETE),
                    (Positive, LEAKY),
                    (Negative, COMPLETE_LEAK),
                    (Positive, GOES_THROUGH),
                    (Negative, ABORTS),
                ];
                return names
                    .into_iter()
                    .map(|(k, n)| Control::not_run(k, n, why))
                    .collect();
            }
        };
        let leak =
            |e: &Equivalence| e.describe("copy onto a used tally", "the copy onto a fresh one");
        let same = |e: &Equivalence| e.describe("copy", "the original");
        let mut c = vec![
            Control::positive(
                FALLBACK_FORGETFUL,
                m.fallback_forgetful.differs(),
                same(&m.fallback_forgetful),
            ),
            Control::negative(
                FALLBACK_COMPLETE,
                !m.fallback_complete.differs(),
                same(&m.fallback_complete),
            ),
            Control::positive(
                FORGETFUL,
                m.forgetful.differs(),
                m.forgetful.describe("copy", "the original"),
            ),
            Control::negative(
                COMPLETE,
                !m.complete.differs(),
                m.complete.describe("copy", "the original"),
            ),
            Control::positive(LEAKY, m.leaky.differs(), leak(&m.leaky)),
            Control::negative(
                COMPLETE_LEAK,
                !m.complete_leak.differs(),
                leak(&m.complete_leak),
            ),
        ];
        if let Some((past_end, clean)) = &m.memcheck {
            c.extend(memcheck_controls(PAST_END, past_end, CLEAN, clean));
        }
        c.push(Control::positive(
            GOES_THROUGH,
            matches!(m.unrefused, CopyOutcome::Copied(_)),
            m.unrefused.summary(),
        ));
        c.push(Control::negative(
            ABORTS,
            !m.refused.unrefused(),
            m.refused.summary(),
        ));
        c
    }

    pub fn report(&self) -> Report {
        let subject = self.build.report_subject(&crate::FINDING, "copy");
        let m = match &self.measured {
            Ok(m) => m,
            Err(why) => return self.not_offered_report(subject, why),
        };
        let measured: Vec<&SamplerRow> = m.rows.iter().filter_map(|r| r.as_ref().ok()).collect();
        let not_offered: Vec<&str> = (m.rows.iter())
            .filter_map(|r| r.as_ref().err().map(|(name, _)| *name))
            .collect();
        let names = |pick: &dyn Fn(&SamplerRow) -> bool| -> Vec<&str> {
            measured
                .iter()
                .filter(|r| pick(r))
                .map(|r| r.sampler)
                .collect()
        };
        let list = |v: &[&str]| {
            if v.is_empty() {
                "none".to_string()
            } else {
                v.join(", ")
            }
        };
        let incomplete = names(&|r| r.incomplete.differs());
        let leaks = names(&|r| r.leak.differs());
        let unrefused: Vec<&str> = (m.pairs.iter())
            .filter(|p| p.outcome.verdict() == Verdict::Present)
            .map(|p| p.pair)
            .collect();
        let mut evidence = format!(
            "{n} stateful samplers copied after {HISTORY} steps onto a fresh sampler and continued {CONTINUE}: {} differ from the original ({}); copied onto a used sampler: {} differ from the copy onto a fresh one ({}); {} of {} copies llama.cpp documents as refused are not refused ({})",
            incomplete.len(),
            list(&incomplete),
            leaks.len(),
            list(&leaks),
            unrefused.len(),
            m.pairs.len(),
            list(&unrefused),
            n = measured.len(),
        );
        if !not_offered.is_empty() {
            evidence += &format!(
                "; {} not offered by this build ({})",
                not_offered.len(),
                not_offered.join(", ")
            );
        }
        let any = !incomplete.is_empty() || !leaks.is_empty() || !unrefused.is_empty();
        let mut r = Report::new(subject, Verdict::found(any), evidence, self.controls());
        for row in &m.rows {
            let row = match row {
                Ok(row) => row,
                Err((name, why)) => {
                    for family in [INCOMPLETE, LEAKS] {
                        r.add_row(
                            format!("{family}-{name}"),
                            Verdict::NotOffered,
                            why.to_string(),
                            BTreeMap::from([("not_offered", why.to_string())]),
                        );
                    }
                    continue;
                }
            };
            let data = |e, memcheck, cloned| RowData {
                sampler: row.sampler,
                first_differing_step: Equivalence::first_step(e),
                equivalence: e,
                accept_before_apply: memcheck,
                copied_as_clones: cloned,
            };
            r.add_row(
                format!("{INCOMPLETE}-{}", row.sampler),
                Verdict::found(row.incomplete.differs()),
                row.incomplete_evidence(),
                data(
                    &row.incomplete,
                    Some(&row.accept_before_apply),
                    row.stages_cloned(),
                ),
            );
            // Without a copy_state of its own anywhere in it, a sampler is copied by llama.cpp's
            // fallback, which frees the destination's state and moves a fresh clone of the
            // source in: no planted control can make that path keep what the destination
            // held, so an agreement there is a note; a difference would still be a row.
            if row.stages_cloned().len() == row.copy_paths.len() && !row.leak.differs() {
                r.add_note(
                    format!("{LEAKS}-{}", row.sampler),
                    format!(
                        "{} (copied by llama.cpp's fallback, which replaces the destination's state with a clone of the source's: a leak cannot be planted on that path, so this is a note, not a verdict)",
                        row.leak_evidence()
                    ),
                    data(&row.leak, None, Vec::new()),
                );
            } else {
                r.add_row(
                    format!("{LEAKS}-{}", row.sampler),
                    row.leak_verdict(),
                    row.leak_evidence(),
                    data(&row.leak, None, Vec::new()),
                );
            }
        }
        for p in &m.pairs {
            r.add_row(
                format!("{UNREFUSED}-{}", p.pair),
                p.outcome.verdict(),
                format!("copy {} onto {}: {}", p.src, p.dst, p.outcome.summary()),
                PairData {
                    src: p.src,
                    dst: p.dst,
                    outcome: &p.outcome,
                },
            );
        }
        let c = &m.configuration;
        let note = format!(
            "copy {} onto {} (same type, other configuration, which the header leaves to the caller): {}",
            c.src,
            c.dst,
            c.outcome.summary()
        );
        let body = BTreeMap::from([
            (
                "protocol",
                serde_json::to_value(protocol()).expect("plain data serializes"),
            ),
            (
                "note_across_configurations",
                serde_json::Value::String(note.clone()),
            ),
        ]);
        r.with_body(body).with_text(text(m, &note))
    }

    fn not_offered_report(&self, subject: report::ReportId, why: &NotOffered) -> Report {
        let mut r = Report::new(
            subject,
            Verdict::NotOffered,
            why.to_string(),
            self.controls(),
        );
        let pairs = refusal::refused_pairs();
        let rows = (subjects().into_iter())
            .flat_map(|s| {
                [
                    format!("{INCOMPLETE}-{}", s.name),
                    format!("{LEAKS}-{}", s.name),
                ]
            })
            .chain(pairs.iter().map(|p| format!("{UNREFUSED}-{}", p.name)));
        for name in rows {
            r.add_row(
                name,
                Verdict::NotOffered,
                why.to_string(),
                BTreeMap::from([("not_offered", why.to_string())]),
            );
        }
        r.with_body(BTreeMap::from([("protocol", protocol())]))
    }

    /// Writes `copy.<build>.{json,txt}`.
    pub fn write(&self, dir: &Path) -> Result<()> {
        self.report().write(dir, "copy")?;
        Ok(())
    }
}

fn protocol() -> Protocol {
    Protocol {
        vocabulary: VOCAB,
        history_steps: HISTORY,
        other_history_steps: OTHER_HISTORY,
        continuation_steps: CONTINUE,
        seed: SEED,
    }
}

fn text(m: &Measured, note: &str) -> String {
    let mut out = format!(
        "copy-then-continue: {HISTORY} steps of history on pseudo-random logits over {VOCAB} ids, llama_sampler_copy onto a fresh sampler of the same recipe (and onto one that ran {OTHER_HISTORY} steps of its own), then {CONTINUE} steps of identical input\n"
    );
    let mut table = Table::new()
        .left("  ", 38)
        .left(" ", 22)
        .left(" ", 22)
        .left(" ", 0);
    table.row([
        "sampler".to_string(),
        "onto fresh".to_string(),
        "onto used vs fresh".to_string(),
        "copied as clones".to_string(),
    ]);
    let outcome = |e: &Equivalence| {
        e.first_step()
            .map_or("equivalent".to_string(), |s| format!("differs at step {s}"))
    };
    for row in &m.rows {
        match row {
            Ok(r) => table.row([
                r.sampler.to_string(),
                outcome(&r.incomplete),
                if r.leak_visible {
                    outcome(&r.leak)
                } else {
                    "cannot show a leak".to_string()
                },
                match r.stages_cloned() {
                    v if v.is_empty() => "-".to_string(),
                    v => v.join(", "),
                },
            ]),
            Err((name, why)) => table.row([
                name.to_string(),
                format!("not offered ({why})"),
                String::new(),
                String::new(),
            ]),
        }
    }
    out += &table.render();
    out += "documented refusals, each in a contained child:\n";
    let mut pairs = Table::new().left("  ", 22).left(" ", 0);
    for p in &m.pairs {
        pairs.row([
            p.pair.to_string(),
            format!("{} onto {}: {}", p.src, p.dst, p.outcome.summary()),
        ]);
    }
    out += &pairs.render();
    out += &format!("note: {note}\n");
    out
}
