//! End to end: Gemma3-270M (262,144 ids) decodes the same prompt greedily through a chain of
//! `[penalties?, greedy]` over an array refilled from each step's logits, with no penalty, with
//! llama.cpp's penalties and with `ledger-penalties` (both theta 1.1, window 64, the prompt
//! accepted first).
//!
//! Each round runs the three variants in turn (the first moving on by one each round), so a
//! slow stretch of a shared machine lands on all three. A generation is timed from its first
//! logits to its last: every timed step samples, accepts, decodes one token and reads the next
//! logits; the prompt's decode is not timed. One untimed round comes first (the first decodes
//! after loading allocate the graph).

use crate::apply::turn;
use crate::penalty::Penalty;
use crate::stats::overhead_percent;
use anyhow::{bail, Context, Result};
use harness::{LoadedModel, Session, Stop};
use models::ModelChoice;
use std::time::Instant;
use subject::{LogitsArray, Sampler, SamplerSpec, TokenId};

/// The model: the largest vocabulary of the two.
pub const MODEL: &str = "gemma3";
/// The user turn every generation answers.
pub const PROMPT: &str = "Describe a quiet morning in a small fishing village.";

/// What sits before greedy in the chain. [`Variant::ALL`] lists the variants in declaration
/// order, so `v as usize` is a variant's index in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    None,
    Builtin,
    Ledger,
}

impl Variant {
    pub const ALL: [Variant; 3] = [Variant::None, Variant::Builtin, Variant::Ledger];

