//! `changes.txt`: every place a verdict row changes state between two revisions, with the
//! lines of the sampler source that changed between them in the code of the samplers the row
//! names ([`crate::hunks`]).
//!
//! The two revisions are consecutive among those with data for the row, as in the ranges: a
//! revision not built, not run or missing in between is skipped and named, so the change lies
//! somewhere in the span. The sources are the vendored trees of the releases in cargo's
//! registry; a release not unpacked there is said to be unavailable rather than failing the
//! run, since a matrix folder can be read on a machine that built none of it.

use crate::hunks::{
    changed_definitions, changed_lines, quote, quote_all, samplers_in_row, ChangedLine,
};
use crate::read::{Column, Matrix, RowKey};
use std::collections::BTreeMap;

/// At most this many changed lines are quoted per change, so that a sampler added or rewritten
/// between two revisions does not bury the rest; the remainder is counted.
pub const QUOTE_LIMIT: usize = 200;

/// At most this many changed definitions are listed where none is the row's samplers'.
pub const LIST_LIMIT: usize = 40;

/// A row that names no sampler (a finding's headline row) gets every changed line quoted when
/// the change is at most this long, so a small fix is seen whole; a longer one is listed by
/// definition.
pub const QUOTE_UNNAMED_LIMIT: usize = 60;

/// The text of a revision's sampler source, or `None` when it is not at hand.
pub type Sources<'a> = &'a dyn Fn(&Column) -> Option<String>;

/// The sampler source of a revision from cargo's registry: the vendored tree of any release
/// that vendors it (`<crate>/llama.cpp/<sampler file>`), newest first.
pub fn registry_source(c: &Column) -> Option<String> {
    let home = builds::cargo_home()?;
    c.crates.iter().rev().find_map(|version| {
        let root = builds::registry_source(&home, "llama-cpp-sys-2", version)?;
        std::fs::read_to_string(root.join("llama.cpp").join(&c.sampler_file)).ok()
    })
}

/// A row's state change: the row and the two column indices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    pub row: RowKey,
    pub from: usize,
    pub to: usize,
}

/// Every state change of every row, by row, then oldest first.
pub fn transitions(m: &Matrix) -> Vec<Transition> {
    let mut out = Vec::new();
    for (key, states) in &m.rows {
        let with_data: Vec<usize> = (0..states.len())
            .filter(|&i| states[i].has_data())
            .collect();
        for w in with_data.windows(2) {
            if states[w[0]] != states[w[1]] {
                out.push(Transition {
                    row: key.clone(),
                    from: w[0],
                    to: w[1],
                });
            }
        }
    }
    out
}

/// The header; `{unnamed}` stands for [`QUOTE_UNNAMED_LIMIT`].
const HEADER: &str = "\
State changes of each verdict row between consecutive revisions with data for it (a revision
not built, not run or missing in between is skipped and named), with the lines of the sampler
source that changed between the two revisions inside the code of the samplers the row names.
A line is in the code of the function or struct that opens at column 0 above it; that code is
a sampler's when its name holds the sampler's name (llama_sampler_penalties_clone is
penalties', llama_sampler_init_top_p is top_p's, and the longer name wins:
llama_sampler_temp_ext_apply is temp_ext's, not temp's). Removed lines (-) are numbered in the
older file, added lines (+) in the newer. When no line of the row's samplers changed, the
change comes from elsewhere (a shared helper, another file, the build), and the definitions
that did change are listed. A row that names no sampler gets every changed line when at most
{unnamed} changed, else the list of changed definitions.
";

/// Caches the sources and their diffs across the rows that change between the same revisions.
struct Diffs<'a> {
    sources: Sources<'a>,
    texts: BTreeMap<usize, Option<String>>,
    diffs: BTreeMap<(usize, usize), Vec<ChangedLine>>,
}

impl Diffs<'_> {
    /// The changed lines between two columns, or the columns whose sources are not at hand.
    fn between(
        &mut self,
        m: &Matrix,
        from: usize,
        to: usize,
    ) -> Result<&[ChangedLine], Vec<usize>> {
        for i in [from, to] {
            if !self.texts.contains_key(&i) {
                let text = (self.sources)(&m.columns[i]);
                self.texts.insert(i, text);
            }
        }
        let (Some(old), Some(new)) = (self.texts[&from].as_deref(), self.texts[&to].as_deref())
        else {
            let missing = [from, to].into_iter().filter(|i| self.texts[i].is_none());
            return Err(missing.collect());
        };
        Ok(self
            .diffs
            .entry((from, to))
            .or_insert_with(|| changed_lines(old, new)))
    }
}

