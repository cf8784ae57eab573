//! Greedy runs under each operator with the logits shifted by a constant.
//!
//! How the shift is applied: the model's raw logits row `z` is never changed. For the
//! sign-branched operator, llama.cpp's penalties sampler is handed the f32 array `z + c`
//! (what a model whose zero point sits `c` higher would produce). The subtractive and
//! normalized operators get `z` and `c` separately and add them in f64 (see
//! `oracle::gauge`). Seen ids are every distinct id of the prompt and of the tokens generated
//! so far (llama.cpp: a window covering the whole sequence, prompt accepted).

use anyhow::{ensure, Result};
use harness::{argmax, divergence, LoadedModel, Session};
use ledger::Mode;
use oracle::gauge::{self, Operator};
use oracle::TokenId;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use subject::{Model, Sampler, SamplerSpec};

/// Where the sign-branched and normalized operators run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SamplerKind {
    /// Sign through llama.cpp's penalties stage; normalized through the oracle.
    #[default]
    Builtin,
    /// Both through `ledger-penalties` in a real llama.cpp chain (default mode for sign,
    /// normalized mode for normalized); subtractive stays with the oracle.
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
    pub operator: Operator,
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
    pub fn flip_rate(&self) -> f64 {
        self.flips as f64 / self.steps.max(1) as f64
    }
    pub fn differing_share(&self) -> f64 {
        self.differing as f64 / self.compared.max(1) as f64
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
    /// Steps where llama.cpp's sign-branched stage and the oracle's disagreed (must be 0).
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
    /// The control: both gauge-free operators never flip and never diverge.
    pub fn gauge_free_exact(&self) -> bool {
        self.rows
            .iter()
            .filter(|r| r.operator != Operator::Sign)
            .all(|r| r.flips == 0 && r.diverges_at.is_none())
    }
}

/// llama.cpp's penalties stage with only `penalty_repeat` set and a window covering the
/// sequence, prompt accepted.
fn llama_sign(model: &Model, prompt: &[TokenId], window: usize, theta: f32) -> Result<Sampler> {
    let mut s = SamplerSpec::Penalties {
        n_vocab: model.n_vocab(),
        last_n: window as i32,
        repeat: theta,
        freq: 0.0,
        present: 0.0,
    }
    .build()?;
    for &t in prompt {
        s.accept(t)?;
    }
    Ok(s)
}

/// `ledger-penalties` in a one-stage llama.cpp chain, prompt accepted.
fn ledger_stage(
    model: &Model,
    prompt: &[TokenId],
    window: usize,
    theta: f32,
    mode: Mode,
) -> Result<Sampler> {
    let stage = ledger::ledger_penalties(ledger::PenaltyConfig {
        n_vocab: model.n_vocab(),
        last_n: window as i32,
        repeat: theta,
        freq: 0.0,
        present: 0.0,
        mode,
    })?;
    let mut chain = Sampler::chain(vec![stage])?;
    for &t in prompt {
        chain.accept(t)?;
    }
    Ok(chain)
}

/// The operator's choice on `raw` shifted by `c`. The sign-branched one runs llama.cpp's own
/// stage (the caller keeps its state in step with the tokens seen).
struct Chooser {
    op: Operator,
    theta: f32,
    llama: Option<Sampler>,
}

impl Chooser {
    fn new(
        op: Operator,
        theta: f32,
        model: &Model,
        prompt: &[TokenId],
        window: usize,
        kind: SamplerKind,
    ) -> Result<Chooser> {
        let llama = match (kind, op) {
            (SamplerKind::Builtin, Operator::Sign) => {
                Some(llama_sign(model, prompt, window, theta)?)
            }
            (SamplerKind::Ledger, Operator::Sign) => {
                Some(ledger_stage(model, prompt, window, theta, Mode::Default)?)
            }
            (SamplerKind::Ledger, Operator::Normalized) => Some(ledger_stage(
                model,
                prompt,
                window,
                theta,
                Mode::Normalized,
            )?),
            _ => None,
        };
        Ok(Chooser { op, theta, llama })
    }

