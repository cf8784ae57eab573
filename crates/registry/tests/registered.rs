//! The registry against the repository: every registered finding has its package, binary,
//! PREREG section and docs page; every finding package is registered; the default build is
//! the root workspace's pin.

use registry::{default_build, FINDINGS};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"))
}

#[test]
fn every_registered_finding_has_its_binary_prereg_section_and_page() {
    let prereg = read("PREREG.md");
    let mut missing = Vec::new();
    for f in FINDINGS {
        let manifest = root().join(f.package_dir()).join("Cargo.toml");
        let named = std::fs::read_to_string(&manifest)
            .map(|m| m.contains(&format!("name = \"{}\"", f.binary)))
            .unwrap_or(false);
        if !named || !root().join(f.package_dir()).join("src/main.rs").is_file() {
            missing.push(format!(
                "{}: no package {} with a binary",
                f.number,
                f.package_dir()
            ));
        }
        if !prereg.lines().any(|l| f.opens_prereg_section(l)) {
            missing.push(format!("{0}: no `## {0}:` section in PREREG.md", f.number));
        }
        if !root().join(f.docs_page()).is_file() {
            missing.push(format!("{}: no page {}", f.number, f.docs_page()));
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

#[test]
fn every_finding_package_is_registered_once_by_number() {
    let mut dirs: Vec<String> = std::fs::read_dir(root().join("repros"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    dirs.sort();
    let mut registered: Vec<String> = FINDINGS.iter().map(|f| f.binary.to_string()).collect();
    registered.sort();
    assert_eq!(dirs, registered, "repros/ and the registry");
    let numbers: Vec<_> = FINDINGS.iter().map(|f| f.number).collect();
    let mut sorted = numbers.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(
        numbers, sorted,
        "FINDINGS is in number order, each number once"
    );
}

#[test]
fn the_default_build_is_the_root_workspace_pin() {
    let manifest = read("Cargo.toml");
    let releases = builds::releases();
    let newest =
        builds::resolve(&releases, default_build().tag).expect("the default build is a release");
    let pin = format!(
        "llama-cpp-sys-2 = {{ version = \"={}\"",
        newest.crate_version
    );
    assert!(manifest.contains(&pin), "the root Cargo.toml pins {pin}");
}

/// Memcheck's F2 runs put every stage of the stage table through llama.cpp (or the suite's
/// own stage through its fix) at least once.
#[test]
fn memcheck_runs_every_stage_of_the_table() {
    let f2 = FINDINGS
        .iter()
        .find(|f| f.binary == "repro-sortpoison")
        .unwrap();
    let staged: Vec<&str> = (f2.memcheck.iter())
        .flat_map(|p| p.args.windows(2))
        .filter(|w| w[0] == "--stage")
        .map(|w| w[1].split('=').next().unwrap())
        .collect();
    let missing: Vec<&str> = (oracle::stage::STAGES.iter())
        .map(|r| r.name)
        .filter(|n| !staged.contains(n))
        .collect();
    assert!(missing.is_empty(), "memcheck never runs: {missing:?}");
}

/// Both findings indexes (ARCHITECTURE.md's and docs/findings-index.md) have a row for every
/// registered finding, in number order.
#[test]
fn the_findings_indexes_list_every_finding_in_order() {
    for doc in ["ARCHITECTURE.md", "docs/findings-index.md"] {
        let text = read(doc);
        let mut at = 0;
        for f in FINDINGS {
            let row = |l: &str| {
                l.starts_with(&format!("| {} ", f.number))
                    || l.starts_with(&format!("| [{}]", f.number))
            };
            let found = text.lines().enumerate().skip(at).find(|(_, l)| row(l));
            let Some((i, _)) = found else {
                panic!(
                    "{doc}: no row for {} after the previous finding's",
                    f.number
                )
            };
            at = i;
        }
    }
}
