//! `--audit`: every part of F2 in a fixed order, each detector with its controls.
//!
//! 1. The oracle gate: single stages through llama.cpp on honestly flagged input, survivor
//!    sets and surviving logits compared; and the same gate on an oracle with a planted
//!    arithmetic error, which it must fail.
//! 2. The permutation audit of llama.cpp's truncators, with planted Rust truncators that do
//!    and do not trust the flag through the same audit.
//! 3. The injector census, with planted injectors through the same rows.
//! 4. The chain fuzzer and its minimized cases.
//! 5. The published chain, whose verdict is the finding's verdict on this build, with planted
//!    truncators through the same chain comparison.

use crate::census::{self, Census, Class};
use crate::chain::{self, ChainCase, ChainReport, Verdict};
use crate::fuzz::{self, FuzzReport, OracleCheck};
use crate::perm::{self, PermAudit};
use crate::planted;
use crate::text::join;
use anyhow::Result;
use report::{Control, ControlKind, Report};
use serde::Serialize;
use std::path::{Path, PathBuf};
use subject::offered;
use subject::{BuildInfo, NotOffered};

/// Chains the fuzzer tries by default.
pub const FUZZ_CHAINS: usize = 100_000;
/// Single-stage inputs in the oracle check.
pub const ORACLE_CHECK_INPUTS: usize = 20_000;

/// The cached SmolLM2 model (`make models`), whose vocabulary the census uses.
pub fn default_vocab_model() -> PathBuf {
    models::cache_dir().join(models::SMOLLM2.file)
}

/// The audit's JSON after the header.
#[derive(Serialize)]
struct Body<'a> {
    oracle_check: &'a OracleCheck,
    planted_oracle_check: &'a OracleCheck,
    permutation_audit: &'a PermAudit,
    census: &'a Census,
    fuzzer: &'a FuzzReport,
    published_chain: chain::ChainJson<'a>,
}

pub struct Audit {
    pub build: BuildInfo,
    pub oracle_check: OracleCheck,
    /// The same gate on the oracle with a planted arithmetic error.
    pub planted_gate: OracleCheck,
    pub perm: PermAudit,
    pub census: Census,
    pub fuzz: FuzzReport,
    pub published: ChainCase,
    pub published_report: ChainReport,
    /// The published chain with `sorted_guard` before its truncation stage, or why the build
    /// cannot make the guard.
    pub guarded_report: Result<ChainReport, NotOffered>,
    pub chain_controls: Vec<Control>,
}

pub fn run(fuzz_chains: usize, vocab_model: &Path) -> Result<Audit> {
    let gate = |oracle: &fuzz::OracleFn| {
        fuzz::oracle_check(fuzz::ORACLE_CHECK_SEED, ORACLE_CHECK_INPUTS, oracle)
    };
    let published = chain::published();
    // Fields are evaluated in the order written: the audit's parts run in the order above.
    Ok(Audit {
        build: BuildInfo::current(),
        oracle_check: gate(&fuzz::real_oracle)?,
        planted_gate: gate(&planted::oracle_with_reciprocal_temp)?,
        perm: perm::run()?,
        census: census::run(vocab_model)?,
        fuzz: fuzz::fuzz_contained(fuzz::FUZZ_SEED, fuzz_chains)?,
        published_report: chain::run(&published)?,
        guarded_report: offered(chain::run(&fuzz::guarded(&published)))?,
        chain_controls: chain::controls()?,
        published,
    })
}

