//! The samplers probed: every built-in sampler that needs no model vocabulary, with the
//! parameter edges F6 audits (`top_k` 0 and negative, `min_keep` above the array's
//! size), plus the planted controls from [`crate::planted`]. Each is built fresh in the child
//! by name, so the parent and the child agree on it without passing anything but the name.
//!
//! Left out: grammar, infill and DRY, which need a model's vocabulary (a model load per probe
//! would dwarf the probes; their edge inputs are a task for a model-backed probe).

use crate::inputs::N_VOCAB;
use crate::planted::{self, Imitates, Planted};
use anyhow::Result;
use oracle::penalty::PenaltyParams;
use oracle::stage::Stage;
use oracle::window::WindowLen;
use oracle::TokenId;
use subject::{Sampler, SamplerSpec};

/// What the oracle can say about a sampler's output.
#[derive(Debug, Clone, PartialEq)]
pub enum Expect {
    /// A deterministic stage: the oracle's pool (and, for greedy, its choice).
    Stage(Stage),
    /// A sampler that draws: its choice must be one of the input's survivors.
    Draw,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Make {
    Spec(SamplerSpec),
    Planted(Planted),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Short name for tables, JSON, verdict rows and `--sampler`.
    pub name: &'static str,
    /// Its parameters as llama.cpp is given them.
    pub params: String,
    pub make: Make,
    pub expect: Expect,
    /// Ids accepted before the apply (penalties count them).
    pub history: Vec<TokenId>,
}

impl Config {
    pub fn build(&self) -> Result<Sampler> {
        let mut s = match &self.make {
            Make::Spec(spec) => spec.build()?,
            Make::Planted(p) => planted::build(*p)?,
        };
        for id in &self.history {
            s.accept(*id)?;
        }
        Ok(s)
    }
}

const SEED: u32 = 1;

fn stage(name: &'static str, text: &str) -> Config {
    let stage: Stage = text.parse().expect("the probe's stage texts parse");
    Config {
        name,
        params: text.to_string(),
        make: Make::Spec(
            SamplerSpec::from(stage.clone())
                .with_vocab(N_VOCAB)
                .with_seed(SEED),
        ),
        expect: Expect::Stage(stage),
        history: Vec::new(),
    }
}

fn draw(name: &'static str, params: &str, spec: SamplerSpec) -> Config {
    Config {
        name,
        params: params.to_string(),
        make: Make::Spec(spec),
        expect: Expect::Draw,
        history: Vec::new(),
    }
}

pub fn subjects() -> Vec<Config> {
    let mut penalties = stage("penalties", "penalties=4:1.5:0.5:0.5");
    penalties.history = [1, 1, 2].map(TokenId).to_vec();
    penalties.params.push_str(" after accepting 1,1,2");
    debug_assert!(matches!(
        penalties.expect,
        Expect::Stage(Stage::Penalties {
            last_n: WindowLen(4),
            params: PenaltyParams { .. }
        })
    ));
    vec![
        stage("top_k", "top_k=2"),
        stage("top_k-zero", "top_k=0"),
        stage("top_k-negative", "top_k=-1"),
        stage("top_p", "top_p=0.5"),
        stage("top_p-min_keep", "top_p=0.5:8"),
        stage("min_p", "min_p=0.3"),
        stage("min_p-min_keep", "min_p=0.3:8"),
        stage("typical", "typical=0.5"),
        stage("typical-min_keep", "typical=0.5:8"),
        stage("temp", "temp=0.5"),
        stage("temp-zero", "temp=0"),
        stage("temp_ext", "temp_ext=1:0.5:1"),
        stage("xtc", "xtc=1:0.1"),
        stage("top_n_sigma", "top_n_sigma=1"),
        stage("logit_bias", "logit_bias=1:0.5"),
        penalties,
        stage("greedy", "greedy"),
        draw(
            "dist",
            "seed 1",
            SamplerSpec::from(Stage::Dist { seed: SEED }),
        ),
        draw(
            "mirostat",
            "tau 5, eta 0.1, m 8, seed 1",
            SamplerSpec::Mirostat {
                n_vocab: N_VOCAB,
                seed: SEED,
                tau: 5.0,
                eta: 0.1,
                m: N_VOCAB,
            },
        ),
        draw(
            "mirostat_v2",
            "tau 5, eta 0.1, seed 1",
            SamplerSpec::MirostatV2 {
                seed: SEED,
                tau: 5.0,
                eta: 0.1,
            },
        ),
        draw(
            "adaptive_p",
            "target 0.3, decay 0.9, seed 1",
            SamplerSpec::AdaptiveP {
                target: 0.3,
                decay: 0.9,
                seed: SEED,
            },
        ),
    ]
}

/// The planted controls, each judged as the sampler it imitates.
pub fn controls() -> Vec<Config> {
    (Planted::ALL.iter())
        .map(|&p| Config {
            name: p.name(),
            params: p.what().to_string(),
            make: Make::Planted(p),
            expect: match p.imitates() {
                Imitates::TopK2 => Expect::Stage(Stage::TopK { k: 2 }),
                Imitates::Greedy => Expect::Stage(Stage::Greedy),
                Imitates::Draw => Expect::Draw,
            },
            history: Vec::new(),
        })
        .collect()
}

pub fn by_name(name: &str) -> Option<Config> {
    subjects()
        .into_iter()
        .chain(controls())
        .find(|c| c.name == name)
}
