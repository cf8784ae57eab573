//! The contract every repro binary keeps, written once: `--help` prints and exits 0; bad
//! input (a flag clap rejects, or a value the repro refuses) prints one line on stderr and
//! exits 2; a run that could not complete prints one line and exits 1; a panic prints one line
//! instead of a trace. Output goes to stdout only on success.

use std::ffi::OsString;

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

/// Parses `argv` as `A` and runs `body`; returns the process exit code.
pub fn run<A: clap::Parser>(
    argv: impl IntoIterator<Item = OsString>,
    body: impl FnOnce(A) -> Result<String, Failure>,
) -> i32 {
    let args = match A::try_parse_from(argv) {
        Ok(a) => a,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                print!("{e}");
                return 0;
            }
            eprintln!("{}", first_line(&e.to_string()));
            return EXIT_BAD_INPUT;
        }
    };
    match body(args) {
        Ok(out) => {
            print!("{out}");
            0
        }
        Err(Failure::BadInput(e)) => {
            eprintln!("error: {}", one_line(&e));
            EXIT_BAD_INPUT
        }
        Err(Failure::Failed(e)) => {
            eprintln!("error: {}", one_line(&e));
            EXIT_FAILED
        }
    }
}

/// A panic becomes one `error: internal error: ...` line instead of a backtrace.
pub fn one_line_panics() {
    std::panic::set_hook(Box::new(|info| {
        eprintln!(
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
    /// Where --audit writes its reports.
    #[arg(long, default_value = "results")]
    pub results: std::path::PathBuf,
}

/// The decoding flag the model-based repros share.
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct Decoding {
    /// CPU threads for decoding (fixed, so runs are byte-identical).
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
