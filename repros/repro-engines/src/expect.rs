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
use engine::Sampling;
use oracle::stage::Stage;
use oracle::truncation::{compose, Pool};
use oracle::TokenId;
use serde_json::{json, Value};
use std::collections::BTreeSet;

/// Ids of equal (tempered) logit, of which `kept` survive, each with probability `p_each`.
#[derive(Debug, Clone, PartialEq)]
pub struct Class {
    pub ids: Vec<TokenId>,
    pub kept: usize,
    pub p_each: f64,
}

impl Class {
    pub fn is_split(&self) -> bool {
        self.kept < self.ids.len()
    }
}

/// Most classes a report lists.
pub const JSON_CLASSES: usize = 64;

#[derive(Debug, Clone, PartialEq)]
pub struct Expectation {
    /// Highest probability first, ids ascending within a class.
    pub classes: Vec<Class>,
    /// Why the survivor set is not decided in f32 (a rounding margin), if it is not.
    pub undecided: Option<String>,
}

/// Every probability is a multiple of 2^-24 that f32 holds exactly, so sums of them in f32
/// are exact and a comparison with a threshold that f32 holds is decided exactly.
fn dyadic(probabilities: &[f64]) -> bool {
    probabilities.iter().all(|&p| {
        let scaled = p * (1u64 << 24) as f64;
        scaled.fract() == 0.0 && (p as f32) as f64 == p
    })
}

/// Whether the classes below are the oracle's answer for `stage`: true for the stages that
/// treat equal logits alike and change no logit but by a temperature.
fn modelled(stage: &Stage) -> Result<()> {
    match stage {
        Stage::Temp { .. } | Stage::TopK { .. } | Stage::TopP { .. } | Stage::MinP { .. } => Ok(()),
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
    }
}

impl Expectation {
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
        stages.iter().try_for_each(modelled)?;
        let start = Pool::from_logits(logits);
        let comp = compose(stages, &start, &[]);
        // A margin edge (not a tie) is decided when the pool it was decided on is dyadic.
        let mut undecided = None;
        for (i, edge) in &comp.edges {
            if edge.is_tie() {
                continue;
            }
            let before = compose(&stages[..*i], &start, &[]).pool;
            let finite: Vec<f64> = before
                .probabilities()
                .into_iter()
                .zip(before.entries())
                .filter(|(_, e)| e.logit > f32::NEG_INFINITY)
                .map(|(p, _)| p)
                .collect();
            if !dyadic(&finite) {
                undecided = Some(edge.0.clone());
                break;
            }
        }
        // Classes: group the tempered pool by logit; keep the groups that lost no member or
        // some, and count what survived.
        let temps: Vec<Stage> = stages
            .iter()
            .filter(|s| matches!(s, Stage::Temp { .. }))
            .cloned()
            .collect();
        let tempered = compose(&temps, &start, &[]).pool;
        let kept: Vec<(TokenId, f64)> = comp
            .pool
            .entries()
            .iter()
            .zip(comp.pool.probabilities())
            .filter(|(e, _)| e.logit > f32::NEG_INFINITY)
            .map(|(e, p)| (e.id, p))
            .collect();
        let p_of: std::collections::HashMap<TokenId, f64> = kept.iter().copied().collect();
        let mut classes: Vec<Class> = Vec::new();
        let mut last_logit = None;
        for e in tempered.entries() {
            if e.logit == f32::NEG_INFINITY {
                continue;
            }
            match classes.last_mut() {
                Some(last) if last_logit == Some(e.logit) => last.ids.push(e.id),
                _ => classes.push(Class {
                    ids: vec![e.id],
                    kept: 0,
                    p_each: 0.0,
                }),
            }
            last_logit = Some(e.logit);
        }
        for c in &mut classes {
            c.ids.sort();
            c.kept = c.ids.iter().filter(|id| p_of.contains_key(id)).count();
            c.p_each = c
                .ids
                .iter()
                .find_map(|id| p_of.get(id).copied())
                .unwrap_or(0.0);
        }
        classes.retain(|c| c.kept > 0);
        Ok(Expectation { classes, undecided })
    }

    /// Every id that may be drawn (all members of every class with a survivor).
    pub fn possible(&self) -> BTreeSet<TokenId> {
        self.classes
            .iter()
            .flat_map(|c| c.ids.iter().copied())
            .collect()
    }

    /// Number of survivors.
    pub fn kept(&self) -> usize {
        self.classes.iter().map(|c| c.kept).sum()
    }

    /// The first [`JSON_CLASSES`] classes (highest probability first) and how many there are:
    /// a 262,144-entry `all` has as many classes, which `--json` would otherwise print.
    pub fn to_json(&self) -> Value {
        json!({
            "survivors": self.kept(),
            "classes_total": self.classes.len(),
            "classes": self.classes.iter().take(JSON_CLASSES).map(|c| json!({
                "ids": c.ids.iter().map(|i| i.0).collect::<Vec<_>>(),
                "kept": c.kept,
                "p_each": c.p_each,
            })).collect::<Vec<_>>(),
            "undecided": self.undecided,
        })
    }

    /// One line: the classes, at most `max` of them, and how many more.
    pub fn describe(&self, max: usize) -> String {
        let mut parts: Vec<String> = self
            .classes
            .iter()
            .take(max)
            .map(|c| {
                let ids: Vec<String> = c.ids.iter().map(|i| i.0.to_string()).collect();
                if c.is_split() {
                    format!("{} of {{{}}} at {:.6}", c.kept, ids.join(","), c.p_each)
                } else {
                    format!("{{{}}} at {:.6}", ids.join(","), c.p_each)
                }
            })
            .collect();
        if self.classes.len() > max {
            parts.push(format!("{} more classes", self.classes.len() - max));
        }
        format!("{} survivors: {}", self.kept(), parts.join(", "))
    }
}
