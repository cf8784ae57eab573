//! The complete F1 audit on the linked build: readout checks, the published case, the
//! exhaustive sweep with clone equivalence and reset checks, the controls, and the
//! per-sampler clone table. Text and JSON are rendered from the same [`Audit`] value.

use crate::ledger::{Defect, Ledger, PenaltiesLedger, SamplerKind, ShadowLedger};
use crate::minimal::{self, verdict_word, Outcome, Scenario};
use crate::stateful::{self, Equivalence};
use crate::sweep::{self, Case, Checks, Stats};
use anyhow::{Context, Result};
use oracle::penalty::CountProbe;
use oracle::window::WindowLen;
use oracle::TokenId;
use serde_json::{json, Value};
use std::time::Duration;
use subject::BuildInfo;

/// Counts the oracle's probe must invert exactly before anything is judged.
pub const PROBE_SELF_CHECK_RANGE: i64 = 1 << 12;

/// Subject-side negative control (F1 e): id 0 accepted, then `n` accepts of other ids.
/// Before the last of them it must still read 1; after it, exactly 0.
#[derive(Debug, Clone, PartialEq)]
pub struct EvictionControl {
    pub last_n: usize,
    pub before_last: i64,
    pub after: i64,
}

impl EvictionControl {
    pub fn passed(&self) -> bool {
        self.before_last == 1 && self.after == 0
    }
}

pub fn eviction_control(
    last_n: usize,
    cp: CountProbe,
    kind: SamplerKind,
) -> Result<EvictionControl> {
    let ids: Vec<TokenId> = (0..=last_n as i32).map(TokenId).collect();
    let mut ledger = PenaltiesLedger::new(&ids, WindowLen(last_n), cp, kind)?;
    let mut counts = vec![0; ids.len()];
    ledger.accept(TokenId(0))?;
    let mut before_last = 0;
    for k in 1..=last_n {
        if k == last_n {
            ledger.read(&mut counts)?;
            before_last = counts[0];
        }
        // Cycle through the other ids so the evicting accepts include repeats when n > 1.
        ledger.accept(TokenId(1 + ((k - 1) % last_n.max(1)) as i32))?;
    }
    ledger.read(&mut counts)?;
    Ok(EvictionControl {
        last_n,
        before_last,
        after: counts[0],
    })
}

/// A detector control: a shadow ledger with a planted defect, and what the sweep made of it.
#[derive(Debug, Clone, PartialEq)]
pub struct DetectorControl {
    pub defect: Defect,
    pub stats: Stats,
}

impl DetectorControl {
    /// What the control must show: the clean shadow passes everything, the off-by-one window
    /// fails the accept check, the dropped counts fail only the clone check.
    pub fn passed(&self) -> bool {
        let s = &self.stats;
        match self.defect {
            Defect::None => {
                s.mismatches == 0 && s.clone_step_mismatches == 0 && s.reset_mismatches == 0
            }
            Defect::OffByOneWindow => s.mismatches > 0,
            Defect::CloneDropsCounts => s.mismatches == 0 && s.divergent_clones > 0,
        }
    }

    pub fn label(&self) -> &'static str {
        match self.defect {
            Defect::None => "clean shadow (negative)",
            Defect::OffByOneWindow => "off-by-one window shadow (positive)",
            Defect::CloneDropsCounts => "clone-drops-counts shadow (positive)",
        }
    }
}

