//! F8 on whichever build this test binary links (b11429 from the root workspace, b10200 from
//! the workspace `buildgen` generates for it). The report is pinned per build, so an upstream
//! change to an in-graph stage shows up as a reviewed snapshot change.

use report::Verdict;
use repro_ingraph::case;
use test_support::{assert_same_bytes_twice, run_bin};

const BIN: &str = env!("CARGO_BIN_EXE_repro-ingraph");

/// Draws per draw row here: fewer than the audit's, with the planted skew's power still 1.000
/// at this count (printed in the report).
const TEST_DRAWS: &str = "300";

/// The planted controls' verdicts are read from the same report as the rows: every wrong
/// planted stage must be flagged, every exact one must pass, and every registered case, the
/// draw row and the stepped row must be there.
#[test]
fn the_report_keeps_the_contract_and_is_pinned() {
    let dir = std::env::temp_dir().join(format!("ingraph-test-{}", std::process::id()));
    let (code, stdout, err) = run_bin(
        BIN,
        &[
            "--audit",
            "--draws",
            TEST_DRAWS,
            "--results",
            dir.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    let build = subject::BuildInfo::current().tag().to_string();
    let text = std::fs::read_to_string(dir.join(format!("ingraph.{build}.txt"))).unwrap();
    let json = std::fs::read_to_string(dir.join(format!("ingraph.{build}.json"))).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(stdout, text, "stdout repeats the written report");
    let header = report::Header::from_json(&serde_json::from_str(&json).unwrap()).unwrap();
    if subject::graph_offered().is_err() {
        assert_eq!(header.rows.len(), case::registered().len());
        assert!(header
            .rows
            .iter()
            .all(|(_, v, _)| *v == Verdict::NotOffered));
    } else {
        // The registered cases, the draw row and the stepped row. The stepped row runs where
        // the linked penalties sampler has an in-graph implementation, and its three controls
        // with it (they fail, and so this test, where the build cannot fill their inputs).
        assert_eq!(header.rows.len(), case::registered().len() + 2);
        let penalties_in_graph = case::stepped()
            .build(49_152)
            .unwrap()
            .has_graph_implementation();
        let stepped = header
            .rows
            .iter()
            .find(|(name, _, _)| name == "ingraph-penalties-steps")
            .unwrap();
        assert_eq!(stepped.1 != Verdict::NotOffered, penalties_in_graph);
        let stepped_controls = if penalties_in_graph {
            case::stepped_planted().len()
        } else {
            0
        };
        // The planted pairs, the draw detector's two, the stepped row's and temp_ext's oracle
        // check.
        assert_eq!(
            header.controls.len(),
            2 * case::planted().len() + 2 + stepped_controls + 1
        );
        assert!(header.controls.iter().all(|c| c.passed), "{text}");
        assert!(header
            .rows
            .iter()
            .all(|(_, v, _)| *v != Verdict::Inconclusive));
    }
    test_support::assert_build_snapshot!("report", text);
}

/// One chain of the user's own: both paths and the verdict, in JSON, the same bytes twice.
#[test]
fn one_chain_from_the_command_line() {
    let json = assert_same_bytes_twice(
        BIN,
        &["--stage", "top_p=0.9:8", "--model", "smollm2", "--json"],
    );
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let header = report::Header::from_json(&v).unwrap();
    assert_eq!(header.subject.finding, "F8");
    assert_eq!(header.rows.len(), 1);
    assert_eq!(header.rows[0].0, "ingraph-top_p=0.9:8");
    if subject::graph_offered().is_ok() {
        let row = &v["verdict_rows"][0];
        for side in ["graph", "cpu", "oracle"] {
            assert!(row[side]["survivors"]["count"].is_u64(), "{row}");
        }
    }
}

#[test]
fn bad_stages_are_refused_in_one_line() {
    for args in [
        &["--stage", "nope=1"][..],
        &["--stage", "top_p=2"],
        &["--audit", "--stage", "top_k=4"],
        &["--draws", "299"],
    ] {
        let (code, out, err) = run_bin(BIN, args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(out.is_empty());
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}
