//! The orchestrator's command line: bad input is exit 2 before any work.

fn run(args: &[&str]) -> i32 {
    let argv = std::iter::once("xtask")
        .chain(args.iter().copied())
        .map(Into::into);
    xtask::main(argv)
}

#[test]
fn bad_input_is_refused_before_any_work() {
    let results = std::env::temp_dir().join(format!("xtask-argv-{}", std::process::id()));
    let results = results.to_str().unwrap();
    for bad in [
        &["audit", "--results", results, "--only", "F99"][..],
        &["audit", "--results", results, "--only", "clone"],
        &["audit", "--results", results, "--only", "F5"],
        &["audit", "--results", results, "no-such-build"],
        &["tables", "--results", results, "no-such-build"],
        &["audit", "bad name"],
        &["plan", "nothing"],
        &["matrix", "--build-only", "--table-only"],
        &["no-such-job"],
    ] {
        assert_eq!(run(bad), 2, "{bad:?}");
    }
    assert!(
        !std::path::Path::new(results).exists(),
        "nothing was written"
    );
}
