//! Clone equivalence for every built-in sampler that keeps state across steps (F1 §5).
//!
//! Each sampler runs `HISTORY` steps on pseudo-random logits, is cloned, and then the original
//! and the clone get identical inputs for `CONTINUE` more steps: the same logits and the same
//! accepted token (the original's choice where the sampler chooses, a scripted token where it
//! does not). A correct clone produces the same output at every step: the same selected id
//! and bit-identical candidates. The report gives the first step where they part, if any.

use anyhow::{Context, Result};
use oracle::TokenId;
use serde_json::{json, Value};
use subject::{Candidates, DryParams, Sampler, SamplerSpec};

pub const VOCAB: i32 = 32;
pub const HISTORY: usize = 24;
pub const CONTINUE: usize = 24;
const SEED: u32 = 20_261_129;

/// A named recipe for a stateful sampler (or a chain of them).
pub struct Subject {
    pub name: &'static str,
    pub stages: Vec<SamplerSpec>,
}

fn penalties() -> SamplerSpec {
    SamplerSpec::Penalties {
        n_vocab: VOCAB,
        last_n: 8,
        repeat: 1.3,
        freq: 0.25,
        present: 0.5,
    }
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

/// Every stateful sampler in the public API of both builds.
pub fn subjects() -> Vec<Subject> {
    let one = |name, spec| Subject {
        name,
        stages: vec![spec],
    };
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
        one(
            "mirostat_v2",
            SamplerSpec::MirostatV2 {
                seed: SEED,
                tau: 3.0,
                eta: 0.5,
            },
        ),
        one("dist", SamplerSpec::Dist { seed: SEED }),
        one(
            "xtc",
            SamplerSpec::Xtc {
                p: 0.5,
                t: 0.05,
                min_keep: 1,
                seed: SEED,
            },
        ),
        one(
            "adaptive_p",
            SamplerSpec::AdaptiveP {
                target: 0.3,
                decay: 0.9,
                seed: SEED,
            },
        ),
        Subject {
            name: "chain(penalties,dry,top_k,temp,dist)",
            stages: vec![
                penalties(),
                dry(),
                SamplerSpec::TopK { k: 20 },
                SamplerSpec::Temp { t: 0.8 },
                SamplerSpec::Dist { seed: SEED },
            ],
        },
        Subject {
            name: "chain(penalties,mirostat_v2)",
            stages: vec![
                penalties(),
                SamplerSpec::MirostatV2 {
                    seed: SEED,
                    tau: 3.0,
                    eta: 0.5,
                },
            ],
        },
    ]
}

/// A small deterministic generator (so inputs do not depend on any crate's RNG).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) as u32
    }
}

/// The logits of step `t`: values in [-4, 4) on a 1/64 grid.
fn logits(t: usize) -> Vec<f32> {
    let mut g = Lcg(t as u64 + 1);
    (0..VOCAB)
        .map(|_| (g.next() % 512) as f32 / 64.0 - 4.0)
        .collect()
}

/// The token accepted at step `t` when the sampler does not choose: a small alphabet, so
/// repeats (which penalties and DRY react to) are frequent.
fn scripted(t: usize) -> TokenId {
    let mut g = Lcg(1000 + t as u64);
    TokenId((g.next() % 6) as i32)
}

fn build(stages: &[SamplerSpec]) -> Result<Sampler> {
    if stages.len() == 1 {
        return stages[0].build();
    }
    Sampler::chain(
        stages
            .iter()
            .map(SamplerSpec::build)
            .collect::<Result<_>>()?,
    )
}

/// One step: apply to step `t`'s logits; the token to accept is the selection, or the script.
fn step(s: &mut Sampler, t: usize) -> Result<(Candidates, TokenId)> {
    let mut c = Candidates::from_logits(&logits(t));
    s.apply(&mut c)?;
    let token = c.selected_id().unwrap_or_else(|| scripted(t));
    Ok((c, token))
}

/// How a clone compared with its original.
#[derive(Debug, Clone, PartialEq)]
pub enum Equivalence {
    Equivalent,
    Differs { step: usize, detail: String },
}

/// The first way two outputs of the same step differ, in words.
fn difference(a: &Candidates, b: &Candidates) -> Option<String> {
    if a.selected_id() != b.selected_id() {
        let show = |c: &Candidates| {
            c.selected_id()
                .map_or("none".to_string(), |t| t.0.to_string())
        };
        return Some(format!(
            "original selected {}, clone selected {}",
            show(a),
            show(b)
        ));
    }
    if a.len() != b.len() {
        return Some(format!(
            "original kept {} candidates, clone kept {}",
            a.len(),
            b.len()
        ));
    }
    for (x, y) in a.entries.iter().zip(&b.entries) {
        if x.id != y.id || x.logit.to_bits() != y.logit.to_bits() || x.p.to_bits() != y.p.to_bits()
        {
            return Some(format!(
                "id {}: original logit {} p {}, clone id {} logit {} p {}",
                x.id.0, x.logit, x.p, y.id.0, y.logit, y.p
            ));
        }
    }
    None
}

/// Runs the clone-then-continue check on one subject.
pub fn check(subject: &Subject) -> Result<Equivalence> {
    let mut original =
        build(&subject.stages).with_context(|| format!("building {}", subject.name))?;
    for t in 0..HISTORY {
        let (_, token) = step(&mut original, t)?;
        original.accept(token)?;
    }
    let mut clone = original.try_clone()?;
    for k in 0..CONTINUE {
        let t = HISTORY + k;
        let (a, token) = step(&mut original, t)?;
        let (b, _) = step(&mut clone, t)?;
        if let Some(detail) = difference(&a, &b) {
            return Ok(Equivalence::Differs { step: k, detail });
        }
        original.accept(token)?;
        clone.accept(token)?;
    }
    Ok(Equivalence::Equivalent)
}

/// One row per subject.
pub fn table() -> Result<Vec<(&'static str, Equivalence)>> {
    subjects().iter().map(|s| Ok((s.name, check(s)?))).collect()
}

pub fn row_json(name: &str, e: &Equivalence) -> Value {
    match e {
        Equivalence::Equivalent => json!({"sampler": name, "verdict": "equivalent"}),
        Equivalence::Differs { step, detail } => {
            json!({"sampler": name, "verdict": "differs", "first_step": step, "detail": detail})
        }
    }
}

pub fn row_text(name: &str, e: &Equivalence) -> String {
    match e {
        Equivalence::Equivalent => format!("  {name:<38} equivalent for {CONTINUE} steps"),
        Equivalence::Differs { step, detail } => {
            format!("  {name:<38} DIFFERS at continuation step {step}: {detail}")
        }
    }
}
