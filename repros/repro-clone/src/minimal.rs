//! The minimal reproduction (F1 a/b): one window, one history, one clone, one continuation,
//! with the controls that let it judge: the readout checked on its own and on the subject, and
//! two planted ledgers run through the same scenario (one whose clone keeps the counts,
//! which must read `absent`, and one whose clone drops them, which must read `present`).

use crate::counts::{Counts, Defect, PenaltiesCounts, PlantedCounts};
use anyhow::{bail, Result};
use ledger::SamplerKind;
use oracle::penalty::CountProbe;
use oracle::window::{histogram, WindowLen};
use oracle::TokenId;
use report::{Control, ControlKind, Report, Table, Verdict};
use serde::{Serialize, Serializer};
use std::collections::BTreeMap;
use subject::{BuildInfo, NotOffered};

/// Counts the oracle's probe must invert exactly before anything is judged.
pub const PROBE_SELF_CHECK_RANGE: i64 = 1 << 12;

/// The published case: window 4, history 5,5,6, then 7,8.
pub fn published() -> Scenario {
    Scenario {
        last_n: WindowLen(4),
        history: [5, 5, 6].map(TokenId).to_vec(),
        then: [7, 8].map(TokenId).to_vec(),
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    pub last_n: WindowLen,
    pub history: Vec<TokenId>,
    pub then: Vec<TokenId>,
}

impl Scenario {
    /// Every id that appears in history or then, ascending, without repeats.
    pub fn ids(&self) -> Vec<TokenId> {
        let mut ids: Vec<TokenId> = self.history.iter().chain(&self.then).copied().collect();
        ids.sort();
        ids.dedup();
        ids
    }
}

/// Counts per id (aligned with [`Scenario::ids`]) at the three moments, from a ledger and
/// from the oracle.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseCounts {
    pub ids: Vec<TokenId>,
    pub original: Vec<i64>,
    pub clone: Vec<i64>,
    pub clone_after: Vec<i64>,
    pub oracle_original: Vec<i64>,
    pub oracle_clone_after: Vec<i64>,
    /// Calibration: `k` accepts of one id in a fresh ledger read back as `k`, for every `k`
    /// the window can hold.
    pub calibration_ok: bool,
}

impl CaseCounts {
    /// The clone defect is present when the clone, right away or after the continuation,
    /// disagrees with what the oracle says any sampler in that state must hold.
    pub fn clone_defect_present(&self) -> bool {
        self.clone != self.oracle_original || self.clone_after != self.oracle_clone_after
    }

    /// The original's accept path agrees with the oracle (if not, the verdict is about a
    /// different defect and the readout of the clone cannot be interpreted).
    pub fn original_ok(&self) -> bool {
        self.original == self.oracle_original
    }
}

fn counts_for(ids: &[TokenId], history: &[TokenId], last_n: WindowLen) -> Vec<i64> {
    let h = histogram(history, last_n);
    ids.iter()
        .map(|id| h.get(id).copied().unwrap_or(0))
        .collect()
}

