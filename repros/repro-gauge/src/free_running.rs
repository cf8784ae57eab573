//! The paper's A1 design, free-running (PREREG F4): per prompt, greedy runs for every
//! operator, theta and shift, each handed `z + c` in f32 through a real llama.cpp chain (sign:
//! llama.cpp's penalties stage, the subject; subtractive and normalized: `ledger-penalties`),
//! compared with the same operator and theta at c = 0.
//!
//! A prompt's runs decode in one batch, sharing a sequence while their tokens agree
//! ([`harness::fork`]); each still chooses from its own shifted, penalized array, so a 0 is
//! measured. Every step is checked against the oracle's arithmetic ([`ValueCheck`]), and each
//! choice's top-2 margin is kept, so a divergence that rests on rounding shows as a knife edge.

use crate::implementation::{short, Implementation};
use anyhow::{ensure, Context as _, Result};
use harness::fork::{self, Decoder, Forked, LogitsRow, Run};
use harness::{divergence, LoadedModel, Session};
use ledger::PenaltyConfig;
use oracle::gauge::Operator;
use oracle::stats::{self, Estimate};
use oracle::window::WindowLen;
use oracle::TokenId;
use serde::{Serialize, Serializer};
use serde_json::json;
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

pub fn ulp(x: f32) -> f32 {
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

/// llama.cpp's greedy choice over `(id, value)` pairs (the first maximum), the gap between it
/// and the best other value, and its value.
pub fn first_max(values: impl IntoIterator<Item = (i32, f32)>) -> (TokenId, f32, f32) {
    let (mut best, mut bv, mut second) = (-1, f32::NEG_INFINITY, f32::NEG_INFINITY);
    for (id, v) in values {
        if best < 0 || v > bv {
            (best, bv, second) = (id, v, bv);
        } else if v > second {
            second = v;
        }
    }
    (TokenId(best), bv - second, bv)
}

/// [`first_max`] over an id-ordered row.
pub fn first_max_of(row: &[f32]) -> (TokenId, f32, f32) {
    first_max(row.iter().enumerate().map(|(i, &v)| (i as i32, v)))
}

/// The ids seen so far, as a mask and in the order they were first seen.
#[derive(Debug, Clone)]
pub struct Seen {
    pub mask: Vec<bool>,
    pub ids: Vec<usize>,
}

impl Seen {
    pub fn new(n_vocab: i32) -> Seen {
        Seen {
            mask: vec![false; n_vocab as usize],
            ids: Vec::new(),
        }
    }
    pub fn insert(&mut self, t: TokenId) {
        let i = t.0 as usize;
        if !self.mask[i] {
            self.mask[i] = true;
            self.ids.push(i);
        }
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

/// Every run's value checks, merged per slot.
pub fn checks<'a>(
    runs: impl Iterator<Item = &'a RunRecord> + Clone,
) -> Vec<(Operator, ValueCheck)> {
    let merged = |op| {
        let mut c = ValueCheck::default();
        runs.clone()
            .filter(|r| r.op == op)
            .for_each(|r| c.merge(&r.check));
        (op, c)
    };
    Operator::ALL.into_iter().map(merged).collect()
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
            let dev = (got as f64 - (x64 - t.ln())).abs();
            (dev <= (ulp(t.ln() as f32) + ulp(got)) as f64 / 2.0, dev)
        }
        Operator::Normalized => {
            let dev = (got as f64 - (lse + t * (x64 - lse))).abs();
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
        Implementation::PlantedNormalized => {
            Sampler::custom(crate::planted::Normalized::new(n_vocab as usize, theta))?
        }
        Implementation::EngineSign(name) => Sampler::custom(
            crate::engine_slot::EnginePenalty::new(name, n_vocab as usize, theta, window)?,
        )?,
    };
    Sampler::chain(vec![stage])
}

/// One greedy run's record: the implementation in one operator's slot (the operator the
/// design measures), at one theta and shift, and what it chose.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    pub op: Operator,
    pub imp: Implementation,
    pub theta: f32,
    pub shift: f32,
    pub tokens: Vec<TokenId>,
    /// Per step: the chosen value minus the best other value, and whether that is a knife edge.
    pub margins: Vec<f32>,
    pub edges: Vec<bool>,
    pub check: ValueCheck,
}

