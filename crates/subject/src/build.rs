//! Which llama.cpp this binary links, named as a llama.cpp user names it, and the start-up
//! check that the name is right. The facts come from this crate's build script (the lockfile,
//! the release table of the `builds` crate, the vendored sources) and from the library itself.

use anyhow::{bail, Result};

/// The build this binary was compiled against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildInfo {
    /// The name used in file names, commands, verdicts and snapshots: the llama.cpp tag
    /// (`b11429`), the short commit of an untagged revision, or a tree's name
    /// (`tree-<sources hash>` for a tree without git).
    pub name: String,
    /// The llama.cpp commit (40 hex digits), empty for a tree without git.
    pub commit: String,
    /// The `llama-cpp-sys-2` version whose build script compiled it.
    pub crate_version: String,
    /// `ggml_version()` of the linked library, where the release has that call (b6002 on).
    pub ggml_version: Option<String>,
    /// `builds::sources_sha256` of the compiled tree.
    pub sources_sha256: String,
    /// A maintainer's tree (built through `buildgen` from a path) rather than a release.
    pub tree: Option<String>,
}

/// What the build script recorded.
const CRATE_VERSION: &str = env!("SUBJECT_SYS_VERSION");
const KIND: &str = env!("SUBJECT_BUILD_KIND");
const COMMIT: &str = env!("SUBJECT_LLAMA_COMMIT");
const TAG: &str = env!("SUBJECT_LLAMA_TAG");
const TREE_PATH: &str = env!("SUBJECT_TREE_PATH");
const TREE_DIRTY: &str = env!("SUBJECT_TREE_DIRTY");
/// A tree's given name: set for a release built with the suite's fixes (`b11429+fixes`).
const TREE_NAME: &str = env!("SUBJECT_TREE_NAME");
const SOURCES_SHA256: &str = env!("SUBJECT_SOURCES_SHA256");
const GGML_DECLARED: &str = env!("SUBJECT_GGML_DECLARED");

/// The llama.cpp sources a defect's contract is quoted from: the header and the sampler
/// source this binary was compiled from, by their paths in the llama.cpp tree.
pub const SOURCES: report::Sources = report::Sources(&[
    (
        "include/llama.h",
        include_str!(concat!(env!("OUT_DIR"), "/llama.h")),
    ),
    (
        env!("SUBJECT_SAMPLER_PATH"),
        include_str!(concat!(env!("OUT_DIR"), "/samplers.cpp")),
    ),
]);

/// The ggml version the linked library reports, where it can.
fn linked_ggml() -> Option<String> {
    #[cfg(llama_fn = "ggml_version")]
    {
        // SAFETY: ggml_version returns a pointer to a static NUL-terminated string.
        let v = unsafe { std::ffi::CStr::from_ptr(ffi!(crate::compat::ggml_version())) };
        Some(v.to_string_lossy().into_owned())
    }
    #[cfg(not(llama_fn = "ggml_version"))]
    None
}

impl BuildInfo {
    pub fn current() -> BuildInfo {
        let tree = (KIND == "tree").then(|| TREE_PATH.to_string());
        let name = match (&tree, TAG, COMMIT) {
            (Some(_), _, _) if !TREE_NAME.is_empty() => TREE_NAME.to_string(),
            (None, "", c) if c.len() >= 7 => c[..7].to_string(),
            (None, t, _) => t.to_string(),
            // A tree's name always says it is a tree, so a branch sitting on a release tag
            // never takes that release's name (its results files or its matrix column).
            (Some(_), t, _) if !t.is_empty() => format!("tree-{t}"),
            (Some(_), _, c) if c.len() >= 7 => format!("tree-{}", &c[..7]),
            (Some(_), _, _) => format!("tree-{}", &SOURCES_SHA256[..12]),
        };
        let name = if TREE_DIRTY == "true" {
            format!("{name}-dirty")
        } else {
            name
        };
        BuildInfo {
            name,
            commit: COMMIT.to_string(),
            crate_version: CRATE_VERSION.to_string(),
            ggml_version: linked_ggml(),
            sources_sha256: SOURCES_SHA256.to_string(),
            tree,
        }
    }

    /// [`BuildInfo::current`], refused when the build is not what it says: a release whose
    /// compiled sources are not the ones the release table names, or a library whose ggml
    /// version is not the one its sources declare.
    pub fn verified() -> Result<BuildInfo> {
        let b = BuildInfo::current();
        check(&b, &builds::releases(), GGML_DECLARED)?;
        Ok(b)
    }

    /// The short name used in file names, commands and verdicts.
    pub fn tag(&self) -> &str {
        &self.name
    }