/// A fresh ledger that accepted one id `k` times must read `k`, for `k` in `0..=last_n`.
fn calibrate<L: Counts>(
    ids: &[TokenId],
    last_n: WindowLen,
    make: &dyn Fn(&[TokenId], WindowLen) -> Result<L>,
) -> Result<bool> {
    let mut got = vec![0; ids.len()];
    for k in 0..=last_n.0 {
        let mut ledger = make(ids, last_n)?;
        for _ in 0..k {
            ledger.accept(ids[0])?;
        }
        ledger.read(&mut got)?;
        if got[0] != k as i64 || got[1..].iter().any(|&c| c != 0) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Runs the scenario on any ledger: the subject's penalties stage, or a planted ledger.
pub fn run_with<L: Counts>(
    s: &Scenario,
    make: &dyn Fn(&[TokenId], WindowLen) -> Result<L>,
) -> Result<CaseCounts> {
    if s.history.is_empty() {
        bail!("the history must name at least one token id");
    }
    let ids = s.ids();
    let calibration_ok = calibrate(&ids, s.last_n, make)?;
    let mut original = make(&ids, s.last_n)?;
    for &t in &s.history {
        original.accept(t)?;
    }
    let mut clone = original.fork()?;
    let read = |l: &mut L| -> Result<Vec<i64>> {
        let mut out = vec![0; ids.len()];
        l.read(&mut out)?;
        Ok(out)
    };
    let original_counts = read(&mut original)?;
    let clone_counts = read(&mut clone)?;
    for &t in &s.then {
        clone.accept(t)?;
    }
    let clone_after = read(&mut clone)?;
    let full: Vec<TokenId> = s.history.iter().chain(&s.then).copied().collect();
    Ok(CaseCounts {
        oracle_original: counts_for(&ids, &s.history, s.last_n),
        oracle_clone_after: counts_for(&ids, &full, s.last_n),
        ids,
        original: original_counts,
        clone: clone_counts,
        clone_after,
        calibration_ok,
    })
}

/// Runs the scenario on the penalties stage of `kind`.
pub fn run(s: &Scenario, cp: CountProbe, kind: SamplerKind) -> Result<CaseCounts> {
    run_with(s, &|ids: &[TokenId], n| {
        PenaltiesCounts::new(ids, n, cp, kind)
    })
}

/// The same scenario through a planted ledger.
pub fn run_planted(s: &Scenario, defect: Defect) -> Result<CaseCounts> {
    run_with(s, &|ids: &[TokenId], n| {
        Ok(PlantedCounts::new(ids, n, defect))
    })
}

/// The controls of the minimal case: the readout calibrated on the subject, and the two
/// planted ledgers through the same scenario and the same comparison. (The readout's own round
/// trip is a fixed property of its constants, checked by the oracle's tests and reported in
/// the data, not a control: it cannot fail at run time.)
pub fn controls(s: &Scenario, subject: &CaseCounts) -> Result<Vec<Control>> {
    let calibrated = if subject.calibration_ok { "yes" } else { "NO" };
    let mut c = vec![Control::oracle_check(
        CALIBRATION,
        subject.calibration_ok,
        format!(
            "a fresh sampler that accepted one id k times reads k, k = 0..={}: {calibrated}",
            s.last_n.0
        ),
    )];
    c.extend(planted_controls(s)?);
    Ok(c)
}

const CALIBRATION: &str = "readout calibrated on the subject";

/// The two planted ledgers through the scenario. They are plain Rust, not llama.cpp
/// samplers, so they run on every build.
fn planted_controls(s: &Scenario) -> Result<Vec<Control>> {
    let clean = run_planted(s, Defect::None)?;
    let dropping = run_planted(s, Defect::CloneDropsCounts)?;
    let reads = |o: &CaseCounts| {
        let (now, after) = (
            fmt_counts(&o.ids, &o.clone),
            fmt_counts(&o.ids, &o.clone_after),
        );
        format!("same scenario: clone reads {now} -> {after}")
    };
    Ok(vec![
        Control::positive(
            "shadow ledger whose clone drops the counts",
            dropping.clone_defect_present(),
            reads(&dropping),
        ),
        Control::negative(
            "shadow ledger whose clone copies the counts",
            !clean.clone_defect_present(),
            reads(&clean),
        ),
    ])
}

/// The verdict's name: the finding, and the fix when it is the one under test.
pub fn verdict_name(kind: SamplerKind) -> &'static str {
    match kind {
        SamplerKind::Builtin => "clone-drops-token-count",
        SamplerKind::LedgerPenalties => "clone-drops-token-count+ledger",
    }
}

pub fn fmt_ids(ids: &[TokenId]) -> String {
    let ids: Vec<String> = ids.iter().map(|t| t.0.to_string()).collect();
    ids.join(",")
}

pub fn fmt_counts(ids: &[TokenId], counts: &[i64]) -> String {
    let pairs = ids
        .iter()
        .zip(counts)
        .map(|(id, c)| format!("{}:{}", id.0, c));
    pairs.collect::<Vec<_>>().join(" ")
}

/// The case in one line: every id's count in the clone, then and as the oracle has it.
pub fn evidence(s: &Scenario, o: &CaseCounts) -> String {
    format!(
        "window {} history {} then {}: clone reads {} -> {} (oracle {} -> {})",
        s.last_n.0,
        fmt_ids(&s.history),
        fmt_ids(&s.then),
        fmt_counts(&o.ids, &o.clone),
        fmt_counts(&o.ids, &o.clone_after),
        fmt_counts(&o.ids, &o.oracle_original),
        fmt_counts(&o.ids, &o.oracle_clone_after),
    )
}

/// Counts keyed by id, in the ids' order.
struct ById<'a>(&'a [TokenId], &'a [i64]);

impl Serialize for ById<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|id| id.0.to_string()).zip(self.1))
    }
}

#[derive(Serialize)]
struct Readout {
    base_logit: f32,
    freq: f32,
    round_trip_exact_range: i64,
    round_trip_exact: bool,
    subject_calibration_exact: bool,
}

