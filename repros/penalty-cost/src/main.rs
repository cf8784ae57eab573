//! F5, the penalty stage's cost: llama.cpp's penalties apply walks every candidate with a hash
//! lookup, so its cost grows with the vocabulary; `ledger-penalties` touches only the distinct
//! ids in its window.
//!
//! Method (a benchmark binary, not a timed test; `make bench`):
//! - Per apply: an id-ordered array of 49,152 and of 262,144 candidates, a 64-token window
//!   filled with 64 pseudo-random ids, theta 1.1. The array is refilled from the same logits
//!   row before every apply, outside the timed region; each sample times exactly one
//!   `llama_sampler_apply`. The stages take turns in every round (builtin, ledger default,
//!   ledger normalized, rotating the order), so machine noise hits them alike; medians over the
//!   rounds and the ratio builtin / ledger are printed. The refill's own median is reported.
//! - End to end: Gemma3-270M (262,144 ids), greedy, the same prompt, a chain of
//!   [penalties?, greedy] over a reused array filled from each step's logits: no penalty,
//!   llama.cpp's penalties at 1.1, ledger-penalties at 1.1 (window 64, prompt accepted),
//!   interleaved per round; the median ms per token and the overhead over no penalty.
//!
//! Output: the tables on stdout, `results/bench/penalty-cost.json` and
//! `results/bench/penalty-cost.svg`. A measurement, not a verdict: it sits under `bench/`, apart
//! from the verdict reports in `results/*.json`.

use anyhow::{Context, Result};
use clap::Parser;
use harness::{LoadedModel, Session};
use ledger::{ledger_penalties, Mode, PenaltyConfig};
use oracle::rng::Rng;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Instant;
use subject::{BuildInfo, LogitsArray, Sampler, SamplerSpec, TokenId};

#[derive(Parser, Debug)]
#[command(
    name = "penalty-cost",
    about = "F5: what the penalty stage costs per apply and per token"
)]
struct Args {
    /// Rounds of the per-apply benchmark.
    #[arg(long, default_value_t = 300)]
    rounds: usize,
    /// Rounds of the end-to-end run (each generates --tokens per variant).
    #[arg(long, default_value_t = 3)]
    e2e_rounds: usize,
    /// Tokens per end-to-end generation.
    #[arg(long, default_value_t = 48)]
    tokens: usize,
    /// Where to write bench/penalty-cost.json and bench/penalty-cost.svg.
    #[arg(long, default_value = "results")]
    results: PathBuf,
}

const WINDOW: i32 = 64;
const THETA: f32 = 1.1;
const VOCABS: [usize; 2] = [49_152, 262_144];

#[derive(Clone, Copy, PartialEq)]
enum Stage {
    Builtin,
    LedgerDefault,
    LedgerNormalized,
}

impl Stage {
    const ALL: [Stage; 3] = [
        Stage::Builtin,
        Stage::LedgerDefault,
        Stage::LedgerNormalized,
    ];