    /// The name with dots, dashes and pluses turned into underscores, for snapshot names.
    pub fn slug(&self) -> String {
        self.name.replace(['.', '-', '+'], "_")
    }

    /// Who a report is about: `finding`'s verdict `name` on this build.
    pub fn report_subject(&self, finding: &report::Finding, name: &str) -> report::ReportId {
        report::ReportId::new(
            finding,
            name,
            report::DEFAULT_ENGINE,
            self.tag(),
            self.describe(),
            SOURCES,
        )
    }

    /// One line a person can read, the llama.cpp name first:
    /// `llama.cpp b11429 (d812350) via llama-cpp-sys-2 0.1.161, ggml 0.26.0`.
    pub fn describe(&self) -> String {
        let commit = if self.commit.len() >= 7 {
            &self.commit[..7]
        } else {
            "no git"
        };
        let ggml = self
            .ggml_version
            .as_deref()
            .map_or(String::new(), |g| format!(", ggml {g}"));
        match &self.tree {
            None => format!(
                "llama.cpp {} ({commit}) via llama-cpp-sys-2 {}{ggml}",
                self.name, self.crate_version
            ),
            Some(path) => {
                // A tree whose sampler sources are a release's says so: a copy of a release,
                // or a branch that has not touched the samplers yet.
                let same = builds::releases()
                    .into_iter()
                    .rev()
                    .find(|r| r.sources_sha256 == self.sources_sha256)
                    .map_or(String::new(), |r| format!(", the same as {}'s", r.name()));
                format!(
                    "llama.cpp tree {} ({commit}; sampler sources {}{same}) at {path}, built by llama-cpp-sys-2 {}'s build script{ggml}",
                    self.name,
                    &self.sources_sha256[..12],
                    self.crate_version
                )
            }
        }
    }
}

/// The checks of [`BuildInfo::verified`], on stated facts so a test can plant a mismatch.
pub fn check(b: &BuildInfo, table: &[builds::Release], ggml_declared: &str) -> Result<()> {
    if b.tree.is_none() {
        let Some(r) = table.iter().find(|r| r.crate_version == b.crate_version) else {
            bail!(
                "this binary names llama-cpp-sys-2 '{}', which the release table does not list; rebuild it through make",
                b.crate_version
            );
        };
        if r.sources_sha256 != b.sources_sha256 {
            bail!(
                "this binary was compiled from sampler sources {} but the release table names {} for llama-cpp-sys-2 {} ({}); refusing to run",
                &b.sources_sha256[..16],
                &r.sources_sha256[..16],
                r.crate_version,
                r.name()
            );
        }
    }
    if let Some(linked) = &b.ggml_version {
        // ggml's CMake appends `-dirty` when git, run from the source folder, finds some
        // enclosing checkout with changes; the version itself is what must match.
        let base = linked.split_once('-').map_or(linked.as_str(), |(v, _)| v);
        if !ggml_declared.is_empty() && base != ggml_declared {
            bail!(
                "this binary's sources declare ggml {ggml_declared} but it links ggml {linked}; rebuild it through make"
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_build_whose_sources_or_library_differ_from_its_name_is_refused() {
        let table = builds::releases();
        let good = BuildInfo::current();
        check(&good, &table, GGML_DECLARED).unwrap();
        let mut other = good.clone();
        other.sources_sha256 = "0".repeat(64);
        let e = check(&other, &table, GGML_DECLARED)
            .unwrap_err()
            .to_string();
        assert!(e.contains("release table names"), "{e}");
        let mut unknown = good.clone();
        unknown.crate_version = "0.0.1".into();
        assert!(check(&unknown, &table, GGML_DECLARED).is_err());
        if let Some(v) = &good.ggml_version {
            let e = check(&good, &table, "9.9.9").unwrap_err().to_string();
            assert!(e.contains("links ggml"), "{e}");
            let mut dirty = good.clone();
            dirty.ggml_version = Some(format!("{v}-dirty"));
            check(&dirty, &table, GGML_DECLARED).unwrap();
            dirty.ggml_version = Some(format!("{v}1-dirty"));
            assert!(check(&dirty, &table, GGML_DECLARED).is_err());
        }
    }

    #[test]
    fn this_build_passes_its_own_checks_and_describes_itself_by_llama_cpp_name() {
        // verified() is the check: the compiled sources are the table's for this crate release.
        let b = BuildInfo::verified().unwrap();
        assert!(
            b.describe().starts_with(&format!("llama.cpp {} (", b.name)),
            "{}",
            b.describe()
        );
        assert!(b.describe().contains(&b.crate_version), "{}", b.describe());
    }
}