fn plural(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// The listed definitions, one per line under `indent`.
fn definitions(changes: &[ChangedLine], indent: &str) -> String {
    let defs = changed_definitions(changes);
    let mut out = String::new();
    for (name, n) in defs.iter().take(LIST_LIMIT) {
        out.push_str(&format!("{indent}{name} ({})\n", plural(*n, "line")));
    }
    if defs.len() > LIST_LIMIT {
        out.push_str(&format!(
            "{indent}... and {} more\n",
            defs.len() - LIST_LIMIT
        ));
    }
    out
}

/// One change of one row.
fn describe(m: &Matrix, t: &Transition, diffs: &mut Diffs) -> String {
    let states = &m.rows[&t.row];
    let (a, b) = (&m.columns[t.from], &m.columns[t.to]);
    let mut out = format!(
        "{} {}: {} at {} -> {} at {}\n",
        t.row.finding,
        t.row.name,
        states[t.from].as_str(),
        a.name,
        states[t.to].as_str(),
        b.name
    );
    let between: Vec<String> = (t.from + 1..t.to)
        .map(|i| format!("{} ({})", m.columns[i].name, states[i].as_str()))
        .collect();
    if !between.is_empty() {
        out.push_str(&format!("  no data between them: {}\n", between.join(", ")));
    }
    let file = if a.sampler_file == b.sampler_file {
        a.sampler_file.clone()
    } else {
        format!("{} -> {}", a.sampler_file, b.sampler_file)
    };
    out.push_str(&format!(
        "  {file}, {} (llama-cpp-sys-2 {}) -> {} ({})\n",
        a.name,
        a.crate_version(),
        b.name,
        b.crate_version()
    ));
    let samplers = samplers_in_row(&t.row.name);
    let changes = match diffs.between(m, t.from, t.to) {
        Ok(c) => c,
        Err(missing) => {
            let which: Vec<String> = missing
                .iter()
                .map(|&i| {
                    let c = &m.columns[i];
                    format!("{} (llama-cpp-sys-2 {})", c.name, c.crate_version())
                })
                .collect();
            out.push_str(&format!(
                "  sources not available here: {} not in cargo's registry\n",
                which.join(" and ")
            ));
            return out;
        }
    };
    if changes.is_empty() {
        out.push_str(
            "  the sampler source is the same at both: the change comes from another file or the build\n",
        );
        return out;
    }
    if samplers.is_empty() {
        match quote_all(changes, QUOTE_UNNAMED_LIMIT) {
            Some(quoted) => {
                out.push_str(&format!(
                    "  the row names no sampler; every changed line ({}):\n",
                    plural(changes.len(), "line")
                ));
                for line in quoted.lines() {
                    out.push_str(&format!("    {line}\n"));
                }
            }
            None => {
                out.push_str(&format!(
                    "  the row names no sampler; {} changed, in:\n",
                    plural(changes.len(), "line")
                ));
                out.push_str(&definitions(changes, "    "));
            }
        }
        return out;
    }
    out.push_str(&format!("  samplers: {}\n", samplers.join(", ")));
    let quoted = quote(changes, &samplers, QUOTE_LIMIT);
    if quoted.is_empty() {
        out.push_str(&format!(
            "  no line of these samplers' code changed: the change comes from elsewhere; {} changed, in:\n",
            plural(changes.len(), "line")
        ));
        out.push_str(&definitions(changes, "    "));
    } else {
        for line in quoted.lines() {
            out.push_str(&format!("    {line}\n"));
        }
    }
    out
}

/// `changes.txt` for `m`, reading sources through `sources`.
pub fn changes_text(m: &Matrix, sources: Sources) -> String {
    let mut out = HEADER.replace("{unnamed}", &QUOTE_UNNAMED_LIMIT.to_string());
    let all = transitions(m);
    if all.is_empty() {
        out.push_str("\nNo verdict row changes state between revisions with data.\n");
        return out;
    }
    let mut diffs = Diffs {
        sources,
        texts: BTreeMap::new(),
        diffs: BTreeMap::new(),
    };
    for t in &all {
        out.push('\n');
        out.push_str(&describe(m, t, &mut diffs));
    }
    out
}
