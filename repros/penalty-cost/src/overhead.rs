//! End to end on two builds in one run: what llama.cpp's penalties stage adds per generated
//! token on the stock build and on the patched one, and the difference. This process (stock)
//! and a worker child of the patched build ([`crate::versus::Worker`]) each load Gemma3 and
//! decode the same prompt greedily ([`crate::e2e::Decoder`]), without a penalty and with
//! llama.cpp's penalties (theta 1.1, window 64). Every round runs the four generations (each
//! build without and with the penalty) one after another, the first moving on by one each
//! round, so a slow stretch of the machine reaches all four alike; the child waits on its pipe
//! while the parent decodes, and the other way round.
//!
//! A build's overhead in a round is its penalized time per token over its own unpenalized one
//! in the same round; the difference is the patched overhead minus the stock one in the same
//! round. Each is reported as the median over rounds with a bootstrap interval. Both builds must
//! choose the same tokens for the same variant in every round, or the run stops: the timings
//! would compare different work.

use crate::apply::turn;
use crate::e2e::{Decoder, Generation, Plan, Variant};
use crate::penalty::{THETA, WINDOW};
use crate::stats::{bootstrap_median, overhead_percent, MedianCi};
use crate::versus::{Ci, Worker};
use anyhow::{ensure, Result};
use harness::Stop;
use models::ModelChoice;
use oracle::stats::{BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED};
use serde::Serialize;

/// Which process decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// This process: the stock build.
    Stock,
    /// The worker: the patched build.
    Patched,
}

/// The four generations of a round, in this order in [`Round::ms`].
pub const ITEMS: [(Side, Variant); 4] = [
    (Side::Stock, Variant::None),
    (Side::Stock, Variant::Builtin),
    (Side::Patched, Variant::None),
    (Side::Patched, Variant::Builtin),
];

fn index(side: Side, v: Variant) -> usize {
    ITEMS
        .iter()
        .position(|&x| x == (side, v))
        .expect("an item of ITEMS")
}

/// One round: ms per token of each item of [`ITEMS`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Round {
    pub ms: [f64; 4],
}

impl Round {
    pub fn ms_of(&self, side: Side, v: Variant) -> f64 {
        self.ms[index(side, v)]
    }

    /// `side`'s penalized time per token over its unpenalized one, in percent.
    pub fn overhead(&self, side: Side) -> f64 {
        overhead_percent(
            self.ms_of(side, Variant::None),
            self.ms_of(side, Variant::Builtin),
        )
    }

    /// The patched overhead minus the stock one, in percentage points.
    pub fn difference(&self) -> f64 {
        self.overhead(Side::Patched) - self.overhead(Side::Stock)
    }
}

/// The run: builds, model, plan and rounds.
#[derive(Debug, Clone)]
pub struct Interleaved {
    pub stock: String,
    pub patched: String,
    pub patched_sources_sha256: String,
    pub model: String,
    pub prompt_tokens: usize,
    pub plan: Plan,
    pub rounds: Vec<Round>,
    /// Generations per variant (each round's are the same on both builds) that ended on an
    /// end-of-generation token.
    pub eos_stops: [usize; 2],
    pub generated_tokens: [usize; 2],
}

/// The medians and intervals of a run.
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    /// Per item of [`ITEMS`].
    pub ms: [MedianCi; 4],
    /// Stock, patched.
    pub overhead: [MedianCi; 2],
    pub difference: MedianCi,
}

impl Summary {
    pub fn of(rounds: &[Round]) -> Summary {
        let per =
            |f: &dyn Fn(&Round) -> f64| bootstrap_median(&rounds.iter().map(f).collect::<Vec<_>>());
        Summary {
            ms: [0, 1, 2, 3].map(|i| per(&|r: &Round| r.ms[i])),
            overhead: [Side::Stock, Side::Patched].map(|s| per(&|r: &Round| r.overhead(s))),
            difference: per(&|r: &Round| r.difference()),
        }
    }
}

