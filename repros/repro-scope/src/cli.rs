//! Command-line parsing and the two modes: one prompt (default) and `--audit`.

use crate::audit;
use crate::run::{self, LoadedModel, RunConfig};
use crate::scope::{self, ScopeSpec};
use anyhow::{ensure, Context, Result};
use clap::Parser;
use engine::EngineName;
use std::ffi::OsString;

pub const PUBLISHED_PROMPT: &str = "How do you say thank you in Chinese?";
pub const DEFAULT_SCOPES: &str = "all,64,128,gen:64,llama:64";
/// The default scopes for another engine, the slices candle's examples pass: the whole
/// sequence; its last 64 tokens; the last 64 generated (candle's quantized example: its token
/// list starts empty); the last 128 of the sequence (its llama example: the list starts with
/// the prompt).
pub const CANDLE_EXAMPLE_SCOPES: &str = "all,64,gen:64,128";

/// F3: one repetition penalty, different scopes: where does greedy output part ways?
#[derive(Parser, Debug)]
#[command(name = "repro-scope")]
pub struct Args {
    #[command(flatten)]
    pub model_choice: cmdline::ModelChoice,
    /// The user turn, sent through the model's chat template.
    #[arg(long, default_value = PUBLISHED_PROMPT)]
    pub prompt: String,
    /// Repetition penalty theta (> 0).
    #[arg(long, default_value_t = 1.3, allow_negative_numbers = true)]
    pub penalty: f32,
    /// Maximum number of generated tokens, 1 to 4096.
    #[arg(long, default_value_t = 120, allow_negative_numbers = true)]
    pub max_new: i64,
    /// Comma-separated scopes: all, N (last N tokens of the sequence), gen:N (last N
    /// generated tokens), llama:N (llama.cpp's penalties sampler, window N, prompt accepted;
    /// llama.cpp only); at most 16 scopes, each window N at most 1048576. Default:
    /// all,64,128,gen:64,llama:64 (llama), all,64,gen:64,128 (candle).
    #[arg(long)]
    pub scopes: Option<String>,
    /// Whose logits, penalty and greedy choice: llama (llama.cpp, the build this binary
    /// links) or candle (its quantized GGUF decoder and `apply_repeat_penalty` on the same
    /// file and prompt ids; default build only). With candle, each scope is also decoded by
    /// llama.cpp and the two are compared.
    #[arg(long, default_value = "llama")]
    pub engine: String,
    /// Generated tokens (under all) in the context of the single-vector table, 0 to 4096.
    #[arg(long, default_value_t = 60, allow_negative_numbers = true)]
    pub vector_at: i64,
    /// Run the published prompt, the scope sweep over the prompt corpus, and write
    /// results/scope.<build>.json and results/scope-sweep.<build>.svg.
    #[arg(long)]
    pub audit: bool,
    #[command(flatten)]
    pub out: cmdline::Output,
    #[command(flatten)]
    pub decoding: cmdline::Decoding,
}

/// Largest `--max-new`, and largest `--vector-at` (a position among the generated tokens).
pub const MAX_NEW: i64 = 4096;

pub fn config(args: &Args) -> Result<RunConfig> {
    ensure!(
        args.penalty.is_finite() && args.penalty > 0.0,
        "--penalty must be a finite number > 0, got {}",
        args.penalty
    );
    ensure!(
        (1..=MAX_NEW).contains(&args.max_new),
        "--max-new must be in 1..={MAX_NEW}, got {}",
        args.max_new
    );
    let threads = args.decoding.threads()?;
    ensure!(
        (0..=MAX_NEW).contains(&args.vector_at),
        "--vector-at must be in 0..={MAX_NEW}, got {}",
        args.vector_at
    );
    ensure!(!args.prompt.trim().is_empty(), "--prompt is empty");
    let engine = EngineName::parse(&args.engine).context("--engine")?;
    let default = match engine {
        EngineName::Llama => DEFAULT_SCOPES,
        _ => CANDLE_EXAMPLE_SCOPES,
    };
    let scopes =
        scope::parse_list(args.scopes.as_deref().unwrap_or(default)).context("--scopes")?;
    if engine != EngineName::Llama {
        if let Some(s) = scopes.iter().find(|s| matches!(s, ScopeSpec::Llama(_))) {
            anyhow::bail!("--scopes: '{s}' names llama.cpp's sampler chain; with --engine {engine} use all, N or gen:N");
        }
        harness::engines::get(engine)?;
    }
    Ok(RunConfig {
        prompt: args.prompt.clone(),
        theta: args.penalty,
        max_new: args.max_new as usize,
        scopes,
        threads,
        vector_at: args.vector_at as usize,
        engine,
    })
}

/// The published run: the defaults of every flag.
pub fn published_config() -> RunConfig {
    let args = Args::try_parse_from(["repro-scope"]).expect("the defaults parse");
    config(&args).expect("the defaults are valid")
}

/// What the command line asks for, checked: the flags, the run they describe, the model file.
pub struct Config {
    pub args: Args,
    pub run: RunConfig,
    pub model: models::ModelChoice,
}

/// Everything that can refuse the command line before any work (`cmdline::run_checked`): the
/// build, the flags, the model (a named one's size and sha256; a path is loaded once in a
/// contained child by each engine that will load it, `engine_load::preflight` for another
/// engine and `harness::preflight` for llama.cpp: a file either cannot load or crashes on is
/// refused).
pub fn check(args: Args) -> Result<Config, cmdline::Failure> {
    cmdline::refuse(subject::BuildInfo::verified())?;
    let run = cmdline::refuse(config(&args))?;
    let model = cmdline::refuse(models::resolve(&args.model_choice.model))?;
    // The other engine first: every file the door is shown reaches its loader, and llama.cpp,
    // which tokenizes for it, must load the file as well.
    cmdline::refuse(crate::engine_load::preflight(run.engine, &model))?;
    cmdline::refuse(harness::preflight(&model, subject::Weights::Repacked))?;
    Ok(Config { args, run, model })
}

/// Parses `argv` and runs; returns the process exit code (see the `cmdline` crate).
pub fn main(argv: impl IntoIterator<Item = OsString>) -> i32 {
    cmdline::run_checked(argv, check, |c| {
        let loaded = cmdline::refuse(LoadedModel::load(c.model))?;
        cmdline::fail(execute(&c.args, &c.run, &loaded))
    })
}

fn execute(args: &Args, cfg: &RunConfig, m: &LoadedModel) -> Result<String> {
    let report = if args.audit && cfg.engine != EngineName::Llama {
        // Another engine's audit: the published prompt on this model (no sweep), written
        // as scope-<model>.<engine build>.{json,txt} (`file` for a model named by path).
        let r = run::run(m, cfg)?.report();
        let model = m.choice.known.map_or("file", |_| m.choice.label.as_str());
        r.write(&args.out.results, &format!("scope-{model}"))?;
        r
    } else if args.audit {
        let a = audit::run(m, cfg, audit::SweepPlan::full())?;
        a.write(&args.out.results)?;
        a.report()
    } else {
        run::run(m, cfg)?.report()
    };
    Ok(report.render(args.out.json))
}
