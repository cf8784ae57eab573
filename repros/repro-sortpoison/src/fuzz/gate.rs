//! The oracle gate: single stages through llama.cpp (honest flag, random order) and through
//! the oracle, survivor sets and every surviving logit compared, before the oracle judges any
//! chain. A planted oracle with an arithmetic error must fail it.

use super::generate::{random_logits, random_stage};
use crate::chain::{self, ChainCase};
use crate::stage::ChainStage;
use crate::text::join;
use anyhow::Result;
use oracle::rng::Rng;
use oracle::stage::{self as st, Stage};
use oracle::truncation::{Link, Pool, Step};
use oracle::TokenId;
use serde::Serialize;
use std::collections::BTreeMap;
use subject::Candidates;

/// An oracle to gate: how a single stage acts on a pool after a history. The real one is
/// [`oracle::truncation::apply`]; a control plants an error in a copy.
pub type OracleFn = dyn Fn(&Stage, &Pool, &[TokenId]) -> Step;

/// The oracle's own stages.
pub fn real_oracle(stage: &Stage, pool: &Pool, history: &[TokenId]) -> Step {
    oracle::truncation::apply(stage, pool, history)
}

pub use oracle::ulps;

/// How far a surviving logit may be from the oracle's, in ulps, for a stage on `n` entries.
/// Every stage's arithmetic is the subject's own f32 arithmetic (0 ulps) except temp_ext with
/// delta > 0: the subject derives its temperature in f32 from an entropy summed over `n`
/// probabilities, the oracle in f64, so the two temperatures, and the logits divided by them,
/// may differ by the slack of an f32 sum of `n` terms, `8 (n + 2)` ulps.
pub fn ulp_bound(stage: &ChainStage, n: usize) -> u64 {
    if let Some(Stage::TempExt { delta, .. }) = stage.sampler() {
        if *delta > 0.0 {
            return 8 * (n as u64 + 2);
        }
    }
    0
}

/// One input whose subject and oracle disagree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GateMismatch {
    pub stage: String,
    /// The array in the order it was handed over, as `id:logit`.
    pub array: String,
    /// `set` (different survivors) or `value` (a surviving logit off by more than the bound).
    pub kind: &'static str,
    pub detail: String,
}

/// Per stage: inputs, inputs where the stage removed entries, logits compared, largest ulps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct StageTally {
    pub inputs: usize,
    #[serde(rename = "inputs_where_entries_were_removed")]
    pub removing: usize,
    #[serde(rename = "surviving_logits_compared")]
    pub values: usize,
    pub max_ulps: u64,
}

/// The oracle check: one stage, a random order, the honest flag.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct OracleCheck {
    pub seed: u64,
    pub inputs: usize,
    #[serde(rename = "knife_edges_skipped")]
    pub knife_edges: usize,
    pub per_stage: BTreeMap<&'static str, StageTally>,
    pub mismatches: Vec<GateMismatch>,
    /// Inputs whose stage the build does not offer, per stage: drawn, not run, not counted
    /// in `inputs`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub not_offered: BTreeMap<&'static str, NotRun>,
}

/// Inputs of one stage the build cannot make, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NotRun {
    pub inputs: usize,
    pub why: String,
}

pub const ORACLE_CHECK_SEED: u64 = 0x0AC1E;

/// Runs `inputs` single stages through llama.cpp (honest flag, random order) and through
/// `oracle`, and compares the survivor sets and every surviving logit.
pub fn oracle_check(seed: u64, inputs: usize, oracle: &OracleFn) -> Result<OracleCheck> {
    let mut rng = Rng::new(seed);
    let mut out = OracleCheck::empty(seed);
    for _ in 0..inputs {
        let n = rng.range(1, 24) as usize;
        let logits = random_logits(&mut rng, n);
        let stage = ChainStage::from(random_stage(&mut rng, n));
        let history: Vec<TokenId> = (0..rng.range(0, 6))
            .map(|_| TokenId(rng.below(n) as i32))
            .collect();
        out.check(&stage, &history, &logits, &mut rng, oracle)?;
    }
    Ok(out)
}

/// The same gate for one chain's own non-drawing stages, at their own parameters and
/// history: `per_stage` random arrays as long as the chain's logits, in random order, honest
/// flag.
pub fn chain_gate(case: &ChainCase, seed: u64, per_stage: usize) -> Result<OracleCheck> {
    let mut rng = Rng::new(seed);
    let mut out = OracleCheck::empty(seed);
    let n = case.logits.len();
    let mut seen = Vec::new();
    for stage in &case.stages {
        // A drawing stage keeps the set unchanged in the oracle, so its rows would match by
        // construction and inflate the count; its draws are judged by `draws::run`.
        if seen.contains(stage) || stage.draws() {
            continue;
        }
        seen.push(stage.clone());
        for _ in 0..per_stage {
            let logits = random_logits(&mut rng, n);
            out.check(stage, &case.history, &logits, &mut rng, &real_oracle)?;
        }
    }
    Ok(out)
}

