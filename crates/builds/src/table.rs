//! The release table (`releases.tsv` beside this crate's manifest): every `llama-cpp-sys-2`
//! release on crates.io from 0.1.86, the llama.cpp commit and tag it vendors, how that was
//! established, and the hash of its sampler sources (see [`crate::sources_sha256`]).

/// The table, compiled in so a binary names its build without reading files at run time.
pub const RELEASES_TSV: &str = include_str!("../releases.tsv");

/// One crate release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Release {
    /// `llama-cpp-sys-2` version, e.g. `0.1.154`.
    pub crate_version: String,
    /// Publication date, `YYYY-MM-DD`.
    pub date: String,
    /// The llama.cpp commit vendored (40 hex digits).
    pub commit: String,
    /// The llama.cpp release tag number (`b10200` is 10200), when one is known.
    pub tag: Option<u32>,
    /// The sampler implementation file of that tree.
    pub sampler_file: String,
    /// [`crate::sources_sha256`] of the vendored tree.
    pub sources_sha256: String,
    /// How the commit, tag and date were established (the table's sources).
    pub how_known: String,
}

/// One distinct llama.cpp revision and the crate releases that vendor it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revision {
    pub commit: String,
    pub tag: Option<u32>,
    /// Crate versions vendoring it, oldest first.
    pub crates: Vec<String>,
}

impl Release {
    /// The name a llama.cpp user knows: the tag (`b10200`), else the short commit.
    pub fn name(&self) -> String {
        revision_name(self.tag, &self.commit)
    }
}

impl Revision {
    pub fn name(&self) -> String {
        revision_name(self.tag, &self.commit)
    }

    /// The crate release a build of this revision uses: the newest that vendors it.
    pub fn crate_version(&self) -> &str {
        self.crates.last().expect("a revision has a release")
    }
}

fn revision_name(tag: Option<u32>, commit: &str) -> String {
    match tag {
        Some(n) => format!("b{n}"),
        None => commit[..7].to_string(),
    }
}

/// Parses the table; a malformed line is an error naming it.
pub fn parse_table(text: &str) -> Result<Vec<Release>, String> {
    let mut out = Vec::new();
    let mut lines = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty());
    let header = lines.next().ok_or("the release table is empty")?;
    let want = "crate_version\tcrate_release_date\tllama_cpp_commit\tllama_cpp_tag\tsampler_file\tsources_sha256\thow_known";
    if header != want {
        return Err(format!("the release table's header is not `{want}`"));
    }
    for line in lines {
        let f: Vec<&str> = line.split('\t').collect();
        let bad = || format!("release table line `{line}`");
        let [crate_version, date, commit, tag, sampler_file, sha, how] = f[..] else {
            return Err(bad());
        };
        let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
        if !hex(commit, 40) || !hex(sha, 64) {
            return Err(bad());
        }
        let tag = match tag {
            "unknown" => None,
            t => Some(
                t.strip_prefix('b')
                    .and_then(|n| n.parse().ok())
                    .ok_or_else(bad)?,
            ),
        };
        out.push(Release {
            crate_version: crate_version.into(),
            date: date.into(),
            commit: commit.into(),
            tag,
            sampler_file: sampler_file.into(),
            sources_sha256: sha.into(),
            how_known: how.into(),
        });
    }
    Ok(out)
}

/// The compiled-in table. It is checked by this crate's tests, so a bad edit fails there.
pub fn releases() -> Vec<Release> {
    parse_table(RELEASES_TSV).expect("releases.tsv is checked by the builds tests")
}

/// The distinct revisions in llama.cpp order: by tag number, an untagged revision right after
/// the highest tag any earlier crate release vendors (crate order breaks ties). Crate order
/// alone is not llama.cpp order: 0.1.140 vendors b8233, older than 0.1.139's b8310.
pub fn revisions(releases: &[Release]) -> Vec<Revision> {
    let mut revs: Vec<(u32, u8, usize, Revision)> = Vec::new();
    let mut highest = 0;
    for (i, r) in releases.iter().enumerate() {
        if let Some(rev) = revs.iter_mut().find(|x| x.3.commit == r.commit) {
            rev.3.crates.push(r.crate_version.clone());
            continue;
        }
        let key = match r.tag {
            Some(t) => (t, 0),
            None => (highest, 1),
        };
        highest = highest.max(r.tag.unwrap_or(0));
        let rev = Revision {
            commit: r.commit.clone(),
            tag: r.tag,
            crates: vec![r.crate_version.clone()],
        };
        revs.push((key.0, key.1, i, rev));
    }
    revs.sort_by_key(|x| (x.0, x.1, x.2));
    revs.into_iter().map(|x| x.3).collect()
}

