//! The tidy checks on this repository: they fail with one line per file to fix.

use std::fs;
use tidy::{cycles, files_without_summary, module_graph, root, rust_files};

/// Repro binaries that run on the default build only, and why.
const DEFAULT_BUILD_ONLY: &[(&str, &str)] = &[(
    "penalty-cost",
    "F5 times the fix on the default build; the legacy build has no claim to time",
)];

#[test]
fn every_source_file_opens_with_a_summary_line() {
    let root = root();
    let mut files = Vec::new();
    for dir in ["crates", "repros", "legacy/src"] {
        files.extend(rust_files(&root.join(dir)));
    }
    assert!(files.len() > 50, "found only {} files", files.len());
    let problems = files_without_summary(&files);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_repro_builds_on_the_legacy_build_too() {
    let root = root();
    // Only lines that are not comments count.
    let legacy: String = fs::read_to_string(root.join("legacy/Cargo.toml"))
        .unwrap()
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    let mut problems = Vec::new();
    let mut repros: Vec<_> = fs::read_dir(root.join("repros"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    repros.sort();
    assert!(repros.len() >= 5, "{repros:?}");
    for name in &repros {
        if DEFAULT_BUILD_ONLY.iter().any(|(n, _)| n == name) {
            continue;
        }
        let bin = format!("path = \"../repros/{name}/src/main.rs\"");
        if !legacy.contains(&bin) {
            problems.push(format!(
                "legacy/Cargo.toml has no [[bin]] for repros/{name}"
            ));
        }
        for test in rust_files(&root.join("repros").join(name).join("tests")) {
            let file = test.file_name().unwrap().to_string_lossy().into_owned();
            let path = format!("path = \"../repros/{name}/tests/{file}\"");
            if !legacy.contains(&path) {
                problems.push(format!(
                    "legacy/Cargo.toml has no [[test]] for repros/{name}/tests/{file}"
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
