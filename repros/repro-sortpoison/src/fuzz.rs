//! The oracle check and the chain fuzzer.
//!
//! The oracle check comes first: single stages on random arrays in random order with the
//! honest flag (`sorted = false`), where llama.cpp is expected to be right. Every tie-free
//! disagreement there would be an oracle bug, so the audit reports it before any verdict.
//!
//! The fuzzer then builds random chains of 2 to 4 deterministic stages, runs each through
//! the real chain API and compares the final survivor set with the oracle's composition.
//! Each unsound chain is shrunk (fewer stages, fewer logits, rounder numbers, shorter
//! history) while it stays unsound and tie-free, and the minimized cases are grouped by
//! shape, e.g. `sorter -> injector -> truncator`.

use crate::chain::{self, ChainCase, Verdict};
use crate::rng::Rng;
use crate::stage::ChainStage;
use anyhow::Result;
use oracle::penalty::PenaltyParams;
use oracle::stage::Stage;
use oracle::truncation::{Pool, Step};
use oracle::window::WindowLen;
use oracle::TokenId;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use subject::Candidates;

/// Distinct logits from the quarter grid in [-6, 6], so no two are equal.
fn random_logits(rng: &mut Rng, n: usize) -> Vec<f32> {
    let mut grid: Vec<i64> = (-24..=24).collect();
    rng.shuffle(&mut grid);
    grid[..n].iter().map(|&q| q as f32 / 4.0).collect()
}

fn random_p(rng: &mut Rng, lo: i64, hi: i64) -> f32 {
    rng.range(lo, hi) as f32 / 100.0
}

/// One random deterministic stage for an array of `n` logits.
pub fn random_stage(rng: &mut Rng, n: usize) -> Stage {
    match rng.below(10) {
        0 => Stage::TopK {
            k: rng.range(1, n as i64) as i32,
        },
        1 => Stage::TopP {
            p: random_p(rng, 30, 95),
            min_keep: rng.range(1, 2) as usize,
        },
        2 => Stage::MinP {
            p: random_p(rng, 2, 50),
            min_keep: 1,
        },
        3 => Stage::Typical {
            p: random_p(rng, 20, 95),
            min_keep: 1,
        },
        4 => Stage::Temp {
            t: *rng.pick(&[0.5, 0.75, 1.5, 2.0]),
        },
        5 => Stage::TempExt {
            t: *rng.pick(&[0.75, 1.0, 1.5]),
            delta: *rng.pick(&[0.25, 0.5]),
            exponent: 1.0,
        },
        6 => Stage::Xtc {
            probability: 1.0,
            threshold: random_p(rng, 5, 30),
            min_keep: 1,
        },
        7 => Stage::TopNSigma {
            n: *rng.pick(&[0.5, 1.0, 1.5, 2.0]),
        },
        8 => {
            let count = rng.range(1, 2.min(n as i64)) as usize;
            let mut ids: Vec<i32> = (0..n as i32).collect();
            rng.shuffle(&mut ids);
            Stage::LogitBias {
                biases: ids[..count]
                    .iter()
                    .map(|&id| {
                        let b = rng.range(1, 8) as f32 * if rng.below(2) == 0 { 1.0 } else { -1.0 };
                        (TokenId(id), b)
                    })
                    .collect(),
            }
        }
        _ => Stage::Penalties {
            last_n: WindowLen(64),
            params: PenaltyParams {
                repeat: *rng.pick(&[1.1, 1.3, 2.0]),
                freq: *rng.pick(&[0.0, 0.5]),
                present: *rng.pick(&[0.0, 0.5]),
            },
        },
    }
}

pub fn random_case(rng: &mut Rng) -> ChainCase {
    let n = rng.range(3, 10) as usize;
    let len = rng.range(2, 4) as usize;
    let stages: Vec<ChainStage> = (0..len).map(|_| random_stage(rng, n).into()).collect();
    let history = if stages.iter().any(ChainStage::reads_history) {
        (0..rng.range(1, 6))
            .map(|_| TokenId(rng.below(n) as i32))
            .collect()
    } else {
        Vec::new()
    };
    ChainCase {
        logits: random_logits(rng, n),
        stages,
        history,
    }
}

