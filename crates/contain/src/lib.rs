//! Crash containment: work that may kill its process runs in a child the auditor supervises.
//!
//! llama.cpp reports a broken precondition by aborting (`GGML_ASSERT`), some of its C++ paths
//! can throw through the C API, and a bad model file or an edge input can make it read out of
//! bounds. In-process, any of these ends the audit. Here the binary re-runs itself as a child
//! with a *task* named in [`TASK_ENV`]; the child does one piece of work, prints its answer
//! on stdout and exits. The parent turns whatever happened into an [`ChildOutcome`]: an exit code
//! with the child's output, a signal (`aborts: SIGABRT`), or a timeout. Nothing the child does
//! can end the parent.
//!
//! Protocol, kept small on purpose:
//! - a binary that offers tasks calls [`serve`] first thing in `main`; when [`TASK_ENV`] is
//!   set it runs the named handler with the remaining arguments and exits with its code;
//! - [`Task::command`] builds the child's command line (this executable, the task, its
//!   arguments) and refuses a task this binary does not serve, so a library can never start a
//!   child that would run something else (a test harness, say);
//! - [`run`] starts the child, feeds it nothing on stdin, collects stdout and stderr, and
//!   kills it at the deadline.
//!
//! Children run with core dumps off (a dump of a process holding a model is hundreds of MB)
//! and with `GGML_NO_BACKTRACE=1`, so ggml's abort handler does not attach a debugger.
//!
//! Invariant: this crate never links llama.cpp; the work is the handler's.

use anyhow::{bail, Context, Result};
use std::ffi::OsString;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The environment variable that makes a binary a child: its value names the task.
pub const TASK_ENV: &str = "SAMPLER_AUDIT_TASK";

/// Set by the parent beside [`TASK_ENV`]: its process id and a stamp of its executable (size
/// and modification time). A child refuses to run unless its parent is that process and its
/// own executable has that stamp, so a task never runs unsupervised (a user who sets
/// [`TASK_ENV`] by hand is refused) and never in a binary rebuilt since the parent started.
pub const PARENT_ENV: &str = "SAMPLER_AUDIT_TASK_PARENT";

/// `<size>:<mtime in ns>` of the running executable.
fn exe_stamp() -> Result<String> {
    let exe = std::env::current_exe().context("locating this executable")?;
    let meta = std::fs::metadata(&exe).with_context(|| format!("reading {}", exe.display()))?;
    let mtime = meta
        .modified()?
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    Ok(format!("{}:{mtime}", meta.len()))
}

/// Why this child must not run its task, if it must not.
fn unsupervised() -> Option<String> {
    let want = std::env::var(PARENT_ENV).ok();
    let parent = std::os::unix::process::parent_id();
    let have = exe_stamp().ok().map(|stamp| format!("{parent}:{stamp}"));
    match (want, have) {
        (Some(w), Some(h)) if w == h => None,
        (None, _) => Some("runs only as a supervised child of this binary".to_string()),
        _ => Some(
            "runs only as a supervised child of this binary, started by the same executable"
                .to_string(),
        ),
    }
}

/// One line on stderr, ignoring a closed stderr (a child has nowhere else to say it).
fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// A task's handler: the child's arguments after the executable name; returns the exit code.
pub type Handler = fn(&[OsString]) -> i32;

/// A piece of work a binary can run as a child of itself.
#[derive(Debug, Clone, Copy)]
pub struct Task {
    pub name: &'static str,
    pub handler: Handler,
}

static SERVED: OnceLock<Vec<&'static str>> = OnceLock::new();

/// Declares the tasks this binary serves. In a child (where [`TASK_ENV`] is set) it runs the
/// named one and returns its exit code, which `main` must exit with; in the parent it returns
/// `None`. An unknown task name is refused with one line and exit 2.
pub fn serve(tasks: &[Task]) -> Option<i32> {
    let _ = SERVED.set(tasks.iter().map(|t| t.name).collect());
    let name = std::env::var_os(TASK_ENV)?;
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let Some(task) = tasks.iter().find(|t| name == t.name) else {
        say(&format!(
            "error: {TASK_ENV}={} names no task of this binary",
            name.to_string_lossy()
        ));
        return Some(2);
    };
    if let Some(why) = unsupervised() {
        say(&format!("error: the task '{}' {why}", task.name));
        return Some(2);
    }
    Some((task.handler)(&args))
}

