//! The orchestrator behind `make audit`, `make audit-fixes`, `make audit-tables`, `make
//! matrix` and `make memcheck`: it plans every run from the findings registry
//! (`registry::plan`) and runs them.
//!
//!   xtask builds [--patched]           the audited builds' names, the default first (or the
//!                                      patched build's)
//!   xtask binary F<n>                  the finding's binary
//!   xtask plan audit|tables|matrix|memcheck [BUILD...]
//!                                      the runs a job would make, one per line, without running
//!   xtask audit [--results DIR] [--candle] [--upstream] [BUILD...]
//!   xtask tables [--results DIR] [BUILD...]
//!   xtask matrix [--results DIR] [--build-only | --table-only]
//!   xtask memcheck [-- CMD ARG...]
//!
//! Without builds, a job runs on every build of `registry::BUILDS`. The builds must be built
//! and the models fetched first (the Makefile does both).

mod matrix;
mod memcheck;
mod pool;

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Parser, Debug)]
#[command(
    name = "xtask",
    about = "Plans and runs the audit's jobs from the findings registry"
)]
struct Cli {
    #[command(subcommand)]
    job: Job,
}

#[derive(Subcommand, Debug)]
enum Job {
    /// The audited builds' names, the default first, one line.
    Builds {
        /// The patched build's name instead (the default build with every fix).
        #[arg(long)]
        patched: bool,
    },
    /// The binary of a finding (`F1`), or a registered binary's own name back.
    Binary { finding: String },
    /// The runs a job would make, one per line (label, then the command), without running.
    Plan {
        #[arg(value_parser = ["audit", "tables", "matrix", "memcheck"])]
        job: String,
        #[command(flatten)]
        on: On,
    },
    /// Every finding's audit steps on each build: the decoding steps one at a time first, then
    /// the rest JOBS (default 2) at a time; each step's wall time in
    /// results/timing/steps.<builds>.tsv.
    Audit {
        #[command(flatten)]
        on: On,
        /// Also candle's steps, on the first build.
        #[arg(long)]
        candle: bool,
        /// Then the standalone reproducers against each build, recorded under
        /// results/upstream/.
        #[arg(long)]
        upstream: bool,
        /// Only these findings' steps (`F2,F9`); every registered finding when absent.
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
    },
    /// F4's reported-only tables on each build, one after the other.
    Tables {
        #[command(flatten)]
        on: On,
    },
    /// The release matrix: every revision of the release table built and run through the
    /// findings with a matrix run, then the affected-range table (SHARD=i/N, REVISIONS, JOBS
    /// and FORCE=1 from the environment).
    Matrix {
        /// Where results/matrix/ goes.
        #[arg(long, default_value = "results")]
        results: String,
        /// Build (or find the cache of) every revision, run nothing.
        #[arg(long, conflicts_with = "table_only")]
        build_only: bool,
        /// Only the table, from the reports and status lines the folder holds.
        #[arg(long)]
        table_only: bool,
    },
    /// Valgrind memcheck: the planted controls, then every finding's memcheck runs on each
    /// audited build (MEMCHECK_JOBS, default 2, at a time); or, after `--`, one command
    /// through the same check. Exit 1 when a run fails.
    Memcheck {
        /// One command to check instead (after `--`).
        #[arg(last = true)]
        command: Vec<String>,
    },
}

#[derive(clap::Args, Debug)]
struct On {
    /// Where the reports go.
    #[arg(long, default_value = "results")]
    results: String,
    /// Build names (a tag such as b10200, `<tag>+fixes`); none means every audited build.
    builds: Vec<String>,
}

impl On {
    fn builds(&self) -> Vec<String> {
        if self.builds.is_empty() {
            registry::BUILDS.iter().map(|b| b.tag.to_string()).collect()
        } else {
            self.builds.clone()
        }
    }
}

