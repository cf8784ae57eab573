//! The paper's A1 design, free-running: per prompt, greedy runs for every operator, theta and
//! shift, all three operators handed `z + c` in f32 through a real llama.cpp chain, compared
//! with the same operator and theta at c = 0.
//!
//! - sign: llama.cpp's penalties stage (the subject);
//! - subtractive: `ledger-penalties` subtractive mode (`z - ln theta`);
//! - normalized: `ledger-penalties` normalized mode (the repeat factor on log-probabilities).
//!
//! Every run of one prompt decodes in one batch and shares a sequence with the runs whose
//! tokens agree so far ([`harness::fork`]); each still chooses from its own shifted, penalized
//! array, so a 0 is measured. At every step each run's output is checked against the oracle's
//! arithmetic on the same f32 input ([`ValueCheck`]): every seen id's penalized value, and
//! every other id left untouched. The gap between a run's two best values is kept, so a
//! divergence that rests on a rounding margin is visible as such (a knife edge).

use crate::implementation::{short, Implementation};
use anyhow::{ensure, Context as _, Result};
use harness::fork::{self, Decoder, Forked, LogitsRow, Run};
use harness::{divergence, LoadedModel, Session, Stop};
use ledger::PenaltyConfig;
use oracle::gauge::Operator;
use oracle::stats::{self, Estimate};
use oracle::window::WindowLen;
use oracle::TokenId;
use serde::{Serialize, Serializer};
use subject::{Attention, Sampler};

/// Values of the normalized operator may differ from the oracle's by this much at
/// |1 - theta| <= 0.3 (scaled up in proportion beyond): the ledger's log-sum-exp adds up to
/// 262,144 terms in f32 (eight lanes), whose worst-case relative error is about n u / 8 = 2e-3,
/// scaled by |1 - theta| in the penalized value; the polynomial exp adds 3e-7 and the f32
/// roundings of values below 64 a few 1e-6. A choice whose margin is below it rests on
/// rounding.
pub const NORMALIZED_TOLERANCE: f64 = 1.0 / 1024.0;

pub fn normalized_tolerance(theta: f32) -> f64 {
    NORMALIZED_TOLERANCE * ((1.0 - theta as f64).abs() / 0.3).max(1.0)
}

/// Sign and subtractive outputs are one or two f32 roundings of an input that was itself
/// rounded (`z + c`); a margin within this many ulps of the best value can be decided by
/// rounding alone.
pub const KNIFE_ULPS: f32 = 8.0;

fn ulp(x: f32) -> f32 {
    let a = x.abs();
    f32::from_bits(a.to_bits() + 1) - a
}

/// Whether a choice with top-2 margin `margin` and best value `top` could have been decided
/// by rounding alone.
pub fn is_knife_edge(op: Operator, theta: f32, margin: f32, top: f32) -> bool {
    match op {
        Operator::Normalized if theta != 1.0 => margin as f64 <= normalized_tolerance(theta),
        _ => margin <= KNIFE_ULPS * ulp(top),
    }
}

/// Checks of a run's outputs against the oracle, over every step.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ValueCheck {
    /// Seen ids' penalized values compared with the oracle's arithmetic (theta != 1).
    pub compared: usize,
    pub mismatches: usize,
    /// Ids that must come out bit for bit as they went in (unseen ids; every id at theta 1).
    pub untouched: usize,
    pub moved: usize,
    /// Largest |value - oracle| among the seen ids.
    pub max_deviation: f64,
    pub first_mismatch: Option<String>,
}

impl ValueCheck {
    pub fn merge(&mut self, o: &ValueCheck) {
        self.compared += o.compared;
        self.mismatches += o.mismatches;
        self.untouched += o.untouched;
        self.moved += o.moved;
        self.max_deviation = self.max_deviation.max(o.max_deviation);
        if self.first_mismatch.is_none() {
            self.first_mismatch = o.first_mismatch.clone();
        }
    }
    pub fn clean(&self) -> bool {
        self.mismatches == 0 && self.moved == 0
    }
}

