//! The engine seam: the few operations a repro asks of an inference engine.
//!
//! The oracle is one; the engines are many. Each engine is an adapter crate that implements
//! [`Engine`] (llama.cpp's is `engine-llama`, candle's `engine-candle`). A repro holds a
//! `&dyn Engine` and never names an engine's own types, so a third engine is one new adapter
//! crate, one line in the `engines!` table below and one arm in the registry
//! (`harness::engines::get`; see ARCHITECTURE.md, "Adding an engine").
//!
//! This crate is plain Rust: it links no engine and no FFI.

use anyhow::{bail, ensure, Context, Result};
use oracle::stage::Stage;
use oracle::TokenId;
use std::path::Path;

/// Declares [`EngineName`] and its spellings from one table: a row per engine, with its
/// spelling on the command line, in reports, and of its penalty in F4's sign slot.
macro_rules! engines {
    ($($variant:ident => $flag:literal, $label:literal, $penalty:literal;)+) => {
        /// The engines this workspace can link.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum EngineName {
            $($variant,)+
        }

        impl EngineName {
            /// Every engine, in the table's order.
            pub const ALL: &'static [EngineName] = &[$(EngineName::$variant,)+];

            /// The spelling on the command line (`--engine llama|candle`).
            pub fn as_str(self) -> &'static str {
                match self {
                    $(EngineName::$variant => $flag,)+
                }
            }

            /// The spelling in reports and the verdict table's engine column.
            pub fn label(self) -> &'static str {
                match self {
                    $(EngineName::$variant => $label,)+
                }
            }

            /// The engine's own repetition penalty, as a report names it.
            pub fn penalty_label(self) -> &'static str {
                match self {
                    $(EngineName::$variant => $penalty,)+
                }
            }
        }
    };
}

engines! {
    Llama => "llama", "llama.cpp", "llama.cpp penalties (engine seam)";
    Candle => "candle", "candle", "candle apply_repeat_penalty";
}

impl EngineName {
    pub fn parse(text: &str) -> Result<EngineName> {
        let found = EngineName::ALL.iter().find(|e| e.as_str() == text);
        found
            .copied()
            .with_context(|| format!("unknown engine '{text}' (use {})", EngineName::choices()))
    }

    /// The command-line spellings as a sentence: `llama or candle`.
    pub fn choices() -> String {
        let flags: Vec<&str> = EngineName::ALL.iter().map(|e| e.as_str()).collect();
        match flags.split_last() {
            Some((last, [])) => last.to_string(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
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
    /// The build tag a results file is named by: the llama.cpp release tag for llama.cpp
    /// (`b11429`), `candle-0.11.1` for candle.
    pub tag: String,
    /// One readable line naming the linked library.
    pub detail: String,
    /// The engine's sources as compiled, `(path, text)`, where a defect's contract is quoted
    /// from (the report's `Sources`).
    pub sources: &'static [(&'static str, &'static str)],
}

/// A sampling configuration: the oracle's stages a draw runs, in order, then one draw from
/// the softmax of what they left. This one list is what the oracle composes, what llama.cpp's
/// chain is built from and what another engine maps to its own configuration; each engine
/// says which lists it runs ([`Engine::supports`]).
///
/// The text form names the lists `[temp] [top_k] [top_p] [min_p]`: temperature first, then
/// top-k, then top-p on what top-k left (renormalized), then min-p on what top-p left, each
/// `min_keep` 1; a temperature of 1 is no stage.
#[derive(Debug, Clone, PartialEq)]
pub struct Sampling {
    stages: Vec<Stage>,
}

/// Largest `top_k` a configuration may name (the largest vocabulary we audit is 262,144).
pub const MAX_TOP_K: usize = 1 << 20;

/// The value of `key`, which may be named once (`before` is what an earlier part gave):
/// `value` read as a `T`, or that it is not `kind`; `outside` says the range it misses, if it
/// does.
fn once<T: std::str::FromStr + Copy>(
    (key, value): (&str, &str),
    before: Option<T>,
    kind: &str,
    outside: impl Fn(T) -> Option<String>,
) -> Result<Option<T>> {
    ensure!(before.is_none(), "{key} is named twice");
    let x: T = (value.parse()).map_err(|_| anyhow::anyhow!("{key} '{value}' is not {kind}"))?;
    if let Some(range) = outside(x) {
        bail!("{key} must be {range}");
    }
    Ok(Some(x))
}

impl Sampling {
    /// Parses `all`, `top_k=K`, `top_p=P`, `top_k=K,top_p=P`, `min_p=P` (alone or after the
    /// others), each optionally with `temp=T` (`all,temp=0.5`, `top_p=0.9,temp=2`), in any
    /// order of keys. Temperature defaults to 1. Every value is checked here; whether an
    /// engine runs the list is [`Engine::supports`]'s question.
    pub fn parse(text: &str) -> Result<Sampling> {
        let (mut top_k, mut top_p, mut min_p, mut temp) = (None, None, None, None);
        let mut saw_all = false;
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
            let kv = (key, value);
            let unit = |p: f32| {
                let ok = p > 0.0 && p < 1.0;
                (!ok).then(|| format!("strictly between 0 and 1, got {value}"))
            };
            match key {
                "top_k" => {
                    top_k = once(kv, top_k, "a whole number", |k: usize| {
                        let ok = (1..=MAX_TOP_K).contains(&k);
                        (!ok).then(|| format!("in 1..={MAX_TOP_K}, got {k}"))
                    })?
                }
                "top_p" => top_p = once(kv, top_p, "a number", unit)?,
                "min_p" => min_p = once(kv, min_p, "a number", unit)?,
                "temp" => {
                    temp = once(kv, temp, "a number", |t: f32| {
                        let ok = t.is_finite() && (1.0 / 64.0..=64.0).contains(&t);
                        (!ok).then(|| format!("in 1/64..=64, got {value}"))
                    })?
                }
                other => bail!("unknown sampling key '{other}' (use top_k, top_p, min_p or temp)"),
            }
        }
        let truncates = top_k.is_some() || top_p.is_some() || min_p.is_some();
        ensure!(
            saw_all != truncates,
            "name either 'all' or at least one of top_k, top_p and min_p"
        );
        let stages = [
            temp.filter(|&t| t != 1.0).map(|t| Stage::Temp { t }),
            top_k
                .map(|k| i32::try_from(k).map(|k| Stage::TopK { k }))
                .transpose()?,
            top_p.map(|p| Stage::TopP { p, min_keep: 1 }),
            min_p.map(|p| Stage::MinP { p, min_keep: 1 }),
        ];
        Ok(Sampling {
            stages: stages.into_iter().flatten().collect(),
        })
    }

    /// The stages, in the order they run; the draw follows the last.
    pub fn stages(&self) -> &[Stage] {
        &self.stages
    }

    /// The whole chain: the stages, then the draw (`dist`) seeded with `seed`.
    pub fn with_draw(&self, seed: u32) -> Vec<Stage> {
        let mut chain = self.stages.clone();
        chain.push(Stage::Dist { seed });
        chain
    }
}

/// The text [`Sampling::parse`] reads back to the same list: the truncating stages in order
/// (or `all`), then the temperature, which runs first.
impl std::fmt::Display for Sampling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (temps, cuts): (Vec<&Stage>, Vec<&Stage>) = self
            .stages
            .iter()
            .partition(|s| matches!(s, Stage::Temp { .. }));
        let mut parts: Vec<String> = cuts.iter().map(|s| s.to_string()).collect();
        if parts.is_empty() {
            parts.push("all".to_string());
        }
        parts.extend(temps.iter().map(|s| s.to_string()));
        f.write_str(&parts.join(","))
    }
}

