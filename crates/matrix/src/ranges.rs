//! Affected ranges: for each verdict row, the runs of revisions where it is present, each
//! with the revision that ends it, as text (`ranges.txt`) and as JSON (`ranges.json`).
//!
//! A run is consecutive revisions that all read present: a revision not built, not run or
//! missing from the reports ends it (it is never inside a range, never read as a fix) and is
//! named. Where the suite's own controls could not run (`inconclusive`), a standalone C
//! reproducer of `upstream/llama.cpp/` that ran on the revision decides the cell, and the range
//! says so.

use crate::read::{Column, Matrix, State};
use report::Table;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The rule, in the words both files state it.
pub const RULE: &str = "\
A range is a run of consecutive revisions, in llama.cpp order, where the row's verdict is
present. A revision that was not built, not run, or is missing from the reports has no data
and ends a range: no range contains a revision that was not run. Such revisions are named:
under `Not built` and `Not run` when no row has data there, and after `missing at` when one
row lacks it. Where the suite's verdict is inconclusive (its controls could not run there) and
the defect's standalone C reproducer (upstream/llama.cpp/<defect>/repro.c) ran on the
revision, the reproducer's exit status decides (1 present, 0 absent), and the range names the
revisions it decided; every other revision is decided by the suite.
`A..B (first fixed: C)`: present from A through B, absent at C, the next revision.
`A.. (still present at Z)`: present from A through Z, the newest revision.
`A..B (no data at C)`: the next revision, C, has no data: the range may go on past B.
`A..B (V at C)`: the next revision, C, has verdict V (not offered, inconclusive, undecided),
which is not a fix.
`not offered: A..B`: the release's C API lacks the sampler, or its sources do not state the
contract the row tests, from A through B, by the same rule.
A closed run of one revision is written `A` alone.";

/// A run of revisions in one state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Span {
    pub first: String,
    pub last: String,
    /// The revision after `last`, if any.
    pub next: Option<String>,
    /// Its state.
    pub next_state: Option<String>,
    /// The revisions of the run that a C reproducer decided, with the reproducer.
    pub by_repro: Vec<(String, String)>,
}

/// One verdict row's ranges.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RowRanges {
    pub finding: String,
    pub row: String,
    /// The state on each revision, oldest first.
    pub states: Map<String, Value>,
    pub present: Vec<Span>,
    pub not_offered: Vec<Span>,
    /// Revisions that were built and reported, but without this row.
    pub missing: Vec<String>,
    /// The line of `ranges.txt` after the finding and row.
    pub summary: String,
}

/// One revision as the ranges were computed on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RevisionStatus {
    pub name: String,
    pub crate_version: String,
    pub commit: String,
    pub status: String,
    pub detail: String,
}

/// What `ranges.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ranges {
    pub rule: String,
    /// Whether the folder had the runner's `builds.tsv` (without it, a revision with reports
    /// counts as built and one without as not run).
    pub builds_tsv: bool,
    pub revisions: Vec<RevisionStatus>,
    /// Files read but not used, and why.
    pub notes: Vec<String>,
    pub rows: Vec<RowRanges>,
}

/// The maximal runs of consecutive revisions in state `wanted` (see the module documentation);
/// `by_repro` names, by column, the reproducer that decided a cell.
pub fn spans(
    states: &[State],
    wanted: State,
    columns: &[Column],
    by_repro: &BTreeMap<usize, String>,
) -> Vec<Span> {
    let name = |i: usize| columns[i].name.clone();
    let mut out = Vec::new();
    let mut i = 0;
    while i < states.len() {
        if states[i] != wanted {
            i += 1;
            continue;
        }
        let start = i;
        while i + 1 < states.len() && states[i + 1] == wanted {
            i += 1;
        }
        let next = (i + 1 < states.len()).then_some(i + 1);
        out.push(Span {
            first: name(start),
            last: name(i),
            next: next.map(name),
            next_state: next.map(|n| states[n].as_str().to_string()),
            by_repro: (start..=i)
                .filter_map(|c| by_repro.get(&c).map(|r| (name(c), r.clone())))
                .collect(),
        });
        i += 1;
    }
    out
}

/// `A..B`, or `A` alone for a run of one revision.
fn run_text(s: &Span) -> String {
    if s.first == s.last {
        s.first.clone()
    } else {
        format!("{}..{}", s.first, s.last)
    }
}

/// Which revisions of a run a C reproducer decided: `; b4240, b4524 by logit-bias-stale-sorted/repro.c`.
fn repro_text(s: &Span) -> String {
    let mut by: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (rev, repro) in &s.by_repro {
        by.entry(repro.as_str()).or_default().push(rev.as_str());
    }
    (by.iter())
        .map(|(repro, revs)| format!("; {} by {repro}/repro.c", revs.join(", ")))
        .collect()
}

/// The states that say nothing ran there.
const NO_DATA: [&str; 3] = ["not built", "not run", "missing"];

fn present_text(s: &Span) -> String {
    let by = repro_text(s);
    match (&s.next, s.next_state.as_deref()) {
        (Some(c), Some("absent")) => format!("{} (first fixed: {c}{by})", run_text(s)),
        (Some(c), Some(v)) if NO_DATA.contains(&v) => {
            format!("{} (no data at {c}{by})", run_text(s))
        }
        (Some(c), Some(v)) => format!("{} ({v} at {c}{by})", run_text(s)),
        _ => format!("{}.. (still present at {}{by})", s.first, s.last),
    }
}

