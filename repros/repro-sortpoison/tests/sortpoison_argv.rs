//! repro-sortpoison's command line at every door: a closed stdout pipe, check-only mode, the
//! upper bounds of its flags, and 10,000 generated argument vectors through its check in
//! process (`test_support::argv_fuzz`).

use test_support::argv_fuzz::{self, Flag, Fuzz};
use test_support::Doors;

const BIN: &str = env!("CARGO_BIN_EXE_repro-sortpoison");

/// Under check-only mode a valid command line exits 0 without doing anything (the audit takes
/// minutes and writes reports), and a refused one is still refused. At the bounds (4096
/// logits, 31 top_k stages and a penalties stage with the largest window and 4096 ids of
/// history) the command line passes its checks.
#[test]
fn doors_hold() {
    let list = |n: usize, item: &str| vec![item; n].join(",");
    let stages = |n: usize| -> String { (1..=n).map(|k| format!(" --stage top_k={k}")).collect() };
    let (many, most) = (list(4097, "0.5"), list(4096, "0.5"));
    let (long, longest) = (list(4097, "1"), list(4096, "1"));
    Doors {
        quiet: &["", "--json", "--help"],
        check_only_ok: &[
            "--audit --results $RESULTS",
            "--logits 2,1,0,-1 --stage top_k=3 --json",
            &format!(
                "--logits {most}{} --stage penalties=1048576:1.1 --history {longest}",
                stages(31)
            ),
            "--audit --fuzz-chains 1000000",
        ],
        check_only_refused: &["--stage top_p=1.5", "--audit --stage top_k=1"],
        not_utf8: &[b"--stage top_k=\xff", b"--logits 1\x80"],
        help_states: &[
            "1 to 4096 finite values",
            "at most 32 stages",
            "at most 4096",
            "at most 1000000",
        ],
        refused: &[
            &format!("--logits {many} --stage top_k=1"),
            "--fuzz-chains 1000001",
            &format!("--logits 1,2 --stage penalties=4:1.1 --history {long}"),
            &stages(33),
        ],
        ..Doors::of(BIN)
    }
    .check();
}

#[test]
fn argv_fuzz() {
    let stages = [
        "top_k=4",
        "logit_bias=3:+6",
        "logit_bias=0:-1/1:+2",
        "top_p=0.8",
        "min_p=0.2:2",
        "typical=0.9:2",
        "temp=0.7",
        "temp_ext=1:0.5:1",
        "xtc=1:0.1",
        "top_n_sigma=1.5",
        "penalties=4:1.1:0.5:0.2",
        "greedy",
        "sorted_guard",
        "shadow_top_p=0.8:trusting",
        "shadow_top_k=4:honest",
        "shadow_logit_bias=3:+6",
        "dist=1",
        "dist=4294967295",
        "shadow_dist=1:exact",
    ];
    let logits = ["4,3,2,1,0,-1,-2,-3", "2,1,0,-1", "1.5,-2,0.5,3", "1,2"];
    let flags = vec![
        Flag::value("--logits", &logits),
        Flag::value("--stage", &stages),
        Flag::value("--history", &["0", "1,2,1", "3"]),
        Flag::switch("--json"),
        Flag::results(),
        Flag::switch("--audit"),
        Flag::value("--fuzz-chains", &["100", "0", "100000", "1000000"]),
        Flag::value("--vocab-model", &["/no/such/model.gguf", "smollm2.gguf"]),
    ];
    let fuzz = Fuzz::new(BIN, flags, 0xf2f2);
    // The draw stages' refusals are reached: llama.cpp's random seed, and a draw before
    // another stage (a `--stage dist=...` followed by any other `--stage`).
    let reached = ["asks llama.cpp for a random seed", "must be the last stage"];
    argv_fuzz::assert_in_process(&fuzz, repro_sortpoison::cli::check, &reached, true);
}