/// Whether `got` is the oracle's value for operator `op` on input `x` (an f32 shifted logit
/// of a seen id), and by how much it is off. `lse` is the log-sum-exp of the whole input
/// array. Sign: bit-exact (one f32 multiply or divide, which f64 then f32 rounds the same
/// way). Subtractive: within half an ulp of `ln theta` plus half an ulp of the result (the
/// two f32 roundings). Normalized: [`normalized_tolerance`].
pub fn value_ok(op: Operator, x: f32, got: f32, theta: f32, lse: f64) -> (bool, f64) {
    let (x64, t) = (x as f64, theta as f64);
    match op {
        Operator::Sign => {
            let want = (if x <= 0.0 { x64 * t } else { x64 / t }) as f32;
            (
                got.to_bits() == want.to_bits(),
                (got as f64 - want as f64).abs(),
            )
        }
        Operator::Subtractive => {
            let want = x64 - t.ln();
            let dev = (got as f64 - want).abs();
            (dev <= (ulp(t.ln() as f32) + ulp(got)) as f64 / 2.0, dev)
        }
        Operator::Normalized => {
            let want = lse + t * (x64 - lse);
            let dev = (got as f64 - want).abs();
            (dev <= normalized_tolerance(theta), dev)
        }
    }
}

/// An implementation's sampler: one penalties stage (repeat factor `theta`, a window of
/// `window` tokens, no frequency or presence term) in a chain.
pub fn sampler_for(
    imp: Implementation,
    theta: f32,
    n_vocab: i32,
    window: usize,
) -> Result<Sampler> {
    let cfg = |mode| PenaltyConfig::repeat_only(n_vocab, WindowLen(window), theta, mode);
    let ledger = |mode| ledger::ledger_penalties(cfg(mode));
    let stage = match imp {
        Implementation::LlamaSign => cfg(ledger::Mode::Default).builtin().build()?,
        Implementation::LedgerSign => ledger(ledger::Mode::Default)?,
        Implementation::LedgerSubtractive => ledger(ledger::Mode::Subtractive)?,
        Implementation::LedgerNormalized => ledger(ledger::Mode::Normalized)?,
        Implementation::PlantedSubtractive => {
            Sampler::custom(crate::planted::Subtractive::new(n_vocab as usize, theta))?
        }
        Implementation::EngineSign(name) => Sampler::custom(
            crate::engine_slot::EnginePenalty::new(name, n_vocab as usize, theta, window)?,
        )?,
    };
    Sampler::chain(vec![stage])
}

/// One greedy run: the implementation in one operator's slot, at one theta and shift.
pub struct GaugeRun {
    /// The slot (the operator the design measures), and what fills it.
    pub op: Operator,
    pub imp: Implementation,
    pub theta: f32,
    pub shift: f32,
    /// Whose arithmetic, at which theta, the values are checked against (the slot's, except
    /// in a control that checks the check).
    pub checked_as: (Operator, f32),
    sampler: Sampler,
    seen: Vec<bool>,
    seen_list: Vec<usize>,
    /// Per step: the chosen value minus the best other value, and whether that is a knife edge.
    pub margins: Vec<f32>,
    pub edges: Vec<bool>,
    pub check: ValueCheck,
}

impl GaugeRun {
    pub fn new(
        (op, imp): (Operator, Implementation),
        theta: f32,
        shift: f32,
        n_vocab: i32,
        prompt: &[TokenId],
        window: usize,
    ) -> Result<GaugeRun> {
        let mut sampler = sampler_for(imp, theta, n_vocab, window)?;
        let mut seen = vec![false; n_vocab as usize];
        let mut seen_list = Vec::new();
        for &t in prompt {
            sampler.accept(t)?;
            if !seen[t.0 as usize] {
                seen[t.0 as usize] = true;
                seen_list.push(t.0 as usize);
            }
        }
        Ok(GaugeRun {
            op,
            imp,
            theta,
            shift,
            checked_as: (op, theta),
            sampler,
            seen,
            seen_list,
            margins: Vec::new(),
            edges: Vec::new(),
            check: ValueCheck::default(),
        })
    }

    fn mismatch(&mut self, i: usize, x: f32, y: f32, what: &str) {
        if self.check.first_mismatch.is_none() {
            self.check.first_mismatch = Some(format!(
                "{} theta {} shift {} step {} id {i}: input {x} gave {y} ({what})",
                self.imp.label(),
                self.theta,
                self.shift,
                self.margins.len() - 1,
            ));
        }
    }
}

