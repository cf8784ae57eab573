//! F6 on whichever build this test binary links (b11429 from the root workspace, b10200 from the
//! workspace `buildgen` generates for it under target/builds/0.1.154/). The outcome table is
//! pinned per build, so a sampler that stops aborting (or starts) upstream shows up as a
//! reviewed snapshot change.

use report::Verdict;
use repro_edges::{inputs, samplers};
use test_support::{assert_refused, run_bin, run_bin_with_env};

const BIN: &str = env!("CARGO_BIN_EXE_repro-edges");

/// One full audit into a temporary results folder: the JSON and the text, written from one
/// report value.
fn audit() -> (serde_json::Value, String) {
    let dir = std::env::temp_dir().join(format!("edges-test-{}", std::process::id()));
    let (code, _, err) = run_bin(BIN, &["--audit", "--results", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let build = subject::BuildInfo::current().tag().to_string();
    let json = std::fs::read_to_string(dir.join(format!("edges.{build}.json"))).unwrap();
    let text = std::fs::read_to_string(dir.join(format!("edges.{build}.txt"))).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    (serde_json::from_str(&json).unwrap(), text)
}

#[test]
fn the_audit_keeps_the_contract_and_its_table_is_pinned() {
    let (json, text) = audit();
    let header = report::Header::from_json(&json).unwrap();
    assert!(
        header.controls.iter().all(|c| c.passed),
        "every control must pass:\n{text}"
    );
    // A set row and a robustness row per sampler, and dist's fallback.
    assert_eq!(header.rows.len(), 2 * samplers::subjects().len() + 1);
    let cells = json["cells"].as_array().unwrap();
    assert_eq!(
        cells.len(),
        samplers::subjects().len() * inputs::all().len(),
        "every sampler meets every input"
    );
    // Each row is present exactly when one of its cells answers its question so, and an abort
    // on an input without NaN or +inf breaks the robustness rule.
    for (name, verdict, evidence) in &header.rows {
        let (sampler, key) = match name.as_str() {
            "edge-dist-fallback" => ("dist", "dist_fallback"),
            n if n.starts_with("edge-set-") => (&n["edge-set-".len()..], "disagrees"),
            n => (n.trim_start_matches("edge-robustness-"), "unrobust"),
        };
        let row: Vec<&serde_json::Value> =
            cells.iter().filter(|c| c["sampler"] == sampler).collect();
        assert!(!row.is_empty(), "{name}");
        let hit = row.iter().any(|c| c[key] == true);
        assert_eq!(*verdict == Verdict::Present, hit, "{name}: {evidence}");
        for c in &row {
            let aborts = c["outcome"].as_str().unwrap().starts_with("aborts");
            if aborts && c["judged"] != "not judged" {
                assert_eq!(c["unrobust"], true, "{c}");
            }
        }
    }
    test_support::assert_build_snapshot!("audit", text);
}

#[test]
fn a_selection_probes_only_what_it_names_but_every_control() {
    let line = "--sampler top_k,greedy --input empty,one --json";
    let (code, out, err) = run_bin(BIN, &line.split(' ').collect::<Vec<_>>());
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["cells"].as_array().unwrap().len(), 4);
    assert_eq!(
        v["control_cells"].as_array().unwrap().len(),
        repro_edges::planted::Planted::ALL.len() * inputs::all().len()
    );
    let h = report::Header::from_json(&v).unwrap();
    assert!(h.controls.iter().all(|c| c.passed));
}

#[test]
fn the_same_command_prints_the_same_bytes() {
    let line = "--sampler top_p,dist,typical --input empty,nan,equal,zero-prob";
    test_support::assert_same_bytes_twice(BIN, &line.split(' ').collect::<Vec<_>>());
}

#[test]
fn bad_flags_are_refused_in_one_line() {
    // Each line split at its spaces (`--sampler ` ends in an empty argument).
    for line in [
        "--sampler top_q",
        "--sampler top_k,top_k",
        "--sampler ",
        "--input empty,,one",
        "--timeout 0",
        "--timeout -1",
        "--timeout nan",
        "--timeout 1e9",
        "--audit --sampler top_k",
        "--audit --input empty",
        "--bogus",
    ] {
        assert_refused(BIN, &line.split(' ').collect::<Vec<_>>(), &[]);
    }
}

#[test]
fn a_task_this_binary_does_not_serve_is_refused_in_one_line() {
    let (code, out, err) = run_bin_with_env(BIN, &[], &[(contain::TASK_ENV, "no-such-task")]);
    assert_eq!(code, 2, "{err}");
    assert!(out.is_empty());
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// Every llama.cpp sampler of the stage table, and every one the oracle does not compose, is
/// probed on the edge inputs under its own name, but for those named here with the reason.
#[test]
fn every_stage_of_the_table_is_probed() {
    const NOT_PROBED: [(&str, &str); 3] = [
        ("dry", "its penalty needs a model's vocabulary to build"),
        ("grammar", "it needs a model's vocabulary"),
        ("infill", "it needs a model's vocabulary"),
    ];
    let probed: Vec<&str> = samplers::subjects().iter().map(|c| c.name).collect();
    let table = (oracle::stage::STAGES.iter())
        .filter(|r| matches!(r.parser, oracle::stage::table::Parser::Llama(_)))
        .map(|r| r.name);
    let drawing = (oracle::stage::NOT_COMPOSED.iter())
        .map(|(n, _)| *n)
        .filter(|n| !NOT_PROBED.iter().any(|(m, _)| m == n));
    let missing: Vec<&str> = table
        .chain(drawing)
        .filter(|n| !probed.contains(n))
        .collect();
    assert!(missing.is_empty(), "add to samplers::subjects: {missing:?}");
}
