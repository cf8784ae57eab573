//! One stage of an audited chain: a stage the oracle describes ([`oracle::stage::Stage`],
//! llama.cpp's own sampler or ledger's guard), or one of the planted Rust stages the controls
//! use. The oracle's type owns every parameter; this module only adds the planted ones.
//!
//! The `--stage` syntax is the oracle's (see [`oracle::stage`]), plus the planted stages, which
//! can be named on the command line to rerun a control: `shadow_top_k=K:trusting|honest` and
//! `shadow_top_p=P:trusting|honest`, Rust truncators that do (trusting) or do not (honest)
//! rely on the `sorted` flag, and `shadow_logit_bias=ID:BIAS`, a Rust logit_bias that leaves
//! the flag alone. The oracle reads them as `top_k`, `top_p` and `logit_bias`.

use crate::planted::{ShadowBias, ShadowRule, ShadowTruncator};
use anyhow::{bail, Result};
use oracle::stage::{self as st, Role, Stage};
use subject::{Sampler, SamplerSpec};

/// The planted stages' names, beside the oracle's [`st::NAMES`].
pub const SHADOW_NAMES: &[&str] = &["shadow_top_k", "shadow_top_p", "shadow_logit_bias"];

/// A stage in an audited chain.
#[derive(Debug, Clone, PartialEq)]
pub enum ChainStage {
    /// A stage the oracle describes: llama.cpp's built-in sampler, or `ledger::sorted_guard`
    /// for [`Stage::SortedGuard`].
    Sampler(Stage),
    /// A planted Rust truncator (a control, not a subject).
    Shadow(ShadowTruncator),
    /// A planted Rust logit_bias (a control, not a subject).
    ShadowBias(ShadowBias),
}

impl From<Stage> for ChainStage {
    fn from(stage: Stage) -> ChainStage {
        ChainStage::Sampler(stage)
    }
}

impl ChainStage {
    /// Parses one `--stage` value.
    pub fn parse(text: &str) -> Result<ChainStage> {
        let (name, args) = st::split_name(text);
        if !SHADOW_NAMES.contains(&name) {
            return text.parse::<Stage>().map(ChainStage::Sampler).map_err(|e| {
                if e.0.starts_with("unknown stage") {
                    anyhow::anyhow!(
                        "unknown stage '{name}' (known: {}, {})",
                        st::NAMES.join(", "),
                        SHADOW_NAMES.join(", ")
                    )
                } else {
                    anyhow::anyhow!(e)
                }
            });
        }
        st::require(!args.is_empty(), || {
            format!("stage '{name}' needs a value: {name}=...")
        })?;
        let f = st::fields(name, args, 2, 2)?;
        if name == "shadow_logit_bias" {
            return Ok(ChainStage::ShadowBias(ShadowBias {
                id: st::token_id(name, f[0])?,
                bias: st::bias(name, f[1])?,
            }));
        }
        let trusts_flag = match f[1].trim() {
            "trusting" => true,
            "honest" => false,
            other => bail!("{name}: '{other}' is neither 'trusting' nor 'honest'"),
        };
        let rule = if name == "shadow_top_k" {
            let k: usize = f[0].trim().parse().map_err(|_| {
                anyhow::anyhow!("shadow_top_k: '{}' is not a positive integer", f[0])
            })?;
            st::require((1..=st::MAX_WINDOW as usize).contains(&k), || {
                format!("shadow_top_k must be in 1..={}, got {k}", st::MAX_WINDOW)
            })?;
            ShadowRule::TopK { k }
        } else {
            ShadowRule::TopP {
                p: st::unit("shadow_top_p p", st::number(name, f[0])?)?,
            }
        };
        Ok(ChainStage::Shadow(ShadowTruncator { rule, trusts_flag }))
    }

    /// The oracle's reading of this stage (a planted stage reads as the stage it imitates).
    pub fn oracle(&self) -> Stage {
        match self {
            ChainStage::Sampler(s) => s.clone(),
            ChainStage::Shadow(ShadowTruncator { rule, .. }) => match rule {
                ShadowRule::TopK { k } => Stage::TopK {
                    k: i32::try_from(*k).unwrap_or(i32::MAX),
                },
                ShadowRule::TopP { p } => Stage::TopP { p: *p, min_keep: 1 },
            },
            ChainStage::ShadowBias(b) => Stage::LogitBias {
                biases: vec![(b.id, b.bias)],
            },
        }
    }

    /// The oracle's stage, if this is one (not a planted stage).
    pub fn sampler(&self) -> Option<&Stage> {
        match self {
            ChainStage::Sampler(s) => Some(s),
            _ => None,
        }
    }