impl Run for GaugeRun {
    fn choose(&mut self, row: &LogitsRow<'_>) -> Result<TokenId> {
        let x: Vec<f32> = row.raw.iter().map(|&z| z + self.shift).collect();
        let y = self.sampler.apply_in_id_order(&x)?;
        // First maximum in id order (llama.cpp's greedy), and the best other value.
        let (mut best, mut second) = (0usize, f32::NEG_INFINITY);
        for i in 1..y.len() {
            if y[i] > y[best] {
                second = y[best];
                best = i;
            } else if y[i] > second {
                second = y[i];
            }
        }
        let margin = y[best] - second;
        self.margins.push(margin);
        self.edges
            .push(is_knife_edge(self.op, self.theta, margin, y[best]));
        // Every id the operator must leave alone comes out as it went in.
        let identity = self.theta == 1.0;
        let mut moved = None;
        for i in 0..y.len() {
            if (identity || !self.seen[i]) && y[i].to_bits() != x[i].to_bits() {
                self.check.moved += 1;
                moved.get_or_insert(i);
            }
        }
        self.check.untouched += if identity {
            y.len()
        } else {
            y.len() - self.seen_list.len()
        };
        if let Some(i) = moved {
            self.mismatch(i, x[i], y[i], "an id the operator must not touch moved");
        }
        // Every seen id's penalized value against the oracle's arithmetic.
        let (op, theta) = self.checked_as;
        if !identity {
            let lse = if op == Operator::Normalized {
                row.log_sum_exp() + self.shift as f64
            } else {
                0.0
            };
            for k in 0..self.seen_list.len() {
                let i = self.seen_list[k];
                let (ok, dev) = value_ok(op, x[i], y[i], theta, lse);
                self.check.compared += 1;
                self.check.max_deviation = self.check.max_deviation.max(dev);
                if !ok {
                    self.check.mismatches += 1;
                    self.mismatch(
                        i,
                        x[i],
                        y[i],
                        &format!("{} arithmetic at theta {theta} expected", op.as_str()),
                    );
                }
            }
        }
        let t = TokenId(best as i32);
        self.sampler.accept(t)?;
        if !self.seen[best] {
            self.seen[best] = true;
            self.seen_list.push(best);
        }
        Ok(t)
    }
}

/// The design: which implementation fills each operator's slot, which thetas and shifts,
/// and how long.
#[derive(Debug, Clone, PartialEq)]
pub struct Design {
    pub slots: Vec<(Operator, Implementation)>,
    pub thetas: Vec<f32>,
    pub shifts: Vec<f32>,
    pub max_new: usize,
    pub threads: i32,
}

impl Design {
    /// The engine whose penalty fills the sign slot: llama.cpp unless another engine's
    /// (`Implementation::EngineSign`) does.
    pub fn engine(&self) -> engine::EngineName {
        self.slots
            .iter()
            .find_map(|(_, imp)| match imp {
                Implementation::EngineSign(name) => Some(*name),
                _ => None,
            })
            .unwrap_or(engine::EngineName::Llama)
    }

    /// The audited design: the subject in the sign slot, the ledger's modes in the others.
    pub fn standard(thetas: Vec<f32>, shifts: Vec<f32>, max_new: usize, threads: i32) -> Design {
        Design {
            slots: Operator::ALL
                .iter()
                .map(|&op| (op, Implementation::of(op)))
                .collect(),
            thetas,
            shifts,
            max_new,
            threads,
        }
    }

    /// The runs of one prompt, in a fixed order: theta, then slot, then shift.
    pub fn cells(&self) -> Vec<((Operator, Implementation), f32, f32)> {
        let mut v = Vec::new();
        for &theta in &self.thetas {
            for &slot in &self.slots {
                for &c in &self.shifts {
                    v.push((slot, theta, c));
                }
            }
        }
        v
    }

    pub fn runs(&self, n_vocab: i32, prompt: &[TokenId]) -> Result<Vec<GaugeRun>> {
        let window = prompt.len() + self.max_new;
        self.cells()
            .into_iter()
            .map(|(slot, theta, c)| GaugeRun::new(slot, theta, c, n_vocab, prompt, window))
            .collect()
    }
}

/// One run's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    pub op: Operator,
    pub imp: Implementation,
    pub theta: f32,
    pub shift: f32,
    pub tokens: Vec<TokenId>,
    pub stop: Stop,
    pub margins: Vec<f32>,
    pub edges: Vec<bool>,
    pub check: ValueCheck,
}

