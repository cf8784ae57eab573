//! Dev-only helpers shared by every test binary (root workspace and generated builds): running a repro
//! binary, the lock that keeps model decoding to one test at a time, per-build snapshot names,
//! and the checks on every binary's command line ([`Doors`], and argument fuzzing in
//! [`argv_fuzz`]).

pub mod gguf;

use argv_fuzz::Outcome;
use contain::Ended;
use std::ffi::OsStr;
use std::fmt::Debug;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Mutex, MutexGuard, RwLock};
use std::time::Duration;

pub mod argv_fuzz;

#[doc(hidden)]
pub use insta;

/// Runs the repro binary at `bin` (a test passes `env!("CARGO_BIN_EXE_repro-x")`) with `args`
/// and returns its exit code (-1 if it was killed by a signal), stdout and stderr.
///
/// Stdout must be UTF-8 (it is the repro's own text or JSON, and a test that compares it
/// byte for byte must see it whole); stderr may carry llama.cpp's log lines and is read lossily.
pub fn run_bin(bin: impl AsRef<OsStr>, args: &[&str]) -> (i32, String, String) {
    run_bin_with_env(bin, args, &[])
}

/// [`run_bin`] with extra environment variables set for the child only.
pub fn run_bin_with_env(
    bin: impl AsRef<OsStr>,
    args: &[&str],
    env: &[(&str, &str)],
) -> (i32, String, String) {
    let bin = bin.as_ref();
    let out = output(bin, args, env, Stdio::piped(), None);
    let code = out.code().unwrap_or(-1);
    let stdout = String::from_utf8(out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout of {} {args:?} is not UTF-8: {e}",
            bin.to_string_lossy()
        )
    });
    (code, stdout, out.stderr)
}

/// The environment variable of `cmdline`'s check-only mode, set to `1`.
pub const CHECK_ONLY: (&str, &str) = ("SAMPLER_AUDIT_CHECK_ONLY", "1");

/// Asserts that `bin args` passes its checks in check-only mode: exit 0, nothing on stdout or
/// stderr.
pub fn assert_check_only_ok(bin: impl AsRef<OsStr>, args: &[&str]) {
    let o = output(
        bin.as_ref(),
        args,
        &[CHECK_ONLY],
        Stdio::piped(),
        Some(DOOR_DEADLINE),
    );
    let ended = (o.code(), o.stdout.as_slice(), o.stderr.as_str());
    assert_eq!(ended, (Some(0), &b""[..], ""), "{args:?}: {o:?}");
}

/// [`argv_fuzz::in_process`] sets a fuzz's variables (an empty `MODELS_CACHE`) in this process
/// under the write guard and puts the old values back before it lets go; a child starts, and
/// a test reads what those variables name, under a read guard.
static ENV: RwLock<()> = RwLock::new(());

/// Runs `f` (which starts a child, or reads the model cache) while this process's environment
/// is its own, not a fuzz's.
pub fn with_env_unchanged<R>(f: impl FnOnce() -> R) -> R {
    let _guard = ENV.read().unwrap_or_else(|e| e.into_inner());
    f()
}

/// How long a door's process may take before it is killed and counted a failure: far more
/// than any check-only run or refusal needs (a contained model load takes seconds), so that a
/// binary that hangs fails its test instead of hanging it.
pub const DOOR_DEADLINE: Duration = Duration::from_secs(120);

/// How `bin args` ended with `env` set, stdin empty and stdout to `stdout` (stderr read
/// lossily), started under [`with_env_unchanged`] as a supervised child (`contain::run_to`:
/// its own process group, both pipes drained while it runs) and waited for outside it; past
/// `deadline` the child is killed and the outcome has no status.
fn output(
    bin: &OsStr,
    args: &[impl AsRef<OsStr>],
    env: &[(&str, &str)],
    stdout: Stdio,
    deadline: Option<Duration>,
) -> Outcome {
    let mut cmd = Command::new(bin);
    cmd.args(args).envs(env.iter().copied());
    let deadline = deadline.unwrap_or(Duration::MAX);
    let o = with_env_unchanged(|| contain::run_to(cmd, stdout, deadline))
        .unwrap_or_else(|e| panic!("could not run {}: {e:#}", bin.to_string_lossy()));
    let status = match o.ended {
        Ended::Exited(code) => Some(ExitStatus::from_raw(code << 8)),
        Ended::Signal(s) => Some(ExitStatus::from_raw(s)),
        Ended::TimedOut(_) => None,
    };
    Outcome {
        status,
        stdout: o.stdout,
        stderr: o.stderr,
    }
}

/// Held by every test that decodes a model, in-process or through a repro binary.
static DECODER: Mutex<()> = Mutex::new(());

