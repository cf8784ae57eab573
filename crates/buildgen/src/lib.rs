//! One mechanism for every build of the suite: a build name becomes a cargo workspace that
//! compiles the shared sources against that llama.cpp.
//!
//! - A crate release (`b10200`, `0.1.154`): the root workspace when it is the release the root
//!   lockfile pins, else a generated workspace under `target/builds/<crate version>/` whose
//!   one package has every binary and integration test of the root members that link
//!   llama.cpp, pinned to that release.
//! - A llama.cpp source tree (a path): a generated workspace whose `llama-cpp-sys-2` is the
//!   newest release's build script pointed at the tree (`[patch.crates-io]`), under
//!   `target/builds/tree-<hash of the path>/`.
//! - A release with the suite's fixes (`b11429+fixes`): the release's vendored llama.cpp,
//!   copied and patched with every `upstream/llama.cpp/*/fix.patch` (in folder order), built
//!   as a tree under `target/builds/<tag>+fixes/` and named `<tag>+fixes`. The copy is made
//!   again whenever a patch changes; a patch that does not apply stops the build in one line.
//!
//! Before a workspace is handed out, its vendored sources are checked against the release
//! table ([`builds::sources_sha256`]); a mismatch is refused in one line, before anything is
//! built or written. The generated manifest is derived from `cargo metadata` of the root, so
//! a new repro or test needs no edit here. Generated workspaces are git-ignored and cached:
//! an unchanged manifest keeps its lockfile and its target folder.

use anyhow::{bail, Context, Result};
use builds::Release;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The sys crate every build links.
pub const SYS: &str = "llama-cpp-sys-2";

/// What a build name refers to.
#[derive(Debug, Clone)]
pub enum Build {
    Release(Release),
    /// A llama.cpp source tree (canonical path).
    Tree(PathBuf),
    /// A release with the patches of [`FIXES`] applied.
    Fixed(Release),
}

/// Where the patches of a `<release>+fixes` build live, relative to the root workspace: one
/// folder per defect, each with a `fix.patch` for `patch -p1` from llama.cpp's source root.
pub const FIXES: &str = "upstream/llama.cpp";

/// The suffix that names a release with the suite's fixes applied.
pub const FIXED_SUFFIX: &str = "+fixes";

impl Build {
    /// The build's name as the suite writes it (a tree is named by its path here; its
    /// binaries name it from its identity).
    pub fn name(&self) -> String {
        match self {
            Build::Release(r) => r.name(),
            Build::Tree(t) => t.display().to_string(),
            Build::Fixed(r) => format!("{}{FIXED_SUFFIX}", r.name()),
        }
    }
}

/// A workspace ready to build: its manifest folder and where its release binaries land.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    pub dir: PathBuf,
    pub bin_dir: PathBuf,
}

/// Reads a build name: a path to a llama.cpp tree (anything with a `/`, or an existing folder),
/// else a release name ([`builds::resolve`]). An unknown name or a folder that is not a
/// llama.cpp tree is an error of one line.
pub fn parse_build(name: &str) -> Result<Build> {
    let path = Path::new(name);
    if name.contains('/') || path.is_dir() {
        let tree = path
            .canonicalize()
            .with_context(|| format!("build path {name}"))?;
        if !tree.join("include/llama.h").is_file() || builds::sampler_file(&tree).is_none() {
            bail!("{name} is not a llama.cpp source tree (it needs include/llama.h and src/llama-sampler.cpp or src/llama-sampling.cpp)");
        }
        return Ok(Build::Tree(tree));
    }
    let releases = builds::releases();
    if let Some(base) = name.strip_suffix(FIXED_SUFFIX) {
        let r = builds::resolve(&releases, base).map_err(anyhow::Error::msg)?;
        return Ok(Build::Fixed(r.clone()));
    }
    let r = builds::resolve(&releases, name).map_err(anyhow::Error::msg)?;
    Ok(Build::Release(r.clone()))
}

