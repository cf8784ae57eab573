//! What the suite hands an upstream maintainer, one folder per defect under
//! `upstream/<engine>/<short-name>/`: `repro.c` (a standalone reproducer: `llama.h` and the C
//! library only), `fix.patch` (the smallest change to the release's sources), `defect.json`
//! (its title and the verdict rows it reproduces) and `ISSUE.md`, generated here from the
//! results so that it cannot say something the runs did not.
//!
//! - [`check`] compiles every reproducer against a build, runs it, and holds its exit status
//!   against the build's verdicts in `results/`: 1 where a row it reproduces is `present`, 0
//!   where every one is `absent` (a row `not offered` there is not checked).
//! - [`diff`] compares two results folders (the stock build's and the patched build's):
//!   every verdict must be the same, except the rows the patches target.
//! - [`issue`] writes a folder's `ISSUE.md` from `defect.json`, the verdict catalog, the
//!   results, the release matrix and the recorded runs.

use anyhow::{bail, ensure, Context, Result};
use buildgen::Native;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The folder the reproducers live in, relative to the root workspace.
pub const UPSTREAM: &str = "upstream";

/// What `defect.json` says.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Meta {
    /// The issue's one-line title.
    pub title: String,
    pub finding: String,
    /// The verdict rows (or single-verdict reports) this defect is, by name.
    pub rows: Vec<String>,
    /// A model the reproducer needs (`smollm2` or `gemma3`), passed as its first argument.
    #[serde(default)]
    pub model: Option<String>,
    /// A cost, not a verdict (no rows): its report rests on `make bench`'s measurements.
    #[serde(default)]
    pub bench: bool,
    /// What upstream already knows: related issues, pull requests and forks, by number, each
    /// in one sentence.
    pub upstream: Vec<String>,
    /// Which standard chains and tools reach it, each claim backed by a line of the newest
    /// release's vendored sources (or naming the source it rests on when that is not
    /// vendored).
    pub reach: Vec<Claim>,
    /// What the API's own words say of its status (experimental), with the line they stand on.
    #[serde(default)]
    pub status: Vec<Claim>,
    /// Defect rows of the same code that the patch does not fix, each with why: the draft
    /// shows them with both builds' verdicts, and they are not targeted by the patched build's
    /// diff (they stay as they are).
    #[serde(default)]
    pub unpatched: Vec<RowWhy>,
    /// Rows of another kind (robustness) that the patch also turns absent, each with why: the
    /// patched build's diff counts them as targeted, and the draft names them.
    #[serde(default)]
    pub also_changes: Vec<RowWhy>,
}

/// A row and why a folder names it (a defect its patch leaves, or another row it changes).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RowWhy {
    pub row: String,
    pub why: String,
}

/// A sentence about llama.cpp and, where the crate vendors the file, the line it rests on:
/// `quote` is looked for in `file` of the newest release's sources (inside the C function
/// whose definition line contains `within`, when given), and the ISSUE.md names the line
/// found. A quote no longer in the sources stops the ISSUE.md from being written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Claim {
    pub says: String,
    #[serde(default)]
    pub file: Option<String>,
    #[serde(default)]
    pub within: Option<String>,
    #[serde(default)]
    pub quote: Option<String>,
}

/// One defect's folder.
#[derive(Debug, Clone)]
pub struct Defect {
    pub engine: String,
    pub short: String,
    pub dir: PathBuf,
    pub meta: Meta,
}

impl Defect {
    pub fn repro(&self) -> PathBuf {
        self.dir.join("repro.c")
    }

    pub fn patch(&self) -> PathBuf {
        self.dir.join("fix.patch")
    }
}

/// Every `upstream/<engine>/<short>/defect.json` under `root`, in path order.
pub fn defects(root: &Path) -> Result<Vec<Defect>> {
    let mut out = Vec::new();
    let top = root.join(UPSTREAM);
    for engine in sorted_dirs(&top)? {
        for dir in sorted_dirs(&engine)? {
            let path = dir.join("defect.json");
            if !path.is_file() {
                continue;
            }
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            let meta: Meta = serde_json::from_str(&text)
                .with_context(|| format!("parsing {}", path.display()))?;
            ensure!(
                meta.rows.is_empty() == meta.bench,
                "{}: names verdict rows, or is a cost (bench: true), not both or neither",
                path.display()
            );
            ensure!(
                !meta.upstream.is_empty() && !meta.reach.is_empty(),
                "{}: says what upstream knows (upstream) and who is reached (reach)",
                path.display()
            );
            out.push(Defect {
                engine: name_of(&engine),
                short: name_of(&dir),
                dir,
                meta,
            });
        }
    }
    Ok(out)
}

fn name_of(p: &Path) -> String {
    p.file_name()
        .map_or(String::new(), |n| n.to_string_lossy().into_owned())
}

fn sorted_dirs(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    out.sort();
    Ok(out)
}

/// One verdict row as a results file gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// The report's file, relative to the results folder.
    pub file: String,
    pub name: String,
    pub verdict: String,
    pub evidence: String,
    /// The report's controls: (kind, name, passed).
    pub controls: Vec<(String, String, bool)>,
    /// A defect's contract as the report quotes it: `file:line: "words"`.
    pub contract: Option<String>,
}

/// Every verdict of `<stem>.<build>.json` in `results`: each row, or the report's own verdict
/// when it has none. Keyed by verdict name, and for a report whose stem names a model after
/// its finding (`ingraph-gemma3`) by `<name>@<model>`, so that the same row on two models
/// stays two rows (a defect's rows name the default model's).
pub fn verdicts(results: &Path, build: &str) -> Result<BTreeMap<String, Found>> {
    let mut out = BTreeMap::new();
    let suffix = format!(".{build}.json");
    let mut files: Vec<PathBuf> = std::fs::read_dir(results)
        .with_context(|| format!("reading {}", results.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with(&suffix))
        })
        .collect();
    files.sort();
    for path in files {
        let text = std::fs::read_to_string(&path)?;
        let v: Value =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        let file = name_of(&path);
        let stem = file.strip_suffix(&suffix).unwrap_or(&file).to_string();
        let model = (models::KNOWN.iter())
            .find(|k| stem.ends_with(&format!("-{}", k.name)))
            .map(|k| k.name);
        let controls: Vec<(String, String, bool)> =
            (v["controls"].as_array().into_iter().flatten())
                .map(|c| {
                    (
                        c["kind"].as_str().unwrap_or_default().to_string(),
                        c["name"].as_str().unwrap_or_default().to_string(),
                        c["passed"].as_bool().unwrap_or(false),
                    )
                })
                .collect();
        let rows: Vec<&Value> = match v.get("verdict_rows").and_then(Value::as_array) {
            Some(rows) => rows.iter().collect(),
            None => vec![&v],
        };
        for r in rows {
            let name = r["name"].as_str().unwrap_or_default().to_string();
            let key = match model {
                Some(m) => format!("{name}@{m}"),
                None => name.clone(),
            };
            anyhow::ensure!(
                !out.contains_key(&key),
                "{}: verdict {key} is also in another report",
                path.display()
            );
            let contract = r.get("contract").map(|c| {
                format!(
                    "{}:{}: \"{}\"",
                    c["file"].as_str().unwrap_or_default(),
                    c["line"],
                    c["quote"].as_str().unwrap_or_default()
                )
            });
            out.insert(
                key,
                Found {
                    file: file.clone(),
                    name,
                    verdict: r["verdict"].as_str().unwrap_or_default().to_string(),
                    evidence: r["evidence"].as_str().unwrap_or_default().to_string(),
                    controls: controls.clone(),
                    contract,
                },
            );
        }
    }
    Ok(out)
}