/// Decoding spins two ggml threads; two decoders at once on a 2-core machine slow each other
/// down many times over, so a test that decodes holds this guard for its whole body. The lock
/// is per test binary (cargo runs test binaries one after another). A test that panicked while
/// holding it does not poison it for the others.
pub fn one_at_a_time() -> MutexGuard<'static, ()> {
    DECODER.lock().unwrap_or_else(|e| e.into_inner())
}

/// The snapshot suffix of the linked build: its llama.cpp name (`b11429`, `b10200`).
pub fn build_suffix() -> String {
    subject::BuildInfo::current().slug()
}

/// The repository's top folder. Found from this crate's own folder, which is the same on
/// every build: a test compiled by a generated workspace has its manifest folder elsewhere.
pub fn repo_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The committed `results/` folder (see [`repo_root`]).
pub fn results_dir() -> std::path::PathBuf {
    repo_root().join("results")
}

/// Runs `f` with insta's snapshot suffix set to [`build_suffix`], so a snapshot named `census`
/// is stored as `<test>__census@b11429.snap` on the default build and `...@b10200.snap` on
/// the older one. Other settings in force are kept.
pub fn per_build<R>(f: impl FnOnce() -> R) -> R {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_suffix(build_suffix());
    settings.bind(f)
}

/// `insta::assert_snapshot!(name, value)` under [`per_build`]: one snapshot file per linked
/// build, the name without the build part.
#[macro_export]
macro_rules! assert_build_snapshot {
    ($name:expr, $value:expr $(,)?) => {
        $crate::per_build(|| $crate::insta::assert_snapshot!($name, $value))
    };
}

/// Runs `bin` with `args` (and `env`) and checks the refusal contract every repro keeps
/// ([`Outcome::problem`]): exit 2, nothing on stdout, exactly one line on stderr, starting
/// with `error`, ended by its newline and telling of no panic. Returns that line.
pub fn assert_refused(
    bin: impl AsRef<OsStr>,
    args: &[impl AsRef<OsStr> + Debug],
    env: &[(&str, &str)],
) -> String {
    let o = output(bin.as_ref(), args, env, Stdio::piped(), Some(DOOR_DEADLINE));
    assert_eq!((o.code(), o.problem()), (Some(2), None), "{args:?}: {o:?}");
    o.stderr
}

/// Runs `bin` with `args`, which must print one report as JSON: exit 0, stdout parses, and the
/// report opens with the header every results file carries. Returns the value and its header.
pub fn json_report(bin: impl AsRef<OsStr>, args: &[&str]) -> (serde_json::Value, report::Header) {
    let (code, stdout, stderr) = run_bin(bin, args);
    assert_eq!(code, 0, "{args:?}: {stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{args:?}: stdout is not JSON ({e}): {stdout}"));
    let h = report::Header::from_json(&v).unwrap_or_else(|e| panic!("{args:?}: {e:#}"));
    (v, h)
}

/// Runs `bin` with `args` and `env` with stdout a pipe whose reader is closed before the
/// program starts (`bin args | head -0`, deterministically), and checks that it ends quietly:
/// exit 0, no signal, and nothing on stderr about a panic or a broken pipe. Returns stderr.
pub fn assert_quiet_on_closed_pipe(
    bin: impl AsRef<OsStr>,
    args: &[&str],
    env: &[(&str, &str)],
) -> String {
    let bin = bin.as_ref();
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let o = output(bin, args, env, writer.into(), Some(DOOR_DEADLINE));
    let name = bin.to_string_lossy();
    assert_eq!(
        o.code(),
        Some(0),
        "{name} {args:?} into a closed pipe: {o:?}"
    );
    for bad in ["panicked", "internal error", "Broken pipe", "os error 32"] {
        assert!(
            !o.stderr.contains(bad),
            "{name} {args:?} into a closed pipe: {o:?}"
        );
    }
    o.stderr
}

/// Runs `bin` with `args` twice and checks that stdout is the same bytes both times (and
/// that both runs exit 0). Returns stdout.
pub fn assert_same_bytes_twice(bin: impl AsRef<OsStr>, args: &[&str]) -> String {
    let bin = bin.as_ref();
    let (code_a, a, err_a) = run_bin(bin, args);
    assert_eq!(code_a, 0, "{args:?}: {err_a}");
    let (code_b, b, err_b) = run_bin(bin, args);
    assert_eq!(code_b, 0, "{args:?}: {err_b}");
    assert!(!a.is_empty(), "{args:?} printed nothing");
    assert!(
        a == b,
        "{} {args:?} printed different bytes on two runs",
        bin.to_string_lossy()
    );
    a
}

