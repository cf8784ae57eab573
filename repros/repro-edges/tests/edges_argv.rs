//! repro-edges' command line at every door: a closed stdout pipe, check-only mode, its
//! bounds, and 10,000 generated argument vectors through its check in process
//! (`test_support::argv_fuzz`).

use test_support::argv_fuzz::{self, Flag, Fuzz};
use test_support::Doors;

const BIN: &str = env!("CARGO_BIN_EXE_repro-edges");

#[test]
fn argv_fuzz() {
    let samplers = [
        "top_k",
        "top_p,typical",
        "greedy,dist,mirostat",
        "adaptive_p",
    ];
    let flags = vec![
        Flag::value("--sampler", &samplers),
        Flag::value("--input", &["plain", "empty,nan", "repeated-id,zero-prob"]),
        Flag::value("--timeout", &["3", "0.1", "600", "1.5"]),
        Flag::switch("--json"),
        Flag::switch("--audit"),
        Flag::results(),
        Flag::value("--supervisor-cost", &["1", "200", "10000"]),
    ];
    let fuzz = Fuzz::new(BIN, flags, 0xed6e);
    argv_fuzz::assert_in_process(&fuzz, repro_edges::cli::check, &[], true);
}

/// A run takes about 10 s (its planted controls probe in children), so one run into a closed
/// pipe stands for both forms of output: they reach the pipe through the same write
/// (`cmdline::write_stdout`).
#[test]
fn doors_hold() {
    Doors {
        quiet: &["--help", "--sampler top_k --input plain,empty"],
        not_utf8: &[b"--sampler top_k,\xff", b"--input \xc3"],
        check_only_ok: &[
            "--audit --results $RESULTS",
            "--supervisor-cost 10000 --results $RESULTS",
        ],
        check_only_refused: &[
            "--supervisor-cost 0",
            "--supervisor-cost 10001",
            "--supervisor-cost 5 --audit",
            "--timeout 600.5",
        ],
        ..Doors::of(BIN)
    }
    .check();
}
