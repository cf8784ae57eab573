//! The engine seam: the few operations a repro asks of an inference engine.
//!
//! The oracle is one; the engines are many. Each engine is an adapter crate that implements
//! [`Engine`] (llama.cpp's lives in `harness::engine`, candle's in `engine-candle`). A repro
//! holds a `&dyn Engine` and never names an engine's own types, so a third engine is one new
//! adapter crate plus one arm in [`EngineName`] (see ARCHITECTURE.md, "Adding an engine").
//!
//! This crate is plain Rust: it links no engine and no FFI.

use anyhow::{bail, ensure, Context, Result};
use oracle::stage::Stage;
use oracle::TokenId;
use std::path::Path;

/// The engines this workspace can link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EngineName {
    Llama,
    Candle,
}

impl EngineName {
    pub const ALL: [EngineName; 2] = [EngineName::Llama, EngineName::Candle];

    /// The spelling on the command line (`--engine llama|candle`).
    pub fn as_str(self) -> &'static str {
        match self {
            EngineName::Llama => "llama",
            EngineName::Candle => "candle",
        }
    }

    /// The spelling in reports and the verdict table's engine column.
    pub fn label(self) -> &'static str {
        match self {
            EngineName::Llama => "llama.cpp",
            EngineName::Candle => "candle",
        }
    }

    pub fn parse(text: &str) -> Result<EngineName> {
        match text {
            "llama" => Ok(EngineName::Llama),
            "candle" => Ok(EngineName::Candle),
            other => bail!("unknown engine '{other}' (use llama or candle)"),
        }
    }
}

impl std::fmt::Display for EngineName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which engine, which release: what a report's header names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineInfo {
    pub name: EngineName,
    /// The build tag a results file is named by: `0.1.161` for llama.cpp (the
    /// llama-cpp-sys-2 release), `candle-0.11.1` for candle.
    pub tag: String,
    /// One readable line naming the linked library.
    pub detail: String,
}

/// A sampling configuration as every engine is asked for it: temperature first, then top-k,
/// then top-p on what top-k left, then min-p on what top-p left, then one draw. `None` means
/// the stage is absent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampling {
    pub temperature: f32,
    pub top_k: Option<usize>,
    pub top_p: Option<f32>,
    pub min_p: Option<f32>,
}

/// Largest `top_k` a configuration may name (the largest vocabulary we audit is 262,144).
pub const MAX_TOP_K: usize = 1 << 20;

/// A probability threshold strictly between 0 and 1, named once.
fn open_unit(key: &str, value: &str, before: Option<f32>) -> Result<f32> {
    ensure!(before.is_none(), "{key} is named twice");
    let p: f32 = value
        .parse()
        .map_err(|_| anyhow::anyhow!("{key} '{value}' is not a number"))?;
    ensure!(
        p > 0.0 && p < 1.0,
        "{key} must be strictly between 0 and 1, got {value}"
    );
    Ok(p)
}

impl Sampling {
    /// Parses `all`, `top_k=K`, `top_p=P`, `top_k=K,top_p=P`, `min_p=P` (alone or after the
    /// others), each optionally with `temp=T` (`all,temp=0.5`, `top_p=0.9,temp=2`). Temperature defaults to 1. Every value is checked
    /// here; whether an engine offers the configuration is [`Engine::supports`]'s question.
    pub fn parse(text: &str) -> Result<Sampling> {
        let mut s = Sampling {
            temperature: 1.0,
            top_k: None,
            top_p: None,
            min_p: None,
        };
        let (mut saw_all, mut saw_temp) = (false, false);
        for part in text.split(',') {
            let part = part.trim();
            if part == "all" {
                ensure!(!saw_all, "'all' is named twice");
                saw_all = true;
                continue;
            }
            let (key, value) = part
                .split_once('=')
                .with_context(|| format!("'{part}' is not all, top_k=K, top_p=P or temp=T"))?;
            match key {
                "top_k" => {
                    ensure!(s.top_k.is_none(), "top_k is named twice");
                    let k: usize = value
                        .parse()
                        .map_err(|_| anyhow::anyhow!("top_k '{value}' is not a whole number"))?;
                    ensure!(
                        (1..=MAX_TOP_K).contains(&k),
                        "top_k must be in 1..={MAX_TOP_K}, got {k}"
                    );
                    s.top_k = Some(k);
                }
                "top_p" => s.top_p = Some(open_unit(key, value, s.top_p)?),
                "min_p" => s.min_p = Some(open_unit(key, value, s.min_p)?),
                "temp" => {
                    ensure!(!saw_temp, "temp is named twice");
                    saw_temp = true;
                    let t: f32 = value
                        .parse()
                        .map_err(|_| anyhow::anyhow!("temp '{value}' is not a number"))?;
                    ensure!(
                        t.is_finite() && (1.0 / 64.0..=64.0).contains(&t),
                        "temp must be in 1/64..=64, got {value}"
                    );
                    s.temperature = t;
                }
                other => bail!("unknown sampling key '{other}' (use top_k, top_p, min_p or temp)"),
            }
        }
        let truncates = s.top_k.is_some() || s.top_p.is_some() || s.min_p.is_some();
        ensure!(
            saw_all != truncates,
            "name either 'all' or at least one of top_k, top_p and min_p"
        );
        Ok(s)
    }
}