    /// The name in the JSON.
    pub fn key(self) -> &'static str {
        match self {
            Variant::None => "none",
            Variant::Builtin => "builtin",
            Variant::Ledger => "ledger",
        }
    }

    pub fn label(self) -> &'static str {
        self.penalty().map_or("no penalty", Penalty::label)
    }

    /// The penalties stage, if any.
    pub fn penalty(self) -> Option<Penalty> {
        match self {
            Variant::None => None,
            Variant::Builtin => Some(Penalty::Builtin),
            Variant::Ledger => Some(Penalty::Ledger),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    pub rounds: usize,
    /// Tokens each variant generates per round (at most; an end-of-generation token stops
    /// earlier).
    pub tokens: usize,
    /// Decoding threads.
    pub threads: i32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    pub ms_per_token: f64,
    pub tokens: Vec<TokenId>,
    pub stop: Stop,
}

/// The three generations of one round, in the order of [`Variant::ALL`].
#[derive(Debug, Clone, PartialEq)]
pub struct Round(pub Vec<Generation>);

impl Round {
    pub fn of(&self, v: Variant) -> &Generation {
        &self.0[v as usize]
    }

    /// `v`'s time per token over the unpenalized one's in the same round, in percent.
    pub fn overhead(&self, v: Variant) -> f64 {
        overhead_percent(self.of(Variant::None).ms_per_token, self.of(v).ms_per_token)
    }
}

#[derive(Debug, Clone)]
pub struct EndToEnd {
    pub model: String,
    pub prompt_tokens: usize,
    pub plan: Plan,
    pub rounds: Vec<Round>,
}

impl EndToEnd {
    /// `v`'s ms per token, one value per round.
    pub fn ms_per_token(&self, v: Variant) -> Vec<f64> {
        self.rounds.iter().map(|r| r.of(v).ms_per_token).collect()
    }

    /// `v`'s overhead over no penalty, paired within each round, one value per round.
    pub fn overheads(&self, v: Variant) -> Vec<f64> {
        self.rounds.iter().map(|r| r.overhead(v)).collect()
    }

    /// Tokens `v` generated over all rounds.
    pub fn generated(&self, v: Variant) -> usize {
        self.rounds.iter().map(|r| r.of(v).tokens.len()).sum()
    }

    /// Generations of `v` that ended on an end-of-generation token.
    pub fn eos_stops(&self, v: Variant) -> usize {
        self.rounds
            .iter()
            .filter(|r| r.of(v).stop == Stop::Eos)
            .count()
    }

    /// Whether llama.cpp's penalties and `ledger-penalties` chose the same tokens in every
    /// round (they should: the default mode is llama.cpp's arithmetic).
    pub fn builtin_tokens_equal_ledger(&self) -> bool {
        self.rounds
            .iter()
            .all(|r| r.of(Variant::Builtin).tokens == r.of(Variant::Ledger).tokens)
    }
}

/// Ms per step from the start of the first step to the start of the last: `ticks` steps
/// began, so `ticks - 1` whole steps lie between. None with fewer than two.
pub fn per_step_ms(first: Instant, last: Instant, ticks: usize) -> Option<f64> {
    (ticks >= 2).then(|| last.duration_since(first).as_secs_f64() * 1e3 / (ticks - 1) as f64)
}

/// Loads `model` (resolved from [`MODEL`]) and runs one untimed round, then `plan.rounds`
/// timed ones.
pub fn run(model: ModelChoice, plan: &Plan) -> Result<EndToEnd> {
    let mut d = Decoder::new(model, plan)?;
    for v in Variant::ALL {
        d.generate(v)?;
    }
    let mut rounds = Vec::with_capacity(plan.rounds);
    for r in 0..plan.rounds {
        let mut gens: [Option<Generation>; 3] = Default::default();
        for k in 0..Variant::ALL.len() {
            let i = turn(r, k, Variant::ALL.len());
            gens[i] = Some(d.generate(Variant::ALL[i])?);
        }
        rounds.push(Round(gens.into_iter().flatten().collect()));
    }
    Ok(EndToEnd {
        model: d.model.model.describe(),
        prompt_tokens: d.prompt.len(),
        plan: *plan,
        rounds,
    })
}

/// The model, its context and the prompt, loaded once; each [`Decoder::generate`] decodes the
/// prompt afresh and generates through a new chain.
pub struct Decoder {
    pub model: LoadedModel,
    pub prompt: Vec<TokenId>,
    session: Session,
    arr: LogitsArray,
    tokens: usize,
}

impl Decoder {
    pub fn new(model: ModelChoice, plan: &Plan) -> Result<Decoder> {
        let model = LoadedModel::load(model)?;
        let prompt = model.chat_ids(PROMPT)?;
        let session = Session::new(&model.model, prompt.clone(), plan.tokens, plan.threads)?;
        Ok(Decoder {
            model,
            prompt,
            session,
            arr: LogitsArray::new(),
            tokens: plan.tokens,
        })
    }

    /// One generation of `v` through a fresh chain that has accepted the prompt.
    pub fn generate(&mut self, v: Variant) -> Result<Generation> {
        self.generate_inner(v)
            .with_context(|| format!("generating with {}", v.label()))
    }

    fn generate_inner(&mut self, v: Variant) -> Result<Generation> {
        let mut stages: Vec<Sampler> = Vec::new();
        if let Some(stage) = v.penalty() {
            stages.push(stage.build(self.model.model.n_vocab())?);
        }
        stages.push(SamplerSpec::from(oracle::stage::Stage::Greedy).build()?);
        let mut chain = Sampler::chain(stages)?;
        for &t in &self.prompt {
            chain.accept(t)?;
        }
        let mut first: Option<Instant> = None;
        let mut last = Instant::now();
        let mut ticks = 0;
        let arr = &mut self.arr;
        let (out, stop) = self.session.generate(self.tokens, |raw, _| {
            last = Instant::now();
            first.get_or_insert(last);
            ticks += 1;
            arr.load(raw)?;
            arr.apply(&mut chain)?;
            let t = arr.selected_id().context("greedy selected nothing")?;
            chain.accept(t)?;
            Ok(t)
        })?;
        let Some(ms) = first.and_then(|f| per_step_ms(f, last, ticks)) else {
            bail!(
                "the generation stopped after {ticks} token(s); at least two are needed to time a step"
            );
        };
        Ok(Generation {
            ms_per_token: ms,
            tokens: out,
            stop,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn steps_are_counted_between_the_first_and_last_start() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_millis(30);
        assert_eq!(per_step_ms(t0, t1, 4), Some(10.0));
        assert_eq!(per_step_ms(t0, t1, 2), Some(30.0));
        assert_eq!(per_step_ms(t0, t0, 1), None);
        assert_eq!(per_step_ms(t0, t0, 0), None);
    }

    fn gen(ms: f64, tokens: &[i32], stop: Stop) -> Generation {
        Generation {
            ms_per_token: ms,
            tokens: tokens.iter().map(|&t| TokenId(t)).collect(),
            stop,
        }
    }

    #[test]
    fn overheads_are_paired_within_rounds() {
        let e = EndToEnd {
            model: String::new(),
            prompt_tokens: 3,
            plan: Plan {
                rounds: 2,
                tokens: 2,
                threads: 1,
            },
            rounds: vec![
                Round(vec![
                    gen(10.0, &[1, 2], Stop::Limit),
                    gen(12.0, &[1, 3], Stop::Limit),
                    gen(10.0, &[1, 3], Stop::Limit),
                ]),
                Round(vec![
                    gen(20.0, &[1, 2], Stop::Limit),
                    gen(22.0, &[1, 3], Stop::Eos),
                    gen(19.0, &[1, 3], Stop::Limit),
                ]),
            ],
        };
        assert_eq!(e.ms_per_token(Variant::None), [10.0, 20.0]);
        assert_eq!(e.overheads(Variant::Builtin), [20.0, 10.0]);
        assert_eq!(e.overheads(Variant::Ledger), [0.0, -5.0]);
        assert_eq!(e.generated(Variant::Ledger), 4);
        assert_eq!(e.eos_stops(Variant::Builtin), 1);
        assert!(e.builtin_tokens_equal_ledger());
    }
}
