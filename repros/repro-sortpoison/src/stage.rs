//! One stage of an audited chain: a llama.cpp sampler ([`oracle::stage::Stage`]), one of the
//! suite's own stages ([`oracle::stage::SuiteStage`]: ledger's guard), or one of the planted
//! Rust stages the controls use. The oracle's types own every parameter; this module only
//! adds the planted ones.
//!
//! The `--stage` syntax is the oracle's table ([`oracle::stage::STAGES`]), plus the planted
//! stages ([`PLANTED_STAGES`]), which can be named on the command line to rerun a control. The
//! oracle reads each planted stage as the stage it imitates.

use crate::planted::{DistRule, PlantedBias, PlantedDist, PlantedRule, PlantedTruncator};
use anyhow::{anyhow, bail, Context, Result};
use oracle::stage::{self as st, table::Parser, Role, Stage, SuiteStage};
use oracle::truncation::{Link, Pool, Step};
use oracle::TokenId;
use serde::{Serialize, Serializer};
use subject::offered;
use subject::{NotOffered, Sampler, SamplerSpec};

/// The planted stages: syntax (`NAME=...`) and what they are (for `--help`).
pub const PLANTED_STAGES: &[(&str, &str)] = &[
    (
        "shadow_top_k=K:trusting|honest",
        "a Rust top_k: trusting relies on the sorted flag, honest always sorts",
    ),
    ("shadow_top_p=P:trusting|honest", "the same for top_p"),
    (
        "shadow_logit_bias=ID:BIAS",
        "a Rust logit_bias that leaves the flag alone",
    ),
    (
        "shadow_dist=SEED:exact|trusting|unnormalized|drops-last",
        "a Rust dist: exact, taking data[0] as the maximum when flagged sorted, or skipping renormalization",
    ),
];

/// The planted stages' names, beside the oracle's table.
pub fn planted_names() -> Vec<&'static str> {
    PLANTED_STAGES
        .iter()
        .map(|s| st::split_name(s.0).0)
        .collect()
}

/// The `--stage` help text: the oracle's table, then the planted stages.
pub fn help() -> String {
    let planted = PLANTED_STAGES
        .iter()
        .map(|(syntax, what)| format!("{syntax} ({what})"));
    format!(
        "One chain stage, repeated in chain order: {}. Planted controls: {}",
        st::table::help(),
        crate::text::join(planted, ", ")
    )
}