impl RunRecord {
    fn mismatch(&mut self, i: usize, x: f32, y: f32, what: &str) {
        let step = self.margins.len() - 1;
        self.check.first_mismatch.get_or_insert_with(|| {
            let (imp, theta, shift) = (self.imp.label(), self.theta, self.shift);
            format!(
                "{imp} theta {theta} shift {shift} step {step} id {i}: input {x} gave {y} ({what})"
            )
        });
    }
}

/// One greedy run in flight.
pub struct GaugeRun {
    pub record: RunRecord,
    /// Whose arithmetic, at which theta, the values are checked against (the slot's, except
    /// in a control that checks the check).
    pub checked_as: (Operator, f32),
    sampler: Sampler,
    seen: Seen,
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
        let mut seen = Seen::new(n_vocab);
        for &t in prompt {
            sampler.accept(t)?;
            seen.insert(t);
        }
        let record = RunRecord {
            op,
            imp,
            theta,
            shift,
            tokens: Vec::new(),
            margins: Vec::new(),
            edges: Vec::new(),
            check: ValueCheck::default(),
        };
        Ok(GaugeRun {
            record,
            checked_as: (op, theta),
            sampler,
            seen,
        })
    }
}

impl Run for GaugeRun {
    fn choose(&mut self, row: &LogitsRow<'_>) -> Result<TokenId> {
        let r = &mut self.record;
        let x: Vec<f32> = row.raw.iter().map(|&z| z + r.shift).collect();
        let y = self.sampler.apply_in_id_order(&x)?;
        let (best, margin, top) = first_max_of(&y);
        r.margins.push(margin);
        r.edges.push(is_knife_edge(r.op, r.theta, margin, top));
        // Every id the operator must leave alone comes out as it went in.
        let identity = r.theta == 1.0;
        let alone = |i: usize| identity || !self.seen.mask[i];
        let moved: Vec<usize> = (0..y.len())
            .filter(|&i| alone(i) && y[i].to_bits() != x[i].to_bits())
            .collect();
        r.check.moved += moved.len();
        r.check.untouched += y.len() - if identity { 0 } else { self.seen.ids.len() };
        if let Some(&i) = moved.first() {
            r.mismatch(i, x[i], y[i], "an id the operator must not touch moved");
        }
        // Every seen id's penalized value against the oracle's arithmetic.
        let (op, theta) = self.checked_as;
        if !identity {
            let lse = match op {
                Operator::Normalized => row.log_sum_exp() + r.shift as f64,
                _ => 0.0,
            };
            for &i in &self.seen.ids {
                let (ok, dev) = value_ok(op, x[i], y[i], theta, lse);
                r.check.compared += 1;
                r.check.max_deviation = r.check.max_deviation.max(dev);
                if !ok {
                    r.check.mismatches += 1;
                    let what = format!("{} arithmetic at theta {theta} expected", op.as_str());
                    r.mismatch(i, x[i], y[i], &what);
                }
            }
        }
        self.sampler.accept(best)?;
        self.seen.insert(best);
        Ok(best)
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
                .map(|op| (op, Implementation::of(op)))
                .to_vec(),
            thetas,
            shifts,
            max_new,
            threads,
        }
    }

    /// The runs of one prompt, in a fixed order: theta, then slot, then shift.
    pub fn cells(&self) -> Vec<((Operator, Implementation), f32, f32)> {
        let per_theta = |&theta| {
            let per_slot = move |&slot| self.shifts.iter().map(move |&c| (slot, theta, c));
            self.slots.iter().flat_map(per_slot)
        };
        self.thetas.iter().flat_map(per_theta).collect()
    }

    fn run(&self, k: usize, n_vocab: i32, prompt: &[TokenId]) -> Result<GaugeRun> {
        let (slot, theta, c) = self.cells()[k];
        GaugeRun::new(slot, theta, c, n_vocab, prompt, prompt.len() + self.max_new)
    }

    pub fn runs(&self, n_vocab: i32, prompt: &[TokenId]) -> Result<Vec<GaugeRun>> {
        (0..self.cells().len())
            .map(|k| self.run(k, n_vocab, prompt))
            .collect()
    }
}

