//! Command-line parsing and the two modes: one chain (default) and `--audit`.

use crate::audit;
use crate::chain::{self, CaseFlags, ChainCase};
use crate::draws;
use crate::fuzz;
use crate::stage::ChainStage;
use anyhow::{bail, ensure, Result};
use clap::Parser;
use std::ffi::OsString;
use std::path::PathBuf;
use subject::offered;

/// F2: does a stale `sorted` flag make llama.cpp's truncation samplers cut the wrong set?
#[derive(Parser, Debug)]
#[command(name = "repro-sortpoison")]
pub struct Args {
    #[command(flatten)]
    pub case: CaseFlags,
    #[command(flatten)]
    pub out: cmdline::Output,
    /// Run the full audit (oracle check, permutation audit, census, fuzzer, published chain)
    /// and write results/sortpoison.<build>.json.
    #[arg(long, conflicts_with = "census")]
    pub audit: bool,
    /// Print only the injector census (every row in its own child process; `--json` for its
    /// JSON).
    #[arg(long, conflicts_with = "fuzz")]
    pub census: bool,
    /// Print only the chain fuzzer's report over --fuzz-chains chains (run in contained
    /// chunks of 2,000, as in --audit).
    #[arg(long, conflicts_with = "audit")]
    pub fuzz: bool,
    /// Chains the fuzzer tries in --audit or --fuzz, at most 1000000 (default 100000).
    #[arg(long, default_value_t = audit::FUZZ_CHAINS)]
    pub fuzz_chains: usize,
    /// GGUF file whose vocabulary the census uses for grammar and infill (default: the cached
    /// SmolLM2 model).
    #[arg(long)]
    pub vocab_model: Option<PathBuf>,
}

/// Most chains `--fuzz-chains` asks for: ten times the audit's.
pub const MAX_FUZZ_CHAINS: usize = 1_000_000;

/// Random honest-flag inputs per stage for the oracle gate of a single chain.
pub const CHAIN_GATE_INPUTS: usize = 200;

/// The chain the flags describe (and the fuzzer's chain count checked).
pub fn case(args: &Args) -> Result<ChainCase> {
    let fixed = [
        (args.audit, "--audit"),
        (args.census, "--census"),
        (args.fuzz, "--fuzz"),
    ];
    if let Some((_, mode)) = fixed.iter().find(|(on, _)| *on && args.case.given()) {
        bail!("{mode} runs fixed cases; it does not take --logits, --stage or --history");
    }
    let case = args.case.case()?;
    ensure!(
        args.fuzz_chains <= MAX_FUZZ_CHAINS,
        "--fuzz-chains must be at most {MAX_FUZZ_CHAINS}, got {}",
        args.fuzz_chains
    );
    Ok(case)
}

/// The chain a line of `repro-sortpoison` arguments describes (as in tests/regressions.txt).
pub fn case_from_line(line: &str) -> Result<ChainCase> {
    case(&chain::parse_line(line)?)
}

/// What the command line asks for, checked: the flags, the chain they describe, the build.
pub struct CheckedArgs {
    pub args: Args,
    pub case: ChainCase,
    pub build: subject::BuildInfo,
}

/// Everything that can refuse the command line, before any work (see `cmdline::run_checked`).
/// A `--vocab-model` file is loaded once in a contained child here (`subject::preflight`), so
/// a file that makes llama.cpp abort is refused in one line.
pub fn check(args: Args) -> Result<CheckedArgs, cmdline::Failure> {
    let build = cmdline::refuse(subject::BuildInfo::verified())?;
    let case = cmdline::refuse(case(&args))?;
    if let Some(path) = &args.vocab_model {
        cmdline::refuse(subject::preflight(path, subject::Weights::Repacked))?;
    }
    Ok(CheckedArgs { args, case, build })
}

/// Parses `argv` and runs; returns the process exit code (see the `cmdline` crate).
pub fn main(argv: impl IntoIterator<Item = OsString>) -> i32 {
    cmdline::run_checked(argv, check, |c| {
        cmdline::fail(run(&c.args, &c.case, &c.build))
    })
}

/// One chain's report: the chain comparison, or, for a chain that ends in a drawing stage, its
/// draws; with the oracle gate on the chain's own stages and every detector's controls.
pub fn chain_report(case: &ChainCase, build: &subject::BuildInfo) -> Result<report::Report> {
    let draws = case.stages.last().is_some_and(ChainStage::draws);
    let r = match offered(chain::run(case))? {
        Ok(r) => r,
        Err(why) => {
            let mut controls = chain::controls()?;
            if draws {
                controls.extend(draws::controls()?);
            }
            return Ok(chain::not_offered_report(case, &why, build, controls));
        }
    };
    let mut controls = chain::controls()?;
    let gate = fuzz::chain_gate(case, fuzz::ORACLE_CHECK_SEED, CHAIN_GATE_INPUTS)?;
    controls.insert(
        0,
        report::Control::oracle_check(
            "oracle gate on this chain's stages",
            gate.passed(),
            gate.summary(),
        ),
    );
    if draws {
        let d = draws::run(case)?;
        controls.extend(draws::controls()?);
        return Ok(draws::report(case, &r, &d, build, controls));
    }
    Ok(chain::report(case, &r, build, controls))
}

fn run(args: &Args, case: &ChainCase, build: &subject::BuildInfo) -> Result<String> {
    let vocab_path = args
        .vocab_model
        .clone()
        .unwrap_or_else(audit::default_vocab_model);
    let text = |json: serde_json::Value, text: String| match args.out.json {
        true => format!("{json:#}\n"),
        false => text,
    };
    if args.fuzz {
        let r = crate::fuzz::fuzz_contained(crate::fuzz::FUZZ_SEED, args.fuzz_chains)?;
        return Ok(text(serde_json::to_value(&r)?, r.to_text()));
    }
    if args.census {
        let c = crate::census::run(&vocab_path)?;
        return Ok(text(serde_json::to_value(&c)?, c.to_text()));
    }
    if !args.audit {
        return Ok(chain_report(case, build)?.render(args.out.json));
    }
    let audit = audit::run(args.fuzz_chains, &vocab_path)?;
    let report = audit.report();
    report.write(&args.out.results, "sortpoison")?;
    audit
        .guard_report()
        .write(&args.out.results, "sortpoison-guard")?;
    Ok(report.render(args.out.json))
}
