//! Greedy runs under each operator with the logits shifted by a constant.
//!
//! How the shift is applied: the raw logits row `z` is never changed. An operator that runs as
//! a llama.cpp sampler (llama.cpp's penalties stage, or `ledger-penalties` in a real chain) is
//! handed the f32 array `z + c` (what a model whose zero point sits `c` higher would produce).
//! The oracle's subtractive and normalized operators get `z` and `c` separately, add them in
//! f64 and work relative to the maximum, so they see identical numbers at every shift: their 0
//! flips are 0 by construction and are reported as such, not as evidence. Seen ids are every
//! distinct id of the prompt and of the tokens generated so far (llama.cpp: a window covering
//! the whole sequence, prompt accepted).
//!
//! The flip detector (teacher-forced choices under a shift, and free-running divergence) runs
//! on any [`Source`] of logits: a model's session, or a planted two-token case where the answer
//! is known. The controls run the same [`measure`] on the planted case.

use anyhow::{ensure, Result};
use harness::{argmax, divergence, LoadedModel, Session, Stop};
use ledger::Mode;
use oracle::gauge::{self, Operator};
use oracle::TokenId;
use report::Control;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use subject::{Sampler, SamplerSpec};

/// Which implementations run the operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SamplerKind {
    /// Sign through llama.cpp's penalties stage; subtractive and normalized through the oracle.
    #[default]
    Builtin,
    /// Sign and normalized through `ledger-penalties` in a real llama.cpp chain (default and
    /// normalized mode); subtractive through the oracle.
    Ledger,
}

impl SamplerKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SamplerKind::Builtin => "builtin",
            SamplerKind::Ledger => "ledger",
        }
    }
}

/// One implementation of one operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Implementation {
    /// llama.cpp's penalties stage (the subject), handed `z + c` in f32.
    LlamaSign,
    /// `ledger-penalties`, default mode, in a chain, handed `z + c` in f32.
    LedgerSign,
    /// `ledger-penalties`, normalized mode, in a chain, handed `z + c` in f32.
    LedgerNormalized,
    /// The planted subtractive sampler (`crate::planted`), in a chain, handed `z + c` in f32.
    PlantedSubtractive,
    /// The oracle's operator, shift added in f64 (gauge-free operators: invariant by construction).
    Oracle(Operator),
}

impl Implementation {
    pub fn of(kind: SamplerKind, op: Operator) -> Implementation {
        match (kind, op) {
            (SamplerKind::Builtin, Operator::Sign) => Implementation::LlamaSign,
            (SamplerKind::Ledger, Operator::Sign) => Implementation::LedgerSign,
            (SamplerKind::Ledger, Operator::Normalized) => Implementation::LedgerNormalized,
            (_, op) => Implementation::Oracle(op),
        }
    }

    pub fn operator(self) -> Operator {
        match self {
            Implementation::LlamaSign | Implementation::LedgerSign => Operator::Sign,
            Implementation::LedgerNormalized => Operator::Normalized,
            Implementation::PlantedSubtractive => Operator::Subtractive,
            Implementation::Oracle(op) => op,
        }
    }

    /// Whether a 0 from this implementation is 0 by construction (same bits at every shift).
    pub fn invariant_by_construction(self) -> bool {
        matches!(self, Implementation::Oracle(op) if op != Operator::Sign)
    }

    pub fn label(self) -> &'static str {
        match self {
            Implementation::LlamaSign => "llama.cpp penalties",
            Implementation::LedgerSign => "ledger-penalties default",
            Implementation::LedgerNormalized => "ledger-penalties normalized",
            Implementation::PlantedSubtractive => "planted subtractive",
            Implementation::Oracle(_) => "oracle (f64 shift)",
        }
    }
}

/// Where logits come from: a model, or a planted script.
pub trait Source {
    fn prompt(&self) -> &[TokenId];
    fn n_vocab(&self) -> i32;
    /// Up to `max_new` steps; `choose(raw, generated_so_far)` picks each token.
    fn generate(
        &mut self,
        max_new: usize,
        choose: &mut dyn FnMut(&[f32], &[TokenId]) -> Result<TokenId>,
    ) -> Result<(Vec<TokenId>, Stop)>;
}

