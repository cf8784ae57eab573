//! The chains F8 runs, registered in PREREG before the first run: each backend-capable stage
//! alone, chains that run wholly in the graph, chains whose graph prefix hands over to a CPU
//! tail, and the planted controls.

use crate::planted::PlantedMinP;
use anyhow::{Context, Result};
use oracle::stage::Stage;
use subject::{Sampler, SamplerSpec};

/// What a case's chain is made of.
#[derive(Debug, Clone)]
pub enum Links {
    /// llama.cpp's own stages, in order.
    Stages(Vec<Stage>),
    /// One planted stage (see [`crate::planted`]), judged against its oracle stage.
    Planted(PlantedMinP),
}

/// One chain and how closely its two paths must agree.
#[derive(Debug, Clone)]
pub struct Case {
    /// The row's name: `ingraph-<name>`.
    pub name: String,
    pub links: Links,
    /// How many units in the last place a survivor's logit may differ between the graph and
    /// the CPU: 0 where both paths copy, mask or add exactly; 1 where the graph multiplies by
    /// `fl(1/t)` and the CPU divides by `t` (both faithful, so at most one ulp apart).
    pub ulps: u32,
}

impl Case {
    pub fn stages(name: &str, text: &str) -> Case {
        let stages = parse(text).expect("registered cases parse");
        Case {
            name: name.to_string(),
            ulps: u32::from(stages.iter().any(needs_ulp)),
            links: Links::Stages(stages),
        }
    }

    /// A case from the command line: `--stage` texts in order.
    pub fn from_cli(texts: &[String]) -> Result<Case> {
        let stages = texts
            .iter()
            .map(|t| {
                t.parse::<Stage>()
                    .map_err(|e| anyhow::anyhow!("--stage {t}: {}", e.0))
            })
            .collect::<Result<Vec<_>>>()?;
        anyhow::ensure!(!stages.is_empty(), "give at least one --stage");
        Ok(Case {
            name: texts.join(","),
            ulps: u32::from(stages.iter().any(needs_ulp)),
            links: Links::Stages(stages),
        })
    }

    /// The oracle's description of the chain.
    pub fn oracle_stages(&self) -> Vec<Stage> {
        match &self.links {
            Links::Stages(s) => s.clone(),
            Links::Planted(p) => vec![p.stage()],
        }
    }

    /// A fresh chain of this case for a vocabulary of `n_vocab` ids.
    pub fn build(&self, n_vocab: i32) -> Result<Sampler> {
        let members = match &self.links {
            Links::Stages(stages) => stages
                .iter()
                .map(|s| SamplerSpec::from(s.clone()).with_vocab(n_vocab).build())
                .collect::<Result<Vec<_>>>()
                .with_context(|| format!("building case {}", self.name))?,
            Links::Planted(p) => vec![p.build()?],
        };
        Sampler::chain(members)
    }

    /// The chain's text, as `--stage` takes it.
    pub fn describe(&self) -> String {
        match &self.links {
            Links::Stages(s) => s
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(","),
            Links::Planted(p) => format!("{} ({})", p.name(), p.stage()),
        }
    }

    /// Whether the chain ends by choosing a token.
    pub fn selects(&self) -> bool {
        self.oracle_stages()
            .last()
            .is_some_and(|s| matches!(s, Stage::Greedy | Stage::Dist { .. }))
    }

    /// Whether the choice is a draw (then the two paths' tokens are compared as a note).
    pub fn draws(&self) -> bool {
        self.oracle_stages()
            .iter()
            .any(|s| matches!(s, Stage::Dist { .. }))
    }
}

/// A temperature whose reciprocal is not exact in f32 (see [`Case::ulps`]).
fn needs_ulp(s: &Stage) -> bool {
    let inexact = |t: f32| t > 0.0 && !is_power_of_two(t);
    match s {
        Stage::Temp { t } => inexact(*t),
        Stage::TempExt { .. } => true,
        _ => false,
    }
}

fn is_power_of_two(t: f32) -> bool {
    t > 0.0 && t.to_bits() & 0x007f_ffff == 0
}

fn parse(text: &str) -> Result<Vec<Stage>> {
    text.split(',')
        .map(|t| {
            t.parse::<Stage>()
                .map_err(|e| anyhow::anyhow!("{t}: {}", e.0))
        })
        .collect()
}

/// The min_keep that the min_keep cases and the planted controls use, and their p values:
/// small enough that the stage alone keeps fewer than `MIN_KEEP` entries on the prompt.
pub const MIN_KEEP: usize = 8;
pub const MIN_KEEP_TOP_P: f32 = 0.1;
pub const MIN_KEEP_MIN_P: f32 = 0.5;

/// Every registered case, in report order.
pub fn registered() -> Vec<Case> {
    vec![
        Case::stages("top_k", "top_k=40"),
        Case::stages("top_p", "top_p=0.9"),
        Case::stages("top_p-min_keep", "top_p=0.1:8"),
        Case::stages("min_p", "min_p=0.05"),
        Case::stages("min_p-min_keep", "min_p=0.5:8"),
        Case::stages("temp-0.7", "temp=0.7"),
        Case::stages("temp-2", "temp=2"),
        Case::stages("temp-0", "temp=0"),
        Case::stages("temp_ext", "temp_ext=0.8:0.5:1"),
        Case::stages("logit_bias", "logit_bias=100:+30/200:-30"),
        Case::stages("greedy", "greedy"),
        Case::stages("top_k-greedy", "top_k=40,greedy"),
        Case::stages(
            "chain-truncate-temp-greedy",
            "top_k=40,top_p=0.9,min_p=0.05,temp=0.7,greedy",
        ),
        Case::stages(
            "chain-bias-top_k-dist",
            "logit_bias=100:+30,top_k=8,dist=1234",
        ),
        Case::stages("tail-typical-greedy", "top_k=40,typical=0.9,greedy"),
        Case::stages("tail-top_n_sigma-dist", "top_k=40,top_n_sigma=1,dist=1234"),
    ]
}

/// The planted controls: (exact, ignores min_keep in the graph).
pub fn planted() -> [Case; 2] {
    let case = |keeps: bool| {
        let p = PlantedMinP::new(MIN_KEEP_MIN_P, MIN_KEEP, keeps);
        Case {
            name: p.name().to_string(),
            links: Links::Planted(p),
            ulps: 0,
        }
    };
    [case(true), case(false)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_cases_build_and_name_uniquely() {
        let cases = registered();
        let mut names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), cases.len());
        assert!(cases.iter().all(|c| !c.oracle_stages().is_empty()));
    }

    #[test]
    fn one_ulp_only_where_a_reciprocal_is_inexact() {
        assert!(needs_ulp(&Stage::Temp { t: 0.7 }));
        assert!(!needs_ulp(&Stage::Temp { t: 2.0 }));
        assert!(!needs_ulp(&Stage::Temp { t: 0.5 }));
        assert!(!needs_ulp(&Stage::TopK { k: 4 }));
    }
}