    fn build(self, n_vocab: i32) -> Result<Sampler> {
        let cfg = |mode| PenaltyConfig {
            n_vocab,
            last_n: WINDOW,
            repeat: THETA,
            freq: 0.0,
            present: 0.0,
            mode,
        };
        match self {
            Stage::Builtin => SamplerSpec::Penalties {
                n_vocab,
                last_n: WINDOW,
                repeat: THETA,
                freq: 0.0,
                present: 0.0,
            }
            .build(),
            Stage::LedgerDefault => ledger_penalties(cfg(Mode::Default)),
            Stage::LedgerNormalized => ledger_penalties(cfg(Mode::Normalized)),
        }
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Median ms per apply for each stage, and of the refill, at one vocabulary size.
fn per_apply(n: usize, rounds: usize) -> Result<([f64; 3], f64)> {
    let mut rng = Rng::new(n as u64);
    let row: Vec<f32> = (0..n)
        .map(|_| rng.below(4000) as f32 / 200.0 - 10.0)
        .collect();
    let history: Vec<TokenId> = (0..WINDOW).map(|_| TokenId(rng.below(n) as i32)).collect();
    let mut stages = Stage::ALL
        .iter()
        .map(|s| s.build(n as i32))
        .collect::<Result<Vec<_>>>()?;
    for s in stages.iter_mut() {
        for &t in &history {
            s.accept(t)?;
        }
    }
    let mut arr = LogitsArray::new();
    let mut samples = vec![Vec::with_capacity(rounds); 3];
    let mut refill = Vec::with_capacity(rounds);
    for r in 0..rounds {
        for k in 0..3 {
            let i = (r + k) % 3;
            let t0 = Instant::now();
            arr.load(&row)?;
            let t1 = Instant::now();
            arr.apply(&mut stages[i])?;
            let t2 = Instant::now();
            samples[i].push((t2 - t1).as_secs_f64() * 1e3);
            refill.push((t1 - t0).as_secs_f64() * 1e3);
        }
    }
    let m = [
        median(&mut samples[0]),
        median(&mut samples[1]),
        median(&mut samples[2]),
    ];
    Ok((m, median(&mut refill)))
}

#[derive(Clone, Copy)]
enum E2e {
    None,
    Builtin,
    Ledger,
}

/// Median ms per token per variant on Gemma3.
fn end_to_end(rounds: usize, tokens: usize) -> Result<(Vec<f64>, String, usize)> {
    let m = LoadedModel::load(models::resolve("gemma3")?)?;
    let prompt = m.chat_ids("Describe a quiet morning in a small fishing village.")?;
    let n_vocab = m.model.n_vocab();
    let mut session = Session::new(&m.model, prompt.clone(), tokens, 2)?;
    let variants = [E2e::None, E2e::Builtin, E2e::Ledger];
    let mut per_token = vec![Vec::new(); 3];
    let mut arr = LogitsArray::new();
    // One untimed generation first: the first decodes after loading allocate the graph.
    session.generate(tokens, |raw, _| Ok(harness::argmax(raw)))?;
    for r in 0..rounds {
        for k in 0..3 {
            let i = (r + k) % 3;
            let mut stages = Vec::new();
            match variants[i] {
                E2e::None => {}
                E2e::Builtin => stages.push(Stage::Builtin.build(n_vocab)?),
                E2e::Ledger => stages.push(Stage::LedgerDefault.build(n_vocab)?),
            }
            stages.push(SamplerSpec::Greedy.build()?);
            let mut chain = Sampler::chain(stages)?;
            for &t in &prompt {
                chain.accept(t)?;
            }
            let t0 = Instant::now();
            let (out, _) = session.generate(tokens, |raw, _| {
                arr.load(raw)?;
                arr.apply(&mut chain)?;
                let t = arr.selected_id().context("greedy selected nothing")?;
                chain.accept(t)?;
                Ok(t)
            })?;
            per_token[i].push(t0.elapsed().as_secs_f64() * 1e3 / out.len() as f64);
        }
    }
    Ok((
        per_token.iter_mut().map(|v| median(v)).collect(),
        m.model.describe(),
        prompt.len(),
    ))
}

fn svg(rows: &[(usize, [f64; 3])]) -> String {
    let (w, h, left, top, ph) = (620.0, 360.0, 80.0, 50.0, 240.0);
    let (lo, hi) = (-4.0f64, 1.0f64); // log10 ms from 0.1 us to 10 ms
    let y = |ms: f64| top + ph * (hi - ms.max(1e-4).log10()) / (hi - lo);
    let colours = ["#D55E00", "#0072B2", "#009E73"];
    let names = [
        "llama.cpp penalties",
        "ledger-penalties",
        "ledger-penalties, normalized",
    ];
    let mut o = format!("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{left}\" y=\"24\" font-size=\"15\" font-weight=\"bold\">F5: penalty stage cost per apply (median, window 64)</text>\n");
    for e in -4..=1 {
        let yy = y(10f64.powi(e));
        o.push_str(&format!("<line x1=\"{left}\" y1=\"{yy:.1}\" x2=\"{:.1}\" y2=\"{yy:.1}\" stroke=\"#ddd\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{} ms</text>\n", left + 330.0, left - 6.0, yy + 4.0, 10f64.powi(e)));
    }
    for (j, (n, m)) in rows.iter().enumerate() {
        let x0 = left + 30.0 + 160.0 * j as f64;
        for k in 0..3 {
            let x = x0 + 34.0 * k as f64;
            o.push_str(&format!(
                "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"28\" height=\"{:.1}\" fill=\"{}\"/>\n",
                y(m[k]),
                top + ph - y(m[k]),
                colours[k]
            ));
        }
        o.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{} candidates</text>\n",
            x0 + 48.0,
            top + ph + 20.0,
            n
        ));
    }
    for k in 0..3 {
        let ly = top + 20.0 * k as f64;
        o.push_str(&format!("<rect x=\"430\" y=\"{:.1}\" width=\"12\" height=\"12\" fill=\"{}\"/><text x=\"448\" y=\"{:.1}\">{}</text>\n", ly, colours[k], ly + 10.0, names[k]));
    }
    o.push_str("</svg>\n");
    o
}

