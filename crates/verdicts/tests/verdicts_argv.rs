//! verdicts' command line at every door: a closed stdout pipe, check-only mode, 10,000
//! generated argument vectors through its check in process (`test_support::argv_fuzz`), and
//! the same bytes twice, on the committed `results/`
//! folder and on folders that break the report contract.

use test_support::argv_fuzz::{self, Flag, Fuzz};
use test_support::{Doors, Scratch};

const BIN: &str = env!("CARGO_BIN_EXE_verdicts");

/// The committed results folder.
fn results() -> String {
    test_support::results_dir().display().to_string()
}

/// Folders that break the contract for the tests: one with a file that is not a report, an
/// empty one, and a plain file. The folder that keeps it is the committed `results/`.
fn scratch(name: &str) -> (Scratch, [String; 3]) {
    let s = Scratch::new(&format!("verdicts-argv-{name}"));
    let (bad, empty) = (s.folder("bad"), s.folder("empty"));
    s.file("bad/bare.b1.json", "{\"rows\": []}");
    let file = s.file("file.json", "{}");
    (s, [bad, empty, file])
}

/// Check-only mode reads every report and prints nothing; a folder that breaks the contract
/// is refused with or without it.
#[test]
fn doors_hold() {
    let (_scratch, [bad, empty, file]) = scratch("check");
    let r = results();
    let broken = [bad.as_str(), &empty, &file, "/no/such/dir"];
    Doors {
        quiet: &[&r, "--help"],
        check_only_ok: &[&r],
        check_only_refused: &broken,
        not_utf8: &[b"/no/such/\xff", b"--\xff"],
        refused: &[&broken[..], &[&format!("{r} extra")]].concat(),
        ..Doors::of(BIN)
    }
    .check();
}

#[test]
fn same_command_prints_the_same_bytes() {
    let table = test_support::assert_same_bytes_twice(BIN, &[&results()]);
    assert!(table.contains("clone-drops-token-count"), "{table}");
}

#[test]
fn argv_fuzz() {
    let (_scratch, broken) = scratch("fuzz");
    let flag = Flag::positional(&["/no/such/dir", "results"]);
    let flags = vec![flag.with_good([results()]).with_good(broken)];
    let fuzz = Fuzz::new(BIN, flags, 0xdec1de);
    argv_fuzz::assert_in_process(&fuzz, verdicts::check, &[], true);
}