fn summary(
    states: &[State],
    columns: &[Column],
    present: &[Span],
    not_offered: &[Span],
    missing: &[String],
) -> String {
    let decided = |s: &State| matches!(s, State::Present | State::Absent);
    let mut out = if !present.is_empty() {
        present
            .iter()
            .map(present_text)
            .collect::<Vec<_>>()
            .join(", ")
    } else if states.iter().any(decided) {
        "never present where decided".to_string()
    } else if states.iter().any(|s| s.has_data()) {
        "never decided".to_string()
    } else {
        "no data".to_string()
    };
    // Revisions where a report answered neither way are named, so no reader takes the first
    // present revision for the first affected one when earlier ones could not be judged.
    for kind in [State::Inconclusive, State::Undecided] {
        let at: Vec<&str> = (states.iter().zip(columns))
            .filter(|(s, _)| **s == kind)
            .map(|(_, c)| c.name.as_str())
            .collect();
        if !at.is_empty() {
            out.push_str(&format!("; {} at {}", kind.as_str(), at.join(", ")));
        }
    }
    if !not_offered.is_empty() {
        let runs: Vec<String> = not_offered.iter().map(run_text).collect();
        out.push_str(&format!("; not offered: {}", runs.join(", ")));
    }
    if !missing.is_empty() {
        out.push_str(&format!("; missing at {}", missing.join(", ")));
    }
    out
}

/// The ranges of every row of `m`.
pub fn ranges(m: &Matrix) -> Ranges {
    let rows = m
        .rows
        .iter()
        .map(|(key, states)| {
            let by_repro = m.by_repro.get(key).cloned().unwrap_or_default();
            let present = spans(states, State::Present, &m.columns, &by_repro);
            let not_offered = spans(states, State::NotOffered, &m.columns, &BTreeMap::new());
            let missing: Vec<String> = (states.iter().zip(&m.columns))
                .filter(|(s, _)| **s == State::Missing)
                .map(|(_, c)| c.name.clone())
                .collect();
            RowRanges {
                finding: key.finding.clone(),
                row: key.name.clone(),
                states: (states.iter().zip(&m.columns))
                    .map(|(s, c)| (c.name.clone(), Value::from(s.as_str())))
                    .collect(),
                summary: summary(states, &m.columns, &present, &not_offered, &missing),
                present,
                not_offered,
                missing,
            }
        })
        .collect();
    Ranges {
        rule: RULE.replace('\n', " "),
        builds_tsv: m.builds_tsv,
        revisions: m
            .columns
            .iter()
            .map(|c| RevisionStatus {
                name: c.name.clone(),
                crate_version: c.crate_version().to_string(),
                commit: c.commit.clone(),
                status: c.status.as_str().to_string(),
                detail: c.detail.clone(),
            })
            .collect(),
        notes: m.notes.clone(),
        rows,
    }
}

/// `ranges.txt`: the rule, the revisions without data for any row, the notes, then one line
/// per row.
pub fn ranges_text(r: &Ranges) -> String {
    let names: Vec<&str> = r.revisions.iter().map(|c| c.name.as_str()).collect();
    let mut out = format!(
        "Affected ranges of each verdict row across the {} llama.cpp revisions of the release\ntable, oldest first:\n",
        names.len()
    );
    for line in names.chunks(12) {
        out.push_str(&format!("  {}\n", line.join(" ")));
    }
    out.push_str(&format!("\n{RULE}\n\n"));
    let ok = r.revisions.iter().filter(|c| c.status == "ok").count();
    out.push_str(&format!("Built and reported: {ok} of {}.\n", names.len()));
    if !r.builds_tsv {
        out.push_str(
            "No builds.tsv: a revision with reports counts as built, any other as not run.\n",
        );
    }
    let failed: Vec<&RevisionStatus> = (r.revisions.iter())
        .filter(|c| c.status == "build-failed" || c.status == "refused")
        .collect();
    if !failed.is_empty() {
        out.push_str("Not built (no data for any row):\n");
        for c in failed {
            let detail = if c.detail.is_empty() {
                String::new()
            } else {
                format!(": {}", c.detail)
            };
            out.push_str(&format!(
                "  {} (llama-cpp-sys-2 {}) {}{detail}\n",
                c.name, c.crate_version, c.status
            ));
        }
    }
    let not_run: Vec<&str> = (r.revisions.iter())
        .filter(|c| c.status == "not run")
        .map(|c| c.name.as_str())
        .collect();
    if !not_run.is_empty() {
        out.push_str(&format!(
            "Not run (no data for any row): {}\n",
            not_run.join(" ")
        ));
    }
    if !r.notes.is_empty() {
        out.push_str("Left out (files not read, findings that failed to run):\n");
        for n in &r.notes {
            out.push_str(&format!("  {n}\n"));
        }
    }
    out.push('\n');
    if r.rows.is_empty() {
        out.push_str("No verdict rows.\n");
        return out;
    }
    let mut t = Table::new().left("", 0).left("  ", 0).left("  ", 0);
    t.row(["", "row", "ranges"]);
    for row in &r.rows {
        t.row([&row.finding, &row.row, &row.summary]);
    }
    out.push_str(&t.render());
    out
}

/// `ranges.json`.
pub fn ranges_json(r: &Ranges) -> String {
    serde_json::to_string_pretty(r).expect("the ranges serialize") + "\n"
}
