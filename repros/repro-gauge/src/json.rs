//! The structured-output consequence: JSON answers under each penalty variant.
//!
//! Per prompt: the unpenalized greedy answer (the baseline) and one greedy answer per variant,
//! each judged for "parses" (a JSON value starts at the first `{` or `[`) and "schema-valid"
//! (it also has the required keys and types). Delimiter flips are teacher-forced on the
//! baseline: at each step where the unpenalized choice is structural, does the variant, on the
//! same context, choose a token that is not?

use crate::schema::{extract, is_structural, Schema};
use anyhow::{Context as _, Result};
use harness::{argmax, LoadedModel, Session};
use oracle::gauge::{self, Operator};
use oracle::TokenId;
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap};
use subject::{Model, Sampler, SamplerSpec};

/// The corpus: `(prompt, schema)`.
pub fn corpus() -> Result<Vec<(String, Schema)>> {
    include_str!("../json-corpus.txt")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (p, s) = l.split_once('\t').context("PROMPT<TAB>SCHEMA")?;
            Ok((p.to_string(), Schema::parse(s)?))
        })
        .collect()
}

/// llama.cpp's default `penalty_last_n`.
pub const LLAMA_DEFAULT_WINDOW: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Variant {
    None,
    /// llama.cpp's penalties stage, `penalty_repeat = theta`; `window: None` covers the sequence.
    Llama {
        theta: f32,
        window: Option<usize>,
    },
    /// The oracle's normalized operator over the whole sequence.
    Normalized {
        theta: f32,
    },
    /// The oracle's subtractive operator (`ln theta` off each seen id) over the whole sequence.
    Subtractive {
        theta: f32,
    },
    /// llama.cpp's penalties stage with only `penalty_freq` set, window covering the sequence.
    Frequency {
        freq: f32,
    },
}

impl Variant {
    pub fn all() -> Vec<Variant> {
        vec![
            Variant::None,
            Variant::Llama {
                theta: 1.1,
                window: Some(LLAMA_DEFAULT_WINDOW),
            },
            Variant::Llama {
                theta: 1.3,
                window: Some(LLAMA_DEFAULT_WINDOW),
            },
            Variant::Llama {
                theta: 1.1,
                window: None,
            },
            Variant::Llama {
                theta: 1.3,
                window: None,
            },
            Variant::Normalized { theta: 1.3 },
            Variant::Subtractive { theta: 1.3 },
            Variant::Frequency { freq: 0.5 },
        ]
    }

    pub fn label(&self) -> String {
        match self {
            Variant::None => "none".into(),
            Variant::Llama {
                theta,
                window: Some(w),
            } => format!("llama {theta} last {w}"),
            Variant::Llama {
                theta,
                window: None,
            } => format!("llama {theta} whole"),
            Variant::Normalized { theta } => format!("normalized {theta}"),
            Variant::Subtractive { theta } => format!("subtractive ln {theta}"),
            Variant::Frequency { freq } => format!("frequency {freq}"),
        }
    }
}

struct Chooser {
    variant: Variant,
    llama: Option<Sampler>,
}

fn penalties(
    model: &Model,
    prompt: &[TokenId],
    last_n: usize,
    repeat: f32,
    freq: f32,
) -> Result<Sampler> {
    let mut s = SamplerSpec::Penalties {
        n_vocab: model.n_vocab(),
        last_n: last_n as i32,
        repeat,
        freq,
        present: 0.0,
    }
    .build()?;
    for &t in prompt {
        s.accept(t)?;
    }
    Ok(s)
}

impl Chooser {
    fn new(variant: Variant, model: &Model, prompt: &[TokenId], whole: usize) -> Result<Chooser> {
        let llama = match variant {
            Variant::Llama { theta, window } => Some(penalties(
                model,
                prompt,
                window.unwrap_or(whole),
                theta,
                0.0,
            )?),
            Variant::Frequency { freq } => Some(penalties(model, prompt, whole, 1.0, freq)?),
            _ => None,
        };
        Ok(Chooser { variant, llama })
    }

    fn choose(&mut self, raw: &[f32], seen: &BTreeSet<TokenId>) -> Result<TokenId> {
        Ok(match (self.variant, self.llama.as_mut()) {
            (_, Some(s)) => argmax(&s.apply_in_id_order(raw)?),
            (Variant::Normalized { theta }, None) => {
                gauge::argmax(&gauge::apply(Operator::Normalized, raw, 0.0, seen, theta))
            }
            (Variant::Subtractive { theta }, None) => {
                gauge::argmax(&gauge::apply(Operator::Subtractive, raw, 0.0, seen, theta))
            }
            _ => argmax(raw),
        })
    }

