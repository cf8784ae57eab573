//! Draws through the graph's `dist`, judged by F7's detector against the oracle's
//! distribution; the same chain on the CPU with the same seed beside them, as a note.
//!
//! Each draw is its own decode: the prompt's last cell is removed and decoded again, so the
//! model's output is the same and the graph's `dist` takes a fresh uniform, as it would for
//! the next token of a generation.

use crate::case::{planted_pair, Case, Link};
use crate::compare::Place;
use crate::planted::Kind;
use anyhow::{Context, Result};
use detector::{Class, Expectation};
use oracle::stage::Stage;
use oracle::truncation::{compose, Pool};
use oracle::TokenId;
use report::Verdict;
use serde::Serialize;
use std::sync::Arc;
use subject::{Candidates, GraphContext, Model};

/// Draws per row (PREREG, F8's draw addendum).
pub const DRAWS: usize = 4000;
/// The fewest draws a run takes: at 300 every survivor expects at least 5 draws on the
/// audit's prompt, so the detector pools no bin and the power stated (over unpooled bins)
/// is the detector's.
pub const MIN_DRAWS: usize = 300;
/// The seed of every `dist` here.
pub const SEED: u32 = 20261202;
/// Each draw test's level.
pub const ALPHA: f64 = 0.001;
/// The planted skew of the draw controls: the graph multiplies the logits by this instead of 1.
pub const SKEW: f32 = 2.0;
/// Survivors of the top_k before the draw.
const K: i32 = 8;

/// The subject's draw case.
pub fn subject_case() -> Case {
    Case::stages("draws-top_k-8", &format!("top_k={K},dist={SEED}"))
}

/// The draw detector's controls, (exact, skewed): after llama.cpp's top_k in the graph, a
/// draw of our own on the CPU tail (sharing no code with llama.cpp's dist, so a defect of the
/// subject cannot fail it); and a planted temp(1) whose graph factor is [`SKEW`], before
/// llama.cpp's dist.
pub fn planted_cases() -> [Case; 2] {
    let top_k = || Link::Llama(Stage::TopK { k: K });
    let [exact, _] = planted_pair(
        "draws-",
        Kind::CpuDist { seed: SEED as u64 },
        vec![top_k()],
        vec![],
    );
    let [_, skewed] = planted_pair(
        "draws-",
        Kind::Temp { t: 1.0, skew: SKEW },
        vec![top_k()],
        vec![Link::Llama(Stage::Dist { seed: SEED })],
    );
    [exact, skewed]
}

/// One draw row, measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DrawRow {
    pub case: String,
    pub chain: String,
    pub draws: usize,
    /// Where each stage ran.
    pub places: Vec<Place>,
    /// Whether the draw ran where the case puts it: llama.cpp's dist in the graph, a token
    /// handed back by every decode (and a planted stage's ops added to the decodes' graph,
    /// which llama.cpp builds once and reuses); or, for the
    /// draw of our own on the CPU tail, top_k in the graph and its logits handed back.
    pub ran_in_graph: bool,
    /// The detector's verdict and the rule that decided.
    pub detector_verdict: Verdict,
    pub why: String,
    pub p_value: Option<f64>,
    /// Draws outside the oracle's survivors.
    pub outside: usize,
    /// How often each survivor was drawn, against how often the oracle expects it.
    pub counts: Vec<(i32, u64, f64)>,
    /// The same chain on the CPU with the same seed: how many of the tokens agree, position by
    /// position (a note: the two paths walk their candidates in different orders).
    pub cpu_same_seed_agree: usize,
}

impl DrawRow {
    pub fn verdict(&self) -> Verdict {
        if self.ran_in_graph {
            self.detector_verdict
        } else {
            Verdict::Inconclusive
        }
    }

    pub fn evidence(&self) -> String {
        let mut e = format!(
            "{}: {} draws, each from its own decode, against the oracle's distribution: {}; {} outside the survivors; with the same seed the CPU chain drew the same token at {} of {} positions (a note)",
            self.chain, self.draws, self.why, self.outside, self.cpu_same_seed_agree, self.draws
        );
        if !self.ran_in_graph {
            e += "; nothing ran in the graph, so this row cannot show an in-graph defect";
        }
        e
    }
}

/// The oracle's distribution for `case` over `raw`: one class per survivor of its stages
/// before the draw.
fn expectation(case: &Case, raw: &[f32]) -> Expectation {
    let stages: Vec<Stage> = (case.oracle_stages().into_iter())
        .filter(|s| !matches!(s, Stage::Dist { .. }))
        .collect();
    let comp = compose(&stages, &Pool::from_logits(raw), &[]);
    let classes = (comp.pool.entries().iter())
        .zip(comp.pool.probabilities())
        .filter(|(e, _)| e.logit > f32::NEG_INFINITY)
        .map(|(e, p)| Class {
            ids: vec![e.id],
            kept: 1,
            p_each: p,
        })
        .collect();
    let undecided = (!comp.edges.is_empty()).then(|| {
        (comp.edges.iter())
            .map(|(i, e)| format!("stage {}: {}", i + 1, e.0))
            .collect::<Vec<_>>()
            .join("; ")
    });
    Expectation { classes, undecided }
}

