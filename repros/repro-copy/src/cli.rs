//! Command-line parsing: the rows printed (default), `--audit` (also written to results/), and
//! the hidden child side of the memcheck probe.

use crate::audit;
use anyhow::{Context, Result};
use clap::Parser;
use repro_clone::stateful::{self, Duplicate};
use std::ffi::OsString;

/// F9: does llama_sampler_copy carry every stateful sampler's state, and only its source's?
#[derive(Parser, Debug)]
#[command(name = "repro-copy")]
pub struct Args {
    #[command(flatten)]
    pub out: cmdline::Output,
    /// Also write results/copy.<build>.{json,txt}.
    #[arg(long)]
    pub audit: bool,
    /// Internal: the child side of the memcheck probe (runs only under valgrind).
    #[arg(long, hide = true)]
    pub memcheck_probe: Option<String>,
}

/// What the command line asks for, checked.
pub enum CheckedArgs {
    /// The child side of the memcheck probe: copy, then accept before any apply.
    Probe(stateful::ProbeTarget),
    Run(Box<Args>),
}

/// Everything that can refuse the command line, before any work (see `cmdline::run_checked`).
pub fn check(args: Args) -> Result<CheckedArgs, cmdline::Failure> {
    if let Some(name) = &args.memcheck_probe {
        return Ok(CheckedArgs::Probe(cmdline::refuse(
            stateful::probe_target(name),
        )?));
    }
    cmdline::refuse(subject::BuildInfo::verified())?;
    Ok(CheckedArgs::Run(Box::new(args)))
}

/// Parses `argv` and runs; returns the process exit code (see the `cmdline` crate).
pub fn main(argv: impl IntoIterator<Item = OsString>) -> i32 {
    cmdline::run_checked(argv, check, |config| match config {
        CheckedArgs::Probe(target) => {
            cmdline::refuse(stateful::probe_main(&target, Duplicate::CopyOntoFresh))?;
            Ok(String::new())
        }
        CheckedArgs::Run(args) => cmdline::fail(run(&args)),
    })
}

fn run(args: &Args) -> Result<String> {
    let exe = std::env::current_exe().context("locating this binary for the memcheck probe")?;
    let audit = audit::run(&exe)?;
    if args.audit {
        audit.write(&args.out.results)?;
    }
    Ok(audit.report().render(args.out.json))
}