/// One prompt's runs, and (on a model) a few of them decoded again alone, which the forked
/// ones must reproduce: `(index into runs, tokens, per-step margins)`.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptRuns {
    pub prompt: String,
    pub prompt_tokens: usize,
    pub runs: Vec<RunRecord>,
    pub decoded: usize,
    pub max_live: usize,
    pub alone: Vec<(usize, Vec<TokenId>, Vec<f32>)>,
}

pub fn records(runs: Vec<GaugeRun>, out: Forked) -> Vec<RunRecord> {
    runs.into_iter()
        .zip(out.tokens.into_iter().zip(out.stops))
        .map(|(r, (tokens, stop))| RunRecord {
            op: r.op,
            imp: r.imp,
            theta: r.theta,
            shift: r.shift,
            tokens,
            stop,
            margins: r.margins,
            edges: r.edges,
            check: r.check,
        })
        .collect()
}

/// The runs decoded again alone: the sign slot at the largest theta, at c = 0 (the headline
/// cells' reference) and at the largest shift. Both sit on forked sequences in the batch
/// (their tokens part from the theta-1 runs early), so they check forked decoding.
pub fn recheck_indices(design: &Design) -> Vec<usize> {
    let theta = design
        .thetas
        .iter()
        .copied()
        .fold(f32::NEG_INFINITY, f32::max);
    let reach = design
        .shifts
        .iter()
        .copied()
        .fold(f32::NEG_INFINITY, f32::max);
    design
        .cells()
        .iter()
        .enumerate()
        .filter(|(_, ((op, _), t, c))| {
            *op == Operator::Sign && *t == theta && (*c == 0.0 || *c == reach)
        })
        .map(|(k, _)| k)
        .collect()
}

/// A fresh copy of run `k` of the design, decoded alone (one sequence, one token per decode).
fn decode_alone(
    m: &LoadedModel,
    ids: &[TokenId],
    design: &Design,
    k: usize,
) -> Result<(Vec<TokenId>, Vec<f32>)> {
    let (slot, theta, c) = design.cells()[k];
    let window = ids.len() + design.max_new;
    let mut run = GaugeRun::new(slot, theta, c, m.model.n_vocab(), ids, window)?;
    // Plain attention, like the forked runs' context (see `subject::MultiContext`).
    let mut session = Session::with_attention(
        &m.model,
        ids.to_vec(),
        design.max_new,
        Attention::Plain,
        design.threads,
    )?;
    let (tokens, _) =
        session.generate(design.max_new, |raw, _| run.choose(&LogitsRow::new(raw)))?;
    Ok((tokens, run.margins))
}

/// Every run of the design on one prompt of one model.
pub fn run_prompt(m: &LoadedModel, design: &Design, prompt: &str) -> Result<PromptRuns> {
    let ids = m.chat_ids(prompt)?;
    let mut runs = design.runs(m.model.n_vocab(), &ids)?;
    let out = fork::run_forked(&m.model, &ids, &mut runs, design.max_new, design.threads)
        .with_context(|| format!("decoding prompt {prompt:?}"))?;
    let alone = recheck_indices(design)
        .into_iter()
        .map(|k| decode_alone(m, &ids, design, k).map(|(t, g)| (k, t, g)))
        .collect::<Result<Vec<_>>>()?;
    Ok(PromptRuns {
        prompt: prompt.to_string(),
        prompt_tokens: ids.len(),
        decoded: out.decoded,
        max_live: out.max_live,
        runs: records(runs, out),
        alone,
    })
}

/// Every run of the design on one prompt of a planted decoder (`n_vocab` ids).
pub fn run_planted<D: Decoder>(
    decoder: &mut D,
    n_vocab: i32,
    design: &Design,
    prompt: &[TokenId],
) -> Result<PromptRuns> {
    let mut runs = design.runs(n_vocab, prompt)?;
    let out = fork::run_on(decoder, prompt, &mut runs, design.max_new)?;
    Ok(PromptRuns {
        prompt: format!("{:?}", prompt.iter().map(|t| t.0).collect::<Vec<_>>()),
        prompt_tokens: prompt.len(),
        decoded: out.decoded,
        max_live: out.max_live,
        runs: records(runs, out),
        alone: Vec::new(),
    })
}

/// One prompt's measures for one run against its reference (same slot and theta, shift 0).
#[derive(Debug, Clone, PartialEq)]
pub struct PromptMeasure {
    pub differing_share: f64,
    /// First index where the run and its reference differ; the longer length when they never
    /// do.
    pub first_divergence: usize,
    pub diverged: bool,
    /// At the first divergence: the smaller of the two runs' top-2 margins, and whether
    /// either was a knife edge.
    pub margin_at_divergence: Option<f32>,
    pub knife_edge: bool,
    pub distinct2: f64,
    pub rep_rate: f64,
}

