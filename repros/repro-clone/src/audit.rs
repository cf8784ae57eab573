//! The complete F1 audit on the linked build: the published case with its controls, the
//! exhaustive sweep with clone equivalence and reset checks, and the detector controls (the
//! planted ledgers through the same sweep). One [`Report`] renders both the JSON and the text.

use crate::counts::{Counts, Defect, PenaltiesCounts, PlantedCounts};
use crate::minimal::{self, CaseCounts, Scenario};
use crate::sweep::{self, Checks, Stats, SweepBudget, SweepSlice};
use anyhow::{Context, Result};
use ledger::SamplerKind;
use oracle::penalty::CountProbe;
use oracle::window::WindowLen;
use oracle::TokenId;
use report::{Control, Report, Verdict};
use serde::Serialize;
use std::time::Duration;
use subject::BuildInfo;

/// A measurement on the subject (not a control: the subject is never its own control): id 0
/// accepted, then `n` accepts of other ids. Before the last of them it must still read 1;
/// after it, exactly 0. A failure is an accept-path defect.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvictionControl {
    pub last_n: usize,
    #[serde(rename = "before_last_evicting_accept")]
    pub before_last: i64,
    pub after: i64,
    /// `before_last` is 1 and `after` is 0: the control passed.
    #[serde(rename = "reads_zero_after")]
    pub passed: bool,
}

pub fn eviction_control(
    last_n: usize,
    cp: CountProbe,
    kind: SamplerKind,
) -> Result<EvictionControl> {
    let ids: Vec<TokenId> = (0..=last_n as i32).map(TokenId).collect();
    let mut ledger = PenaltiesCounts::new(&ids, WindowLen(last_n), cp, kind)?;
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
        passed: before_last == 1 && counts[0] == 0,
    })
}

/// A detector control: a planted ledger with a planted defect, and what the sweep made of it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DetectorControl {
    #[serde(skip)]
    pub defect: Defect,
    #[serde(rename = "control")]
    pub label: &'static str,
    /// What the control must show: the clean planted ledger passes everything, the off-by-one
    /// window fails the accept check, the dropped counts fail only the clone check.
    pub passed: bool,
    pub stats: Stats,
}

impl DetectorControl {
    pub fn new(defect: Defect, stats: Stats) -> DetectorControl {
        let s = &stats;
        let (label, passed) = match defect {
            Defect::None => (
                "clean shadow (negative)",
                s.accept.mismatches == 0
                    && s.clone_reads.mismatches == 0
                    && s.reset.mismatches == 0,
            ),
            Defect::OffByOneWindow => (
                "off-by-one window shadow (positive)",
                s.accept.mismatches > 0,
            ),
            Defect::CloneDropsCounts => (
                "clone-drops-counts shadow (positive)",
                s.accept.mismatches == 0 && s.divergent_clones > 0,
            ),
        };
        DetectorControl {
            defect,
            label,
            passed,
            stats,
        }
    }
}

pub struct Audit {
    /// The penalties stage under test.
    pub kind: SamplerKind,
    pub build: BuildInfo,
    pub probe: CountProbe,
    pub published: Scenario,
    pub minimal: CaseCounts,
    /// The minimal case's controls (readout checks and the two planted ledgers).
    pub minimal_controls: Vec<Control>,
    pub eviction: Vec<EvictionControl>,
    pub detectors: Vec<DetectorControl>,
    pub domain: Vec<SweepSlice>,
    pub sweep: Stats,
    pub accept_time: Duration,
    pub clone_time: Duration,
}

/// How many workers the sweep uses. Fixed, so runs are comparable; results do not depend on it.
pub const THREADS: usize = 2;

