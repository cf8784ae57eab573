//! Which detector wrote a report: a version derived from the code that runs it.
//!
//! A finding's binary judges with the code of its own package and of every workspace crate it
//! depends on by path (the oracle, the subject wrapper, the report contract, ...). The
//! *detector version* is a sha256 over those packages' files (each package's directory,
//! without its tests, snapshots and benches), so it changes exactly when code that can change
//! a verdict does, and it is the same on every llama.cpp build, whose sources it leaves out.
//! A repro's build script stamps it into the binary ([`emit`]); the release matrix's test
//! computes it again from the tree ([`version`]) and refuses a committed report stamped with
//! another one.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Folders of a package that hold no code a binary runs.
const SKIPPED: [&str; 6] = [
    "tests",
    "benches",
    "examples",
    "target",
    "snapshots",
    "fuzz",
];

/// The package directories `manifest_dir` depends on by path, itself first, each once, in a
/// fixed order (depth first in the order its manifest names them). Only `[dependencies]`
/// count: dev- and build-dependencies do not run in the binary.
pub fn packages(manifest_dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    visit(manifest_dir, &mut out)?;
    Ok(out)
}

fn visit(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let dir = dir
        .canonicalize()
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    if out.contains(&dir) {
        return Ok(());
    }
    out.push(dir.clone());
    let manifest = dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest)
        .map_err(|e| format!("reading {}: {e}", manifest.display()))?;
    for rel in path_dependencies(&text) {
        visit(&dir.join(rel), out)?;
    }
    Ok(())
}

/// The `path = "..."` of every entry of a manifest's `[dependencies]` table.
fn path_dependencies(manifest: &str) -> Vec<String> {
    let mut section = "";
    let mut out = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
            continue;
        }
        if section != "[dependencies]" {
            continue;
        }
        if let Some(rest) = line.split("path = \"").nth(1) {
            if let Some(path) = rest.split('"').next() {
                out.push(path.to_string());
            }
        }
    }
    out
}

/// Every file of a package that can hold code or data its binary uses, relative to the
/// package, sorted.
fn files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let abs = dir.join(&rel);
        let entries = std::fs::read_dir(&abs).map_err(|e| format!("{}: {e}", abs.display()))?;
        for e in entries {
            let e = e.map_err(|e| format!("{}: {e}", abs.display()))?;
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || name.ends_with(".snap") || name.ends_with(".snap.new") {
                continue;
            }
            let kind = e.file_type().map_err(|e| format!("{name}: {e}"))?;
            if kind.is_dir() {
                if !SKIPPED.contains(&name.as_str()) {
                    stack.push(rel.join(&name));
                }
            } else if kind.is_file() {
                out.push(rel.join(&name));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The detector version of the package in `manifest_dir`: sha256 over each of its
/// [`packages`]' files, each as the package's name, its path, a NUL, its length, a NUL and
/// its bytes; the first 16 hex digits. Also returns the directories read.
pub fn version(manifest_dir: &Path) -> Result<(String, Vec<PathBuf>), String> {
    let dirs = packages(manifest_dir)?;
    let mut h = Sha256::new();
    for dir in &dirs {
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned());
        for rel in files(dir)? {
            let bytes = std::fs::read(dir.join(&rel))
                .map_err(|e| format!("reading {}: {e}", dir.join(&rel).display()))?;
            h.update(name.as_deref().unwrap_or_default().as_bytes());
            h.update(b"/");
            h.update(rel.to_string_lossy().as_bytes());
            h.update([0]);
            h.update(bytes.len().to_string().as_bytes());
            h.update([0]);
            h.update(&bytes);
        }
    }
    let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    Ok((hex[..16].to_string(), dirs))
}

/// For a repro's build script: sets `SAMPLER_AUDIT_DETECTOR` to the package's detector
/// version and asks cargo to rerun when any package it covers changes.
pub fn emit() {
    let run = || -> Result<(), String> {
        let dir = std::env::var("CARGO_MANIFEST_DIR").map_err(|_| "no CARGO_MANIFEST_DIR")?;
        let (v, dirs) = version(Path::new(&dir))?;
        for d in dirs {
            println!("cargo:rerun-if-changed={}", d.display());
        }
        println!("cargo:rustc-env=SAMPLER_AUDIT_DETECTOR={v}");
        Ok(())
    };
    if let Err(e) = run() {
        eprintln!("error: the detector version: {e}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_dependencies_table_is_followed() {
        let manifest = r#"
[package]
name = "x"
[dependencies]
oracle = { path = "../../crates/oracle" }
anyhow.workspace = true
[dev-dependencies]
test-support = { path = "../../crates/test-support" }
[build-dependencies]
builds = { path = "../../crates/builds" }
"#;
        assert_eq!(path_dependencies(manifest), ["../../crates/oracle"]);
    }

    /// A change to any file of a covered package changes the version; a test or a snapshot
    /// does not.
    #[test]
    fn the_version_follows_the_code_and_nothing_else() {
        let root = std::env::temp_dir().join(format!("detector-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let (a, b) = (root.join("a"), root.join("b"));
        for d in [&a, &b] {
            std::fs::create_dir_all(d.join("src")).unwrap();
            std::fs::create_dir_all(d.join("tests/snapshots")).unwrap();
        }
        std::fs::write(
            a.join("Cargo.toml"),
            "[dependencies]\nb = { path = \"../b\" }\n",
        )
        .unwrap();
        std::fs::write(b.join("Cargo.toml"), "[dependencies]\n").unwrap();
        std::fs::write(a.join("src/lib.rs"), "fn a() {}").unwrap();
        std::fs::write(b.join("src/lib.rs"), "fn b() {}").unwrap();
        let v0 = version(&a).unwrap().0;
        assert_eq!(version(&a).unwrap().1.len(), 2);
        std::fs::write(a.join("tests/t.rs"), "#[test] fn t() {}").unwrap();
        std::fs::write(a.join("tests/snapshots/x.snap"), "x").unwrap();
        assert_eq!(
            version(&a).unwrap().0,
            v0,
            "tests and snapshots are no detector"
        );
        std::fs::write(b.join("src/lib.rs"), "fn b() { }").unwrap();
        let v1 = version(&a).unwrap().0;
        assert_ne!(v1, v0, "a dependency's code is the detector's");
        assert_ne!(version(&b).unwrap().0, v1);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
