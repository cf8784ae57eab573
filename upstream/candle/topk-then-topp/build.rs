//! Builds the patched copy: candle-transformers 0.11.1's `src/generation/mod.rs`, from the
//! cargo registry, with `fix.patch` applied by `patch -p1`, written to
//! `$OUT_DIR/generation_patched.rs` for `src/bin/patched.rs`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::{env, fs};

const CRATE: &str = "candle-transformers-0.11.1";
const FILE: &str = "src/generation/mod.rs";

fn main() {
    // The registry's unpacked sources: $CARGO_HOME/registry/src/<index>/<crate>/.
    let home = env::var_os("CARGO_HOME").map_or_else(
        || PathBuf::from(env::var_os("HOME").expect("HOME or CARGO_HOME")).join(".cargo"),
        PathBuf::from,
    );
    let mut found: Vec<PathBuf> = fs::read_dir(home.join("registry/src"))
        .expect("the cargo registry's sources")
        .flatten()
        .map(|e| e.path().join(CRATE).join(FILE))
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    let original = found
        .first()
        .unwrap_or_else(|| panic!("no {CRATE}/{FILE} under {}", home.display()));

    // A scratch copy of the crate root, holding that one file, for `patch -p1`.
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let tree = out.join(CRATE);
    let copy = tree.join(FILE);
    fs::create_dir_all(copy.parent().unwrap()).unwrap();
    fs::write(&copy, fs::read(original).unwrap()).unwrap();
    let patch = Path::new(env!("CARGO_MANIFEST_DIR")).join("fix.patch");
    // Exact context (-F0), no backups, no questions: a patch that does not apply stops the build.
    let status = Command::new("patch")
        .args([
            "-p1",
            "-F0",
            "--batch",
            "--no-backup-if-mismatch",
            "--silent",
            "-i",
        ])
        .arg(&patch)
        .current_dir(&tree)
        .status()
        .expect("running `patch` (GNU patch)");
    assert!(
        status.success(),
        "{} does not apply to {}",
        patch.display(),
        original.display()
    );
    // The one adaptation: src/bin/patched.rs takes the file with `include!` (`#[path]` wants a
    // literal), which reads items only, so the module's `//!` doc lines become `//` comments.
    let text: String = (fs::read_to_string(&copy).unwrap().lines())
        .map(|l| match l.strip_prefix("//!") {
            Some(rest) => format!("//{rest}\n"),
            None => format!("{l}\n"),
        })
        .collect();
    fs::write(out.join("generation_patched.rs"), text).unwrap();

    println!("cargo:rerun-if-changed=fix.patch");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={}", original.display());
    println!("cargo:rerun-if-env-changed=CARGO_HOME");
}
