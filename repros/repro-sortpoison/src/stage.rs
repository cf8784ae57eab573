//! One chain stage as the command line names it, and its two readings: the llama.cpp
//! sampler that runs it ([`SamplerSpec`]) and the oracle's mathematical stage.
//!
//! Syntax (`--stage NAME=ARGS`, ids are positions in `--logits`):
//! `top_k=K`, `top_p=P[:MIN_KEEP]`, `min_p=P[:MIN_KEEP]`, `typical=P[:MIN_KEEP]`, `temp=T`,
//! `temp_ext=T:DELTA:EXPONENT`, `xtc=PROBABILITY:THRESHOLD[:MIN_KEEP]` (probability 0 or 1),
//! `top_n_sigma=N`, `logit_bias=ID:BIAS[/ID:BIAS...]`, `penalties=LAST_N:REPEAT[:FREQ[:PRESENT]]`
//! (counts come from `--history`), `greedy`. `MIN_KEEP` defaults to 1.
//!
//! Planted stages exist for the controls (see [`crate::planted`]) and can be named on the
//! command line to rerun a control: `shadow_top_k=K:trusting|honest` and
//! `shadow_top_p=P:trusting|honest`, Rust truncators that do (trusting) or do not (honest) rely
//! on the `sorted` flag, and `shadow_logit_bias=ID:BIAS`, a Rust logit_bias that leaves the flag
//! alone. The oracle reads them as `top_k`, `top_p` and `logit_bias`.

use crate::planted::{ShadowBias, ShadowRule, ShadowTruncator};
use anyhow::{bail, ensure, Context, Result};
use oracle::penalty::PenaltyParams;
use oracle::truncation::Stage as OracleStage;
use oracle::window::WindowLen;
use oracle::TokenId;
use subject::{Sampler, SamplerSpec};

/// Every stage name `--stage` accepts.
pub const STAGE_NAMES: &[&str] = &[
    "top_k",
    "top_p",
    "min_p",
    "typical",
    "temp",
    "temp_ext",
    "xtc",
    "top_n_sigma",
    "logit_bias",
    "penalties",
    "greedy",
    "sorted_guard",
    "shadow_top_k",
    "shadow_top_p",
    "shadow_logit_bias",
];

/// Smallest positive temperature accepted: with logits within +-1e4 no chain overflows f32.
pub const MIN_TEMP: f32 = 1e-3;

/// Built-in samplers the oracle does not compose, and why.
const NOT_COMPOSED: &[(&str, &str)] = &[
    ("dist", "it draws from an RNG"),
    ("mirostat", "it draws from an RNG"),
    ("mirostat_v2", "it draws from an RNG"),
    ("adaptive_p", "it draws from an RNG"),
    (
        "dry",
        "its repeat-length rule is not modelled by the oracle",
    ),
    ("grammar", "it needs a model's vocabulary"),
    ("infill", "it needs a model's vocabulary"),
];

#[derive(Debug, Clone, PartialEq)]
pub enum StageDef {
    TopK {
        k: i32,
    },
    TopP {
        p: f32,
        min_keep: usize,
    },
    MinP {
        p: f32,
        min_keep: usize,
    },
    Typical {
        p: f32,
        min_keep: usize,
    },
    Temp {
        t: f32,
    },
    TempExt {
        t: f32,
        delta: f32,
        exponent: f32,
    },
    Xtc {
        probability: f32,
        threshold: f32,
        min_keep: usize,
    },
    TopNSigma {
        n: f32,
    },
    LogitBias {
        biases: Vec<(TokenId, f32)>,
    },
    Penalties {
        last_n: i32,
        repeat: f32,
        freq: f32,
        present: f32,
    },
    Greedy,
    /// `ledger::sorted_guard`: clears a `sorted` flag the array does not honour.
    SortedGuard,
    /// A planted Rust truncator (a control, not a subject).
    Shadow(ShadowTruncator),
    /// A planted Rust logit_bias (a control, not a subject).
    ShadowBias(ShadowBias),
}