    fn choose(&mut self, raw: &[f32], shift: f32, seen: &BTreeSet<TokenId>) -> Result<TokenId> {
        Ok(match self.llama.as_mut() {
            Some(s) => argmax(&s.apply_in_id_order(&gauge::shifted_f32(raw, shift))?),
            None => gauge::argmax(&gauge::apply(self.op, raw, shift, seen, self.theta)),
        })
    }

    fn accept(&mut self, id: TokenId) -> Result<()> {
        if let Some(s) = self.llama.as_mut() {
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

pub fn run(m: &LoadedModel, cfg: &GaugeConfig) -> Result<GaugeReport> {
    ensure!(
        !cfg.thetas.is_empty() && !cfg.shifts.is_empty(),
        "need at least one theta and one shift"
    );
    let prompt = m.chat_ids(&cfg.prompt)?;
    let window = prompt.len() + cfg.max_new;
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
            // The unshifted trajectory, keeping each step's raw logits for teacher forcing.
            let mut chooser = Chooser::new(op, theta, &m.model, &prompt, window, cfg.sampler)?;
            let mut rows_raw: Vec<Vec<f32>> = Vec::new();
            let (base, _) = session.generate(cfg.max_new, |raw, gen| {
                let seen = seen_set(&prompt, gen);
                let t = chooser.choose(raw, 0.0, &seen)?;
                if op == Operator::Sign {
                    // llama.cpp's stage (or the ledger's default mode) against the oracle.
                    sign_steps += 1;
                    if t != gauge::argmax(&gauge::sign(raw, 0.0, &seen, theta)) {
                        sign_mismatches += 1;
                    }
                }
                chooser.accept(t)?;
                rows_raw.push(raw.to_vec());
                Ok(t)
            })?;
            // Teacher forcing: the same contexts, every shift.
            let mut forced = Chooser::new(op, theta, &m.model, &prompt, window, cfg.sampler)?;
            let mut flips = vec![0usize; cfg.shifts.len()];
            for (t, raw) in rows_raw.iter().enumerate() {
                let seen = seen_set(&prompt, &base[..t]);
                for (k, &c) in cfg.shifts.iter().enumerate() {
                    if forced.choose(raw, c, &seen)? != base[t] {
                        flips[k] += 1;
                    }
                }
                forced.accept(base[t])?;
            }
            // Free running under each shift.
            for (k, &c) in cfg.shifts.iter().enumerate() {
                let mut free = Chooser::new(op, theta, &m.model, &prompt, window, cfg.sampler)?;
                let (tokens, _) = session.generate(cfg.max_new, |raw, gen| {
                    let t = free.choose(raw, c, &seen_set(&prompt, gen))?;
                    free.accept(t)?;
                    Ok(t)
                })?;
                let compared = base.len().max(tokens.len());
                let differing = (0..compared)
                    .filter(|&i| base.get(i) != tokens.get(i))
                    .count();
                rows.push(Row {
                    operator: op,
                    theta,
                    shift: c,
                    flips: flips[k],
                    steps: base.len(),
                    diverges_at: divergence(&base, &tokens),
                    differing,
                    compared,
                });
            }
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
            "sign_llama_vs_oracle": {"steps": self.sign_steps, "mismatching_steps": self.sign_mismatches},
            "gauge_free_exact": self.gauge_free_exact(),
            "rows": self.rows.iter().map(|r| json!({
                "operator": r.operator.as_str(),
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
            "{} ({}), prompt {:?} ({} tokens), up to {} new tokens, sampler {}\n  positive logits: {:.3} of seen ids, {:.3} of the vocabulary (unpenalized greedy run)\n  sign branch through llama.cpp = oracle on {} of {} steps\n  operator     theta  shift  flip rate (teacher-forced)  diverges at  differing share (free-running)\n",
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
                "  {:<12} {:>5} {:>6}  {:>6.3} ({:>3}/{:<3})            {:>11}  {:.3}\n",
                r.operator.as_str(),
                r.theta,
                r.shift,
                r.flip_rate(),
                r.flips,
                r.steps,
                r.diverges_at.map_or("-".to_string(), |d| d.to_string()),
                r.differing_share()
            ));
        }
        out
    }
}
