//! A model file the user names is loaded first in a supervised child (`contain`): llama.cpp
//! may abort or crash on a malformed GGUF instead of returning NULL, and that must end as a
//! one-line refusal, not as the end of the tool. Only when the child loads it cleanly does the
//! auditor load it in its own process.
//!
//! The models `make models` fetches are checked by size and sha256 instead (`models::resolve`);
//! they skip this step.

use crate::model::{Model, Weights};
use anyhow::{bail, Result};
use contain::{ChildOutcome, Ended, Task};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// The contained task: load the model at the one argument's path, exit 0 or refuse in one line.
pub const LOAD_TASK: Task = Task {
    name: "load-model",
    handler: load_child,
};

/// How long a load may take before it is stopped (the largest pinned model loads in seconds).
pub const LOAD_TIMEOUT: Duration = Duration::from_secs(300);

/// Each weight layout as the load task's second argument spells it.
const LAYOUTS: [(Weights, &str); 2] = [
    (Weights::AsStored, "as-stored"),
    (Weights::Repacked, "repacked"),
];

fn load_child(args: &[OsString]) -> i32 {
    let arg = args.get(1).and_then(|w| w.to_str());
    let Some(&(weights, _)) = LAYOUTS.iter().find(|(_, name)| Some(*name) == arg) else {
        eprintln!("error: the load-model task takes a path and as-stored or repacked");
        return 2;
    };
    match Model::load_with(Path::new(&args[0]), weights) {
        Ok(_) => 0,
        Err(e) => {
            eprintln!("error: {}", format!("{e:#}").replace('\n', " "));
            2
        }
    }
}

/// Paths whose child load succeeded in this process: a command line's check and its run
/// both ask, and the second asks for free.
static LOADED: Mutex<Vec<(PathBuf, Weights)>> = Mutex::new(Vec::new());

/// Loads `path` in a child first, with the weight layout the run will use. `Ok` when
/// llama.cpp loaded it there; otherwise why not, in one line: its own refusal, or the signal
/// it died of (contained).
pub fn preflight(path: &Path, weights: Weights) -> Result<()> {
    let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    if loaded.iter().any(|(p, w)| p == path && *w == weights) {
        return Ok(());
    }
    let (_, layout) = LAYOUTS
        .iter()
        .find(|(w, _)| *w == weights)
        .expect("every layout");
    let cmd = LOAD_TASK.command(&[path.as_os_str().to_owned(), OsString::from(layout)])?;
    let out = contain::run(cmd, LOAD_TIMEOUT)?;
    judge(path, &out)?;
    loaded.push((path.to_path_buf(), weights));
    Ok(())
}

/// What a load child's outcome means for the command line: `Ok` when it loaded the file,
/// otherwise the one line to refuse it with.
fn judge(path: &Path, out: &ChildOutcome) -> Result<()> {
    let last = out.last_stderr_line();
    let said = last.strip_prefix("error: ").unwrap_or(last);
    match out.ended {
        Ended::Exited(0) => Ok(()),
        Ended::Exited(_) => bail!("{said}"),
        Ended::Signal(_) => bail!(
            "llama.cpp {} while loading {} (contained in a child process; its last line: {})",
            out.ended.describe(),
            path.display(),
            if said.is_empty() { "none" } else { said }
        ),
        Ended::TimedOut(_) => bail!(
            "loading {} {} (stopped; contained in a child process)",
            path.display(),
            out.ended.describe()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(ended: Ended, stderr: &str) -> ChildOutcome {
        ChildOutcome {
            ended,
            stdout: Vec::new(),
            stderr: stderr.to_string(),
        }
    }

    #[test]
    fn a_child_that_dies_loading_is_a_one_line_refusal_that_says_so() {
        let p = Path::new("m.gguf");
        let e = judge(p, &outcome(Ended::Signal(6), "GGML_ASSERT(x) failed\n"))
            .unwrap_err()
            .to_string();
        assert_eq!(e.lines().count(), 1);
        assert!(
            e.contains("aborts: SIGABRT") && e.contains("contained"),
            "{e}"
        );
        let e = judge(p, &outcome(Ended::TimedOut(LOAD_TIMEOUT), ""))
            .unwrap_err()
            .to_string();
        assert!(e.contains("times out") && e.contains("contained"), "{e}");
        let e = judge(
            p,
            &outcome(Ended::Exited(2), "error: llama.cpp could not load m.gguf\n"),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(e, "llama.cpp could not load m.gguf");
        assert!(judge(p, &outcome(Ended::Exited(0), "")).is_ok());
    }
}