/// One binary's command line at its doors, as data: each case is a command line as a shell
/// would write it (split at white space; `$RESULTS` stands for a folder that does not exist,
/// which check-only mode must leave uncreated), and [`Doors::check`] runs every case as a
/// process; a failure names its case.
#[derive(Debug, Default)]
pub struct Doors<'a> {
    pub bin: &'a str,
    /// Command lines that end quietly into a closed stdout pipe.
    pub quiet: &'a [&'a str],
    /// Command lines that pass their checks in check-only mode: exit 0, nothing printed.
    pub check_only_ok: &'a [&'a str],
    /// Command lines refused (exit 2, one line) in check-only mode.
    pub check_only_refused: &'a [&'a str],
    /// What `--help` states (each flag's bounds); `--help` itself must exit 0 with nothing on
    /// stderr.
    pub help_states: &'a [&'a str],
    /// Command lines refused outside check-only mode (past a bound: refused before any work).
    pub refused: &'a [&'a str],
    /// Command lines holding bytes that are not UTF-8, split at spaces, refused in check-only
    /// mode.
    pub not_utf8: &'a [&'a [u8]],
}

impl<'a> Doors<'a> {
    /// No cases yet for `bin`.
    pub fn of(bin: &'a str) -> Doors<'a> {
        Doors {
            bin,
            ..Doors::default()
        }
    }

    pub fn check(&self) {
        let name = Path::new(self.bin).file_name().unwrap_or_default();
        let scratch = Scratch::new(&format!("doors-{}", name.to_string_lossy()));
        let results = scratch.path("results");
        let each = |lines: &[&str], f: &dyn Fn(&[&str])| {
            for line in lines {
                let line = line.replace("$RESULTS", &results);
                f(&line.split_whitespace().collect::<Vec<_>>());
            }
        };
        each(self.quiet, &|a| {
            assert_quiet_on_closed_pipe(self.bin, a, &[]);
        });
        each(self.check_only_ok, &|a| assert_check_only_ok(self.bin, a));
        assert!(!Path::new(&results).exists(), "check-only wrote {results}");
        each(self.check_only_refused, &|a| {
            assert_refused(self.bin, a, &[CHECK_ONLY]);
        });
        let o = output(
            self.bin.as_ref(),
            &["--help"],
            &[],
            Stdio::piped(),
            Some(DOOR_DEADLINE),
        );
        assert_eq!((o.code(), o.problem()), (Some(0), None), "--help: {o:?}");
        let help = String::from_utf8_lossy(&o.stdout);
        for text in self.help_states {
            assert!(
                help.contains(text),
                "--help does not state '{text}':\n{help}"
            );
        }
        each(self.refused, &|a| {
            assert_refused(self.bin, a, &[]);
        });
        for line in self.not_utf8 {
            let argv: Vec<_> = line.split(|&b| b == b' ').map(OsStr::from_bytes).collect();
            assert_refused(self.bin, &argv, &[CHECK_ONLY]);
        }
    }
}

/// A folder for one test under the system's temporary folder, removed when dropped.
#[derive(Debug)]
pub struct Scratch(pub PathBuf);

impl Scratch {
    /// `<temp>/<name>-<pid>`, created empty.
    pub fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        Scratch(dir)
    }

    /// The path `rel` inside, as text, without creating it.
    pub fn path(&self, rel: &str) -> String {
        self.0.join(rel).display().to_string()
    }

    /// Creates the folder `rel` inside; returns its path.
    pub fn folder(&self, rel: &str) -> String {
        let path = self.path(rel);
        std::fs::create_dir_all(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        path
    }

    /// Writes `bytes` to the file `rel` inside; returns its path.
    pub fn file(&self, rel: &str, bytes: impl AsRef<[u8]>) -> String {
        let path = self.path(rel);
        std::fs::write(&path, bytes).unwrap_or_else(|e| panic!("{path}: {e}"));
        path
    }

    /// A link `rel` inside to `target`; returns its path.
    pub fn link(&self, rel: &str, target: &Path) -> String {
        let path = self.path(rel);
        std::os::unix::fs::symlink(target, &path).unwrap_or_else(|e| panic!("{path}: {e}"));
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// The control of the deadline: a planted child that outlasts it is killed, ends with no
    /// status, and breaks the contract; one that finishes in time keeps its output.
    #[test]
    fn a_door_that_hangs_is_killed_and_fails() {
        let sh = OsStr::new("sh");
        let short = Some(Duration::from_millis(300));
        let start = Instant::now();
        let hung = output(sh, &["-c", "sleep 30"], &[], Stdio::piped(), short);
        assert!(start.elapsed() < Duration::from_secs(10), "{hung:?}");
        assert!(hung.status.is_none(), "{hung:?}");
        assert!(hung.problem().unwrap().contains("timeout"), "{hung:?}");
        let quick = output(
            sh,
            &["-c", "echo out; echo err >&2"],
            &[],
            Stdio::piped(),
            short,
        );
        let ended = (quick.code(), quick.stdout.as_slice(), quick.stderr.as_str());
        assert_eq!(ended, (Some(0), &b"out\n"[..], "err\n"));
    }
}
