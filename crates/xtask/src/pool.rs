//! The audit's pool: up to `jobs` steps at once, a step that decodes a model alone, a line on
//! stderr when a step starts and ends and every 30 s the steps still running, so no step is
//! silent for long. A failed step stops the pool with its last stderr line, after the steps
//! already running finish.

use crate::Step;
use anyhow::{bail, Context};
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How often the pool looks at its steps, and how often it says which are still running.
const POLL: Duration = Duration::from_millis(250);
const HEARTBEAT: Duration = Duration::from_secs(30);

struct Running<'a> {
    k: usize,
    step: &'a Step,
    child: Child,
    started: Instant,
    log: std::path::PathBuf,
}

/// Runs `steps` in order; each step's stderr goes to `logs/<k>-<label>.err`, its stdout
/// nowhere (a repro's stdout repeats its text report), and its wall time, as it ends, to
/// `times` (label, tab, seconds).
pub fn run(
    steps: &[Step],
    jobs: usize,
    logs: &Path,
    times: &Path,
    start: Instant,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(logs).with_context(|| format!("creating {}", logs.display()))?;
    if let Some(dir) = times.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut times = File::create(times).with_context(|| format!("creating {}", times.display()))?;
    let total = steps.len();
    let mut running: Vec<Running> = Vec::new();
    let mut failed = false;
    let mut last_beat = start;
    for (i, step) in steps.iter().enumerate() {
        let k = i + 1;
        let limit = if step.decodes { 1 } else { jobs };
        while running.len() >= limit || running.iter().any(|r| r.step.decodes) {
            std::thread::sleep(POLL);
            failed |= reap(&mut running, total, &mut times)?;
            beat(&running, start, &mut last_beat);
        }
        if failed {
            break;
        }
        let log = logs.join(format!(
            "{k:02}-{}.err",
            step.label.replace([' ', '/'], "_")
        ));
        eprintln!("[{k}/{total}] {}", step.label);
        let err = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let child = Command::new(&step.program)
            .args(&step.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn();
        match child {
            Ok(child) => running.push(Running {
                k,
                step,
                child,
                started: Instant::now(),
                log,
            }),
            Err(e) => {
                eprintln!(
                    "[{k}/{total}] {} FAILED after 0 s: starting {}: {e}",
                    step.label,
                    step.program.display()
                );
                failed = true;
                break;
            }
        }
    }
    while !running.is_empty() {
        std::thread::sleep(POLL);
        failed |= reap(&mut running, total, &mut times)?;
        beat(&running, start, &mut last_beat);
    }
    if failed {
        bail!("a step failed (logs in {}/)", logs.display());
    }
    Ok(())
}

/// Collects the steps that ended; true if one of them failed.
fn reap(running: &mut Vec<Running>, total: usize, times: &mut File) -> anyhow::Result<bool> {
    let mut failed = false;
    let mut i = 0;
    while i < running.len() {
        let Some(status) = running[i].child.try_wait().context("waiting for a step")? else {
            i += 1;
            continue;
        };
        let r = running.remove(i);
        let secs = r.started.elapsed().as_secs();
        if status.success() {
            writeln!(times, "{}\t{secs}", r.step.label).context("writing the step times")?;
            eprintln!("[{}/{total}] {} done in {secs} s", r.k, r.step.label);
        } else {
            let text = std::fs::read_to_string(&r.log).unwrap_or_default();
            let last = text.lines().last().unwrap_or("");
            eprintln!(
                "[{}/{total}] {} FAILED after {secs} s: {last}",
                r.k, r.step.label
            );
            failed = true;
        }
    }
    Ok(failed)
}

/// Every 30 s while steps run: which, and how long since the job started.
fn beat(running: &[Running], start: Instant, last: &mut Instant) {
    if running.is_empty() || last.elapsed() < HEARTBEAT {
        return;
    }
    let secs = start.elapsed().as_secs();
    let what: Vec<&str> = running.iter().map(|r| r.step.label.as_str()).collect();
    eprintln!(
        "       still running ({}m{}s in): {}",
        secs / 60,
        secs % 60,
        what.join(";")
    );
    *last = Instant::now();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(label: &str, script: &str, decodes: bool) -> Step {
        Step {
            label: label.into(),
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            decodes,
        }
    }

    /// A failed step lets the step beside it finish (its time is written) and starts no
    /// further step; a decoding step never runs beside another.
    #[test]
    fn a_failure_stops_new_steps_after_the_running_ones_finish() {
        let dir = std::env::temp_dir().join(format!("xtask-pool-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mark = |n: &str| dir.join(n).display().to_string();
        let steps = [
            sh("slow", &format!("sleep 1; touch {}", mark("slow")), false),
            sh("fails", "echo last words >&2; exit 3", false),
            sh("never", &format!("touch {}", mark("never")), false),
        ];
        let times = dir.join("times.tsv");
        let e = run(&steps, 2, &dir.join("logs"), &times, Instant::now()).unwrap_err();
        assert!(e.to_string().contains("a step failed"), "{e}");
        assert!(dir.join("slow").exists(), "the running step finished");
        assert!(
            !dir.join("never").exists(),
            "no step starts after a failure"
        );
        let written = std::fs::read_to_string(&times).unwrap();
        assert!(
            written.starts_with("slow\t") && !written.contains("fails"),
            "{written}"
        );

        // Two decoding steps, each checking that the other is not running.
        let lock = mark("lock");
        let alone = |l: &str| {
            let script = format!("[ ! -e {lock} ] && touch {lock} && sleep 0.5 && rm {lock}");
            sh(l, &script, true)
        };
        let steps = [
            alone("a"),
            alone("b"),
            sh("c", &format!("[ ! -e {lock} ]"), false),
        ];
        run(&steps, 2, &dir.join("logs"), &times, Instant::now()).unwrap();
        assert_eq!(std::fs::read_to_string(&times).unwrap().lines().count(), 3);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