/// The llama.cpp defect rows `present` on [`NEWEST`] that no `defect.json` under `root` files
/// (a row on another model counts as filed when its name is a folder's row): each live defect
/// must have its folder (reproducer, patch, draft).
pub fn unfiled(root: &Path, results: &Path) -> Result<Vec<String>> {
    let filed: Vec<String> = (defects(root)?.into_iter())
        .filter(|d| d.engine == "llama.cpp")
        .flat_map(|d| {
            let left = d.meta.unpatched.into_iter().map(|u| u.row);
            d.meta.rows.into_iter().chain(left)
        })
        .collect();
    let mut out = Vec::new();
    for (key, f) in verdicts(results, NEWEST)? {
        let is_defect = report::kind::basis("llama.cpp", &f.name)
            .is_some_and(|b| b.kind == report::Kind::Defect);
        if f.verdict == "present" && is_defect && !filed.contains(&f.name) {
            out.push(format!("{key} ({})", f.file));
        }
    }
    Ok(out)
}

/// What a reproducer must do on a build, from the build's verdicts for its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Some row is present: exit 1.
    Present,
    /// Every row is absent: exit 0.
    Absent,
    /// No row is decided here (not offered, inconclusive, undecided, or no report): not checked.
    Unchecked,
}

impl Expect {
    pub fn exit(self) -> Option<i32> {
        match self {
            Expect::Present => Some(1),
            Expect::Absent => Some(0),
            Expect::Unchecked => None,
        }
    }
}

/// What the reproducer must do, from its rows' verdicts; an error when a row is in no report
/// of the build (a renamed or dropped row would otherwise leave the reproducer unchecked).
pub fn expect(found: &BTreeMap<String, Found>, rows: &[String]) -> Result<Expect> {
    let states = rows
        .iter()
        .map(|r| {
            found
                .get(r)
                .map(|f| f.verdict.as_str())
                .with_context(|| format!("row {r} is in no report of this build"))
        })
        .collect::<Result<Vec<&str>>>()?;
    Ok(expect_states(&states))
}

fn expect_states(states: &[&str]) -> Expect {
    if states.contains(&"present") {
        Expect::Present
    } else if !states.is_empty() && states.iter().all(|s| *s == "absent") {
        Expect::Absent
    } else {
        Expect::Unchecked
    }
}

/// The link line every reproducer is built with, after `-I<include> -L<lib>`: llama.cpp's
/// static libraries as the crate builds them, and the C++ runtime they need.
pub const LINK: [&str; 7] = [
    "-lllama",
    "-lggml",
    "-lggml-cpu",
    "-lggml-base",
    "-lstdc++",
    "-lm",
    "-lpthread",
];

/// Added to the link line for releases whose CPU backend the crate built with OpenMP (the
/// older ones): their static libraries call into libgomp.
pub const OPENMP: &str = "-fopenmp";

/// The compile line as ISSUE.md and the recorded runs show it (placeholders for the two
/// folders, which differ between machines), with OpenMP where the build needs it.
pub fn compile_line_for(openmp: bool) -> String {
    let omp = if openmp {
        format!(" {OPENMP}")
    } else {
        String::new()
    };
    format!(
        "cc -std=c11 repro.c -I<include> -L<lib> {}{omp} -o repro",
        LINK.join(" ")
    )
}

/// The compile line of a build without OpenMP, as ISSUE.md shows it.
pub fn compile_line() -> String {
    compile_line_for(false)
}

/// One reproducer's run on one build.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// The run line as shown (the model named by its path under the root, not absolute).
    pub run_line: String,
    /// Whether it was linked with OpenMP ([`OPENMP`]).
    pub openmp: bool,
    /// None when it did not compile (with the compiler's first error line in `stdout`).
    pub exit: Option<i32>,
    pub stdout: String,
}

impl Run {
    /// The record written to `results/upstream/<short>.<build>.txt`.
    pub fn record(&self, build: &str) -> String {
        let mut out = format!("build {build}\n$ {}\n", compile_line_for(self.openmp));
        match self.exit {
            None => out += &format!("does not compile: {}\n", self.stdout.trim_end()),
            Some(code) => {
                out += &format!("$ {}\n{}", self.run_line, self.stdout);
                if !self.stdout.is_empty() && !self.stdout.ends_with('\n') {
                    out.push('\n');
                }
                out += &format!("exit {code}\n");
            }
        }
        out
    }
}

/// Compiles `d`'s reproducer against `native` in `work` and runs it from `root` (so a model is
/// named by its path under the root).
pub fn run(root: &Path, d: &Defect, native: &Native, work: &Path) -> Result<Run> {
    std::fs::create_dir_all(work).with_context(|| format!("creating {}", work.display()))?;
    let bin = work.join(format!("{}-repro", d.short));
    let compile = |openmp: bool| {
        Command::new("cc")
            .args(["-std=c11", "-O1"])
            .arg(d.repro())
            .arg(format!("-I{}", native.include.display()))
            .arg(format!("-L{}", native.lib.display()))
            .args(LINK)
            .args(openmp.then_some(OPENMP))
            .arg("-o")
            .arg(&bin)
            .output()
            .context("starting cc")
    };
    // Older releases' CPU backend was built with OpenMP: their libraries link only with it.
    let mut openmp = false;
    let mut out = compile(false)?;
    if !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("GOMP_") {
        openmp = true;
        out = compile(true)?;
    }
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let line = err
            .lines()
            .find(|l| l.contains("error"))
            .unwrap_or("no output");
        return Ok(Run {
            run_line: String::new(),
            openmp,
            exit: None,
            stdout: line.to_string(),
        });
    }
    let mut cmd = Command::new(&bin);
    let mut run_line = "./repro".to_string();
    if let Some(m) = &d.meta.model {
        let rel = format!("models-cache/{m}.gguf");
        ensure!(
            root.join(&rel).is_file(),
            "{rel} is missing; run `make models`"
        );
        cmd.arg(&rel);
        run_line += &format!(" {rel}");
    }
    let out = cmd
        .current_dir(root)
        .output()
        .with_context(|| format!("running {}", bin.display()))?;
    let exit = out.status.code().unwrap_or(128);
    Ok(Run {
        run_line,
        openmp,
        exit: Some(exit),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
    })
}

