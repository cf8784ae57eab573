//! Reads a results folder into the matrix: one state per verdict row and llama.cpp revision.
//!
//! The columns are every revision of the release table (`builds::revisions`), in llama.cpp
//! order, whether or not anything ran on it. A revision's build status comes from the
//! runner's `builds.tsv` when it lists the revision (the last line naming it wins, so a
//! retried build counts as retried); a revision it does not list, or every revision when there
//! is no `builds.tsv`, counts as built when some report names it and as not run otherwise.
//! The reports of a revision whose build failed or was refused are left out (they can only be
//! left over from an earlier run) and named in the notes.

use anyhow::{bail, Context, Result};
use report::{Header, Verdict};
use serde_json::Value;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::path::Path;

/// The runner's build log in the results folder.
pub const BUILDS_TSV: &str = "builds.tsv";

/// The runner's list of findings that failed to run on a built revision.
pub const RUNS_FAILED_TSV: &str = "runs-failed.tsv";

/// Files this tool writes into the folder it reads; never read as reports.
pub const OUTPUTS: [&str; 4] = ["ranges.txt", "ranges.json", "matrix.svg", "changes.txt"];

/// What one cell of the matrix says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum State {
    Present,
    Absent,
    NotOffered,
    Inconclusive,
    Undecided,
    /// The revision's build failed or was refused.
    NotBuilt,
    /// Nothing ran on the revision.
    NotRun,
    /// The revision was built and reported, but no report of it has this row.
    Missing,
}

impl State {
    pub const ALL: [State; 8] = [
        State::Present,
        State::Absent,
        State::NotOffered,
        State::Inconclusive,
        State::Undecided,
        State::NotBuilt,
        State::NotRun,
        State::Missing,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            State::Present => "present",
            State::Absent => "absent",
            State::NotOffered => "not offered",
            State::Inconclusive => "inconclusive",
            State::Undecided => "undecided",
            State::NotBuilt => "not built",
            State::NotRun => "not run",
            State::Missing => "missing",
        }
    }

    /// Whether a report said something here: a verdict, or that the sampler is not offered.
    pub fn has_data(self) -> bool {
        !matches!(self, State::NotBuilt | State::NotRun | State::Missing)
    }
}

impl From<Verdict> for State {
    fn from(v: Verdict) -> State {
        match v {
            Verdict::Present => State::Present,
            Verdict::Absent => State::Absent,
            Verdict::NotOffered => State::NotOffered,
            Verdict::Inconclusive => State::Inconclusive,
            Verdict::Undecided => State::Undecided,
        }
    }
}

/// How a revision's build went, as `builds.tsv` states it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildStatus {
    Ok,
    BuildFailed,
    Refused,
    NotRun,
}

impl BuildStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            BuildStatus::Ok => "ok",
            BuildStatus::BuildFailed => "build-failed",
            BuildStatus::Refused => "refused",
            BuildStatus::NotRun => "not run",
        }
    }

    fn parse(text: &str) -> Option<BuildStatus> {
        [
            BuildStatus::Ok,
            BuildStatus::BuildFailed,
            BuildStatus::Refused,
        ]
        .into_iter()
        .find(|s| s.as_str() == text)
    }

    pub fn built(self) -> bool {
        !matches!(self, BuildStatus::BuildFailed | BuildStatus::Refused)
    }
}

/// One llama.cpp revision of the release table, as a column of the matrix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// The tag (`b10200`), or the short commit of an untagged revision.
    pub name: String,
    pub commit: String,
    /// The `llama-cpp-sys-2` releases vendoring it, oldest first.
    pub crates: Vec<String>,
    /// The sampler implementation file of its tree (`src/llama-sampling.cpp` before b8148).
    pub sampler_file: String,
    pub status: BuildStatus,
    /// The first error line of a failed or refused build; empty otherwise.
    pub detail: String,
}

impl Column {
    /// The release a build of this revision uses: the newest vendoring it.
    pub fn crate_version(&self) -> &str {
        self.crates.last().map_or("", String::as_str)
    }

    /// Whether a build name (a tag, a short commit or a crate version) means this revision.
    fn is_named(&self, build: &str) -> bool {
        self.name == build || self.crates.iter().any(|c| c == build)
    }
}

/// A verdict row: the finding and the row's (or the report's own) name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowKey {
    pub finding: String,
    pub name: String,
}

impl RowKey {
    /// `F2` before `F10`: the finding's letters, then its number.
    fn order(&self) -> (&str, u64, &str, &str) {
        let digits = self
            .finding
            .trim_start_matches(|c: char| !c.is_ascii_digit());
        let letters = &self.finding[..self.finding.len() - digits.len()];
        let number = digits.parse().unwrap_or(u64::MAX);
        (letters, number, &self.finding, &self.name)
    }
}

impl Ord for RowKey {
    fn cmp(&self, other: &RowKey) -> Ordering {
        self.order().cmp(&other.order())
    }
}