/// Both sides' generation of `v`: the same tokens, or the run stops.
fn same_work(v: Variant, stock: &Generation, patched: &Generation, round: usize) -> Result<()> {
    ensure!(
        stock.tokens == patched.tokens,
        "the two builds chose different tokens with {} in round {round}: the timings would compare different work",
        v.label()
    );
    Ok(())
}

/// One untimed round (the first decodes after loading allocate the graph), then `plan.rounds`
/// timed ones against `worker`.
pub fn compare(worker: &mut Worker, model: ModelChoice, plan: &Plan) -> Result<Interleaved> {
    let mut own = Decoder::new(model, plan)?;
    worker.load_e2e(plan)?;
    for v in [Variant::None, Variant::Builtin] {
        let (s, p) = (own.generate(v)?, worker.generate(v)?);
        same_work(v, &s, &p, 0)?;
    }
    let mut progress = cmdline::Progress::new(
        "F5 end to end, stock and patched interleaved, rounds",
        plan.rounds as u64,
    );
    let mut rounds = Vec::with_capacity(plan.rounds);
    let mut eos_stops = [0; 2];
    let mut generated_tokens = [0; 2];
    for r in 0..plan.rounds {
        progress.inc(1);
        let mut gens: [Option<Generation>; 4] = Default::default();
        for k in 0..ITEMS.len() {
            let i = turn(r, k, ITEMS.len());
            let (side, v) = ITEMS[i];
            gens[i] = Some(match side {
                Side::Stock => own.generate(v)?,
                Side::Patched => worker.generate(v)?,
            });
        }
        let gens: Vec<Generation> = gens.into_iter().flatten().collect();
        for (j, v) in [Variant::None, Variant::Builtin].into_iter().enumerate() {
            let (s, p) = (&gens[index(Side::Stock, v)], &gens[index(Side::Patched, v)]);
            same_work(v, s, p, r + 1)?;
            eos_stops[j] += usize::from(s.stop == Stop::Eos);
            generated_tokens[j] += s.tokens.len();
        }
        rounds.push(Round {
            ms: [0, 1, 2, 3].map(|i| gens[i].ms_per_token),
        });
    }
    progress.finish();
    Ok(Interleaved {
        stock: subject::BuildInfo::current().tag().to_string(),
        patched: worker.build.clone(),
        patched_sources_sha256: worker.sources.clone(),
        model: own.model.model.describe(),
        prompt_tokens: own.prompt.len(),
        plan: *plan,
        rounds,
        eos_stops,
        generated_tokens,
    })
}

/// How the rounds run, in the JSON.
pub const ORDER: &str = "each round decodes four generations one after another: the stock build without and with the penalty, the patched build without and with it; the first moves on by one each round, so over every four rounds each generation runs first, second, third and fourth once";

/// What is timed, in the JSON.
pub const TIMED: &str = "each generation from its first logits to its last: every step samples ([penalties, greedy] over an array refilled in id order from the step's logits, or greedy alone), accepts, decodes one token and reads the next logits; the prompt's decode is not timed";

#[derive(Serialize)]
struct Side2<T> {
    stock: T,
    patched: T,
}

#[derive(Serialize)]
struct Variants<T> {
    none: T,
    penalties: T,
}

#[derive(Serialize)]
struct RoundData {
    stock_none: f64,
    stock_penalties: f64,
    patched_none: f64,
    patched_penalties: f64,
}

#[derive(Serialize)]
struct Data {
    finding: &'static str,
    stock: String,
    patched: String,
    patched_sources_sha256: String,
    model: &'static str,
    model_detail: String,
    prompt_tokens: usize,
    penalty: String,
    rounds: usize,
    tokens_per_generation: usize,
    threads: i32,
    order: &'static str,
    timed: &'static str,
    statistic: String,
    ms_per_token: Side2<Variants<Ci>>,
    overhead_percent: Side2<Ci>,
    overhead_difference_points: Ci,
    difference: &'static str,
    same_tokens: &'static str,
    generated_tokens: Variants<usize>,
    eos_stops: Variants<usize>,
    per_round_ms_per_token: Vec<RoundData>,
    note: &'static str,
}