/// The stage names in chain order, e.g. `top_k -> logit_bias -> top_p`.
pub fn signature(case: &ChainCase) -> String {
    case.stages
        .iter()
        .map(|s| s.name())
        .collect::<Vec<_>>()
        .join(" -> ")
}

pub fn shape(case: &ChainCase) -> String {
    let n = case.stages.len();
    case.stages
        .iter()
        .enumerate()
        .map(|(i, s)| s.role(i + 1 == n).as_str())
        .collect::<Vec<_>>()
        .join(" -> ")
}

/// The same chain with `sorted_guard` before every stage that reads the flag.
pub fn guarded(case: &ChainCase) -> ChainCase {
    let mut stages = Vec::new();
    for s in &case.stages {
        if s.reads_sorted_flag() {
            stages.push(Stage::SortedGuard.into());
        }
        stages.push(s.clone());
    }
    ChainCase {
        stages,
        ..case.clone()
    }
}

/// Unsound: the subject's set differs from a tie-free oracle answer.
fn unsound(case: &ChainCase) -> bool {
    case.validate().is_ok() && matches!(chain::run(case), Ok(r) if r.verdict == Verdict::Present)
}

/// Drops logit `j`: later ids move down by one; biases and history on `j` go.
fn without_logit(case: &ChainCase, j: usize) -> Option<ChainCase> {
    let j = j as i32;
    let remap = |id: TokenId| if id.0 > j { TokenId(id.0 - 1) } else { id };
    let mut logits = case.logits.clone();
    logits.remove(j as usize);
    let mut stages = Vec::new();
    for s in &case.stages {
        stages.push(match s {
            ChainStage::Sampler(Stage::LogitBias { biases }) => {
                let kept: Vec<_> = biases
                    .iter()
                    .filter(|(id, _)| id.0 != j)
                    .map(|(id, b)| (remap(*id), *b))
                    .collect();
                if kept.is_empty() {
                    return None;
                }
                Stage::LogitBias { biases: kept }.into()
            }
            ChainStage::Sampler(Stage::TopK { k }) => Stage::TopK {
                k: (*k).min(logits.len() as i32),
            }
            .into(),
            other => other.clone(),
        });
    }
    let history = case
        .history
        .iter()
        .filter(|id| id.0 != j)
        .map(|id| remap(*id))
        .collect();
    Some(ChainCase {
        logits,
        stages,
        history,
    })
}

/// Smaller or rounder variants of `case`, simplest first.
fn candidates(case: &ChainCase) -> Vec<ChainCase> {
    let mut out = Vec::new();
    for i in 0..case.stages.len() {
        let mut c = case.clone();
        c.stages.remove(i);
        if !c.stages.iter().any(ChainStage::reads_history) {
            c.history.clear();
        }
        out.push(c);
    }
    for j in 0..case.logits.len() {
        if case.logits.len() > 1 {
            out.extend(without_logit(case, j));
        }
    }
    for j in 0..case.history.len() {
        let mut c = case.clone();
        c.history.remove(j);
        out.push(c);
    }
    for j in 0..case.logits.len() {
        for r in [
            case.logits[j].round(),
            case.logits[j].floor(),
            case.logits[j].ceil(),
        ] {
            if r != case.logits[j] && !case.logits.contains(&r) {
                let mut c = case.clone();
                c.logits[j] = r;
                out.push(c);
            }
        }
    }
    // Logits as consecutive integers in the same rank order.
    let mut ranked: Vec<usize> = (0..case.logits.len()).collect();
    ranked.sort_by(|&a, &b| case.logits[b].total_cmp(&case.logits[a]));
    let mut integral = case.logits.clone();
    for (rank, &i) in ranked.iter().enumerate() {
        integral[i] = (case.logits.len() - 1 - rank) as f32 - 3.0;
    }
    if integral != case.logits {
        out.push(ChainCase {
            logits: integral,
            ..case.clone()
        });
    }
    for (i, s) in case.stages.iter().enumerate() {
        let Some(stage) = s.sampler() else { continue };
        let simpler: Vec<Stage> = match stage {
            Stage::TopP { p, min_keep } => vec![
                Stage::TopP { p: *p, min_keep: 1 },
                Stage::TopP {
                    p: (p * 10.0).round() / 10.0,
                    min_keep: *min_keep,
                },
            ],
            Stage::MinP { p, min_keep } => vec![Stage::MinP {
                p: (p * 10.0).round() / 10.0,
                min_keep: *min_keep,
            }],
            Stage::Typical { p, min_keep } => vec![Stage::Typical {
                p: (p * 10.0).round() / 10.0,
                min_keep: *min_keep,
            }],
            Stage::Xtc {
                probability,
                threshold,
                min_keep,
            } => vec![Stage::Xtc {
                probability: *probability,
                threshold: (threshold * 10.0).round() / 10.0,
                min_keep: *min_keep,
            }],
            Stage::LogitBias { biases } if biases.len() > 1 => biases
                .iter()
                .map(|b| Stage::LogitBias { biases: vec![*b] })
                .collect(),
            Stage::LogitBias { biases } => {
                let (id, b) = biases[0];
                let halved = (b / 2.0).trunc();
                if halved != 0.0 {
                    vec![Stage::LogitBias {
                        biases: vec![(id, halved)],
                    }]
                } else {
                    Vec::new()
                }
            }
            Stage::TopK { k } if *k > 1 => vec![Stage::TopK { k: k - 1 }],
            _ => Vec::new(),
        };
        for s2 in simpler.into_iter().map(ChainStage::from) {
            if &s2 != s {
                let mut c = case.clone();
                c.stages[i] = s2;
                out.push(c);
            }
        }
    }
    out
}

