//! Dev-only helpers shared by every test binary (root workspace and `legacy/`): running a repro
//! binary, the lock that keeps model decoding to one test at a time, per-build snapshot names,
//! and the checks on every binary's command line (a closed stdout pipe, argument fuzzing in
//! process and as processes in [`argv_fuzz`]). Tests depend on this crate instead of keeping their own copies.

pub mod gguf;

use std::ffi::OsStr;
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard, RwLock};

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
    let mut cmd = Command::new(bin);
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out =
        output(&mut cmd).unwrap_or_else(|e| panic!("could not run {}: {e}", bin.to_string_lossy()));
    let stdout = String::from_utf8(out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout of {} {args:?} is not UTF-8: {e}",
            bin.to_string_lossy()
        )
    });
    (
        out.status.code().unwrap_or(-1),
        stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The environment variable of `cmdline`'s check-only mode, set to `1`.
pub const CHECK_ONLY: (&str, &str) = ("SAMPLER_AUDIT_CHECK_ONLY", "1");

/// Asserts that `bin args` passes its checks in check-only mode: exit 0, nothing on stdout or
/// stderr.
pub fn assert_check_only_ok(bin: impl AsRef<OsStr>, args: &[&str]) {
    let (code, stdout, stderr) = run_bin_with_env(bin, args, &[CHECK_ONLY]);
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (0, "", ""),
        "{args:?}"
    );
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

/// `cmd.output()`, started under [`with_env_unchanged`] and waited for outside it.
fn output(cmd: &mut Command) -> std::io::Result<std::process::Output> {
    with_env_unchanged(|| cmd.spawn())?.wait_with_output()
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

/// The snapshot suffix of the linked llama-cpp-sys-2 build: `b0_1_161`, `b0_1_154`.
pub fn build_suffix() -> String {
    format!("b{}", subject::BuildInfo::current().slug())
}

/// The committed `results/` folder. Found from this crate's own folder, which is the same on
/// every build: a test compiled by `legacy/Cargo.toml` has its manifest folder in `legacy/`.
pub fn results_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../results")
}

/// Runs `f` with insta's snapshot suffix set to [`build_suffix`], so a snapshot named `census`
/// is stored as `<test>__census@b0_1_161.snap` on the root build and `...@b0_1_154.snap` on
/// the legacy one. Other settings in force are kept.
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

/// Runs `bin` with `args` (and `env`) and checks the refusal contract every repro keeps: exit
/// 2, nothing on stdout, exactly one line on stderr, starting with `error`. Returns that line.
pub fn assert_refused(bin: impl AsRef<OsStr>, args: &[&str], env: &[(&str, &str)]) -> String {
    let (code, stdout, stderr) = run_bin_with_env(bin, args, env);
    assert_eq!(code, 2, "{args:?}: {stderr}");
    assert!(stdout.is_empty(), "{args:?}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
    assert!(stderr.starts_with("error"), "{args:?}: {stderr}");
    stderr
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
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out =
        output(&mut cmd).unwrap_or_else(|e| panic!("could not run {}: {e}", bin.to_string_lossy()));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let name = bin.to_string_lossy();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{name} {args:?} into a closed pipe: {} ({stderr})",
        out.status
    );
    for bad in ["panicked", "internal error", "Broken pipe", "os error 32"] {
        assert!(
            !stderr.contains(bad),
            "{name} {args:?} into a closed pipe: {stderr}"
        );
    }
    stderr
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