/// The case's data, every count the subject and the oracle gave.
#[derive(Serialize)]
pub struct CaseData<'a> {
    last_n: usize,
    history: Vec<i32>,
    then: Vec<i32>,
    readout: Readout,
    original: ById<'a>,
    clone: ById<'a>,
    clone_after: ById<'a>,
    oracle_original: ById<'a>,
    oracle_clone: ById<'a>,
    oracle_clone_after: ById<'a>,
    original_matches_oracle: bool,
}

pub fn data<'a>(s: &Scenario, o: &'a CaseCounts, cp: CountProbe) -> CaseData<'a> {
    let by_id = |counts: &'a [i64]| ById(&o.ids, counts);
    CaseData {
        last_n: s.last_n.0,
        history: s.history.iter().map(|t| t.0).collect(),
        then: s.then.iter().map(|t| t.0).collect(),
        readout: Readout {
            base_logit: cp.base_logit,
            freq: cp.freq,
            round_trip_exact_range: PROBE_SELF_CHECK_RANGE,
            round_trip_exact: cp.self_check(PROBE_SELF_CHECK_RANGE).is_ok(),
            subject_calibration_exact: o.calibration_ok,
        },
        original: by_id(&o.original),
        clone: by_id(&o.clone),
        clone_after: by_id(&o.clone_after),
        oracle_original: by_id(&o.oracle_original),
        oracle_clone: by_id(&o.oracle_original),
        oracle_clone_after: by_id(&o.oracle_clone_after),
        original_matches_oracle: o.original_ok(),
    }
}

/// The human-readable table.
pub fn to_text(s: &Scenario, o: &CaseCounts, cp: CountProbe) -> String {
    let mut out = format!(
        "case: penalty_last_n={} history=[{}] then=[{}]\n",
        s.last_n.0,
        fmt_ids(&s.history),
        fmt_ids(&s.then)
    );
    out += &format!(
        "readout: count = ({} - logit') / {}\n",
        cp.base_logit, cp.freq
    );
    let mut table = Table::new().left("", 5).right(" ", 8);
    for width in [6, 5, 6, 10, 6] {
        table = table.right("  ", width);
    }
    table.row([
        "id",
        "original",
        "oracle",
        "clone",
        "oracle",
        "clone+then",
        "oracle",
    ]);
    for (i, id) in o.ids.iter().enumerate() {
        table.row([
            id.0 as i64,
            o.original[i],
            o.oracle_original[i],
            o.clone[i],
            o.oracle_original[i],
            o.clone_after[i],
            o.oracle_clone_after[i],
        ]);
    }
    out += &table.render();
    if !o.original_ok() {
        out += "note: the original itself disagrees with the oracle (an accept-path defect)\n";
    }
    out
}

/// The minimal mode's report: the case, judged under its controls.
pub fn report(
    s: &Scenario,
    o: &CaseCounts,
    cp: CountProbe,
    kind: SamplerKind,
    build: &BuildInfo,
) -> Result<Report> {
    Ok(Report::new(
        build.report_subject(&crate::FINDING, verdict_name(kind)),
        Verdict::found(o.clone_defect_present()),
        evidence(s, o),
        controls(s, o)?,
    )
    .with_body(BTreeMap::from([("sampler", kind.as_str())]))
    .with_body(data(s, o, cp))
    .with_text(to_text(s, o, cp)))
}

/// The report on a build that cannot make the penalties stage of `kind` (ledger-penalties is
/// written in Rust): `not offered`, naming what the build lacks. The readout cannot be
/// calibrated on a sampler that was not built; the planted ledgers still run.
pub fn not_offered_report(
    s: &Scenario,
    why: &NotOffered,
    kind: SamplerKind,
    build: &BuildInfo,
) -> Result<Report> {
    let mut controls = vec![Control::not_run(ControlKind::OracleCheck, CALIBRATION, why)];
    controls.extend(planted_controls(s)?);
    Ok(Report::new(
        build.report_subject(&crate::FINDING, verdict_name(kind)),
        Verdict::NotOffered,
        format!("the {} penalties stage not run: {why}", kind.as_str()),
        controls,
    )
    .with_body(BTreeMap::from([
        ("sampler", kind.as_str().to_string()),
        ("not_offered", why.to_string()),
    ]))
    .with_text(format!(
        "case: penalty_last_n={} history=[{}] then=[{}]\n  not run: {why}\n",
        s.last_n.0,
        fmt_ids(&s.history),
        fmt_ids(&s.then)
    )))
}