/// The `fix.patch` files of [`FIXES`] under `root`, in folder order.
pub fn fix_patches(root: &Path) -> Result<Vec<PathBuf>> {
    let dir = root.join(FIXES);
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let p = entry?.path().join("fix.patch");
        if p.is_file() {
            out.push(p);
        }
    }
    out.sort();
    if out.is_empty() {
        bail!("no fix.patch under {}", dir.display());
    }
    Ok(out)
}

/// The release's vendored llama.cpp copied to `dir/llama.cpp` with every fix applied, made
/// again only when the release or a patch changed (a stamp of both is kept beside it).
fn patched_tree(root: &Path, dir: &Path, r: &Release) -> Result<PathBuf> {
    let patches = fix_patches(root)?;
    let mut stamp = format!("release\t{}\t{}\n", r.name(), r.sources_sha256);
    for p in &patches {
        let text = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
        let rel = p.strip_prefix(root).unwrap_or(p).display().to_string();
        stamp += &format!("patch\t{rel}\t{}\n", short_hash_bytes(&text));
    }
    let tree = dir.join("llama.cpp");
    let stamp_file = dir.join("fixes.stamp");
    if tree.is_dir() && std::fs::read_to_string(&stamp_file).is_ok_and(|s| s == stamp) {
        return Ok(tree);
    }
    let src = release_source(root, r)?.join("llama.cpp");
    check_release(r, &src.join(".."))?;
    if tree.exists() {
        std::fs::remove_dir_all(&tree).with_context(|| format!("removing {}", tree.display()))?;
    }
    let _ = std::fs::remove_file(&stamp_file);
    copy_dir(&src, &tree)?;
    for p in &patches {
        let out = Command::new("patch")
            .args(["-p1", "--batch", "--forward", "--silent", "-d"])
            .arg(&tree)
            .arg("-i")
            .arg(p)
            .output()
            .context("starting patch (Debian package patch)")?;
        if !out.status.success() {
            let why = String::from_utf8_lossy(&out.stdout);
            bail!(
                "{} does not apply to {}'s llama.cpp: {}",
                p.strip_prefix(root).unwrap_or(p).display(),
                r.name(),
                why.lines().next().unwrap_or("no output")
            );
        }
    }
    std::fs::write(&stamp_file, stamp)?;
    Ok(tree)
}

fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

