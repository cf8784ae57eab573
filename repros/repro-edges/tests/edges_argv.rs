//! repro-edges' command line at every door: a closed stdout pipe, check-only mode, its
//! bounds, and 10,000 generated argument vectors through its check in process, the first 200
//! also as processes (`test_support::argv_fuzz`).

use test_support::argv_fuzz::{self, Flag, Fuzz};
use test_support::{assert_check_only_ok, assert_quiet_on_closed_pipe, assert_refused, CHECK_ONLY};

const BIN: &str = env!("CARGO_BIN_EXE_repro-edges");

/// A run takes about 10 s (its planted controls probe in children), so one run stands for
/// both forms of output: they reach the pipe through the same write (`cmdline::write_stdout`).
#[test]
fn a_closed_stdout_pipe_ends_quietly() {
    for args in [
        &["--help"][..],
        &["--sampler", "top_k", "--input", "plain,empty"],
    ] {
        assert_quiet_on_closed_pipe(BIN, args, &[]);
    }
}

#[test]
fn check_only_checks_and_stops() {
    let dir = std::env::temp_dir().join(format!("edges-argv-check-{}", std::process::id()));
    let results = dir.display().to_string();
    for args in [
        &["--audit", "--results", &results][..],
        &["--supervisor-cost", "10000", "--results", &results],
    ] {
        assert_check_only_ok(BIN, args);
    }
    assert!(!dir.exists(), "check-only wrote {}", dir.display());
    for args in [
        &["--supervisor-cost", "0"][..],
        &["--supervisor-cost", "10001"],
        &["--supervisor-cost", "5", "--audit"],
        &["--timeout", "600.5"],
    ] {
        assert_refused(BIN, args, &[CHECK_ONLY]);
    }
}

#[test]
fn argv_fuzz() {
    let tmp = std::env::temp_dir().display().to_string();
    let flags = vec![
        Flag::value(
            "--sampler",
            &[
                "top_k",
                "top_p,typical",
                "greedy,dist,mirostat",
                "adaptive_p",
            ],
        ),
        Flag::value("--input", &["plain", "empty,nan", "repeated-id,zero-prob"]),
        Flag::value("--timeout", &["3", "0.1", "600", "1.5"]),
        Flag::switch("--json"),
        Flag::switch("--audit"),
        Flag::value("--results", &["results", "/no/such/dir"]).with_good([tmp]),
        Flag::value("--supervisor-cost", &["1", "200", "10000"]),
    ];
    let fuzz = Fuzz::new(BIN, flags, 0xed6e);
    let t = argv_fuzz::in_process(&fuzz, repro_edges::cli::check);
    assert!(t.ran > 0 && !t.stopped.is_empty(), "{t:?}");
    let s = argv_fuzz::run(&fuzz);
    assert!(s.exits[0] > 0 && s.exits[2] > 0, "{s:?}");
}
