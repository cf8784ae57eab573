//! The minimal reproduction (F1 a/b): one window, one history, one clone, one continuation.

use crate::ledger::{Ledger, PenaltiesLedger, SamplerKind};
use anyhow::{bail, Result};
use oracle::penalty::CountProbe;
use oracle::window::{histogram, WindowLen};
use oracle::TokenId;
use serde_json::{json, Map, Value};

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

/// Counts per id (aligned with [`Scenario::ids`]) at the three moments, from the subject and
/// from the oracle.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub ids: Vec<TokenId>,
    pub original: Vec<i64>,
    pub clone: Vec<i64>,
    pub clone_after: Vec<i64>,
    pub oracle_original: Vec<i64>,
    pub oracle_clone_after: Vec<i64>,
    /// Subject calibration: `k` accepts of one id in a fresh sampler read back as `k`,
    /// for every `k` the window can hold.
    pub calibration_ok: bool,
}

impl Outcome {
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

/// Checks the readout on the real subject: a fresh sampler that accepted one id `k` times
/// must read `k`, for `k` in `0..=last_n`.
fn calibrate(
    ids: &[TokenId],
    last_n: WindowLen,
    cp: CountProbe,
    kind: SamplerKind,
) -> Result<bool> {
    let mut got = vec![0; ids.len()];
    for k in 0..=last_n.0 {
        let mut ledger = PenaltiesLedger::new(ids, last_n, cp, kind)?;
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

/// Runs the scenario on the penalties stage of `kind`.
pub fn run(s: &Scenario, cp: CountProbe, kind: SamplerKind) -> Result<Outcome> {
    if s.history.is_empty() {
        bail!("the history must name at least one token id");
    }
    let ids = s.ids();
    let calibration_ok = calibrate(&ids, s.last_n, cp, kind)?;
    let mut original = PenaltiesLedger::new(&ids, s.last_n, cp, kind)?;
    for &t in &s.history {
        original.accept(t)?;
    }
    let mut clone = original.fork()?;
    let read = |l: &mut PenaltiesLedger| -> Result<Vec<i64>> {
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
    Ok(Outcome {
        oracle_original: counts_for(&ids, &s.history, s.last_n),
        oracle_clone_after: counts_for(&ids, &full, s.last_n),
        ids,
        original: original_counts,
        clone: clone_counts,
        clone_after,
        calibration_ok,
    })
}

fn as_map(ids: &[TokenId], counts: &[i64]) -> Value {
    let m: Map<String, Value> = ids
        .iter()
        .zip(counts)
        .map(|(id, c)| (id.0.to_string(), json!(c)))
        .collect();
    Value::Object(m)
}

pub fn verdict_word(present: bool) -> &'static str {
    if present {
        "present"
    } else {
        "absent"
    }
}

/// The `--json` object: required keys plus the oracle's view of every moment.
pub fn to_json(s: &Scenario, o: &Outcome, build: &subject::BuildInfo, cp: CountProbe) -> Value {
    json!({
        "build": build.tag(),
        "build_detail": build.describe(),
        "finding": "clone-drops-token-count",
        "last_n": s.last_n.0,
        "history": s.history.iter().map(|t| t.0).collect::<Vec<_>>(),
        "then": s.then.iter().map(|t| t.0).collect::<Vec<_>>(),
        "readout": {"base_logit": cp.base_logit, "freq": cp.freq, "subject_calibration_exact": o.calibration_ok},
        "original": as_map(&o.ids, &o.original),
        "clone": as_map(&o.ids, &o.clone),
        "clone_after": as_map(&o.ids, &o.clone_after),
        "oracle_original": as_map(&o.ids, &o.oracle_original),
        "oracle_clone": as_map(&o.ids, &o.oracle_original),
        "oracle_clone_after": as_map(&o.ids, &o.oracle_clone_after),
        "original_matches_oracle": o.original_ok(),
        "verdict": verdict_word(o.clone_defect_present()),
    })
}

/// The human-readable table and verdict line.
pub fn to_text(s: &Scenario, o: &Outcome, build: &subject::BuildInfo, cp: CountProbe) -> String {
    let list = |v: &[TokenId]| {
        v.iter()
            .map(|t| t.0.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut out = String::new();
    out += &format!("build: {}\n", build.describe());
    out += &format!(
        "case: penalty_last_n={} history=[{}] then=[{}]\n",
        s.last_n.0,
        list(&s.history),
        list(&s.then)
    );
    out += &format!(
        "readout: count = ({} - logit') / {}; subject calibration (k accepts read as k, k=0..={}): {}\n",
        cp.base_logit,
        cp.freq,
        s.last_n.0,
        if o.calibration_ok { "exact" } else { "FAILED" }
    );
    out += "id    original  oracle  clone  oracle  clone+then  oracle\n";
    for (i, id) in o.ids.iter().enumerate() {
        out += &format!(
            "{:<5} {:>8}  {:>6}  {:>5}  {:>6}  {:>10}  {:>6}\n",
            id.0,
            o.original[i],
            o.oracle_original[i],
            o.clone[i],
            o.oracle_original[i],
            o.clone_after[i],
            o.oracle_clone_after[i]
        );
    }
    if !o.original_ok() {
        out += "note: the original itself disagrees with the oracle (an accept-path defect)\n";
    }
    out += &format!(
        "clone-drops-token-count: {} on {}\n",
        verdict_word(o.clone_defect_present()),
        build.tag()
    );
    out
}
