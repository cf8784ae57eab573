//! penalty-cost's command line at every door: a closed stdout pipe, check-only mode, the upper
//! bounds of its flags, 10,000 generated argument vectors through its check in process
//! (`test_support::argv_fuzz`), and the same bytes twice. Nothing here times or decodes: the fuzz runs against an empty model cache, and the one test that
//! reads the real cache only checks Gemma3's sha256.

use test_support::argv_fuzz::{self, Flag, Fuzz};
use test_support::{Doors, Scratch};

const BIN: &str = env!("CARGO_BIN_EXE_penalty-cost");

/// Under check-only mode the bench's command line (`make bench`) passes its checks, Gemma3's
/// sha256 included, and exits 0 without timing anything; a refused one is still refused.
#[test]
fn doors_hold() {
    Doors {
        quiet: &["--help"],
        check_only_ok: &["--results $RESULTS"],
        check_only_refused: &["--e2e-rounds 19"],
        not_utf8: &[b"--rounds 1\xff", b"--results r --tokens \xff"],
        help_states: &["1 to 10000", "20 to 1000", "2 to 2048", "1 to 64"],
        refused: &[
            "--rounds 10001",
            "--e2e-rounds 1001",
            "--tokens 2049",
            "--threads 65",
            "--rounds 18446744073709551616",
        ],
        ..Doors::of(BIN)
    }
    .check();
}

/// The bench's stdout is its timings (ARCHITECTURE.md's stated exception), so the
/// deterministic output this can compare without timing is the help text.
#[test]
fn same_command_prints_the_same_bytes() {
    test_support::assert_same_bytes_twice(BIN, &["--help"]);
}

#[test]
fn argv_fuzz() {
    let cache = Scratch::new("penalty-cost-fuzz");
    let flags = vec![
        Flag::value("--rounds", &["300", "1", "10000"]),
        Flag::value("--e2e-rounds", &["30", "20", "1000"]),
        Flag::value("--tokens", &["48", "2", "2048"]),
        Flag::value("--threads", &["1", "64"]),
        Flag::value("--results", &["results", "/no/such/dir"]),
    ];
    // An empty model cache: every vector that passes the flag checks is refused at Gemma3's
    // lookup at once, instead of hashing 253 MB, so none is accepted; `doors_hold` runs an
    // accepted command line (Gemma3's sha256 checked in the real cache).
    let fuzz = Fuzz::new(BIN, flags, 0xf5f5).env("MODELS_CACHE", &cache.0);
    argv_fuzz::assert_in_process(&fuzz, penalty_cost::cli::check, &["is not cached"], false);
}
