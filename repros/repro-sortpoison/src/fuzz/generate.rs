//! The fuzzer's generator: random deterministic stages and chains from a seeded [`Rng`], and
//! the names a chain is grouped by (its stage signature and its shape of roles).

use crate::chain::ChainCase;
use crate::rng::Rng;
use crate::stage::ChainStage;
use oracle::penalty::PenaltyParams;
use oracle::stage::Stage;
use oracle::window::WindowLen;
use oracle::TokenId;

/// Distinct logits from the quarter grid in [-6, 6], so no two are equal.
pub(crate) fn random_logits(rng: &mut Rng, n: usize) -> Vec<f32> {
    let mut grid: Vec<i64> = (-24..=24).collect();
    rng.shuffle(&mut grid);
    grid[..n].iter().map(|&q| q as f32 / 4.0).collect()
}

fn random_p(rng: &mut Rng, lo: i64, hi: i64) -> f32 {
    rng.range(lo, hi) as f32 / 100.0
}

/// One random deterministic stage for an array of `n` logits.
pub fn random_stage(rng: &mut Rng, n: usize) -> Stage {
    match rng.below(10) {
        0 => Stage::TopK {
            k: rng.range(1, n as i64) as i32,
        },
        1 => Stage::TopP {
            p: random_p(rng, 30, 95),
            min_keep: rng.range(1, 2) as usize,
        },
        2 => Stage::MinP {
            p: random_p(rng, 2, 50),
            min_keep: 1,
        },
        3 => Stage::Typical {
            p: random_p(rng, 20, 95),
            min_keep: 1,
        },
        4 => Stage::Temp {
            t: *rng.pick(&[0.5, 0.75, 1.5, 2.0]),
        },
        5 => Stage::TempExt {
            t: *rng.pick(&[0.75, 1.0, 1.5]),
            delta: *rng.pick(&[0.25, 0.5]),
            exponent: 1.0,
        },
        6 => Stage::Xtc {
            probability: 1.0,
            threshold: random_p(rng, 5, 30),
            min_keep: 1,
        },
        7 => Stage::TopNSigma {
            n: *rng.pick(&[0.5, 1.0, 1.5, 2.0]),
        },
        8 => {
            let count = rng.range(1, 2.min(n as i64)) as usize;
            let mut ids: Vec<i32> = (0..n as i32).collect();
            rng.shuffle(&mut ids);
            Stage::LogitBias {
                biases: ids[..count]
                    .iter()
                    .map(|&id| {
                        let b = rng.range(1, 8) as f32 * if rng.below(2) == 0 { 1.0 } else { -1.0 };
                        (TokenId(id), b)
                    })
                    .collect(),
            }
        }
        _ => Stage::Penalties {
            last_n: WindowLen(64),
            params: PenaltyParams {
                repeat: *rng.pick(&[1.1, 1.3, 2.0]),
                freq: *rng.pick(&[0.0, 0.5]),
                present: *rng.pick(&[0.0, 0.5]),
            },
        },
    }
}

pub fn random_case(rng: &mut Rng) -> ChainCase {
    let n = rng.range(3, 10) as usize;
    let len = rng.range(2, 4) as usize;
    let stages: Vec<ChainStage> = (0..len).map(|_| random_stage(rng, n).into()).collect();
    let history = if stages.iter().any(ChainStage::reads_history) {
        (0..rng.range(1, 6))
            .map(|_| TokenId(rng.below(n) as i32))
            .collect()
    } else {
        Vec::new()
    };
    ChainCase {
        logits: random_logits(rng, n),
        stages,
        history,
    }
}

/// The stage names in chain order, e.g. `top_k -> logit_bias -> top_p`.
pub fn signature(case: &ChainCase) -> String {
    case.stages
        .iter()
        .map(|s| s.name())
        .collect::<Vec<_>>()
        .join(" -> ")
}

pub fn shape(case: &ChainCase) -> String {
    let n = case.stages.len();
    case.stages
        .iter()
        .enumerate()
        .map(|(i, s)| s.role(i + 1 == n).as_str())
        .collect::<Vec<_>>()
        .join(" -> ")
}

/// The same chain with `sorted_guard` before every stage that reads the flag.
pub fn guarded(case: &ChainCase) -> ChainCase {
    let mut stages = Vec::new();
    for s in &case.stages {
        if s.reads_sorted_flag() {
            stages.push(Stage::SortedGuard.into());
        }
        stages.push(s.clone());
    }
    ChainCase {
        stages,
        ..case.clone()
    }
}
