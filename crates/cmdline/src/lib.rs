//! The contract every repro binary keeps, written once: `--help` prints and exits 0; bad
//! input (a flag clap rejects, or a value the repro refuses) prints one line on stderr and
//! exits 2; a run that could not complete prints one line and exits 1; a panic prints one line
//! instead of a trace. Output goes to stdout only on success, and a reader that closes the
//! pipe early (`repro-x | head -1`) ends the program quietly. With
//! `SAMPLER_AUDIT_CHECK_ONLY=1` a binary checks its arguments and exits without running.

pub mod progress;
pub use progress::Progress;

use std::ffi::OsString;
use std::io::Write;

/// Exit code for input the command refuses (bad flags, bad values, a missing model).
pub const EXIT_BAD_INPUT: i32 = 2;
/// Exit code for a run that could not complete.
pub const EXIT_FAILED: i32 = 1;

/// Why a repro stopped without output.
pub enum Failure {
    /// The input was refused: exit 2.
    BadInput(anyhow::Error),
    /// The run failed: exit 1.
    Failed(anyhow::Error),
}

/// `result.map_err(Failure::BadInput)`, for the validation steps of a repro.
pub fn refuse<T>(result: anyhow::Result<T>) -> Result<T, Failure> {
    result.map_err(Failure::BadInput)
}

/// `result.map_err(Failure::Failed)`, for the run itself.
pub fn fail<T>(result: anyhow::Result<T>) -> Result<T, Failure> {
    result.map_err(Failure::Failed)
}

/// An error chain on one line.
pub fn one_line(e: &anyhow::Error) -> String {
    format!("{e:#}").replace('\n', " ")
}

/// clap's first line (its message without the usage block).
pub fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("error: invalid arguments")
}

/// The environment variable of check-only mode: set to `1`, a binary parses and checks its
/// arguments, then exits 0 with nothing on stdout instead of running. Argument fuzzing uses
/// it, so that a generated command line that happens to be valid does not start an hour-long
/// audit. Any other value (or none) runs normally.
pub const CHECK_ONLY_ENV: &str = "SAMPLER_AUDIT_CHECK_ONLY";

/// Whether check-only mode is on (see [`CHECK_ONLY_ENV`]).
pub fn check_only() -> bool {
    std::env::var_os(CHECK_ONLY_ENV).is_some_and(|v| v == "1")
}

/// What a command line comes to before any work: [`run_checked`]'s decision, which a test can
/// take in process.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision<C> {
    /// `--help` or `--version`: this text goes to stdout, exit 0.
    Print(String),
    /// The checks passed: the work runs on this config (check-only mode stops here, exit 0).
    Run(C),
    /// This one line goes to stderr, and the program exits with this code (2 or 1).
    Stop(i32, String),
}

/// Parses `argv` as `A` and checks it into a config with `check`, without exiting or writing.
/// A refusal comes out as one line starting with `error` and exit 2 (1 for a failure) whatever
/// `check` returns, so a test taking decisions in process can only find a panic in `check`.
pub fn decide<A: clap::Parser, C>(
    argv: impl IntoIterator<Item = OsString>,
    check: impl FnOnce(A) -> Result<C, Failure>,
) -> Decision<C> {
    use clap::error::ErrorKind::{DisplayHelp, DisplayVersion};
    match A::try_parse_from(argv).map(check) {
        Ok(Ok(config)) => Decision::Run(config),
        Ok(Err(f)) => {
            let (code, line) = stop(f);
            Decision::Stop(code, line)
        }
        Err(e) if matches!(e.kind(), DisplayHelp | DisplayVersion) => {
            Decision::Print(e.to_string())
        }
        Err(e) => Decision::Stop(EXIT_BAD_INPUT, first_line(&e.to_string()).to_string()),
    }
}

/// The exit code and error line of a failure.
fn stop(f: Failure) -> (i32, String) {
    match f {
        Failure::BadInput(e) => (EXIT_BAD_INPUT, format!("error: {}", one_line(&e))),
        Failure::Failed(e) => (EXIT_FAILED, format!("error: {}", one_line(&e))),
    }
}