impl Audit {
    /// Every control of every detector the verdicts rest on.
    pub fn controls(&self) -> Vec<Control> {
        let gate = &self.oracle_check;
        let planted = &self.planted_gate;
        let planted_stages = planted.mismatching_stages();
        let planted_rows = |trusting: bool| -> Vec<&perm::PermutationRow> {
            let rows = self.perm.planted.iter();
            rows.filter(|r| r.sampler.ends_with(":trusting") == trusting)
                .collect()
        };
        let planted_detail = |rs: &[&perm::PermutationRow]| {
            let one = |r: &&perm::PermutationRow| {
                format!(
                    "{}: max {} distinct sets, {} of {} orders differ from the oracle",
                    r.sampler, r.max_distinct_sets, r.differing, r.permutations
                )
            };
            join(rs.iter().map(one), "; ")
        };
        let (trusting, honest) = (planted_rows(true), planted_rows(false));
        let perm_not_run = &self.perm.planted_not_run;
        let perm_control = |kind, name: &str, ok, rows: &[&perm::PermutationRow]| {
            let detail = planted_detail(rows);
            match perm_not_run {
                Some(why) => Control::not_run(kind, name, why),
                None => Control::new(kind, name, ok, detail),
            }
        };
        let census = &self.census;
        let census_control = |kind, name: &str, wants: &[Class], ok, detail| {
            let why = wants.iter().find_map(|w| census.planted_not_run(*w));
            match why {
                Some(why) => Control::not_run(kind, name, why),
                None => Control::new(kind, name, ok, detail),
            }
        };
        let mut c = vec![
            Control::oracle_check("oracle gate", gate.passed(), gate.summary()),
            Control::positive(
                "oracle gate on a planted arithmetic error (temp as z * (1/t))",
                !planted.passed() && planted_stages.keys().all(|k| k == "temp"),
                format!(
                    "{}; mismatching stages: {:?}",
                    planted.summary(),
                    planted_stages
                ),
            ),
            Control::oracle_check(
                "honest flag: llama.cpp's truncators give one set, the oracle's",
                self.perm.rows.iter().all(|r| r.honest_ok),
                format!(
                    "{} permutations with sorted = false",
                    self.perm.rows.iter().map(|r| r.permutations).sum::<usize>()
                ),
            ),
            perm_control(
                ControlKind::Positive,
                "permutation audit on planted truncators that trust the flag",
                trusting.iter().all(|r| r.flagged()),
                &trusting,
            ),
            perm_control(
                ControlKind::Negative,
                "permutation audit on planted truncators that always sort",
                honest.iter().all(|r| r.sound()),
                &honest,
            ),
        ];
        c.extend(self.chain_controls.iter().cloned());
        c.push(census_control(
            ControlKind::Positive,
            "census on a planted injector that keeps the flag",
            &[Class::KeepsStale],
            census.planted_ok(Class::KeepsStale),
            census.planted_text(Class::KeepsStale),
        ));
        c.push(census_control(
            ControlKind::Negative,
            "census on planted samplers that clear the flag or change nothing",
            &[Class::ResetsFlag, Class::NeverReorders],
            census.planted_ok(Class::ResetsFlag) && census.planted_ok(Class::NeverReorders),
            format!(
                "{}; {}",
                census.planted_text(Class::ResetsFlag),
                census.planted_text(Class::NeverReorders)
            ),
        ));
        let rows = census.rows.iter();
        let completed =
            (rows.filter(|r| !matches!(r.class, Class::Crashed | Class::NotOffered))).count();
        c.push(census_control(
            ControlKind::Positive,
            "census containment on a planted injector that aborts",
            &[Class::Crashed],
            census.planted_ok(Class::Crashed) && completed > 0,
            format!(
                "{}; {completed} of {} built-in rows completed",
                census.planted_text(Class::Crashed),
                census.rows.len()
            ),
        ));
        c
    }

    /// Every row of the permutation table and the fuzzer's totals.
    fn sweep_evidence(&self) -> String {
        let distinct =
            (self.perm.rows.iter()).map(|r| format!("{} {}", r.sampler, r.max_distinct_sets));
        format!(
            "max distinct sets over orders {}; fuzzer {} of {} chains unsound, {} undecided{}{}",
            join(distinct, ", "),
            self.fuzz.unsound,
            self.fuzz.tried,
            self.fuzz.undecided,
            self.fuzz.not_run(),
            self.fuzz.skipped()
        )
    }

    pub fn evidence(&self) -> String {
        let r = &self.published_report;
        format!(
            "top_k=4 -> logit_bias=3:+6 -> top_p=0.8 keeps {} (oracle {}, flag {}); {}",
            chain::ids_text(&r.subject.survivors),
            chain::ids_text(&r.oracle),
            r.subject.sorted_flag,
            self.sweep_evidence()
        )
    }