pub struct Audit {
    /// The penalties stage under test.
    pub kind: SamplerKind,
    pub build: BuildInfo,
    pub probe: CountProbe,
    pub probe_self_check: bool,
    pub published: Scenario,
    pub minimal: Outcome,
    pub eviction: Vec<EvictionControl>,
    pub detectors: Vec<DetectorControl>,
    pub domain: Vec<Case>,
    pub sweep: Stats,
    pub accept_time: Duration,
    pub clone_time: Duration,
    pub samplers: Vec<(&'static str, Equivalence)>,
}

/// How many workers the sweep uses. Fixed, so runs are comparable; results do not depend on it.
pub const THREADS: usize = 2;

pub fn run(cp: CountProbe, kind: SamplerKind) -> Result<Audit> {
    let probe_self_check = cp.self_check(PROBE_SELF_CHECK_RANGE).is_ok();
    anyhow::ensure!(
        probe_self_check,
        "the count probe is not exact; nothing can be judged"
    );
    let published = minimal::published();
    let minimal = minimal::run(&published, cp, kind).context("published case")?;
    let eviction = sweep::WINDOWS
        .iter()
        .map(|&n| eviction_control(n, cp, kind))
        .collect::<Result<Vec<_>>>()?;
    let detectors = [
        Defect::None,
        Defect::OffByOneWindow,
        Defect::CloneDropsCounts,
    ]
    .into_iter()
    .map(|defect| {
        let make = move |ids: &[TokenId], n: WindowLen| -> Result<ShadowLedger> {
            Ok(ShadowLedger::new(ids, n, defect))
        };
        let stats = sweep::run(&sweep::control_domain(), &make, Checks::ALL, THREADS)?;
        Ok(DetectorControl { defect, stats })
    })
    .collect::<Result<Vec<_>>>()?;
    let domain = sweep::full_domain();
    let make = |ids: &[TokenId], n: WindowLen| PenaltiesLedger::new(ids, n, cp, kind);
    // Two timed passes over the same sequences: the accept path alone (comparable with the
    // published sweep), then clone equivalence.
    let started = std::time::Instant::now();
    let accept = sweep::run(&domain, &make, Checks::ACCEPT, THREADS)?;
    let accept_time = started.elapsed();
    let started = std::time::Instant::now();
    let clones = sweep::run(&domain, &make, Checks::CLONES, THREADS)?;
    let clone_time = started.elapsed();
    Ok(Audit {
        kind,
        build: BuildInfo::current(),
        probe: cp,
        probe_self_check,
        published,
        minimal,
        eviction,
        detectors,
        domain,
        sweep: Stats::join_passes(accept, clones),
        accept_time,
        clone_time,
        samplers: stateful::table()?,
    })
}

impl Audit {
    /// Every control behaved as designed; if not, no verdict is trustworthy.
    pub fn controls_passed(&self) -> bool {
        self.probe_self_check
            && self.minimal.calibration_ok
            && self.eviction.iter().all(EvictionControl::passed)
            && self.detectors.iter().all(DetectorControl::passed)
    }

    /// The verdict table's name: the finding, and the fix when it is the one under test.
    pub fn name(&self) -> &'static str {
        match self.kind {
            SamplerKind::Builtin => "clone-drops-token-count",
            SamplerKind::Ledger => "clone-drops-token-count+ledger",
        }
    }

    /// F1 is present when the published case or any cloned prefix disagrees with the oracle.
    pub fn clone_defect_present(&self) -> bool {
        self.minimal.clone_defect_present() || self.sweep.clone_step_mismatches > 0
    }

    /// Accept path and reset agree with the oracle everywhere in the domain.
    pub fn ledger_exact(&self) -> bool {
        self.sweep.mismatches == 0 && self.sweep.reset_mismatches == 0
    }