pub fn measure(run: &RunRecord, reference: &RunRecord) -> PromptMeasure {
    let d = divergence(&reference.tokens, &run.tokens);
    let at = |r: &RunRecord, i: usize| {
        (
            r.margins.get(i).copied().unwrap_or(f32::INFINITY),
            r.edges.get(i).copied().unwrap_or(false),
        )
    };
    let (margin, knife_edge) = match d {
        Some(i) => {
            let ((a, ea), (b, eb)) = (at(run, i), at(reference, i));
            (Some(a.min(b)), ea || eb)
        }
        None => (None, false),
    };
    PromptMeasure {
        differing_share: stats::differing_share(&reference.tokens, &run.tokens),
        first_divergence: d.unwrap_or(reference.tokens.len().max(run.tokens.len())),
        diverged: d.is_some(),
        margin_at_divergence: margin,
        knife_edge,
        distinct2: stats::distinct2(&run.tokens),
        rep_rate: stats::rep_rate(&run.tokens),
    }
}

/// One row of the design: a slot, theta and shift over every prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub op: Operator,
    pub imp: Implementation,
    pub theta: f32,
    pub shift: f32,
    pub per_prompt: Vec<PromptMeasure>,
}

impl Cell {
    pub fn operator(&self) -> Operator {
        self.op
    }
    /// The reference cell (c = 0) is compared with itself: it carries distinct-2 and the
    /// repetition rate, never evidence of a divergence.
    pub fn is_reference(&self) -> bool {
        self.shift == 0.0
    }
    fn estimate(&self, f: impl Fn(&PromptMeasure) -> f64) -> Estimate {
        stats::bootstrap_mean(&self.per_prompt.iter().map(f).collect::<Vec<_>>())
    }
    pub fn differing(&self) -> Estimate {
        self.estimate(|m| m.differing_share)
    }
    pub fn first_divergence(&self) -> Estimate {
        self.estimate(|m| m.first_divergence as f64)
    }
    pub fn distinct2(&self) -> Estimate {
        self.estimate(|m| m.distinct2)
    }
    pub fn rep_rate(&self) -> Estimate {
        self.estimate(|m| m.rep_rate)
    }
    pub fn diverged(&self) -> usize {
        self.per_prompt.iter().filter(|m| m.diverged).count()
    }
    /// Prompts whose divergence rests on a knife edge.
    pub fn knife_edges(&self) -> usize {
        self.per_prompt.iter().filter(|m| m.knife_edge).count()
    }
}

/// A model's (or a planted source's) runs over every prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRuns {
    pub model_label: String,
    pub model_desc: String,
    pub prompts: Vec<PromptRuns>,
    pub max_new: usize,
    pub seconds: f64,
}

impl ModelRuns {
    pub fn run(m: &LoadedModel, design: &Design, prompts: &[String]) -> Result<ModelRuns> {
        ensure!(!prompts.is_empty(), "no prompts");
        let start = std::time::Instant::now();
        let runs = prompts
            .iter()
            .map(|p| run_prompt(m, design, p))
            .collect::<Result<Vec<_>>>()?;
        Ok(ModelRuns {
            model_label: m.choice.label.clone(),
            model_desc: m.model.describe(),
            prompts: runs,
            max_new: design.max_new,
            seconds: start.elapsed().as_secs_f64(),
        })
    }

    /// Generated tokens (every run's, shared or not), tokens decoded, and generated tokens per
    /// second of wall time.
    pub fn tokens_per_second(&self) -> (usize, usize, f64) {
        let generated: usize = self
            .prompts
            .iter()
            .flat_map(|p| p.runs.iter().map(|r| r.tokens.len()))
            .sum();
        let decoded: usize = self.prompts.iter().map(|p| p.decoded).sum();
        (
            generated,
            decoded,
            generated as f64 / self.seconds.max(1e-9),
        )
    }