/// A handler's last step: prints `answer` on stdout and returns 0, or prints the error in one
/// line on stderr and returns 3 (the parent reads any other exit as "ended without an
/// answer" and reports that line).
pub fn reply(answer: Result<String>) -> i32 {
    use std::io::Write;
    match answer {
        Ok(text) => match std::io::stdout().lock().write_all(text.as_bytes()) {
            Ok(()) => 0,
            Err(_) => 3,
        },
        Err(e) => {
            say(&format!("error: {}", format!("{e:#}").replace('\n', " ")));
            3
        }
    }
}

/// Whether this process is a child running a task.
pub fn in_child() -> bool {
    std::env::var_os(TASK_ENV).is_some()
}

impl Task {
    /// The child's command: this executable with `args`, [`TASK_ENV`] set to the task.
    /// Refused when the running binary did not declare the task with [`serve`], and from
    /// inside a child (children never start children).
    pub fn command(&self, args: &[OsString]) -> Result<Command> {
        let served = SERVED.get().is_some_and(|s| s.contains(&self.name));
        if !served {
            bail!(
                "this binary does not serve the contained task '{}' (its main must call contain::serve)",
                self.name
            );
        }
        if in_child() {
            bail!("a contained child cannot start another child");
        }
        let exe = std::env::current_exe().context("locating this executable")?;
        let stamp = format!("{}:{}", std::process::id(), exe_stamp()?);
        let mut cmd = Command::new(exe);
        cmd.args(args)
            .env(TASK_ENV, self.name)
            .env(PARENT_ENV, stamp);
        Ok(cmd)
    }
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// It exited with this code.
    Exited(i32),
    /// A signal ended it (an abort is `SIGABRT`, an invalid access `SIGSEGV`).
    Signal(i32),
    /// It was still running at the deadline and was killed.
    TimedOut(Duration),
}

impl Ended {
    /// Whether a `SIGABRT` ended it: `abort()`, which is how `GGML_ASSERT` fails.
    pub fn aborted(&self) -> bool {
        matches!(self, Ended::Signal(s) if *s == libc::SIGABRT)
    }

    /// `exits 0`, `aborts: SIGABRT`, `times out after 10 s`: the words the reports use.
    pub fn describe(&self) -> String {
        match self {
            Ended::Exited(code) => format!("exits {code}"),
            Ended::Signal(s) => format!("aborts: {}", signal_name(*s)),
            Ended::TimedOut(d) => format!("times out after {} s", d.as_secs_f64()),
        }
    }
}

/// What a child did: how it ended and what it printed.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildOutcome {
    pub ended: Ended,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl ChildOutcome {
    /// The last non-empty line of stderr (a refusal's one line, or an assertion's message).
    pub fn last_stderr_line(&self) -> &str {
        self.stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
    }

    /// [`ChildOutcome::last_stderr_line`] with a leading source path cut to its file name
    /// (`/home/x/.cargo/.../llama-sampler.cpp:42: GGML_ASSERT(...) failed` becomes
    /// `llama-sampler.cpp:42: GGML_ASSERT(...) failed`), so the line reads the same on every
    /// machine.
    pub fn last_words(&self) -> String {
        let line = self.last_stderr_line();
        match line.split_once(": ") {
            Some((place, rest)) if place.contains('/') => {
                let file = place.rsplit('/').next().unwrap_or(place);
                format!("{file}: {rest}")
            }
            _ => line.to_string(),
        }
    }
}

/// The conventional name of signal `s` (`SIG<n>` for one outside the usual set).
pub fn signal_name(s: i32) -> String {
    let name = match s {
        libc::SIGABRT => "SIGABRT",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGILL => "SIGILL",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGTERM => "SIGTERM",
        libc::SIGPIPE => "SIGPIPE",
        _ => return format!("SIG{s}"),
    };
    name.to_string()
}

/// Reads `pipe` to its end on a thread of its own.
fn drain(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = pipe.read_to_end(&mut buf);
        buf
    })
}

/// How often the supervisor looks at a running child. Short, because most children finish
/// in a few milliseconds and the poll interval is the floor of every child's cost.
const POLL: Duration = Duration::from_micros(200);

/// Runs `cmd` as a supervised child: stdin empty, stdout and stderr collected, killed at
/// `timeout`. An error means the child could not be started at all.
pub fn run(cmd: Command, timeout: Duration) -> Result<ChildOutcome> {
    run_to(cmd, Stdio::piped(), timeout)
}

