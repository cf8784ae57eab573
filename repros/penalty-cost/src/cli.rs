//! Command-line parsing, the checks on the flags, and the runs: the bench
//! (`bench/penalty-cost.{json,svg}`), the stock build against the patched one
//! (`bench/penalty-versus.json` per apply, `bench/penalty-overhead-versus.json` end to end) and
//! the comparison of bitcheck.c's outputs (`bench/penalty-bitcheck.json`).

use crate::e2e::{self, Plan};
use crate::{apply, output};
use anyhow::{ensure, Context, Result};
use clap::Parser;
use models::ModelChoice;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
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
    /// penalties and ledger-penalties, in turn; with --against, each build without and with
    /// llama.cpp's penalties, a multiple of 4), 20 to 1000.
    #[arg(long, default_value_t = 36)]
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
    /// alternating turns per row (bench/penalty-versus.json), then both builds' end-to-end
    /// overhead of the stage, --e2e-rounds interleaved rounds
    /// (bench/penalty-overhead-versus.json).
    #[arg(long, value_name = "PENALTY_COST")]
    pub against: Option<PathBuf>,
    /// Instead of the bench: compare bitcheck.c's output on the stock build with its output
    /// on the patched build (bench/penalty-bitcheck.json); exits 1 if an array that must be
    /// the same differs.
    #[arg(long, num_args = 2, value_names = ["STOCK_OUT", "PATCHED_OUT"], conflicts_with_all = ["against", "worker"])]
    pub bitcheck: Option<Vec<PathBuf>>,
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
        ensure!(
            self.against.is_none() || self.e2e_rounds.is_multiple_of(crate::overhead::ITEMS.len()),
            "with --against, --e2e-rounds must be a multiple of {} (each generation of a round runs first equally often), got {}",
            crate::overhead::ITEMS.len(),
            self.e2e_rounds
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
    let files = (args.against.iter().map(|b| ("--against", b)))
        .chain(args.bitcheck.iter().flatten().map(|b| ("--bitcheck", b)));
    for (flag, file) in files {
        if !file.is_file() {
            return Err(cmdline::Failure::BadInput(anyhow::anyhow!(
                "{flag} {}: no such file",
                file.display()
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
            return cmdline::fail(crate::versus::serve(&c.model).map(|()| String::new()));
        }
        if let Some(files) = &c.args.bitcheck {
            return cmdline::fail(bitcheck(&c.args, &files[0], &files[1]));
        }
        if let Some(bin) = &c.args.against {
            return cmdline::fail(versus(&c.args, c.model, bin));
        }
        cmdline::fail(run(&c.args, &c.build, c.model))
    })
}

/// `value` as pretty JSON into `<results>/bench/<name>`.
fn write_bench(args: &Args, name: &str, value: &impl serde::Serialize) -> Result<()> {
    let dir = args.results.join("bench");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string_pretty(value)? + "\n")
        .with_context(|| format!("writing {}", path.display()))
}

/// bitcheck.c's two outputs compared, written to bench/penalty-bitcheck.json.
fn bitcheck(args: &Args, stock: &Path, patched: &Path) -> Result<String> {
    let b = crate::bitcheck::run(stock, patched)?;
    write_bench(args, "penalty-bitcheck.json", &b)?;
    Ok(crate::bitcheck::text(&b))
}

/// The stock-against-patched comparison with one worker of the patched build: per apply into
/// bench/penalty-versus.json, then end to end into bench/penalty-overhead-versus.json.
fn versus(args: &Args, model: ModelChoice, bin: &Path) -> Result<String> {
    let mut worker = crate::versus::Worker::start(bin)?;
    let v = crate::versus::compare(&mut worker, &VOCABS, args.rounds)?;
    write_bench(args, "penalty-versus.json", &v)?;
    let mut out = crate::versus::text(&v);
    let plan = args.plan();
    eprintln!(
        "end to end, {} against {} interleaved: {} rounds of four generations of {} tokens on {}",
        v.stock,
        v.patched,
        plan.rounds,
        plan.tokens,
        e2e::MODEL
    );
    let o = crate::overhead::compare(&mut worker, model, &plan)?;
    write_bench(
        args,
        "penalty-overhead-versus.json",
        &crate::overhead::json(&o),
    )?;
    out += &crate::overhead::text(&o);
    Ok(out)
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
            (300, 36, 48, 1)
        );
        assert_eq!(a.results, PathBuf::from("results"));
        assert!(a.check().is_ok());
        // A multiple of three and of four: every variant of the bench, and every generation of
        // the interleaved run (--against), runs first, second, ... equally often.
        assert_eq!(a.e2e_rounds % 3, 0);
        assert_eq!(a.e2e_rounds % crate::overhead::ITEMS.len(), 0);
        let a = parse("--against /bin/sh").unwrap();
        assert!(a.check().is_ok());
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
            "--against /bin/sh --e2e-rounds 30",
        ];
        for flags in refused_by_check {
            assert!(parse(flags).unwrap().check().is_err(), "{flags}");
        }
        for flags in [
            "--rounds -1",
            "--tokens many",
            "--no-such-flag",
            "--bitcheck a",
            "--bitcheck a b --against c",
        ] {
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