/// One prompt's runs, and (on a model) a few of them decoded again alone, which the forked
/// ones must reproduce: `(index into runs, tokens, per-step margins)`.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptRuns {
    pub prompt: String,
    pub runs: Vec<RunRecord>,
    pub decoded: usize,
    pub max_live: usize,
    pub alone: Vec<(usize, Vec<TokenId>, Vec<f32>)>,
}

impl PromptRuns {
    fn new(prompt: String, runs: Vec<GaugeRun>, out: Forked) -> PromptRuns {
        PromptRuns {
            prompt,
            decoded: out.decoded,
            max_live: out.max_live,
            runs: (runs.into_iter().zip(out.tokens))
                .map(|(r, tokens)| RunRecord { tokens, ..r.record })
                .collect(),
            alone: Vec::new(),
        }
    }
}

/// The runs decoded again alone: the sign slot at the largest theta, at c = 0 (the headline
/// cells' reference) and at the largest shift. Both sit on forked sequences in the batch
/// (their tokens part from the theta-1 runs early), so they check forked decoding.
pub fn recheck_indices(design: &Design) -> Vec<usize> {
    let largest = |v: &[f32]| v.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let (theta, reach) = (largest(&design.thetas), largest(&design.shifts));
    let cells = design.cells().into_iter().enumerate();
    cells
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
) -> Result<(usize, Vec<TokenId>, Vec<f32>)> {
    let mut run = design.run(k, m.model.n_vocab(), ids)?;
    // Plain attention, like the forked runs' context (see `subject::MultiContext`).
    let (max_new, threads) = (design.max_new, design.threads);
    let mut session =
        Session::with_attention(&m.model, ids.to_vec(), max_new, Attention::Plain, threads)?;
    let (tokens, _) = session.generate(max_new, |raw, _| run.choose(&LogitsRow::new(raw)))?;
    Ok((k, tokens, run.record.margins))
}

/// Every run of the design on one prompt of one model.
pub fn run_prompt(m: &LoadedModel, design: &Design, prompt: &str) -> Result<PromptRuns> {
    let ids = m.chat_ids(prompt)?;
    let mut runs = design.runs(m.model.n_vocab(), &ids)?;
    let out = fork::run_forked(&m.model, &ids, &mut runs, design.max_new, design.threads)
        .with_context(|| format!("decoding prompt {prompt:?}"))?;
    let alone = recheck_indices(design)
        .into_iter()
        .map(|k| decode_alone(m, &ids, design, k))
        .collect::<Result<Vec<_>>>()?;
    Ok(PromptRuns {
        alone,
        ..PromptRuns::new(prompt.to_string(), runs, out)
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
    let text = format!("{:?}", prompt.iter().map(|t| t.0).collect::<Vec<_>>());
    Ok(PromptRuns::new(text, runs, out))
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
        let margin = r.margins.get(i).copied().unwrap_or(f32::INFINITY);
        (margin, r.edges.get(i).copied().unwrap_or(false))
    };
    let ((a, ea), (b, eb)) = d.map_or(((0.0, false), (0.0, false)), |i| {
        (at(run, i), at(reference, i))
    });
    PromptMeasure {
        differing_share: stats::differing_share(&reference.tokens, &run.tokens),
        first_divergence: d.unwrap_or(reference.tokens.len().max(run.tokens.len())),
        diverged: d.is_some(),
        margin_at_divergence: d.map(|_| a.min(b)),
        knife_edge: ea || eb,
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
    /// The differing share, the first divergence, distinct-2 and the repetition rate.
    fn estimates(&self) -> [Estimate; 4] {
        [
            self.differing(),
            self.estimate(|m| m.first_divergence as f64),
            self.estimate(|m| m.distinct2),
            self.estimate(|m| m.rep_rate),
        ]
    }
    pub fn diverged(&self) -> usize {
        self.per_prompt.iter().filter(|m| m.diverged).count()
    }
    /// Prompts whose divergence rests on a knife edge.
    pub fn knife_edges(&self) -> usize {
        self.per_prompt.iter().filter(|m| m.knife_edge).count()
    }
}

impl Serialize for Cell {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let [d, f, d2, rr] = self.estimates();
        let ci = |e: &Estimate| [e.lo, e.hi];
        let margins: Vec<Option<f32>> = (self.per_prompt.iter())
            .map(|m| m.margin_at_divergence)
            .collect();
        json!({
            "operator": self.op.as_str(),
            "implementation": self.imp.label(),
            "theta": short(self.theta),
            "shift": short(self.shift),
            "reference": self.is_reference(),
            "differing_share": d.mean,
            "ci": ci(&d),
            "first_divergence": f.mean,
            "first_divergence_ci": ci(&f),
            "diverged_prompts": self.diverged(),
            "knife_edge_prompts": self.knife_edges(),
            "margins_at_divergence": margins,
            "distinct2": d2.mean,
            "distinct2_ci": ci(&d2),
            "rep_rate": rr.mean,
            "rep_rate_ci": ci(&rr),
        })
        .serialize(s)
    }
}

/// The no-op leg, or the fork check: comparisons, failures, those at knife edges (the no-op
/// leg) or tokens compared (the fork check), and the first failure.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    pub compared: usize,
    pub failures: usize,
    pub knife_edges: usize,
    pub tokens: usize,
    pub first: Option<String>,
}

