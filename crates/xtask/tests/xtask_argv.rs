//! The orchestrator's command line: bad input is one line and exit 2 before any work, and the
//! plans it prints are the registry's.

fn run(args: &[&str]) -> i32 {
    let argv = std::iter::once("xtask")
        .chain(args.iter().copied())
        .map(Into::into);
    xtask::main(argv)
}

#[test]
fn bad_input_is_refused_before_any_work() {
    for bad in [
        &["audit", "--only", "F99"][..],
        &["audit", "--only", "clone"],
        &["audit", "bad name"],
        &["plan", "nothing"],
        &["matrix", "--build-only", "--table-only"],
        &["no-such-job"],
    ] {
        assert_eq!(run(bad), 2, "{bad:?}");
    }
}

#[test]
fn the_audit_plan_names_every_registered_finding_with_steps() {
    let steps = registry::plan::audit(registry::FINDINGS, &["b11429"], false, "r");
    for f in registry::FINDINGS.iter().filter(|f| !f.audit.is_empty()) {
        assert!(steps.iter().any(|s| s.binary == f.binary), "{}", f.binary);
    }
}