/// `bench/penalty-overhead-versus.json`.
pub fn json(x: &Interleaved) -> serde_json::Value {
    let s = Summary::of(&x.rounds);
    let ms = |side| Variants {
        none: s.ms[index(side, Variant::None)].into(),
        penalties: s.ms[index(side, Variant::Builtin)].into(),
    };
    let data = Data {
        finding: crate::FINDING,
        stock: x.stock.clone(),
        patched: x.patched.clone(),
        patched_sources_sha256: x.patched_sources_sha256.clone(),
        model: crate::e2e::MODEL,
        model_detail: x.model.clone(),
        prompt_tokens: x.prompt_tokens,
        penalty: format!("llama.cpp's penalties, window {WINDOW}, repeat penalty {THETA}, freq 0, present 0"),
        rounds: x.plan.rounds,
        tokens_per_generation: x.plan.tokens,
        threads: x.plan.threads,
        order: ORDER,
        timed: TIMED,
        statistic: format!("median over rounds with a 95% percentile bootstrap interval ({BOOTSTRAP_RESAMPLES} resamples, seed {BOOTSTRAP_SEED})"),
        ms_per_token: Side2 {
            stock: ms(Side::Stock),
            patched: ms(Side::Patched),
        },
        overhead_percent: Side2 {
            stock: s.overhead[0].into(),
            patched: s.overhead[1].into(),
        },
        overhead_difference_points: s.difference.into(),
        difference: "per round, the patched build's overhead minus the stock build's (percentage points); its median over rounds, which need not equal the difference of the two medians",
        same_tokens: "in every round both builds chose the same tokens without the penalty and the same tokens with it (the run stops otherwise)",
        generated_tokens: Variants {
            none: x.generated_tokens[0],
            penalties: x.generated_tokens[1],
        },
        eos_stops: Variants {
            none: x.eos_stops[0],
            penalties: x.eos_stops[1],
        },
        per_round_ms_per_token: (x.rounds.iter())
            .map(|r| RoundData {
                stock_none: r.ms[0],
                stock_penalties: r.ms[1],
                patched_none: r.ms[2],
                patched_penalties: r.ms[3],
            })
            .collect(),
        note: crate::output::NOTE,
    };
    serde_json::to_value(data).expect("the overhead JSON has string keys")
}

fn ci(c: &MedianCi, digits: usize, sign: bool) -> String {
    if sign {
        format!(
            "{:+.digits$} [{:+.digits$}, {:+.digits$}]",
            c.median, c.lo, c.hi
        )
    } else {
        format!(
            "{:.digits$} [{:.digits$}, {:.digits$}]",
            c.median, c.lo, c.hi
        )
    }
}