/// One line of [`check`]'s summary.
#[derive(Debug, Clone)]
pub struct Checked {
    pub defect: String,
    pub build: String,
    pub expect: Expect,
    pub run: Run,
}

impl Checked {
    pub fn agrees(&self) -> bool {
        match self.expect.exit() {
            None => true,
            Some(code) => self.run.exit == Some(code),
        }
    }

    pub fn line(&self) -> String {
        let got = self
            .run
            .exit
            .map_or("does not compile".to_string(), |c| format!("exit {c}"));
        let want = match self.expect {
            Expect::Present => "exit 1 (a row it reproduces is present)",
            Expect::Absent => "exit 0 (every row it reproduces is absent)",
            Expect::Unchecked => "not checked (no row decided on this build)",
        };
        let mark = if self.agrees() { "ok" } else { "MISMATCH" };
        format!(
            "{mark:<8} {} on {}: {got}; the verdicts say {want}",
            self.defect, self.build
        )
    }
}

/// Every llama.cpp reproducer compiled against `build` and run: each defect with its run.
pub fn runs(root: &Path, build: &str) -> Result<Vec<(Defect, Run)>> {
    let b = buildgen::parse_build(build)?;
    let ws = buildgen::prepare(root, &b).with_context(|| format!("build {build}"))?;
    let native = buildgen::native(&ws)?;
    let work = root.join("target/upstream").join(build);
    let mut out = Vec::new();
    for d in defects(root)?
        .into_iter()
        .filter(|d| d.engine == "llama.cpp")
    {
        if !d.repro().is_file() {
            // Only a defect measured by a benchmark (a cost, no verdict of its own) has none.
            ensure!(d.meta.bench, "{} has no repro.c", d.dir.display());
            continue;
        }
        let run = run(root, &d, &native, &work)?;
        out.push((d, run));
    }
    Ok(out)
}

/// Every llama.cpp reproducer against `build`, held against the verdicts of `results`.
pub fn check(root: &Path, build: &str, results: &Path) -> Result<Vec<Checked>> {
    let found = verdicts(results, build)?;
    let mut out = Vec::new();
    for (d, run) in runs(root, build)? {
        out.push(Checked {
            defect: d.short.clone(),
            build: build.to_string(),
            expect: expect(&found, &d.meta.rows).with_context(|| d.short.clone())?,
            run,
        });
    }
    Ok(out)
}

/// What a recorded run (`Run::record`) says of its defect: `Some(true)` for exit 1 (present),
/// `Some(false)` for exit 0 (absent), `None` when it did not compile (the release lacks the
/// API it calls) or ended otherwise.
pub fn recorded_outcome(record: &str) -> Option<bool> {
    match record.lines().last()? {
        "exit 1" => Some(true),
        "exit 0" => Some(false),
        _ => None,
    }
}

/// One difference between two results folders' verdicts.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub name: String,
    pub stock: String,
    pub patched: String,
    /// Whether some patch targets this row.
    pub targeted: bool,
}

/// The verdicts of `stock_build` in `stock` against those of `patched_build` in `patched`.
/// Returns every row whose verdict differs, and every row only one side has.
pub fn diff(
    root: &Path,
    stock: &Path,
    stock_build: &str,
    patched: &Path,
    patched_build: &str,
) -> Result<Vec<Change>> {
    let a = verdicts(stock, stock_build)?;
    let b = verdicts(patched, patched_build)?;
    ensure!(
        !a.is_empty(),
        "no reports of {stock_build} in {}",
        stock.display()
    );
    ensure!(
        !b.is_empty(),
        "no reports of {patched_build} in {}",
        patched.display()
    );
    let targeted = targeted_rows(root)?;
    let names: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let mut out = Vec::new();
    for name in names {
        let va = a.get(name).map_or("missing", |f| f.verdict.as_str());
        let vb = b.get(name).map_or("missing", |f| f.verdict.as_str());
        if va != vb {
            out.push(Change {
                name: name.clone(),
                stock: va.to_string(),
                patched: vb.to_string(),
                targeted: is_targeted(&targeted, name),
            });
        }
    }
    Ok(out)
}

/// A draft's section of rows named with why, each with its verdict on both builds.
fn write_rows_why(
    s: &mut String,
    title: &str,
    rows: &[RowWhy],
    stock: &BTreeMap<String, Found>,
    fixed: &BTreeMap<String, Found>,
) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    write!(s, "\n## {title}\n\n")?;
    let on = |map: &BTreeMap<String, Found>, row: &str| {
        map.get(row)
            .map_or("not run".to_string(), |f| format!("**{}**", f.verdict))
    };
    for u in rows {
        writeln!(
            s,
            "- `{}`: {} on {NEWEST}, {} on {}. {}",
            u.row,
            on(stock, &u.row),
            on(fixed, &u.row),
            patched(),
            u.why
        )?;
    }
    Ok(())
}

/// The rows the patches target: each patched folder's defect rows and the rows of another
/// kind it names as also changed.
pub fn targeted_rows(root: &Path) -> Result<Vec<String>> {
    Ok((defects(root)?.into_iter())
        .filter(|d| d.patch().is_file())
        .flat_map(|d| {
            let also = d.meta.also_changes.into_iter().map(|u| u.row);
            d.meta.rows.into_iter().chain(also)
        })
        .collect())
}

/// What a targeted row may read on the stock build when the patched build reads it absent:
/// present, or undecided (on Gemma3 the oracle's f32 margin leaves some of the same defects
/// undecided; once patched, the engine agrees outright).
pub const FIXED_FROM: [&str; 2] = ["present", "undecided"];

/// Whether `name` is a targeted row: a defect's row itself, the same row on another model
/// (`<row>@<model>`), or a rerun of it with one of our fixes (`<row>+<fix>`).
pub fn is_targeted(targeted: &[String], name: &str) -> bool {
    let base = name.split(['@', '+']).next().unwrap_or(name);
    targeted.iter().any(|t| t == name || t == base)
}