fn number(name: &str, text: &str) -> Result<f32> {
    let x: f32 = text
        .trim()
        .parse()
        .map_err(|_| anyhow::anyhow!("{name}: '{text}' is not a number"))?;
    ensure!(x.is_finite(), "{name}: '{text}' is not finite");
    Ok(x)
}

fn count(name: &str, text: &str) -> Result<usize> {
    text.trim()
        .parse()
        .map_err(|_| anyhow::anyhow!("{name}: '{text}' is not a non-negative integer"))
}

fn unit(name: &str, x: f32) -> Result<f32> {
    ensure!(
        (0.0..=1.0).contains(&x),
        "{name} must be in [0, 1], got {x}"
    );
    Ok(x)
}

/// Splits `ARGS` on `:` and checks it has between `min` and `max` fields.
fn fields<'a>(stage: &str, args: &'a str, min: usize, max: usize) -> Result<Vec<&'a str>> {
    let parts: Vec<&str> = args.split(':').collect();
    ensure!(
        (min..=max).contains(&parts.len()) && !args.is_empty(),
        "stage '{stage}' takes {} value(s) separated by ':', got '{args}'",
        if min == max {
            min.to_string()
        } else {
            format!("{min} to {max}")
        }
    );
    Ok(parts)
}

fn p_and_keep(stage: &str, args: &str) -> Result<(f32, usize)> {
    let f = fields(stage, args, 1, 2)?;
    let p = unit(&format!("{stage} p"), number(stage, f[0])?)?;
    let min_keep = match f.get(1) {
        Some(k) => count(&format!("{stage} min_keep"), k)?,
        None => 1,
    };
    ensure!(
        min_keep <= subject::MAX_WINDOW as usize,
        "{stage} min_keep must be <= {}",
        subject::MAX_WINDOW
    );
    Ok((p, min_keep))
}

