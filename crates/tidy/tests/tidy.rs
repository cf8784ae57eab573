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

/// The Markdown documents a reader opens: README.md, ARCHITECTURE.md, PREREG.md, docs/ and
/// the upstream reports.
fn documents(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out: Vec<_> = ["README.md", "ARCHITECTURE.md", "PREREG.md"]
        .iter()
        .map(|f| root.join(f))
        .collect();
    let mut stack = vec![root.join("docs"), root.join("upstream")];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Every relative link `](target)` of a document names a file or folder that exists (a
/// `#fragment` is dropped; web addresses are not followed).
#[test]
fn every_link_in_the_documents_resolves() {
    let root = root();
    let mut problems = Vec::new();
    let mut links = 0;
    for doc in documents(&root) {
        // Code blocks (a patch, a command's output) are quoted text, not links.
        let text: String = fs::read_to_string(&doc)
            .unwrap()
            .split("```")
            .step_by(2)
            .collect::<Vec<_>>()
            .join("\n");
        for (i, _) in text.match_indices("](") {
            let rest = &text[i + 2..];
            let Some(end) = rest.find(')') else { continue };
            let target = rest[..end].split('#').next().unwrap_or_default().trim();
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            links += 1;
            let base = doc.parent().unwrap();
            if !base.join(target).exists() {
                problems.push(format!(
                    "{}: link to {target} resolves to nothing",
                    doc.display()
                ));
            }
        }
    }
    assert!(links > 0, "no relative link found at all");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// No document names an issue number: a reader cannot look those up.
#[test]
fn no_document_names_an_issue_number() {
    let root = root();
    let mut problems = Vec::new();
    for doc in documents(&root) {
        let text = fs::read_to_string(&doc).unwrap().to_lowercase();
        for (i, _) in text.match_indices("issue") {
            let after = text[i + 5..].trim_start_matches(['s', ' ', '#']);
            let digits = after.chars().take_while(char::is_ascii_digit).count();
            // Upstream issue numbers are public and cited with their repository ("llama.cpp
            // issue 29017"); the project's own are not.
            let before = &text[i.saturating_sub(30)..i];
            let cited = ["llama.cpp", "transformers", "candle", "cargo", "rust"]
                .iter()
                .any(|r| before.contains(r));
            if (1..=3).contains(&digits) && !cited {
                problems.push(format!(
                    "{}: '{}'",
                    doc.display(),
                    &text[i..i + 5 + 3 + digits]
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