impl Tally {
    fn fail(&mut self, first: impl FnOnce() -> String) {
        self.failures += 1;
        self.first.get_or_insert_with(first);
    }
}

/// A model's (or a planted source's) runs over every prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRuns {
    pub model_label: String,
    pub model_desc: String,
    pub prompts: Vec<PromptRuns>,
    pub max_new: usize,
}

impl ModelRuns {
    pub fn run(m: &LoadedModel, design: &Design, prompts: &[String]) -> Result<ModelRuns> {
        ensure!(!prompts.is_empty(), "no prompts");
        let start = std::time::Instant::now();
        let mut progress = cmdline::Progress::new(
            format!("F4 design prompts on {}", m.choice.label),
            prompts.len() as u64,
        );
        let runs = prompts
            .iter()
            .map(|p| {
                let r = run_prompt(m, design, p);
                progress.inc(1);
                r
            })
            .collect::<Result<Vec<_>>>()?;
        progress.finish();
        let runs = ModelRuns {
            model_label: m.choice.label.clone(),
            model_desc: m.model.describe(),
            prompts: runs,
            max_new: design.max_new,
        };
        // The speed is a timing, so it goes to stderr, never into the report.
        let (generated, decoded) = runs.tokens();
        let seconds = start.elapsed().as_secs_f64();
        cmdline::say(&format!(
            "F4 design on {}: {generated} generated tokens from {decoded} decoded in {seconds:.0}s ({:.0} generated tokens/s)",
            runs.model_label,
            generated as f64 / seconds.max(1e-9)
        ));
        Ok(runs)
    }

    pub fn runs(&self) -> impl Iterator<Item = &RunRecord> + Clone {
        self.prompts.iter().flat_map(|p| &p.runs)
    }

    /// Generated tokens (every run's, shared or not) and tokens decoded.
    pub fn tokens(&self) -> (usize, usize) {
        let generated: usize = self.runs().map(|r| r.tokens.len()).sum();
        let decoded: usize = self.prompts.iter().map(|p| p.decoded).sum();
        (generated, decoded)
    }

    /// One cell per (slot, theta, shift), in design order. Every run is measured against the
    /// run of its own slot and theta at c = 0, which must exist.
    pub fn cells(&self) -> Result<Vec<Cell>> {
        let Some(first) = self.prompts.first() else {
            return Ok(Vec::new());
        };
        let measured = |p: &PromptRuns, k: usize| {
            let run = &p.runs[k];
            let reference = (p.runs.iter())
                .find(|q| q.op == run.op && q.theta == run.theta && q.shift == 0.0)
                .with_context(|| {
                    format!("no c = 0 run for {} theta {}", run.op.as_str(), run.theta)
                })?;
            Ok(measure(run, reference))
        };
        let cell = |(k, r): (usize, &RunRecord)| {
            Ok(Cell {
                op: r.op,
                imp: r.imp,
                theta: r.theta,
                shift: r.shift,
                per_prompt: self
                    .prompts
                    .iter()
                    .map(|p| measured(p, k))
                    .collect::<Result<_>>()?,
            })
        };
        first.runs.iter().enumerate().map(cell).collect()
    }

    pub fn checks(&self) -> Vec<(Operator, ValueCheck)> {
        checks(self.runs())
    }