/// Whether a patched run is what the fixes claim: every change is a targeted row turning
/// from present to absent, and no targeted row present on the stock build stays so (a
/// targeted row that is present on both is no change, so `unfixed` lists those).
pub fn diff_holds(changes: &[Change], unfixed: &[String]) -> bool {
    unfixed.is_empty()
        && changes
            .iter()
            .all(|c| c.targeted && FIXED_FROM.contains(&c.stock.as_str()) && c.patched == "absent")
}

/// The targeted rows present on the stock build that the patched build does not read absent.
pub fn unfixed(
    root: &Path,
    stock: &Path,
    stock_build: &str,
    patched: &Path,
    patched_build: &str,
) -> Result<Vec<String>> {
    let (a, b) = (
        verdicts(stock, stock_build)?,
        verdicts(patched, patched_build)?,
    );
    let targeted = targeted_rows(root)?;
    Ok(targeted
        .into_iter()
        .filter(|t| a.get(t).is_some_and(|f| f.verdict == "present"))
        .filter(|t| b.get(t).is_none_or(|f| f.verdict != "absent"))
        .collect())
}

/// Reports (`<stem>` of `<stem>.<build>.json`) whose whole content differs between the two
/// folders once the build's own name and description are set aside, with whether each holds
/// a row some patch targets; and the stems only one side has.
pub fn report_diff(
    root: &Path,
    stock: &Path,
    stock_build: &str,
    patched: &Path,
    patched_build: &str,
) -> Result<Vec<(String, &'static str)>> {
    let targeted = targeted_rows(root)?;
    let stems = |dir: &Path, build: &str| -> Result<BTreeMap<String, Value>> {
        let suffix = format!(".{build}.json");
        let mut out = BTreeMap::new();
        for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
            let p = e?.path();
            let n = name_of(&p);
            if let Some(stem) = n.strip_suffix(&suffix) {
                let text = std::fs::read_to_string(&p)?.replace(build, "<build>");
                let mut v: Value = serde_json::from_str(&text)?;
                if let Some(o) = v.as_object_mut() {
                    o.remove("build_detail");
                }
                drop_contract_lines(&mut v);
                out.insert(stem.to_string(), v);
            }
        }
        Ok(out)
    };
    let (a, b) = (stems(stock, stock_build)?, stems(patched, patched_build)?);
    let mut out = Vec::new();
    for (stem, va) in &a {
        match b.get(stem) {
            None => out.push((stem.clone(), "only in the stock results")),
            Some(vb) if vb == va => {}
            Some(vb) => {
                let names = |v: &Value| -> Vec<String> {
                    let mut n = vec![v["name"].as_str().unwrap_or_default().to_string()];
                    for r in v["verdict_rows"].as_array().into_iter().flatten() {
                        n.push(r["name"].as_str().unwrap_or_default().to_string());
                    }
                    n
                };
                let holds = names(va)
                    .iter()
                    .chain(&names(vb))
                    .any(|n| is_targeted(&targeted, n));
                out.push((
                    stem.clone(),
                    if holds {
                        "differs (holds a targeted row)"
                    } else {
                        "differs (holds NO targeted row)"
                    },
                ));
            }
        }
    }
    for stem in b.keys().filter(|s| !a.contains_key(*s)) {
        out.push((stem.clone(), "only in the patched results"));
    }
    Ok(out)
}

