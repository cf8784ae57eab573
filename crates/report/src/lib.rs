//! The one report contract every repro and `verdicts` use.
//!
//! A [`Report`] is one verdict about one finding on one build, with the controls that decide
//! whether the verdict may be trusted. Its JSON opens with the same header in every results
//! file (`finding`, `name`, `build`, `build_detail`, `verdict`, `evidence`, `controls`), and
//! its text is rendered from the same value, so the two cannot disagree.
//!
//! Invariants, enforced here rather than by each repro:
//! - the verdict is computed from the measured answer and the controls ([`judge`]): if any
//!   control failed, or the report has no positive or no negative control, it is
//!   `inconclusive`, never `present` or `absent`;
//! - verdict rows ([`Row`]) share their report's controls and obey the same rule;
//! - one spelling: `present`, `absent`, `undecided`, `inconclusive`;
//! - every verdict states its kind, `defect`, `divergence` or `robustness`, and what it rests
//!   on, from the one catalog in [`kind`] (a report with rows states it per row; its own
//!   verdict is their summary);
//! - a `defect` quotes its contract from the sources of the build it ran on ([`contract`]):
//!   where those sources do not state it, the verdict is `not offered`, never a defect;
//! - a check that cannot show a defect by construction is a note ([`Report::add_note`]), never
//!   a verdict: [`Header::from_json`] refuses a verdict that says it cannot fail.

pub mod chart;
pub mod contract;
pub mod kind;
pub mod table;

pub use contract::{Contract, Sources};
pub use kind::{Basis, Kind};
pub use table::Table;

use anyhow::{bail, ensure, Context, Result};
use serde::Serialize;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// What a detector concluded about a defect on a build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// The subject disagrees with the oracle on an input where the oracle's answer is decided.
    Present,
    /// The subject agrees with the oracle everywhere the detector looked.
    Absent,
    /// They disagree, but the oracle's answer rests on a tie or a rounding margin.
    Undecided,
    /// Some control failed (or a control kind is missing): no answer either way.
    Inconclusive,
    /// The linked build's C API has no such sampler or call: nothing to test, on that build.
    #[serde(rename = "not offered")]
    NotOffered,
}

impl Verdict {
    pub const ALL: [Verdict; 5] = [
        Verdict::Present,
        Verdict::Absent,
        Verdict::Undecided,
        Verdict::Inconclusive,
        Verdict::NotOffered,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Present => "present",
            Verdict::Absent => "absent",
            Verdict::Undecided => "undecided",
            Verdict::Inconclusive => "inconclusive",
            Verdict::NotOffered => "not offered",
        }
    }

    pub fn parse(text: &str) -> Result<Verdict> {
        Verdict::ALL
            .into_iter()
            .find(|v| v.as_str() == text)
            .with_context(|| {
                format!("'{text}' is not a verdict (present, absent, undecided, inconclusive, not offered)")
            })
    }

    /// `present` when `found`, `absent` otherwise.
    pub fn found(found: bool) -> Verdict {
        if found {
            Verdict::Present
        } else {
            Verdict::Absent
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a control shows about the detector it guards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ControlKind {
    /// A known-bad implementation, written by us, that the detector must flag.
    Positive,
    /// A known-good implementation, written by us, that the detector must pass.
    Negative,
    /// The oracle (or the readout that feeds it) checked on inputs where it could be wrong.
    OracleCheck,
}

impl ControlKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ControlKind::Positive => "positive",
            ControlKind::Negative => "negative",
            ControlKind::OracleCheck => "oracle-check",
        }
    }

    pub fn parse(text: &str) -> Result<ControlKind> {
        let all = [Self::Positive, Self::Negative, Self::OracleCheck];
        all.into_iter()
            .find(|k| k.as_str() == text)
            .with_context(|| {
                format!("'{text}' is not a control kind (positive, negative, oracle-check)")
            })
    }
}

/// One control and what it showed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Control {
    pub name: String,
    pub kind: ControlKind,
    pub passed: bool,
    /// What was run and what came out, in one line.
    pub detail: String,
}

impl Control {
    pub fn new(
        kind: ControlKind,
        name: impl Into<String>,
        passed: bool,
        detail: impl Into<String>,
    ) -> Control {
        Control {
            name: name.into(),
            kind,
            passed,
            detail: detail.into(),
        }
    }

    /// A planted defect: `passed` means the detector flagged it.
    pub fn positive(name: impl Into<String>, flagged: bool, detail: impl Into<String>) -> Control {
        Control::new(ControlKind::Positive, name, flagged, detail)
    }

    /// A planted clean implementation: `passed` means the detector stayed quiet.
    pub fn negative(name: impl Into<String>, quiet: bool, detail: impl Into<String>) -> Control {
        Control::new(ControlKind::Negative, name, quiet, detail)
    }

    pub fn oracle_check(
        name: impl Into<String>,
        passed: bool,
        detail: impl Into<String>,
    ) -> Control {
        Control::new(ControlKind::OracleCheck, name, passed, detail)
    }

    /// A control the build cannot run. It is failed, not left out: a detector nobody checked
    /// on this build allows no verdict ([`judge`] makes it inconclusive).
    pub fn not_run(
        kind: ControlKind,
        name: impl Into<String>,
        why: impl std::fmt::Display,
    ) -> Control {
        Control::new(kind, name, false, format!("not run: {why}"))
    }