    pub fn report(&self) -> Report {
        let body = Body {
            oracle_check: &self.oracle_check,
            planted_oracle_check: &self.planted_gate,
            permutation_audit: &self.perm,
            census: &self.census,
            fuzzer: &self.fuzz,
            published_chain: chain::to_json(&self.published, &self.published_report),
        };
        let measured = self.published_report.verdict;
        chain::new_report(
            &self.build,
            chain::NAME,
            measured,
            self.evidence(),
            self.controls(),
        )
        .with_body(body)
        .with_text(self.to_text())
    }

    /// The fix's measured answer: `absent` when, with `sorted_guard` before each flag-reading
    /// stage, the permutation audit gives one set (the oracle's) everywhere, the fuzzer finds no
    /// unsound chain and the published chain is sound.
    /// A fuzzer chunk whose child died ran chains nobody judged, guarded ones among them, so
    /// the fix cannot be called `absent` then.
    /// A build that cannot make the guard has no fix to judge: `not offered`.
    pub fn guard_measured(&self) -> Verdict {
        let Ok(guarded_report) = &self.guarded_report else {
            return Verdict::NotOffered;
        };
        let clean = self.perm.rows.iter().all(|r| r.guarded_ok == Some(true))
            && self.fuzz.guarded.unsound == 0
            && self.fuzz.crashed.is_empty()
            && guarded_report.verdict == Verdict::Absent;
        Verdict::found(!clean)
    }

    pub fn guard_report(&self) -> Report {
        let guarded = fuzz::guarded(&self.published);
        let name = format!("{}+sorted_guard", chain::NAME);
        let guarded_report = match &self.guarded_report {
            Ok(r) => r,
            Err(why) => {
                let evidence = format!(
                    "sorted_guard not run: {why}; the published chain, the permutation audit and the fuzzer ran without it"
                );
                let body = [("published_chain_not_run", why.to_string())];
                return chain::new_report(
                    &self.build,
                    &name,
                    self.guard_measured(),
                    evidence,
                    self.controls(),
                )
                .with_body(std::collections::BTreeMap::from(body))
                .with_text(format!("chain: {}\n  not run: {why}\n", guarded.command()));
            }
        };
        let evidence = format!(
            "with sorted_guard: published chain keeps {}; permutation audit one set = oracle in every case: {}; fuzzer {} of {} chains unsound, {} undecided{}{}",
            chain::ids_text(&guarded_report.subject.survivors),
            self.perm.rows.iter().all(|r| r.guarded_ok == Some(true)),
            self.fuzz.guarded.unsound,
            self.fuzz.tried,
            self.fuzz.guarded.undecided,
            self.fuzz.not_run(),
            self.fuzz.skipped()
        );
        let body = [("published_chain", chain::to_json(&guarded, guarded_report))];
        chain::new_report(
            &self.build,
            &name,
            self.guard_measured(),
            evidence,
            self.controls(),
        )
        .with_body(std::collections::BTreeMap::from(body))
        .with_text(chain::to_text(&guarded, guarded_report))
    }

    fn to_text(&self) -> String {
        let mut out = String::new();
        out.push_str(&self.oracle_check.to_text());
        out.push_str("the same gate with a planted arithmetic error in the oracle's temp stage:\n");
        out.push_str(&format!("  {}\n", self.planted_gate.summary()));
        out.push('\n');
        out.push_str(&self.perm.to_text());
        out.push('\n');
        out.push_str(&self.census.to_text());
        out.push('\n');
        out.push_str(&self.fuzz.to_text());
        out.push('\n');
        out.push_str("published chain:\n");
        out.push_str(&chain::to_text(&self.published, &self.published_report));
        out.push_str(&format!(
            "with sorted_guard (ledger crate) before each flag-reading stage, measured: {} (judged in the sortpoison-guard report)\n",
            self.guard_measured()
        ));
        out
    }
}