impl PartialOrd for RowKey {
    fn partial_cmp(&self, other: &RowKey) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Every verdict row on every revision.
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    pub columns: Vec<Column>,
    /// One state per column, in column order.
    pub rows: BTreeMap<RowKey, Vec<State>>,
    /// Files read but not used, and why, in file-name order.
    pub notes: Vec<String>,
    /// Whether the folder had a `builds.tsv`.
    pub builds_tsv: bool,
    /// The cells a C reproducer decided (see [`REPROS`]): row, then column, then the
    /// reproducer's folder under `upstream/llama.cpp/`.
    pub by_repro: BTreeMap<RowKey, BTreeMap<usize, String>>,
}

/// The folder of the results folder where the runner records each standalone reproducer's
/// run on each revision (`<defect>.<revision>.txt`, as `upstream record` writes them).
pub const REPROS: &str = "upstream";

/// The release table's revisions as columns, all not run.
pub fn table_columns() -> Vec<Column> {
    let releases = builds::releases();
    builds::revisions(&releases)
        .into_iter()
        .map(|rev| {
            let sampler_file = releases
                .iter()
                .find(|r| r.crate_version == rev.crate_version())
                .map(|r| r.sampler_file.clone())
                .unwrap_or_default();
            Column {
                name: rev.name(),
                commit: rev.commit.clone(),
                crates: rev.crates.clone(),
                sampler_file,
                status: BuildStatus::NotRun,
                detail: String::new(),
            }
        })
        .collect()
}

/// A report's rows, checked against the report contract: its own verdict under its name,
/// then each verdict row.
pub fn read_report(v: &Value) -> Result<(Header, Vec<(RowKey, State)>)> {
    // The matrix keeps each revision's reports until it runs again, some from before reports
    // stated their verdicts' kinds.
    let h = Header::from_json_of_record(v)?;
    let own = std::iter::once((h.subject.name.clone(), h.verdict));
    let rows = h.rows.iter().map(|r| (r.0.clone(), r.1));
    let out = own
        .chain(rows)
        .map(|(name, verdict)| {
            let key = RowKey {
                finding: h.subject.finding.clone(),
                name,
            };
            (key, State::from(verdict))
        })
        .collect();
    Ok((h, out))
}

/// `builds.tsv`: column index to (status, detail). `None` when the folder has no such file.
fn read_builds_log(
    dir: &Path,
    columns: &[Column],
) -> Result<Option<BTreeMap<usize, (BuildStatus, String)>>> {
    let path = dir.join(BUILDS_TSV);
    if !path.exists() {
        return Ok(None);
    }
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let mut out = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let at = || format!("{} line {}", path.display(), n + 1);
        if line.trim().is_empty()
            || line.starts_with('#')
            || line == "build\tcrate_version\tstatus\tdetail"
        {
            continue;
        }
        let f: Vec<&str> = line.splitn(4, '\t').collect();
        let (build, status) = match f[..] {
            [b, _, s] | [b, _, s, _] => (b, s),
            _ => bail!(
                "{}: not `build<TAB>crate_version<TAB>status<TAB>detail`",
                at()
            ),
        };
        let column = columns
            .iter()
            .position(|c| c.is_named(build) || c.is_named(f[1]))
            .with_context(|| {
                format!("{}: '{build}' is not a revision of the release table", at())
            })?;
        let status = BuildStatus::parse(status).with_context(|| {
            format!(
                "{}: status '{status}' is not ok, build-failed or refused",
                at()
            )
        })?;
        let detail = f.get(3).copied().unwrap_or("").trim().to_string();
        out.insert(column, (status, detail));
    }
    Ok(Some(out))
}

/// One report file's rows, on the column it names.
struct Read {
    file: String,
    column: usize,
    rows: Vec<(RowKey, State)>,
}

/// Reads every report (`*.json` but this tool's own output) in `dir`. A file that breaks the
/// report contract is an error naming it; a report of another engine or of a build outside
/// the release table is left out and noted.
fn read_reports(dir: &Path, columns: &[Column], notes: &mut Vec<String>) -> Result<Vec<Read>> {
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()
        .with_context(|| format!("reading {}", dir.display()))?;
    paths.sort();
    let mut out = Vec::new();
    for path in paths {
        let file = path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        if path.extension().and_then(|e| e.to_str()) != Some("json")
            || OUTPUTS.contains(&file.as_str())
        {
            continue;
        }
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let v: Value =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        let (h, rows) = read_report(&v).with_context(|| format!("{}", path.display()))?;
        let s = &h.subject;
        if s.engine != report::DEFAULT_ENGINE {
            notes.push(format!("{file}: engine {}, not llama.cpp", s.engine));
            continue;
        }
        let Some(column) = columns.iter().position(|c| c.is_named(&s.build)) else {
            notes.push(format!(
                "{file}: build '{}' is not a revision of the release table",
                s.build
            ));
            continue;
        };
        out.push(Read { file, column, rows });
    }
    Ok(out)
}

