//! Command-line parsing: one input (`--logits`, `--sampling`, `--draws`, `--seed`) or the
//! grid (`--audit`, which writes `results/engines.<engine build>.{json,txt}`).

use crate::audit::{self, Case};
use crate::vectors;
use anyhow::{ensure, Context, Result};
use clap::Parser;
use engine::{Engine, EngineName, Sampling};
use harness::engines;
use std::ffi::OsString;

/// F7: seeded draws from an engine's sampler, judged against the oracle's survivor set and
/// renormalized distribution.
#[derive(Parser, Debug)]
#[command(name = "repro-engines")]
pub struct Args {
    /// The engine: llama (llama.cpp, the build this binary links) or candle (default build
    /// only).
    #[arg(long, default_value = "llama")]
    pub engine: String,
    /// Comma-separated logits, id 0 first: finite numbers or -inf, at least one finite, at
    /// most 1048576 of them.
    #[arg(long, allow_hyphen_values = true, default_value = "3,2,1,0")]
    pub logits: String,
    /// Instead of --logits: one of the audit grid's vectors by name (published, ties,
    /// boundary4, boundary8, masked, vocab262k), so a row of the audit can be rerun alone.
    #[arg(long, conflicts_with = "logits")]
    pub vector: Option<String>,
    /// The configuration: all, top_k=K, top_p=P, top_k=K,top_p=P, min_p=P (after the
    /// others), each with an optional temp=T (1/64 to 64); applied temperature first.
    #[arg(long, allow_hyphen_values = true, default_value = "all")]
    pub sampling: String,
    /// Draws, 1 to 1000000.
    #[arg(long, default_value_t = 20_000, allow_negative_numbers = true)]
    pub draws: i64,
    /// The sampler's seed, 0 to 4294967295 (llama.cpp's dist takes a uint32_t).
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    pub seed: i64,
    /// Run the audit grid (PREREG, F7) instead of one input, and write
    /// results/engines.<engine build>.{json,txt}.
    #[arg(long, conflicts_with_all = ["logits", "vector", "sampling", "draws", "seed"])]
    pub audit: bool,
    #[command(flatten)]
    pub out: cmdline::Output,
}

/// Most logits one `--logits` list may hold.
pub const MAX_LOGITS: usize = 1 << 20;
pub const MAX_DRAWS: i64 = 1_000_000;

pub fn parse_logits(text: &str) -> Result<Vec<f32>> {
    let parts: Vec<&str> = text.split(',').collect();
    ensure!(
        parts.len() <= MAX_LOGITS,
        "--logits: {} values; at most {MAX_LOGITS}",
        parts.len()
    );
    let logits = parts
        .iter()
        .map(|p| {
            let p = p.trim();
            let x: f32 = p
                .parse()
                .map_err(|_| anyhow::anyhow!("--logits: '{p}' is not a number"))?;
            ensure!(
                !x.is_nan() && x != f32::INFINITY,
                "--logits: '{p}' is not a finite number or -inf"
            );
            Ok(x)
        })
        .collect::<Result<Vec<f32>>>()?;
    ensure!(
        logits.iter().any(|x| x.is_finite()),
        "--logits: at least one logit must be finite"
    );
    Ok(logits)
}

pub struct Config {
    pub args: Args,
    pub engine: Box<dyn Engine>,
    /// `None` with `--audit`.
    pub case: Option<Case>,
}

fn config(args: Args) -> Result<Config> {
    let engine = engines::get(EngineName::parse(&args.engine).context("--engine")?)?;
    let case = if args.audit {
        None
    } else {
        let (vector, logits) = match &args.vector {
            None => ("command-line".to_string(), parse_logits(&args.logits)?),
            Some(name) => {
                let v = vectors::by_name(name).with_context(|| {
                    let known: Vec<&str> = vectors::all().iter().map(|v| v.name).collect();
                    format!(
                        "--vector: unknown name '{name}' (known: {})",
                        known.join(", ")
                    )
                })?;
                (v.name.to_string(), v.logits)
            }
        };
        let sampling = Sampling::parse(&args.sampling).context("--sampling")?;
        engine
            .supports(&sampling)
            .with_context(|| format!("--sampling {sampling}"))?;
        ensure!(
            (1..=MAX_DRAWS).contains(&args.draws),
            "--draws must be in 1..={MAX_DRAWS}, got {}",
            args.draws
        );
        ensure!(
            (0..=u32::MAX as i64).contains(&args.seed),
            "--seed must be in 0..={}, got {}",
            u32::MAX,
            args.seed
        );
        Some(Case {
            vector,
            logits,
            sampling,
            draws: args.draws as usize,
            seed: args.seed as u64,
        })
    };
    Ok(Config { args, engine, case })
}

/// Everything that can refuse the command line, before any work (`cmdline::run_checked`).
pub fn check(args: Args) -> Result<Config, cmdline::Failure> {
    cmdline::refuse(subject::BuildInfo::verified())?;
    cmdline::refuse(config(args))
}

fn run(c: &Config) -> Result<String> {
    let report = match &c.case {
        Some(case) => audit::run(c.engine.as_ref(), std::slice::from_ref(case), false)?.report(),
        None => {
            let report = audit::run(c.engine.as_ref(), &audit::grid_cases(), true)?.report();
            report.write(&c.args.out.results, "engines")?;
            report
        }
    };
    Ok(report.render(c.args.out.json))
}

pub fn main(argv: impl IntoIterator<Item = OsString>) -> i32 {
    cmdline::run_checked(argv, check, |c| cmdline::fail(run(&c)))
}
