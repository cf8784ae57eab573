//! repro-engines' command line at every door: a closed stdout pipe, check-only mode, its
//! bounds, the same bytes twice, and 10,000 generated argument vectors through its check in
//! process (`test_support::argv_fuzz`).

use test_support::argv_fuzz::{self, Flag, Fuzz};
use test_support::Doors;

const BIN: &str = env!("CARGO_BIN_EXE_repro-engines");

#[test]
fn doors_hold() {
    Doors {
        quiet: &["--help", "--draws 100", "--draws 100 --json"],
        not_utf8: &[b"--sampling top_k=\xff", b"--logits 4,\xfe,5"],
        check_only_ok: &[
            "--audit --results $RESULTS",
            "--draws 1000000 --seed 4294967295",
        ],
        check_only_refused: &[
            "--draws 1000001",
            "--seed -1",
            "--audit --draws 10",
            "--vector ties --logits 1,2",
            "--sampling top_k=1048577",
            "--sampling all,temp=65",
        ],
        ..Doors::of(BIN)
    }
    .check();
}

#[test]
fn the_same_input_prints_the_same_bytes() {
    test_support::assert_same_bytes_twice(BIN, &["--sampling", "top_k=2", "--draws", "3000"]);
}

#[test]
fn argv_fuzz() {
    let samplings = [
        "all",
        "top_k=3",
        "top_p=0.9",
        "top_k=3,top_p=0.9",
        "min_p=0.1,temp=0.5",
    ];
    let flags = vec![
        Flag::value("--engine", &["llama", "candle"]),
        Flag::value("--logits", &["3,2,1,0", "1,1,1", "2,-inf,1", "0"]),
        Flag::value("--vector", &["published", "ties", "vocab262k"]),
        Flag::value("--sampling", &samplings),
        Flag::value("--draws", &["1", "20000", "1000000"]),
        Flag::value("--seed", &["0", "1", "4294967295"]),
        Flag::switch("--json"),
        Flag::switch("--audit"),
        Flag::results(),
    ];
    let fuzz = Fuzz::new(BIN, flags, 0xe7e7);
    argv_fuzz::assert_in_process(&fuzz, repro_engines::cli::check, &[], true);
}