/// A contract's line number set aside wherever one is quoted: a patch that adds lines moves
/// the statements below it, and the words quoted, which stay compared, are what a contract is.
fn drop_contract_lines(v: &mut Value) {
    match v {
        Value::Object(o) => {
            for (k, x) in o.iter_mut() {
                match (k.as_str(), x.as_object_mut()) {
                    ("contract", Some(c)) => {
                        c.remove("line");
                    }
                    _ => drop_contract_lines(x),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(drop_contract_lines),
        _ => {}
    }
}

/// Whether every report that differs holds a row some patch targets.
pub fn reports_hold(reports: &[(String, &'static str)]) -> bool {
    reports
        .iter()
        .all(|(_, why)| *why == "differs (holds a targeted row)")
}

/// The text of a diff: the verdicts that changed, then the reports whose content did.
pub fn diff_text(
    stock_build: &str,
    patched_build: &str,
    changes: &[Change],
    unfixed: &[String],
    reports: &[(String, &'static str)],
) -> String {
    let mut out = format!("verdicts of {patched_build} against {stock_build}:\n");
    if changes.is_empty() {
        out += "  every verdict is the same\n";
    }
    for c in changes {
        let why = if c.targeted {
            "targeted by a patch"
        } else {
            "NOT targeted by any patch"
        };
        out += &format!("  {}: {} -> {} ({why})\n", c.name, c.stock, c.patched);
    }
    for u in unfixed {
        out += &format!(
            "  {u}: targeted by a patch, present on {stock_build}, NOT absent on {patched_build}\n"
        );
    }
    out += if diff_holds(changes, unfixed) {
        "the patches change exactly the rows they target, each from present (or undecided) to absent\n"
    } else {
        "the patches do not change exactly the rows they target\n"
    };
    out += &format!(
        "reports whose content differs (the build's name and description and contracts' line numbers set aside): {}\n",
        reports.len()
    );
    for (stem, why) in reports {
        out += &format!("  {stem}: {why}\n");
    }
    out
}

/// The newest llama.cpp release the suite audits, the build every ISSUE.md speaks of.
pub const NEWEST: &str = "b11429";

/// The patched build of [`NEWEST`].
pub fn patched() -> String {
    format!("{NEWEST}{}", buildgen::FIXED_SUFFIX)
}

/// Where the patched build's audit writes its results, under the results folder.
pub const FIXES_RESULTS: &str = "fixes";

/// A recorded run (`results/upstream/<short>.<build>.txt`), if there is one.
fn recorded(results: &Path, short: &str, build: &str) -> Option<String> {
    std::fs::read_to_string(
        results
            .join("upstream")
            .join(format!("{short}.{build}.txt")),
    )
    .ok()
}

/// The affected range of a row from the release matrix (`results/matrix/ranges.json`).
fn range(results: &Path, row: &str) -> Option<String> {
    let text = std::fs::read_to_string(results.join("matrix/ranges.json")).ok()?;
    let v: Value = serde_json::from_str(&text).ok()?;
    (v["rows"].as_array()?.iter())
        .find(|r| r["row"] == row)
        .and_then(|r| r["summary"].as_str().map(str::to_string))
}

/// `ISSUE.md` for `d`, from the results folder `results` (the stock audit, with the patched
/// build's under [`FIXES_RESULTS`]).
pub fn issue(d: &Defect, results: &Path) -> Result<String> {
    if d.meta.bench {
        return cost_issue(d, results);
    }
    let m = &d.meta;
    let stock = verdicts(results, NEWEST)?;
    let fixed_dir = results.join(FIXES_RESULTS);
    let fixed = verdicts(&fixed_dir, &patched()).unwrap_or_default();
    let mut s = format!("# {}\n\n", m.title);
    writeln!(
        s,
        "Found and checked by sampler-audit ({}) on llama.cpp {NEWEST}, the newest release on crates.io; the releases it affects are the ones below, each run.\n",
        m.finding
    )?;

    s += "## Affected releases\n\nFrom the suite's release matrix (`results/matrix/ranges.txt`), by llama.cpp tag:\n\n";
    for row in &m.rows {
        let r = range(results, row).unwrap_or_else(|| "not in the release matrix".to_string());
        writeln!(s, "- `{row}`: {r}")?;
    }

    s += "\n## What it breaks\n\n";
    for row in &m.rows {
        let basis = report::kind::basis(&d.engine, row)
            .with_context(|| format!("row {row} has no kind"))?;
        ensure!(
            basis.kind == report::Kind::Defect,
            "{}: row {row} is a {}, not a defect; only a defect is filed as a bug",
            d.short,
            basis.kind
        );
        let contract = (stock.get(row).and_then(|f| f.contract.clone()))
            .with_context(|| format!("{}: row {row} quotes no contract on {NEWEST}", d.short))?;
        writeln!(
            s,
            "- `{row}` ({}): {}. On {NEWEST}: `{contract}`",
            basis.kind, basis.rests_on
        )?;
    }
    write_claims(&mut s, d)?;

    s += "\n## Reproduce\n\nStandalone: `repro.c` includes `llama.h` and the C library only. Against the headers and static libraries of a llama.cpp build (the crate `llama-cpp-sys-2` builds them; `<include>` and `<lib>` are its `include/` and `lib/`):\n\n";
    writeln!(s, "```\n{}\n```\n", compile_line())?;
    match recorded(results, &d.short, NEWEST) {
        Some(rec) => writeln!(
            s,
            "On {NEWEST} (`results/upstream/{}.{NEWEST}.txt`):\n\n```\n{}```\n",
            d.short, rec
        )?,
        None => bail!("{}: no recorded run on {NEWEST}; run `make audit`", d.short),
    }
    s += "The reproducer prints what it expected and what it got, and exits 1 while the defect is present, 0 once it is fixed.\n";

    s += "\n## Evidence from the suite\n\n";
    for row in &m.rows {
        let f = stock
            .get(row)
            .with_context(|| format!("{}: row {row} is in no report of {NEWEST}", d.short))?;
        writeln!(
            s,
            "- `{row}` on {NEWEST}: **{}** (`results/{}`): {}",
            f.verdict, f.file, f.evidence
        )?;
    }

    s += "\n## Fix\n\n";
    let patch = std::fs::read_to_string(d.patch())
        .with_context(|| format!("reading {}", d.patch().display()))?;
    writeln!(
        s,
        "`fix.patch`, for `patch -p1` from llama.cpp's source root:\n\n```diff\n{patch}```\n"
    )?;

    s += "## How the fix was verified\n\n";
    writeln!(s, "The suite builds {NEWEST}'s vendored sources with every patch under `upstream/llama.cpp/` applied (`{}`) and runs its whole audit on it.\n", patched())?;
    match recorded(results, &d.short, &patched()) {
        Some(rec) => writeln!(
            s,
            "The reproducer on {} (`results/upstream/{}.{}.txt`):\n\n```\n{}```\n",
            patched(),
            d.short,
            patched(),
            rec
        )?,
        None => writeln!(
            s,
            "The reproducer has not been run on {} yet (`make audit-fixes`).\n",
            patched()
        )?,
    }
    for row in &m.rows {
        match fixed.get(row) {
            Some(f) => {
                let all = f.controls.iter().all(|c| c.2);
                writeln!(
                    s,
                    "- `{row}` on {}: **{}**, {} of {} controls passing (`results/{FIXES_RESULTS}/{}`)",
                    patched(),
                    f.verdict,
                    f.controls.iter().filter(|c| c.2).count(),
                    f.controls.len(),
                    f.file
                )?;
                ensure!(
                    all || f.verdict != "absent",
                    "{row}: absent under a failed control"
                );
            }
            None => writeln!(s, "- `{row}` on {}: not run yet", patched())?,
        }
    }
    write_rows_why(
        &mut s,
        "Not fixed by this patch",
        &m.unpatched,
        &stock,
        &fixed,
    )?;
    write_rows_why(
        &mut s,
        "Also changed by this patch",
        &m.also_changes,
        &stock,
        &fixed,
    )?;
    match std::fs::read_to_string(fixed_dir.join("diff.txt")) {
        Ok(t) => writeln!(s, "\nEvery verdict of the patched build against the stock one (`results/{FIXES_RESULTS}/diff.txt`):\n\n```\n{t}```")?,
        Err(_) => s += "\nThe patched build's verdicts have not been compared with the stock ones yet.\n",
    }

    s += "\n## Controls: the detector fires where it must\n\nThe suite's verdict stands only if planted implementations, written in the suite and run through the same detector, are caught (positive) and passed (negative). For the report(s) above:\n\n";
    let mut seen = std::collections::BTreeSet::new();
    for row in &m.rows {
        let Some(f) = stock.get(row) else { continue };
        if !seen.insert(f.file.clone()) {
            continue;
        }
        for (kind, name, passed) in f.controls.iter().filter(|c| c.0 != "oracle-check") {
            writeln!(
                s,
                "- `{}` {kind}: {name} ({})",
                f.file,
                if *passed { "passed" } else { "FAILED" }
            )?;
        }
    }
    Ok(s)
}

/// The newest release's vendored llama.cpp tree in cargo's registry, where a claim's line is
/// looked up.
fn newest_tree() -> Result<PathBuf> {
    let release = (builds::releases().into_iter())
        .rev()
        .find(|r| r.name() == NEWEST)
        .with_context(|| format!("{NEWEST} is not in the release table"))?;
    let home = builds::cargo_home().context("no CARGO_HOME or HOME")?;
    let dir = builds::registry_source(&home, "llama-cpp-sys-2", &release.crate_version)
        .with_context(|| {
            format!(
                "llama-cpp-sys-2 {} is not unpacked in cargo's registry; build {NEWEST} first",
                release.crate_version
            )
        })?;
    Ok(dir.join("llama.cpp"))
}

/// A claim in Markdown: its sentence, then the line of the newest release it rests on.
fn claim_text(c: &Claim, tree: &Path) -> Result<String> {
    let Some(file) = &c.file else {
        return Ok(c.says.clone());
    };
    let quote = c
        .quote
        .as_deref()
        .with_context(|| format!("claim on {file} without a quote: {}", c.says))?;
    let path = tree.join(file);
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let found = report::contract::locate_in(file, &text, c.within.as_deref(), quote)
        .with_context(|| format!("{file} of {NEWEST} no longer says \"{quote}\""))?;
    Ok(format!(
        "{} (`{}:{}`: `{}`)",
        c.says, found.file, found.line, found.quote
    ))
}

/// The sections every ISSUE.md has after what it breaks: the API's status, who is reached and
/// what upstream already knows.
fn write_claims(s: &mut String, d: &Defect) -> Result<()> {
    let tree = newest_tree()?;
    let m = &d.meta;
    if !m.status.is_empty() {
        *s += "\n## Status of the API\n\n";
        for c in &m.status {
            writeln!(s, "- {}", claim_text(c, &tree)?)?;
        }
    }
    writeln!(s, "\n## Reach\n\nWho runs into it, read from {NEWEST}'s sources (file and line of the tree llama-cpp-sys-2 vendors):\n")?;
    for c in &m.reach {
        writeln!(s, "- {}", claim_text(c, &tree)?)?;
    }
    *s += "\n## Upstream\n\nWhat upstream already knows (public records read 2026-12; re-check before filing):\n\n";
    for u in &m.upstream {
        writeln!(s, "- {u}")?;
    }
    s.push('\n');
    Ok(())
}

/// A JSON file of the results folder.
fn json(path: &Path) -> Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// `x [lo, hi]` with `digits` decimals.
fn ci(v: &Value, digits: usize) -> String {
    let f = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    format!(
        "{:.digits$} [{:.digits$}, {:.digits$}]",
        f("median"),
        f("lo"),
        f("hi")
    )
}

/// ISSUE.md for a cost (F5), from `make bench`'s files: where the patched stage's bits may
/// differ (`penalty-bitcheck.json`), the stock and the patched stage timed turn by turn
/// (`penalty-versus.json`) and both builds' end-to-end overhead from one interleaved run
/// (`penalty-overhead-versus.json`). What the bench has not written yet is said to be missing.
fn cost_issue(d: &Defect, results: &Path) -> Result<String> {
    let m = &d.meta;
    let optional = |name: &str| -> Result<Option<Value>> {
        let p = results.join("bench").join(name);
        if p.exists() {
            json(&p).map(Some)
        } else {
            Ok(None)
        }
    };
    let bitcheck = optional("penalty-bitcheck.json")?;
    let versus = optional("penalty-versus.json")?;
    let overhead = optional("penalty-overhead-versus.json")?;
    let mut s = format!("# {}\n\n", m.title);
    writeln!(s, "Measured by sampler-audit ({}) on llama.cpp {NEWEST}. This is a cost, not a broken contract: the issue is how long the stage takes, not what it computes.\n", m.finding)?;
    s += &cost_bits_sentence(bitcheck.as_ref());
    write_claims(&mut s, d)?;
    s += "\n## What it costs\n\n";
    cost_tables(&mut s, versus.as_ref(), overhead.as_ref())?;
    s += "## Fix\n\n";
    let patch = std::fs::read_to_string(d.patch())
        .with_context(|| format!("reading {}", d.patch().display()))?;
    writeln!(s, "`fix.patch`, for `patch -p1` from llama.cpp's source root. Beside its map of counts the stage keeps a bitmap of the ids in its window, one bit per id in [0, n_vocab) (`llama_sampler_init_penalties` already receives n_vocab), and a count of the window's ids outside that range; accept, reset, clone and copy_state keep both in step with the map (a copy sets the bits by the destination's own n_vocab). apply takes one of two paths. When every id of the window sits at its own index (`data[id].id == id`, as `llama_sampler_logit_bias_apply` already assumes), it adjusts those entries by index. Otherwise it makes the stock pass over every candidate, but tests the candidate's bit first and looks the map up only on a hit (or, while the window holds ids outside [0, n_vocab), for ids outside it). The bitmap takes n_vocab / 8 bytes per sampler.\n\n```diff\n{patch}```\n")?;
    s += "## How the fix was verified\n\n";
    cost_verified(&mut s, results, bitcheck.as_ref(), versus.as_ref())?;
    Ok(s)
}

/// The first sentence about the patch's results: where its bits may differ from stock's.
fn cost_bits_sentence(bitcheck: Option<&Value>) -> String {
    let Some(b) = bitcheck else {
        return "Not checked yet: `make bench` compares the bits the stock and the patched stage leave (`results/bench/penalty-bitcheck.json`).\n".to_string();
    };
    let n = |k: &str, f: &str| b[k][f].as_u64().unwrap_or(0);
    let (repeat, repeat_same) = (
        n("own_index_repeat", "arrays"),
        n("own_index_repeat", "identical"),
    );
    format!(
        "With `fix.patch` the stage leaves every bit as the stock stage does except on arrays that hold a windowed id at its own index and again at another index: there the patch adjusts only the entry at the id's own index, as `logit_bias`'s shortcut does (`bitcheck.c`, `results/bench/penalty-bitcheck.json`: {repeat} such arrays, {} of them differ; the other {} arrays are identical bit for bit).\n",
        repeat - repeat_same,
        n("exact", "identical"),
    )
}

/// `x [lo, hi]` of a bench interval with `digits` decimals and a sign.
fn cost_signed(v: &Value, digits: usize) -> String {
    let f = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    format!(
        "{:+.digits$} [{:+.digits$}, {:+.digits$}]",
        f("median"),
        f("lo"),
        f("hi")
    )
}

/// The cost tables of [`cost_issue`]; each measurement `make bench` has not written yet is
/// named as missing.
fn cost_tables(s: &mut String, versus: Option<&Value>, overhead: Option<&Value>) -> Result<()> {
    match versus {
        None => *s += "Per apply: not measured yet (`make bench` writes `results/bench/penalty-versus.json`, the stock and the patched stage timed turn by turn in one run).\n\n",
        Some(versus) => {
            writeln!(
                s,
                "llama.cpp's penalties stage (window {}, repeat penalty {}), {} against {}, timed turn by turn in one run (`make bench`, `results/bench/penalty-versus.json`; median ms per apply over {} rounds, 95% bootstrap intervals; {}):\n",
                versus["window"],
                versus["theta"],
                versus["stock"].as_str().unwrap_or_default(),
                versus["patched"].as_str().unwrap_or_default(),
                versus["rounds"],
                versus["same_bits"].as_str().unwrap_or_default()
            )?;
            *s += "| candidates | layout | stock ms | patched ms | stock / patched |\n|---|---|---|---|---|\n";
            for r in versus["rows"].as_array().into_iter().flatten() {
                writeln!(
                    s,
                    "| {} | {} | {} | {} | {}x |",
                    r["vocab"],
                    r["layout"].as_str().unwrap_or_default(),
                    ci(&r["stock_ms"], 4),
                    ci(&r["patched_ms"], 4),
                    ci(&r["ratio"], 1)
                )?;
            }
            *s += "\n";
            for (layout, what) in versus["layouts"].as_object().into_iter().flatten() {
                writeln!(s, "- {layout}: {}", what.as_str().unwrap_or_default())?;
            }
            *s += "\n";
        }
    }
    let Some(o) = overhead else {
        *s += "End to end: not measured yet (`make bench` writes `results/bench/penalty-overhead-versus.json`, both builds decoding in one interleaved run).\n\n";
        return Ok(());
    };
    let (stock, patched) = (
        o["stock"].as_str().unwrap_or_default(),
        o["patched"].as_str().unwrap_or_default(),
    );
    writeln!(
        s,
        "End to end, both builds in one run (`results/bench/penalty-overhead-versus.json`): decoding {} ({} prompt tokens) greedily, without a penalty and with {}, {} rounds of {} tokens per generation, decoding threads: {}; {}. Ms per token and the penalty's overhead over the same build's unpenalized decode in the same round, each the {}:\n",
        o["model_detail"].as_str().unwrap_or_default(),
        o["prompt_tokens"],
        o["penalty"].as_str().unwrap_or_default(),
        o["rounds"],
        o["tokens_per_generation"],
        o["threads"],
        o["order"].as_str().unwrap_or_default(),
        o["statistic"].as_str().unwrap_or_default()
    )?;
    *s += "| build | no penalty ms per token | penalties ms per token | overhead % |\n|---|---|---|---|\n";
    for (side, name) in [("stock", stock), ("patched", patched)] {
        writeln!(
            s,
            "| {name} | {} | {} | {} |",
            ci(&o["ms_per_token"][side]["none"], 2),
            ci(&o["ms_per_token"][side]["penalties"], 2),
            cost_signed(&o["overhead_percent"][side], 1)
        )?;
    }
    let d = &o["overhead_difference_points"];
    let (lo, hi) = (
        d["lo"].as_f64().unwrap_or(f64::NAN),
        d["hi"].as_f64().unwrap_or(f64::NAN),
    );
    let reading = if hi < 0.0 {
        "the interval lies below 0: in this run the patched build's overhead is the smaller"
            .to_string()
    } else if lo > 0.0 {
        "the interval lies above 0: in this run the patched build's overhead is the larger"
            .to_string()
    } else {
        "the interval holds 0: this run does not tell the two overheads apart".to_string()
    };
    writeln!(
        s,
        "\nIn each round, the patched overhead minus the stock one: {} percentage points over rounds (the median of these differences need not equal the difference of the two medians above); {reading}.\n",
        cost_signed(d, 1)
    )?;
    Ok(())
}

/// The sha256 prefix of the sampler sources the patched build's audit ran on, when every
/// report of `results/fixes/` names the same one.
fn cost_audited_sources(results: &Path) -> Option<String> {
    let dir = results.join(FIXES_RESULTS);
    let mut seen = std::collections::BTreeSet::new();
    for e in std::fs::read_dir(&dir).ok()?.flatten() {
        let p = e.path();
        if p.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let v = json(&p).ok()?;
        let detail = v["build_detail"].as_str()?;
        let (_, after) = detail.split_once("sampler sources ")?;
        seen.insert(
            after
                .chars()
                .take_while(char::is_ascii_hexdigit)
                .collect::<String>(),
        );
    }
    (seen.len() == 1).then(|| seen.into_iter().next().unwrap_or_default())
}

/// How the fix was verified: the bits, the bench's own checks, and the suite's verdicts on the
/// patched build when its audit ran on the patches the bench ran.
fn cost_verified(
    s: &mut String,
    results: &Path,
    bitcheck: Option<&Value>,
    versus: Option<&Value>,
) -> Result<()> {
    if let Some(b) = bitcheck {
        let mut families: Vec<(String, u64)> = Vec::new();
        for (k, v) in b["families"].as_object().into_iter().flatten() {
            families.push((k.clone(), v.as_u64().unwrap_or(0)));
        }
        let list: Vec<String> = families.iter().map(|(k, n)| format!("{k} {n}")).collect();
        writeln!(
            s,
            "- Same bits: `bitcheck.c` in this folder prints every bit the stage leaves (and the `sorted` flag) over {} arrays, by family: {}. Compared between the two builds (`results/bench/penalty-bitcheck.json`): class exact ({}), {} of {} identical; class own-index-repeat ({}), {} of {} identical.",
            b["arrays"],
            list.join(", "),
            b["classes"]["exact"].as_str().unwrap_or_default(),
            b["exact"]["identical"],
            b["exact"]["arrays"],
            b["classes"]["own-index-repeat"].as_str().unwrap_or_default(),
            b["own_index_repeat"]["identical"],
            b["own_index_repeat"]["arrays"]
        )?;
    }
    if let Some(v) = versus {
        writeln!(
            s,
            "- In the timed runs: {}; end to end, both builds chose the same tokens in every round (the run stops otherwise).",
            v["same_bits"].as_str().unwrap_or_default()
        )?;
    }
    let bench_sources = versus
        .and_then(|v| v["patched_sources_sha256"].as_str())
        .map(|h| h.chars().take(12).collect::<String>());
    let audited = cost_audited_sources(results);
    match (std::fs::read_to_string(results.join(FIXES_RESULTS).join("diff.txt")), audited, bench_sources) {
        (Ok(t), Some(a), Some(b)) if a == b => writeln!(s, "- No verdict of the suite changes with this patch among the others (`results/{FIXES_RESULTS}/diff.txt`, sampler sources {a}):\n\n```\n{t}```")?,
        (Ok(_), Some(a), Some(b)) => writeln!(s, "- The suite's verdicts on the patched build (`results/{FIXES_RESULTS}/diff.txt`) come from an audit of other patches (sampler sources {a}; the bench's patched build: {b}); `make audit-fixes` reruns it on these.")?,
        _ => writeln!(s, "- The patched build's verdicts have not been compared with the stock ones on these patches yet (`make audit-fixes`).")?,
    }
    Ok(())
}

#[cfg(test)]
mod cost_tests {
    use super::*;
    use serde_json::json;

    fn overhead(lo: f64, median: f64, hi: f64) -> Value {
        let c = |m: f64| json!({"median": m, "lo": m - 1.0, "hi": m + 1.0});
        json!({
            "stock": "b1", "patched": "b1+fixes", "model_detail": "m", "prompt_tokens": 3,
            "penalty": "p", "rounds": 4, "tokens_per_generation": 2, "threads": 1,
            "order": "o", "statistic": "s",
            "ms_per_token": {
                "stock": {"none": c(10.0), "penalties": c(11.0)},
                "patched": {"none": c(10.0), "penalties": c(10.0)}
            },
            "overhead_percent": {"stock": c(10.0), "patched": c(0.0)},
            "overhead_difference_points": {"median": median, "lo": lo, "hi": hi}
        })
    }

    /// The words about the difference of overheads follow its interval, and every measurement
    /// not written yet is named as missing.
    #[test]
    fn cost_tables_say_what_the_interval_shows_and_what_is_missing() {
        let text = |o: &Value| {
            let mut s = String::new();
            cost_tables(&mut s, None, Some(o)).unwrap();
            s
        };
        let below = text(&overhead(-3.0, -2.0, -1.0));
        assert!(
            below.contains("-2.0 [-3.0, -1.0] percentage points"),
            "{below}"
        );
        assert!(
            below.contains("patched build's overhead is the smaller"),
            "{below}"
        );
        assert!(
            below.contains(
                "| b1+fixes | 10.00 [9.00, 11.00] | 10.00 [9.00, 11.00] | +0.0 [-1.0, +1.0] |"
            ),
            "{below}"
        );
        assert!(below.contains("Per apply: not measured yet"), "{below}");
        assert!(text(&overhead(-1.0, 0.5, 2.0)).contains("does not tell the two overheads apart"));
        assert!(text(&overhead(1.0, 2.0, 3.0)).contains("overhead is the larger"));
        let mut s = String::new();
        cost_tables(&mut s, None, None).unwrap();
        assert!(s.contains("End to end: not measured yet"), "{s}");
    }

    /// The first sentence about the patch's results names the arrays where it may differ, with
    /// the counts of the comparison.
    #[test]
    fn cost_bits_sentence_opens_with_the_exception() {
        let b = json!({"exact": {"arrays": 7, "identical": 7}, "own_index_repeat": {"arrays": 5, "identical": 1}});
        let first = cost_bits_sentence(Some(&b));
        assert!(first.starts_with("With `fix.patch` the stage leaves every bit as the stock stage does except on arrays that hold a windowed id at its own index and again at another index"), "{first}");
        assert!(
            first.contains("5 such arrays, 4 of them differ; the other 7 arrays are identical"),
            "{first}"
        );
        assert!(cost_bits_sentence(None).starts_with("Not checked yet"));
    }

    /// The patched build's audit is cited only when all its reports name one set of sources.
    #[test]
    fn cost_audited_sources_needs_one_hash() {
        let dir = std::env::temp_dir().join(format!("cost-audited-{}", std::process::id()));
        let fixes = dir.join(FIXES_RESULTS);
        std::fs::create_dir_all(&fixes).unwrap();
        let report = |name: &str, hash: &str| {
            let detail = format!("llama.cpp tree b1+fixes (abc; sampler sources {hash}) at /x");
            std::fs::write(
                fixes.join(name),
                json!({"build_detail": detail}).to_string(),
            )
            .unwrap();
        };
        report("a.json", "0123456789ab");
        report("b.json", "0123456789ab");
        std::fs::write(fixes.join("diff.txt"), "not a report").unwrap();
        assert_eq!(cost_audited_sources(&dir).as_deref(), Some("0123456789ab"));
        report("c.json", "ffffffffffff");
        assert_eq!(cost_audited_sources(&dir), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(name: &str, stock: &str, patched: &str, targeted: bool) -> Change {
        Change {
            name: name.into(),
            stock: stock.into(),
            patched: patched.into(),
            targeted,
        }
    }

    /// A row on another model or a fix's rerun of a targeted row is targeted; another row is
    /// not, however its name begins.
    #[test]
    fn targeted_rows_include_other_models_and_fix_reruns_only() {
        let t = vec!["stale-sorted-truncation".to_string()];
        assert!(is_targeted(&t, "stale-sorted-truncation"));
        assert!(is_targeted(&t, "stale-sorted-truncation@gemma3"));
        assert!(is_targeted(&t, "stale-sorted-truncation+sorted_guard"));
        assert!(!is_targeted(&t, "stale-sorted-dist"));
    }

    /// The diff holds only when every change is a targeted row turning absent from present or
    /// undecided, and no targeted present row was left unfixed.
    #[test]
    fn only_a_contracts_line_number_is_set_aside() {
        let row = |line: u64, quote: &str| {
            serde_json::json!({"verdict_rows": [{"name": "r", "line": 7,
                "contract": {"file": "f", "line": line, "quote": quote}}]})
        };
        let (mut a, mut b) = (row(10, "// copy the state"), row(12, "// copy the state"));
        drop_contract_lines(&mut a);
        drop_contract_lines(&mut b);
        assert_eq!(a, b);
        // The words stay compared, and a `line` outside a contract stays too.
        let mut c = row(10, "// copy everything");
        drop_contract_lines(&mut c);
        assert_ne!(a, c);
        assert_eq!(a["verdict_rows"][0]["line"], 7);
    }

    #[test]
    fn the_diff_rule_fails_on_each_way_a_patch_can_miss() {
        let fixed = change("a", "present", "absent", true);
        assert!(diff_holds(std::slice::from_ref(&fixed), &[]));
        assert!(diff_holds(&[change("a", "undecided", "absent", true)], &[]));
        assert!(!diff_holds(&[change("b", "present", "absent", false)], &[]));
        assert!(!diff_holds(&[change("a", "absent", "present", true)], &[]));
        assert!(!diff_holds(
            &[change("a", "inconclusive", "absent", true)],
            &[]
        ));
        assert!(!diff_holds(&[fixed], &["c".to_string()]));
        assert!(!diff_holds(&[], &["c".to_string()]));
    }
}
