//! repro-engines' command line at every door: a closed stdout pipe, check-only mode, its
//! bounds, the same bytes twice, and 10,000 generated argument vectors through its check in
//! process, the first 200 also as processes (`test_support::argv_fuzz`).

use test_support::argv_fuzz::{self, Flag, Fuzz};
use test_support::{assert_check_only_ok, assert_quiet_on_closed_pipe, assert_refused, CHECK_ONLY};

const BIN: &str = env!("CARGO_BIN_EXE_repro-engines");

#[test]
fn a_closed_stdout_pipe_ends_quietly() {
    for args in [
        &["--help"][..],
        &["--draws", "100"],
        &["--draws", "100", "--json"],
    ] {
        assert_quiet_on_closed_pipe(BIN, args, &[]);
    }
}

#[test]
fn check_only_checks_and_stops_and_bounds_hold() {
    let dir = std::env::temp_dir().join(format!("engines-argv-check-{}", std::process::id()));
    let results = dir.display().to_string();
    assert_check_only_ok(BIN, &["--audit", "--results", &results]);
    assert_check_only_ok(BIN, &["--draws", "1000000", "--seed", "4294967295"]);
    assert!(!dir.exists(), "check-only wrote {}", dir.display());
    for args in [
        &["--draws", "1000001"][..],
        &["--seed", "-1"],
        &["--audit", "--draws", "10"],
        &["--vector", "ties", "--logits", "1,2"],
        &["--sampling", "top_k=1048577"],
        &["--sampling", "all,temp=65"],
    ] {
        assert_refused(BIN, args, &[CHECK_ONLY]);
    }
}

#[test]
fn the_same_input_prints_the_same_bytes() {
    test_support::assert_same_bytes_twice(BIN, &["--sampling", "top_k=2", "--draws", "3000"]);
}

#[test]
fn argv_fuzz() {
    let tmp = std::env::temp_dir().display().to_string();
    let flags = vec![
        Flag::value("--engine", &["llama", "candle"]),
        Flag::value("--logits", &["3,2,1,0", "1,1,1", "2,-inf,1", "0"]),
        Flag::value("--vector", &["published", "ties", "vocab262k"]),
        Flag::value(
            "--sampling",
            &[
                "all",
                "top_k=3",
                "top_p=0.9",
                "top_k=3,top_p=0.9",
                "min_p=0.1,temp=0.5",
            ],
        ),
        Flag::value("--draws", &["1", "20000", "1000000"]),
        Flag::value("--seed", &["0", "1", "4294967295"]),
        Flag::switch("--json"),
        Flag::switch("--audit"),
        Flag::value("--results", &["results", "/no/such/dir"]).with_good([tmp]),
    ];
    let fuzz = Fuzz::new(BIN, flags, 0xe7e7);
    let t = argv_fuzz::in_process(&fuzz, repro_engines::cli::check);
    assert!(t.ran > 0 && !t.stopped.is_empty(), "{t:?}");
    let s = argv_fuzz::run(&fuzz);
    assert!(s.exits[0] > 0 && s.exits[2] > 0, "{s:?}");
}