    pub fn from_json(v: &Value) -> Result<Control> {
        let text = |k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .with_context(|| format!("control without a string '{k}'"))
        };
        Ok(Control {
            name: text("name")?.to_string(),
            kind: ControlKind::parse(text("kind")?)?,
            passed: v
                .get("passed")
                .and_then(Value::as_bool)
                .context("control without a boolean 'passed'")?,
            detail: text("detail")?.to_string(),
        })
    }
}

/// Why the controls do not allow a verdict, or `None` when they do.
pub fn controls_problem(controls: &[Control]) -> Option<String> {
    let failed: Vec<&str> = controls
        .iter()
        .filter(|c| !c.passed)
        .map(|c| c.name.as_str())
        .collect();
    if !failed.is_empty() {
        return Some(format!("failed: {}", failed.join(", ")));
    }
    for kind in [ControlKind::Positive, ControlKind::Negative] {
        if !controls.iter().any(|c| c.kind == kind) {
            return Some(format!("no {} control", kind.as_str()));
        }
    }
    None
}

/// The verdict a report may state: the measured one when every control passed and both a
/// positive and a negative control ran; `inconclusive` otherwise. `not offered` stands as it
/// is: a sampler the build lacks is a fact of its C API, which no control can change.
pub fn judge(measured: Verdict, controls: &[Control]) -> Verdict {
    if measured == Verdict::NotOffered {
        Verdict::NotOffered
    } else if controls_problem(controls).is_some() {
        Verdict::Inconclusive
    } else {
        measured
    }
}

/// One verdict inside a report that carries several (one per sampler, say). Rows share the
/// report's controls.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub name: String,
    #[serde(skip)]
    measured: Verdict,
    verdict: Verdict,
    pub evidence: String,
    /// Defect, divergence or robustness, and what it rests on ([`kind::basis`] of the row's
    /// name).
    pub kind: Kind,
    pub rests_on: &'static str,
    /// For a defect: where the build states what the row tests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contract: Option<Contract>,
    /// Row-specific data, placed after the row's header keys.
    #[serde(flatten)]
    pub data: Map<String, Value>,
}

/// Something a report shows that is not a verdict: a check that cannot show a defect by
/// construction (the same arithmetic on both sides, say), stated with its evidence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Note {
    pub name: String,
    pub note: String,
    #[serde(flatten)]
    pub data: Map<String, Value>,
}

/// The words that mark a verdict as unable to show a defect; such a check belongs in a note.
const CANNOT_FAIL: [&str; 4] = [
    "cannot show a defect",
    "cannot fail",
    "by construction",
    "cannot be present",
];

/// Why a verdict with this evidence is not one, if its evidence says it cannot fail.
fn cannot_fail(evidence: &str) -> Option<&'static str> {
    let lower = evidence.to_lowercase();
    CANNOT_FAIL.into_iter().find(|w| lower.contains(w))
}

impl Row {
    pub fn verdict(&self) -> Verdict {
        self.verdict
    }

    pub fn measured(&self) -> Verdict {
        self.measured
    }
}

/// The code that wrote a report: its finding's package and that package's detector version
/// (`builds::detector`, stamped by the package's build script).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Detector {
    pub package: &'static str,
    pub version: &'static str,
}

/// A finding as its binary names it: `F1`, ..., and the detector that judges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finding {
    pub id: &'static str,
    pub detector: Detector,
}

/// `finding!("F6")` in a finding's library crate: the finding with that crate's detector
/// (its build script must call `builds::detector::emit()`).
#[macro_export]
macro_rules! finding {
    ($id:literal) => {
        $crate::Finding {
            id: $id,
            detector: $crate::Detector {
                package: env!("CARGO_PKG_NAME"),
                version: env!("SAMPLER_AUDIT_DETECTOR"),
            },
        }
    };
}

/// A report's identity header: which finding, which verdict name, which build (not the
/// subject under audit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportId {
    /// `F1`, `F2`, ...
    pub finding: String,
    /// The verdict's name, e.g. `clone-drops-token-count` or `...+ledger` for a fix's rerun.
    pub name: String,
    /// The engine's label in the verdict table: `llama.cpp` or `candle` (`engine::EngineName`).
    pub engine: String,
    /// The build tag: the llama.cpp release tag, e.g. `b11429`, or `candle-0.11.1`.
    pub build: String,
    /// One readable line naming the linked library.
    pub build_detail: String,
    /// The engine's sources as the build compiled them, where a defect's contract is found.
    pub sources: Sources,
    /// The code that wrote the report, when a finding's binary did (reports read back from a
    /// file keep the package and version in [`Header::detector`]).
    pub detector: Option<Detector>,
}

impl ReportId {
    /// `finding`'s report `name` on an engine's build.
    pub fn new(
        finding: &Finding,
        name: impl Into<String>,
        engine: impl Into<String>,
        build: impl Into<String>,
        build_detail: impl Into<String>,
        sources: Sources,
    ) -> ReportId {
        ReportId {
            finding: finding.id.to_string(),
            name: name.into(),
            engine: engine.into(),
            build: build.into(),
            build_detail: build_detail.into(),
            sources,
            detector: Some(finding.detector),
        }
    }
}

/// The key naming the engine, right after the header keys. A report without it is llama.cpp's,
/// which is what [`Header::from_json`] reads.
pub const ENGINE_KEY: &str = "engine";