fn run(cmd: &mut Command, what: &str) -> Result<String> {
    let out = cmd.output().with_context(|| format!("starting {what}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let line = err
            .lines()
            .find(|l| l.starts_with("error"))
            .or_else(|| err.lines().next())
            .unwrap_or("no output");
        bail!("{what} failed: {line}");
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Prepares the workspace of `build` under the root workspace `root` and checks its sources.
pub fn prepare(root: &Path, build: &Build) -> Result<Workspace> {
    let lock = std::fs::read_to_string(root.join("Cargo.lock")).context("reading Cargo.lock")?;
    let root_version = builds::locked(&lock, SYS)
        .map(|(v, _)| v)
        .context("the root lockfile pins no llama-cpp-sys-2")?;
    let (dir, version) = match build {
        Build::Release(r) if r.crate_version == root_version => {
            let ws = Workspace {
                dir: root.to_path_buf(),
                bin_dir: root.join("target/release"),
            };
            check_release(r, &release_source(root, r)?)?;
            return Ok(ws);
        }
        Build::Release(r) => (
            root.join("target/builds").join(&r.crate_version),
            r.crate_version.clone(),
        ),
        Build::Tree(t) => (
            root.join("target/builds")
                .join(format!("tree-{}", short_hash(&t.to_string_lossy()))),
            root_version.clone(),
        ),
        Build::Fixed(_) => (
            root.join("target/builds").join(build.name()),
            root_version.clone(),
        ),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let tree = matches!(build, Build::Tree(_) | Build::Fixed(_));
    let write = |manifest: &str| -> Result<()> {
        let manifest_path = dir.join("Cargo.toml");
        // The root lockfile the generated one was made from is kept beside it, so a change
        // of either the manifest or the root's versions makes a fresh one.
        let seed = dir.join("Cargo.lock.root");
        if std::fs::read_to_string(&manifest_path).is_ok_and(|old| old == manifest)
            && std::fs::read_to_string(&seed).is_ok_and(|old| old == lock)
            && dir.join("Cargo.lock").is_file()
        {
            return Ok(());
        }
        std::fs::write(&manifest_path, manifest)?;
        // The root lockfile's versions, with only the sys crate moved: every other dependency
        // stays what the root build was tested with.
        std::fs::write(dir.join("Cargo.lock"), &lock)?;
        let mut update = cargo();
        update
            .arg("update")
            .arg("--manifest-path")
            .arg(&manifest_path)
            .arg("-p");
        if tree {
            update.arg(SYS);
        } else {
            update
                .arg(format!("{SYS}@{root_version}"))
                .arg("--precise")
                .arg(&version);
        }
        run(&mut update, "cargo update of the generated workspace")?;
        std::fs::write(&seed, &lock).map_err(Into::into)
    };
    let mut features = Vec::new();
    match build {
        Build::Release(r) => {
            // The sources come first: they are checked before anything is built, and the
            // release's build script decides the features it needs.
            let home = builds::cargo_home().context("no CARGO_HOME or HOME")?;
            if builds::registry_source(&home, SYS, &r.crate_version).is_none() {
                write(&generate_manifest(root, &version, false, &[])?)?;
            }
            let src = release_source(&dir, r)?;
            check_release(r, &src)?;
            features = sys_features(&src)?;
        }
        Build::Tree(t) => link_tree(root, &dir, &root_version, t, None)?,
        Build::Fixed(r) => {
            let patched = patched_tree(root, &dir, r)?;
            link_tree(
                root,
                &dir,
                &root_version,
                &patched,
                Some((&build.name(), r)),
            )?;
        }
    }
    write(&generate_manifest(root, &version, tree, &features)?)?;
    Ok(Workspace {
        bin_dir: dir.join("target/release"),
        dir,
    })
}

/// The sys crate's features a build turns on. Without its `openmp` feature, a release whose
/// build script never switches OpenMP off leaves llama.cpp's CMake default (on) yet links no
/// OpenMP runtime, so its binaries do not link (b4240's does that); such a release gets the
/// feature. Every later release switches OpenMP off explicitly and is built without it, as the
/// root build is.
pub fn sys_features(crate_dir: &Path) -> Result<Vec<String>> {
    let script = std::fs::read_to_string(crate_dir.join("build.rs"))
        .with_context(|| format!("reading {}", crate_dir.join("build.rs").display()))?;
    let flat: String = script.chars().filter(|c| !c.is_whitespace()).collect();
    let switches_off = flat.contains(r#"else{config.define("GGML_OPENMP","OFF");"#);
    Ok(if switches_off {
        Vec::new()
    } else {
        vec!["openmp".to_string()]
    })
}

/// Where cargo keeps a release's sources, fetching them first when they are missing.
fn release_source(ws: &Path, r: &Release) -> Result<PathBuf> {
    let home = builds::cargo_home().context("no CARGO_HOME or HOME")?;
    if let Some(p) = builds::registry_source(&home, SYS, &r.crate_version) {
        return Ok(p);
    }
    run(
        cargo()
            .arg("fetch")
            .arg("--manifest-path")
            .arg(ws.join("Cargo.toml")),
        "cargo fetch",
    )?;
    builds::registry_source(&home, SYS, &r.crate_version).with_context(|| {
        format!(
            "{SYS} {} is not in cargo's registry after cargo fetch",
            r.crate_version
        )
    })
}

/// Refuses a release whose vendored llama.cpp is not the one the table names.
pub fn check_release(r: &Release, crate_dir: &Path) -> Result<()> {
    let got = builds::sources_sha256(&crate_dir.join("llama.cpp")).map_err(anyhow::Error::msg)?;
    if got != r.sources_sha256 {
        bail!(
            "{SYS} {}'s vendored llama.cpp ({}) has sampler sources sha256 {}, not {} as the release table names for {}; refusing this build",
            r.crate_version,
            crate_dir.join("llama.cpp").display(),
            &got[..16],
            &r.sources_sha256[..16],
            r.name()
        );
    }
    Ok(())
}

fn short_hash(text: &str) -> String {
    short_hash_bytes(text.as_bytes())
}

fn short_hash_bytes(bytes: &[u8]) -> String {
    // FNV-1a: a stable folder name or change stamp, not a security property.
    let mut h: u64 = 0xcbf29ce484222325;
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x100000001b3);
    }
    format!("{h:016x}")[..12].to_string()
}

/// A tree build's sys crate: the root release's build script and wrapper, with `llama.cpp`
/// a link to the tree, and the tree's identity written beside it for `subject`'s build script.
/// `fixed` names a patched release's copy: its name and the release it was copied from.
fn link_tree(
    root: &Path,
    dir: &Path,
    root_version: &str,
    tree: &Path,
    fixed: Option<(&str, &Release)>,
) -> Result<()> {
    let home = builds::cargo_home().context("no CARGO_HOME or HOME")?;
    let src = builds::registry_source(&home, SYS, root_version)
        .map(Ok)
        .unwrap_or_else(|| {
            run(
                cargo()
                    .arg("fetch")
                    .arg("--manifest-path")
                    .arg(root.join("Cargo.toml")),
                "cargo fetch",
            )?;
            builds::registry_source(&home, SYS, root_version)
                .context("the root release is not in cargo's registry")
        })?;
    let dst = dir.join(SYS);
    std::fs::create_dir_all(&dst)?;
    for entry in std::fs::read_dir(&src)? {
        let entry = entry?;
        let name = entry.file_name();
        if name == "llama.cpp" || name == ".cargo-ok" || name == ".cargo_vcs_info.json" {
            continue;
        }
        let to = dst.join(&name);
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &to)?;
        } else {
            std::fs::copy(entry.path(), &to)?;
        }
    }
    let link = dst.join("llama.cpp");
    if std::fs::read_link(&link).ok().as_deref() != Some(tree) {
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(tree, &link).context("linking the tree")?;
    }
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(tree)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .filter(|s| !s.is_empty())
    };
    // Only a tree that is itself a git checkout has a commit; a folder inside some other
    // repository (or a copy out of a crate) is named by its sources' hash instead.
    let own = git(&["rev-parse", "--show-toplevel"]).is_some_and(|top| Path::new(&top) == tree);
    let commit = if own {
        git(&["rev-parse", "HEAD"])
    } else {
        None
    };
    let tag = if own {
        git(&["describe", "--tags", "--exact-match"])
    } else {
        None
    };
    // Any change the sys crate compiles counts, not only the sampler files.
    let dirty = own && git(&["status", "--porcelain", "--untracked-files=no"]).is_some();
    // A patched release carries the release's commit, and its own name.
    let (commit, name) = match fixed {
        Some((name, r)) => (Some(r.commit.clone()), name.to_string()),
        None => (commit, String::new()),
    };
    let text = format!(
        "path\t{}\ncommit\t{}\ntag\t{}\ndirty\t{}\nname\t{}\n",
        tree.display(),
        commit.unwrap_or_default(),
        tag.unwrap_or_default(),
        dirty,
        name
    );
    std::fs::write(dir.join("tree.tsv"), text)?;
    Ok(())
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let dst = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &dst)?;
        } else {
            std::fs::copy(entry.path(), &dst)?;
        }
    }
    Ok(())
}