impl Source for Session {
    fn prompt(&self) -> &[TokenId] {
        &self.prompt
    }

    fn n_vocab(&self) -> i32 {
        self.model.n_vocab()
    }

    fn generate(
        &mut self,
        max_new: usize,
        choose: &mut dyn FnMut(&[f32], &[TokenId]) -> Result<TokenId>,
    ) -> Result<(Vec<TokenId>, Stop)> {
        Session::generate(self, max_new, choose)
    }
}

/// A planted source: the same logits row at every step, whatever was chosen.
pub struct Scripted {
    pub prompt: Vec<TokenId>,
    pub row: Vec<f32>,
}

impl Source for Scripted {
    fn prompt(&self) -> &[TokenId] {
        &self.prompt
    }

    fn n_vocab(&self) -> i32 {
        self.row.len() as i32
    }

    fn generate(
        &mut self,
        max_new: usize,
        choose: &mut dyn FnMut(&[f32], &[TokenId]) -> Result<TokenId>,
    ) -> Result<(Vec<TokenId>, Stop)> {
        let mut tokens = Vec::new();
        while tokens.len() < max_new {
            let t = choose(&self.row, &tokens)?;
            tokens.push(t);
        }
        Ok((tokens, Stop::Limit))
    }
}

/// The planted case: id 0 seen, logits (1, 0.75, -8, -8). At c = 0 the sign branch keeps id 0
/// on top (1 / theta > 0.75 for theta 1.1 and 1.3); at c = +5 it hands the top to id 1
/// ((1 + 5) / theta < 5.75), and at c = -5 too ((1 - 5) * theta < -4.25). Every value and
/// shift is exact in f32, so a gauge-free operator must never flip here.
pub fn planted_source() -> Scripted {
    Scripted {
        prompt: vec![TokenId(0)],
        row: vec![1.0, 0.75, -8.0, -8.0],
    }
}

/// The shifts and theta the planted controls use, whatever the run's own.
pub const PLANTED_SHIFTS: [f32; 2] = [-5.0, 5.0];
pub const PLANTED_THETA: f32 = 1.3;

#[derive(Debug, Clone, PartialEq)]
pub struct GaugeConfig {
    pub sampler: SamplerKind,
    pub prompt: String,
    pub thetas: Vec<f32>,
    pub shifts: Vec<f32>,
    pub max_new: usize,
    pub threads: i32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub implementation: Implementation,
    pub theta: f32,
    pub shift: f32,
    /// Teacher-forced along the unshifted trajectory.
    pub flips: usize,
    pub steps: usize,
    /// Free-running: first index where the shifted trajectory differs from the unshifted one.
    pub diverges_at: Option<usize>,
    pub differing: usize,
    pub compared: usize,
}