/// The engine a report without [`ENGINE_KEY`] was written for.
pub const DEFAULT_ENGINE: &str = "llama.cpp";

/// The key under which a report lists its verdict rows (after the header and `measured`).
pub const ROWS_KEY: &str = "verdict_rows";

/// A verdict with its evidence and controls, plus the finding's own data and text.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub subject: ReportId,
    measured: Verdict,
    verdict: Verdict,
    pub evidence: String,
    controls: Vec<Control>,
    rows: Vec<Row>,
    notes: Vec<Note>,
    /// Finding-specific JSON, placed after the header.
    body: Map<String, Value>,
    /// Finding-specific text (tables), placed between the title and the controls.
    text: String,
}

/// A report as written: the header keys in [`HEADER_KEYS`] order, then the engine, the
/// measured verdict, the rows (when there are any) and the finding's own keys.
#[derive(Serialize)]
struct Written<'a> {
    finding: &'a str,
    name: &'a str,
    build: &'a str,
    build_detail: &'a str,
    verdict: Verdict,
    evidence: &'a str,
    controls: &'a [Control],
    engine: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    detector: Option<Detector>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<Kind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rests_on: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    contract: Option<Contract>,
    measured: Verdict,
    #[serde(skip_serializing_if = "<[Row]>::is_empty")]
    verdict_rows: &'a [Row],
    #[serde(skip_serializing_if = "<[Note]>::is_empty")]
    notes: &'a [Note],
    #[serde(flatten)]
    body: &'a Map<String, Value>,
}

impl Serialize for Report {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let s = &self.subject;
        let basis = self.basis();
        let own = self.own();
        Written {
            finding: &s.finding,
            name: &s.name,
            build: &s.build,
            build_detail: &s.build_detail,
            verdict: own.verdict,
            evidence: &own.evidence,
            controls: &self.controls,
            engine: &s.engine,
            detector: s.detector,
            kind: basis.map(|b| b.kind),
            rests_on: basis.map(|b| b.rests_on),
            contract: own.contract,
            measured: own.measured,
            verdict_rows: &self.rows,
            notes: &self.notes,
            body: &self.body,
        }
        .serialize(serializer)
    }
}

/// Any serializable value as JSON. Floats go through [`Value`] as f64, as `json!` writes them.
fn to_value(data: impl Serialize) -> Value {
    serde_json::to_value(data).expect("report data has string keys and serializes")
}

/// Data as an object: its keys, or `{"data": value}` for a value that is not one.
fn object(data: impl Serialize) -> Map<String, Value> {
    match to_value(data) {
        Value::Object(m) => m,
        Value::Null => Map::new(),
        other => {
            let mut m = Map::new();
            m.insert("data".into(), other);
            m
        }
    }
}

/// The catalog's basis for a verdict the suite gives; a name it does not know is a bug of the
/// suite (a new verdict needs its kind in [`kind`]).
fn basis_of(engine: &str, name: &str) -> Basis {
    kind::basis(engine, name)
        .unwrap_or_else(|| panic!("verdict '{name}' on {engine} has no kind in report::kind"))
}

/// What a defect verdict becomes on a build whose sources do not state its contract: `not
/// offered`, with the words looked for and what was measured.
fn unstated(basis: &Basis, measured: Verdict, evidence: &str) -> (Verdict, String) {
    let looked: Vec<String> = (basis.contract.iter())
        .map(|q| format!("\"{}\" in {}", q.text, q.files.join(" or ")))
        .collect();
    (
        Verdict::NotOffered,
        format!(
            "this build's sources do not state the contract this verdict tests (looked for {}), so it gives no defect verdict; measured {measured}: {evidence}",
            looked.join(", then ")
        ),
    )
}

/// A stand-alone report's own verdict as written: its contract, and `not offered` where a
/// defect's contract is not in the build's sources.
struct Own {
    verdict: Verdict,
    measured: Verdict,
    evidence: String,
    contract: Option<Contract>,
}

/// The header keys, in the order every results file opens with.
pub const HEADER_KEYS: [&str; 7] = [
    "finding",
    "name",
    "build",
    "build_detail",
    "verdict",
    "evidence",
    "controls",
];

impl Report {
    /// The report for `measured` under `controls`; the verdict is [`judge`]d here.
    pub fn new(
        subject: ReportId,
        measured: Verdict,
        evidence: impl Into<String>,
        controls: Vec<Control>,
    ) -> Report {
        Report {
            verdict: judge(measured, &controls),
            subject,
            measured,
            evidence: evidence.into(),
            controls,
            rows: Vec::new(),
            notes: Vec::new(),
            body: Map::new(),
            text: String::new(),
        }
    }

    /// The kind of this report's own verdict: its name's, when it stands alone; none when it
    /// has rows (each row states its own, and the report's verdict summarizes them).
    ///
    /// # Panics
    /// When the catalog ([`kind::basis`]) does not know the name: every verdict states a kind.
    pub fn basis(&self) -> Option<Basis> {
        self.rows
            .is_empty()
            .then(|| basis_of(&self.subject.engine, &self.subject.name))
    }

