//! Which llama.cpp this binary links, stated as precisely as the build allows, and the
//! start-up check that the name is right.

use anyhow::{bail, Result};
use std::ffi::CStr;

/// The pinned builds: the `llama-cpp-sys-2` release each lockfile names and the version its
/// linked library reports through `ggml_version()` (read from the vendored
/// `ggml/CMakeLists.txt` of each release).
pub const PINNED: [(&str, &str); 2] = [("0.1.161", "0.26.0"), ("0.1.154", "0.18.0")];

/// The pinned crate release (read from the lockfile at build time) and the ggml version the
/// linked library reports about itself at run time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildInfo {
    /// `llama-cpp-sys-2` version, e.g. `0.1.161`.
    pub crate_version: String,
    /// `ggml_version()` of the linked library, e.g. `0.26.0`.
    pub ggml_version: String,
}

/// Refuses a binary whose lockfile name and linked library disagree. The name comes from the
/// first `Cargo.lock` above the target directory at build time, which the wrong lockfile can
/// supply (a legacy build whose target directory sits inside the root workspace); the ggml
/// version comes from the library itself.
pub fn check_identity(crate_version: &str, ggml_version: &str) -> Result<()> {
    match PINNED.iter().find(|(c, _)| *c == crate_version) {
        None => bail!(
            "this binary names llama-cpp-sys-2 '{crate_version}', which is not a pinned build ({}); rebuild it through make",
            PINNED.iter().map(|(c, _)| *c).collect::<Vec<_>>().join(", ")
        ),
        Some((_, want)) if *want != ggml_version => bail!(
            "this binary's lockfile names llama-cpp-sys-2 {crate_version} (ggml {want}) but it links ggml {ggml_version}; rebuild it through make"
        ),
        Some(_) => Ok(()),
    }
}

impl BuildInfo {
    pub fn current() -> BuildInfo {
        // SAFETY: ggml_version returns a pointer to a static NUL-terminated string.
        let ggml = unsafe { CStr::from_ptr(ffi!(llama_cpp_sys_2::ggml_version())) };
        BuildInfo {
            crate_version: env!("SUBJECT_SYS_VERSION").to_string(),
            ggml_version: ggml.to_string_lossy().into_owned(),
        }
    }

    /// [`BuildInfo::current`], refused when the linked library is not the build named.
    pub fn verified() -> Result<BuildInfo> {
        let b = BuildInfo::current();
        check_identity(&b.crate_version, &b.ggml_version)?;
        Ok(b)
    }

    /// The short name used in file names, commands and verdicts: the crate version.
    pub fn tag(&self) -> &str {
        &self.crate_version
    }

    /// The crate version with dots turned into underscores, for snapshot names.
    pub fn slug(&self) -> String {
        self.crate_version.replace('.', "_")
    }

    /// Who a report is about: `finding` and verdict `name` on this build.
    pub fn report_subject(&self, finding: &str, name: &str) -> report::ReportId {
        report::ReportId {
            finding: finding.to_string(),
            name: name.to_string(),
            engine: report::DEFAULT_ENGINE.to_string(),
            build: self.tag().to_string(),
            build_detail: self.describe(),
        }
    }

    /// One line a person can read: `llama-cpp-sys-2 0.1.161 (ggml 0.26.0)`.
    pub fn describe(&self) -> String {
        format!(
            "llama-cpp-sys-2 {} (ggml {})",
            self.crate_version, self.ggml_version
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mislabelled_or_unknown_build_is_refused() {
        assert!(check_identity("0.1.161", "0.26.0").is_ok());
        assert!(check_identity("0.1.154", "0.18.0").is_ok());
        let e = check_identity("0.1.161", "0.18.0").unwrap_err().to_string();
        assert!(e.contains("links ggml 0.18.0"), "{e}");
        assert!(check_identity("0.1.154", "0.26.0").is_err());
        assert!(check_identity("unknown", "0.26.0").is_err());
    }

    #[test]
    fn the_linked_library_is_the_build_its_lockfile_names() {
        BuildInfo::verified().unwrap();
    }
}
