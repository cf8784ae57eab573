//! candle behind the engine seam.
//!
//! Every operation calls candle's own public code, unchanged: the penalty is
//! `candle_transformers::utils::apply_repeat_penalty`, every draw and the greedy choice go
//! through `candle_transformers::generation::LogitsProcessor`, and the models are candle's
//! quantized GGUF decoders (`quantized_llama` for SmolLM2, `quantized_gemma3` for Gemma3) on
//! the CPU device. Nothing here re-implements what candle does; the adapter only converts
//! between plain Rust values and candle's tensors.

use anyhow::{bail, ensure, Context, Result};
use candle_core::quantized::gguf_file;
use candle_core::{Device, Tensor};
use candle_transformers::generation::{LogitsProcessor, Sampling as CandleSampling};
use candle_transformers::models::{quantized_gemma3, quantized_llama};
use engine::{Call, Engine, EngineInfo, EngineName, Logits, Sampling};
use oracle::stage::Stage;
use oracle::TokenId;
use std::path::Path;

/// The candle release linked here (kept in step with the `=` pin in Cargo.toml; a test reads
/// the pin back).
pub const CANDLE_VERSION: &str = "0.11.1";

pub struct Candle;

/// candle's error as one line: candle attaches a backtrace to its errors when `RUST_BACKTRACE`
/// is set, and its context variants join their parts with newlines, while every error this
/// adapter returns may end as a one-line refusal on a command line.
fn message(e: &candle_core::Error) -> String {
    use candle_core::Error as E;
    match e {
        E::WithBacktrace { inner, .. } => message(inner),
        E::Context { inner, context } => format!("{context}: {}", message(inner)),
        E::WithPath { inner, path } => format!("{}: {}", path.display(), message(inner)),
        other => other.to_string().replace('\n', " "),
    }
}

/// A candle result as an anyhow one, its error in one line ([`message`]).
trait Plain<T> {
    fn plain(self) -> Result<T>;
}

impl<T> Plain<T> for candle_core::Result<T> {
    fn plain(self) -> Result<T> {
        self.map_err(|e| anyhow::anyhow!(message(&e)))
    }
}

fn tensor(logits: &[f32]) -> Result<Tensor> {
    Tensor::from_vec(logits.to_vec(), logits.len(), &Device::Cpu)
        .plain()
        .context("candle: making a tensor")
}

fn ids(context: &[TokenId]) -> Result<Vec<u32>> {
    context
        .iter()
        .map(|t| u32::try_from(t.0).with_context(|| format!("token id {t} is negative")))
        .collect()
}

/// What candle's `LogitsProcessor` offers, in one line: the end of every refusal.
const OFFERS: &str = "it offers all, top_k, top_p and top_k then top_p";

/// Whether candle has `stage` at all, whatever its place in the list.
fn has(stage: &Stage) -> Result<()> {
    match stage {
        Stage::Temp { .. } | Stage::TopK { .. } | Stage::TopP { min_keep: 1, .. } => Ok(()),
        Stage::TopP { min_keep, .. } => {
            bail!("candle's top_p keeps at least 1 token, not {min_keep} ({OFFERS})")
        }
        Stage::MinP { .. }
        | Stage::Typical { .. }
        | Stage::TempExt { .. }
        | Stage::Xtc { .. }
        | Stage::TopNSigma { .. }
        | Stage::LogitBias { .. }
        | Stage::Penalties { .. }
        | Stage::Greedy => {
            bail!(
                "candle's LogitsProcessor has no {} ({OFFERS})",
                stage.name()
            )
        }
        Stage::Dist { .. } => {
            bail!("candle's LogitsProcessor draws once, after the other stages ({OFFERS})")
        }
    }
}

/// candle's name for a list of stages: an optional temperature first, then top-k, top-p, or
/// top-k then top-p (candle's `TopKThenTopP`).
pub fn candle_sampling(s: &Sampling) -> Result<CandleSampling> {
    s.stages().iter().try_for_each(has)?;
    let (temperature, cuts) = match s.stages() {
        [Stage::Temp { t }, rest @ ..] => (f64::from(*t), rest),
        all => (1.0, all),
    };
    let k = |k: &i32| {
        usize::try_from(*k).with_context(|| format!("candle's top_k takes k >= 0, got {k}"))
    };
    Ok(match cuts {
        [] => CandleSampling::All { temperature },
        [Stage::TopK { k: n }] => CandleSampling::TopK {
            k: k(n)?,
            temperature,
        },
        [Stage::TopP { p, .. }] => CandleSampling::TopP {
            p: f64::from(*p),
            temperature,
        },
        [Stage::TopK { k: n }, Stage::TopP { p, .. }] => CandleSampling::TopKThenTopP {
            k: k(n)?,
            p: f64::from(*p),
            temperature,
        },
        _ => bail!("candle's LogitsProcessor cannot run {s} in this order ({OFFERS})"),
    })
}