/// [`run`] with the child's stdout sent to `stdout`: a pipe is collected as in [`run`];
/// anything else (a test's closed pipe, say) leaves the outcome's stdout empty.
pub fn run_to(mut cmd: Command, stdout: Stdio, timeout: Duration) -> Result<ChildOutcome> {
    cmd.stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .env("GGML_NO_BACKTRACE", "1")
        // Its own process group, so the deadline kills whatever it started too (a child
        // holding our pipes open would otherwise keep the readers waiting).
        .process_group(0);
    // SAFETY: the closure runs between fork and exec and calls only setrlimit and prctl,
    // which are async-signal-safe; it touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            let none = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &none);
            // If the supervisor dies (Ctrl-C, a kill), the child goes with it instead of
            // spinning on as an orphan: its own process group keeps the terminal's signals
            // away from it.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
            Ok(())
        });
    }
    let mut child = cmd.spawn().context("starting a contained child")?;
    // Read both pipes on their own threads: a child that fills one pipe while we wait on the
    // other would otherwise stall until the deadline.
    let out_reader = child.stdout.take().map(drain);
    let err_reader = drain(child.stderr.take().context("child stderr")?);
    let start = Instant::now();
    let ended = loop {
        if let Some(status) = child.try_wait().context("waiting for a contained child")? {
            // Whatever the child left in its group (nothing, normally) would hold our pipes
            // open and keep the readers below waiting: it goes too. The group id was the
            // child's pid microseconds ago; a group with no members left is simply not found.
            // SAFETY: plain syscall on a process group we created.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            break match (status.code(), status.signal()) {
                (Some(code), _) => Ended::Exited(code),
                (None, Some(s)) => Ended::Signal(s),
                (None, None) => Ended::Signal(0),
            };
        }
        if start.elapsed() >= timeout {
            // SAFETY: plain syscall; the group id is the child's pid (process_group(0) above),
            // and the child is not yet reaped, so the id cannot have been reused.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.kill();
            let _ = child.wait();
            break Ended::TimedOut(timeout);
        }
        std::thread::sleep(POLL);
    };
    let stdout = out_reader.and_then(|r| r.join().ok()).unwrap_or_default();
    let stderr = String::from_utf8_lossy(&err_reader.join().unwrap_or_default()).into_owned();
    Ok(ChildOutcome {
        ended,
        stdout,
        stderr,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        c
    }

    /// Each way a child ends, with the words the reports use for it; nothing keeps the
    /// supervisor past 10 s, and output on both pipes larger than a pipe's buffer does not
    /// stall the child.
    #[test]
    fn every_ending_is_an_outcome_not_a_crash() {
        use Ended::{Exited, Signal, TimedOut};
        let zeros = "head -c 1000000 /dev/zero";
        let both = format!("{zeros}; {zeros} >&2");
        let short = Duration::from_millis(300);
        let mut out = Vec::new();
        for (script, ended, words) in [
            ("echo out; echo err >&2; exit 3", Exited(3), "exits 3"),
            ("kill -ABRT $$", Signal(libc::SIGABRT), "aborts: SIGABRT"),
            ("kill -SEGV $$", Signal(libc::SIGSEGV), "aborts: SIGSEGV"),
            ("sleep 30", TimedOut(short), "times out after 0.3 s"),
            (&both, Exited(0), "exits 0"),
        ] {
            let deadline = match ended {
                TimedOut(d) => d,
                _ => Duration::from_secs(20),
            };
            let start = Instant::now();
            let o = run(sh(script), deadline).unwrap();
            assert_eq!((o.ended, o.ended.describe().as_str()), (ended, words));
            assert!(start.elapsed() < Duration::from_secs(10), "{script}");
            out.push(o);
        }
        assert_eq!(
            (&out[0].stdout[..], out[0].last_stderr_line()),
            (&b"out\n"[..], "err")
        );
        assert_eq!(out[4].stdout.len(), 1_000_000);
    }

    #[test]
    fn an_undeclared_task_is_refused() {
        fn nothing(_: &[OsString]) -> i32 {
            0
        }
        let t = Task {
            name: "not-served-here",
            handler: nothing,
        };
        let e = t.command(&[]).unwrap_err().to_string();
        assert!(e.contains("does not serve"), "{e}");
    }
}
