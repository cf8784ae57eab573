//! repro-copy's command line at every door: a closed stdout pipe, check-only mode, and
//! generated argument vectors through its check in process (`test_support::argv_fuzz`).

use test_support::argv_fuzz::{self, Flag, Fuzz};
use test_support::Doors;

const BIN: &str = env!("CARGO_BIN_EXE_repro-copy");

#[test]
fn doors_hold() {
    Doors {
        quiet: &["--help", "--json"],
        check_only_ok: &["", "--json", "--audit --results $RESULTS"],
        check_only_refused: &["--memcheck-probe adaptive_p", "--stateful", "--audit 1"],
        not_utf8: &[b"--\xff", b"--memcheck-probe \xff"],
        help_states: &["results/copy"],
        refused: &["--memcheck-probe no-such-sampler", "--json --json"],
        ..Doors::of(BIN)
    }
    .check();
}

#[test]
fn argv_fuzz() {
    let flags = vec![
        Flag::switch("--json"),
        Flag::results(),
        Flag::switch("--audit"),
        Flag::value(
            "--memcheck-probe",
            &["adaptive_p", "penalties", "planted-reads-past-end"],
        ),
    ];
    let fuzz = Fuzz::new(BIN, flags, 0xc0b7);
    argv_fuzz::assert_in_process(&fuzz, repro_copy::cli::check, &[], true);
}