    fn accept(&mut self, id: TokenId) -> Result<()> {
        if let Some(s) = self.llama.as_mut() {
            s.accept(id)?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub tokens: usize,
    pub eos: bool,
    pub parses: bool,
    pub schema_valid: bool,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PromptResult {
    pub prompt: String,
    /// One answer per variant, in `Variant::all()` order.
    pub answers: Vec<Answer>,
    /// Per variant: structural baseline steps, and how many the variant turned non-structural.
    pub structural_steps: usize,
    pub delimiter_flips: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct JsonReport {
    pub model_label: String,
    pub max_new: usize,
    pub variants: Vec<Variant>,
    pub prompts: Vec<PromptResult>,
}

struct Pieces<'a> {
    model: &'a Model,
    cache: HashMap<TokenId, bool>,
}

impl Pieces<'_> {
    fn structural(&mut self, id: TokenId) -> Result<bool> {
        if let Some(&b) = self.cache.get(&id) {
            return Ok(b);
        }
        let b = is_structural(&String::from_utf8_lossy(&self.model.token_bytes(id)?));
        self.cache.insert(id, b);
        Ok(b)
    }
}

fn seen_set(prompt: &[TokenId], generated: &[TokenId]) -> BTreeSet<TokenId> {
    prompt.iter().chain(generated).copied().collect()
}

pub fn run(
    m: &LoadedModel,
    corpus: &[(String, Schema)],
    max_new: usize,
    threads: i32,
) -> Result<JsonReport> {
    let variants = Variant::all();
    let mut pieces = Pieces {
        model: &m.model,
        cache: HashMap::new(),
    };
    let mut prompts = Vec::new();
    for (prompt_text, schema) in corpus {
        let prompt = m.chat_ids(prompt_text)?;
        let whole = prompt.len() + max_new;
        let mut session = Session::new(&m.model, prompt.clone(), max_new, threads)?;
        // Baseline with every variant teacher-forced beside it.
        let mut forced = variants
            .iter()
            .map(|&v| Chooser::new(v, &m.model, &prompt, whole))
            .collect::<Result<Vec<_>>>()?;
        let mut flips = vec![0usize; variants.len()];
        let mut structural_steps = 0;
        // The baseline is the unpenalized greedy answer: the `none` variant's answer too.
        let baseline = session.generate(max_new, |raw, gen| {
            let seen = seen_set(&prompt, gen);
            let base = argmax(raw);
            let base_structural = pieces.structural(base)?;
            structural_steps += usize::from(base_structural);
            for (k, c) in forced.iter_mut().enumerate() {
                let choice = c.choose(raw, &seen)?;
                if base_structural && !pieces.structural(choice)? {
                    flips[k] += 1;
                }
                c.accept(base)?;
            }
            Ok(base)
        })?;
        let mut answers = Vec::new();
        for &v in &variants {
            let (tokens, stop) = if v == Variant::None {
                baseline.clone()
            } else {
                let mut c = Chooser::new(v, &m.model, &prompt, whole)?;
                session.generate(max_new, |raw, gen| {
                    let t = c.choose(raw, &seen_set(&prompt, gen))?;
                    c.accept(t)?;
                    Ok(t)
                })?
            };
            let text = m.model.detokenize(&tokens)?;
            let value = extract(&text);
            answers.push(Answer {
                tokens: tokens.len(),
                eos: stop == harness::Stop::Eos,
                parses: value.is_some(),
                schema_valid: value.is_some_and(|v| schema.accepts(&v)),
                text,
            });
        }
        prompts.push(PromptResult {
            prompt: prompt_text.clone(),
            answers,
            structural_steps,
            delimiter_flips: flips,
        });
    }
    Ok(JsonReport {
        model_label: m.choice.label.clone(),
        max_new,
        variants,
        prompts,
    })
}

/// Per-variant totals.
#[derive(Debug, Clone, PartialEq)]
pub struct Totals {
    pub label: String,
    pub parses: usize,
    pub schema_valid: usize,
    pub flips: usize,
    pub structural_steps: usize,
    pub mean_tokens: f64,
}

impl JsonReport {
    pub fn totals(&self) -> Vec<Totals> {
        let n = self.prompts.len().max(1);
        self.variants
            .iter()
            .enumerate()
            .map(|(k, v)| Totals {
                label: v.label(),
                parses: self.prompts.iter().filter(|p| p.answers[k].parses).count(),
                schema_valid: self
                    .prompts
                    .iter()
                    .filter(|p| p.answers[k].schema_valid)
                    .count(),
                flips: self.prompts.iter().map(|p| p.delimiter_flips[k]).sum(),
                structural_steps: self.prompts.iter().map(|p| p.structural_steps).sum(),
                mean_tokens: self
                    .prompts
                    .iter()
                    .map(|p| p.answers[k].tokens)
                    .sum::<usize>() as f64
                    / n as f64,
            })
            .collect()
    }

    pub fn to_json(&self) -> Value {
        let n = self.prompts.len();
        json!({
            "model": self.model_label,
            "max_new": self.max_new,
            "prompts_count": n,
            "variants": self.totals().iter().map(|t| json!({
                "variant": t.label,
                "parses": t.parses,
                "parses_share": t.parses as f64 / n.max(1) as f64,
                "schema_valid": t.schema_valid,
                "schema_valid_share": t.schema_valid as f64 / n.max(1) as f64,
                "delimiter_flips": t.flips,
                "structural_steps": t.structural_steps,
                "mean_tokens": t.mean_tokens,
            })).collect::<Vec<_>>(),
            "prompts": self.prompts.iter().map(|p| json!({
                "prompt": p.prompt,
                "structural_steps": p.structural_steps,
                "answers": self.variants.iter().zip(&p.answers).zip(&p.delimiter_flips).map(|((v, a), f)| json!({
                    "variant": v.label(),
                    "tokens": a.tokens,
                    "eos": a.eos,
                    "parses": a.parses,
                    "schema_valid": a.schema_valid,
                    "delimiter_flips": f,
                    "text": a.text,
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        })
    }

    pub fn to_text(&self) -> String {
        let n = self.prompts.len();
        let mut out = format!(
            "structured output: {} prompts, {}, greedy, up to {} new tokens\n  variant                parses        schema-valid   delimiter flips (of structural steps)  mean tokens\n",
            n, self.model_label, self.max_new
        );
        for t in self.totals() {
            out.push_str(&format!(
                "  {:<22} {:>3} ({:>5.1}%)  {:>3} ({:>5.1}%)   {:>5} / {:<5}                        {:>6.1}\n",
                t.label,
                t.parses,
                100.0 * t.parses as f64 / n.max(1) as f64,
                t.schema_valid,
                100.0 * t.schema_valid as f64 / n.max(1) as f64,
                t.flips,
                t.structural_steps,
                t.mean_tokens
            ));
        }
        out
    }
}