impl StageDef {
    /// Parses one `--stage` value.
    pub fn parse(text: &str) -> Result<StageDef> {
        let (name, args) = match text.split_once('=') {
            Some((n, a)) => (n.trim(), a.trim()),
            None => (text.trim(), ""),
        };
        if let Some((_, why)) = NOT_COMPOSED.iter().find(|(n, _)| *n == name) {
            bail!("stage '{name}' is a llama.cpp sampler the oracle does not compose: {why}");
        }
        ensure!(
            STAGE_NAMES.contains(&name),
            "unknown stage '{name}' (known: {})",
            STAGE_NAMES.join(", ")
        );
        if name == "greedy" || name == "sorted_guard" {
            ensure!(args.is_empty(), "stage '{name}' takes no value");
            return Ok(if name == "greedy" {
                StageDef::Greedy
            } else {
                StageDef::SortedGuard
            });
        }
        ensure!(!args.is_empty(), "stage '{name}' needs a value: {name}=...");
        Ok(match name {
            "shadow_logit_bias" => {
                let f = fields(name, args, 2, 2)?;
                let id: i32 = f[0].trim().parse().map_err(|_| {
                    anyhow::anyhow!("shadow_logit_bias: '{}' is not a token id", f[0])
                })?;
                ensure!(id >= 0, "shadow_logit_bias: token id {id} is negative");
                let bias = number("shadow_logit_bias bias", f[1])?;
                ensure!(
                    bias.abs() <= crate::chain::LOGIT_LIMIT,
                    "shadow_logit_bias: bias {bias} is outside +-{}",
                    crate::chain::LOGIT_LIMIT
                );
                StageDef::ShadowBias(ShadowBias {
                    id: TokenId(id),
                    bias,
                })
            }
            "shadow_top_k" | "shadow_top_p" => {
                let f = fields(name, args, 2, 2)?;
                let trusts_flag = match f[1].trim() {
                    "trusting" => true,
                    "honest" => false,
                    other => bail!("{name}: '{other}' is neither 'trusting' nor 'honest'"),
                };
                let rule = if name == "shadow_top_k" {
                    let k: usize = f[0].trim().parse().map_err(|_| {
                        anyhow::anyhow!("shadow_top_k: '{}' is not a positive integer", f[0])
                    })?;
                    ensure!(
                        (1..=subject::MAX_WINDOW as usize).contains(&k),
                        "shadow_top_k must be in 1..={}, got {k}",
                        subject::MAX_WINDOW
                    );
                    ShadowRule::TopK { k }
                } else {
                    ShadowRule::TopP {
                        p: unit("shadow_top_p p", number(name, f[0])?)?,
                    }
                };
                StageDef::Shadow(ShadowTruncator { rule, trusts_flag })
            }
            "top_k" => {
                let k: i32 = args
                    .parse()
                    .map_err(|_| anyhow::anyhow!("top_k: '{args}' is not an integer"))?;
                StageDef::TopK { k }
            }
            "top_p" => {
                let (p, min_keep) = p_and_keep(name, args)?;
                StageDef::TopP { p, min_keep }
            }
            "min_p" => {
                let (p, min_keep) = p_and_keep(name, args)?;
                StageDef::MinP { p, min_keep }
            }
            "typical" => {
                let (p, min_keep) = p_and_keep(name, args)?;
                StageDef::Typical { p, min_keep }
            }
            "temp" => {
                let t = number("temp", args)?;
                ensure!(
                    t <= 0.0 || t >= MIN_TEMP,
                    "temp must be <= 0 (keep the top token) or >= {MIN_TEMP}, got {t}"
                );
                StageDef::Temp { t }
            }
            "temp_ext" => {
                let f = fields(name, args, 3, 3)?;
                let t = number("temp_ext temperature", f[0])?;
                let delta = number("temp_ext delta", f[1])?;
                let exponent = number("temp_ext exponent", f[2])?;
                ensure!(
                    (0.0..=10.0).contains(&exponent),
                    "temp_ext exponent must be in [0, 10], got {exponent}"
                );
                // The dynamic temperature ranges down to t - delta (clamped at 0, which keeps
                // the top token); a tiny positive value would overflow f32.
                ensure!(
                    delta <= 0.0 || t - delta <= 0.0 || t - delta >= MIN_TEMP,
                    "temp_ext t - delta must be <= 0 or >= {MIN_TEMP}, got {}",
                    t - delta
                );
                ensure!(
                    delta > 0.0 || t <= 0.0 || t >= MIN_TEMP,
                    "temp_ext temperature must be <= 0 or >= {MIN_TEMP}, got {t}"
                );
                StageDef::TempExt { t, delta, exponent }
            }
            "xtc" => {
                let f = fields(name, args, 2, 3)?;
                let probability = number("xtc probability", f[0])?;
                ensure!(
                    probability == 0.0 || probability == 1.0,
                    "xtc probability must be 0 or 1, got {probability} (other values draw from an RNG the oracle does not model)"
                );
                StageDef::Xtc {
                    probability,
                    threshold: unit("xtc threshold", number("xtc threshold", f[1])?)?,
                    min_keep: match f.get(2) {
                        Some(k) => count("xtc min_keep", k)?,
                        None => 1,
                    },
                }
            }
            "top_n_sigma" => StageDef::TopNSigma {
                n: number("top_n_sigma", args)?,
            },
            "logit_bias" => {
                let mut biases = Vec::new();
                for pair in args.split('/') {
                    let (id, bias) = pair
                        .split_once(':')
                        .with_context(|| format!("logit_bias: '{pair}' is not ID:BIAS"))?;
                    let id: i32 = id
                        .trim()
                        .parse()
                        .map_err(|_| anyhow::anyhow!("logit_bias: '{id}' is not a token id"))?;
                    ensure!(id >= 0, "logit_bias: token id {id} is negative");
                    ensure!(
                        !biases.iter().any(|(t, _)| *t == TokenId(id)),
                        "logit_bias: id {id} appears twice in one stage; give one bias per id"
                    );
                    let b = number("logit_bias bias", bias)?;
                    ensure!(
                        b.abs() <= crate::chain::LOGIT_LIMIT,
                        "logit_bias: bias {b} is outside +-{}",
                        crate::chain::LOGIT_LIMIT
                    );
                    biases.push((TokenId(id), b));
                }
                StageDef::LogitBias { biases }
            }
            "penalties" => {
                let f = fields(name, args, 2, 4)?;
                let last_n: i32 = f[0].trim().parse().map_err(|_| {
                    anyhow::anyhow!("penalties last_n: '{}' is not an integer", f[0])
                })?;
                ensure!(
                    (0..=subject::MAX_WINDOW).contains(&last_n),
                    "penalties last_n must be in 0..={}, got {last_n}",
                    subject::MAX_WINDOW
                );
                let repeat = number("penalties repeat", f[1])?;
                ensure!(repeat > 0.0, "penalties repeat must be > 0, got {repeat}");
                StageDef::Penalties {
                    last_n,
                    repeat,
                    freq: f.get(2).map_or(Ok(0.0), |x| number("penalties freq", x))?,
                    present: f
                        .get(3)
                        .map_or(Ok(0.0), |x| number("penalties present", x))?,
                }
            }
            _ => unreachable!("every name in STAGE_NAMES is handled"),
        })
    }