/// The run as text.
pub fn text(x: &Interleaved) -> String {
    let s = Summary::of(&x.rounds);
    let mut out = format!(
        "end to end, {} against {} interleaved: {} ({}), {} rounds of four generations of {} tokens (each build without and with llama.cpp's penalties, window {WINDOW}, theta {THETA}), decoding threads: {}\n  median ms per token, and the overhead of the penalty over the same build's unpenalized decode (paired within rounds), [95% bootstrap interval]\n",
        x.stock,
        x.patched,
        crate::e2e::MODEL,
        x.model,
        x.plan.rounds,
        x.plan.tokens,
        x.plan.threads
    );
    for (k, (side, name)) in [(Side::Stock, &x.stock), (Side::Patched, &x.patched)]
        .into_iter()
        .enumerate()
    {
        out += &format!(
            "    {name:<14} no penalty {}  penalties {}  overhead {:+.1}% [{:+.1}, {:+.1}]\n",
            ci(&s.ms[index(side, Variant::None)], 2, false),
            ci(&s.ms[index(side, Variant::Builtin)], 2, false),
            s.overhead[k].median,
            s.overhead[k].lo,
            s.overhead[k].hi
        );
    }
    out += &format!(
        "  patched overhead minus stock overhead, paired within rounds: {} points\n  both builds chose the same tokens in every round; generations ended by an end-of-generation token: none {}, penalties {} (per build)\n  ({})\n",
        ci(&s.difference, 1, true),
        x.eos_stops[0],
        x.eos_stops[1],
        crate::output::NOTE
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(stock: (f64, f64), patched: (f64, f64)) -> Round {
        Round {
            ms: [stock.0, stock.1, patched.0, patched.1],
        }
    }

    /// Overheads are taken within a build and a round, and the difference within a round: a
    /// build that is slower throughout (its own none slower too) shows no overhead from it.
    #[test]
    fn overheads_and_difference_are_paired_within_rounds() {
        let rounds: Vec<Round> = (0..5)
            .map(|i| {
                let base = 10.0 + i as f64;
                // stock: 10% over its own none; patched: slower overall, 2% over its own none
                round((base, base * 1.1), (base * 2.0, base * 2.0 * 1.02))
            })
            .collect();
        let r = rounds[0];
        assert!((r.overhead(Side::Stock) - 10.0).abs() < 1e-9);
        assert!((r.overhead(Side::Patched) - 2.0).abs() < 1e-9);
        assert!((r.difference() + 8.0).abs() < 1e-9);
        let s = Summary::of(&rounds);
        assert!((s.overhead[0].median - 10.0).abs() < 1e-9, "{s:?}");
        assert!((s.overhead[1].median - 2.0).abs() < 1e-9, "{s:?}");
        assert!((s.difference.median + 8.0).abs() < 1e-9, "{s:?}");
        assert!(s.difference.lo <= s.difference.median && s.difference.median <= s.difference.hi);
        assert_eq!(s.ms[index(Side::Patched, Variant::None)].median, 24.0);
    }

    #[test]
    fn items_are_each_build_without_and_with_the_penalty() {
        assert_eq!(index(Side::Stock, Variant::None), 0);
        assert_eq!(index(Side::Patched, Variant::Builtin), 3);
        let r = round((1.0, 2.0), (3.0, 4.0));
        assert_eq!(r.ms_of(Side::Patched, Variant::None), 3.0);
        assert_eq!(r.ms_of(Side::Stock, Variant::Builtin), 2.0);
    }

    fn gen(tokens: &[i32]) -> Generation {
        Generation {
            ms_per_token: 1.0,
            tokens: tokens.iter().map(|&t| subject::TokenId(t)).collect(),
            stop: Stop::Limit,
        }
    }

    #[test]
    fn different_tokens_stop_the_run() {
        assert!(same_work(Variant::Builtin, &gen(&[1, 2]), &gen(&[1, 2]), 3).is_ok());
        let e = same_work(Variant::Builtin, &gen(&[1, 2]), &gen(&[1, 3]), 3).unwrap_err();
        assert!(e.to_string().contains("round 3"), "{e}");
    }

    #[test]
    fn json_and_text_hold_every_number_of_the_summary() {
        let x = Interleaved {
            stock: "b1".into(),
            patched: "b1+fixes".into(),
            patched_sources_sha256: "ab".into(),
            model: "m".into(),
            prompt_tokens: 3,
            plan: Plan {
                rounds: 4,
                tokens: 2,
                threads: 1,
            },
            rounds: (0..4).map(|_| round((10.0, 11.0), (10.0, 10.0))).collect(),
            eos_stops: [0, 1],
            generated_tokens: [8, 7],
        };
        let v = json(&x);
        assert_eq!(v["overhead_percent"]["patched"]["median"], 0.0);
        let stock = v["overhead_percent"]["stock"]["median"].as_f64().unwrap();
        assert!((stock - 10.0).abs() < 1e-9);
        let d = v["overhead_difference_points"]["median"].as_f64().unwrap();
        assert!((d + 10.0).abs() < 1e-9);
        assert_eq!(v["ms_per_token"]["stock"]["penalties"]["median"], 11.0);
        assert_eq!(v["per_round_ms_per_token"].as_array().unwrap().len(), 4);
        assert_eq!(v["eos_stops"]["penalties"], 1);
        let t = text(&x);
        assert!(t.contains("+10.0% [+10.0, +10.0]"), "{t}");
        assert!(t.contains("-10.0 [-10.0, -10.0] points"), "{t}");
    }
}
