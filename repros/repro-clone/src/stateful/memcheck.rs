//! The memcheck probe: a duplicate (a clone, or a state copy) accepts a token before any
//! apply, in a child process under valgrind memcheck (never natively: llama.cpp's adaptive-p
//! reads a cache its clone does not copy), and the parent reads valgrind's report.

use super::equivalence::{duplicate, Duplicate};
use super::inputs::{step, with_history};
use super::samplers::{planted, planted_copy, subjects, SamplerRecipe};
use super::HISTORY;
use crate::planted::ReadsPastEnd;
use anyhow::{bail, Context, Result};
use report::Control;
use serde::Serialize;
use std::path::Path;
use std::process::Command;
use subject::Sampler;

/// What valgrind memcheck saw when a duplicate accepted a token before any apply.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "memcheck", rename_all = "lowercase")]
pub enum Memcheck {
    /// No memcheck error, normal exit.
    Clean,
    /// The first memcheck error (`Invalid read of size 4 in llama_sampler_adaptive_p_accept`)
    /// and how the process ended.
    Error {
        first_error: String,
        process: String,
    },
    /// No memcheck error, but the probe did not exit cleanly (refused, or crashed otherwise).
    #[serde(rename = "probe failed")]
    Failed { process: String },
    /// Not run, and why.
    #[serde(rename = "not run")]
    NotRun { why: String },
}

impl Memcheck {
    /// Not run because valgrind is missing.
    pub fn no_valgrind() -> Memcheck {
        Memcheck::NotRun {
            why: "valgrind not found; `make deps` installs it".into(),
        }
    }

    pub fn summary(&self) -> String {
        match self {
            Memcheck::Clean => "memcheck clean".to_string(),
            Memcheck::Error {
                first_error,
                process,
            } => format!("memcheck: {first_error}; {process}"),
            Memcheck::Failed { process } => format!("no memcheck error, but the probe {process}"),
            Memcheck::NotRun { why } => format!("not checked ({why})"),
        }
    }
}

/// The probe's two controls: `past_end` (the planted read past a heap buffer) must be a
/// memcheck error, `clean` (a planted complete duplicate) must be clean.
pub fn controls(
    past_end_name: &str,
    past_end: &Memcheck,
    clean_name: &str,
    clean: &Memcheck,
) -> [Control; 2] {
    [
        Control::positive(
            past_end_name,
            matches!(past_end, Memcheck::Error { .. }),
            past_end.summary(),
        ),
        Control::negative(clean_name, *clean == Memcheck::Clean, clean.summary()),
    ]
}

/// The environment variable the parent sets for the probe child; the probe refuses without it.
pub const PROBE_ENV: &str = "SAMPLER_AUDIT_MEMCHECK_PROBE";

/// The sampler the memcheck probe's child runs: one of [`subjects`] or [`planted`], or the
/// planted read past the end.
pub struct ProbeTarget(SamplerRecipe);

/// Checks the child side of the memcheck probe (`<repro> --memcheck-probe NAME`) before it
/// runs: it refuses unless started by [`memcheck`] under valgrind, and `name` must be a sampler
/// it knows.
pub fn probe_target(name: &str) -> Result<ProbeTarget> {
    let preload = std::env::var("LD_PRELOAD").unwrap_or_default();
    if std::env::var(PROBE_ENV).is_err() || !preload.contains("vgpreload") {
        bail!("--memcheck-probe runs only as a child of the memcheck probe, under valgrind");
    }
    if name == "planted-reads-past-end" {
        return Ok(ProbeTarget(SamplerRecipe {
            name: "planted-reads-past-end",
            build: Box::new(|| Sampler::custom(ReadsPastEnd::new())),
        }));
    }
    subjects()
        .into_iter()
        .chain(planted())
        .chain(planted_copy())
        .find(|s| s.name == name)
        .map(ProbeTarget)
        .with_context(|| format!("no stateful sampler named '{name}'"))
}

/// The child side of the memcheck probe: history, one apply on the original, duplicate it
/// as `how` says, then the duplicate accepts the original's token without applying first.
pub fn probe_main(target: &ProbeTarget, how: Duplicate) -> Result<()> {
    let mut original = with_history(target.0.build()?)?;
    let (_, token) = step(&mut original, HISTORY)?;
    let mut dup = duplicate(&original, &target.0, how)?;
    dup.accept(token)?;
    Ok(())
}

/// Runs the probe for `name` in a child process under valgrind memcheck; `exe` is the repro
/// binary (whose `--memcheck-probe` mode is the child, duplicating as that repro does).
pub fn memcheck(exe: &Path, name: &str) -> Memcheck {
    let out = Command::new("valgrind")
        .args(["--tool=memcheck", "--error-exitcode=99", "--quiet"])
        .arg(exe)
        .args(["--memcheck-probe", name])
        .env(PROBE_ENV, "1")
        .output();
    let Ok(out) = out else {
        return Memcheck::no_valgrind();
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    memcheck_outcome(&stderr, out.status.code())
}

/// Reads valgrind's report: the first error and the frame it happened in.
fn memcheck_outcome(stderr: &str, code: Option<i32>) -> Memcheck {
    let body = |l: &str| l.split_once("== ").map(|(_, b)| b.trim().to_string());
    let lines: Vec<String> = stderr.lines().filter_map(body).collect();
    let first_error = lines.iter().position(|l| {
        l.starts_with("Invalid ")
            || l.starts_with("Use of uninitialised")
            || l.starts_with("Conditional jump")
            || l.contains("uninitialised byte")
    });
    let signal = lines
        .iter()
        .find(|l| l.starts_with("Process terminating with default action of signal"))
        .map(|l| {
            l.trim_start_matches("Process terminating with default action of ")
                .to_string()
        });
    let process = match (&signal, code) {
        (Some(s), _) => format!("killed by {s}"),
        (None, Some(c)) => format!("exit {c}"),
        (None, None) => "killed by a signal".to_string(),
    };
    match first_error {
        Some(i) => {
            let frame = lines[i + 1..]
                .iter()
                .find(|l| l.starts_with("at ") || l.starts_with("by "))
                .and_then(|l| l.split_once(": ").map(|(_, f)| f.to_string()))
                .unwrap_or_else(|| "an unknown frame".to_string());
            Memcheck::Error {
                first_error: format!(
                    "{} in {}",
                    lines[i],
                    frame.split('(').next().unwrap_or(&frame).trim()
                ),
                process,
            }
        }
        None if code == Some(0) => Memcheck::Clean,
        None => Memcheck::Failed { process },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_valgrinds_first_error_and_frame() {
        let stderr = "==1== Invalid read of size 4\n==1==    at 0x4A1B2C: llama_sampler_adaptive_p_accept (in /x/repro-clone)\n==1==    by 0x4A0000: llama_sampler_accept (in /x/repro-clone)\n==1== Process terminating with default action of signal 11 (SIGSEGV)\n";
        assert_eq!(
            memcheck_outcome(stderr, None),
            Memcheck::Error {
                first_error: "Invalid read of size 4 in llama_sampler_adaptive_p_accept".into(),
                process: "killed by signal 11 (SIGSEGV)".into(),
            }
        );
        assert_eq!(memcheck_outcome("", Some(0)), Memcheck::Clean);
        // A probe that fails without a memcheck error is not a memcheck finding.
        assert!(matches!(
            memcheck_outcome("", Some(1)),
            Memcheck::Failed { .. }
        ));
    }
}