    /// Checks the ids this stage names against the number of logits.
    pub fn check_ids(&self, n_logits: usize) -> Result<()> {
        if let StageDef::ShadowBias(b) = self {
            ensure!(
                (b.id.0 as usize) < n_logits,
                "shadow_logit_bias: id {} is out of range (--logits has {n_logits} entries)",
                b.id
            );
        }
        if let StageDef::LogitBias { biases } = self {
            for (id, _) in biases {
                ensure!(
                    (id.0 as usize) < n_logits,
                    "logit_bias: id {id} is out of range (--logits has {n_logits} entries, ids 0..{})",
                    n_logits - 1
                );
            }
        }
        Ok(())
    }

    /// The stage's name in `--stage` syntax.
    pub fn name(&self) -> &'static str {
        match self {
            StageDef::TopK { .. } => "top_k",
            StageDef::TopP { .. } => "top_p",
            StageDef::MinP { .. } => "min_p",
            StageDef::Typical { .. } => "typical",
            StageDef::Temp { .. } => "temp",
            StageDef::TempExt { .. } => "temp_ext",
            StageDef::Xtc { .. } => "xtc",
            StageDef::TopNSigma { .. } => "top_n_sigma",
            StageDef::LogitBias { .. } => "logit_bias",
            StageDef::Penalties { .. } => "penalties",
            StageDef::Greedy => "greedy",
            StageDef::SortedGuard => "sorted_guard",
            StageDef::Shadow(ShadowTruncator {
                rule: ShadowRule::TopK { .. },
                ..
            }) => "shadow_top_k",
            StageDef::Shadow(ShadowTruncator {
                rule: ShadowRule::TopP { .. },
                ..
            }) => "shadow_top_p",
            StageDef::ShadowBias(_) => "shadow_logit_bias",
        }
    }

    /// The sampler that runs this stage: llama.cpp's built-in one, the guard, or a shadow.
    pub fn build(&self, n_vocab: i32) -> Result<Sampler> {
        match self {
            StageDef::SortedGuard => ledger::sorted_guard(),
            StageDef::Shadow(s) => Sampler::custom(*s),
            StageDef::ShadowBias(b) => Sampler::custom(*b),
            builtin => builtin.subject(n_vocab).build(),
        }
    }

    /// The llama.cpp sampler for a built-in stage, for a vocabulary of `n_vocab` ids.
    fn subject(&self, n_vocab: i32) -> SamplerSpec {
        match self {
            StageDef::TopK { k } => SamplerSpec::TopK { k: *k },
            StageDef::TopP { p, min_keep } => SamplerSpec::TopP {
                p: *p,
                min_keep: *min_keep,
            },
            StageDef::MinP { p, min_keep } => SamplerSpec::MinP {
                p: *p,
                min_keep: *min_keep,
            },
            StageDef::Typical { p, min_keep } => SamplerSpec::Typical {
                p: *p,
                min_keep: *min_keep,
            },
            StageDef::Temp { t } => SamplerSpec::Temp { t: *t },
            StageDef::TempExt { t, delta, exponent } => SamplerSpec::TempExt {
                t: *t,
                delta: *delta,
                exponent: *exponent,
            },
            StageDef::Xtc {
                probability,
                threshold,
                min_keep,
            } => SamplerSpec::Xtc {
                p: *probability,
                t: *threshold,
                min_keep: *min_keep,
                seed: 0,
            },
            StageDef::TopNSigma { n } => SamplerSpec::TopNSigma { n: *n },
            StageDef::LogitBias { biases } => SamplerSpec::LogitBias {
                n_vocab,
                biases: biases.clone(),
            },
            StageDef::Penalties {
                last_n,
                repeat,
                freq,
                present,
            } => SamplerSpec::Penalties {
                n_vocab,
                last_n: *last_n,
                repeat: *repeat,
                freq: *freq,
                present: *present,
            },
            StageDef::Greedy => SamplerSpec::Greedy,
            StageDef::SortedGuard | StageDef::Shadow(_) | StageDef::ShadowBias(_) => {
                unreachable!("the guard and the shadows are not built-in samplers")
            }
        }
    }

    /// The oracle's reading of this stage; `history` is what `penalties` counts.
    pub fn oracle(&self, history: &[TokenId]) -> OracleStage {
        match self {
            StageDef::TopK { k } => OracleStage::TopK { k: *k },
            StageDef::TopP { p, min_keep } => OracleStage::TopP {
                p: *p,
                min_keep: *min_keep,
            },
            StageDef::MinP { p, min_keep } => OracleStage::MinP {
                p: *p,
                min_keep: *min_keep,
            },
            StageDef::Typical { p, min_keep } => OracleStage::Typical {
                p: *p,
                min_keep: *min_keep,
            },
            StageDef::Temp { t } => OracleStage::Temp { t: *t },
            StageDef::TempExt { t, delta, exponent } => OracleStage::TempExt {
                t: *t,
                delta: *delta,
                exponent: *exponent,
            },
            StageDef::Xtc {
                probability,
                threshold,
                min_keep,
            } => OracleStage::Xtc {
                probability: *probability,
                threshold: *threshold,
                min_keep: *min_keep,
            },
            StageDef::TopNSigma { n } => OracleStage::TopNSigma { n: *n },
            StageDef::LogitBias { biases } => OracleStage::LogitBias {
                biases: biases.clone(),
            },
            StageDef::Penalties {
                last_n,
                repeat,
                freq,
                present,
            } => OracleStage::Penalties {
                last_n: WindowLen(*last_n as usize),
                params: PenaltyParams {
                    repeat: *repeat,
                    freq: *freq,
                    present: *present,
                },
                history: history.to_vec(),
            },
            StageDef::Greedy => OracleStage::Greedy,
            StageDef::SortedGuard => OracleStage::SortedGuard,
            StageDef::Shadow(ShadowTruncator { rule, .. }) => match rule {
                ShadowRule::TopK { k } => OracleStage::TopK {
                    k: i32::try_from(*k).unwrap_or(i32::MAX),
                },
                ShadowRule::TopP { p } => OracleStage::TopP { p: *p, min_keep: 1 },
            },
            StageDef::ShadowBias(b) => OracleStage::LogitBias {
                biases: vec![(b.id, b.bias)],
            },
        }
    }
}

