//! `--audit`: every part of F2 in a fixed order, each gate checked before the next judges.
//!
//! 1. The oracle check (the oracle agrees with llama.cpp on honestly flagged input).
//! 2. The permutation audit with its negative and positive controls.
//! 3. The injector census.
//! 4. The chain fuzzer and its minimized cases.
//! 5. The published chain, whose verdict is the finding's verdict on this build.

use crate::census::{self, Census};
use crate::chain::{self, ChainCase, ChainReport, Verdict};
use crate::fuzz::{self, FuzzReport, OracleCheck};
use crate::perm::{self, PermAudit};
use anyhow::{ensure, Result};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use subject::{BuildInfo, Vocab};

/// Chains the fuzzer tries by default.
pub const FUZZ_CHAINS: usize = 100_000;
/// Single-stage inputs in the oracle check.
pub const ORACLE_CHECK_INPUTS: usize = 20_000;

/// The cached SmolLM2 model (`make models`), whose vocabulary the census uses.
pub fn default_vocab_model() -> PathBuf {
    models::cache_dir().join(models::SMOLLM2.file)
}

pub struct Audit {
    pub build: BuildInfo,
    pub oracle_check: OracleCheck,
    pub perm: PermAudit,
    pub census: Census,
    pub fuzz: FuzzReport,
    pub published: ChainCase,
    pub published_report: ChainReport,
    /// The published chain with `sorted_guard` before its truncation stage.
    pub guarded_report: ChainReport,
}

pub fn run(fuzz_chains: usize, vocab_model: &Path) -> Result<Audit> {
    let oracle_check = fuzz::oracle_check(fuzz::ORACLE_CHECK_SEED, ORACLE_CHECK_INPUTS)?;
    ensure!(
        oracle_check.passed(),
        "the oracle disagrees with llama.cpp on honestly flagged input; no verdict:\n{}",
        oracle_check.to_text()
    );
    let perm = perm::run()?;
    let vocab = Vocab::load(vocab_model).map_err(|e| {
        e.context(format!(
            "no vocabulary for the grammar census at {} (run `make models`)",
            vocab_model.display()
        ))
    });
    let census = census::run(vocab)?;
    let fuzz = fuzz::fuzz(fuzz::FUZZ_SEED, fuzz_chains)?;
    let published = crate::cli::published();
    let published_report = chain::run(&published)?;
    let guarded_report = chain::run(&fuzz::guarded(&published))?;
    Ok(Audit {
        build: BuildInfo::current(),
        oracle_check,
        perm,
        census,
        fuzz,
        published,
        published_report,
        guarded_report,
    })
}

impl Audit {
    /// The controls that must hold before the published verdict means anything.
    pub fn controls_pass(&self) -> bool {
        self.oracle_check.passed()
            && self.perm.rows.iter().all(|r| r.honest_ok)
            && self.perm.positive_control.fired()
    }

    pub fn verdict(&self) -> &'static str {
        if !self.controls_pass() {
            return "invalid";
        }
        self.published_report.verdict.as_str()
    }

    pub fn evidence(&self) -> String {
        let r = &self.published_report;
        let ids = |v: &[oracle::TokenId]| {
            v.iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        let distinct: Vec<String> = self
            .perm
            .rows
            .iter()
            .map(|r| format!("{} {}", r.sampler, r.max_distinct))
            .collect();
        format!(
            "top_k=4 -> logit_bias=3:+6 -> top_p=0.8 keeps {{{}}} (oracle {{{}}}, flag {}); max distinct sets {}; fuzzer {} of {} chains unsound",
            ids(&r.subject.survivors),
            ids(&r.oracle),
            r.subject.sorted_flag,
            distinct.join(", "),
            self.fuzz.unsound,
            self.fuzz.tried
        )
    }

    /// The fix's row: `absent` when, with `sorted_guard` before each flag-reading stage, the
    /// permutation audit gives one set (the oracle's) everywhere, the fuzzer finds no unsound
    /// chain and the published chain is sound.
    pub fn guard_verdict(&self) -> &'static str {
        if !self.controls_pass() {
            return "invalid";
        }
        let clean = self.perm.rows.iter().all(|r| r.guarded_ok)
            && self.fuzz.guarded_unsound == 0
            && self.guarded_report.verdict == Verdict::Absent;
        if clean {
            "absent"
        } else {
            "present"
        }
    }

    pub fn guard_json(&self) -> Value {
        json!({
            "finding": "F2",
            "name": "stale-sorted-truncation+sorted_guard",
            "build": self.build.tag(),
            "verdict": self.guard_verdict(),
            "evidence": format!(
                "with sorted_guard: published chain keeps {:?}; permutation audit one set = oracle: {}; fuzzer {} of {} chains unsound",
                self.guarded_report.subject.survivors.iter().map(|i| i.0).collect::<Vec<_>>(),
                self.perm.rows.iter().all(|r| r.guarded_ok),
                self.fuzz.guarded_unsound,
                self.fuzz.tried
            ),
            "published_chain": chain::to_json(&fuzz::guarded(&self.published), &self.guarded_report, &self.build),
        })
    }

    pub fn to_json(&self) -> Value {
        json!({
            "finding": "F2",
            "name": "stale-sorted-truncation",
            "build": self.build.tag(),
            "build_detail": self.build.describe(),
            "verdict": self.verdict(),
            "evidence": self.evidence(),
            "controls_pass": self.controls_pass(),
            "oracle_check": self.oracle_check.to_json(),
            "permutation_audit": self.perm.to_json(),
            "census": self.census.to_json(),
            "fuzzer": self.fuzz.to_json(),
            "published_chain": chain::to_json(&self.published, &self.published_report, &self.build),
        })
    }

    pub fn to_text(&self) -> String {
        let mut out = format!(
            "F2 stale-sorted-truncation on {}\n\n",
            self.build.describe()
        );
        out.push_str(&self.oracle_check.to_text());
        out.push('\n');
        out.push_str(&self.perm.to_text());
        out.push('\n');
        out.push_str(&self.census.to_text());
        out.push('\n');
        out.push_str(&self.fuzz.to_text());
        out.push('\n');
        out.push_str(&chain::to_text(
            &self.published,
            &self.published_report,
            &self.build,
        ));
        if self.published_report.verdict != Verdict::Present && self.controls_pass() {
            out.push_str("(the published chain is sound on this build)\n");
        }
        out.push_str(&format!(
            "with sorted_guard (ledger crate) before each flag-reading stage: {} on {}\n",
            self.guard_verdict(),
            self.build.tag()
        ));
        if !self.controls_pass() {
            out.push_str("CONTROLS FAILED: the verdict above is not valid\n");
        }
        out
    }
}