/// One call of a draw: the id drawn and, where the sampler shows its survivors, which of the
/// watched ids survived the truncating stages in this call (ascending). `None` where the
/// sampler returns only the id (candle's `LogitsProcessor`); a detector then sees the calls'
/// draws, not their sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub drawn: TokenId,
    pub kept: Option<Vec<TokenId>>,
}

impl Call {
    /// A call that shows only its draw.
    pub fn drawn_only(drawn: TokenId) -> Call {
        Call { drawn, kept: None }
    }

    /// Calls that show only their draws.
    pub fn all_drawn_only(draws: &[TokenId]) -> Vec<Call> {
        draws.iter().copied().map(Call::drawn_only).collect()
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
    /// `Ok` if the engine runs this list of stages before a draw, else why not (one line).
    fn supports(&self, sampling: &Sampling) -> Result<()>;
    /// `n` draws from `logits` under `s`, from one sampler seeded with `seed` and used `n`
    /// times in a row (as a decoding loop would). Each [`Call`] holds the id drawn and, where
    /// the engine shows what its truncating stages left in that call, which ids of `watch`
    /// survived it.
    fn draw(
        &self,
        logits: &[f32],
        s: &Sampling,
        seed: u64,
        n: usize,
        watch: &[TokenId],
    ) -> Result<Vec<Call>>;
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
        assert_eq!(Sampling::parse("all,temp=1").unwrap().to_string(), "all");
    }

    #[test]
    fn sampling_is_the_oracles_stages_temperature_first() {
        let s = Sampling::parse("min_p=0.1,top_p=0.9,temp=0.5,top_k=3").unwrap();
        assert_eq!(
            s.stages(),
            [
                Stage::Temp { t: 0.5 },
                Stage::TopK { k: 3 },
                Stage::TopP {
                    p: 0.9,
                    min_keep: 1
                },
                Stage::MinP {
                    p: 0.1,
                    min_keep: 1
                },
            ]
        );
        assert_eq!(
            s.with_draw(7)[4..],
            [Stage::Dist { seed: 7 }],
            "the draw ends the chain"
        );
        assert!(Sampling::parse("all").unwrap().stages().is_empty());
        assert!(Sampling::parse("all,temp=1").unwrap().stages().is_empty());
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
            "top_k=1048577",
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
        for &e in EngineName::ALL {
            assert_eq!(EngineName::parse(e.as_str()).unwrap(), e);
            assert!(!e.label().is_empty() && !e.penalty_label().is_empty());
        }
        assert_eq!(
            EngineName::parse("vllm").unwrap_err().to_string(),
            "unknown engine 'vllm' (use llama or candle)"
        );
    }
}
