//! F9 on whichever build this test binary links (b11429 from the root workspace, b10200 from the
//! workspace `buildgen` generates for it under target/builds/0.1.154/, where the copy is not
//! offered). The report is pinned per build, so a copy fixed upstream (or broken) shows up as
//! a reviewed snapshot change.

use report::Verdict;
use repro_clone::stateful::{self, check, check_leak, planted_copy, Duplicate, Equivalence};
use repro_copy::audit::{INCOMPLETE, LEAKS, UNREFUSED};
use repro_copy::refusal;
use subject::copy_offered;
use test_support::{assert_same_bytes_twice, run_bin};

const BIN: &str = env!("CARGO_BIN_EXE_repro-copy");

/// The comparisons on the planted copies, in process through the same `check` and
/// `check_leak` the rows use: the copy_state that copies nothing must differ from the
/// original and look like a fresh sampler, the complete one must not; the additive one is
/// complete onto a fresh tally and leaks onto a used one, so the leak comparison sees what
/// the completeness comparison cannot.
#[test]
fn planted_copies_through_both_comparisons() {
    let [forgetful, complete, leaky] = planted_copy();
    if copy_offered().is_err() {
        let e = check(&complete, Duplicate::CopyOntoFresh).unwrap_err();
        assert!(subject::offered::<()>(Err(e)).unwrap().is_err());
        return;
    }
    match check(&forgetful, Duplicate::CopyOntoFresh).unwrap() {
        Equivalence::Differs {
            step, like_fresh, ..
        } => {
            assert_eq!(step, 0);
            assert!(like_fresh);
        }
        other => panic!("the forgetful copy was not flagged: {other:?}"),
    }
    let equivalent = |e: Equivalence| assert_eq!(e, Equivalence::Equivalent);
    equivalent(check(&complete, Duplicate::CopyOntoFresh).unwrap());
    equivalent(check(&leaky, Duplicate::CopyOntoFresh).unwrap());
    equivalent(check_leak(&complete).unwrap());
    assert!(check_leak(&leaky).unwrap().differs());
    // The same planted samplers cloned: the copy path is what differs, not the sampler.
    equivalent(check(&forgetful, Duplicate::Clone).unwrap());
}

/// The refusal probe runs in a child of the repro binary (a test binary serves no task), so
/// its controls are read from the binary's report: a planted copy that goes through must be
/// flagged and one refused by an abort must pass. Then every row and control is pinned.
#[test]
fn the_report_keeps_the_contract_and_is_pinned() {
    let dir = std::env::temp_dir().join(format!("copy-test-{}", std::process::id()));
    let (code, stdout, err) = run_bin(BIN, &["--audit", "--results", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let build = subject::BuildInfo::current().tag().to_string();
    let text = std::fs::read_to_string(dir.join(format!("copy.{build}.txt"))).unwrap();
    let json = std::fs::read_to_string(dir.join(format!("copy.{build}.json"))).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(stdout, text, "stdout repeats the written report");
    let header = report::Header::from_json(&serde_json::from_str(&json).unwrap()).unwrap();
    let n = stateful::subjects().len();
    let pairs = refusal::refused_pairs().len();
    // A leak comparison through llama.cpp's clone fallback is a note, not a row (unless it
    // differs): every sampler still has its two comparisons, as a row or a note.
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let leak_notes = (v["notes"].as_array().into_iter().flatten())
        .filter(|n| n["name"].as_str().is_some_and(|s| s.starts_with(LEAKS)))
        .count();
    assert_eq!(header.rows.len() + leak_notes, 2 * n + pairs);
    for family in [INCOMPLETE, LEAKS, UNREFUSED] {
        assert!(header
            .rows
            .iter()
            .any(|(name, ..)| name.starts_with(family)));
    }
    if copy_offered().is_err() {
        assert!(header
            .rows
            .iter()
            .all(|(_, v, _)| *v == Verdict::NotOffered));
    } else {
        assert!(header.controls.iter().all(|c| c.passed), "{text}");
        assert!(header
            .rows
            .iter()
            .all(|(_, v, _)| *v != Verdict::Inconclusive));
    }
    test_support::assert_build_snapshot!("report", text);
}

#[test]
fn json_is_the_report_and_runs_print_the_same_bytes() {
    let json = assert_same_bytes_twice(BIN, &["--json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let header = report::Header::from_json(&v).unwrap();
    assert_eq!(header.subject.finding, "F9");
    assert!(v["protocol"]["history_steps"].as_u64().is_some());
}

/// What llama.cpp would abort on is refused before it reaches C, in process: a copy between
/// types, between chains of different lengths and between chains whose members differ.
#[test]
fn copy_from_refuses_what_llama_cpp_asserts_on() {
    if copy_offered().is_err() {
        return;
    }
    for p in refusal::refused_pairs() {
        let src = p.src.build().unwrap();
        let mut dst = p.dst.build().unwrap();
        let e = dst.copy_from(&src).unwrap_err().to_string();
        assert!(e.contains("llama.cpp would abort"), "{}: {e}", p.name);
    }
    let same = refusal::configuration_pair();
    let mut dst = same.dst.build().unwrap();
    dst.copy_from(&same.src.build().unwrap()).unwrap();
}
