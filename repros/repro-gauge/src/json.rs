//! The structured-output consequence: JSON answers under each penalty variant.
//!
//! Per prompt: the unpenalized greedy answer (the baseline) and one greedy answer per variant,
//! each judged for "parses" (a JSON value starts at the first `{` or `[`) and "schema-valid"
//! (it also has the required keys and types). Where the structure breaks is measured along
//! answers that are valid by construction, in [`crate::reference`].

use crate::schema::{extract, is_structural, Schema};
use anyhow::{Context as _, Result};
use harness::fork::{self, LogitsRow, Run};
use harness::{argmax, LoadedModel};
use ledger::PenaltyConfig;
use oracle::penalty::PenaltyParams;
use oracle::window::WindowLen;
use oracle::TokenId;
use serde::{Serialize, Serializer};
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
    /// `ledger-penalties` normalized mode over the whole sequence.
    Normalized {
        theta: f32,
    },
    /// `ledger-penalties` subtractive mode (`ln theta` off each seen id) over the whole sequence.
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
        let llama = |theta, window| Variant::Llama { theta, window };
        let last = Some(LLAMA_DEFAULT_WINDOW);
        vec![
            Variant::None,
            llama(1.1, last),
            llama(1.3, last),
            llama(1.1, None),
            llama(1.3, None),
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

/// One variant's sampler (none for the unpenalized baseline), prompt accepted.
pub(crate) fn variant_sampler(
    variant: Variant,
    model: &Model,
    prompt: &[TokenId],
    whole: usize,
) -> Result<Option<Sampler>> {
    let n_vocab = model.n_vocab();
    let llama = |last_n: usize, repeat: f32, freq: f32| {
        let params = PenaltyParams {
            repeat,
            freq,
            present: 0.0,
        };
        SamplerSpec::penalties(n_vocab, WindowLen(last_n), params).build()
    };
    let ledger = |theta: f32, mode| {
        ledger::ledger_penalties(PenaltyConfig::repeat_only(
            n_vocab,
            WindowLen(whole),
            theta,
            mode,
        ))
    };
    let stage = match variant {
        Variant::None => return Ok(None),
        Variant::Llama { theta, window } => llama(window.unwrap_or(whole), theta, 0.0)?,
        Variant::Frequency { freq } => llama(whole, 1.0, freq)?,
        Variant::Normalized { theta } => ledger(theta, ledger::Mode::Normalized)?,
        Variant::Subtractive { theta } => ledger(theta, ledger::Mode::Subtractive)?,
    };
    chain_after(stage, prompt).map(Some)
}

/// A chain of one `stage` that has accepted `prompt`.
pub(crate) fn chain_after(stage: Sampler, prompt: &[TokenId]) -> Result<Sampler> {
    let mut s = Sampler::chain(vec![stage])?;
    for &t in prompt {
        s.accept(t)?;
    }
    Ok(s)
}

/// A variant's free-running greedy run.
struct VariantRun {
    sampler: Option<Sampler>,
}

impl Run for VariantRun {
    fn choose(&mut self, row: &LogitsRow<'_>) -> Result<TokenId> {
        let next = match self.sampler.as_mut() {
            Some(s) => argmax(&s.apply_in_id_order(row.raw)?),
            None => argmax(row.raw),
        };
        if let Some(s) = self.sampler.as_mut() {
            s.accept(next)?;
        }
        Ok(next)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Answer {
    /// The variant's label.
    pub variant: String,
    pub tokens: usize,
    pub eos: bool,
    pub parses: bool,
    pub schema_valid: bool,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PromptResult {
    pub prompt: String,
    /// One answer per variant, in `Variant::all()` order.
    pub answers: Vec<Answer>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct JsonReport {
    pub model_label: String,
    pub max_new: usize,
    pub variants: Vec<Variant>,
    pub prompts: Vec<PromptResult>,
}

/// Which vocabulary ids are structural (only JSON delimiters and whitespace).
pub(crate) fn structural_ids(model: &Model) -> Result<Vec<bool>> {
    (0..model.n_vocab())
        .map(|i| {
            Ok(is_structural(&String::from_utf8_lossy(
                &model.token_bytes(TokenId(i))?,
            )))
        })
        .collect()
}

/// Every variant free-running, per prompt, decoded together ([`harness::fork`]).
pub fn run(
    m: &LoadedModel,
    corpus: &[(String, Schema)],
    max_new: usize,
    threads: i32,
) -> Result<JsonReport> {
    let variants = Variant::all();
    let mut prompts = Vec::new();
    let mut progress = cmdline::Progress::new(
        format!("F4 JSON prompts free-running on {}", m.choice.label),
        corpus.len() as u64,
    );
    for (prompt_text, schema) in corpus {
        let prompt = m.chat_ids(prompt_text)?;
        let whole = prompt.len() + max_new;
        let mut runs = variants
            .iter()
            .map(|&v| {
                Ok(VariantRun {
                    sampler: variant_sampler(v, &m.model, &prompt, whole)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let out = fork::run_forked(&m.model, &prompt, &mut runs, max_new, threads)
            .with_context(|| format!("decoding JSON prompt {prompt_text:?}"))?;
        let answer = |((v, tokens), stop): ((&Variant, &Vec<TokenId>), _)| {
            let text = m.model.detokenize(tokens)?;
            let value = extract(&text);
            Ok(Answer {
                variant: v.label(),
                tokens: tokens.len(),
                eos: stop == harness::Stop::Eos,
                parses: value.is_some(),
                schema_valid: value.is_some_and(|v| schema.accepts(&v)),
                text,
            })
        };
        let answers = (variants.iter().zip(&out.tokens).zip(out.stops))
            .map(answer)
            .collect::<Result<_>>()?;
        prompts.push(PromptResult {
            prompt: prompt_text.clone(),
            answers,
        });
        progress.inc(1);
    }
    progress.finish();
    Ok(JsonReport {
        model_label: m.choice.label.clone(),
        max_new,
        variants,
        prompts,
    })
}

/// Per-variant totals.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Totals {
    #[serde(rename = "variant")]
    pub label: String,
    pub parses: usize,
    pub parses_share: f64,
    pub schema_valid: usize,
    pub schema_valid_share: f64,
    pub mean_tokens: f64,
}

impl Serialize for JsonReport {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Written<'a> {
            model: &'a str,
            max_new: usize,
            prompts_count: usize,
            variants: Vec<Totals>,
            prompts: &'a [PromptResult],
        }
        Written {
            model: &self.model_label,
            max_new: self.max_new,
            prompts_count: self.prompts.len(),
            variants: self.totals(),
            prompts: &self.prompts,
        }
        .serialize(s)
    }
}

impl JsonReport {
    pub fn totals(&self) -> Vec<Totals> {
        let n = self.prompts.len().max(1);
        let total = |(k, v): (usize, &Variant)| {
            let count =
                |f: fn(&Answer) -> bool| self.prompts.iter().filter(|p| f(&p.answers[k])).count();
            let (parses, schema_valid) = (count(|a| a.parses), count(|a| a.schema_valid));
            let tokens: usize = self.prompts.iter().map(|p| p.answers[k].tokens).sum();
            Totals {
                label: v.label(),
                parses,
                parses_share: parses as f64 / n as f64,
                schema_valid,
                schema_valid_share: schema_valid as f64 / n as f64,
                mean_tokens: tokens as f64 / n as f64,
            }
        };
        self.variants.iter().enumerate().map(total).collect()
    }

    pub fn to_text(&self) -> String {
        let n = self.prompts.len();
        let mut out = format!(
            "structured output, free-running: {} prompts, {}, greedy, up to {} new tokens\n  variant                parses        schema-valid   mean tokens\n",
            n, self.model_label, self.max_new
        );
        for t in self.totals() {
            out.push_str(&format!(
                "  {:<22} {:>3} ({:>5.1}%)  {:>3} ({:>5.1}%)   {:>6.1}\n",
                t.label,
                t.parses,
                100.0 * t.parses as f64 / n.max(1) as f64,
                t.schema_valid,
                100.0 * t.schema_valid as f64 / n.max(1) as f64,
                t.mean_tokens
            ));
        }
        out
    }
}
