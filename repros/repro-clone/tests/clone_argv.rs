//! repro-clone's command line at every door: a closed stdout pipe, check-only mode, the upper
//! bounds of its flags, and 10,000 generated argument vectors through its check in process,
//! the first 200 also as processes (`test_support::argv_fuzz`). Nothing here decodes a model.

use test_support::argv_fuzz::{self, Flag, Fuzz};
use test_support::{
    assert_check_only_ok, assert_quiet_on_closed_pipe, assert_refused, run_bin_with_env, CHECK_ONLY,
};

const BIN: &str = env!("CARGO_BIN_EXE_repro-clone");

fn ids(n: usize, id: usize) -> String {
    vec![id.to_string(); n].join(",")
}

#[test]
fn a_closed_stdout_pipe_ends_quietly() {
    for args in [&[][..], &["--json"], &["--help"], &["--sampler", "ledger"]] {
        assert_quiet_on_closed_pipe(BIN, args, &[]);
    }
}

/// Under check-only mode a valid command line exits 0 without doing anything (the audit would
/// take minutes and write reports), and a refused one is still refused.
#[test]
fn check_only_checks_and_stops() {
    let dir = std::env::temp_dir().join(format!("clone-argv-check-{}", std::process::id()));
    let results = dir.join("results").display().to_string();
    for args in [
        &["--audit", "--results", &results][..],
        &["--stateful", "--json"],
        &["--last-n", "4096", "--history", "262143", "--then", "0"],
    ] {
        assert_check_only_ok(BIN, args);
    }
    assert!(!dir.exists(), "check-only wrote {}", dir.display());
    assert_refused(BIN, &["--last-n", "-1"], &[CHECK_ONLY]);
    assert_refused(BIN, &["--audit", "--history", "1"], &[CHECK_ONLY]);
}

#[test]
fn upper_bounds_are_stated_and_refused_past_them() {
    let (_, help, _) = test_support::run_bin(BIN, &["--help"]);
    for bound in ["0 to 4096", "1 to 4096 ids", "0 to 262143"] {
        assert!(
            help.contains(bound),
            "--help does not state '{bound}':\n{help}"
        );
    }
    let many = ids(4097, 1);
    let most = ids(4096, 1);
    for args in [
        &["--last-n", "4097"][..],
        &["--history", &many],
        &["--then", &many],
        &["--history", "262144"],
        &["--history", "1", "--then", "2147483647"],
    ] {
        assert_refused(BIN, args, &[]);
    }
    let (code, _, stderr) = run_bin_with_env(
        BIN,
        &["--last-n", "4096", "--history", &most, "--then", &most],
        &[CHECK_ONLY],
    );
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn argv_fuzz() {
    let tmp = std::env::temp_dir().display().to_string();
    let flags = vec![
        Flag::value("--last-n", &["4", "0", "3", "4096"]),
        Flag::value("--history", &["5,5,6", "1,2,1,3", "9,9,2,9", "0", "262143"]),
        Flag::value("--then", &["7,8", "2,2", "4"]),
        Flag::switch("--json"),
        Flag::value("--results", &["results", "/no/such/dir"]).with_good([tmp]),
        Flag::switch("--stateful"),
        Flag::switch("--audit"),
        Flag::value(
            "--memcheck-probe",
            &["adaptive_p", "penalties", "planted-reads-past-end"],
        ),
        Flag::value("--sampler", &["builtin", "ledger"]),
    ];
    let fuzz = Fuzz::new(BIN, flags, 0xc10e);
    let t = argv_fuzz::in_process(&fuzz, repro_clone::cli::check);
    assert!(t.ran > 0 && !t.stopped.is_empty(), "{t:?}");
    let s = argv_fuzz::run(&fuzz);
    assert!(s.exits[0] > 0 && s.exits[2] > 0, "{s:?}");
}