pub fn run(cp: CountProbe, kind: SamplerKind, budget: SweepBudget) -> Result<Audit> {
    let published = minimal::published();
    let minimal = minimal::run(&published, cp, kind).context("published case")?;
    let minimal_controls = minimal::controls(&published, &minimal)?;
    let eviction = sweep::WINDOWS
        .iter()
        .map(|&n| eviction_control(n, cp, kind))
        .collect::<Result<Vec<_>>>()?;
    let defects = [
        Defect::None,
        Defect::OffByOneWindow,
        Defect::CloneDropsCounts,
    ];
    let detectors = (defects.into_iter())
        .map(|defect| {
            let make = move |ids: &[TokenId], n: WindowLen| -> Result<PlantedCounts> {
                Ok(PlantedCounts::new(ids, n, defect))
            };
            let stats = sweep::run(&sweep::control_domain(), &make, Checks::All, THREADS)?;
            Ok(DetectorControl::new(defect, stats))
        })
        .collect::<Result<Vec<_>>>()?;
    let domain = sweep::domain(budget);
    let make = |ids: &[TokenId], n: WindowLen| PenaltiesCounts::new(ids, n, cp, kind);
    // Two timed passes over the same sequences: the accept path alone (comparable with the
    // published sweep), then clone equivalence.
    let timed = |checks| -> Result<(Stats, Duration)> {
        let started = std::time::Instant::now();
        let stats = sweep::run(&domain, &make, checks, THREADS)?;
        Ok((stats, started.elapsed()))
    };
    let (accept, accept_time) = timed(Checks::Accept)?;
    let (clones, clone_time) = timed(Checks::Clones)?;
    Ok(Audit {
        kind,
        build: BuildInfo::current(),
        probe: cp,
        published,
        minimal,
        minimal_controls,
        eviction,
        detectors,
        domain,
        sweep: Stats::join_passes(accept, clones),
        accept_time,
        clone_time,
    })
}

impl Audit {
    /// Every control of the audit: the minimal case's, then the sweep detectors'.
    pub fn controls(&self) -> Vec<Control> {
        let mut c = self.minimal_controls.clone();
        for d in &self.detectors {
            let s = &d.stats;
            let detail = format!(
                "sweep over {} sequences: accept mismatches {}, divergent clones {} of {}",
                s.sequences, s.accept.mismatches, s.divergent_clones, s.clones
            );
            c.push(match d.defect {
                Defect::None => Control::negative(d.label, d.passed, detail),
                _ => Control::positive(d.label, d.passed, detail),
            });
        }
        c
    }

    /// Every control behaved as designed; if not, no verdict is trustworthy.
    pub fn controls_passed(&self) -> bool {
        self.controls().iter().all(|c| c.passed)
    }

    /// F1 is present when the published case or any cloned prefix disagrees with the oracle.
    pub fn clone_defect_present(&self) -> bool {
        self.minimal.clone_defect_present() || self.sweep.clone_reads.mismatches > 0
    }

    /// Accept path, eviction and reset agree with the oracle everywhere in the domain.
    pub fn ledger_exact(&self) -> bool {
        self.sweep.accept.mismatches == 0
            && self.sweep.reset.mismatches == 0
            && self.eviction.iter().all(|e| e.passed)
    }