    /// The no-op leg over `models`: every theta-1 run other than the sign slot's c = 0 run,
    /// against that run, per prompt. A difference at a knife edge is counted apart, not as a
    /// failure.
    pub fn no_op_leg(models: &[ModelRuns]) -> Tally {
        let mut out = Tally::default();
        for m in models {
            for (pi, p) in m.prompts.iter().enumerate() {
                let Some(reference) = (p.runs.iter())
                    .find(|r| r.theta == 1.0 && r.shift == 0.0 && r.op == Operator::Sign)
                else {
                    continue;
                };
                let others = p.runs.iter().filter(|r| r.theta == 1.0);
                for r in others.filter(|r| !std::ptr::eq(*r, reference)) {
                    out.compared += 1;
                    let d = measure(r, reference);
                    if !d.diverged {
                        continue;
                    }
                    let first = || {
                        format!(
                            "{}: prompt {pi}, {} c={}: differs at token {} (margin {:e}{})",
                            m.model_label,
                            r.op.as_str(),
                            r.shift,
                            d.first_divergence,
                            d.margin_at_divergence.unwrap_or(f32::NAN),
                            if d.knife_edge { ", a knife edge" } else { "" }
                        )
                    };
                    if d.knife_edge {
                        out.knife_edges += 1;
                        out.first.get_or_insert_with(first);
                    } else {
                        out.fail(first);
                    }
                }
            }
        }
        out
    }

    /// The forked runs of [`recheck_indices`] over `models` against the same runs decoded
    /// alone, per prompt. With weights as stored and plain attention a batched row is the lone
    /// row bit for bit (`subject::MultiContext`), so any parting, even at a tie, is a failure.
    pub fn fork_check(models: &[ModelRuns]) -> Tally {
        let mut out = Tally::default();
        for m in models {
            for (pi, p) in m.prompts.iter().enumerate() {
                for (k, alone, margins) in &p.alone {
                    let forked = &p.runs[*k];
                    out.compared += 1;
                    out.tokens += alone.len().max(forked.tokens.len());
                    if let Some(i) = divergence(alone, &forked.tokens) {
                        let lone = margins.get(i).copied().unwrap_or(f32::INFINITY);
                        out.fail(|| {
                            format!(
                                "{}: prompt {pi}, sign theta {} c={}: parts at token {i} (lone margin {lone:e})",
                                m.model_label, forked.theta, forked.shift
                            )
                        });
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
        struct Check {
            operator: &'static str,
            #[serde(flatten)]
            check: ValueCheck,
        }
        let (generated, decoded) = self.tokens();
        let value_checks: Vec<Check> = (self.checks().into_iter())
            .map(|(op, check)| Check {
                operator: op.as_str(),
                check,
            })
            .collect();
        json!({
            "model": self.model_label,
            "model_desc": self.model_desc,
            "prompts": self.prompts.len(),
            "max_new": self.max_new,
            "generated_tokens": generated,
            "decoded_tokens": decoded,
            "rows": self.cells().map_err(serde::ser::Error::custom)?,
            "value_checks": value_checks,
        })
        .serialize(s)
    }
}

/// The text table of one model's cells.
pub fn to_text(m: &ModelRuns) -> Result<String> {
    let (generated, decoded) = m.tokens();
    let ci = crate::interval::column(m.prompts.len());
    let mut out = format!(
        "{} ({}): {} prompts x up to {} new tokens; {generated} generated tokens from {decoded} decoded\n  operator     implementation               theta  shift  differing share [{ci}]   first divergence [{ci}]  diverged  knife-edge  distinct-2 [{ci}]    rep rate [{ci}]\n",
        m.model_label,
        m.model_desc,
        m.prompts.len(),
        m.max_new
    );
    for c in m.cells()? {
        let [d, f, d2, rr] = c.estimates();
        out.push_str(&format!(
            "  {:<12} {:<28} {:>5} {:>6}  {:.3} [{:.3}, {:.3}]      {:>6.1} [{:>5.1}, {:>5.1}]      {:>3}/{:<3}   {:>3}        {:.3} [{:.3}, {:.3}]  {:.3} [{:.3}, {:.3}]{}\n",
            c.op.as_str(),
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
    out.extend(crate::interval::footnote(m.prompts.len(), "prompts"));
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