    /// One cell per (slot, theta, shift), in design order. Every run is measured against the
    /// run of its own slot and theta at c = 0, which must exist.
    pub fn cells(&self) -> Result<Vec<Cell>> {
        let Some(first) = self.prompts.first() else {
            return Ok(Vec::new());
        };
        first
            .runs
            .iter()
            .enumerate()
            .map(|(k, r)| {
                let per_prompt = self
                    .prompts
                    .iter()
                    .map(|p| {
                        let run = &p.runs[k];
                        let reference = p
                            .runs
                            .iter()
                            .find(|q| q.op == run.op && q.theta == run.theta && q.shift == 0.0)
                            .with_context(|| {
                                format!("no c = 0 run for {} theta {}", run.op.as_str(), run.theta)
                            })?;
                        Ok(measure(run, reference))
                    })
                    .collect::<Result<Vec<_>>>()?;
                Ok(Cell {
                    op: r.op,
                    imp: r.imp,
                    theta: r.theta,
                    shift: r.shift,
                    per_prompt,
                })
            })
            .collect()
    }

    /// Every run's value checks, merged per slot.
    pub fn checks(&self) -> Vec<(Operator, ValueCheck)> {
        Operator::ALL
            .iter()
            .map(|&op| {
                let mut c = ValueCheck::default();
                for r in self.prompts.iter().flat_map(|p| &p.runs) {
                    if r.op == op {
                        c.merge(&r.check);
                    }
                }
                (op, c)
            })
            .collect()
    }

    /// The no-op leg: every theta-1 run other than the sign slot's c = 0 run, against that
    /// run, per prompt. A difference at a knife edge is counted apart, not as a failure.
    pub fn no_op_leg(&self) -> NoOp {
        let mut out = NoOp::default();
        for (pi, p) in self.prompts.iter().enumerate() {
            let Some(reference) = p
                .runs
                .iter()
                .find(|r| r.theta == 1.0 && r.shift == 0.0 && r.op == Operator::Sign)
            else {
                continue;
            };
            for r in p.runs.iter().filter(|r| r.theta == 1.0) {
                if std::ptr::eq(r, reference) {
                    continue;
                }
                out.compared += 1;
                let m = measure(r, reference);
                if m.diverged {
                    if m.knife_edge {
                        out.knife_edges += 1;
                    } else {
                        out.failures += 1;
                    }
                    if out.first.is_none() {
                        out.first = Some(format!(
                            "{}: prompt {pi}, {} c={}: differs at token {} (margin {:e}{})",
                            self.model_label,
                            r.op.as_str(),
                            r.shift,
                            m.first_divergence,
                            m.margin_at_divergence.unwrap_or(f32::NAN),
                            if m.knife_edge { ", a knife edge" } else { "" }
                        ));
                    }
                }
            }
        }
        out
    }

    /// The forked runs of [`recheck_indices`] against the same runs decoded alone, per
    /// prompt. With weights as stored and plain attention a batched row is the lone row bit
    /// for bit (`subject::MultiContext`), so any parting, even at a tie, is a failure.
    pub fn fork_check(&self) -> ForkCheck {
        let mut out = ForkCheck::default();
        for (pi, p) in self.prompts.iter().enumerate() {
            for (k, alone, margins) in &p.alone {
                let forked = &p.runs[*k];
                out.runs += 1;
                out.tokens += alone.len().max(forked.tokens.len());
                if let Some(i) = divergence(alone, &forked.tokens) {
                    let m = margins.get(i).copied().unwrap_or(f32::INFINITY);
                    out.failures += 1;
                    if out.first.is_none() {
                        out.first = Some(format!(
                            "{}: prompt {pi}, sign theta {} c={}: parts at token {i} (lone margin {m:e})",
                            self.model_label, forked.theta, forked.shift
                        ));
                    }
                }
            }
        }
        out
    }
}

impl Serialize for ModelRuns {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Check<'a> {
            operator: &'static str,
            #[serde(flatten)]
            check: &'a ValueCheck,
        }
        #[derive(Serialize)]
        struct Written<'a> {
            model: &'a str,
            model_desc: &'a str,
            prompts: usize,
            max_new: usize,
            generated_tokens: usize,
            decoded_tokens: usize,
            tokens_per_second: f64,
            rows: Vec<Cell>,
            value_checks: Vec<Check<'a>>,
        }
        let (generated, decoded, tps) = self.tokens_per_second();
        let checks = self.checks();
        Written {
            model: &self.model_label,
            model_desc: &self.model_desc,
            prompts: self.prompts.len(),
            max_new: self.max_new,
            generated_tokens: generated,
            decoded_tokens: decoded,
            tokens_per_second: (tps * 10.0).round() / 10.0,
            rows: self.cells().map_err(serde::ser::Error::custom)?,
            value_checks: (checks.iter())
                .map(|(op, check)| Check {
                    operator: op.as_str(),
                    check,
                })
                .collect(),
        }
        .serialize(s)
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct NoOp {
    pub compared: usize,
    pub failures: usize,
    pub knife_edges: usize,
    pub first: Option<String>,
}

