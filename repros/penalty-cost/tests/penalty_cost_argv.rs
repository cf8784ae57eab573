//! penalty-cost's command line at every door: a closed stdout pipe, check-only mode, the upper
//! bounds of its flags, 10,000 generated argument vectors through its check in process (the
//! first 200 also as processes, `test_support::argv_fuzz`), and the same bytes twice. Nothing
//! here times or decodes: the fuzz runs against an empty model cache, and the one test that
//! reads the real cache only checks Gemma3's sha256.

use test_support::argv_fuzz::{self, Flag, Fuzz};
use test_support::{
    assert_quiet_on_closed_pipe, assert_refused, run_bin, run_bin_with_env, CHECK_ONLY,
};

const BIN: &str = env!("CARGO_BIN_EXE_penalty-cost");

#[test]
fn a_closed_stdout_pipe_ends_quietly() {
    assert_quiet_on_closed_pipe(BIN, &["--help"], &[]);
}

/// Under check-only mode the bench's command line (`make bench`) passes its checks, Gemma3's
/// sha256 included, and exits 0 without timing anything; a refused one is still refused.
#[test]
fn check_only_checks_and_stops() {
    let dir = std::env::temp_dir().join(format!("penalty-cost-argv-{}", std::process::id()));
    let results = dir.join("results").display().to_string();
    let (code, stdout, stderr) = run_bin_with_env(BIN, &["--results", &results], &[CHECK_ONLY]);
    assert_eq!((code, stdout.as_str(), stderr.as_str()), (0, "", ""));
    assert!(!dir.exists(), "check-only wrote {}", dir.display());
    assert_refused(BIN, &["--e2e-rounds", "19"], &[CHECK_ONLY]);
}

#[test]
fn upper_bounds_are_stated_and_refused_past_them() {
    let (_, help, _) = run_bin(BIN, &["--help"]);
    for bound in ["1 to 10000", "20 to 1000", "2 to 2048", "1 to 64"] {
        assert!(
            help.contains(bound),
            "--help does not state '{bound}':\n{help}"
        );
    }
    for args in [
        &["--rounds", "10001"][..],
        &["--e2e-rounds", "1001"],
        &["--tokens", "2049"],
        &["--threads", "65"],
        &["--rounds", "18446744073709551616"],
    ] {
        assert_refused(BIN, args, &[]);
    }
}

/// The bench's stdout is its timings (ARCHITECTURE.md's stated exception), so the
/// deterministic output this can compare without timing is the help text.
#[test]
fn same_command_prints_the_same_bytes() {
    test_support::assert_same_bytes_twice(BIN, &["--help"]);
}

#[test]
fn argv_fuzz() {
    let dir = std::env::temp_dir().join(format!("penalty-cost-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let flags = vec![
        Flag::value("--rounds", &["300", "1", "10000"]),
        Flag::value("--e2e-rounds", &["30", "20", "1000"]),
        Flag::value("--tokens", &["48", "2", "2048"]),
        Flag::value("--threads", &["1", "64"]),
        Flag::value("--results", &["results", "/no/such/dir"]),
    ];
    // An empty model cache: every run that passes the flag checks is refused at Gemma3's
    // lookup at once, instead of hashing 253 MB.
    let fuzz = Fuzz::new(BIN, flags, 0xf5f5).env("MODELS_CACHE", &dir);
    argv_fuzz::in_process(&fuzz, penalty_cost::cli::check).assert_reached(&["is not cached"]);
    let s = argv_fuzz::run(&fuzz);
    std::fs::remove_dir_all(&dir).unwrap();
    // The empty cache refuses every command line that passes the flag checks, so the exits 0
    // here are help texts; `check_only_checks_and_stops` runs an accepted one (Gemma3's
    // sha256 checked in the real cache).
    assert!(s.exits[0] > 0 && s.exits[2] > 0, "{s:?}");
}