fn keep_suffix(min_keep: usize) -> String {
    if min_keep == 1 {
        String::new()
    } else {
        format!(":{min_keep}")
    }
}

/// `--stage` syntax, so every printed chain can be pasted back into the command line.
impl std::fmt::Display for StageDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StageDef::TopK { k } => write!(f, "top_k={k}"),
            StageDef::TopP { p, min_keep } => write!(f, "top_p={p}{}", keep_suffix(*min_keep)),
            StageDef::MinP { p, min_keep } => write!(f, "min_p={p}{}", keep_suffix(*min_keep)),
            StageDef::Typical { p, min_keep } => write!(f, "typical={p}{}", keep_suffix(*min_keep)),
            StageDef::Temp { t } => write!(f, "temp={t}"),
            StageDef::TempExt { t, delta, exponent } => {
                write!(f, "temp_ext={t}:{delta}:{exponent}")
            }
            StageDef::Xtc {
                probability,
                threshold,
                min_keep,
            } => {
                write!(f, "xtc={probability}:{threshold}{}", keep_suffix(*min_keep))
            }
            StageDef::TopNSigma { n } => write!(f, "top_n_sigma={n}"),
            StageDef::LogitBias { biases } => {
                let parts: Vec<String> = biases
                    .iter()
                    .map(|(id, b)| {
                        format!(
                            "{id}:{}",
                            if *b >= 0.0 {
                                format!("+{b}")
                            } else {
                                b.to_string()
                            }
                        )
                    })
                    .collect();
                write!(f, "logit_bias={}", parts.join("/"))
            }
            StageDef::Penalties {
                last_n,
                repeat,
                freq,
                present,
            } => {
                write!(f, "penalties={last_n}:{repeat}:{freq}:{present}")
            }
            StageDef::Greedy => write!(f, "greedy"),
            StageDef::SortedGuard => write!(f, "sorted_guard"),
            StageDef::Shadow(ShadowTruncator { rule, trusts_flag }) => {
                let how = if *trusts_flag { "trusting" } else { "honest" };
                match rule {
                    ShadowRule::TopK { k } => write!(f, "shadow_top_k={k}:{how}"),
                    ShadowRule::TopP { p } => write!(f, "shadow_top_p={p}:{how}"),
                }
            }
            StageDef::ShadowBias(b) => {
                let sign = if b.bias >= 0.0 { "+" } else { "" };
                write!(f, "shadow_logit_bias={}:{sign}{}", b.id, b.bias)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_published_chain_and_prints_it_back() {
        for text in [
            "top_k=4",
            "logit_bias=3:+6",
            "top_p=0.8",
            "top_p=0.8:2",
            "logit_bias=1:-2.5/4:+1",
            "xtc=1:0.1",
            "temp_ext=1:0.5:1",
            "penalties=64:1.3:0:0",
            "greedy",
            "min_p=0.05:3",
            "shadow_top_p=0.8:trusting",
            "shadow_top_k=2:honest",
            "shadow_logit_bias=3:+6",
        ] {
            let s = StageDef::parse(text).unwrap();
            assert_eq!(s.to_string(), text);
            assert_eq!(StageDef::parse(&s.to_string()).unwrap(), s);
        }
    }

    #[test]
    fn refuses_bad_stages_with_a_reason() {
        for bad in [
            "top_p=1.5",
            "frobnicate=1",
            "top_k",
            "top_k=x",
            "min_p=-0.1",
            "xtc=0.5:0.1",
            "logit_bias=3",
            "logit_bias=3:+1/3:+2",
            "logit_bias=-1:+1",
            "top_p=nan",
            "penalties=-1:1.1",
            "penalties=64:0",
            "dist=1",
            "greedy=1",
            "temp_ext=1:0.5:-1",
            "shadow_top_p=0.8",
            "shadow_top_p=0.8:sometimes",
            "shadow_top_k=0:honest",
        ] {
            assert!(StageDef::parse(bad).is_err(), "{bad} should be refused");
        }
        let bias = StageDef::parse("logit_bias=8:+1").unwrap();
        assert!(bias.check_ids(8).is_err());
        assert!(bias.check_ids(9).is_ok());
    }
}
