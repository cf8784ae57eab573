//! The stateful samplers whose clones are checked (every one in the public API of both builds,
//! and two chains of them) and the planted samplers the controls run instead.

use super::{SEED, VOCAB};
use crate::planted::{Tally, TallyCopy};
use anyhow::{Context, Result};
use oracle::penalty::PenaltyParams;
use oracle::stage::Stage;
use oracle::window::WindowLen;
use subject::{DryParams, Sampler, SamplerSpec};

/// A named recipe for a stateful sampler (or a chain of them).
pub struct SamplerRecipe {
    pub name: &'static str,
    pub(super) build: Box<dyn Fn() -> Result<Sampler>>,
}

impl SamplerRecipe {
    /// The sampler `stages` make: the one stage, or a chain of them.
    pub fn from_specs(name: &'static str, stages: Vec<SamplerSpec>) -> SamplerRecipe {
        SamplerRecipe {
            name,
            build: Box::new(move || {
                if stages.len() == 1 {
                    return stages[0].build();
                }
                let members = stages.iter().map(SamplerSpec::build);
                Sampler::chain(members.collect::<Result<_>>()?)
            }),
        }
    }

    /// A recipe `build` makes afresh on every call.
    pub fn new(name: &'static str, build: impl Fn() -> Result<Sampler> + 'static) -> SamplerRecipe {
        SamplerRecipe {
            name,
            build: Box::new(build),
        }
    }

    pub fn build(&self) -> Result<Sampler> {
        (self.build)().with_context(|| format!("building {}", self.name))
    }
}

fn penalties() -> SamplerSpec {
    penalties_over(WindowLen(8))
}

/// The penalties stage of [`subjects`] with a window of `last_n` tokens.
pub fn penalties_over(last_n: WindowLen) -> SamplerSpec {
    let params = PenaltyParams {
        repeat: 1.3,
        freq: 0.25,
        present: 0.5,
    };
    SamplerSpec::penalties(VOCAB, last_n, params)
}

fn dry() -> SamplerSpec {
    SamplerSpec::Dry(DryParams {
        multiplier: 0.8,
        base: 1.75,
        allowed_length: 2,
        last_n: 16,
        n_ctx_train: 4096,
    })
}

fn mirostat_v2() -> SamplerSpec {
    SamplerSpec::MirostatV2 {
        seed: SEED,
        tau: 3.0,
        eta: 0.5,
    }
}

/// Every stateful sampler in the public API of both builds, and two chains of them.
pub fn subjects() -> Vec<SamplerRecipe> {
    let one = |name, spec| SamplerRecipe::from_specs(name, vec![spec]);
    vec![
        one("penalties", penalties()),
        one("dry", dry()),
        one(
            "mirostat",
            SamplerSpec::Mirostat {
                n_vocab: VOCAB,
                seed: SEED,
                tau: 3.0,
                eta: 0.5,
                m: VOCAB,
            },
        ),
        one("mirostat_v2", mirostat_v2()),
        one("dist", SamplerSpec::Dist { seed: SEED }),
        one(
            "xtc",
            SamplerSpec::from(Stage::Xtc {
                probability: 0.5,
                threshold: 0.05,
                min_keep: 1,
            })
            .with_seed(SEED),
        ),
        one(
            "adaptive_p",
            SamplerSpec::AdaptiveP {
                target: 0.3,
                decay: 0.9,
                seed: SEED,
            },
        ),
        SamplerRecipe::from_specs(
            "chain(penalties,dry,top_k,temp,dist)",
            vec![
                penalties(),
                dry(),
                Stage::TopK { k: 20 }.into(),
                Stage::Temp { t: 0.8 }.into(),
                SamplerSpec::Dist { seed: SEED },
            ],
        ),
        SamplerRecipe::from_specs(
            "chain(penalties,mirostat_v2)",
            vec![penalties(), mirostat_v2()],
        ),
    ]
}

/// The planted controls: a clone that forgets its state, one that keeps it.
pub fn planted() -> [SamplerRecipe; 2] {
    let tally = |name, complete| SamplerRecipe {
        name,
        build: Box::new(move || Sampler::custom(Tally::new(VOCAB as usize, complete))),
    };
    [
        tally("planted-tally-forgetful-clone", false),
        tally("planted-tally-complete-clone", true),
    ]
}

/// The planted controls of a state copy: one that copies nothing, one that copies completely,
/// and one that adds the source's counts to its own (complete onto a fresh sampler, leaky
/// onto a used one).
pub fn planted_copy() -> [SamplerRecipe; 3] {
    let tally = |name, copy| SamplerRecipe {
        name,
        build: Box::new(move || Sampler::custom(Tally::with_copy(VOCAB as usize, copy))),
    };
    [
        tally("planted-tally-forgetful-copy", TallyCopy::Nothing),
        tally("planted-tally-complete-copy", TallyCopy::Complete),
        tally("planted-tally-leaky-copy", TallyCopy::Adds),
    ]
}