/// The candle-transformers source a defect on candle quotes its contract from: its sampling
/// module, as this binary compiled it (copied by the build script).
const SOURCES: &[(&str, &str)] = &[(
    "src/generation/mod.rs",
    include_str!(concat!(env!("OUT_DIR"), "/generation.rs")),
)];

impl Engine for Candle {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            name: EngineName::Candle,
            tag: format!("candle-{CANDLE_VERSION}"),
            detail: format!(
                "candle-core {CANDLE_VERSION}, candle-transformers {CANDLE_VERSION} (CPU)"
            ),
            sources: SOURCES,
        }
    }

    fn repeat_penalty(&self, logits: &[f32], theta: f32, context: &[TokenId]) -> Result<Vec<f32>> {
        use candle_transformers::utils::apply_repeat_penalty;
        let out = apply_repeat_penalty(&tensor(logits)?, theta, &ids(context)?)
            .plain()
            .context("candle: apply_repeat_penalty")?;
        (out.to_vec1::<f32>().plain()).context("candle: reading the penalized logits")
    }

    fn greedy(&self, logits: &[f32]) -> Result<TokenId> {
        let mut p = LogitsProcessor::from_sampling(0, CandleSampling::ArgMax);
        let id = p
            .sample(&tensor(logits)?)
            .plain()
            .context("candle: argmax")?;
        Ok(TokenId(id as i32))
    }

    fn supports(&self, sampling: &Sampling) -> Result<()> {
        candle_sampling(sampling).map(|_| ())
    }

    /// `LogitsProcessor::sample` returns the id alone: no call shows its survivors.
    fn draw(
        &self,
        logits: &[f32],
        s: &Sampling,
        seed: u64,
        n: usize,
        _watch: &[TokenId],
    ) -> Result<Vec<Call>> {
        ensure!(!logits.is_empty(), "no logits to draw from");
        let mut p = LogitsProcessor::from_sampling(seed, candle_sampling(s)?);
        let t = tensor(logits)?;
        (0..n)
            .map(|_| {
                let id = (p.sample(&t).plain()).context("candle: LogitsProcessor::sample")?;
                Ok(Call::drawn_only(TokenId(id as i32)))
            })
            .collect()
    }

    fn load(&self, path: &Path, _threads: usize, _room: usize) -> Result<Box<dyn Logits>> {
        Ok(Box::new(CandleModel::load(path)?))
    }
}

enum Weights {
    Llama(quantized_llama::ModelWeights),
    Gemma3(quantized_gemma3::ModelWeights),
}

/// A candle GGUF decoder with its KV cache and what has been fed through it.
pub struct CandleModel {
    weights: Weights,
    describe: String,
    n_vocab: usize,
    /// The prompt, then the generated tokens fed one at a time after it.
    fed_prompt: Vec<TokenId>,
    fed_generated: Vec<TokenId>,
    last: Vec<f32>,
}

impl CandleModel {
    pub fn load(path: &Path) -> Result<CandleModel> {
        let opening = || format!("opening {}", path.display());
        let mut file = std::fs::File::open(path).with_context(opening)?;
        let content = gguf_file::Content::read(&mut file).map_err(|e| {
            anyhow::anyhow!(
                "candle cannot read {} as GGUF: {}",
                path.display(),
                message(&e)
            )
        })?;
        let arch = match content.metadata.get("general.architecture") {
            Some(gguf_file::Value::String(a)) => a.clone(),
            _ => bail!("{}: no general.architecture", path.display()),
        };
        let n_vocab = match content.metadata.get("tokenizer.ggml.tokens") {
            Some(gguf_file::Value::Array(tokens)) => tokens.len(),
            _ => bail!("{}: no tokenizer.ggml.tokens", path.display()),
        };
        let cpu = &Device::Cpu;
        let weights = match arch.as_str() {
            "llama" => Weights::Llama(
                quantized_llama::ModelWeights::from_gguf(content, &mut file, cpu)
                    .plain()
                    .context("candle: quantized_llama::ModelWeights::from_gguf")?,
            ),
            "gemma3" => Weights::Gemma3(
                quantized_gemma3::ModelWeights::from_gguf(content, &mut file, cpu)
                    .plain()
                    .context("candle: quantized_gemma3::ModelWeights::from_gguf")?,
            ),
            other => {
                bail!("candle adapter: architecture '{other}' is not wired (llama and gemma3 are)")
            }
        };
        Ok(CandleModel {
            weights,
            describe: format!("{arch}, {n_vocab} tokens, candle quantized_{arch} on the CPU"),
            n_vocab,
            fed_prompt: Vec::new(),
            fed_generated: Vec::new(),
            last: Vec::new(),
        })
    }

    /// Feeds `tokens` at position `pos` (position 0 resets candle's KV cache) and keeps the
    /// last position's logits.
    fn feed(&mut self, tokens: &[TokenId], pos: usize) -> Result<()> {
        let input = Tensor::new(ids(tokens)?, &Device::Cpu)
            .and_then(|t| t.unsqueeze(0))
            .plain()
            .context("candle: making the input tensor")?;
        let out = match &mut self.weights {
            Weights::Llama(w) => w.forward(&input, pos),
            Weights::Gemma3(w) => w.forward(&input, pos),
        }
        .plain()
        .context("candle: forward")?;
        self.last = (out.squeeze(0))
            .and_then(|t| t.to_dtype(candle_core::DType::F32))
            .and_then(|t| t.to_vec1::<f32>())
            .plain()
            .context("candle: reading the logits")?;
        ensure!(
            self.last.len() == self.n_vocab,
            "candle returned {} logits for a {}-token vocabulary",
            self.last.len(),
            self.n_vocab
        );
        Ok(())
    }
}