/// Runs `case`'s draws on `model` after `prompt` (raw logits `raw`).
pub fn run(
    model: &Arc<Model>,
    prompt: &[TokenId],
    raw: &[f32],
    case: &Case,
    draws: usize,
    threads: i32,
) -> Result<DrawRow> {
    let n_vocab = model.n_vocab();
    let n_ctx = (prompt.len() as u32 + 8).max(64);
    let mut ctx = GraphContext::new(model, n_ctx, case.build(n_vocab)?, 1, threads)?;
    ctx.decode(prompt)?;
    let places: Vec<Place> = ctx.places().into_iter().map(Place::from).collect();
    let mut graph = Vec::with_capacity(draws);
    let builds_before = case.planted().map(|p| p.graph_builds());
    let own_draw = case
        .planted()
        .is_some_and(|p| matches!(p.kind, Kind::CpuDist { .. }));
    let mut ran = if own_draw {
        places.first().is_some_and(|p| p.in_graph)
    } else {
        places.last().is_some_and(|p| p.in_graph)
    };
    let mut progress = cmdline::Progress::new(format!("F8 draws of {}", case.name), draws as u64);
    for i in 0..draws {
        if i > 0 {
            ctx.redecode_last()?;
        }
        let out = ctx.output()?;
        ran &= if own_draw {
            out.logits.is_some()
        } else {
            out.sampled.is_some()
        };
        let (_, t) = ctx.finish(&out)?;
        graph.push(t.context("a chain ending in dist chose no token")?);
        progress.inc(1);
    }
    progress.finish();
    let mut cpu_chain = case.build(n_vocab)?;
    let mut agree = 0;
    for &g in &graph {
        let mut c = Candidates::from_logits(raw);
        cpu_chain.apply(&mut c)?;
        let t = c.selected_id().context("the CPU chain chose no token")?;
        cpu_chain.accept(t)?;
        agree += usize::from(t == g);
    }
    // A planted stage that runs in the graph must have added its ops to the decodes' graphs.
    if let (Some(p), Some(before)) = (case.planted(), builds_before) {
        if !own_draw {
            ran &= p.graph_builds() > before;
        }
    }
    let exp = expectation(case, raw);
    // The graph returns each draw's id, not the set its stages kept.
    let outcome = detector::judge(&detector::Call::all_drawn_only(&graph), &exp, ALPHA);
    let counts = (exp.classes.iter())
        .map(|c| {
            let id = c.ids[0];
            let n = outcome.support.get(&id).copied().unwrap_or(0);
            (id.0, n, c.p_each * draws as f64)
        })
        .collect();
    Ok(DrawRow {
        case: case.name.clone(),
        chain: case.describe(),
        draws,
        places,
        ran_in_graph: ran,
        detector_verdict: outcome.verdict,
        why: outcome.why.clone(),
        p_value: outcome.p_value(),
        outside: outcome.outside.len(),
        counts,
        cpu_same_seed_agree: agree,
    })
}

/// The effect PREREG names for the draw row (F8's draw addendum): what a row at this many
/// draws should catch to read `absent` without a qualifier.
pub const NAMED_EFFECT: &str = "one point of probability moved from the top survivor to the second";

pub use detector::power::ENOUGH_POWER;

/// Simulated runs of the detector per power, and their seed.
pub const POWER_REPS: usize = 1000;
pub const POWER_SEED: u64 = 20_261_202;

/// The detector's power at `draws` draws against two alternatives, stated before the verdicts:
/// the planted skew (the logits of the survivors times [`SKEW`]) and [`NAMED_EFFECT`]. Each is
/// the share of [`POWER_REPS`] simulated runs that `detector::judge` flags at [`ALPHA`]
/// (`detector::power::simulate`, the computation F7 states its power with).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Power {
    pub draws: usize,
    pub alpha: f64,
    pub against_planted_skew: detector::power::Power,
    pub against_one_point_shift: detector::power::Power,
}

impl Power {
    /// The draw row's verdict line, qualified when the power against [`NAMED_EFFECT`] is below
    /// [`ENOUGH_POWER`]: a row that could not have seen the named effect says so.
    pub fn qualify(&self, evidence: String) -> String {
        let p = &self.against_one_point_shift;
        if p.rate < ENOUGH_POWER {
            format!(
                "(power {} < {ENOUGH_POWER} against {NAMED_EFFECT}, at {} draws): {evidence}",
                p.describe(),
                self.draws
            )
        } else {
            evidence
        }
    }
}

pub fn power(raw: &[f32], draws: usize) -> Power {
    let exp = expectation(&subject_case(), raw);
    let ids: Vec<TokenId> = exp.classes.iter().map(|c| c.ids[0]).collect();
    let expected: Vec<f64> = exp.classes.iter().map(|c| c.p_each).collect();
    let logits: Vec<f64> = (ids.iter())
        .map(|id| raw[id.0 as usize] as f64 * SKEW as f64)
        .collect();
    let max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let w: Vec<f64> = logits.iter().map(|l| (l - max).exp()).collect();
    let sum: f64 = w.iter().sum();
    let skewed: Vec<f64> = w.iter().map(|x| x / sum).collect();
    let mut shifted = expected.clone();
    if shifted.len() >= 2 {
        shifted[0] -= 0.01;
        shifted[1] += 0.01;
    }
    let against = |dist: &[f64]| {
        let alternative: Vec<(TokenId, f64)> =
            ids.iter().copied().zip(dist.iter().copied()).collect();
        detector::power::simulate(&exp, &alternative, draws, ALPHA, POWER_REPS, POWER_SEED)
    };
    Power {
        draws,
        alpha: ALPHA,
        against_planted_skew: against(&skewed),
        against_one_point_shift: against(&shifted),
    }
}