/// One dependency line's parts, merged across the members that declare it.
#[derive(Default)]
struct Dep {
    req: Option<String>,
    path: Option<String>,
    features: std::collections::BTreeSet<String>,
    default_features: bool,
}

/// The generated manifest: one package with every binary and integration test of the root
/// members that link llama.cpp (through non-optional dependencies), each dependency those
/// members declare, and the sys crate pinned to `version`.
pub fn generate_manifest(
    root: &Path,
    version: &str,
    tree: bool,
    sys_features: &[String],
) -> Result<String> {
    let meta = run(
        cargo()
            .args([
                "metadata",
                "--format-version",
                "1",
                "--no-deps",
                "--locked",
                "--offline",
                "--manifest-path",
            ])
            .arg(root.join("Cargo.toml")),
        "cargo metadata",
    )?;
    let meta: Value = serde_json::from_str(&meta).context("parsing cargo metadata")?;
    manifest_from_metadata(&meta, version, tree, sys_features)
}

/// [`generate_manifest`] on metadata already read (tests feed their own).
pub fn manifest_from_metadata(
    meta: &Value,
    version: &str,
    tree: bool,
    sys_features: &[String],
) -> Result<String> {
    let packages = meta["packages"]
        .as_array()
        .context("metadata has no packages")?;
    let name_of = |p: &Value| p["name"].as_str().unwrap_or_default().to_string();
    let members: BTreeMap<String, &Value> = packages.iter().map(|p| (name_of(p), p)).collect();
    let normal = |d: &&Value| d["kind"].is_null() && !d["optional"].as_bool().unwrap_or(false);
    // Members that reach the sys crate through normal, non-optional dependencies.
    let mut linked: std::collections::BTreeSet<String> = Default::default();
    loop {
        let before = linked.len();
        for (name, p) in &members {
            let deps = p["dependencies"].as_array().into_iter().flatten();
            if deps.filter(normal).any(|d| {
                let n = d["name"].as_str().unwrap_or_default();
                n == SYS || linked.contains(n)
            }) {
                linked.insert(name.clone());
            }
        }
        if linked.len() == before {
            break;
        }
    }
    let mut deps: [BTreeMap<String, Dep>; 2] = Default::default();
    let mut features = std::collections::BTreeSet::new();
    let mut bins = Vec::new();
    let mut tests: Vec<(String, String, String)> = Vec::new();
    for name in &linked {
        let p = members[name];
        let dir = Path::new(p["manifest_path"].as_str().unwrap_or_default())
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        deps[0].insert(
            name.clone(),
            Dep {
                path: Some(dir.display().to_string()),
                ..Dep::default()
            },
        );
        for f in p["features"].as_object().into_iter().flatten().map(|f| f.0) {
            if f != "default" {
                features.insert(f.clone());
            }
        }
        for d in p["dependencies"].as_array().into_iter().flatten() {
            let dep_name = d["rename"]
                .as_str()
                .or(d["name"].as_str())
                .unwrap_or_default();
            if dep_name == SYS || d["optional"].as_bool().unwrap_or(false) {
                continue;
            }
            let slot = match d["kind"].as_str() {
                None => 0,
                Some("dev") => 1,
                Some(_) => continue,
            };
            let e = deps[slot].entry(dep_name.to_string()).or_default();
            // Members are linked without their default features (candle stays out); a
            // registry crate gets its defaults when any member asks for them.
            if let Some(path) = d["path"].as_str() {
                e.path = Some(path.to_string());
            } else {
                e.req = e
                    .req
                    .take()
                    .or_else(|| d["req"].as_str().map(str::to_string));
                e.default_features |= d["uses_default_features"].as_bool().unwrap_or(true);
            }
            e.features.extend(
                d["features"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|f| f.as_str().map(str::to_string)),
            );
        }
        for t in p["targets"].as_array().into_iter().flatten() {
            let kinds: Vec<&str> = t["kind"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let tname = t["name"].as_str().unwrap_or_default().to_string();
            let src = t["src_path"].as_str().unwrap_or_default().to_string();
            if kinds.contains(&"bin") {
                bins.push((tname, src));
            } else if kinds.contains(&"test") {
                tests.push((tname, name.clone(), src));
            }
        }
    }
    // A dev-dependency already a normal one needs no second line.
    let normal_names: Vec<String> = deps[0].keys().cloned().collect();
    deps[1].retain(|k, _| !normal_names.contains(k));
    let mut out = String::new();
    let sys_source = if tree {
        "the llama.cpp tree linked below"
    } else {
        "that release"
    };
    writeln!(
        out,
        "# Generated by buildgen from the root workspace's members (cargo metadata); do not edit."
    )?;
    writeln!(out, "# The suite's binaries and integration tests, built against {SYS} {version} ({sys_source}).")?;
    writeln!(out, "[workspace]\nresolver = \"2\"\n")?;
    writeln!(out, "[package]\nname = \"audit-build\"\nversion = \"0.1.0\"\nedition = \"2021\"\npublish = false")?;
    writeln!(out, "autobins = false\nautotests = false\nautobenches = false\nautoexamples = false\nbuild = false\n")?;
    writeln!(out, "# Every member feature, declared so shared sources' cfg(feature) checks are known; none is on.")?;
    writeln!(out, "[features]")?;
    for f in &features {
        writeln!(out, "{f} = []")?;
    }
    let features: Vec<String> = sys_features.iter().map(|f| format!("{f:?}")).collect();
    let features = if features.is_empty() {
        String::new()
    } else {
        format!(", features = [{}]", features.join(", "))
    };
    writeln!(out, "\n[dependencies]\n{SYS} = {{ version = \"={version}\", default-features = false{features} }}")?;
    for (slot, title) in [(0, ""), (1, "\n[dev-dependencies]\n")] {
        if deps[slot].is_empty() {
            continue;
        }
        out.push_str(title);
        for (name, d) in &deps[slot] {
            let mut parts = Vec::new();
            if let Some(p) = &d.path {
                parts.push(format!("path = {:?}", p));
            } else if let Some(r) = &d.req {
                parts.push(format!("version = {r:?}"));
            }
            if !d.default_features {
                parts.push("default-features = false".into());
            }
            if !d.features.is_empty() {
                let f: Vec<String> = d.features.iter().map(|f| format!("{f:?}")).collect();
                parts.push(format!("features = [{}]", f.join(", ")));
            }
            writeln!(out, "{name} = {{ {} }}", parts.join(", "))?;
        }
    }
    // A main.rs holds no tests (the root members say the same), so no harness is built for it.
    for (name, src) in &bins {
        writeln!(
            out,
            "\n[[bin]]\nname = {name:?}\npath = {src:?}\ntest = false"
        )?;
    }
    // Test names stay the root's (insta names snapshots after the test crate); a name two
    // members share gets its member's name in front.
    for (name, member, src) in &tests {
        let shared = tests.iter().filter(|t| &t.0 == name).count() > 1;
        let unique = if shared {
            format!("{member}-{name}")
        } else {
            name.clone()
        };
        writeln!(out, "\n[[test]]\nname = {unique:?}\npath = {src:?}")?;
    }
    writeln!(out, "\n[profile.release]\ndebug = false")?;
    if tree {
        writeln!(out, "\n[patch.crates-io]\n{SYS} = {{ path = {SYS:?} }}")?;
    }
    Ok(out)
}

/// `i/N` with 1 <= i <= N.
pub fn parse_shard(text: &str) -> Result<(usize, usize)> {
    let (i, n) = text
        .split_once('/')
        .and_then(|(i, n)| Some((i.parse().ok()?, n.parse().ok()?)))
        .with_context(|| format!("--shard '{text}' is not i/N"))?;
    if n == 0 || i == 0 || i > n {
        bail!("--shard '{text}' needs 1 <= i <= N");
    }
    Ok((i, n))
}

/// The revision names in llama.cpp order, the `(i, N)` shard of them when given.
pub fn names(shard: Option<(usize, usize)>) -> Vec<String> {
    let revs = builds::revisions(&builds::releases());
    revs.iter()
        .enumerate()
        .filter(|(p, _)| shard.is_none_or(|(i, n)| (p + 1) % n == i % n))
        .map(|(_, r)| r.name())
        .collect()
}

/// The comment lines that open the release table: where its columns come from.
const TABLE_PREAMBLE: &str = "\
# Every llama-cpp-sys-2 release on crates.io from 0.1.86, the llama.cpp it vendors, and how that
# is known. Columns 1-4 and how_known: the crate's git tags (the llama.cpp submodule gitlink of
# each tag, or the commit the crate was published from per its .cargo_vcs_info.json), the bump
# PRs of utilityai/llama-cpp-rs, and llama.cpp build strings (`version: 4524 (6171c9d2)`) in
# Homebrew formulae and ggml-org/ci logs; dates are the tag commit's or docs.rs'. Two revisions
# carry no tag record (`unknown`). sampler_file and sources_sha256 are computed from the
# crates.io tarball of each release by `buildgen table` (builds::sources_sha256). Regenerate
# with: buildgen table <upstream mapping> <folder of unpacked crates>.
";

/// The release table from the upstream mapping (crate, date, commit, tag, how known) and the
/// unpacked crates (`<crates>/llama-cpp-sys-2-<version>/`).
pub fn table(upstream: &Path, crates: &Path) -> Result<String> {
    let text = std::fs::read_to_string(upstream)
        .with_context(|| format!("reading {}", upstream.display()))?;
    let mut out = String::new();
    for (i, line) in text.lines().enumerate() {
        let f: Vec<&str> = line.split('\t').collect();
        let [v, date, commit, tag, how] = f[..] else {
            bail!("{}:{}: not 5 columns", upstream.display(), i + 1);
        };
        if i == 0 {
            out.push_str(TABLE_PREAMBLE);
            writeln!(out, "crate_version\tcrate_release_date\tllama_cpp_commit\tllama_cpp_tag\tsampler_file\tsources_sha256\thow_known")?;
            continue;
        }
        let tree = crates.join(format!("{SYS}-{v}")).join("llama.cpp");
        let sampler = builds::sampler_file(&tree)
            .with_context(|| format!("{} has no sampler file", tree.display()))?;
        let sha = builds::sources_sha256(&tree).map_err(anyhow::Error::msg)?;
        writeln!(out, "{v}\t{date}\t{commit}\t{tag}\t{sampler}\t{sha}\t{how}")?;
    }
    builds::parse_table(&out).map_err(anyhow::Error::msg)?;
    Ok(out)
}

/// Where a built workspace's llama.cpp headers and static libraries are: the sys crate's
/// `include/` and `lib/` under its build script's out dir, as cargo reports it (the sys crate
/// is built first if it is not yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Native {
    pub include: PathBuf,
    pub lib: PathBuf,
}

pub fn native(ws: &Workspace) -> Result<Native> {
    let out = run(
        cargo()
            .args([
                "build",
                "--release",
                "--locked",
                "--quiet",
                "--message-format=json",
                "-p",
                SYS,
            ])
            .arg("--manifest-path")
            .arg(ws.dir.join("Cargo.toml")),
        "cargo build of the sys crate",
    )?;
    for line in out.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let ours = v["package_id"].as_str().is_some_and(|p| p.contains(SYS));
        if v["reason"] == "build-script-executed" && ours {
            let dir = PathBuf::from(v["out_dir"].as_str().context("no out_dir")?);
            let native = Native {
                include: dir.join("include"),
                lib: dir.join("lib"),
            };
            ensure_file(&native.include.join("llama.h"))?;
            ensure_file(&native.lib.join("libllama.a"))?;
            return Ok(native);
        }
    }
    bail!(
        "cargo reported no build script run for {SYS} in {}",
        ws.dir.display()
    )
}

fn ensure_file(p: &Path) -> Result<()> {
    if !p.is_file() {
        bail!("{} is missing after the build", p.display());
    }
    Ok(())
}