/// The repository's root: every path the jobs use is relative to it.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs the command line; returns the exit code.
pub fn main(argv: impl IntoIterator<Item = OsString>) -> i32 {
    cmdline::run_checked(argv, check, |cli: Cli| cmdline::fail(run(cli.job)))
}

/// Everything that can refuse the command line, before any work: build names (each resolved
/// by buildgen for a job that runs), `--only`, the environment's counts and shard, valgrind and
/// the binaries memcheck will run.
fn check(cli: Cli) -> Result<Cli, cmdline::Failure> {
    cmdline::refuse(std::env::set_current_dir(root()).context("entering the repository"))?;
    let names = match &cli.job {
        Job::Builds { .. } | Job::Memcheck { .. } | Job::Matrix { .. } | Job::Binary { .. } => {
            Vec::new()
        }
        Job::Plan { on, .. } | Job::Audit { on, .. } | Job::Tables { on } => on.builds(),
    };
    for name in &names {
        if name.is_empty() || name.starts_with('-') || name.contains(char::is_whitespace) {
            return cmdline::refuse(Err(anyhow::anyhow!("'{name}' is no build name")));
        }
    }
    match &cli.job {
        Job::Audit { only, .. } => {
            cmdline::refuse(findings(only))?;
            cmdline::refuse(jobs("JOBS"))?;
            for name in &names {
                cmdline::refuse(workspace(name))?;
            }
        }
        Job::Tables { .. } => {
            for name in &names {
                cmdline::refuse(workspace(name))?;
            }
        }
        Job::Matrix { .. } => {
            cmdline::refuse(jobs("JOBS"))?;
            cmdline::refuse(shard())?;
        }
        Job::Memcheck { command } => {
            cmdline::refuse(jobs("MEMCHECK_JOBS"))?;
            cmdline::refuse(memcheck::valgrind_version())?;
            if command.is_empty() {
                for run in cmdline::refuse(memcheck_runs())? {
                    if !run.program.is_file() {
                        let e = anyhow::anyhow!(
                            "{} is missing; run `make build` first",
                            run.program.display()
                        );
                        return cmdline::refuse(Err(e));
                    }
                }
            }
        }
        Job::Binary { finding } => {
            cmdline::refuse(binary(finding))?;
        }
        Job::Builds { .. } | Job::Plan { .. } => {}
    }
    Ok(cli)
}

/// `SHARD` from the environment: empty, or `i/N` with 1 <= i <= N.
fn shard() -> anyhow::Result<Option<String>> {
    let Ok(v) = std::env::var("SHARD") else {
        return Ok(None);
    };
    if v.is_empty() {
        return Ok(None);
    }
    let parsed = v
        .split_once('/')
        .and_then(|(i, n)| Some((i.parse::<u32>().ok()?, n.parse::<u32>().ok()?)));
    match parsed {
        Some((i, n)) if i >= 1 && i <= n => Ok(Some(v)),
        _ => bail!("SHARD must be i/N with 1 <= i <= N, not '{v}'"),
    }
}

/// Memcheck's runs on every audited build, each with the binary of its build.
fn memcheck_runs() -> anyhow::Result<Vec<memcheck::Run>> {
    let builds: Vec<&str> = registry::BUILDS.iter().map(|b| b.tag).collect();
    let mut out = Vec::new();
    for p in registry::plan::memcheck(registry::FINDINGS, &builds, &models_dir()) {
        out.push(memcheck::Run {
            program: workspace(&p.build)?.join("target/release").join(p.binary),
            build: p.build,
            args: p.args,
            children: p.children,
            unjudged: p.unjudged,
        });
    }
    Ok(out)
}

/// The models folder (`MODELS_CACHE`, default `models-cache`).
fn models_dir() -> String {
    std::env::var("MODELS_CACHE").unwrap_or_else(|_| "models-cache".into())
}

