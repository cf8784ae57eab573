//! What the oracle says a configuration may draw: the survivor set, as tie classes, and the
//! renormalized probability of each survivor.
//!
//! The semantics are the seam's (`engine::Sampling`): its stages in order (temperature, then
//! top-k, then top-p on what top-k left, renormalized, then min-p), then one draw from the
//! softmax of what is left. Each stage is `oracle::truncation`'s. Equal logits cut by a stage
//! form a *class*: which members survive depends on a tie-break, how many does not (every
//! stage modelled here treats equal logits alike), so a draw is judged against the class and
//! its kept count.

use anyhow::{bail, ensure, Result};
use detector::{Class, Expectation};
use engine::Sampling;
use oracle::stage::Stage;
use oracle::truncation::{compose, Entry, Pool};
use oracle::TokenId;
use std::collections::HashMap;

/// Every probability is a multiple of 2^-24 that f32 holds exactly, so sums of them in f32
/// are exact and a comparison with a threshold that f32 holds is decided exactly.
fn dyadic(probabilities: &[f64]) -> bool {
    probabilities.iter().all(|&p| {
        let scaled = p * (1u64 << 24) as f64;
        scaled.fract() == 0.0 && (p as f32) as f64 == p
    })
}

/// A stage whose classes below are the oracle's answer: one that treats equal logits alike
/// and changes no logit but by a temperature. The planted samplers state the same four.
#[derive(Debug, Clone, Copy)]
pub enum Modelled {
    Temp { t: f32 },
    TopK { k: i32 },
    TopP { p: f32, min_keep: usize },
    MinP { p: f32, min_keep: usize },
}

pub fn modelled(stage: &Stage) -> Result<Modelled> {
    Ok(match *stage {
        Stage::Temp { t } => Modelled::Temp { t },
        Stage::TopK { k } => Modelled::TopK { k },
        Stage::TopP { p, min_keep } => Modelled::TopP { p, min_keep },
        Stage::MinP { p, min_keep } => Modelled::MinP { p, min_keep },
        Stage::Typical { .. }
        | Stage::TempExt { .. }
        | Stage::Xtc { .. }
        | Stage::TopNSigma { .. }
        | Stage::LogitBias { .. }
        | Stage::Penalties { .. }
        | Stage::Greedy
        | Stage::Dist { .. } => bail!(
            "F7's expectation models temp, top_k, top_p and min_p before a draw, not {}",
            stage.name()
        ),
    })
}

pub fn of(logits: &[f32], s: &Sampling) -> Result<Expectation> {
    ensure!(
        logits.iter().all(|x| !x.is_nan() && *x != f32::INFINITY),
        "logits must be finite or -inf"
    );
    ensure!(
        logits.iter().any(|x| x.is_finite()),
        "at least one logit must be finite"
    );
    let stages = s.stages();
    stages.iter().try_for_each(|s| modelled(s).map(drop))?;
    let start = Pool::from_logits(logits);
    let comp = compose(stages, &start, &[]);
    // A margin edge (not a tie) is decided when the pool it was decided on is dyadic.
    let undecided = (comp.edges.iter())
        .filter(|(_, edge)| !edge.is_tie())
        .find(|(i, _)| {
            let before = compose(&stages[..*i], &start, &[]).pool;
            let finite = (before.probabilities().into_iter())
                .zip(before.entries())
                .filter(|(_, e)| e.logit > f32::NEG_INFINITY);
            !dyadic(&finite.map(|(p, _)| p).collect::<Vec<f64>>())
        })
        .map(|(_, edge)| edge.0.clone());
    // Classes: group the tempered pool by logit; keep the groups that lost no member or
    // some, and count what survived.
    let temps: Vec<Stage> = (stages.iter())
        .filter(|s| matches!(s, Stage::Temp { .. }))
        .cloned()
        .collect();
    let tempered = compose(&temps, &start, &[]).pool;
    let p_of: HashMap<TokenId, f64> = (comp.pool.entries().iter())
        .zip(comp.pool.probabilities())
        .filter(|(e, _)| e.logit > f32::NEG_INFINITY)
        .map(|(e, p)| (e.id, p))
        .collect();
    let finite: Vec<&Entry> = (tempered.entries().iter())
        .filter(|e| e.logit > f32::NEG_INFINITY)
        .collect();
    let classes = (finite.chunk_by(|a, b| a.logit == b.logit))
        .map(|group| {
            let mut ids: Vec<TokenId> = group.iter().map(|e| e.id).collect();
            ids.sort();
            let kept = ids.iter().filter(|id| p_of.contains_key(id)).count();
            let p_each = ids.iter().find_map(|id| p_of.get(id).copied());
            Class {
                ids,
                kept,
                p_each: p_each.unwrap_or(0.0),
            }
        })
        .filter(|c| c.kept > 0)
        .collect();
    Ok(Expectation { classes, undecided })
}
