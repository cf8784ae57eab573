//! The committed release matrix against the committed full audit: on the builds `make audit`
//! runs (every report of `results/` whose build is also a matrix column), every verdict row
//! of every matrix report has the state the audit's report of the same finding gives it.
//! The matrix runs some findings with smaller budgets (PREREG, the release-matrix addenda), so
//! the evidence differs; the verdicts may not. The rows registered after the matrix's last run
//! (listed below) are counted, not compared, until the matrix runs again; any other row in
//! one and not the other fails.

use matrix::read::{read_report, RowKey, State};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn results() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../results")
}

/// `<stem>.<build>.json` reports of `dir`, by (stem, build).
fn reports(dir: &Path) -> BTreeMap<(String, String), PathBuf> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let Some(base) = name.strip_suffix(".json") else {
            continue;
        };
        // Build names hold no dot except a crate version's (candle-0.11.1), so the stem ends
        // at the first dot.
        if let Some((stem, build)) = base.split_once('.') {
            out.insert((stem.to_string(), build.to_string()), path);
        }
    }
    out
}

fn rows(path: &Path) -> BTreeMap<RowKey, State> {
    let text = std::fs::read_to_string(path).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    let (_, rows) = read_report(&v).unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
    rows.into_iter().collect()
}

/// The verdict rows registered after the release matrix last ran: the audit has them, the
/// matrix not until it runs again. Empty while the matrix is as new as the audits.
const NEWER_THAN_THE_MATRIX: [&str; 0] = [];

#[test]
fn every_matrix_verdict_on_an_audited_build_is_the_audits() {
    let audit = reports(&results());
    let matrix = reports(&results().join("matrix"));
    let audited: Vec<&String> = {
        let mut b: Vec<&String> = audit.keys().map(|k| &k.1).collect();
        b.sort();
        b.dedup();
        b
    };
    let mut compared = 0usize;
    let mut newer = 0usize;
    let mut pairs = Vec::new();
    let mut disagreements = Vec::new();
    for ((stem, build), path) in &matrix {
        if !audited.contains(&build) {
            continue;
        }
        let theirs = audit
            .get(&(stem.clone(), build.clone()))
            .unwrap_or_else(|| panic!("the matrix has {stem} on {build}; the audit does not"));
        let (m, a) = (rows(path), rows(theirs));
        // Rows registered after the matrix last ran (PREREG's dated addenda) are in the audit
        // only; a matrix row the audit lacks is a renamed or dropped row, which must not be.
        let missing: Vec<String> = (m.keys())
            .filter(|k| !a.contains_key(*k))
            .map(|k| format!("{} {}", k.finding, k.name))
            .collect();
        assert!(
            missing.is_empty(),
            "{stem} on {build}: matrix rows the audit does not report: {missing:?}"
        );
        for k in a.keys().filter(|k| !m.contains_key(*k)) {
            assert!(
                NEWER_THAN_THE_MATRIX.contains(&k.name.as_str()),
                "{stem} on {build}: {} {} is in the audit only, and not a row registered after the matrix ran",
                k.finding,
                k.name
            );
            newer += 1;
        }
        for (key, state) in &m {
            compared += 1;
            if a[key] != *state {
                disagreements.push(format!(
                    "{stem} on {build}: {} {} is {} in the matrix, {} in the audit",
                    key.finding,
                    key.name,
                    state.as_str(),
                    a[key].as_str()
                ));
            }
        }
        pairs.push(format!("{stem}.{build}"));
    }
    // The two builds the audit runs are matrix columns, each with its four findings' reports
    // (F1's two, F2's two, F6's and F7's).
    for build in ["b10200", "b11429"] {
        let n = pairs
            .iter()
            .filter(|p| p.ends_with(&format!(".{build}")))
            .count();
        assert!(
            n >= 6,
            "{build}: only {n} matrix reports to compare: {pairs:?}"
        );
    }
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
    eprintln!(
        "{compared} verdict rows agree over {}; {newer} audit rows are newer than the matrix",
        pairs.join(", ")
    );
}
