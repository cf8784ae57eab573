//! What a build of the suite is, stated as a llama.cpp user names it.
//!
//! A *build* is one llama.cpp source linked through `llama-cpp-sys-2`: either a crate release
//! from [`RELEASES`] (named by the llama.cpp tag it vendors, `b10200`, or by its commit when the
//! release vendors an untagged revision), or a maintainer's own source tree. This crate holds
//! the table of releases, the check that a vendored tree is the one the table names
//! ([`sources_sha256`]) and the scan of `llama.h` that tells the wrapper which C API a build
//! offers ([`api`]). It links nothing and calls no C; `subject`'s build script and the
//! `buildgen` tool both read the table through it, so there is one parser and one rule.

pub mod api;
pub mod detector;
mod table;

pub use table::{parse_table, releases, resolve, revisions, Release, Revision, RELEASES_TSV};

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// The files whose bytes identify a vendored llama.cpp for this suite: the public header and
/// the sampler implementation (named `llama-sampling.cpp` before b8148).
pub const SAMPLER_SOURCES: [&[&str]; 2] = [
    &["include/llama.h"],
    &["src/llama-sampler.cpp", "src/llama-sampling.cpp"],
];

/// The sampler implementation file of a llama.cpp tree, relative to the tree.
pub fn sampler_file(tree: &Path) -> Option<&'static str> {
    SAMPLER_SOURCES[1]
        .iter()
        .copied()
        .find(|f| tree.join(f).is_file())
}

/// sha256 over the [`SAMPLER_SOURCES`] of a llama.cpp tree: each file's path relative to the
/// tree, a NUL, its length in decimal, a NUL, then its bytes. Lowercase hex.
pub fn sources_sha256(tree: &Path) -> Result<String, String> {
    let mut h = Sha256::new();
    for alternatives in SAMPLER_SOURCES {
        let rel = alternatives
            .iter()
            .find(|f| tree.join(f).is_file())
            .ok_or_else(|| format!("{} has none of {}", tree.display(), alternatives.join(", ")))?;
        let bytes = std::fs::read(tree.join(rel))
            .map_err(|e| format!("reading {}: {e}", tree.join(rel).display()))?;
        h.update(rel.as_bytes());
        h.update([0]);
        h.update(bytes.len().to_string().as_bytes());
        h.update([0]);
        h.update(&bytes);
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// The ggml version a tree declares in `ggml/CMakeLists.txt` (`GGML_VERSION_MAJOR` and so on),
/// which is what its library's `ggml_version()` returns; `None` before ggml declared one.
pub fn declared_ggml_version(tree: &Path) -> Option<String> {
    let text = std::fs::read_to_string(tree.join("ggml/CMakeLists.txt")).ok()?;
    let part = |name: &str| {
        let prefix = format!("set(GGML_VERSION_{name} ");
        text.lines().find_map(|l| {
            l.trim()
                .strip_prefix(&prefix)?
                .strip_suffix(')')
                .map(str::to_string)
        })
    };
    Some(format!(
        "{}.{}.{}",
        part("MAJOR")?,
        part("MINOR")?,
        part("PATCH")?
    ))
}

/// Where cargo unpacked a registry crate: `<cargo home>/registry/src/<index>/<name>-<version>`.
/// The index folder's name carries a hash, so every index folder is tried.
pub fn registry_source(cargo_home: &Path, name: &str, version: &str) -> Option<PathBuf> {
    let src = cargo_home.join("registry").join("src");
    let mut indexes: Vec<PathBuf> = std::fs::read_dir(&src)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    indexes.sort();
    indexes
        .into_iter()
        .map(|i| i.join(format!("{name}-{version}")))
        .find(|p| p.join("Cargo.toml").is_file())
}

/// The version of the `[[package]]` named `name` in a lockfile's text, and whether it comes
/// from a registry (a path package has no `source` line).
pub fn locked(lock: &str, name: &str) -> Option<(String, bool)> {
    let wanted = format!("name = \"{name}\"");
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() == wanted {
            let version = lines
                .next()?
                .trim()
                .strip_prefix("version = \"")?
                .strip_suffix('"')?;
            let registry = lines
                .next()
                .is_some_and(|l| l.trim().starts_with("source = \"registry+"));
            return Some((version.to_string(), registry));
        }
    }
    None
}

/// `$CARGO_HOME`, else `$HOME/.cargo` (cargo's own default).
pub fn cargo_home() -> Option<PathBuf> {
    std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> PathBuf {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("builds-test-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (rel, text) in files {
            let p = dir.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        dir
    }

    #[test]
    fn the_sources_hash_covers_the_header_and_the_sampler_file_under_either_name() {
        let a = tree(&[("include/llama.h", "h"), ("src/llama-sampler.cpp", "s")]);
        let b = tree(&[("include/llama.h", "h"), ("src/llama-sampling.cpp", "s")]);
        let c = tree(&[("include/llama.h", "h"), ("src/llama-sampler.cpp", "t")]);
        let d = tree(&[("include/llama.h", "hh"), ("src/llama-sampler.cpp", "")]);
        let (ha, hb) = (sources_sha256(&a).unwrap(), sources_sha256(&b).unwrap());
        // The file's name is part of the hash, so a renamed file is a different source.
        assert_ne!(ha, hb);
        assert_ne!(ha, sources_sha256(&c).unwrap());
        // Lengths separate the files, so moving a byte between them changes the hash.
        let e = tree(&[
            ("include/llama.h", "h"),
            ("src/llama-sampler.cpp", "s"),
            ("x", ""),
        ]);
        assert_eq!(ha, sources_sha256(&e).unwrap());
        assert_ne!(sources_sha256(&d).unwrap(), ha);
        let missing = tree(&[("include/llama.h", "h")]);
        assert!(sources_sha256(&missing)
            .unwrap_err()
            .contains("llama-sampler.cpp"));
    }

    #[test]
    fn a_lockfile_names_the_version_and_whether_it_is_a_registry_crate() {
        let lock = "[[package]]\nname = \"a\"\nversion = \"1.2.3\"\nsource = \"registry+https://x\"\n\n[[package]]\nname = \"b\"\nversion = \"0.1.0\"\n";
        assert_eq!(locked(lock, "a"), Some(("1.2.3".into(), true)));
        assert_eq!(locked(lock, "b"), Some(("0.1.0".into(), false)));
        assert_eq!(locked(lock, "c"), None);
    }

    #[test]
    fn the_ggml_version_is_read_from_cmake_or_absent() {
        let t = tree(&[(
            "ggml/CMakeLists.txt",
            "project(x)\nset(GGML_VERSION_MAJOR 0)\nset(GGML_VERSION_MINOR 26)\nset(GGML_VERSION_PATCH 1)\n",
        )]);
        assert_eq!(declared_ggml_version(&t).as_deref(), Some("0.26.1"));
        let old = tree(&[("ggml/CMakeLists.txt", "project(ggml)\n")]);
        assert_eq!(declared_ggml_version(&old), None);
    }
}
