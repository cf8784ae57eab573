//! Command-line parsing: the registered chains (default) or one chain of `--stage`s, on one
//! model; `--audit` also writes results/.

use crate::audit;
use crate::case::{self, Case};
use anyhow::Result;
use clap::Parser;
use harness::LoadedModel;
use std::ffi::OsString;

/// F8: does llama.cpp's in-graph sampling keep what the same chain keeps on the CPU?
#[derive(Parser, Debug)]
#[command(name = "repro-ingraph", after_help = stage_help())]
pub struct Args {
    #[command(flatten)]
    pub out: cmdline::Output,
    #[command(flatten)]
    pub model_choice: cmdline::ModelChoice,
    #[command(flatten)]
    pub decoding: cmdline::Decoding,
    /// One stage of a chain of your own, in order (repeat it); without any, the registered
    /// chains run. Example: --stage top_k=40 --stage top_p=0.9:8 --stage dist=7
    #[arg(long = "stage", value_name = "TEXT")]
    pub stages: Vec<String>,
    /// The user turn decoded before sampling (through the model's chat template).
    #[arg(long, default_value = audit::PROMPT)]
    pub prompt: String,
    /// Also write results/ingraph.<build>.{json,txt} (the registered chains only).
    #[arg(long)]
    pub audit: bool,
    /// Draws through the graph's dist for the draw row and each of its controls (registered
    /// chains only), 300 to 100000 (below 300 the detector pools bins and the stated power
    /// would not be its own); 0 leaves the draw row out.
    #[arg(long, default_value_t = crate::draws::DRAWS as i64, allow_negative_numbers = true)]
    pub draws: i64,
}

fn stage_help() -> String {
    format!("Stages (--stage):\n{}", oracle::stage::table::help())
}

/// What the command line asks for, checked.
pub struct Config {
    pub args: Args,
    pub cases: Vec<Case>,
    pub threads: i32,
    pub model: models::ModelChoice,
}

/// Everything that can refuse the command line, before any work (see `cmdline::run_checked`).
pub fn check(args: Args) -> Result<Config, cmdline::Failure> {
    cmdline::refuse(subject::BuildInfo::verified())?;
    let threads = cmdline::refuse(args.decoding.threads())?;
    if args.audit && !args.stages.is_empty() {
        return Err(cmdline::Failure::BadInput(anyhow::anyhow!(
            "--audit runs the registered chains; drop --stage"
        )));
    }
    if args.draws != 0 && !(crate::draws::MIN_DRAWS as i64..=100_000).contains(&args.draws) {
        return Err(cmdline::Failure::BadInput(anyhow::anyhow!(
            "--draws must be 0 or in {}..=100000, got {}",
            crate::draws::MIN_DRAWS,
            args.draws
        )));
    }
    let cases = if args.stages.is_empty() {
        case::registered()
    } else {
        vec![cmdline::refuse(Case::from_cli(&args.stages))?]
    };
    let model = cmdline::refuse(models::resolve(&args.model_choice.model))?;
    cmdline::refuse(harness::preflight(&model, subject::Weights::Repacked))?;
    Ok(Config {
        args,
        cases,
        threads,
        model,
    })
}

/// Parses `argv` and runs; returns the process exit code (see the `cmdline` crate).
pub fn main(argv: impl IntoIterator<Item = OsString>) -> i32 {
    cmdline::run_checked(argv, check, |c| {
        let loaded = cmdline::refuse(LoadedModel::load(c.model.clone()))?;
        cmdline::fail(execute(&c, &loaded))
    })
}

fn execute(c: &Config, m: &LoadedModel) -> Result<String> {
    let registered = c.args.stages.is_empty();
    let draws = (registered && c.args.draws > 0).then_some(c.args.draws as usize);
    let a = audit::run(m, &c.args.prompt, &c.cases, draws, registered, c.threads)?;
    if c.args.audit {
        a.write(&c.args.out.results, &stem(m))?;
    }
    Ok(a.report().render(c.args.out.json))
}

/// The reports' file stem: `ingraph` on the default model, `ingraph-<model>` on another
/// (`ingraph-file` for a model named by path).
fn stem(m: &LoadedModel) -> String {
    match m.choice.known {
        Some(_) if m.choice.label == models::SMOLLM2.name => "ingraph".to_string(),
        Some(_) => format!("ingraph-{}", m.choice.label),
        None => "ingraph-file".to_string(),
    }
}
