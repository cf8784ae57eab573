//! buildgen's command line at its doors: unknown builds, folders that are no llama.cpp tree
//! and bad shards are refused in one line (exit 2) before any workspace is written.

use test_support::Doors;

const BIN: &str = env!("CARGO_BIN_EXE_buildgen");

#[test]
fn doors_hold() {
    Doors {
        quiet: &["names", "names --shard 2/3", "--help"],
        check_only_ok: &[
            "names",
            "workspace b10200",
            "workspace 0.1.154",
            "hash /tmp",
        ],
        check_only_refused: &[
            "workspace b99",
            "workspace /tmp",
            "workspace /no/such/tree",
            "names --shard 0/3",
        ],
        help_states: &["workspace", "names", "hash", "api", "table"],
        refused: &[
            "workspace b99",
            "workspace 0.1.148",
            "names --shard 4/3",
            "hash /no/such/tree",
            "bogus",
            "",
        ],
        not_utf8: &[b"workspace b\xff"],
        ..Doors::of(BIN)
    }
    .check();
}

#[test]
fn names_are_the_24_revisions_in_llama_cpp_order() {
    let (code, out, err) = test_support::run_bin(BIN, &["names"]);
    assert_eq!(code, 0, "{err}");
    let names: Vec<&str> = out.lines().collect();
    assert_eq!(names.len(), 24);
    assert_eq!((names[0], names[23]), ("b4240", "b11429"));
}
