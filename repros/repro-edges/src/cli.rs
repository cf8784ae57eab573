//! Command-line parsing: which samplers and inputs to probe, the probe deadline, and
//! `--audit` (write `results/edges.<build>.{json,txt}`).

use crate::audit::{self, Plan};
use crate::{inputs, samplers};
use anyhow::{ensure, Result};
use clap::Parser;
use std::ffi::OsString;
use std::time::Duration;

/// F6: what llama.cpp's samplers do with edge inputs, each probe in a supervised child.
#[derive(Parser, Debug)]
#[command(name = "repro-edges")]
pub struct Args {
    /// Samplers to probe, comma-separated (default: all; the names are in the output's
    /// sampler list). At most one of each.
    #[arg(long, allow_hyphen_values = true)]
    pub sampler: Option<String>,
    /// Inputs to probe, comma-separated (default: all). At most one of each.
    #[arg(long, allow_hyphen_values = true)]
    pub input: Option<String>,
    /// Seconds a probe may run before it is killed and recorded as timing out (0.1 to 600;
    /// a time-out is retried once).
    #[arg(long, default_value_t = 5.0, allow_negative_numbers = true)]
    pub timeout: f64,
    #[command(flatten)]
    pub out: cmdline::Output,
    /// Write results/edges.<build>.{json,txt} as well as printing the report.
    #[arg(long, conflicts_with = "supervisor_cost")]
    pub audit: bool,
    /// Benchmark instead: time N probes in this process and N in a child (1 to 10000), print
    /// the medians and their ratio, and write results/bench/supervisor-cost.json.
    #[arg(long, allow_negative_numbers = true)]
    pub supervisor_cost: Option<i64>,
}

/// Splits a comma list and checks every name against `known`, once each.
fn names(flag: &str, text: &Option<String>, known: &[&str]) -> Result<Vec<String>> {
    let Some(text) = text else {
        return Ok(Vec::new());
    };
    let mut out: Vec<String> = Vec::new();
    for name in text.split(',').map(str::trim) {
        let known_names = || known.join(", ");
        ensure!(
            known.contains(&name),
            "{flag}: unknown name '{name}' (known: {})",
            known_names()
        );
        ensure!(
            !out.iter().any(|n| n == name),
            "{flag}: '{name}' is listed twice"
        );
        out.push(name.to_string());
    }
    Ok(out)
}

/// The plan the arguments describe, or why they are refused.
pub fn plan(args: &Args) -> Result<Plan> {
    let sampler_names: Vec<&str> = samplers::subjects().iter().map(|s| s.name).collect();
    let input_names: Vec<&str> = inputs::all().iter().map(|i| i.name).collect();
    let t = args.timeout;
    ensure!(
        t.is_finite() && (0.1..=600.0).contains(&t),
        "--timeout must be between 0.1 and 600 seconds, got {t}"
    );
    ensure!(
        !(args.audit && (args.sampler.is_some() || args.input.is_some())),
        "--audit writes the full table; it does not take --sampler or --input"
    );
    Ok(Plan {
        samplers: names("--sampler", &args.sampler, &sampler_names)?,
        inputs: names("--input", &args.input, &input_names)?,
        timeout: Duration::from_secs_f64(args.timeout),
    })
}

pub struct Config {
    pub args: Args,
    pub plan: Plan,
    /// `--supervisor-cost N`: the benchmark's rounds.
    pub cost_rounds: Option<usize>,
}

/// Everything that can refuse the command line, before any work (`cmdline::run_checked`).
pub fn check(args: Args) -> Result<Config, cmdline::Failure> {
    cmdline::refuse(subject::BuildInfo::verified())?;
    let plan = cmdline::refuse(plan(&args))?;
    let rounds = |n: i64| {
        ensure!(
            (1..=10_000).contains(&n),
            "--supervisor-cost must be in 1..=10000, got {n}"
        );
        Ok(n as usize)
    };
    let cost_rounds = cmdline::refuse(args.supervisor_cost.map(rounds).transpose())?;
    Ok(Config {
        args,
        plan,
        cost_rounds,
    })
}

fn supervisor_cost(c: &Config, rounds: usize) -> Result<String> {
    let (text, value) = crate::cost::measure(rounds, c.plan.timeout)?;
    let dir = c.args.out.results.join("bench");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("supervisor-cost.json"), format!("{value:#}\n"))?;
    Ok(text)
}

fn run(c: &Config) -> Result<String> {
    if let Some(rounds) = c.cost_rounds {
        return supervisor_cost(c, rounds);
    }
    let report = audit::run(&c.plan)?.report();
    if c.args.audit {
        report.write(&c.args.out.results, "edges")?;
    }
    Ok(report.render(c.args.out.json))
}

pub fn main(argv: impl IntoIterator<Item = OsString>) -> i32 {
    cmdline::run_checked(argv, check, |c| cmdline::fail(run(&c)))
}