    /// The report's own verdict, evidence and contract as written. Only a report without rows
    /// speaks for itself; a defect's contract is looked up in the build's sources.
    fn own(&self) -> Own {
        let as_measured = Own {
            verdict: self.verdict,
            measured: self.measured,
            evidence: self.evidence.clone(),
            contract: None,
        };
        let Some(basis) = self.basis().filter(|b| b.kind == Kind::Defect) else {
            return as_measured;
        };
        match contract::locate(&self.subject.sources, basis.contract) {
            Some(c) => Own {
                contract: Some(c),
                ..as_measured
            },
            None if self.measured == Verdict::NotOffered => as_measured,
            None => {
                let (verdict, evidence) = unstated(&basis, self.measured, &self.evidence);
                Own {
                    verdict,
                    measured: verdict,
                    evidence,
                    contract: None,
                }
            }
        }
    }

    /// Adds a note: a check that is shown but cannot give a verdict (see [`Note`]).
    pub fn add_note(
        &mut self,
        name: impl Into<String>,
        note: impl Into<String>,
        data: impl Serialize,
    ) {
        self.notes.push(Note {
            name: name.into(),
            note: note.into(),
            data: object(data),
        });
    }

    pub fn notes(&self) -> &[Note] {
        &self.notes
    }

    /// Adds a verdict row, judged under this report's controls; `data`'s keys follow the row's.
    pub fn add_row(
        &mut self,
        name: impl Into<String>,
        measured: Verdict,
        evidence: impl Into<String>,
        data: impl Serialize,
    ) {
        let name = name.into();
        let basis = basis_of(&self.subject.engine, &name);
        let mut evidence = evidence.into();
        let mut measured = measured;
        let mut contract = None;
        if basis.kind == Kind::Defect {
            contract = contract::locate(&self.subject.sources, basis.contract);
            if contract.is_none() && measured != Verdict::NotOffered {
                (measured, evidence) = unstated(&basis, measured, &evidence);
            }
        }
        self.rows.push(Row {
            measured,
            verdict: judge(measured, &self.controls),
            evidence,
            kind: basis.kind,
            rests_on: basis.rests_on,
            contract,
            data: object(data),
            name,
        });
    }

    /// Finding-specific JSON: an object whose keys follow the header (and the verdict rows).
    /// Keys that would shadow the header are dropped: the header is computed, never supplied.
    pub fn with_body(mut self, body: impl Serialize) -> Report {
        if let Value::Object(m) = to_value(body) {
            for (k, v) in m {
                if !HEADER_KEYS.contains(&k.as_str())
                    && ![
                        ROWS_KEY, "measured", ENGINE_KEY, "kind", "rests_on", "notes", "detector",
                        "contract",
                    ]
                    .contains(&k.as_str())
                {
                    self.body.insert(k, v);
                }
            }
        }
        self
    }

    /// Finding-specific text, printed between the title and the controls.
    pub fn with_text(mut self, text: impl Into<String>) -> Report {
        self.text = text.into();
        self
    }

    pub fn verdict(&self) -> Verdict {
        self.own().verdict
    }

    /// What the detector found before the controls were taken into account.
    pub fn measured(&self) -> Verdict {
        self.own().measured
    }

    pub fn controls(&self) -> &[Control] {
        &self.controls
    }

    pub fn rows(&self) -> &[Row] {
        &self.rows
    }

    pub fn body(&self) -> &Map<String, Value> {
        &self.body
    }

    pub fn to_json(&self) -> Value {
        to_value(self)
    }

    /// The JSON as written to results files and printed by `--json`.
    pub fn to_json_text(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report always serializes") + "\n"
    }

    /// The JSON (`json`) or the text: what a repro prints.
    pub fn render(&self, json: bool) -> String {
        if json {
            self.to_json_text()
        } else {
            self.to_text()
        }
    }

    /// Title, the finding's text, the controls, the rows, the evidence and the verdict line.
    pub fn to_text(&self) -> String {
        let s = &self.subject;
        let mut out = format!("{} {} on {}\n\n", s.finding, s.name, s.build_detail);
        out.push_str(&self.text);
        if !self.text.is_empty() && !self.text.ends_with('\n') {
            out.push('\n');
        }
        out.push_str("\n== controls ==\n");
        let mut controls = Table::new().left("  ", 6).left(" ", 12).left(" ", 0);
        for c in &self.controls {
            let status = if c.passed { "ok" } else { "FAILED" };
            controls.row([
                status,
                c.kind.as_str(),
                &format!("{}: {}", c.name, c.detail),
            ]);
        }
        out.push_str(&controls.render());
        if let Some(problem) = controls_problem(&self.controls) {
            out.push_str(&format!("  controls do not allow a verdict ({problem})\n"));
        }
        if !self.rows.is_empty() {
            out.push_str("\n== verdict rows ==\n");
            let mut rows = Table::new()
                .left("  ", 0)
                .left("  ", 12)
                .left(" ", 10)
                .left(" ", 0);
            for r in &self.rows {
                rows.row([
                    r.name.as_str(),
                    r.verdict.as_str(),
                    r.kind.as_str(),
                    &r.evidence,
                ]);
            }
            out.push_str(&rows.render());
            let cited: Vec<&Row> = self.rows.iter().filter(|r| r.contract.is_some()).collect();
            if !cited.is_empty() {
                out.push_str(
                    "\n== contracts (each defect row's, as this build's sources state it) ==\n",
                );
                let mut t = Table::new().left("  ", 0).left("  ", 0);
                for r in cited {
                    let c = r.contract.as_ref().map(Contract::cite).unwrap_or_default();
                    t.row([r.name.as_str(), c.as_str()]);
                }
                out.push_str(&t.render());
            }
        }
        if !self.notes.is_empty() {
            out.push_str("\n== notes (shown, not verdicts: they cannot show a defect) ==\n");
            let mut notes = Table::new().left("  ", 0).left("  ", 0);
            for n in &self.notes {
                notes.row([n.name.as_str(), n.note.as_str()]);
            }
            out.push_str(&notes.render());
        }
        let own = self.own();
        if let Some(c) = &own.contract {
            out.push_str(&format!("\ncontract: {}\n", c.cite()));
        }
        out.push_str(&format!("\nevidence: {}\n", own.evidence));
        let note = if own.verdict != own.measured {
            format!(" (measured {}; the controls do not allow it)", own.measured)
        } else {
            String::new()
        };
        let kind = match self.basis() {
            Some(b) => format!(" ({})", b.kind),
            None => String::new(),
        };
        out.push_str(&format!(
            "{}: {} on {}{kind}{note}\n",
            s.name, own.verdict, s.build
        ));
        out
    }

