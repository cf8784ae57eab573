//! The fuzzer's generator: random stages (any row of the oracle's table, through one
//! exhaustive match) and chains from a seeded [`Rng`], and the names a chain is grouped by
//! (its stage signature and its shape of roles).

use crate::chain::ChainCase;
use crate::stage::ChainStage;
use crate::text::join;
use oracle::penalty::PenaltyParams;
use oracle::rng::Rng;
use oracle::stage::{Stage, SuiteStage};
use oracle::window::WindowLen;
use oracle::TokenId;

/// Distinct logits from the quarter grid in [-6, 6] (wider when `n` needs it), so no two
/// are equal.
pub(crate) fn random_logits(rng: &mut Rng, n: usize) -> Vec<f32> {
    let half = 24.max(n as i64);
    let mut grid: Vec<i64> = (-half..=half).collect();
    rng.shuffle(&mut grid);
    grid[..n].iter().map(|&q| q as f32 / 4.0).collect()
}

fn random_p(rng: &mut Rng, lo: i64, hi: i64) -> f32 {
    rng.range(lo, hi) as f32 / 100.0
}

/// The table's stages the fuzzer draws from, in the order its seeded choice indexes them.
pub const FUZZED: [&str; 10] = [
    "top_k",
    "top_p",
    "min_p",
    "typical",
    "temp",
    "temp_ext",
    "xtc",
    "top_n_sigma",
    "logit_bias",
    "penalties",
];

/// The table's stages the fuzzer leaves out of its chains, and why (a test checks that every
/// row of `oracle::stage::STAGES` is in exactly one of the two lists).
pub const NOT_FUZZED: &[(&str, &str)] = &[
    (
        "greedy",
        "it selects without changing the set (PREREG F2 fuzzes the ten set-changing stages)",
    ),
    (
        "dist",
        "it draws from an RNG; a chain ending in it is judged by its draws",
    ),
    ("sorted_guard", "it is the fix; `guarded` inserts it"),
];

/// The stage of `name`'s row, as its example gives it (the template [`randomize`] varies).
pub fn template(name: &str) -> Stage {
    let row = oracle::stage::table::row(name)
        .unwrap_or_else(|| panic!("{name} has no row in oracle::stage::STAGES"));
    row.example
        .parse()
        .unwrap_or_else(|e| panic!("{name}: its example does not parse: {e}"))
}

/// One random deterministic stage for an array of `n` logits.
pub fn random_stage(rng: &mut Rng, n: usize) -> Stage {
    let name = FUZZED[rng.below(FUZZED.len())];
    randomize(&template(name), rng, n)
}

/// A stage of the same kind as `template`, with random parameters for `n` logits.
pub fn randomize(template: &Stage, rng: &mut Rng, n: usize) -> Stage {
    match template {
        Stage::TopK { .. } => Stage::TopK {
            k: rng.range(1, n as i64) as i32,
        },
        Stage::TopP { .. } => Stage::TopP {
            p: random_p(rng, 30, 95),
            min_keep: rng.range(1, 2) as usize,
        },
        Stage::MinP { .. } => Stage::MinP {
            p: random_p(rng, 2, 50),
            min_keep: 1,
        },
        Stage::Typical { .. } => Stage::Typical {
            p: random_p(rng, 20, 95),
            min_keep: 1,
        },
        Stage::Temp { .. } => Stage::Temp {
            t: *rng.pick(&[0.5, 0.75, 1.5, 2.0]),
        },
        Stage::TempExt { .. } => Stage::TempExt {
            t: *rng.pick(&[0.75, 1.0, 1.5]),
            delta: *rng.pick(&[0.25, 0.5]),
            exponent: 1.0,
        },
        Stage::Xtc { .. } => Stage::Xtc {
            probability: 1.0,
            threshold: random_p(rng, 5, 30),
            min_keep: 1,
        },
        Stage::TopNSigma { .. } => Stage::TopNSigma {
            n: *rng.pick(&[0.5, 1.0, 1.5, 2.0]),
        },
        Stage::LogitBias { .. } => {
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
        Stage::Penalties { .. } => Stage::Penalties {
            last_n: WindowLen(64),
            params: PenaltyParams {
                repeat: *rng.pick(&[1.1, 1.3, 2.0]),
                freq: *rng.pick(&[0.0, 0.5]),
                present: *rng.pick(&[0.0, 0.5]),
            },
        },
        Stage::Greedy => Stage::Greedy,
        Stage::Dist { .. } => Stage::Dist {
            seed: rng.below(1 << 16) as u32,
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
    join(case.stages.iter().map(ChainStage::name), " -> ")
}

pub fn shape(case: &ChainCase) -> String {
    let n = case.stages.len();
    let roles = case.stages.iter().enumerate();
    join(roles.map(|(i, s)| s.role(i + 1 == n).as_str()), " -> ")
}

/// The same chain with `sorted_guard` before every stage that reads the flag.
pub fn guarded(case: &ChainCase) -> ChainCase {
    let guard = ChainStage::Suite(SuiteStage::SortedGuard);
    let stages = case.stages.iter().flat_map(|s| {
        let guard = s.reads_sorted_flag().then(|| guard.clone());
        guard.into_iter().chain([s.clone()])
    });
    ChainCase {
        stages: stages.collect(),
        ..case.clone()
    }
}