/// Reads the results folder `dir` (see the module documentation).
pub fn load(dir: &Path) -> Result<Matrix> {
    let mut columns = table_columns();
    anyhow::ensure!(dir.is_dir(), "{} is not a folder", dir.display());
    let log = read_builds_log(dir, &columns)?;
    let mut notes = Vec::new();
    // Findings that exited non-zero on a revision that built: their reports are missing there
    // (the runner deletes a revision's reports before it runs), and this says why.
    if let Ok(text) = std::fs::read_to_string(dir.join(RUNS_FAILED_TSV)) {
        for line in text.lines().filter(|l| !l.is_empty()) {
            let f: Vec<&str> = line.splitn(3, '\t').collect();
            if let [build, bin, detail] = f[..] {
                notes.push(format!("{bin} failed on {build}: {detail}"));
            } else {
                bail!(
                    "{}: not `build<TAB>binary<TAB>detail`: {line}",
                    dir.join(RUNS_FAILED_TSV).display()
                );
            }
        }
    }
    let reads = read_reports(dir, &columns, &mut notes)?;
    anyhow::ensure!(
        !reads.is_empty() || log.is_some(),
        "no reports and no {BUILDS_TSV} in {}; the matrix runner writes them",
        dir.display()
    );
    for (i, c) in columns.iter_mut().enumerate() {
        if let Some((status, detail)) = log.as_ref().and_then(|l| l.get(&i)) {
            c.status = *status;
            c.detail.clone_from(detail);
        } else if reads.iter().any(|r| r.column == i) {
            c.status = BuildStatus::Ok;
        }
    }
    let n = columns.len();
    let mut cells: BTreeMap<RowKey, Vec<Option<(State, String)>>> = BTreeMap::new();
    for read in reads {
        let column = &columns[read.column];
        if !column.status.built() {
            notes.push(format!(
                "{}: {} is {} in {BUILDS_TSV}, so this report is from an earlier run",
                read.file,
                column.name,
                column.status.as_str()
            ));
            continue;
        }
        for (key, state) in read.rows {
            let slot = &mut cells.entry(key.clone()).or_insert_with(|| vec![None; n])[read.column];
            match slot {
                Some((earlier, other)) if *earlier != state => bail!(
                    "{} {} on {}: {} in {other} but {} in {}",
                    key.finding,
                    key.name,
                    column.name,
                    earlier.as_str(),
                    state.as_str(),
                    read.file
                ),
                Some(_) => {}
                None => *slot = Some((state, read.file.clone())),
            }
        }
    }
    let rows = cells
        .into_iter()
        .map(|(key, row)| {
            let states = row
                .into_iter()
                .zip(&columns)
                .map(|(cell, c)| match (c.status, cell) {
                    (BuildStatus::BuildFailed | BuildStatus::Refused, _) => State::NotBuilt,
                    (BuildStatus::NotRun, _) => State::NotRun,
                    (BuildStatus::Ok, Some((state, _))) => state,
                    (BuildStatus::Ok, None) => State::Missing,
                })
                .collect();
            (key, states)
        })
        .collect();
    let mut rows = rows;
    let by_repro = decide_by_repros(dir, &columns, &mut rows)?;
    Ok(Matrix {
        columns,
        rows,
        notes,
        builds_tsv: log.is_some(),
        by_repro,
    })
}

/// Where the suite's verdict is `inconclusive` (its planted controls could not run: before
/// b4718 the C API cannot make a sampler written in Rust), the defect's standalone C
/// reproducer decides, if it ran on that revision: exit 1 present, exit 0 absent. No other
/// cell changes.
fn decide_by_repros(
    dir: &Path,
    columns: &[Column],
    rows: &mut BTreeMap<RowKey, Vec<State>>,
) -> Result<BTreeMap<RowKey, BTreeMap<usize, String>>> {
    let mut out: BTreeMap<RowKey, BTreeMap<usize, String>> = BTreeMap::new();
    let folder = dir.join(REPROS);
    if !folder.is_dir() {
        return Ok(out);
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for d in upstream::defects(&root)? {
        for (i, c) in columns.iter().enumerate() {
            let path = folder.join(format!("{}.{}.txt", d.short, c.name));
            let Ok(record) = std::fs::read_to_string(&path) else {
                continue;
            };
            let Some(present) = upstream::recorded_outcome(&record) else {
                continue;
            };
            for (key, states) in rows.iter_mut() {
                if d.meta.rows.contains(&key.name) && states[i] == State::Inconclusive {
                    states[i] = if present {
                        State::Present
                    } else {
                        State::Absent
                    };
                    out.entry(key.clone())
                        .or_default()
                        .insert(i, d.short.clone());
                }
            }
        }
    }
    Ok(out)
}