/// Greedy shrinking to a fixed point: take the first simpler variant that is still unsound.
pub fn shrink(case: &ChainCase) -> ChainCase {
    let mut cur = case.clone();
    'outer: loop {
        for c in candidates(&cur) {
            if unsound(&c) {
                cur = c;
                continue 'outer;
            }
        }
        return cur;
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct FuzzReport {
    pub seed: u64,
    pub tried: usize,
    pub sound: usize,
    pub unsound: usize,
    pub undecided: usize,
    /// Unsound chains per shape of their minimized form.
    pub by_shape: BTreeMap<String, usize>,
    /// One minimized case per stage signature (e.g. `top_k -> logit_bias -> top_p`), the
    /// first found; signatures in order of first appearance.
    pub minimized: Vec<ChainCase>,
    /// Unsound chains per stage signature of their minimized form.
    pub by_signature: BTreeMap<String, usize>,
    /// The same chains with `sorted_guard` before every flag-reading stage: how many were
    /// unsound, and how many undecided.
    pub guarded_unsound: usize,
    pub guarded_undecided: usize,
}

pub const FUZZ_SEED: u64 = 0xF2;

pub fn fuzz(seed: u64, chains: usize) -> Result<FuzzReport> {
    let mut rng = Rng::new(seed);
    let mut r = FuzzReport {
        seed,
        tried: 0,
        sound: 0,
        unsound: 0,
        undecided: 0,
        by_shape: BTreeMap::new(),
        minimized: Vec::new(),
        by_signature: BTreeMap::new(),
        guarded_unsound: 0,
        guarded_undecided: 0,
    };
    for _ in 0..chains {
        let case = random_case(&mut rng);
        r.tried += 1;
        match chain::run(&guarded(&case))?.verdict {
            Verdict::Present => r.guarded_unsound += 1,
            // The chain comparison never returns inconclusive; count it with the undecided.
            Verdict::Undecided | Verdict::Inconclusive => r.guarded_undecided += 1,
            Verdict::Absent => {}
        }
        match chain::run(&case)?.verdict {
            Verdict::Absent => r.sound += 1,
            Verdict::Undecided | Verdict::Inconclusive => r.undecided += 1,
            Verdict::Present => {
                r.unsound += 1;
                let small = shrink(&case);
                *r.by_shape.entry(shape(&small)).or_insert(0) += 1;
                let sig = signature(&small);
                let seen = r.by_signature.contains_key(&sig);
                *r.by_signature.entry(sig).or_insert(0) += 1;
                if !seen {
                    r.minimized.push(small);
                }
            }
        }
    }
    Ok(r)
}

impl FuzzReport {
    pub fn to_json(&self) -> Value {
        json!({
            "seed": self.seed,
            "chains_tried": self.tried,
            "sound": self.sound,
            "unsound": self.unsound,
            "undecided_knife_edges": self.undecided,
            "unsound_by_shape": self.by_shape,
            "with_sorted_guard": {"unsound": self.guarded_unsound, "undecided_knife_edges": self.guarded_undecided},
            "minimized": self.minimized.iter().map(|c| json!({
                "shape": shape(c),
                "signature": signature(c),
                "unsound_chains": self.by_signature[&signature(c)],
                "command": c.command(),
            })).collect::<Vec<_>>(),
        })
    }

    pub fn to_text(&self) -> String {
        let mut out = format!(
            "chain fuzzer (seed {:#x}): {} chains of 2-4 stages, {} sound, {} unsound, {} undecided (knife edges)\n",
            self.seed, self.tried, self.sound, self.unsound, self.undecided
        );
        out.push_str(&format!(
            "  with sorted_guard before every flag-reading stage: {} unsound, {} undecided\n",
            self.guarded_unsound, self.guarded_undecided
        ));
        for (shape, n) in &self.by_shape {
            out.push_str(&format!("  {n:>6}  {shape}\n"));
        }
        out.push_str(&format!(
            "  minimized, one per stage signature ({} signatures; count = unsound chains that shrank to it):\n",
            self.minimized.len()
        ));
        for c in &self.minimized {
            out.push_str(&format!(
                "  {:>6}  {:<32} {}\n",
                self.by_signature[&signature(c)],
                signature(c),
                c.command()
            ));
        }
        out
    }
}

/// An oracle to gate: how a single stage acts on a pool after a history. The real one is
/// [`oracle::truncation::apply`]; a control plants an error in a copy.
pub type OracleFn = dyn Fn(&Stage, &Pool, &[TokenId]) -> Step;

/// The oracle's own stages.
pub fn real_oracle(stage: &Stage, pool: &Pool, history: &[TokenId]) -> Step {
    oracle::truncation::apply(stage, pool, history)
}

/// Distance between two f32 values in units in the last place (0 when equal, `-inf`
/// included; `u64::MAX` when only one is finite).
pub fn ulps(a: f32, b: f32) -> u64 {
    if a == b {
        return 0;
    }
    if !a.is_finite() || !b.is_finite() {
        return u64::MAX;
    }
    // Map the bit patterns onto a line where adjacent floats are adjacent integers.
    let key = |x: f32| {
        let bits = x.to_bits() as i32;
        (if bits < 0 { i32::MIN - bits } else { bits }) as i64
    };
    key(a).abs_diff(key(b))
}

/// How far a surviving logit may be from the oracle's, in ulps, for a stage on `n` entries.
/// Every stage's arithmetic is the subject's own f32 arithmetic (0 ulps) except temp_ext with
/// delta > 0: the subject derives its temperature in f32 from an entropy summed over `n`
/// probabilities, the oracle in f64, so the two temperatures, and the logits divided by them,
/// may differ by the slack of an f32 sum of `n` terms, `8 (n + 2)` ulps.
pub fn ulp_bound(stage: &ChainStage, n: usize) -> u64 {
    match stage {
        ChainStage::Sampler(Stage::TempExt { delta, .. }) if *delta > 0.0 => 8 * (n as u64 + 2),
        _ => 0,
    }
}

/// One input whose subject and oracle disagree.
#[derive(Debug, Clone, PartialEq)]
pub struct GateMismatch {
    pub stage: String,
    /// The array in the order it was handed over, as `id:logit`.
    pub array: String,
    /// `set` (different survivors) or `value` (a surviving logit off by more than the bound).
    pub kind: &'static str,
    pub detail: String,
}

/// Per stage: inputs, inputs where the stage removed entries, logits compared, largest ulps.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StageTally {
    pub inputs: usize,
    pub removing: usize,
    pub values: usize,
    pub max_ulps: u64,
}

