//! F1 on whichever build this test binary links (b11429 from the root workspace, b10200 from the
//! workspace `buildgen` generates for it under target/builds/0.1.154/).
//! Snapshots are named per build, so a change upstream shows up as a reviewed snapshot diff.

use ledger::SamplerKind;
use oracle::penalty::CountProbe;
use oracle::rng::Rng;
use oracle::window::WindowLen;
use oracle::TokenId;
use report::{Header, Verdict};
use repro_clone::counts::{Counts, Defect, PlantedCounts};
use repro_clone::stateful::{self, Memcheck};
use repro_clone::sweep::SweepBudget;
use repro_clone::{audit, minimal};
use subject::BuildInfo;
use test_support::{assert_refused, json_report, run_bin};

const CP: CountProbe = CountProbe::STANDARD;

#[test]
fn minimal_published_case() {
    let s = minimal::published();
    let o = minimal::run(&s, CP, SamplerKind::Builtin).unwrap();
    assert!(
        o.calibration_ok,
        "the readout must be exact on the subject before it judges"
    );
    assert!(
        o.original_ok(),
        "the original follows the oracle on every build"
    );
    let report = minimal::report(&s, &o, CP, SamplerKind::Builtin, &BuildInfo::current()).unwrap();
    assert!(
        report.controls().iter().all(|c| c.passed),
        "{}",
        report.to_text()
    );
    test_support::assert_build_snapshot!("minimal", report.to_text());
}

/// The minimal detector must flag the planted clone that drops its counts and pass the one
/// that keeps them, on the published case and on every unseen scenario below that can show
/// the defect at all.
#[test]
fn minimal_detector_flags_the_planted_clone_and_passes_the_clean_one() {
    let present =
        |s: &minimal::Scenario, d| minimal::run_planted(s, d).unwrap().clone_defect_present();
    let s = minimal::published();
    assert!(present(&s, Defect::CloneDropsCounts));
    assert!(!present(&s, Defect::None));
    for s in scenarios(200) {
        let clean = minimal::run_planted(&s, Defect::None).unwrap();
        assert!(!clean.clone_defect_present(), "{s:?}");
        // With a window the history reaches, dropping the counts is visible right after the clone.
        let dropping = minimal::run_planted(&s, Defect::CloneDropsCounts).unwrap();
        if clean.clone.iter().any(|&c| c != 0) {
            assert!(dropping.clone_defect_present(), "{s:?}");
        }
    }
}

/// A scenario whose window is 0 cannot show a clone defect, so its positive control cannot
/// fire and the verdict must be inconclusive rather than absent.
#[test]
fn a_scenario_that_cannot_show_the_defect_is_inconclusive() {
    let s = minimal::Scenario {
        last_n: WindowLen(0),
        history: vec![TokenId(1), TokenId(1)],
        then: vec![TokenId(2)],
    };
    let o = minimal::run(&s, CP, SamplerKind::Builtin).unwrap();
    let r = minimal::report(&s, &o, CP, SamplerKind::Builtin, &BuildInfo::current()).unwrap();
    assert_eq!(r.measured(), Verdict::Absent);
    assert_eq!(r.verdict(), Verdict::Inconclusive);
}

/// Seeded scenarios the snapshots do not cover.
fn scenarios(count: usize) -> Vec<minimal::Scenario> {
    let mut rng = Rng::new(0x5eed);
    let mut next = |m: usize| rng.below(m);
    (0..count)
        .map(|_| {
            let last_n = WindowLen(next(9));
            let (alphabet, offset) = (1 + next(6), next(1000) as i32);
            let (history_len, then_len) = (1 + next(12), next(12));
            let mut ids = |n| {
                (0..n)
                    .map(|_| TokenId(offset + next(alphabet) as i32))
                    .collect()
            };
            let history = ids(history_len);
            let then = ids(then_len);
            minimal::Scenario {
                last_n,
                history,
                then,
            }
        })
        .collect()
}