impl NoOp {
    pub fn merge(&mut self, o: NoOp) {
        self.compared += o.compared;
        self.failures += o.failures;
        self.knife_edges += o.knife_edges;
        self.first = self.first.take().or(o.first);
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ForkCheck {
    pub runs: usize,
    pub tokens: usize,
    pub failures: usize,
    pub first: Option<String>,
}

impl ForkCheck {
    pub fn merge(&mut self, o: ForkCheck) {
        self.runs += o.runs;
        self.tokens += o.tokens;
        self.failures += o.failures;
        self.first = self.first.take().or(o.first);
    }
}

impl Serialize for Cell {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Written {
            operator: &'static str,
            implementation: &'static str,
            theta: f64,
            shift: f64,
            reference: bool,
            differing_share: f64,
            ci: [f64; 2],
            first_divergence: f64,
            first_divergence_ci: [f64; 2],
            diverged_prompts: usize,
            knife_edge_prompts: usize,
            margins_at_divergence: Vec<Option<f32>>,
            distinct2: f64,
            distinct2_ci: [f64; 2],
            rep_rate: f64,
            rep_rate_ci: [f64; 2],
        }
        let (d, f, d2, rr) = (
            self.differing(),
            self.first_divergence(),
            self.distinct2(),
            self.rep_rate(),
        );
        let interval = |e: &Estimate| [e.lo, e.hi];
        let margins = self.per_prompt.iter().map(|m| m.margin_at_divergence);
        Written {
            operator: self.operator().as_str(),
            implementation: self.imp.label(),
            theta: short(self.theta),
            shift: short(self.shift),
            reference: self.is_reference(),
            differing_share: d.mean,
            ci: interval(&d),
            first_divergence: f.mean,
            first_divergence_ci: interval(&f),
            diverged_prompts: self.diverged(),
            knife_edge_prompts: self.knife_edges(),
            margins_at_divergence: margins.collect(),
            distinct2: d2.mean,
            distinct2_ci: interval(&d2),
            rep_rate: rr.mean,
            rep_rate_ci: interval(&rr),
        }
        .serialize(s)
    }
}

/// The text table of one model's cells.
pub fn to_text(m: &ModelRuns) -> Result<String> {
    let (generated, decoded, tps) = m.tokens_per_second();
    let mut out = format!(
        "{} ({}): {} prompts x up to {} new tokens; {generated} generated tokens from {decoded} decoded ({tps:.0} tokens/s)\n  operator     implementation               theta  shift  differing share [95% CI]   first divergence [95% CI]  diverged  knife-edge  distinct-2 [95% CI]    rep rate [95% CI]\n",
        m.model_label,
        m.model_desc,
        m.prompts.len(),
        m.max_new
    );
    for c in m.cells()? {
        let (d, f, d2, rr) = (
            c.differing(),
            c.first_divergence(),
            c.distinct2(),
            c.rep_rate(),
        );
        out.push_str(&format!(
            "  {:<12} {:<28} {:>5} {:>6}  {:.3} [{:.3}, {:.3}]      {:>6.1} [{:>5.1}, {:>5.1}]      {:>3}/{:<3}   {:>3}        {:.3} [{:.3}, {:.3}]  {:.3} [{:.3}, {:.3}]{}\n",
            c.operator().as_str(),
            c.imp.label(),
            c.theta,
            c.shift,
            d.mean, d.lo, d.hi,
            f.mean, f.lo, f.hi,
            c.diverged(),
            c.per_prompt.len(),
            c.knife_edges(),
            d2.mean, d2.lo, d2.hi,
            rr.mean, rr.lo, rr.hi,
            if c.is_reference() { "  (reference)" } else { "" },
        ));
    }
    for (op, c) in m.checks() {
        out.push_str(&format!(
            "  {} against the oracle: {} of {} seen-id values differ (largest deviation {:e}); {} of {} other ids moved\n",
            op.as_str(),
            c.mismatches,
            c.compared,
            c.max_deviation,
            c.moved,
            c.untouched
        ));
    }
    Ok(out)
}
