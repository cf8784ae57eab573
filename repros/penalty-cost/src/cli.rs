//! Command-line parsing, the checks on the flags, and the run that writes
//! `bench/penalty-cost.{json,svg}`.

use crate::e2e::{self, Plan};
use crate::{apply, output};
use anyhow::{ensure, Context, Result};
use clap::Parser;
use models::ModelChoice;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Instant;
use subject::BuildInfo;

/// The vocabulary sizes of the per-apply bench: SmolLM2's and Gemma3's.
pub const VOCABS: [usize; 2] = [49_152, 262_144];
/// Fewest end-to-end rounds: a median's interval over fewer says little.
pub const MIN_E2E_ROUNDS: usize = 20;
pub const MAX_E2E_ROUNDS: usize = 1000;
/// Most tokens per generation (the context is sized for the prompt and these).
pub const MAX_TOKENS: usize = 2048;
pub const MAX_ROUNDS: usize = 10_000;

#[derive(Parser, Debug, Clone, PartialEq)]
#[command(
    name = "penalty-cost",
    about = "F5: what the penalty stage costs per apply and per token"
)]
pub struct Args {
    /// Rounds of the per-apply bench (each applies every stage once in each layout), 1 to
    /// 10000.
    #[arg(long, default_value_t = 300)]
    pub rounds: usize,
    /// Rounds of the end-to-end run (each generates --tokens with no penalty, llama.cpp's
    /// penalties and ledger-penalties, in turn), 20 to 1000.
    #[arg(long, default_value_t = 30)]
    pub e2e_rounds: usize,
    /// Tokens per end-to-end generation (2 to 2048).
    #[arg(long, default_value_t = 48)]
    pub tokens: usize,
    /// Decoding threads of the end-to-end run, 1 to 64. One by default: on a shared 2-core
    /// machine two threads wait on each other whenever a neighbour holds a core.
    #[arg(long, default_value_t = 1)]
    pub threads: i32,
    /// Where to write bench/penalty-cost.json and bench/penalty-cost.svg.
    #[arg(long, default_value = "results")]
    pub results: PathBuf,
    /// Instead of the bench: time llama.cpp's penalties stage of this build against the same
    /// program built on another llama.cpp (the patched build's penalty-cost), --rounds
    /// alternating turns per row; writes bench/penalty-versus.json.
    #[arg(long, value_name = "PENALTY_COST")]
    pub against: Option<PathBuf>,
    /// Serve timing requests on stdin for a parent run with --against (internal).
    #[arg(long, hide = true)]
    pub worker: bool,
}

impl Args {
    /// Refuses values the run cannot use.
    pub fn check(&self) -> Result<()> {
        ensure!(
            (1..=MAX_ROUNDS).contains(&self.rounds),
            "--rounds must be between 1 and {MAX_ROUNDS}, got {}",
            self.rounds
        );
        ensure!(
            self.e2e_rounds >= MIN_E2E_ROUNDS,
            "--e2e-rounds must be >= {MIN_E2E_ROUNDS} (the interval is over rounds), got {}",
            self.e2e_rounds
        );
        ensure!(
            self.e2e_rounds <= MAX_E2E_ROUNDS,
            "--e2e-rounds must be <= {MAX_E2E_ROUNDS}, got {}",
            self.e2e_rounds
        );
        ensure!(
            (2..=MAX_TOKENS).contains(&self.tokens),
            "--tokens must be between 2 and {MAX_TOKENS} (a step is timed between two tokens), got {}",
            self.tokens
        );
        ensure!(
            (1..=64).contains(&self.threads),
            "--threads must be between 1 and 64, got {}",
            self.threads
        );
        Ok(())
    }

    pub fn plan(&self) -> Plan {
        Plan {
            rounds: self.e2e_rounds,
            tokens: self.tokens,
            threads: self.threads,
        }
    }
}

/// What the command line asks for, checked: the flags, the build, and the end-to-end model.
pub struct Config {
    pub args: Args,
    pub build: BuildInfo,
    pub model: ModelChoice,
}

/// Everything that can refuse the command line before any work (see `cmdline::run_checked`):
/// the flags, the build, and the model (its size and sha256), so that a missing or corrupt
/// model is refused before minutes of per-apply timing.
pub fn check(args: Args) -> Result<Config, cmdline::Failure> {
    cmdline::refuse(args.check())?;
    if let Some(bin) = &args.against {
        if !bin.is_file() {
            return Err(cmdline::Failure::BadInput(anyhow::anyhow!(
                "--against {}: no such file",
                bin.display()
            )));
        }
    }
    let build = cmdline::refuse(BuildInfo::verified())?;
    let model = cmdline::refuse(models::resolve(e2e::MODEL))?;
    Ok(Config { args, build, model })
}