impl Logits for CandleModel {
    fn describe(&self) -> String {
        self.describe.clone()
    }

    fn n_vocab(&self) -> usize {
        self.n_vocab
    }

    fn logits_after(&mut self, prompt: &[TokenId], generated: &[TokenId]) -> Result<Vec<f32>> {
        ensure!(!prompt.is_empty(), "the prompt has no tokens");
        // The same sequence again, or one more generated token: what is fed is kept.
        let keeps = self.fed_prompt == prompt
            && generated.len() <= self.fed_generated.len() + 1
            && generated.starts_with(&self.fed_generated);
        if !keeps {
            // Start again the one way every sequence is fed: the prompt in one batch, then
            // each generated token alone, so equal sequences see equal bits.
            self.fed_prompt.clear();
            self.fed_generated.clear();
            self.feed(prompt, 0)?;
            self.fed_prompt = prompt.to_vec();
        }
        for &t in &generated[self.fed_generated.len()..] {
            let pos = self.fed_prompt.len() + self.fed_generated.len();
            self.feed(&[t], pos)?;
            self.fed_generated.push(t);
        }
        Ok(self.last.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each list candle runs maps to its own configuration, the temperature carried along.
    #[test]
    fn every_offered_list_maps_to_candles_configuration() {
        for (text, want) in [
            ("all", "All { temperature: 1.0 }"),
            ("top_k=3,temp=0.5", "TopK { k: 3, temperature: 0.5 }"),
            ("top_p=0.75", "TopP { p: 0.75, temperature: 1.0 }"),
            (
                "top_p=0.75,top_k=3,temp=2",
                "TopKThenTopP { k: 3, p: 0.75, temperature: 2.0 }",
            ),
        ] {
            let got = candle_sampling(&Sampling::parse(text).unwrap()).unwrap();
            assert_eq!(format!("{got:?}"), want, "{text}");
        }
    }

    /// candle's errors come out in one line, with their context and without a backtrace,
    /// whatever `RUST_BACKTRACE` says.
    #[test]
    fn candle_errors_are_one_line_without_a_backtrace() {
        let inner = candle_core::Error::Msg("no tensor".into());
        let e = candle_core::Error::WithBacktrace {
            inner: Box::new(inner.context("reading the weights")),
            backtrace: Box::new(std::backtrace::Backtrace::force_capture()),
        };
        assert_eq!(message(&e), "reading the weights: no tensor");
        let bad = CandleModel::load(Path::new("/no/such/model.gguf"));
        assert_eq!(
            bad.err().unwrap().to_string(),
            "opening /no/such/model.gguf"
        );
    }

    /// The version reports print is the one Cargo.toml pins with `=`.
    #[test]
    fn the_reported_version_is_the_pinned_one() {
        let manifest = include_str!("../Cargo.toml");
        for krate in ["candle-core", "candle-transformers"] {
            let pin = format!("{krate} = {{ version = \"={CANDLE_VERSION}\"");
            assert!(
                manifest.contains(&pin),
                "{krate} is not pinned at ={CANDLE_VERSION}"
            );
        }
    }

    /// candle's own code through the adapter: its penalty divides a positive seen logit and
    /// multiplies a negative one, once per distinct id; its top-k-then-top-p draw on
    /// [3, 2, 1, 0] keeps id 2 (the renormalized cut would not).
    #[test]
    fn the_adapter_calls_candle() {
        let context = [0, 2, 0].map(TokenId);
        let out = Candle.repeat_penalty(&[3.0, 2.0, -1.0, 0.0], 2.0, &context);
        assert_eq!(out.unwrap(), vec![1.5, 2.0, -2.0, 0.0]);
        let s = Sampling::parse("top_k=3,top_p=0.9").unwrap();
        let calls = Candle
            .draw(&[3.0, 2.0, 1.0, 0.0], &s, 1, 2000, &[])
            .unwrap();
        assert!(calls.iter().all(|c| c.kept.is_none()));
        let draws: Vec<TokenId> = calls.iter().map(|c| c.drawn).collect();
        assert!(draws.contains(&TokenId(2)));
        assert!(!draws.contains(&TokenId(3)));
        let refused = Candle.supports(&Sampling::parse("top_k=3,min_p=0.1").unwrap());
        assert_eq!(
            refused.unwrap_err().to_string(),
            "candle's LogitsProcessor has no min_p (it offers all, top_k, top_p and top_k then top_p)"
        );
        assert_eq!(Candle.greedy(&[1.0, 3.0, 3.0]).unwrap().0, 1);
    }
}
