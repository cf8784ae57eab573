//! Names the llama.cpp this build links and tells the wrapper which C API it offers.
//!
//! Cargo does not tell a dependent which version of a dependency it resolved, so this script
//! reads the lockfile of the workspace being built (the first `Cargo.lock` above the target
//! folder). A registry release's sources are found in cargo's registry; a tree build (made by
//! `buildgen`) keeps its sys crate beside the lockfile, with `tree.tsv` naming the tree. Then:
//!
//! - identity: the crate version, the llama.cpp commit and tag (from the release table, or
//!   the tree's git), the sampler sources' hash, and the ggml version the tree declares, as
//!   `SUBJECT_*` environment variables the crate reads with `env!`;
//! - API: `include/llama.h` and `ggml/include/ggml.h` are scanned (`builds::api`) and each
//!   declared function and struct field becomes a cfg (`llama_fn="..."`, `llama_arity`,
//!   `llama_param0`, `llama_field`), so the wrapper calls what this release declares.
//!
//! - contracts: `include/llama.h` and the sampler source are copied next to the build's
//!   output, where the crate embeds them (`SOURCES`) for the reports to quote.
//!
//! When the sources cannot be found, the build stops with one line saying so.

use std::path::{Path, PathBuf};

const SYS: &str = "llama-cpp-sys-2";

fn main() {
    if let Err(e) = run() {
        eprintln!("error: subject's build script: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").map_err(|_| "cargo sets no OUT_DIR")?);
    let lock = out_dir
        .ancestors()
        .map(|d| d.join("Cargo.lock"))
        .find(|c| c.is_file())
        .ok_or("no Cargo.lock above the target folder")?;
    let lock_dir = lock.parent().unwrap_or(Path::new("."));
    let text =
        std::fs::read_to_string(&lock).map_err(|e| format!("reading {}: {e}", lock.display()))?;
    let (version, registry) =
        builds::locked(&text, SYS).ok_or_else(|| format!("{} pins no {SYS}", lock.display()))?;
    println!("cargo:rerun-if-changed={}", lock.display());
    println!("cargo:rerun-if-env-changed=CARGO_TARGET_DIR");

    let (crate_dir, kind) = if registry {
        let home = builds::cargo_home().ok_or("no CARGO_HOME or HOME")?;
        let dir = builds::registry_source(&home, SYS, &version)
            .ok_or_else(|| format!("{SYS} {version} is not unpacked in cargo's registry"))?;
        (dir, "release")
    } else {
        (lock_dir.join(SYS), "tree")
    };
    let tree = crate_dir.join("llama.cpp");
    let sha = builds::sources_sha256(&tree)?;
    let (mut commit, mut tag, mut path, mut dirty, mut name) = (
        String::new(),
        String::new(),
        String::new(),
        String::new(),
        String::new(),
    );
    if kind == "release" {
        let rels = builds::releases();
        if let Some(r) = rels.iter().find(|r| r.crate_version == version) {
            commit = r.commit.clone();
            tag = r.tag.map(|t| format!("b{t}")).unwrap_or_default();
        }
    } else {
        let ident = lock_dir.join("tree.tsv");
        println!("cargo:rerun-if-changed={}", ident.display());
        let text = std::fs::read_to_string(&ident)
            .map_err(|e| format!("reading {}: {e}", ident.display()))?;
        for line in text.lines() {
            match line.split_once('\t') {
                Some(("commit", v)) => commit = v.into(),
                Some(("tag", v)) => tag = v.into(),
                Some(("path", v)) => path = v.into(),
                Some(("dirty", v)) => dirty = v.into(),
                Some(("name", v)) => name = v.into(),
                _ => {}
            }
        }
    }
    let mut header = String::new();
    for rel in ["include/llama.h", "ggml/include/ggml.h"] {
        let p = tree.join(rel);
        println!("cargo:rerun-if-changed={}", p.display());
        header +=
            &std::fs::read_to_string(&p).map_err(|e| format!("reading {}: {e}", p.display()))?;
        header.push('\n');
    }
    // The two files a defect's contract is quoted from, embedded in every binary
    // (`crate::build::SOURCES`), so a report quotes the very sources it was compiled from.
    let sampler = builds::sampler_file(&tree)
        .ok_or_else(|| format!("{} has no sampler source", tree.display()))?;
    println!("cargo:rerun-if-changed={}", tree.join(sampler).display());
    for (rel, copy) in [("include/llama.h", "llama.h"), (sampler, "samplers.cpp")] {
        let from = tree.join(rel);
        std::fs::copy(&from, out_dir.join(copy))
            .map_err(|e| format!("copying {}: {e}", from.display()))?;
    }
    let env = [
        ("SUBJECT_SYS_VERSION", version.as_str()),
        ("SUBJECT_BUILD_KIND", kind),
        ("SUBJECT_LLAMA_COMMIT", &commit),
        ("SUBJECT_LLAMA_TAG", &tag),
        ("SUBJECT_TREE_PATH", &path),
        ("SUBJECT_TREE_DIRTY", &dirty),
        ("SUBJECT_TREE_NAME", &name),
        ("SUBJECT_SOURCES_SHA256", &sha),
        ("SUBJECT_SAMPLER_PATH", sampler),
        (
            "SUBJECT_GGML_DECLARED",
            &builds::declared_ggml_version(&tree).unwrap_or_default(),
        ),
    ];
    for (k, v) in env {
        println!("cargo:rustc-env={k}={v}");
    }
    for key in ["llama_fn", "llama_arity", "llama_param0", "llama_field"] {
        println!("cargo::rustc-check-cfg=cfg({key}, values(any()))");
    }
    for cfg in builds::api::scan(&header).cfgs() {
        println!("cargo:rustc-cfg={cfg}");
    }
    Ok(())
}