    /// [`Audit::ledger_exact`] in one word.
    fn ledger_word(&self) -> &'static str {
        if self.ledger_exact() {
            "exact"
        } else {
            "WRONG"
        }
    }

    pub fn verdict(&self) -> Verdict {
        self.report().verdict()
    }

    /// One line for the verdict table: the published case and the whole sweep.
    pub fn evidence(&self) -> String {
        let s = &self.sweep;
        format!(
            "{}; sweep: {} of {} clones diverge, accept path {} ({} mismatches in {} readouts)",
            minimal::evidence(&self.published, &self.minimal),
            s.divergent_clones,
            s.clones,
            self.ledger_word(),
            s.accept.mismatches + s.reset.mismatches,
            s.accept.checks + s.reset.checks
        )
    }

    pub fn report(&self) -> Report {
        Report::new(
            self.build
                .report_subject(&crate::FINDING, minimal::verdict_name(self.kind)),
            Verdict::found(self.clone_defect_present()),
            self.evidence(),
            self.controls(),
        )
        .with_body(Body {
            sampler: self.kind.as_str(),
            minimal: minimal::data(&self.published, &self.minimal, self.probe),
            eviction: &self.eviction,
            detector_controls: &self.detectors,
            sweep: SweepData {
                domain: &self.domain,
                ledger_exact: self.ledger_exact(),
                stats: &self.sweep,
            },
        })
        .with_text(self.text())
    }

    fn text(&self) -> String {
        let mut out = String::from("== minimal reproduction ==\n");
        out += &minimal::to_text(&self.published, &self.minimal, self.probe);
        out += "\n== sweep detector controls (planted shadow ledgers) ==\n";
        out += &self.controls_text();
        out += "\n== exhaustive sweep (every sequence, readout after reset and after every accept) ==\n";
        out += &self.sweep_text();
        out
    }

    pub fn controls_text(&self) -> String {
        let mut out = String::new();
        for d in &self.detectors {
            out += &format!(
                "  {:<38} accept mismatches {}, divergent clones {}/{}: {}\n",
                d.label,
                d.stats.accept.mismatches,
                d.stats.divergent_clones,
                d.stats.clones,
                pass(d.passed)
            );
        }
        out
    }

    pub fn sweep_text(&self) -> String {
        let s = &self.sweep;
        let mut out = String::new();
        for e in &self.eviction {
            out += &format!(
                "  eviction, window {}: evicted id reads {} before its last evicting accept, {} after: {}\n",
                e.last_n,
                e.before_last,
                e.after,
                pass(e.passed)
            );
        }
        for c in &self.domain {
            out += &format!("  {:<16} {:>9} sequences\n", c.label(), c.sequences());
        }
        out += &format!(
            "  sequences {}, accept steps {}, accept mismatches {}\n",
            s.sequences, s.accept.checks, s.accept.mismatches
        );
        out += &format!(
            "  reset checks {}, reset mismatches {}\n",
            s.reset.checks, s.reset.mismatches
        );
        if let Some(m) = &s.accept.first {
            out += &format!("  first accept mismatch: {}\n", m.describe());
        }
        out += &format!(
            "  clone equivalence: {} clones (one before every accept), {} clone readouts, {} mismatched, {} clones diverged\n",
            s.clones,
            s.clone_reads.checks,
            s.clone_reads.mismatches,
            s.divergent_clones
        );
        if let Some(m) = &s.clone_reads.first {
            out += &format!("  first clone mismatch: {}\n", m.describe());
        }
        out += &format!("  accept-path ledger: {}\n", self.ledger_word());
        out
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
            s.clone_reads.checks,
            clone
        )
    }

    pub fn timing(&self) -> Timing<'_> {
        Timing {
            build: self.build.tag(),
            threads: THREADS,
            accept_sweep_seconds: self.accept_time.as_secs_f64(),
            accept_sequences_per_second: self.sweep.sequences as f64
                / self.accept_time.as_secs_f64(),
            clone_equivalence_seconds: self.clone_time.as_secs_f64(),
        }
    }
}

/// The audit's JSON after the header.
#[derive(Serialize)]
struct Body<'a> {
    sampler: &'static str,
    minimal: minimal::CaseData<'a>,
    eviction: &'a [EvictionControl],
    detector_controls: &'a [DetectorControl],
    sweep: SweepData<'a>,
}

#[derive(Serialize)]
struct SweepData<'a> {
    domain: &'a [SweepSlice],
    ledger_exact: bool,
    stats: &'a Stats,
}

/// How long the audit's sweeps took: `results/timing/<stem>.<build>.json`.
#[derive(Serialize)]
pub struct Timing<'a> {
    build: &'a str,
    threads: usize,
    accept_sweep_seconds: f64,
    accept_sequences_per_second: f64,
    clone_equivalence_seconds: f64,
}

fn pass(ok: bool) -> &'static str {
    if ok {
        "ok"
    } else {
        "FAILED"
    }
}