/// The oracle check: one stage, a random order, the honest flag.
#[derive(Debug, Clone, PartialEq)]
pub struct OracleCheck {
    pub seed: u64,
    pub inputs: usize,
    pub knife_edges: usize,
    pub per_stage: BTreeMap<&'static str, StageTally>,
    pub mismatches: Vec<GateMismatch>,
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
        let mut order: Vec<usize> = (0..n).collect();
        rng.shuffle(&mut order);
        out.check(&stage, &history, &logits, &order, oracle)?;
    }
    Ok(out)
}

/// The same gate for one chain's own stages, at its own parameters and history: `per_stage`
/// random arrays as long as the chain's logits, in random order, honest flag.
pub fn chain_gate(case: &ChainCase, seed: u64, per_stage: usize) -> Result<OracleCheck> {
    let mut rng = Rng::new(seed);
    let mut out = OracleCheck::empty(seed);
    let n = case.logits.len();
    let mut seen = Vec::new();
    for stage in &case.stages {
        if seen.contains(stage) {
            continue;
        }
        seen.push(stage.clone());
        for _ in 0..per_stage {
            // Distinct quarter-integer logits from a grid wide enough for `n` of them.
            let half = 24.max(n as i64);
            let mut grid: Vec<i64> = (-half..=half).collect();
            rng.shuffle(&mut grid);
            let logits: Vec<f32> = grid[..n].iter().map(|&q| q as f32 / 4.0).collect();
            let mut order: Vec<usize> = (0..n).collect();
            rng.shuffle(&mut order);
            out.check(stage, &case.history, &logits, &order, &real_oracle)?;
        }
    }
    Ok(out)
}