/// A stage in an audited chain.
#[derive(Debug, Clone, PartialEq)]
pub enum ChainStage {
    /// llama.cpp's built-in sampler.
    Sampler(Stage),
    /// One of the suite's own stages (`ledger::sorted_guard`).
    Suite(SuiteStage),
    /// A planted Rust truncator (a control, not a subject).
    PlantedTruncator(PlantedTruncator),
    /// A planted Rust logit_bias (a control, not a subject).
    PlantedBias(PlantedBias),
    /// A planted Rust dist (a control, not a subject).
    PlantedDist(PlantedDist),
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
        if !planted_names().contains(&name) {
            let row = st::lookup(name).map_err(|e| match e.0.starts_with("unknown stage") {
                true => anyhow!(
                    "unknown stage '{name}' (known: {}, {})",
                    st::table::names().join(", "),
                    planted_names().join(", ")
                ),
                false => anyhow!(e),
            })?;
            return Ok(match row.parser {
                Parser::Llama(parse) => ChainStage::Sampler(parse(args)?),
                Parser::Suite(_) => ChainStage::Suite(text.parse::<SuiteStage>()?),
            });
        }
        st::require(!args.is_empty(), || {
            format!("stage '{name}' needs a value: {name}=...")
        })?;
        let f = st::fields(name, args, 2, 2)?;
        let (value, how) = (f[0], f[1].trim());
        let trusts_flag = || match how {
            "trusting" => Ok(true),
            "honest" => Ok(false),
            other => Err(anyhow!(
                "{name}: '{other}' is neither 'trusting' nor 'honest'"
            )),
        };
        Ok(match name {
            "shadow_logit_bias" => ChainStage::PlantedBias(PlantedBias {
                id: st::token_id(name, value)?,
                bias: st::bias(name, f[1])?,
            }),
            "shadow_dist" => {
                let Stage::Dist { seed } = format!("dist={value}").parse::<Stage>()? else {
                    bail!("shadow_dist: '{value}' is not a seed");
                };
                let rule =
                    (DistRule::ALL.into_iter().find(|r| r.as_str() == how)).with_context(|| {
                        format!(
                            "shadow_dist: '{how}' is not one of exact, trusting, unnormalized, \
                             drops-last"
                        )
                    })?;
                ChainStage::PlantedDist(PlantedDist { seed, rule })
            }
            "shadow_top_k" => {
                let trusts_flag = trusts_flag()?;
                let k: usize = (value.trim().parse())
                    .map_err(|_| anyhow!("shadow_top_k: '{value}' is not a positive integer"))?;
                st::require((1..=st::MAX_WINDOW as usize).contains(&k), || {
                    format!("shadow_top_k must be in 1..={}, got {k}", st::MAX_WINDOW)
                })?;
                let rule = PlantedRule::TopK { k };
                ChainStage::PlantedTruncator(PlantedTruncator { rule, trusts_flag })
            }
            _ => {
                let trusts_flag = trusts_flag()?;
                let p = st::unit("shadow_top_p p", st::number(name, value)?)?;
                let rule = PlantedRule::TopP { p };
                ChainStage::PlantedTruncator(PlantedTruncator { rule, trusts_flag })
            }
        })
    }

    /// The oracle's reading of this stage as a llama.cpp sampler (a planted stage reads as
    /// the stage it imitates); `None` for the suite's own stages.
    pub fn oracle(&self) -> Option<Stage> {
        match self {
            ChainStage::Sampler(s) => Some(s.clone()),
            ChainStage::Suite(_) => None,
            ChainStage::PlantedTruncator(PlantedTruncator { rule, .. }) => Some(match rule {
                PlantedRule::TopK { k } => Stage::TopK {
                    k: i32::try_from(*k).unwrap_or(i32::MAX),
                },
                PlantedRule::TopP { p } => Stage::TopP { p: *p, min_keep: 1 },
            }),
            ChainStage::PlantedBias(b) => Some(Stage::LogitBias {
                biases: vec![(b.id, b.bias)],
            }),
            ChainStage::PlantedDist(d) => Some(Stage::Dist { seed: d.seed }),
        }
    }

    /// The llama.cpp sampler, if this is one (not the suite's or a planted stage).
    pub fn sampler(&self) -> Option<&Stage> {
        match self {
            ChainStage::Sampler(s) => Some(s),
            ChainStage::Suite(_)
            | ChainStage::PlantedTruncator(_)
            | ChainStage::PlantedBias(_)
            | ChainStage::PlantedDist(_) => None,
        }
    }

    /// Whether the stage draws (its oracle is a distribution): dist, or a planted one.
    pub fn draws(&self) -> bool {
        self.oracle().is_some_and(|s| s.draws())
    }

    /// The stage's name in `--stage` syntax.
    pub fn name(&self) -> &'static str {
        match self {
            ChainStage::Sampler(s) => s.name(),
            ChainStage::PlantedTruncator(t) => match t.rule {
                PlantedRule::TopK { .. } => "shadow_top_k",
                PlantedRule::TopP { .. } => "shadow_top_p",
            },
            ChainStage::PlantedBias(_) => "shadow_logit_bias",
            ChainStage::PlantedDist(_) => "shadow_dist",
            ChainStage::Suite(s) => s.name(),
        }
    }

    /// Checks the ids this stage names against the number of logits.
    pub fn check_ids(&self, n_logits: usize) -> Result<()> {
        if let ChainStage::PlantedBias(b) = self {
            st::require((b.id.0 as usize) < n_logits, || {
                format!(
                    "shadow_logit_bias: id {} is out of range (--logits has {n_logits} entries)",
                    b.id
                )
            })?;
        }
        match self.oracle() {
            Some(s) => s.check_ids(n_logits).map_err(anyhow::Error::msg),
            None => Ok(()),
        }
    }

    /// Whether the stage reads the `sorted` flag (a planted truncator when it trusts it).
    pub fn reads_sorted_flag(&self) -> bool {
        match self {
            ChainStage::Sampler(s) => s.reads_sorted_flag(),
            ChainStage::PlantedTruncator(s) => s.trusts_flag,
            ChainStage::PlantedDist(d) => d.rule == DistRule::TrustsFlag,
            ChainStage::PlantedBias(_) | ChainStage::Suite(_) => false,
        }
    }

    /// The part the stage plays in a chain (a planted stage plays its imitated stage's part).
    pub fn role(&self, last: bool) -> Role {
        match (self, self.oracle()) {
            (ChainStage::Suite(s), _) => s.role(),
            (_, Some(s)) => s.role(last),
            (_, None) => unreachable!("only the suite's stages have no llama.cpp reading"),
        }
    }

    /// Whether the stage counts the ids accepted before it.
    pub fn reads_history(&self) -> bool {
        self.sampler().is_some_and(Stage::reads_history)
    }

    /// Why the linked build cannot make this stage, if it cannot: a built-in its C API lacks
    /// (the spec says so without building), or a stage written in Rust (planted, or the
    /// guard) where the C API has no way to plug one in (building one says so).
    pub fn not_offered(&self, n_vocab: i32) -> Result<Option<NotOffered>> {
        match self {
            ChainStage::Sampler(s) => Ok(SamplerSpec::from(s.clone())
                .with_vocab(n_vocab)
                .not_offered()),
            _ => Ok(offered(self.build(n_vocab))?.err()),
        }
    }

    /// The sampler that runs this stage: llama.cpp's built-in one, the guard, or a planted one.
    pub fn build(&self, n_vocab: i32) -> Result<Sampler> {
        match self {
            ChainStage::Suite(SuiteStage::SortedGuard) => ledger::sorted_guard(),
            ChainStage::Sampler(s) => SamplerSpec::from(s.clone()).with_vocab(n_vocab).build(),
            ChainStage::PlantedTruncator(s) => Sampler::custom(*s),
            ChainStage::PlantedBias(b) => Sampler::custom(*b),
            ChainStage::PlantedDist(d) => Sampler::custom(d.sampler()),
        }
    }
}

