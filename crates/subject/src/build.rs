//! Which llama.cpp this binary links, stated as precisely as the build allows.

use std::ffi::CStr;

/// The pinned crate release (read from the lockfile at build time) and the ggml version the
/// linked library reports about itself at run time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildInfo {
    /// `llama-cpp-sys-2` version, e.g. `0.1.161`.
    pub crate_version: String,
    /// `ggml_version()` of the linked library, e.g. `0.26.0`.
    pub ggml_version: String,
}

impl BuildInfo {
    pub fn current() -> BuildInfo {
        // SAFETY: ggml_version returns a pointer to a static NUL-terminated string.
        let ggml = unsafe { CStr::from_ptr(llama_cpp_sys_2::ggml_version()) };
        BuildInfo {
            crate_version: env!("SUBJECT_SYS_VERSION").to_string(),
            ggml_version: ggml.to_string_lossy().into_owned(),
        }
    }

    /// The short name used in file names, commands and verdicts: the crate version.
    pub fn tag(&self) -> &str {
        &self.crate_version
    }

    /// The crate version with dots turned into underscores, for snapshot names.
    pub fn slug(&self) -> String {
        self.crate_version.replace('.', "_")
    }

    /// One line a person can read: `llama-cpp-sys-2 0.1.161 (ggml 0.26.0)`.
    pub fn describe(&self) -> String {
        format!(
            "llama-cpp-sys-2 {} (ggml {})",
            self.crate_version, self.ggml_version
        )
    }
}