/// Finds the release a build name means: a crate version (`0.1.154`), a tag (`b10200`) or a
/// commit prefix of at least 7 digits, the latter two meaning the newest release vendoring
/// that revision. An unknown name is an error that lists the known ones.
pub fn resolve<'a>(releases: &'a [Release], name: &str) -> Result<&'a Release, String> {
    let by_crate = releases.iter().find(|r| r.crate_version == name);
    let by_revision = || {
        let revs = revisions(releases);
        let rev = revs.iter().find(|v| {
            v.name() == name || (name.len() >= 7 && v.commit.starts_with(&name.to_lowercase()))
        })?;
        releases
            .iter()
            .find(|r| r.crate_version == rev.crate_version())
    };
    by_crate.or_else(by_revision).ok_or_else(|| {
        let names: Vec<String> = revisions(releases).iter().map(Revision::name).collect();
        format!(
            "unknown build '{name}'; known builds: {} (or a llama-cpp-sys-2 version from {} to {}, or a path to a llama.cpp tree)",
            names.join(" "),
            releases.first().map_or("", |r| &r.crate_version),
            releases.last().map_or("", |r| &r.crate_version),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_table_parses_and_names_24_revisions_from_b4240_to_b11429() {
        let rels = releases();
        let revs = revisions(&rels);
        let names: Vec<String> = revs.iter().map(Revision::name).collect();
        assert_eq!(names.len(), 24, "{names:?}");
        assert_eq!(names.first().map(String::as_str), Some("b4240"));
        assert_eq!(names.last().map(String::as_str), Some("b11429"));
        // Untagged revisions sit after the last tag released before them, in crate order.
        let i = |n: &str| names.iter().position(|x| x == n).unwrap();
        assert!(i("b6482") < i("d739511") && i("d739511") < i("4c91f26"));
        assert!(i("4c91f26") < i("b7709"));
        // The downgrade of 0.1.140 does not reorder llama.cpp history.
        assert!(i("b8148") < i("b8233") && i("b8233") < i("b8310"));
        let tags: Vec<u32> = revs.iter().filter_map(|r| r.tag).collect();
        assert!(tags.windows(2).all(|w| w[0] < w[1]), "{tags:?}");
    }

    #[test]
    fn a_build_is_named_by_tag_crate_version_or_commit_and_unknown_names_are_listed() {
        let rels = releases();
        assert_eq!(resolve(&rels, "b10200").unwrap().crate_version, "0.1.154");
        assert_eq!(resolve(&rels, "0.1.154").unwrap().name(), "b10200");
        // A tag means the newest release vendoring it.
        assert_eq!(resolve(&rels, "b11429").unwrap().crate_version, "0.1.161");
        assert_eq!(resolve(&rels, "0.1.160").unwrap().name(), "b11429");
        assert_eq!(resolve(&rels, "d739511").unwrap().crate_version, "0.1.125");
        let e = resolve(&rels, "b99999").unwrap_err();
        assert!(
            e.starts_with("unknown build 'b99999'; known builds: b4240 "),
            "{e}"
        );
        assert!(!e.contains('\n'));
        assert!(
            resolve(&rels, "0.1.148").is_err(),
            "0.1.148 was never published"
        );
        assert!(
            resolve(&rels, "d73").is_err(),
            "a short prefix is not a commit"
        );
    }

    #[test]
    fn malformed_lines_are_refused() {
        let head = "crate_version\tcrate_release_date\tllama_cpp_commit\tllama_cpp_tag\tsampler_file\tsources_sha256\thow_known\n";
        let ok = format!(
            "{head}0.1.1\t2025-01-01\t{}\tb1\tsrc/x.cpp\t{}\tnote\n",
            "a".repeat(40),
            "b".repeat(64)
        );
        assert_eq!(parse_table(&ok).unwrap()[0].tag, Some(1));
        for bad in [
            ok.replace("\tb1\t", "\t1\t"),
            ok.replace(&"a".repeat(40), "abc"),
            ok.replace(&"b".repeat(64), &"z".repeat(64)),
            ok.replace("\tnote", ""),
            ok.replace("crate_version", "crate"),
        ] {
            assert!(parse_table(&bad).is_err(), "{bad}");
        }
    }
}
