//! Another engine's model loading, first in a supervised child (`contain`), as llama.cpp's is
//! (`subject::preflight`): candle's GGUF reader and decoders may panic, abort on a huge
//! allocation or read out of bounds on a malformed file, and any of these must end as a
//! one-line refusal (exit 2), not as the end of the tool. Only when the child has loaded the
//! file does the run load it in its own process.
//!
//! It lives here because this binary is the one that loads a model through another engine
//! (F4 and F7 use candle's penalty and sampler only). The models `make models` fetches are
//! checked by size and sha256 instead, as for llama.cpp, and skip this step.

use anyhow::{bail, Result};
use contain::{ChildOutcome, Ended, Task};
use engine::EngineName;
use models::ModelChoice;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The contained task: load the file at the second argument's path with the engine the first
/// names; exit 0, or refuse in one line.
pub const LOAD_TASK: Task = Task {
    name: "engine-load-model",
    handler: load_child,
};

/// The panic payload as text (a panic carries a `&str` or a `String`, or something else).
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    match (
        payload.downcast_ref::<&str>(),
        payload.downcast_ref::<String>(),
    ) {
        (Some(s), _) => s.to_string(),
        (_, Some(s)) => s.clone(),
        _ => "no message".to_string(),
    }
}

fn load_child(args: &[OsString]) -> i32 {
    let name = args.first().and_then(|a| a.to_str()).map(EngineName::parse);
    let (Some(Ok(name)), Some(path)) = (name, args.get(1)) else {
        eprintln!("error: the engine-load-model task takes an engine and a path");
        return 2;
    };
    let path = Path::new(path);
    // A panic inside the engine's loader is the engine's crash, not this tool's: said as such.
    let load = || harness::engines::get(name)?.load(path, 1, 1).map(drop);
    match std::panic::catch_unwind(load) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => {
            eprintln!("error: {}", format!("{e:#}").replace('\n', " "));
            2
        }
        Err(payload) => {
            eprintln!(
                "error: {} panics while loading {}: {} (contained in a child process)",
                name.label(),
                path.display(),
                panic_text(payload.as_ref()).replace('\n', " ")
            );
            2
        }
    }
}

/// Files whose child load succeeded in this process, per engine: a command line's check and
/// its run both ask, and the second asks for free.
static LOADED: Mutex<Vec<(EngineName, PathBuf)>> = Mutex::new(Vec::new());

/// Loads a file the user named with `engine` in a child first. `Ok` for llama.cpp, whose
/// load is `harness::preflight`'s, and for a known model (checked by sha256); otherwise `Ok`
/// when the engine loaded it there, and why not in one line when it did not: its own refusal,
/// or how the child died (contained).
pub fn preflight(engine: EngineName, choice: &ModelChoice) -> Result<()> {
    if engine == EngineName::Llama || choice.known.is_some() {
        return Ok(());
    }
    let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    if loaded
        .iter()
        .any(|(e, p)| *e == engine && *p == choice.path)
    {
        return Ok(());
    }
    let args = [OsString::from(engine.as_str()), choice.path.clone().into()];
    let out = contain::run(LOAD_TASK.command(&args)?, subject::LOAD_TIMEOUT)?;
    judge(engine, &choice.path, &out)?;
    loaded.push((engine, choice.path.clone()));
    Ok(())
}

/// What a load child's outcome means for the command line: `Ok` when it loaded the file,
/// otherwise the one line to refuse it with.
fn judge(engine: EngineName, path: &Path, out: &ChildOutcome) -> Result<()> {
    let last = out.last_stderr_line();
    let said = last.strip_prefix("error: ").unwrap_or(last);
    match out.ended {
        Ended::Exited(0) => Ok(()),
        Ended::Exited(_) => bail!("{said}"),
        Ended::Signal(_) => bail!(
            "{} {} while loading {} (contained in a child process; its last line: {})",
            engine.label(),
            out.ended.describe(),
            path.display(),
            if said.is_empty() { "none" } else { said }
        ),
        Ended::TimedOut(_) => bail!(
            "loading {} with {} {} (stopped; contained in a child process)",
            path.display(),
            engine.label(),
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

    /// Each way a load child ends is one line that names the engine and, for a crash, says it
    /// was contained.
    #[test]
    fn a_child_that_dies_loading_is_a_one_line_refusal_that_says_so() {
        let (p, candle) = (Path::new("m.gguf"), EngineName::Candle);
        let e = judge(
            candle,
            p,
            &outcome(Ended::Signal(6), "memory allocation failed\n"),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(e.lines().count(), 1);
        assert!(
            e.starts_with("candle aborts: SIGABRT") && e.contains("contained"),
            "{e}"
        );
        let timeout = Ended::TimedOut(subject::LOAD_TIMEOUT);
        let e = judge(candle, p, &outcome(timeout, ""))
            .unwrap_err()
            .to_string();
        assert!(e.contains("times out") && e.contains("contained"), "{e}");
        let refused = "error: candle cannot read m.gguf as GGUF: unexpected end of file\n";
        let e = judge(candle, p, &outcome(Ended::Exited(2), refused));
        assert_eq!(
            e.unwrap_err().to_string(),
            "candle cannot read m.gguf as GGUF: unexpected end of file"
        );
        assert!(judge(candle, p, &outcome(Ended::Exited(0), "")).is_ok());
        let payload: Box<dyn std::any::Any + Send> = Box::new(String::from("index 9 out of range"));
        assert_eq!(panic_text(payload.as_ref()), "index 9 out of range");
    }
}
