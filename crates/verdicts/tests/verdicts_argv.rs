//! verdicts' command line at every door: a closed stdout pipe, check-only mode, 1,000
//! generated argument vectors as processes (`test_support::argv_fuzz`; its one positional
//! folder has few shapes to try), and the same bytes twice, on the committed `results/`
//! folder and on folders that break the report contract.

use std::path::{Path, PathBuf};
use test_support::argv_fuzz::{self, Flag, Fuzz};
use test_support::{assert_quiet_on_closed_pipe, assert_refused, run_bin_with_env, CHECK_ONLY};

const BIN: &str = env!("CARGO_BIN_EXE_verdicts");

/// The committed results folder.
fn results() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../results")
        .display()
        .to_string()
}

/// Folders that break the contract for the tests: one with a file that is not a report, an
/// empty one, and a plain file. The folder that keeps it is the committed `results/`.
struct Scratch {
    dir: PathBuf,
    bad: String,
    empty: String,
    file: String,
}

fn scratch(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("verdicts-argv-{name}-{}", std::process::id()));
    let (bad, empty) = (dir.join("bad"), dir.join("empty"));
    for d in [&bad, &empty] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(bad.join("bare.0.0.1.json"), "{\"rows\": []}").unwrap();
    let file = dir.join("file.json");
    std::fs::write(&file, "{}").unwrap();
    let s = |p: &Path| p.display().to_string();
    Scratch {
        bad: s(&bad),
        empty: s(&empty),
        file: s(&file),
        dir,
    }
}

#[test]
fn a_closed_stdout_pipe_ends_quietly() {
    for args in [&[results().as_str()][..], &["--help"]] {
        assert_quiet_on_closed_pipe(BIN, args, &[]);
    }
}

#[test]
fn check_only_reads_every_report_and_prints_nothing() {
    let s = scratch("check");
    let (code, stdout, stderr) = run_bin_with_env(BIN, &[&results()], &[CHECK_ONLY]);
    assert_eq!((code, stdout.as_str(), stderr.as_str()), (0, "", ""));
    for dir in [&s.bad, &s.empty, &s.file, "/no/such/dir"] {
        assert_refused(BIN, &[dir], &[CHECK_ONLY]);
        assert_refused(BIN, &[dir], &[]);
    }
    assert_refused(BIN, &[&results(), "extra"], &[]);
    std::fs::remove_dir_all(&s.dir).unwrap();
}

#[test]
fn same_command_prints_the_same_bytes() {
    let table = test_support::assert_same_bytes_twice(BIN, &[&results()]);
    assert!(table.contains("clone-drops-token-count"), "{table}");
}

#[test]
fn argv_fuzz() {
    let s = scratch("fuzz");
    let flags = vec![Flag::positional(&["/no/such/dir", "results"]).with_good([
        results(),
        s.bad.clone(),
        s.empty.clone(),
        s.file.clone(),
    ])];
    let mut fuzz = Fuzz::new(BIN, flags, 0xdec1de);
    (fuzz.vectors, fuzz.processes) = (1000, 1000);
    let summary = argv_fuzz::run(&fuzz);
    std::fs::remove_dir_all(&s.dir).unwrap();
    assert!(summary.exits[0] > 0 && summary.exits[2] > 0, "{summary:?}");
}