    /// Writes `<stem>.<build>.json` and `<stem>.<build>.txt` into `dir`; returns both paths.
    pub fn write(&self, dir: &Path, stem: &str) -> Result<(PathBuf, PathBuf)> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let json = dir.join(format!("{stem}.{}.json", self.subject.build));
        let text = dir.join(format!("{stem}.{}.txt", self.subject.build));
        std::fs::write(&json, self.to_json_text())
            .with_context(|| format!("writing {}", json.display()))?;
        std::fs::write(&text, self.to_text())
            .with_context(|| format!("writing {}", text.display()))?;
        Ok((json, text))
    }
}

/// The engine a report names (llama.cpp's when it names none).
fn engine_of(obj: &Map<String, Value>) -> Result<&str> {
    match obj.get(ENGINE_KEY) {
        None => Ok(DEFAULT_ENGINE),
        Some(v) => v.as_str().context("'engine' is not a string"),
    }
}

/// A verdict's `kind` and `rests_on` must be the catalog's for its name.
fn check_kind(v: &Value, engine: &str, name: &str) -> Result<()> {
    let want = kind::basis(engine, name)
        .with_context(|| format!("verdict '{name}' has no kind in the catalog (report::kind)"))?;
    let kind = (v.get("kind").and_then(Value::as_str))
        .with_context(|| format!("verdict '{name}' states no kind (defect or divergence)"))?;
    ensure!(
        Kind::parse(kind)? == want.kind,
        "verdict '{name}' states kind {kind}, the catalog says {}",
        want.kind
    );
    ensure!(
        v.get("rests_on").and_then(Value::as_str) == Some(want.rests_on),
        "verdict '{name}' does not state what it rests on as the catalog does"
    );
    Ok(())
}

/// A defect verdict other than `not offered` must quote its contract: a file, a line and the
/// line's words.
fn check_contract(v: &Value, verdict: Verdict) -> Result<()> {
    if v.get("kind").and_then(Value::as_str) != Some(Kind::Defect.as_str())
        || verdict == Verdict::NotOffered
    {
        return Ok(());
    }
    let c = v
        .get("contract")
        .context("a defect verdict without the contract it rests on (file, line, quote)")?;
    let file = c.get("file").and_then(Value::as_str).unwrap_or_default();
    let line = c.get("line").and_then(Value::as_u64).unwrap_or(0);
    let quote = c.get("quote").and_then(Value::as_str).unwrap_or_default();
    ensure!(
        !file.is_empty() && line > 0 && !quote.trim().is_empty(),
        "a defect verdict whose contract lacks a file, a line or a quote"
    );
    Ok(())
}

/// A verdict that says it cannot show a defect is refused: it belongs in the report's notes.
fn check_can_fail(v: &Value, verdict: Verdict, evidence: &str) -> Result<()> {
    ensure!(
        v.get("can_fail") != Some(&Value::Bool(false)),
        "a verdict marked as unable to fail (can_fail: false); make it a note"
    );
    if matches!(verdict, Verdict::Absent | Verdict::Present) {
        if let Some(w) = cannot_fail(evidence) {
            bail!("a {verdict} verdict whose evidence says it \"{w}\"; a check that cannot show a defect is a note, not a verdict");
        }
    }
    Ok(())
}

/// A report's header and rows as read back from a results file, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    pub subject: ReportId,
    pub verdict: Verdict,
    pub evidence: String,
    pub controls: Vec<Control>,
    /// `(name, verdict, evidence)` of each verdict row.
    pub rows: Vec<(String, Verdict, String)>,
    /// `(package, version)` of the detector that wrote the report, if it says.
    pub detector: Option<(String, String)>,
}

impl Header {
    /// [`Header::from_json`] for a report written before reports stated each verdict's kind
    /// (the release matrix keeps such reports until a revision runs again): where a verdict
    /// states no kind, the catalog's (`kind::basis`) is filled in first. A verdict that states
    /// one is checked as always, and a name the catalog does not know is still refused.
    pub fn from_json_of_record(v: &Value) -> Result<Header> {
        let mut v = v.clone();
        let engine = match v.as_object() {
            Some(obj) => engine_of(obj)?.to_string(),
            None => return Header::from_json(&v),
        };
        let fill = |o: &mut Map<String, Value>| {
            if o.contains_key("kind") {
                return;
            }
            let Some(name) = o.get("name").and_then(Value::as_str) else {
                return;
            };
            if let Some(b) = kind::basis(&engine, name) {
                o.insert("kind".into(), Value::from(b.kind.as_str()));
                o.insert("rests_on".into(), Value::from(b.rests_on));
            }
        };
        if let Some(obj) = v.as_object_mut() {
            match obj.get_mut(ROWS_KEY).and_then(Value::as_array_mut) {
                Some(rows) if !rows.is_empty() => rows
                    .iter_mut()
                    .filter_map(Value::as_object_mut)
                    .for_each(fill),
                _ => fill(obj),
            }
        }
        Header::from_json(&v)
    }