    /// The stage's name in `--stage` syntax.
    pub fn name(&self) -> &'static str {
        match self {
            ChainStage::Sampler(s) => s.name(),
            ChainStage::Shadow(ShadowTruncator {
                rule: ShadowRule::TopK { .. },
                ..
            }) => "shadow_top_k",
            ChainStage::Shadow(ShadowTruncator {
                rule: ShadowRule::TopP { .. },
                ..
            }) => "shadow_top_p",
            ChainStage::ShadowBias(_) => "shadow_logit_bias",
        }
    }

    /// Checks the ids this stage names against the number of logits.
    pub fn check_ids(&self, n_logits: usize) -> Result<()> {
        if let ChainStage::ShadowBias(b) = self {
            st::require((b.id.0 as usize) < n_logits, || {
                format!(
                    "shadow_logit_bias: id {} is out of range (--logits has {n_logits} entries)",
                    b.id
                )
            })?;
        }
        self.oracle()
            .check_ids(n_logits)
            .map_err(anyhow::Error::msg)
    }

    /// Whether the stage reads the `sorted` flag (a planted truncator when it trusts it).
    pub fn reads_sorted_flag(&self) -> bool {
        match self {
            ChainStage::Sampler(s) => s.reads_sorted_flag(),
            ChainStage::Shadow(s) => s.trusts_flag,
            ChainStage::ShadowBias(_) => false,
        }
    }

    /// The part the stage plays in a chain (a planted stage plays its imitated stage's part).
    pub fn role(&self, last: bool) -> Role {
        self.oracle().role(last)
    }

    /// Whether the stage counts the ids accepted before it.
    pub fn reads_history(&self) -> bool {
        self.sampler().is_some_and(Stage::reads_history)
    }

    /// The sampler that runs this stage: llama.cpp's built-in one, the guard, or a shadow.
    pub fn build(&self, n_vocab: i32) -> Result<Sampler> {
        match self {
            ChainStage::Sampler(Stage::SortedGuard) => ledger::sorted_guard(),
            ChainStage::Sampler(s) => SamplerSpec::from(s.clone()).with_vocab(n_vocab).build(),
            ChainStage::Shadow(s) => Sampler::custom(*s),
            ChainStage::ShadowBias(b) => Sampler::custom(*b),
        }
    }
}

/// `--stage` syntax, so every printed chain can be pasted back into the command line.
impl std::fmt::Display for ChainStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChainStage::Sampler(s) => write!(f, "{s}"),
            ChainStage::Shadow(ShadowTruncator { rule, trusts_flag }) => {
                let how = if *trusts_flag { "trusting" } else { "honest" };
                match rule {
                    ShadowRule::TopK { k } => write!(f, "shadow_top_k={k}:{how}"),
                    ShadowRule::TopP { p } => write!(f, "shadow_top_p={p}:{how}"),
                }
            }
            ChainStage::ShadowBias(b) => {
                write!(f, "shadow_logit_bias={}:{}", b.id, st::signed(b.bias))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn planted_stages_print_what_they_parse_from() {
        for text in [
            "shadow_top_p=0.8:trusting",
            "shadow_top_k=2:honest",
            "shadow_logit_bias=3:+6",
            "top_k=4",
            "sorted_guard",
        ] {
            let s = ChainStage::parse(text).unwrap();
            assert_eq!(s.to_string(), text);
            assert_eq!(ChainStage::parse(&s.to_string()).unwrap(), s);
        }
    }

    #[test]
    fn refuses_bad_planted_stages_with_a_reason() {
        for bad in [
            "shadow_top_p=0.8",
            "shadow_top_p=0.8:sometimes",
            "shadow_top_k=0:honest",
            "shadow_logit_bias=-1:+1",
            "frobnicate=1",
        ] {
            assert!(ChainStage::parse(bad).is_err(), "{bad} should be refused");
        }
        let unknown = ChainStage::parse("frobnicate=1").unwrap_err().to_string();
        assert!(unknown.contains("shadow_top_k"), "{unknown}");
        let bias = ChainStage::parse("shadow_logit_bias=8:+1").unwrap();
        assert!(bias.check_ids(8).is_err());
        assert!(bias.check_ids(9).is_ok());
    }

    #[test]
    fn a_planted_truncator_reads_the_flag_only_when_it_trusts_it() {
        let trusting = ChainStage::parse("shadow_top_p=0.8:trusting").unwrap();
        let honest = ChainStage::parse("shadow_top_p=0.8:honest").unwrap();
        assert!(trusting.reads_sorted_flag() && !honest.reads_sorted_flag());
        assert_eq!(trusting.role(true), Role::Truncator);
        assert_eq!(trusting.oracle(), "top_p=0.8".parse::<Stage>().unwrap());
    }
}