/// The mechanism, checked on many unseen windows and histories: each build's clone behaves
/// exactly like a planted ledger with the corresponding clone (counts dropped on b10200,
/// copied afterwards), while the original always equals the oracle.
#[test]
fn clone_matches_the_mechanism_on_random_scenarios() {
    let build = BuildInfo::current();
    let version: Vec<u32> = build
        .crate_version
        .split('.')
        .map(|p| p.parse().unwrap())
        .collect();
    // FINDINGS.md: releases up to 0.1.154 (b10200) drop the counts on clone; 0.1.155 (b10405)
    // and later copy them.
    let defect = if version <= vec![0, 1, 154] {
        Defect::CloneDropsCounts
    } else {
        Defect::None
    };
    for s in scenarios(300) {
        let o = minimal::run(&s, CP, SamplerKind::Builtin).unwrap();
        assert!(o.original_ok(), "{s:?}");
        let mut planted = PlantedCounts::new(&o.ids, s.last_n, defect);
        for &t in &s.history {
            planted.accept(t).unwrap();
        }
        let mut clone = planted.fork().unwrap();
        let mut got = vec![0; o.ids.len()];
        clone.read(&mut got).unwrap();
        assert_eq!(o.clone, got, "{s:?}");
        for &t in &s.then {
            clone.accept(t).unwrap();
        }
        clone.read(&mut got).unwrap();
        assert_eq!(o.clone_after, got, "{s:?}");
    }
}

#[test]
fn full_audit() {
    let a = audit::run(CP, SamplerKind::Builtin, SweepBudget::AUDIT).unwrap();
    assert!(a.controls_passed(), "{}", a.controls_text());
    assert!(a.sweep.sequences >= 3_010_612);
    let r = a.report();
    assert_ne!(r.verdict(), Verdict::Inconclusive);
    Header::from_json(&r.to_json()).unwrap();
    test_support::assert_build_snapshot!("controls", a.controls_text());
    test_support::assert_build_snapshot!("sweep", a.sweep_text());
}

/// The clone-then-continue detector on the planted samplers, through the same `check` as the
/// built-ins: the clone that forgets must differ (and look like a fresh sampler), the complete
/// one must not. Disabling the comparison fails this test.
#[test]
fn stateful_detector_flags_the_forgetful_planted_clone() {
    let [forgetful, complete] = stateful::planted();
    match stateful::check(&forgetful, stateful::Duplicate::Clone).unwrap() {
        stateful::Equivalence::Differs {
            step, like_fresh, ..
        } => {
            assert_eq!(step, 0);
            assert!(like_fresh);
        }
        other => panic!("the forgetful clone was not flagged: {other:?}"),
    }
    assert_eq!(
        stateful::check(&complete, stateful::Duplicate::Clone).unwrap(),
        stateful::Equivalence::Equivalent
    );
}

/// Every stateful sampler's clone on this build, with the planted controls, as one report.
#[test]
fn stateful_rows_per_build() {
    let a = stateful::run(bin()).unwrap();
    let r = a.report();
    assert!(r.controls().iter().all(|c| c.passed), "{}", r.to_text());
    let present: Vec<&str> = r
        .rows()
        .iter()
        .filter(|row| row.verdict() == Verdict::Present)
        .map(|row| row.name.as_str())
        .collect();
    assert!(
        present.contains(&"clone-incomplete-adaptive_p"),
        "{present:?}"
    );
    let older = BuildInfo::current().name == "b10200";
    for name in ["clone-incomplete-penalties", "clone-incomplete-mirostat"] {
        assert_eq!(present.contains(&name), older, "{name}: {present:?}");
    }
    test_support::assert_build_snapshot!("stateful", r.to_text());
}

/// The memcheck probe flags the planted read past a heap buffer and passes the complete
/// planted clone (both run under valgrind in a child process).
#[test]
fn memcheck_probe_flags_a_planted_read_past_the_end() {
    let bad = stateful::memcheck(bin(), "planted-reads-past-end");
    if let Memcheck::NotRun { why } = &bad {
        panic!("the memcheck probe did not run: {why}");
    }
    assert!(matches!(bad, Memcheck::Error { .. }), "{bad:?}");
    assert_eq!(
        stateful::memcheck(bin(), "planted-tally-complete-clone"),
        Memcheck::Clean
    );
}