fn run(args: &Args, build: &BuildInfo) -> Result<String> {
    let mut out = format!("F5 penalty cost on {}\nper apply (median of {} interleaved rounds; the refill is timed apart and not included)\n  candidates   llama.cpp ms   ledger ms   ratio      normalized ms  refill ms\n", build.describe(), args.rounds);
    let mut rows = Vec::new();
    let mut json_rows = Vec::new();
    let mut json_norm = Vec::new();
    for n in VOCABS {
        let (m, refill) = per_apply(n, args.rounds)?;
        out.push_str(&format!(
            "  {n:>10}   {:>12.4}   {:>9.5}   {:>8.0}x  {:>13.4}  {:>9.4}\n",
            m[0],
            m[1],
            m[0] / m[1],
            m[2],
            refill
        ));
        json_rows
            .push(json!({"vocab": n, "builtin_ms": m[0], "ledger_ms": m[1], "ratio": m[0] / m[1]}));
        json_norm.push(json!({"vocab": n, "builtin_ms": m[0], "ledger_normalized_ms": m[2], "ratio": m[0] / m[2], "refill_ms": refill}));
        rows.push((n, m));
    }
    let (e2e, desc, prompt_tokens) = end_to_end(args.e2e_rounds, args.tokens)?;
    let over = |x: f64| 100.0 * (x - e2e[0]) / e2e[0];
    out.push_str(&format!(
        "end to end: gemma3 ({desc}), {prompt_tokens}-token prompt, {} tokens x {} interleaved rounds, median ms per token\n  no penalty {:.2}   llama.cpp penalties 1.1 {:.2} ({:+.1}%)   ledger-penalties 1.1 {:.2} ({:+.1}%)\n",
        args.tokens, args.e2e_rounds, e2e[0], e2e[1], over(e2e[1]), e2e[2], over(e2e[2])
    ));
    let v: Value = json!({
        "finding": "F5",
        "build": build.tag(),
        "build_detail": build.describe(),
        "window": WINDOW,
        "theta": 1.1,
        "rounds": args.rounds,
        "rows": json_rows,
        "normalized_rows": json_norm,
        "end_to_end": {
            "model": "gemma3",
            "tokens_per_generation": args.tokens,
            "rounds": args.e2e_rounds,
            "ms_per_token": {"none": e2e[0], "builtin": e2e[1], "ledger": e2e[2]},
            "overhead_percent": {"builtin": over(e2e[1]), "ledger": over(e2e[2])},
        },
        "note": "timings from one run on a shared 2-core machine; ratios within the run are the claim",
    });
    let dir = args.results.join("bench");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::write(
        dir.join("penalty-cost.json"),
        serde_json::to_string_pretty(&v)? + "\n",
    )?;
    std::fs::write(dir.join("penalty-cost.svg"), svg(&rows))?;
    Ok(out)
}

fn check_args(args: &Args) -> Result<()> {
    anyhow::ensure!(
        args.rounds >= 1 && args.e2e_rounds >= 1 && args.tokens >= 1,
        "rounds and tokens must be >= 1"
    );
    Ok(())
}

fn main() {
    cli::one_line_panics();
    std::process::exit(cli::run(std::env::args_os(), |args: Args| {
        let build = cli::refuse(BuildInfo::verified())?;
        cli::refuse(check_args(&args))?;
        cli::fail(run(&args, &build))
    }));
}