impl OracleCheck {
    fn empty(seed: u64) -> OracleCheck {
        OracleCheck {
            seed,
            ..OracleCheck::default()
        }
    }

    /// One input: the stage through llama.cpp (honest flag, an order `rng` shuffles) and
    /// through `oracle`;
    /// survivor sets and every surviving logit compared.
    fn check(
        &mut self,
        stage: &ChainStage,
        history: &[TokenId],
        logits: &[f32],
        rng: &mut Rng,
        oracle: &OracleFn,
    ) -> Result<()> {
        let n = logits.len();
        let mut order: Vec<usize> = (0..n).collect();
        rng.shuffle(&mut order);
        // Skipped after its order is drawn, so every later input is the same on every build.
        if let Some(why) = stage.not_offered(n as i32)? {
            let skip = self.not_offered.entry(stage.name()).or_insert(NotRun {
                inputs: 0,
                why: why.to_string(),
            });
            skip.inputs += 1;
            return Ok(());
        }
        self.inputs += 1;
        let tally = self.per_stage.entry(stage.name()).or_default();
        tally.inputs += 1;
        let pool = Pool::from_logits(logits);
        let step = match stage.oracle() {
            Some(s) => oracle(&s, &pool, history),
            None => stage.step(&pool, history),
        };
        if step.edge.is_some() {
            self.knife_edges += 1;
            return Ok(());
        }
        let mut s = stage.build(n as i32)?;
        if stage.reads_history() {
            for &id in history {
                s.accept(id)?;
            }
        }
        let mut c = Candidates::new(order.iter().map(|&i| (TokenId(i as i32), logits[i])));
        s.apply(&mut c)?;
        let subject = chain::survivors(&c);
        let want = step.pool.survivors();
        if want.len() < n {
            tally.removing += 1;
        }
        let array = || join(order.iter().map(|&i| format!("{i}:{}", logits[i])), " ");
        let mismatch = |kind, detail| GateMismatch {
            stage: stage.to_string(),
            array: array(),
            kind,
            detail,
        };
        if subject != want {
            let detail = format!("subject keeps {subject:?}, oracle {want:?}");
            self.mismatches.push(mismatch("set", detail));
            return Ok(());
        }
        let bound = ulp_bound(stage, n);
        for e in step
            .pool
            .entries()
            .iter()
            .filter(|e| e.logit > f32::NEG_INFINITY)
        {
            let got = c.logit_of(e.id).expect("the sets are equal");
            let d = ulps(got, e.logit);
            tally.values += 1;
            tally.max_ulps = tally.max_ulps.max(d);
            if d > bound {
                let detail = format!(
                    "id {}: subject logit {got:?}, oracle {:?} ({d} ulps, bound {bound})",
                    e.id, e.logit
                );
                self.mismatches.push(mismatch("value", detail));
                break;
            }
        }
        Ok(())
    }

    pub fn passed(&self) -> bool {
        self.mismatches.is_empty()
    }

    /// Stages whose inputs produced a mismatch, with how many.
    pub fn mismatching_stages(&self) -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for x in &self.mismatches {
            *m.entry(st::split_name(&x.stage).0.to_string()).or_insert(0) += 1;
        }
        m
    }

    /// One line: inputs, comparisons and mismatches per kind.
    pub fn summary(&self) -> String {
        let values: usize = self.per_stage.values().map(|t| t.values).sum();
        let sets = self.inputs - self.knife_edges;
        let per = |kind: &str| self.mismatches.iter().filter(|m| m.kind == kind).count();
        let mut out = format!(
            "{} single stages ({} knife edges skipped): {} survivor sets and {} surviving logits compared; {} set and {} value mismatches",
            self.inputs,
            self.knife_edges,
            sets,
            values,
            per("set"),
            per("value")
        );
        for (stage, skip) in &self.not_offered {
            out.push_str(&format!(
                "; {} {stage} inputs not run ({})",
                skip.inputs, skip.why
            ));
        }
        out
    }

    pub fn to_text(&self) -> String {
        let mut out = format!(
            "oracle check (seed {:#x}): single stages on random orders with the honest flag; survivor sets and every surviving logit compared (bit for bit; temp_ext within 8(n+2) ulps)\n  {}\n  stage          inputs  removed entries  logits compared  max ulps\n",
            self.seed,
            self.summary()
        );
        for (k, t) in &self.per_stage {
            out.push_str(&format!(
                "  {:<13} {:>7} {:>16} {:>16} {:>9}\n",
                k, t.inputs, t.removing, t.values, t.max_ulps
            ));
        }
        for m in &self.mismatches {
            out.push_str(&format!(
                "  MISMATCH ({}) {} on [{}]: {}\n",
                m.kind, m.stage, m.array, m.detail
            ));
        }
        out
    }
}