#[test]
fn ledger_penalties_pass_the_whole_audit() {
    // The fix in place of the built-in: the same sweep, clone equivalence and controls, with
    // 0 mismatches on every build (b10200's built-in clone fails this).
    let a = audit::run(CP, SamplerKind::LedgerPenalties, SweepBudget::AUDIT).unwrap();
    assert!(a.controls_passed(), "{}", a.controls_text());
    assert!(a.ledger_exact(), "{}", a.sweep_text());
    assert!(!a.clone_defect_present(), "{}", a.sweep_text());
    assert_eq!(a.verdict(), Verdict::Absent);
    test_support::assert_build_snapshot!("ledger_sweep", a.sweep_text());
}

fn bin() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_BIN_EXE_repro-clone"))
}

/// Each refused command line (split at white space) and what its one error line must name.
const REFUSED: [(&str, &str); 12] = [
    ("--last-n -3", "--last-n must be >= 0"),
    ("--history 5,x", "'x' is not a token id"),
    ("--history=", "must name at least one token id"),
    ("--history 5,-1", "token id -1 is negative"),
    ("--then 7,,8", "'' is not a token id"),
    ("--last-n four", "invalid digit"),
    ("--last-n 99999999999", "--last-n must be <= 4096"),
    ("--no-such-flag", "unexpected argument"),
    ("--audit --history 1,2", "run fixed cases"),
    ("--stateful --last-n 3", "run fixed cases"),
    ("--stateful --sampler ledger", "does not take --sampler"),
    (
        "--memcheck-probe adaptive_p",
        "only as a child of the memcheck",
    ),
];

#[test]
fn bad_input_is_one_line_and_exit_2() {
    for (line, names) in REFUSED {
        let args: Vec<&str> = line.split_whitespace().collect();
        let stderr = assert_refused(bin(), &args, &[]);
        assert!(stderr.starts_with("error: "), "{line}: {stderr}");
        assert!(stderr.contains(names), "{line}: {stderr}");
    }
}

#[test]
fn json_output_has_the_required_keys() {
    let args: Vec<&str> = "--last-n 3 --history 9,9,2,9 --then 4 --json"
        .split(' ')
        .collect();
    let (v, h) = json_report(bin(), &args);
    assert_eq!(h.subject.build, BuildInfo::current().tag());
    assert_eq!(h.subject.name, "clone-drops-token-count");
    for key in ["original", "clone", "clone_after", "oracle_clone_after"] {
        let m = v[key].as_object().unwrap();
        let keys: Vec<&str> = m.keys().map(String::as_str).collect();
        assert_eq!(keys, ["2", "4", "9"], "{key}");
    }
    // Window 3 over 9,9,2,9 then 4: the oracle holds 2:1 9:1 4:1.
    assert_eq!(v["oracle_clone_after"]["9"], 1);
    assert_eq!(v["oracle_clone_after"]["2"], 1);
    assert_eq!(v["oracle_clone_after"]["4"], 1);
    assert!(["present", "absent"].contains(&v["verdict"].as_str().unwrap()));
}

#[test]
fn same_command_prints_the_same_bytes() {
    let run = || {
        let args = ["--history", "1,2,1,3", "--then", "2,2", "--last-n", "3"];
        run_bin(bin(), &args)
    };
    assert_eq!(run(), run());
}

/// Pins `clone-incomplete`, live on both builds. Upstream: no upstream report found (searched the ggml-org/llama.cpp issues and pull requests, 2026-11-30).
#[test]
fn stateful_json_lists_one_row_per_sampler_with_controls() {
    let (v, h) = json_report(bin(), &["--stateful", "--json"]);
    assert_eq!(h.subject.name, "clone-incomplete");
    let names: Vec<&str> = h.rows.iter().map(|r| r.0.as_str()).collect();
    for s in stateful::subjects() {
        assert!(
            names.contains(&format!("clone-incomplete-{}", s.name).as_str()),
            "{names:?}"
        );
    }
    for row in v["verdict_rows"].as_array().unwrap() {
        let differs = row["verdict"] == "present";
        assert_eq!(row["first_differing_step"].is_null(), !differs, "{row}");
    }
    assert!(h.controls.iter().all(|c| c.passed));
}