fn run(job: Job) -> anyhow::Result<String> {
    std::env::set_current_dir(root()).context("entering the repository")?;
    match job {
        Job::Binary { finding } => Ok(format!("{}\n", binary(&finding)?)),
        Job::Matrix {
            results,
            build_only,
            table_only,
        } => {
            let mode = match (build_only, table_only) {
                (true, _) => matrix::Mode::BuildOnly,
                (_, true) => matrix::Mode::TableOnly,
                _ => matrix::Mode::All,
            };
            matrix::run(mode, &results, jobs("JOBS")?, shard()?)?;
            Ok(String::new())
        }
        Job::Memcheck { command } => {
            let runs = match command.split_first() {
                Some((program, args)) => vec![memcheck::Run {
                    build: "adhoc".into(),
                    program: PathBuf::from(program),
                    args: args.to_vec(),
                    children: false,
                    unjudged: 0,
                }],
                None => memcheck_runs()?,
            };
            let jobs = jobs("MEMCHECK_JOBS")?;
            let (text, clean) = memcheck::run(&runs, jobs)?;
            print!("{text}");
            if !clean {
                bail!("memcheck failed");
            }
            Ok(String::new())
        }
        Job::Builds { patched: true } => Ok(format!("{}\n", registry::patched_build())),
        Job::Builds { patched: false } => {
            let tags: Vec<&str> = registry::BUILDS.iter().map(|b| b.tag).collect();
            Ok(format!("{}\n", tags.join(" ")))
        }
        Job::Plan { job, on } => {
            let builds = on.builds();
            let names: Vec<&str> = builds.iter().map(String::as_str).collect();
            let lines: Vec<String> = match job.as_str() {
                "audit" | "tables" => {
                    let runs = if job == "audit" {
                        registry::plan::audit(registry::FINDINGS, &names, true, &on.results)
                    } else {
                        registry::plan::tables(registry::FINDINGS, &names, &on.results)
                    };
                    (runs.iter())
                        .map(|r| format!("{}\t{} {}", r.label, r.binary, r.args.join(" ")))
                        .collect()
                }
                "matrix" => (registry::plan::matrix(registry::FINDINGS).iter())
                    .map(|m| {
                        format!(
                            "every revision\t{} --audit --results DIR {}",
                            m.binary,
                            m.args.join(" ")
                        )
                    })
                    .collect(),
                _ => (registry::plan::memcheck(registry::FINDINGS, &names, &models_dir()).iter())
                    .map(|p| {
                        let how = if p.children {
                            " (children followed)"
                        } else {
                            ""
                        };
                        format!("{}{how}\t{} {}", p.build, p.binary, p.args.join(" "))
                    })
                    .collect(),
            };
            Ok(lines
                .iter()
                .map(|l| format!("{}\n", l.trim_end()))
                .collect())
        }
        Job::Audit {
            on,
            candle,
            upstream,
            only,
        } => {
            let builds = on.builds();
            let names: Vec<&str> = builds.iter().map(String::as_str).collect();
            let runs = registry::plan::audit(&findings(&only)?, &names, candle, &on.results);
            let start = std::time::Instant::now();
            let jobs = jobs("JOBS")?;
            std::fs::create_dir_all(&on.results)
                .with_context(|| format!("creating {}", on.results))?;
            // A partial audit (`--only`) keeps its times apart from the whole audit's.
            let part = if only.is_empty() {
                String::new()
            } else {
                format!(".{}", only.join("-"))
            };
            let times = PathBuf::from(format!(
                "results/timing/steps.{}{part}.tsv",
                builds.join("-")
            ));
            let steps = resolve(&runs)?;
            pool::run(&steps, jobs, Path::new("target/audit"), &times, start)?;
            if upstream {
                eprintln!(
                    "[upstream] the standalone reproducers against {}",
                    builds.join(" ")
                );
                let status = Command::new("target/release/upstream")
                    .args([
                        "check",
                        "--results",
                        &on.results,
                        "--record",
                        "results/upstream",
                    ])
                    .args(&builds)
                    .stdout(std::io::stderr())
                    .status()
                    .context("running target/release/upstream")?;
                if !status.success() {
                    bail!("upstream check failed ({status})");
                }
            }
            let secs = start.elapsed().as_secs();
            eprintln!(
                "audit: {} steps in {} min {} s (per step: {})",
                steps.len(),
                secs / 60,
                secs % 60,
                times.display()
            );
            Ok(String::new())
        }
        Job::Tables { on } => {
            let builds = on.builds();
            let names: Vec<&str> = builds.iter().map(String::as_str).collect();
            for step in resolve(&registry::plan::tables(
                registry::FINDINGS,
                &names,
                &on.results,
            ))? {
                eprintln!("{}", step.label);
                let status = Command::new(&step.program)
                    .args(&step.args)
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .status()
                    .with_context(|| format!("starting {}", step.program.display()))?;
                if !status.success() {
                    bail!("{} failed ({status})", step.label);
                }
            }
            Ok(String::new())
        }
    }
}