impl Row {
    pub fn operator(&self) -> Operator {
        self.implementation.operator()
    }
    pub fn flip_rate(&self) -> f64 {
        self.flips as f64 / self.steps.max(1) as f64
    }
    pub fn differing_share(&self) -> f64 {
        self.differing as f64 / self.compared.max(1) as f64
    }
    /// Some choice changed under the shift, teacher-forced or free-running.
    pub fn flagged(&self) -> bool {
        self.flips > 0 || self.diverges_at.is_some()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct GaugeReport {
    pub sampler: SamplerKind,
    pub model_label: String,
    pub model_desc: String,
    pub prompt: String,
    pub prompt_tokens: usize,
    pub max_new: usize,
    /// Along the unpenalized greedy trajectory: share of (step, seen id) pairs whose raw logit
    /// is positive, and share of (step, vocabulary id) pairs.
    pub positive_seen: (usize, usize),
    pub positive_vocab: (usize, usize),
    pub rows: Vec<Row>,
    /// Steps where the sign-branched sampler and the oracle's sign branch disagreed.
    pub sign_mismatches: usize,
    pub sign_steps: usize,
}

impl GaugeReport {
    pub fn positive_share(&self) -> f64 {
        self.positive_seen.0 as f64 / self.positive_seen.1.max(1) as f64
    }
    pub fn positive_share_vocab(&self) -> f64 {
        self.positive_vocab.0 as f64 / self.positive_vocab.1.max(1) as f64
    }
    /// Rows of `op` that changed some choice.
    pub fn flagged(&self, op: Operator) -> usize {
        self.rows
            .iter()
            .filter(|r| r.operator() == op && r.flagged())
            .count()
    }
}

/// A penalties stage as a llama.cpp sampler, prompt accepted.
fn sampler_stage(
    imp: Implementation,
    n_vocab: i32,
    prompt: &[TokenId],
    window: usize,
    theta: f32,
) -> Result<Option<Sampler>> {
    let ledger_stage = |mode| -> Result<Sampler> {
        Sampler::chain(vec![ledger::ledger_penalties(ledger::PenaltyConfig {
            n_vocab,
            last_n: window as i32,
            repeat: theta,
            freq: 0.0,
            present: 0.0,
            mode,
        })?])
    };
    let mut s = match imp {
        Implementation::LlamaSign => SamplerSpec::Penalties {
            n_vocab,
            last_n: window as i32,
            repeat: theta,
            freq: 0.0,
            present: 0.0,
        }
        .build()?,
        Implementation::LedgerSign => ledger_stage(Mode::Default)?,
        Implementation::LedgerNormalized => ledger_stage(Mode::Normalized)?,
        Implementation::PlantedSubtractive => Sampler::chain(vec![Sampler::custom(
            crate::planted::Subtractive::new(n_vocab as usize, theta),
        )?])?,
        Implementation::Oracle(_) => return Ok(None),
    };
    for &t in prompt {
        s.accept(t)?;
    }
    Ok(Some(s))
}

/// An implementation's choice on `raw` shifted by `c`; a sampler keeps its own state in step
/// with the tokens the caller accepts.
struct Chooser {
    imp: Implementation,
    theta: f32,
    sampler: Option<Sampler>,
}

impl Chooser {
    fn new(
        imp: Implementation,
        theta: f32,
        n_vocab: i32,
        prompt: &[TokenId],
        window: usize,
    ) -> Result<Chooser> {
        Ok(Chooser {
            imp,
            theta,
            sampler: sampler_stage(imp, n_vocab, prompt, window, theta)?,
        })
    }

    fn choose(&mut self, raw: &[f32], shift: f32, seen: &BTreeSet<TokenId>) -> Result<TokenId> {
        Ok(match self.sampler.as_mut() {
            Some(s) => argmax(&s.apply_in_id_order(&gauge::shifted_f32(raw, shift))?),
            None => gauge::argmax(&gauge::apply(
                self.imp.operator(),
                raw,
                shift,
                seen,
                self.theta,
            )),
        })
    }

    fn accept(&mut self, id: TokenId) -> Result<()> {
        if let Some(s) = self.sampler.as_mut() {
            s.accept(id)?;
        }
        Ok(())
    }
}

/// An f32 as the decimal it was written as (1.3, not 1.2999999523162842).
pub fn short(x: f32) -> f64 {
    x.to_string().parse().unwrap_or(x as f64)
}

fn seen_set(prompt: &[TokenId], generated: &[TokenId]) -> BTreeSet<TokenId> {
    prompt.iter().chain(generated).copied().collect()
}

/// The flip detector for one implementation and theta on one source: one row per shift, and
/// (with `compare_sign`) the steps where the implementation and the oracle's sign branch chose
/// differently on the unshifted run, out of how many.
pub fn measure<S: Source>(
    src: &mut S,
    imp: Implementation,
    theta: f32,
    shifts: &[f32],
    max_new: usize,
    compare_sign: bool,
) -> Result<(Vec<Row>, usize, usize)> {
    let prompt = src.prompt().to_vec();
    let n_vocab = src.n_vocab();
    let window = prompt.len() + max_new;
    let (mut mismatches, mut steps) = (0, 0);
    // The unshifted trajectory, keeping each step's raw logits for teacher forcing.
    let mut chooser = Chooser::new(imp, theta, n_vocab, &prompt, window)?;
    let mut rows_raw: Vec<Vec<f32>> = Vec::new();
    let (base, _) = src.generate(max_new, &mut |raw, gen| {
        let seen = seen_set(&prompt, gen);
        let t = chooser.choose(raw, 0.0, &seen)?;
        if compare_sign {
            steps += 1;
            if t != gauge::argmax(&gauge::sign(raw, 0.0, &seen, theta)) {
                mismatches += 1;
            }
        }
        chooser.accept(t)?;
        rows_raw.push(raw.to_vec());
        Ok(t)
    })?;
    // Teacher forcing: the same contexts, every shift.
    let mut forced = Chooser::new(imp, theta, n_vocab, &prompt, window)?;
    let mut flips = vec![0usize; shifts.len()];
    for (t, raw) in rows_raw.iter().enumerate() {
        let seen = seen_set(&prompt, &base[..t]);
        for (k, &c) in shifts.iter().enumerate() {
            if forced.choose(raw, c, &seen)? != base[t] {
                flips[k] += 1;
            }
        }
        forced.accept(base[t])?;
    }
    // Free running under each shift.
    let mut rows = Vec::new();
    for (k, &c) in shifts.iter().enumerate() {
        let mut free = Chooser::new(imp, theta, n_vocab, &prompt, window)?;
        let (tokens, _) = src.generate(max_new, &mut |raw, gen| {
            let t = free.choose(raw, c, &seen_set(&prompt, gen))?;
            free.accept(t)?;
            Ok(t)
        })?;
        let compared = base.len().max(tokens.len());
        rows.push(Row {
            implementation: imp,
            theta,
            shift: c,
            flips: flips[k],
            steps: base.len(),
            diverges_at: divergence(&base, &tokens),
            differing: (0..compared)
                .filter(|&i| base.get(i) != tokens.get(i))
                .count(),
            compared,
        });
    }
    Ok((rows, mismatches, steps))
}

pub fn run(m: &LoadedModel, cfg: &GaugeConfig) -> Result<GaugeReport> {
    ensure!(
        !cfg.thetas.is_empty() && !cfg.shifts.is_empty(),
        "need at least one theta and one shift"
    );
    let prompt = m.chat_ids(&cfg.prompt)?;
    let mut session = Session::new(&m.model, prompt.clone(), cfg.max_new, cfg.threads)?;

    // The model's own gauge, along the unpenalized greedy trajectory.
    let (mut pos_seen, mut pos_vocab) = ((0, 0), (0, 0));
    session.generate(cfg.max_new, |raw, gen| {
        let seen = seen_set(&prompt, gen);
        pos_seen.0 += seen.iter().filter(|id| raw[id.0 as usize] > 0.0).count();
        pos_seen.1 += seen.len();
        pos_vocab.0 += raw.iter().filter(|&&z| z > 0.0).count();
        pos_vocab.1 += raw.len();
        Ok(argmax(raw))
    })?;

    let mut rows = Vec::new();
    let (mut sign_mismatches, mut sign_steps) = (0, 0);
    for &theta in &cfg.thetas {
        for op in Operator::ALL {
            let imp = Implementation::of(cfg.sampler, op);
            let (r, mm, st) = measure(
                &mut session,
                imp,
                theta,
                &cfg.shifts,
                cfg.max_new,
                op == Operator::Sign,
            )?;
            rows.extend(r);
            sign_mismatches += mm;
            sign_steps += st;
        }
    }
    Ok(GaugeReport {
        sampler: cfg.sampler,
        model_label: m.choice.label.clone(),
        model_desc: m.model.describe(),
        prompt: cfg.prompt.clone(),
        prompt_tokens: prompt.len(),
        max_new: cfg.max_new,
        positive_seen: pos_seen,
        positive_vocab: pos_vocab,
        rows,
        sign_mismatches,
        sign_steps,
    })
}

/// The detectors on the planted case, through the same `measure` and the same f32 chain path
/// as the subject: our own sign-branched sampler (`ledger-penalties` default mode,
/// bit-identical to llama.cpp's) must change a choice at every planted shift, teacher-forced
/// and free-running; our planted subtractive sampler must change none; and the sign comparison
/// must catch the planted subtractive sampler when it is compared with the sign branch.
pub fn planted_controls() -> Result<Vec<Control>> {
    let mut src = planted_source();
    let mut run = |imp, compare_sign| {
        measure(
            &mut src,
            imp,
            PLANTED_THETA,
            &PLANTED_SHIFTS,
            4,
            compare_sign,
        )
    };
    let (sign, _, _) = run(Implementation::LedgerSign, false)?;
    let (subtractive, caught, steps) = run(Implementation::PlantedSubtractive, true)?;
    let detail = |rows: &[Row]| {
        rows.iter()
            .map(|r| {
                format!(
                    "c={}: {} of {} teacher-forced choices flip, free-running {}",
                    r.shift,
                    r.flips,
                    r.steps,
                    r.diverges_at
                        .map_or("never diverges".to_string(), |d| format!("diverges at {d}"))
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    let case = "logits (1, 0.75, -8, -8), id 0 seen, theta 1.3";
    Ok(vec![
        Control::positive(
            "planted case where our sign-branched sampler must flip",
            sign.iter().all(|r| r.flips > 0 && r.diverges_at.is_some()),
            format!("{case}: {}", detail(&sign)),
        ),
        Control::negative(
            "planted case where our subtractive sampler must not flip",
            subtractive.iter().all(|r| !r.flagged()),
            format!("{case}: {}", detail(&subtractive)),
        ),
        Control::positive(
            "sign comparison on a sampler that is not the sign branch",
            caught > 0,
            format!("{case}: the planted subtractive sampler chooses differently from the sign branch on {caught} of {steps} steps"),
        ),
    ])
}

impl GaugeReport {
    pub fn to_json(&self) -> Value {
        json!({
            "sampler": self.sampler.as_str(),
            "model": self.model_label,
            "model_desc": self.model_desc,
            "prompt": self.prompt,
            "prompt_tokens": self.prompt_tokens,
            "max_new": self.max_new,
            "positive_share": self.positive_share(),
            "positive_share_vocabulary": self.positive_share_vocab(),
            "sign_sampler_vs_oracle": {"steps": self.sign_steps, "mismatching_steps": self.sign_mismatches},
            "rows": self.rows.iter().map(|r| json!({
                "operator": r.operator().as_str(),
                "implementation": r.implementation.label(),
                "zero_by_construction": r.implementation.invariant_by_construction(),
                "theta": short(r.theta),
                "shift": short(r.shift),
                "flip_rate": r.flip_rate(),
                "flips": r.flips,
                "steps": r.steps,
                "diverges_at": r.diverges_at,
                "differing_share": r.differing_share(),
            })).collect::<Vec<_>>(),
        })
    }

    pub fn to_text(&self) -> String {
        let mut out = format!(
            "{} ({}), prompt {:?} ({} tokens), up to {} new tokens, sampler {}\n  positive logits: {:.3} of seen ids, {:.3} of the vocabulary (unpenalized greedy run)\n  sign branch through the sampler = oracle on {} of {} steps\n  operator     implementation               theta  shift  flip rate (teacher-forced)  diverges at  differing share (free-running)\n",
            self.model_label,
            self.model_desc,
            self.prompt,
            self.prompt_tokens,
            self.max_new,
            self.sampler.as_str(),
            self.positive_share(),
            self.positive_share_vocab(),
            self.sign_steps - self.sign_mismatches,
            self.sign_steps
        );
        for r in &self.rows {
            out.push_str(&format!(
                "  {:<12} {:<28} {:>5} {:>6}  {:>6.3} ({:>3}/{:<3})            {:>11}  {:.3}\n",
                r.operator().as_str(),
                r.implementation.label(),
                r.theta,
                r.shift,
                r.flip_rate(),
                r.flips,
                r.steps,
                r.diverges_at.map_or("-".to_string(), |d| d.to_string()),
                r.differing_share()
            ));
        }
        if self
            .rows
            .iter()
            .any(|r| r.implementation.invariant_by_construction())
        {
            out.push_str("  (oracle rows: the shift is added in f64 and removed with the maximum, so every shift gives the same bits; their 0 is by construction, not evidence)\n");
        }
        out
    }
}