/// The oracle follows a chain stage as the stage it reads as.
impl Link for ChainStage {
    fn step(&self, pool: &Pool, history: &[TokenId]) -> Step {
        match (self, self.oracle()) {
            (ChainStage::Suite(s), _) => s.step(pool, history),
            (_, Some(s)) => s.step(pool, history),
            (_, None) => unreachable!("only the suite's stages have no llama.cpp reading"),
        }
    }
}

/// As its `--stage` text.
impl Serialize for ChainStage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// `--stage` syntax, so every printed chain can be pasted back into the command line.
impl std::fmt::Display for ChainStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChainStage::Sampler(s) => write!(f, "{s}"),
            ChainStage::Suite(s) => write!(f, "{s}"),
            ChainStage::PlantedTruncator(PlantedTruncator { rule, trusts_flag }) => {
                let how = if *trusts_flag { "trusting" } else { "honest" };
                match rule {
                    PlantedRule::TopK { k } => write!(f, "shadow_top_k={k}:{how}"),
                    PlantedRule::TopP { p } => write!(f, "shadow_top_p={p}:{how}"),
                }
            }
            ChainStage::PlantedBias(b) => {
                write!(f, "shadow_logit_bias={}:{}", b.id, st::signed(b.bias))
            }
            ChainStage::PlantedDist(d) => write!(f, "shadow_dist={}:{}", d.seed, d.rule.as_str()),
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
            "shadow_dist=1:exact",
            "shadow_dist=7:trusting",
            "shadow_dist=0:unnormalized",
            "shadow_dist=2:drops-last",
            "top_k=4",
            "dist=3",
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
            "shadow_dist=1",
            "shadow_dist=1:sometimes",
            "shadow_dist=4294967295:exact",
            "sorted_guard=1",
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
        assert_eq!(trusting.oracle(), "top_p=0.8".parse::<Stage>().ok());
        let guard = ChainStage::parse("sorted_guard").unwrap();
        assert_eq!(guard, ChainStage::Suite(SuiteStage::SortedGuard));
        assert_eq!((guard.oracle(), guard.role(false)), (None, Role::Guard));
        assert!(ChainStage::parse("dist=1").unwrap().draws());
        assert!(ChainStage::parse("shadow_dist=1:exact").unwrap().draws());
        assert!(!trusting.draws());
    }
}