/// Parses `argv` as `A`, checks it into a config with `check` ([`decide`]), and runs `body` on
/// that config; returns the process exit code.
///
/// `check` holds everything that can refuse the input before any work starts: flag values
/// and their ranges, list lengths, stage texts, files that must exist, the linked build and
/// the model names (`models::resolve`, which checks a named model's size and sha256). `body`
/// is the work. Under [`check_only`] the program stops after `check` with exit 0 and empty
/// stdout. What can only be checked during the work (loading a model into llama.cpp, a
/// prompt's length in a model's tokens) is still refused with exit 2 when the work runs, but
/// check-only mode stops before it.
pub fn run_checked<A: clap::Parser, C>(
    argv: impl IntoIterator<Item = OsString>,
    check: impl FnOnce(A) -> Result<C, Failure>,
    body: impl FnOnce(C) -> Result<String, Failure>,
) -> i32 {
    let (code, line) = match decide(argv, check) {
        Decision::Print(text) => return write_stdout(&text),
        Decision::Run(_) if check_only() => return write_stdout(""),
        Decision::Run(config) => match body(config) {
            Ok(out) => return write_stdout(&out),
            Err(f) => stop(f),
        },
        Decision::Stop(code, line) => (code, line),
    };
    say(&line);
    code
}

/// Writes one line to stderr. `eprintln!` panics when stderr is closed (`2>&-`, a closed
/// pipe, `/dev/full`), which would turn an exit 2 into a panic's exit 101; a line nobody can
/// read is dropped instead, and the exit code still says what happened.
pub fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// Writes `text` to stdout, flushes it, and returns the exit code.
///
/// Rust ignores SIGPIPE, so a reader that closed the pipe early (`repro-x | head -1`) turns
/// into an EPIPE error, on which `print!` panics. Here a closed pipe ends the program quietly
/// with exit 0: the run itself completed (and wrote its reports, with `--audit`), and the
/// reader stopped reading because it had what it wanted; exit 0 also keeps the pipeline's
/// status what the reader decides, under `set -o pipefail` too. Any other write error (a
/// full disk, say) is a run that could not deliver its output: one line, exit 1.
pub fn write_stdout(text: &str) -> i32 {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => 0,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            say(&format!("error: writing stdout: {e}"));
            EXIT_FAILED
        }
    }
}

/// A panic becomes one `error: internal error: ...` line instead of a backtrace.
///
/// The hook writes without `eprintln!`, which panics when stderr is a closed pipe: a panic
/// inside the hook would abort the process.
pub fn one_line_panics() {
    std::panic::set_hook(Box::new(|info| {
        let _ = writeln!(
            std::io::stderr(),
            "error: internal error: {}",
            info.to_string().replace('\n', " ")
        );
    }));
}

/// The output flags every repro shares (`#[command(flatten)]`): the form of stdout, and the
/// folder `--audit` writes its reports into.
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct Output {
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Where --audit (and repro-gauge's --tables) writes its reports.
    #[arg(long, default_value = "results")]
    pub results: std::path::PathBuf,
}

/// The decoding flag the model-based repros share.
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct Decoding {
    /// CPU threads for decoding, 1 to 64 (fixed, so runs are byte-identical).
    #[arg(long, default_value_t = 2, allow_negative_numbers = true)]
    pub threads: i64,
}

impl Decoding {
    /// The thread count, refused outside 1..=64.
    pub fn threads(&self) -> anyhow::Result<i32> {
        anyhow::ensure!(
            (1..=64).contains(&self.threads),
            "--threads must be in 1..=64, got {}",
            self.threads
        );
        Ok(self.threads as i32)
    }
}

/// The model flag the model-based repros share.
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct ModelChoice {
    /// smollm2, gemma3 (the files `make models` caches) or a path to a GGUF file.
    #[arg(long, default_value = "smollm2")]
    pub model: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser, Debug)]
    struct Args {
        #[arg(long)]
        n: i32,
    }

    fn check(a: Args) -> Result<i32, Failure> {
        match a.n {
            1 => fail(Err(anyhow::anyhow!("a\nb"))),
            2 => refuse(Err(anyhow::anyhow!("bad"))),
            n => Ok(n),
        }
    }

    #[test]
    fn each_ending_has_its_exit_code_and_one_line() {
        let d = |args: &[&str]| {
            let argv = std::iter::once("x").chain(args.iter().copied());
            decide(argv.map(OsString::from), check)
        };
        assert_eq!(d(&["--n", "5"]), Decision::Run(5));
        assert_eq!(d(&["--n", "1"]), Decision::Stop(1, "error: a b".into()));
        assert_eq!(d(&["--n", "2"]), Decision::Stop(2, "error: bad".into()));
        assert!(matches!(d(&["--help"]), Decision::Print(t) if t.contains("--n")));
        let Decision::Stop(2, line) = d(&["--m"]) else {
            panic!("an unknown flag is refused")
        };
        assert!(line.starts_with("error: unexpected argument '--m'") && !line.contains('\n'));
    }
}
