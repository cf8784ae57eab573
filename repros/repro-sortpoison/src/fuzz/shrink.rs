//! The shrinker: an unsound chain made smaller and rounder (fewer stages, fewer logits,
//! rounder numbers, shorter history) while it stays unsound and tie-free.

use crate::chain::{self, ChainCase, Verdict};
use crate::stage::ChainStage;
use oracle::stage::Stage;
use oracle::TokenId;

/// Unsound: the subject's set differs from a tie-free oracle answer.
fn unsound(case: &ChainCase) -> bool {
    case.validate().is_ok() && matches!(chain::run(case), Ok(r) if r.verdict == Verdict::Present)
}

/// Drops logit `j`: later ids move down by one; biases and history on `j` go.
fn without_logit(case: &ChainCase, j: usize) -> Option<ChainCase> {
    let j = j as i32;
    let keep = |id: TokenId| (id.0 != j).then(|| TokenId(id.0 - i32::from(id.0 > j)));
    let mut logits = case.logits.clone();
    logits.remove(j as usize);
    let mut stages = Vec::new();
    for s in &case.stages {
        stages.push(match s {
            ChainStage::Sampler(Stage::LogitBias { biases }) => {
                let kept = biases.iter().filter_map(|&(id, b)| Some((keep(id)?, b)));
                let kept: Vec<_> = kept.collect();
                if kept.is_empty() {
                    return None;
                }
                Stage::LogitBias { biases: kept }.into()
            }
            ChainStage::Sampler(Stage::TopK { k }) => Stage::TopK {
                k: (*k).min(logits.len() as i32),
            }
            .into(),
            other => other.clone(),
        });
    }
    let history = case.history.iter().filter_map(|&id| keep(id));
    Some(ChainCase {
        logits,
        stages,
        history: history.collect(),
    })
}

/// Smaller or rounder variants of `case`, simplest first.
fn candidates(case: &ChainCase) -> Vec<ChainCase> {
    let mut out = Vec::new();
    for i in 0..case.stages.len() {
        let mut c = case.clone();
        c.stages.remove(i);
        if !c.stages.iter().any(ChainStage::reads_history) {
            c.history.clear();
        }
        out.push(c);
    }
    if case.logits.len() > 1 {
        out.extend((0..case.logits.len()).filter_map(|j| without_logit(case, j)));
    }
    for j in 0..case.history.len() {
        let mut c = case.clone();
        c.history.remove(j);
        out.push(c);
    }
    for (j, l) in case.logits.iter().enumerate() {
        for r in [l.round(), l.floor(), l.ceil()] {
            if r != *l && !case.logits.contains(&r) {
                let mut c = case.clone();
                c.logits[j] = r;
                out.push(c);
            }
        }
    }
    // Logits as consecutive integers in the same rank order.
    let mut ranked: Vec<usize> = (0..case.logits.len()).collect();
    ranked.sort_by(|&a, &b| case.logits[b].total_cmp(&case.logits[a]));
    let mut integral = case.logits.clone();
    for (rank, &i) in ranked.iter().enumerate() {
        integral[i] = (case.logits.len() - 1 - rank) as f32 - 3.0;
    }
    if integral != case.logits {
        out.push(ChainCase {
            logits: integral,
            ..case.clone()
        });
    }
    for (i, s) in case.stages.iter().enumerate() {
        let Some(stage) = s.sampler() else { continue };
        let tenth = |p: f32| (p * 10.0).round() / 10.0;
        let simpler: Vec<Stage> = match stage.clone() {
            Stage::TopP { p, min_keep } => vec![
                Stage::TopP { p, min_keep: 1 },
                Stage::TopP {
                    p: tenth(p),
                    min_keep,
                },
            ],
            Stage::MinP { p, min_keep } => vec![Stage::MinP {
                p: tenth(p),
                min_keep,
            }],
            Stage::Typical { p, min_keep } => vec![Stage::Typical {
                p: tenth(p),
                min_keep,
            }],
            Stage::Xtc {
                probability,
                threshold,
                min_keep,
            } => vec![Stage::Xtc {
                probability,
                threshold: tenth(threshold),
                min_keep,
            }],
            Stage::LogitBias { biases } if biases.len() > 1 => biases
                .iter()
                .map(|b| Stage::LogitBias { biases: vec![*b] })
                .collect(),
            Stage::LogitBias { biases } => {
                let (id, b) = biases[0];
                let halved = (b / 2.0).trunc();
                let biases = vec![(id, halved)];
                (halved != 0.0)
                    .then_some(Stage::LogitBias { biases })
                    .into_iter()
                    .collect()
            }
            Stage::TopK { k } if k > 1 => vec![Stage::TopK { k: k - 1 }],
            Stage::TopK { .. }
            | Stage::Temp { .. }
            | Stage::TempExt { .. }
            | Stage::TopNSigma { .. }
            | Stage::Penalties { .. }
            | Stage::Greedy
            | Stage::Dist { .. } => Vec::new(),
        };
        for s2 in simpler.into_iter().map(ChainStage::from) {
            if &s2 != s {
                let mut c = case.clone();
                c.stages[i] = s2;
                out.push(c);
            }
        }
    }
    out
}

/// Greedy shrinking to a fixed point: take the first simpler variant that is still unsound.
pub fn shrink(case: &ChainCase) -> ChainCase {
    let mut cur = case.clone();
    while let Some(c) = candidates(&cur).into_iter().find(unsound) {
        cur = c;
    }
    cur
}
