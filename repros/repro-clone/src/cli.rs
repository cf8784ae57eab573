//! Command-line parsing and the three modes: the minimal case (default), `--stateful` (one
//! clone-incomplete row per stateful sampler) and `--audit` (everything, written to results/).

use crate::sweep::SweepBudget;
use crate::{audit, minimal, stateful};
use anyhow::{Context, Result};
use clap::Parser;
use ledger::SamplerKind;
use oracle::penalty::CountProbe;
use oracle::window::WindowLen;
use oracle::TokenId;
use std::ffi::OsString;
use subject::offered;

/// F1: does cloning llama.cpp's penalties sampler keep its token counts?
#[derive(Parser, Debug)]
#[command(name = "repro-clone")]
pub struct Args {
    /// penalty_last_n, the window length, 0 to 4096 (default 4).
    #[arg(long, allow_negative_numbers = true)]
    pub last_n: Option<i64>,
    /// Token ids accepted before the clone, comma-separated: 1 to 4096 ids, each 0 to 262143
    /// (default: 5,5,6).
    #[arg(long, allow_hyphen_values = true, value_parser = parse_ids)]
    pub history: Option<IdList>,
    /// Token ids accepted by the clone afterwards, comma-separated: 1 to 4096 ids, each 0 to
    /// 262143 (default: 7,8 with the default history, none otherwise).
    #[arg(long, allow_hyphen_values = true, value_parser = parse_ids)]
    pub then: Option<IdList>,
    #[command(flatten)]
    pub out: cmdline::Output,
    /// Clone-then-continue for every stateful sampler: one `clone-incomplete-<sampler>` verdict
    /// row each, with the planted controls.
    #[arg(long, conflicts_with = "audit")]
    pub stateful: bool,
    /// Run the full audit (sweep, clone equivalence, controls) and write
    /// results/clone.<build>.{json,txt}; with the built-in sampler also the stateful rows,
    /// results/clone-stateful.<build>.{json,txt}.
    #[arg(long)]
    pub audit: bool,
    /// Internal: the child side of the memcheck probe (runs only under valgrind).
    #[arg(long, hide = true)]
    pub memcheck_probe: Option<String>,
    /// With --audit: the sweep's domain is every sequence of length L over alphabets 2 to
    /// --sweep-max-alphabet with a^L <= 2^BITS (4 to 17; the audit's 17 is at least the
    /// published sweep's size).
    #[arg(long, requires = "audit", default_value_t = SweepBudget::AUDIT.bits,
          value_parser = clap::value_parser!(u32).range(4..=17))]
    pub sweep_bits: u32,
    /// With --audit: the largest alphabet of the sweep (2 to 5).
    #[arg(long, requires = "audit", default_value_t = SweepBudget::AUDIT.max_alphabet,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(2..=5))]
    pub sweep_max_alphabet: usize,
    /// Which penalties stage to audit: llama.cpp's own (builtin) or ledger-penalties (ledger).
    #[arg(long, default_value = "builtin", value_parser = ["builtin", "ledger"])]
    pub sampler: String,
}

/// A comma-separated list of token ids, as one flag value.
#[derive(Debug, Clone, PartialEq)]
pub struct IdList(pub Vec<TokenId>);

/// Most ids `--history` or `--then` takes.
pub const MAX_IDS: usize = 4096;
/// Largest token id: Gemma3's vocabulary (262,144), the largest any repro loads, less one.
/// `--sampler ledger` keeps dense counts up to the largest id.
pub const MAX_ID: i32 = 262_143;
/// Largest `--last-n`. The readout is calibrated at every count from 0 to the window, which
/// costs the square of the window (4096 takes under a second with the default history).
pub const MAX_LAST_N: i64 = 4096;

/// Parses `5,5,6`: 1 to [`MAX_IDS`] ids, each an integer from 0 to [`MAX_ID`].
fn parse_ids(text: &str) -> Result<IdList, String> {
    if text.trim().is_empty() {
        return Err("must name at least one token id".to_string());
    }
    let n = text.split(',').count();
    if n > MAX_IDS {
        return Err(format!("{n} token ids; at most {MAX_IDS}"));
    }
    text.split(',')
        .map(|part| {
            let part = part.trim();
            match part.parse::<i32>() {
                Ok(id) if id < 0 => Err(format!("token id {id} is negative")),
                Ok(id) if id > MAX_ID => Err(format!("token id {id} is above {MAX_ID}")),
                Ok(id) => Ok(TokenId(id)),
                Err(_) => Err(format!("'{part}' is not a token id")),
            }
        })
        .collect::<Result<Vec<_>, String>>()
        .map(IdList)
}