pub fn main(argv: impl IntoIterator<Item = OsString>) -> i32 {
    cmdline::run_checked(argv, check, |c| {
        if c.args.worker {
            return cmdline::fail(crate::versus::serve().map(|()| String::new()));
        }
        if let Some(bin) = &c.args.against {
            return cmdline::fail(versus(&c.args, bin));
        }
        cmdline::fail(run(&c.args, &c.build, c.model))
    })
}

/// The stock-against-patched comparison, written to bench/penalty-versus.json.
fn versus(args: &Args, bin: &std::path::Path) -> Result<String> {
    let v = crate::versus::compare(bin, &VOCABS, args.rounds)?;
    let dir = args.results.join("bench");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join("penalty-versus.json");
    std::fs::write(&path, serde_json::to_string_pretty(&v)? + "\n")
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(crate::versus::text(&v))
}

/// Both parts, then the files; returns the text for stdout. Progress goes to stderr.
pub fn run(args: &Args, build: &BuildInfo, model: ModelChoice) -> Result<String> {
    let start = Instant::now();
    let mut rows = Vec::new();
    for n in VOCABS {
        eprintln!("per apply: {n} candidates, {} rounds", args.rounds);
        rows.extend(apply::per_apply(n, args.rounds)?);
    }
    let plan = args.plan();
    eprintln!(
        "end to end: {} rounds of {} tokens per variant on {}",
        plan.rounds,
        plan.tokens,
        e2e::MODEL
    );
    let e = e2e::run(model, &plan)?;
    let dir = args.results.join("bench");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let json_path = dir.join("penalty-cost.json");
    let value = output::json(build, args.rounds, &rows, &e);
    std::fs::write(&json_path, serde_json::to_string_pretty(&value)? + "\n")
        .with_context(|| format!("writing {}", json_path.display()))?;
    let svg_path = dir.join("penalty-cost.svg");
    std::fs::write(&svg_path, output::svg(&value)?)
        .with_context(|| format!("writing {}", svg_path.display()))?;
    eprintln!("penalty-cost took {:.0} s", start.elapsed().as_secs_f64());
    Ok(output::text(build, args.rounds, &rows, &e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The binary's name, then `flags` split at spaces.
    fn argv(flags: &str) -> impl Iterator<Item = &str> {
        std::iter::once("penalty-cost").chain(flags.split_whitespace())
    }

    fn parse(flags: &str) -> std::result::Result<Args, clap::Error> {
        Args::try_parse_from(argv(flags))
    }

    #[test]
    fn defaults_pass_their_own_checks() {
        let a = parse("").unwrap();
        assert_eq!(
            (a.rounds, a.e2e_rounds, a.tokens, a.threads),
            (300, 30, 48, 1)
        );
        assert_eq!(a.results, PathBuf::from("results"));
        assert!(a.check().is_ok());
        // A multiple of three: every variant runs first, second and third equally often.
        assert_eq!(a.e2e_rounds % 3, 0);
    }

    #[test]
    fn flags_are_read() {
        let a = parse("--rounds 5 --e2e-rounds 21 --tokens 9 --threads 1 --results /tmp/x");
        let a = a.unwrap();
        let plan = Plan {
            rounds: 21,
            tokens: 9,
            threads: 1,
        };
        assert_eq!(a.plan(), plan);
        assert_eq!((a.rounds, a.results), (5, PathBuf::from("/tmp/x")));
    }

    #[test]
    fn bad_values_are_refused() {
        let refused_by_check = [
            "--rounds 0",
            "--e2e-rounds 19",
            "--tokens 1",
            "--tokens 2049",
            "--threads 0",
            "--threads 65",
            "--rounds 10001",
            "--e2e-rounds 1001",
        ];
        for flags in refused_by_check {
            assert!(parse(flags).unwrap().check().is_err(), "{flags}");
        }
        for flags in ["--rounds -1", "--tokens many", "--no-such-flag"] {
            assert!(parse(flags).is_err(), "{flags}");
        }
    }

    #[test]
    fn bad_input_exits_2_before_any_work() {
        let run = |flags| main(argv(flags).map(OsString::from));
        assert_eq!(run("--e2e-rounds 3"), cmdline::EXIT_BAD_INPUT);
        assert_eq!(run("--bogus"), cmdline::EXIT_BAD_INPUT);
        assert_eq!(run("--help"), 0);
    }
}
