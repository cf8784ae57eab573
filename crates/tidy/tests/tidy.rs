//! The tidy checks on this repository: they fail with one line per file to fix.

use std::fs;
use tidy::{cycles, files_without_summary, module_graph, root, rust_files};

#[test]
fn every_source_file_opens_with_a_summary_line() {
    let root = root();
    let mut files = Vec::new();
    for dir in ["crates", "repros"] {
        files.extend(rust_files(&root.join(dir)));
    }
    assert!(files.len() > 50, "found only {} files", files.len());
    let problems = files_without_summary(&files);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_repro_and_its_tests_are_in_a_generated_build() {
    let root = root();
    // The manifest buildgen writes for an older release (not written to disk here).
    let manifest = buildgen::generate_manifest(&root, "0.1.154", false, &[]).unwrap();
    let root = root.canonicalize().unwrap();
    let mut problems = Vec::new();
    let mut repros: Vec<_> = fs::read_dir(root.join("repros"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    repros.sort();
    assert!(repros.len() >= 5, "{repros:?}");
    for name in &repros {
        let dir = root.join("repros").join(name);
        let bin = format!("path = {:?}", dir.join("src/main.rs").display().to_string());
        if !manifest.contains(&bin) {
            problems.push(format!(
                "the generated build has no [[bin]] for repros/{name}"
            ));
        }
        for test in rust_files(&dir.join("tests")) {
            if test.parent() != Some(dir.join("tests").as_path()) {
                continue; // a module of a test, not a test crate
            }
            let path = format!("path = {:?}", test.display().to_string());
            if !manifest.contains(&path) {
                problems.push(format!(
                    "the generated build has no [[test]] for {}",
                    test.display()
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn no_crate_has_a_module_cycle() {
    let root = root();
    let mut problems = Vec::new();
    for group in ["crates", "repros"] {
        for e in fs::read_dir(root.join(group)).unwrap().flatten() {
            let src = e.path().join("src");
            if src.is_dir() {
                for c in cycles(&module_graph(&src)) {
                    problems.push(format!("{}: {c}", src.display()));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