/// The scenario the flags describe.
pub fn scenario(args: &Args) -> Result<minimal::Scenario> {
    let scenario_flags = args.last_n.is_some() || args.history.is_some() || args.then.is_some();
    anyhow::ensure!(
        !((args.audit || args.stateful) && scenario_flags),
        "--audit and --stateful run fixed cases; they do not take --last-n, --history or --then"
    );
    anyhow::ensure!(
        !(args.stateful && args.sampler != "builtin"),
        "--stateful audits llama.cpp's own samplers; it does not take --sampler"
    );
    let published = minimal::published();
    let last_n = args.last_n.unwrap_or(published.last_n.0 as i64);
    anyhow::ensure!(last_n >= 0, "--last-n must be >= 0, got {last_n}");
    anyhow::ensure!(
        last_n <= MAX_LAST_N,
        "--last-n must be <= {MAX_LAST_N}, got {last_n}"
    );
    let (history, default_then) = match &args.history {
        Some(h) => (h.0.clone(), Vec::new()),
        None => (published.history, published.then),
    };
    Ok(minimal::Scenario {
        last_n: WindowLen(last_n as usize),
        history,
        then: args.then.clone().map_or(default_then, |t| t.0),
    })
}

/// What the command line asks for, checked.
pub enum CheckedArgs {
    /// The child side of the memcheck probe.
    Probe(stateful::ProbeTarget),
    /// The minimal case, `--stateful` or `--audit`.
    Run(Box<CheckedRun>),
}

/// The flags of a run, the scenario they describe, and the build.
pub struct CheckedRun {
    pub args: Args,
    pub scenario: minimal::Scenario,
    pub build: subject::BuildInfo,
}

/// Everything that can refuse the command line, before any work (see `cmdline::run_checked`).
pub fn check(args: Args) -> Result<CheckedArgs, cmdline::Failure> {
    if let Some(name) = &args.memcheck_probe {
        return Ok(CheckedArgs::Probe(cmdline::refuse(
            stateful::probe_target(name),
        )?));
    }
    let build = cmdline::refuse(subject::BuildInfo::verified())?;
    let scenario = cmdline::refuse(scenario(&args))?;
    Ok(CheckedArgs::Run(Box::new(CheckedRun {
        args,
        scenario,
        build,
    })))
}

/// Parses `argv` and runs; returns the process exit code (see the `cmdline` crate).
pub fn main(argv: impl IntoIterator<Item = OsString>) -> i32 {
    cmdline::run_checked(argv, check, |config| match config {
        CheckedArgs::Probe(target) => {
            cmdline::refuse(stateful::probe_main(&target, stateful::Duplicate::Clone))?;
            Ok(String::new())
        }
        CheckedArgs::Run(c) => cmdline::fail(run(&c.args, &c.scenario, &c.build)),
    })
}

fn run(args: &Args, scenario: &minimal::Scenario, build: &subject::BuildInfo) -> Result<String> {
    let cp = CountProbe::STANDARD;
    let kind = if args.sampler == "ledger" {
        SamplerKind::LedgerPenalties
    } else {
        SamplerKind::Builtin
    };
    let exe = std::env::current_exe().context("locating this binary for the memcheck probe")?;
    if args.stateful {
        return Ok(stateful::run(&exe)?.report().render(args.out.json));
    }
    if !args.audit {
        let report = match offered(minimal::run(scenario, cp, kind))? {
            Ok(outcome) => minimal::report(scenario, &outcome, cp, kind, build)?,
            Err(why) => minimal::not_offered_report(scenario, &why, kind, build)?,
        };
        return Ok(report.render(args.out.json));
    }
    // The fix's results sit beside the finding's: clone-ledger.<build>.json.
    let stem = match kind {
        SamplerKind::Builtin => "clone",
        SamplerKind::LedgerPenalties => "clone-ledger",
    };
    let budget = SweepBudget {
        bits: args.sweep_bits,
        max_alphabet: args.sweep_max_alphabet,
    };
    let audit = match offered(audit::run(cp, kind, budget))? {
        Ok(audit) => audit,
        // No sweep ran, so there is no timing to write either.
        Err(why) => {
            let report = minimal::not_offered_report(scenario, &why, kind, build)?;
            report.write(&args.out.results, stem)?;
            return Ok(report.render(args.out.json));
        }
    };
    eprintln!("{}", audit.timing_text());
    let report = audit.report();
    report.write(&args.out.results, stem)?;
    if kind == SamplerKind::Builtin {
        stateful::run(&exe)?.write(&args.out.results)?;
    }
    let timing_dir = args.out.results.join("timing");
    std::fs::create_dir_all(&timing_dir)
        .with_context(|| format!("creating {}", timing_dir.display()))?;
    let timing = timing_dir.join(format!("{stem}.{}.json", build.tag()));
    std::fs::write(
        &timing,
        serde_json::to_string_pretty(&audit.timing())? + "\n",
    )
    .with_context(|| format!("writing {}", timing.display()))?;
    Ok(report.render(args.out.json))
}