/// The binary of the finding `id` (`F1`), or `id` itself when it is a registered binary.
fn binary(id: &str) -> anyhow::Result<&'static str> {
    if let Some(f) = registry::by_binary(id) {
        return Ok(f.binary);
    }
    let number = registry::FindingNumber::parse(id).with_context(|| {
        format!("'{id}' is no finding number (F1, F2, ...) and no finding's binary")
    })?;
    match registry::FINDINGS.iter().find(|f| f.number == number) {
        Some(f) => Ok(f.binary),
        None => bail!("{id} is not registered"),
    }
}

/// The registered findings named by number (`F2`), or every one when `only` is empty.
fn findings(only: &[String]) -> anyhow::Result<Vec<registry::Finding>> {
    if only.is_empty() {
        return Ok(registry::FINDINGS.to_vec());
    }
    let mut out = Vec::new();
    for id in only {
        let number = registry::FindingNumber::parse(id)
            .with_context(|| format!("'{id}' is no finding number (F1, F2, ...)"))?;
        match registry::FINDINGS.iter().find(|f| f.number == number) {
            Some(f) if f.audit.is_empty() => bail!("{id} has no audit steps"),
            Some(f) => out.push(*f),
            None => bail!("{id} is not registered"),
        }
    }
    Ok(out)
}

/// A count of parallel runs from the environment variable `var` (default 2).
fn jobs(var: &str) -> anyhow::Result<usize> {
    match std::env::var(var) {
        Err(_) => Ok(2),
        Ok(v) if v.is_empty() => Ok(2),
        Ok(v) => match v.parse::<usize>() {
            Ok(n) if n >= 1 => Ok(n),
            _ => bail!("{var} must be a positive number, not '{v}'"),
        },
    }
}

/// A planned run with the binary of its build.
pub struct Step {
    pub label: String,
    pub program: PathBuf,
    pub args: Vec<String>,
    pub decodes: bool,
}

/// Each run's program: `<workspace of its build>/target/release/<binary>`, the workspace from
/// buildgen (each build asked once).
fn resolve(runs: &[registry::plan::Run]) -> anyhow::Result<Vec<Step>> {
    let mut workspaces: Vec<(String, PathBuf)> = Vec::new();
    let mut out = Vec::new();
    for r in runs {
        let ws = match workspaces.iter().find(|(b, _)| *b == r.build) {
            Some((_, ws)) => ws.clone(),
            None => {
                let ws = workspace(&r.build)?;
                workspaces.push((r.build.clone(), ws.clone()));
                ws
            }
        };
        out.push(Step {
            label: r.label.clone(),
            program: ws.join("target/release").join(r.binary),
            args: r.args.clone(),
            decodes: r.decodes,
        });
    }
    Ok(out)
}

/// The cargo workspace of a build, as `buildgen workspace` names it.
fn workspace(build: &str) -> anyhow::Result<PathBuf> {
    let out = Command::new("target/release/buildgen")
        .args(["workspace", build])
        .output()
        .context("running target/release/buildgen (make build builds it)")?;
    if !out.status.success() {
        bail!("{}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}