    /// Reads and checks the header: the object opens with [`HEADER_KEYS`] in order, every
    /// value has its type, verdicts and control kinds use the one spelling, and a `present`
    /// or `absent` verdict is backed by passing positive and negative controls.
    pub fn from_json(v: &Value) -> Result<Header> {
        let obj = v.as_object().context("a report is a JSON object")?;
        let keys: Vec<&str> = obj
            .keys()
            .take(HEADER_KEYS.len())
            .map(String::as_str)
            .collect();
        ensure!(
            keys == HEADER_KEYS,
            "the report does not open with the header keys {HEADER_KEYS:?} (it opens with {keys:?})"
        );
        let text = |k: &str| -> Result<String> {
            obj[k]
                .as_str()
                .map(str::to_string)
                .with_context(|| format!("header key '{k}' is not a string"))
        };
        let controls = obj["controls"]
            .as_array()
            .context("'controls' is not a list")?
            .iter()
            .map(Control::from_json)
            .collect::<Result<Vec<_>>>()?;
        let verdict = Verdict::parse(&text("verdict")?)?;
        if matches!(verdict, Verdict::Present | Verdict::Absent) {
            if let Some(problem) = controls_problem(&controls) {
                bail!("verdict {verdict} although the controls do not allow one ({problem})");
            }
        }
        let problem = controls_problem(&controls);
        let mut rows = Vec::new();
        if let Some(list) = obj.get(ROWS_KEY) {
            for r in list.as_array().context("'verdict_rows' is not a list")? {
                let field = |k: &str| {
                    r.get(k)
                        .and_then(Value::as_str)
                        .with_context(|| format!("a row without a string '{k}'"))
                };
                let row_verdict = Verdict::parse(field("verdict")?)?;
                if let (Some(p), Verdict::Present | Verdict::Absent) = (&problem, row_verdict) {
                    bail!(
                        "row {} is {row_verdict} although the controls do not allow one ({p})",
                        field("name")?
                    );
                }
                check_kind(r, engine_of(obj)?, field("name")?)
                    .with_context(|| format!("row {}", field("name").unwrap_or("?")))?;
                check_can_fail(r, row_verdict, field("evidence")?)
                    .with_context(|| format!("row {}", field("name").unwrap_or("?")))?;
                check_contract(r, row_verdict)
                    .with_context(|| format!("row {}", field("name").unwrap_or("?")))?;
                rows.push((
                    field("name")?.to_string(),
                    row_verdict,
                    field("evidence")?.to_string(),
                ));
            }
        }
        let engine = engine_of(obj)?;
        if rows.is_empty() {
            check_kind(v, engine, &text("name")?)?;
            check_contract(v, verdict)?;
        } else {
            ensure!(
                obj.get("kind").is_none(),
                "a report with verdict rows states each row's kind, not its own"
            );
        }
        check_can_fail(v, verdict, &text("evidence")?)?;
        let detector = match obj.get("detector") {
            None => None,
            Some(d) => {
                let field = |k: &str| {
                    (d.get(k).and_then(Value::as_str).map(str::to_string))
                        .with_context(|| format!("'detector' without a string '{k}'"))
                };
                Some((field("package")?, field("version")?))
            }
        };
        Ok(Header {
            subject: ReportId {
                finding: text("finding")?,
                name: text("name")?,
                engine: engine.to_string(),
                build: text("build")?,
                build_detail: text("build_detail")?,
                sources: Sources::NONE,
                detector: None,
            },
            verdict,
            evidence: text("evidence")?,
            controls,
            rows,
            detector,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sources that state the contract of the `copy` verdicts the tests use.
    const TEST_SOURCES: Sources = Sources(&[(
        "include/llama.h",
        "// header\n        // copy mutable state from src into dst while keeping dst's references\n",
    )]);

    fn subject() -> ReportId {
        ReportId {
            finding: "F9".into(),
            name: "copy-planted".into(),
            engine: DEFAULT_ENGINE.into(),
            build: "b1".into(),
            build_detail: "test build".into(),
            sources: TEST_SOURCES,
            detector: None,
        }
    }

    fn both(pos: bool, neg: bool) -> Vec<Control> {
        vec![
            Control::positive("bad one", pos, "flagged?"),
            Control::negative("good one", neg, "quiet?"),
        ]
    }

    #[test]
    fn a_failed_or_missing_control_makes_the_verdict_inconclusive() {
        for m in [Verdict::Present, Verdict::Absent, Verdict::Undecided] {
            assert_eq!(judge(m, &both(true, true)), m);
        }
        for (p, n) in [(false, true), (true, false), (false, false)] {
            for m in Verdict::ALL {
                // A sampler the build lacks stays `not offered`: no control changes the API.
                let want = if m == Verdict::NotOffered {
                    m
                } else {
                    Verdict::Inconclusive
                };
                assert_eq!(judge(m, &both(p, n)), want, "{m}");
            }
        }
        assert_eq!(judge(Verdict::NotOffered, &[]), Verdict::NotOffered);
        let only_positive = [Control::positive("bad", true, "")];
        let only_negative = [Control::negative("good", true, "")];
        for (m, controls) in [
            (Verdict::Present, &only_positive[..]),
            (Verdict::Absent, &only_negative),
            (Verdict::Absent, &[]),
        ] {
            assert_eq!(judge(m, controls), Verdict::Inconclusive, "{controls:?}");
        }
    }

    #[test]
    fn rows_obey_the_report_controls() {
        let mut r = Report::new(subject(), Verdict::Present, "e", both(true, false));
        r.add_row("copy-x", Verdict::Present, "row", ());
        assert_eq!(r.verdict(), Verdict::Inconclusive);
        assert_eq!(r.rows()[0].verdict(), Verdict::Inconclusive);
        assert_eq!(r.rows()[0].measured(), Verdict::Present);
    }

    /// A body whose `verdict` key must not replace the computed one.
    #[derive(Serialize)]
    struct Smuggling {
        zeta: u32,
        alpha: u32,
        verdict: &'static str,
    }

    #[test]
    fn json_opens_with_the_header_and_reads_back() {
        let mut r = Report::new(
            subject(),
            Verdict::Absent,
            "all rows agree",
            both(true, true),
        )
        .with_body(Smuggling {
            zeta: 1,
            alpha: 2,
            verdict: "smuggled",
        });
        r.add_row(
            "copy-sub",
            Verdict::Present,
            "differs at 0",
            std::collections::BTreeMap::from([("first_step", 0)]),
        );
        let v = r.to_json();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(&keys[..7], HEADER_KEYS);
        assert_eq!(
            keys[7..],
            ["engine", "measured", "verdict_rows", "zeta", "alpha"]
        );
        assert_eq!(v["verdict_rows"][0]["kind"], "defect");
        assert_eq!(v["verdict"], "absent");
        // A results file written before the engine key is llama.cpp's; a malformed key is
        // refused.
        let mut old = v.clone();
        old.as_object_mut().unwrap().remove("engine");
        assert_eq!(
            Header::from_json(&old).unwrap().subject.engine,
            DEFAULT_ENGINE
        );
        let mut bad = v.clone();
        bad["engine"] = 3.into();
        assert!(Header::from_json(&bad).is_err());
        let h = Header::from_json(&serde_json::from_str(&r.to_json_text()).unwrap()).unwrap();
        assert_eq!(h.verdict, Verdict::Absent);
        // The sources stay in the binary that wrote the report; the file quotes what it needs.
        let read_back = ReportId {
            sources: Sources::NONE,
            ..subject()
        };
        assert_eq!(h.subject, read_back);
        assert_eq!(h.controls, both(true, true));
        assert_eq!(
            h.rows,
            vec![(
                "copy-sub".to_string(),
                Verdict::Present,
                "differs at 0".to_string()
            )]
        );
    }

    /// A defect quotes its contract from the build's sources; where they do not state it, the
    /// verdict is `not offered` with what was measured, and a file whose defect verdict quotes
    /// nothing is refused.
    #[test]
    fn a_defect_quotes_its_contract_or_is_not_offered() {
        let mut r = Report::new(subject(), Verdict::Present, "e", both(true, true));
        r.add_row("copy-x", Verdict::Present, "differs at 0", ());
        let c = r.rows()[0].contract.clone().unwrap();
        assert_eq!((c.file.as_str(), c.line), ("include/llama.h", 2));
        assert!(c.quote.starts_with("// copy mutable state"), "{c:?}");
        assert!(r
            .to_text()
            .contains("copy-x  include/llama.h:2: \"// copy mutable"));
        // The same row on a build that does not state it.
        let bare = ReportId {
            sources: Sources::NONE,
            ..subject()
        };
        let mut r = Report::new(bare.clone(), Verdict::Present, "e", both(true, true));
        r.add_row("copy-x", Verdict::Present, "differs at 0", ());
        let row = &r.rows()[0];
        assert_eq!(
            (row.verdict(), row.contract.is_none()),
            (Verdict::NotOffered, true)
        );
        assert!(
            row.evidence.contains("measured present: differs at 0"),
            "{}",
            row.evidence
        );
        // A stand-alone defect report the same way, both ways.
        let stated = Report::new(subject(), Verdict::Present, "e", both(true, true));
        assert_eq!(stated.verdict(), Verdict::Present);
        assert!(stated.to_json()["contract"]["line"] == 2);
        let unstated = Report::new(bare, Verdict::Present, "e", both(true, true));
        assert_eq!(unstated.verdict(), Verdict::NotOffered);
        assert!(unstated
            .to_text()
            .ends_with("copy-planted: not offered on b1 (defect)\n"));
        // A divergence quotes nothing and needs nothing.
        let mut d = Report::new(subject(), Verdict::Present, "e", both(true, true));
        d.add_row("penalty-scope-divergence", Verdict::Present, "parts", ());
        assert_eq!(d.rows()[0].verdict(), Verdict::Present);
        assert_eq!(d.rows()[0].contract, None);
        // Reading back: a defect verdict without its quote is refused.
        let mut v = stated.to_json();
        Header::from_json(&v).unwrap();
        v.as_object_mut().unwrap().remove("contract");
        let e = Header::from_json(&v).unwrap_err().to_string();
        assert!(e.contains("without the contract"), "{e}");
        let mut v = r.to_json();
        v["verdict_rows"][0]["verdict"] = "present".into();
        let e = format!("{:#}", Header::from_json(&v).unwrap_err());
        assert!(e.contains("without the contract"), "{e}");
    }

    #[test]
    fn headers_that_break_the_contract_are_refused() {
        let good = Report::new(subject(), Verdict::Present, "e", both(true, true)).to_json();
        assert!(Header::from_json(&good).is_ok());
        let mut reordered = Map::new();
        reordered.insert("name".into(), good["name"].clone());
        for (k, v) in good.as_object().unwrap() {
            reordered.insert(k.clone(), v.clone());
        }
        assert!(Header::from_json(&Value::Object(reordered)).is_err());
        let mut bad = good.clone();
        bad["verdict"] = "invalid".into();
        assert!(Header::from_json(&bad).is_err());
        let mut unbacked = good.clone();
        unbacked["controls"][1]["passed"] = false.into();
        assert!(
            Header::from_json(&unbacked).is_err(),
            "present with a failed control"
        );
        let mut row = Report::new(subject(), Verdict::Present, "e", both(true, true));
        row.add_row("copy-r", Verdict::Present, "e", ());
        let mut row = row.to_json();
        row["controls"][0]["passed"] = false.into();
        row["verdict"] = "inconclusive".into();
        assert!(
            Header::from_json(&row).is_err(),
            "a present row under a failed control"
        );
        let mut kind = good;
        kind["controls"][0]["kind"] = "sanity".into();
        assert!(Header::from_json(&kind).is_err());
        let bare = serde_json::from_str(r#"{"verdict": "present"}"#).unwrap();
        assert!(Header::from_json(&bare).is_err());
    }

    #[test]
    fn text_is_rendered_from_the_same_value() {
        let r = Report::new(subject(), Verdict::Present, "it differs", both(true, false))
            .with_text("table\n");
        let t = r.to_text();
        assert!(t.starts_with("F9 copy-planted on test build\n\ntable\n"));
        assert!(t.contains("FAILED negative     good one: quiet?"));
        assert!(t.contains("evidence: it differs\n"));
        assert!(t.ends_with(
            "copy-planted: inconclusive on b1 (defect) (measured present; the controls do not allow it)\n"
        ));
    }

    #[test]
    fn every_verdict_states_the_catalogs_kind() {
        let alone = Report::new(subject(), Verdict::Present, "e", both(true, true)).to_json();
        assert_eq!(alone["kind"], "defect");
        assert!(Header::from_json(&alone).is_ok());
        let mut wrong = alone.clone();
        wrong["kind"] = "divergence".into();
        assert!(
            Header::from_json(&wrong).is_err(),
            "a kind the catalog does not give"
        );
        let mut missing = alone.clone();
        missing.as_object_mut().unwrap().remove("kind");
        assert!(Header::from_json(&missing).is_err(), "no kind");
        let mut reworded = alone.clone();
        reworded["rests_on"] = "something else".into();
        assert!(Header::from_json(&reworded).is_err(), "another basis");
        let mut rows = Report::new(subject(), Verdict::Present, "e", both(true, true));
        rows.add_row("copy-a", Verdict::Present, "e", ());
        let rows = rows.to_json();
        assert!(
            rows.get("kind").is_none(),
            "a report with rows states no kind of its own"
        );
        let mut stated = rows.clone();
        stated["kind"] = "defect".into();
        assert!(Header::from_json(&stated).is_err());
        let mut unknown = ReportId {
            name: "no-such-verdict".into(),
            ..subject()
        };
        unknown.finding = "F0".into();
        let r = Report::new(unknown, Verdict::Present, "e", both(true, true));
        assert!(
            std::panic::catch_unwind(|| r.to_json()).is_err(),
            "an unknown verdict has no kind"
        );
    }

    #[test]
    fn a_verdict_that_cannot_fail_is_refused_and_a_note_is_not_a_verdict() {
        let mut r = Report::new(subject(), Verdict::Absent, "e", both(true, true));
        r.add_row(
            "copy-a",
            Verdict::Absent,
            "the same arithmetic on both sides, so it cannot show a defect",
            (),
        );
        assert!(Header::from_json(&r.to_json()).is_err());
        let mut r = Report::new(subject(), Verdict::Absent, "e", both(true, true));
        r.add_row(
            "copy-a",
            Verdict::Absent,
            "agrees",
            std::collections::BTreeMap::from([("can_fail", false)]),
        );
        assert!(Header::from_json(&r.to_json()).is_err());
        let mut r = Report::new(subject(), Verdict::Absent, "e", both(true, true));
        r.add_row("copy-a", Verdict::Absent, "agrees", ());
        r.add_note(
            "zero-boundary",
            "both give 0 and -0 bit for bit; IEEE arithmetic requires it",
            (),
        );
        let v = r.to_json();
        let h = Header::from_json(&v).unwrap();
        assert_eq!(h.rows.len(), 1, "a note is no row");
        assert_eq!(v["notes"][0]["name"], "zero-boundary");
        assert!(r.to_text().contains("== notes"));
    }
}