impl Sampling {
    /// The configuration as the oracle's stages, in the seam's order, each `min_keep` 1 (temp
    /// only when it is not 1): what the oracle composes and what llama.cpp's chain runs.
    pub fn stages(&self) -> Vec<Stage> {
        let mut out = Vec::new();
        if self.temperature != 1.0 {
            out.push(Stage::Temp {
                t: self.temperature,
            });
        }
        if let Some(k) = self.top_k {
            // Larger than any vocabulary either way: keeps everything.
            out.push(Stage::TopK {
                k: i32::try_from(k).unwrap_or(i32::MAX),
            });
        }
        if let Some(p) = self.top_p {
            out.push(Stage::TopP { p, min_keep: 1 });
        }
        if let Some(p) = self.min_p {
            out.push(Stage::MinP { p, min_keep: 1 });
        }
        out
    }
}

impl std::fmt::Display for Sampling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if let Some(k) = self.top_k {
            parts.push(format!("top_k={k}"));
        }
        if let Some(p) = self.top_p {
            parts.push(format!("top_p={p}"));
        }
        if let Some(p) = self.min_p {
            parts.push(format!("min_p={p}"));
        }
        if parts.is_empty() {
            parts.push("all".to_string());
        }
        if self.temperature != 1.0 {
            parts.push(format!("temp={}", self.temperature));
        }
        f.write_str(&parts.join(","))
    }
}

/// A loaded model: raw next-token logits for a token sequence.
pub trait Logits {
    /// One readable line: architecture, size, weight type.
    fn describe(&self) -> String;
    fn n_vocab(&self) -> usize;
    /// The raw logits after `prompt ++ generated`. Two calls whose sequences agree see
    /// bit-identical logits: every engine feeds the prompt in one batch and then each
    /// generated token alone, whatever was fed before.
    fn logits_after(&mut self, prompt: &[TokenId], generated: &[TokenId]) -> Result<Vec<f32>>;
}

/// What a repro asks of an engine. Every method takes plain Rust values and returns plain
/// Rust values, so the same detector code judges every engine. `Send + Sync`: a sampler that
/// calls an engine may live inside a llama.cpp chain (F4's engine slot).
pub trait Engine: Send + Sync {
    fn info(&self) -> EngineInfo;
    /// The engine's repetition penalty with `theta` over `context` (the engine decides how
    /// it treats repeated ids and signs; that is what is audited), on a copy of `logits`.
    fn repeat_penalty(&self, logits: &[f32], theta: f32, context: &[TokenId]) -> Result<Vec<f32>>;
    /// The engine's greedy choice on `logits`.
    fn greedy(&self, logits: &[f32]) -> Result<TokenId>;
    /// `Ok` if the engine has this configuration, else why not (one line).
    fn supports(&self, sampling: &Sampling) -> Result<()>;
    /// `draws` draws from `logits` under `sampling`, from one sampler seeded with `seed` and
    /// used `draws` times in a row (as a decoding loop would).
    fn draw(
        &self,
        logits: &[f32],
        sampling: &Sampling,
        seed: u64,
        draws: usize,
    ) -> Result<Vec<TokenId>>;
    /// Loads a GGUF file on the CPU with `threads` threads, for sequences of a prompt and at
    /// most `room` generated tokens.
    fn load(&self, path: &Path, threads: usize, room: usize) -> Result<Box<dyn Logits>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampling_parses_what_it_prints() {
        for t in [
            "all",
            "top_k=3",
            "top_p=0.9",
            "top_k=3,top_p=0.9",
            "all,temp=0.5",
            "top_k=40,top_p=0.95,temp=2",
            "min_p=0.05",
            "top_k=3,top_p=0.9,min_p=0.1,temp=0.5",
        ] {
            assert_eq!(Sampling::parse(t).unwrap().to_string(), t, "{t}");
        }
        assert_eq!(
            Sampling::parse("temp=0.5,top_p=0.9").unwrap().to_string(),
            "top_p=0.9,temp=0.5"
        );
    }

    #[test]
    fn sampling_refuses_what_it_cannot_mean() {
        for bad in [
            "",
            "temp=1",
            "all,top_k=3",
            "top_k=0",
            "top_k=-1",
            "top_k=3,top_k=4",
            "top_p=1",
            "top_p=0",
            "top_p=NaN",
            "top_p=x",
            "temp=0",
            "temp=inf",
            "all,temp=100",
            "min_p=1",
            "xtc=0.1",
            "all,all",
            "top_k",
        ] {
            assert!(Sampling::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn engine_names_round_trip() {
        for e in EngineName::ALL {
            assert_eq!(EngineName::parse(e.as_str()).unwrap(), e);
        }
        assert!(EngineName::parse("vllm").is_err());
    }
}
