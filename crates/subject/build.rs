//! Records which llama-cpp-sys-2 release this build links, so every output can name it.
//!
//! The subject crate accepts a range of releases and each workspace's lockfile pins one.
//! Cargo does not tell a dependent which version of a dependency it resolved, so this
//! script finds the lockfile of the workspace being built (the first `Cargo.lock` above the
//! target directory) and reads the pinned version from it. If it cannot, the build says so
//! ("unknown") rather than guessing.

use std::path::{Path, PathBuf};

fn main() {
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let lock = find_lockfile(&out_dir);
    let version = lock
        .as_deref()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .and_then(|text| locked_version(&text, "llama-cpp-sys-2"))
        .unwrap_or_else(|| "unknown".to_string());
    if let Some(p) = &lock {
        println!("cargo:rerun-if-changed={}", p.display());
    }
    println!("cargo:rerun-if-env-changed=CARGO_TARGET_DIR");
    println!("cargo:rustc-env=SUBJECT_SYS_VERSION={version}");
}

fn find_lockfile(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .map(|dir| dir.join("Cargo.lock"))
        .find(|candidate| candidate.is_file())
}

/// The `version` of the `[[package]]` entry named `name` in a Cargo.lock text.
fn locked_version(lock: &str, name: &str) -> Option<String> {
    let wanted = format!("name = \"{name}\"");
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() == wanted {
            let next = lines.next()?.trim();
            return next
                .strip_prefix("version = \"")
                .and_then(|rest| rest.strip_suffix('"'))
                .map(str::to_string);
        }
    }
    None
}
