//! Command-line parsing and the two modes: one gauge run (default) and `--audit`.

use crate::audit;
use crate::shift::{self, GaugeConfig, SamplerKind};
use anyhow::{ensure, Result};
use clap::Parser;
use harness::LoadedModel;
use std::ffi::OsString;
use std::path::PathBuf;
use subject::BuildInfo;

pub use cli::{EXIT_BAD_INPUT, EXIT_FAILED};

#[derive(Parser, Debug)]
#[command(
    name = "repro-gauge",
    about = "F4: does the repetition penalty depend on where the logits' zero sits?"
)]
pub struct Args {
    /// smollm2, gemma3 (the files `make models` caches) or a path to a GGUF file.
    #[arg(long, default_value = "smollm2")]
    pub model: String,
    /// The user turn, sent through the model's chat template.
    #[arg(long, default_value = audit::AUDIT_PROMPT)]
    pub prompt: String,
    /// Penalty strengths, comma-separated (each > 0).
    #[arg(long, default_value = "1.1,1.3", allow_hyphen_values = true)]
    pub theta: String,
    /// Shifts added to every logit, comma-separated.
    #[arg(long, default_value = "-5,-2,-1,1,2,5", allow_hyphen_values = true)]
    pub shifts: String,
    /// Maximum number of generated tokens.
    #[arg(long, default_value_t = 64, allow_negative_numbers = true)]
    pub max_new: i64,
    /// CPU threads for decoding (fixed, so runs are byte-identical).
    #[arg(long, default_value_t = 2, allow_negative_numbers = true)]
    pub threads: i64,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Gauge runs on SmolLM2 and Gemma3 and the JSON corpus; writes results/gauge.<build>.json,
    /// results/json.<build>.json and the two plots.
    #[arg(long)]
    pub audit: bool,
    /// With --audit: only the first N prompts of the JSON corpus.
    #[arg(long)]
    pub json_prompts: Option<usize>,
    /// builtin: the sign branch through llama.cpp's penalties stage; ledger: sign and
    /// normalized through ledger-penalties in a real llama.cpp chain.
    #[arg(long, default_value = "builtin", value_parser = ["builtin", "ledger"])]
    pub sampler: String,
    /// Where --audit writes.
    #[arg(long, default_value = "results")]
    pub results: PathBuf,
}

fn numbers(flag: &str, text: &str) -> Result<Vec<f32>> {
    let v = text
        .split(',')
        .map(|p| {
            let x: f32 = p
                .trim()
                .parse()
                .map_err(|_| anyhow::anyhow!("{flag}: '{}' is not a number", p.trim()))?;
            ensure!(x.is_finite(), "{flag}: '{}' is not finite", p.trim());
            Ok(x)
        })
        .collect::<Result<Vec<_>>>()?;
    ensure!(!v.is_empty(), "{flag} is empty");
    Ok(v)
}

pub fn config(args: &Args) -> Result<GaugeConfig> {
    let thetas = numbers("--theta", &args.theta)?;
    for t in &thetas {
        ensure!(*t > 0.0, "--theta must be > 0, got {t}");
    }
    let shifts = numbers("--shifts", &args.shifts)?;
    for c in &shifts {
        // Larger shifts would leave f32 logits without resolution; tiny non-zero ones are
        // below it. Both would test rounding, not the operators.
        ensure!(
            c.abs() <= 1000.0 && (*c == 0.0 || c.abs() >= 1e-3),
            "--shifts: {c} is outside 1e-3 <= |c| <= 1000 (or 0)"
        );
    }
    ensure!(
        (1..=4096).contains(&args.max_new),
        "--max-new must be in 1..=4096, got {}",
        args.max_new
    );
    ensure!(
        (1..=64).contains(&args.threads),
        "--threads must be in 1..=64, got {}",
        args.threads
    );
    ensure!(!args.prompt.trim().is_empty(), "--prompt is empty");
    ensure!(
        !(args.json_prompts.is_some() && !args.audit),
        "--json-prompts only applies with --audit"
    );
    Ok(GaugeConfig {
        sampler: if args.sampler == "ledger" {
            SamplerKind::Ledger
        } else {
            SamplerKind::Builtin
        },
        prompt: args.prompt.clone(),
        thetas,
        shifts,
        max_new: args.max_new as usize,
        threads: args.threads as i32,
    })
}

/// Parses `argv` and runs; returns the process exit code (see the `cli` crate).
pub fn main(argv: impl IntoIterator<Item = OsString>) -> i32 {
    cli::run(argv, |args: Args| {
        let build = cli::refuse(BuildInfo::verified())?;
        let cfg = cli::refuse(config(&args))?;
        let names: Vec<String> = if args.audit {
            models::KNOWN.iter().map(|k| k.name.to_string()).collect()
        } else {
            vec![args.model.clone()]
        };
        let loaded = cli::refuse(
            names
                .iter()
                .map(|n| LoadedModel::load(models::resolve(n)?))
                .collect::<Result<Vec<_>>>(),
        )?;
        cli::fail(execute(&args, &cfg, &loaded, &build))
    })
}

fn execute(
    args: &Args,
    cfg: &GaugeConfig,
    loaded: &[LoadedModel],
    build: &BuildInfo,
) -> Result<String> {
    let report = if args.audit {
        let a = audit::run(loaded, cfg, args.json_prompts)?;
        a.write(&args.results)?;
        a.report()
    } else {
        audit::single_report(shift::run(&loaded[0], cfg)?, build)?
    };
    Ok(report.render(args.json))
}