    pub fn verdict(&self) -> &'static str {
        if !self.controls_passed() {
            "inconclusive"
        } else {
            verdict_word(self.clone_defect_present())
        }
    }

    pub fn to_json(&self) -> Value {
        json!({
            "finding": "F1",
            "name": self.name(),
            "sampler": self.kind.as_str(),
            "build": self.build.tag(),
            "build_detail": self.build.describe(),
            "verdict": self.verdict(),
            "evidence": self.evidence(),
            "readout": {
                "base_logit": self.probe.base_logit,
                "freq": self.probe.freq,
                "oracle_self_check_range": PROBE_SELF_CHECK_RANGE,
                "oracle_self_check_exact": self.probe_self_check,
            },
            "minimal": minimal::to_json(&self.published, &self.minimal, &self.build, self.probe),
            "controls": {
                "passed": self.controls_passed(),
                "eviction_reads_zero": self.eviction.iter().map(|e| json!({
                    "last_n": e.last_n, "before_last_evicting_accept": e.before_last,
                    "after": e.after, "passed": e.passed()})).collect::<Vec<_>>(),
                "detectors": self.detectors.iter().map(|d| json!({
                    "control": d.label(), "passed": d.passed(), "stats": d.stats.to_json()}))
                    .collect::<Vec<_>>(),
            },
            "sweep": {
                "domain": self.domain.iter().map(|c| json!({
                    "alphabet": c.alphabet, "last_n": c.last_n.0, "len": c.len,
                    "sequences": c.sequences()})).collect::<Vec<_>>(),
                "ledger_exact": self.ledger_exact(),
                "stats": self.sweep.to_json(),
            },
            "stateful_clone_table": self.samplers.iter()
                .map(|(n, e)| stateful::row_json(n, e)).collect::<Vec<_>>(),
        })
    }

    /// One line for the verdict table.
    pub fn evidence(&self) -> String {
        let m = &self.minimal;
        format!(
            "window {} history {} then {}: clone reads {} -> {} (oracle {} -> {}); {} of {} clones diverge",
            self.published.last_n.0,
            fmt_ids(&self.published.history),
            fmt_ids(&self.published.then),
            fmt_counts(&m.ids, &m.clone),
            fmt_counts(&m.ids, &m.clone_after),
            fmt_counts(&m.ids, &m.oracle_original),
            fmt_counts(&m.ids, &m.oracle_clone_after),
            self.sweep.divergent_clones,
            self.sweep.clones
        )
    }

    /// The whole report: header, minimal case, controls, sweep, stateful table, verdict.
    pub fn to_text(&self) -> String {
        let mut out = format!(
            "F1 clone-drops-token-count audit on {}\n\n",
            self.build.describe()
        );
        out += &format!(
            "readout oracle: counts -{r}..{r} round-trip exactly through L={} F={}: {}\n\n",
            self.probe.base_logit,
            self.probe.freq,
            if self.probe_self_check { "yes" } else { "NO" },
            r = PROBE_SELF_CHECK_RANGE
        );
        out += "== minimal reproduction ==\n";
        out += &minimal::to_text(&self.published, &self.minimal, &self.build, self.probe);
        out += "\n== controls ==\n";
        out += &self.controls_text();
        out += "\n== exhaustive sweep (every sequence, readout after reset and after every accept) ==\n";
        out += &self.sweep_text();
        out += "\n== clone-then-continue, every stateful sampler ==\n";
        out += &self.stateful_text();
        out += &format!(
            "\nclone-drops-token-count: {} on {}\n",
            self.verdict(),
            self.build.tag()
        );
        out
    }

    pub fn controls_text(&self) -> String {
        let mut out = String::new();
        for e in &self.eviction {
            out += &format!(
                "  subject, window {}: evicted id reads {} before its last evicting accept, {} after: {}\n",
                e.last_n,
                e.before_last,
                e.after,
                pass(e.passed())
            );
        }
        for d in &self.detectors {
            out += &format!(
                "  {:<38} accept mismatches {}, divergent clones {}/{}: {}\n",
                d.label(),
                d.stats.mismatches,
                d.stats.divergent_clones,
                d.stats.clones,
                pass(d.passed())
            );
        }
        out
    }

    pub fn sweep_text(&self) -> String {
        let s = &self.sweep;
        let mut out = String::new();
        for c in &self.domain {
            out += &format!("  {:<16} {:>9} sequences\n", c.label(), c.sequences());
        }
        out += &format!(
            "  sequences {}, accept steps {}, accept mismatches {}\n",
            s.sequences, s.steps, s.mismatches
        );
        out += &format!(
            "  reset checks {}, reset mismatches {}\n",
            s.reset_checks, s.reset_mismatches
        );
        if let Some(m) = &s.first_mismatch {
            out += &format!("  first accept mismatch: {}\n", m.describe());
        }
        out += &format!(
            "  clone equivalence: {} clones (one before every accept), {} clone readouts, {} mismatched, {} clones diverged\n",
            s.clones, s.clone_steps, s.clone_step_mismatches, s.divergent_clones
        );
        if let Some(m) = &s.first_clone_mismatch {
            out += &format!("  first clone mismatch: {}\n", m.describe());
        }
        out += &format!(
            "  accept-path ledger: {}\n",
            if self.ledger_exact() {
                "exact"
            } else {
                "WRONG"
            }
        );
        out
    }

    pub fn stateful_text(&self) -> String {
        self.samplers
            .iter()
            .map(|(name, e)| stateful::row_text(name, e) + "\n")
            .collect()
    }

    /// Wall-clock figures: printed to stderr and kept out of the deterministic outputs.
    pub fn timing_text(&self) -> String {
        let s = &self.sweep;
        let accept = self.accept_time.as_secs_f64();
        let clone = self.clone_time.as_secs_f64();
        format!(
            "accept sweep: {} sequences in {:.2} s on {} threads ({:.0} sequences/s); \
             clone equivalence: {} clone readouts in {:.2} s",
            s.sequences,
            accept,
            THREADS,
            s.sequences as f64 / accept,
            s.clone_steps,
            clone
        )
    }

    pub fn timing_json(&self) -> Value {
        json!({
            "build": self.build.tag(),
            "threads": THREADS,
            "accept_sweep_seconds": self.accept_time.as_secs_f64(),
            "accept_sequences_per_second": self.sweep.sequences as f64 / self.accept_time.as_secs_f64(),
            "clone_equivalence_seconds": self.clone_time.as_secs_f64(),
        })
    }
}

fn pass(ok: bool) -> &'static str {
    if ok {
        "ok"
    } else {
        "FAILED"
    }
}

fn fmt_ids(ids: &[TokenId]) -> String {
    ids.iter()
        .map(|t| t.0.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

fn fmt_counts(ids: &[TokenId], counts: &[i64]) -> String {
    ids.iter()
        .zip(counts)
        .map(|(id, c)| format!("{}:{}", id.0, c))
        .collect::<Vec<_>>()
        .join(" ")
}