impl OracleCheck {
    fn empty(seed: u64) -> OracleCheck {
        OracleCheck {
            seed,
            inputs: 0,
            knife_edges: 0,
            per_stage: BTreeMap::new(),
            mismatches: Vec::new(),
        }
    }

    /// One input: the stage through llama.cpp (honest flag, `order`) and through `oracle`;
    /// survivor sets and every surviving logit compared.
    fn check(
        &mut self,
        stage: &ChainStage,
        history: &[TokenId],
        logits: &[f32],
        order: &[usize],
        oracle: &OracleFn,
    ) -> Result<()> {
        let n = logits.len();
        self.inputs += 1;
        let tally = self.per_stage.entry(stage.name()).or_default();
        tally.inputs += 1;
        let step = oracle(&stage.oracle(), &Pool::from_logits(logits), history);
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
        let array = || {
            order
                .iter()
                .map(|&i| format!("{i}:{}", logits[i]))
                .collect::<Vec<_>>()
                .join(" ")
        };
        if subject != want {
            self.mismatches.push(GateMismatch {
                stage: stage.to_string(),
                array: array(),
                kind: "set",
                detail: format!("subject keeps {subject:?}, oracle {want:?}"),
            });
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
                self.mismatches.push(GateMismatch {
                    stage: stage.to_string(),
                    array: array(),
                    kind: "value",
                    detail: format!(
                        "id {}: subject logit {got:?}, oracle {:?} ({d} ulps, bound {bound})",
                        e.id, e.logit
                    ),
                });
                break;
            }
        }
        Ok(())
    }
}

impl OracleCheck {
    pub fn passed(&self) -> bool {
        self.mismatches.is_empty()
    }

    /// Stages whose inputs produced a mismatch, with how many.
    pub fn mismatching_stages(&self) -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for x in &self.mismatches {
            let name = x.stage.split('=').next().unwrap_or(&x.stage).to_string();
            *m.entry(name).or_insert(0) += 1;
        }
        m
    }

    /// One line: inputs, comparisons and mismatches per kind.
    pub fn summary(&self) -> String {
        let values: usize = self.per_stage.values().map(|t| t.values).sum();
        let sets = self.inputs - self.knife_edges;
        let per = |kind: &str| self.mismatches.iter().filter(|m| m.kind == kind).count();
        format!(
            "{} single stages ({} knife edges skipped): {} survivor sets and {} surviving logits compared; {} set and {} value mismatches",
            self.inputs,
            self.knife_edges,
            sets,
            values,
            per("set"),
            per("value")
        )
    }

    pub fn to_json(&self) -> Value {
        json!({
            "seed": self.seed,
            "inputs": self.inputs,
            "knife_edges_skipped": self.knife_edges,
            "per_stage": self.per_stage.iter().map(|(k, t)| (k.to_string(), json!({
                "inputs": t.inputs,
                "inputs_where_entries_were_removed": t.removing,
                "surviving_logits_compared": t.values,
                "max_ulps": t.max_ulps,
            }))).collect::<serde_json::Map<_, _>>(),
            "mismatches": self.mismatches.iter().map(|m| json!({
                "stage": m.stage, "array": m.array, "kind": m.kind, "detail": m.detail,
            })).collect::<Vec<_>>(),
        })
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
