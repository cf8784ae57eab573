//! repro-clone's command line at every door: a closed stdout pipe, check-only mode, the upper
//! bounds of its flags, and 10,000 generated argument vectors through its check in process
//! (`test_support::argv_fuzz`). Nothing here decodes a model.

use test_support::argv_fuzz::{self, Flag, Fuzz};
use test_support::Doors;

const BIN: &str = env!("CARGO_BIN_EXE_repro-clone");

/// Under check-only mode a valid command line (at the bounds too) exits 0 without doing
/// anything (the audit would take minutes and write reports), and a refused one is still
/// refused.
#[test]
fn doors_hold() {
    let (many, most) = (vec!["1"; 4097].join(","), vec!["1"; 4096].join(","));
    Doors {
        quiet: &["", "--json", "--help", "--sampler ledger"],
        check_only_ok: &[
            "--audit --results $RESULTS",
            "--audit --results $RESULTS --sweep-bits 4 --sweep-max-alphabet 2",
            "--audit --results $RESULTS --sweep-bits 17 --sweep-max-alphabet 5",
            "--stateful --json",
            "--last-n 4096 --history 262143 --then 0",
            &format!("--last-n 4096 --history {most} --then {most}"),
        ],
        check_only_refused: &[
            "--last-n -1",
            "--audit --history 1",
            "--sweep-bits 14",
            "--sweep-max-alphabet 4",
            "--audit --sweep-bits 3",
            "--audit --sweep-bits 18",
            "--audit --sweep-max-alphabet 1",
            "--audit --sweep-max-alphabet 6",
        ],
        not_utf8: &[b"--history 1,\xff", b"--\xff"],
        help_states: &[
            "0 to 4096",
            "1 to 4096 ids",
            "0 to 262143",
            "4 to 17",
            "2 to 5",
        ],
        refused: &[
            "--last-n 4097",
            &format!("--history {many}"),
            &format!("--then {many}"),
            "--history 262144",
            "--history 1 --then 2147483647",
        ],
        ..Doors::of(BIN)
    }
    .check();
}

#[test]
fn argv_fuzz() {
    let flags = vec![
        Flag::value("--last-n", &["4", "0", "3", "4096"]),
        Flag::value("--history", &["5,5,6", "1,2,1,3", "9,9,2,9", "0", "262143"]),
        Flag::value("--then", &["7,8", "2,2", "4"]),
        Flag::switch("--json"),
        Flag::results(),
        Flag::switch("--stateful"),
        Flag::switch("--audit"),
        Flag::value(
            "--memcheck-probe",
            &["adaptive_p", "penalties", "planted-reads-past-end"],
        ),
        Flag::value("--sampler", &["builtin", "ledger"]),
        Flag::value("--sweep-bits", &["14", "4", "17"]),
        Flag::value("--sweep-max-alphabet", &["4", "2", "5"]),
    ];
    let fuzz = Fuzz::new(BIN, flags, 0xc10e);
    argv_fuzz::assert_in_process(&fuzz, repro_clone::cli::check, &[], true);
}
