//! `make memcheck`: valgrind memcheck over each finding's memcheck runs (the registry's
//! `memcheck` plans) on every audited build. A run passes when memcheck reports no memory
//! error, no byte definitely or indirectly lost (after the suppressions in
//! scripts/memcheck.supp), and the program exits 0. Before the real runs, the planted controls
//! (crates/memcheck-planted) go through the same function and the same parser: a planted leak
//! and a planted invalid read must be caught and a clean run must pass, or the check is not
//! trusted and the job fails.
//!
//! Valgrind's log of each run, and the program's stdout and stderr beside it, go to
//! target/memcheck/; the summary (one line per run) goes to stdout.

use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

const SUPP: &str = "scripts/memcheck.supp";
const LOGS: &str = "target/memcheck";
const PLANTED: &str = "target/release/memcheck-planted";

/// What valgrind's log of one process says.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Log {
    /// The ERROR SUMMARY count, `None` when the log has none (the run did not end normally).
    pub total: Option<u64>,
    pub definitely: u64,
    pub indirectly: u64,
    /// Loss records: each is one of the summary's "errors" (leaks count as errors under
    /// `--errors-for-leak-kinds`), taken out again to count memory errors.
    pub records: u64,
    pub unhandled: bool,
    /// A signal ended the process (an abort some probes measure).
    pub signalled: bool,
    /// The command valgrind ran, from its header.
    pub command: String,
}

impl Log {
    /// Memory errors, leaks not counted.
    pub fn errors(&self) -> u64 {
        self.total.unwrap_or(0).saturating_sub(self.records)
    }
}

/// The number after `word` on a line, commas dropped.
fn after(line: &str, word: &str) -> Option<u64> {
    let mut it = line.split_whitespace();
    it.by_ref().find(|w| *w == word)?;
    it.next()?.replace(',', "").parse().ok()
}

/// Reads one valgrind log.
pub fn parse(text: &str) -> Log {
    let mut log = Log::default();
    for line in text.lines() {
        if line.contains("ERROR SUMMARY:") {
            log.total = after(line, "SUMMARY:");
        } else if line.contains("definitely lost:") {
            log.definitely = after(line, "lost:").unwrap_or(0);
        } else if line.contains("indirectly lost:") {
            log.indirectly = after(line, "lost:").unwrap_or(0);
        }
        if line.contains(" are definitely lost in loss record ")
            || line.contains(" are indirectly lost in loss record ")
        {
            log.records += 1;
        }
        if line.contains("unhandled instruction bytes") {
            log.unhandled = true;
        }
        if line.contains("Process terminating with default action of signal") {
            log.signalled = true;
        }
        if log.command.is_empty() {
            if let Some((_, cmd)) = line.split_once("== Command: ") {
                log.command = cmd.to_string();
            }
        }
    }
    log
}

/// One measured run.
struct Measured {
    shown: String,
    log: Log,
    /// Why the log cannot be trusted, if it cannot.
    note: String,
    status: i32,
    secs: f64,
    /// Logs of the children valgrind followed.
    children: Vec<PathBuf>,
}

/// Runs `program args` under memcheck, following children when `tree`.
fn measure(
    n: usize,
    build: &str,
    program: &Path,
    args: &[String],
    tree: bool,
) -> anyhow::Result<Measured> {
    let name = program
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let log_path = PathBuf::from(format!(
        "{LOGS}/{n:02}-{}-{name}.log",
        if build == "-" { "control" } else { build }
    ));
    let shown = if args.is_empty() {
        name.clone()
    } else {
        format!("{name} {}", args.join(" "))
    };
    eprintln!("memcheck {build}: {shown}");
    let log_arg = if tree {
        format!("{}.%p", log_path.display())
    } else {
        log_path.display().to_string()
    };
    let started = Instant::now();
    let out = |ext: &str| -> anyhow::Result<std::fs::File> {
        let p = format!("{}.{ext}", log_path.display());
        std::fs::File::create(&p).with_context(|| format!("creating {p}"))
    };
    let mut child = Command::new("valgrind")
        .args([
            "--tool=memcheck",
            "--leak-check=full",
            "--show-leak-kinds=definite,indirect",
        ])
        .args([
            "--errors-for-leak-kinds=definite,indirect",
            "--error-exitcode=99",
        ])
        .arg(if tree {
            "--trace-children=yes"
        } else {
            "--trace-children=no"
        })
        .arg("--num-callers=40")
        .arg(format!("--suppressions={SUPP}"))
        .arg(format!("--log-file={log_arg}"))
        .arg(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out("stdout")?)
        .stderr(out("stderr")?)
        .spawn()
        .context("starting valgrind")?;
    let pid = child.id();
    let status = child
        .wait()
        .context("waiting for valgrind")?
        .code()
        .unwrap_or(-1);
    let secs = started.elapsed().as_secs_f64();
    let mut children = Vec::new();
    if tree {
        let parent = PathBuf::from(format!("{}.{pid}", log_path.display()));
        if parent.exists() {
            std::fs::rename(&parent, &log_path).context("naming the parent's log")?;
        }
        let prefix = format!(
            "{}.",
            log_path.file_name().unwrap_or_default().to_string_lossy()
        );
        for e in std::fs::read_dir(LOGS).context("reading the memcheck logs")? {
            let name = e?.file_name().to_string_lossy().into_owned();
            if name
                .strip_prefix(&prefix)
                .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()))
            {
                children.push(Path::new(LOGS).join(name));
            }
        }
        children.sort();
    }
    // Valgrind writes no log when it cannot start the program (a missing binary, say).
    let log = parse(&std::fs::read_to_string(&log_path).unwrap_or_default());
    let mut note = String::new();
    if log.unhandled {
        note = format!(
            "valgrind cannot run an instruction (unhandled instruction bytes; see {})",
            log_path.display()
        );
    }
    if log.total.is_none() && note.is_empty() {
        note = format!(
            "no memcheck summary (valgrind or the program did not run to the end; see {0} and {0}.stderr)",
            log_path.display()
        );
    }
    Ok(Measured {
        shown,
        log,
        note,
        status,
        secs,
        children,
    })
}

/// The summary's lines and counts.
#[derive(Default)]
struct Summary {
    lines: Vec<String>,
    passed: usize,
    failures: usize,
}

impl Summary {
    /// One line; `result` is ok, caught (passed), FAILED or MISSED (failed).
    fn line(&mut self, build: &str, cells: [String; 4], result: &str, what: &str) {
        match result {
            "ok" | "caught" => self.passed += 1,
            _ => self.failures += 1,
        }
        let [errors, def, ind, secs] = cells;
        self.lines.push(format!(
            "{build:<8} {errors:>6} {def:>12} {ind:>12} {secs:>8}  {result:<7} {what}"
        ));
    }

    fn failed(&self) -> bool {
        self.failures > 0
    }
}

fn cells(m: &Measured) -> [String; 4] {
    let l = &m.log;
    [
        l.errors().to_string(),
        l.definitely.to_string(),
        l.indirectly.to_string(),
        format!("{:.1}s", m.secs),
    ]
}

fn with_note(shown: &str, note: &str) -> String {
    if note.is_empty() {
        shown.to_string()
    } else {
        format!("{shown} [{note}]")
    }
}

/// One real run, which must be clean; with `tree`, each child too (no memory error, and no
/// lost byte unless a signal ended it: an aborted process leaks what it held).
fn check(
    n: usize,
    build: &str,
    program: &Path,
    args: &[String],
    tree: bool,
    unjudged: usize,
) -> anyhow::Result<Summary> {
    let mut s = Summary::default();
    let m = measure(n, build, program, args, tree)?;
    let l = &m.log;
    let mut note = m.note.clone();
    let leaked = l.errors() > 0 || l.definitely > 0 || l.indirectly > 0;
    if note.is_empty() && !leaked && m.status != 0 {
        note = format!("the program exited {}; see {LOGS}", m.status);
    }
    let bad = !note.is_empty() || leaked;
    s.line(
        build,
        cells(&m),
        if bad { "FAILED" } else { "ok" },
        &with_note(&m.shown, &note),
    );
    let mut ended_unjudged = Vec::new();
    for child in &m.children {
        let c = parse(&std::fs::read_to_string(child).unwrap_or_default());
        // A child killed at its deadline leaves no summary: nothing to judge, so only as many
        // as the run expects (a planted control that never returns) may end so.
        if c.total.is_none() {
            ended_unjudged.push(child.display().to_string());
            continue;
        }
        if c.errors() > 0 || (!c.signalled && c.definitely + c.indirectly > 0) {
            let name = program.file_name().unwrap_or_default().to_string_lossy();
            let cmd = match c.command.split_once(' ') {
                Some((bin, rest)) => format!(
                    "{} {rest}",
                    Path::new(bin)
                        .file_name()
                        .unwrap_or_default()
                        .to_string_lossy()
                ),
                None => c.command.clone(),
            };
            let cells = [
                c.errors().to_string(),
                c.definitely.to_string(),
                c.indirectly.to_string(),
                "-".into(),
            ];
            s.line(
                build,
                cells,
                "FAILED",
                &format!("child of {name}: {cmd} [{}]", child.display()),
            );
        }
    }
    if ended_unjudged.len() > unjudged {
        let dash = || "-".to_string();
        let what = format!(
            "{} children of {} ended unjudged (no memcheck summary; {unjudged} expected): {}",
            ended_unjudged.len(),
            m.shown,
            ended_unjudged.join(", ")
        );
        s.line(build, [dash(), dash(), dash(), dash()], "FAILED", &what);
    }
    Ok(s)
}

/// The summary's word for a control: whether it had to pass, and whether it behaved so.
fn control_word(must_pass: bool, behaved: bool) -> &'static str {
    match (must_pass, behaved) {
        (true, true) => "ok",
        (true, false) => "FAILED",
        (false, true) => "caught",
        (false, false) => "MISSED",
    }
}

/// The planted binary through the same measure: what each mode must show.
fn control(n: usize, mode: &str) -> anyhow::Result<Summary> {
    let m = measure(n, "-", Path::new(PLANTED), &[mode.to_string()], false)?;
    let l = &m.log;
    let trusted = m.note.is_empty();
    let caught = match mode {
        "clean" => {
            trusted && m.status == 0 && l.errors() == 0 && l.definitely == 0 && l.indirectly == 0
        }
        "leak" => {
            trusted && m.status == 99 && l.errors() == 0 && l.definitely > 0 && l.indirectly > 0
        }
        _ => trusted && m.status == 99 && l.errors() > 0 && l.definitely == 0 && l.indirectly == 0,
    };
    let clean = mode == "clean";
    let result = control_word(clean, caught);
    let what = format!(
        "{} (control: must {})",
        m.shown,
        if clean { "pass" } else { "fail" }
    );
    let mut s = Summary::default();
    s.line("-", cells(&m), result, &with_note(&what, &m.note));
    Ok(s)
}

/// The planted binary as a parent of a child in `mode`, through the child check: a child's
/// defect must fail the run, a clean or aborted child must not.
fn tree_control(n: usize, mode: &str, must_pass: bool) -> anyhow::Result<Summary> {
    let args = ["parent".to_string(), mode.to_string()];
    let passed = !check(n, "-", Path::new(PLANTED), &args, true, 0)?.failed();
    let result = control_word(must_pass, passed == must_pass);
    let what = format!(
        "memcheck-planted parent {mode} (control of the child check: must {})",
        if must_pass { "pass" } else { "fail" }
    );
    let mut s = Summary::default();
    let dash = || "-".to_string();
    s.line("-", [dash(), dash(), dash(), dash()], result, &what);
    Ok(s)
}

/// One queued run.
pub struct Run {
    pub build: String,
    pub program: PathBuf,
    pub args: Vec<String>,
    pub children: bool,
    /// How many followed children may end unjudged at their deadline.
    pub unjudged: usize,
}

pub fn valgrind_version() -> anyhow::Result<String> {
    let out = Command::new("valgrind").arg("--version").output();
    match out {
        Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).trim().to_string()),
        _ => bail!("valgrind not found; `make deps` installs it"),
    }
}

/// The controls, then `runs` two at a time (`jobs`), the summary in queue order whichever
/// finishes first. Returns the summary text and whether every run passed.
pub fn run(runs: &[Run], jobs: usize) -> anyhow::Result<(String, bool)> {
    let version = valgrind_version()?;
    let start = Instant::now();
    std::fs::create_dir_all(LOGS).with_context(|| format!("creating {LOGS}"))?;
    for e in std::fs::read_dir(LOGS)? {
        let p = e?.path();
        if p.file_name()
            .is_some_and(|n| n.to_string_lossy().contains(".log"))
        {
            std::fs::remove_file(&p).with_context(|| format!("removing {}", p.display()))?;
        }
    }
    // The registered runs' binaries are checked before any work (the command line's check);
    // an ad-hoc command may be a name on PATH.
    if !Path::new(PLANTED).is_file() {
        bail!("{PLANTED} is missing; run `make build` first");
    }
    let mut parts: Vec<Summary> = Vec::new();
    let mut n = 0;
    for mode in ["clean", "leak", "invalid-read"] {
        n += 1;
        parts.push(control(n, mode)?);
    }
    for (mode, must_pass) in [
        ("clean", true),
        ("abort-leak", true),
        ("invalid-read", false),
    ] {
        n += 1;
        parts.push(tree_control(n, mode, must_pass)?);
    }
    // Valgrind runs a program's threads on one core, so the runs go `jobs` at a time.
    let results: Vec<std::sync::Mutex<Option<anyhow::Result<Summary>>>> =
        runs.iter().map(|_| std::sync::Mutex::new(None)).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some(r) = runs.get(i) else { break };
                let out = check(
                    n + 1 + i,
                    &r.build,
                    &r.program,
                    &r.args,
                    r.children,
                    r.unjudged,
                );
                *results[i].lock().expect("a memcheck worker panicked") = Some(out);
            });
        }
    });
    for (i, slot) in results.into_iter().enumerate() {
        match slot.into_inner().expect("a memcheck worker panicked") {
            Some(s) => parts.push(s?),
            None => bail!("run {} left no summary", n + 1 + i),
        }
    }
    let (mut passed, mut failures) = (0, 0);
    let mut text = format!("memcheck ({version}, suppressions {SUPP}; logs in {LOGS}/)\n");
    text += &format!(
        "{:<8} {:>6} {:>12} {:>12} {:>8}  {:<7} {}\n",
        "build", "errors", "definitely", "indirectly", "time", "result", "command"
    );
    text += &format!(
        "{:<8} {:>6} {:>12} {:>12} {:>8}  {:<7} {}\n",
        "", "", "lost bytes", "lost bytes", "", "", ""
    );
    for p in &parts {
        passed += p.passed;
        failures += p.failures;
        for l in &p.lines {
            text += l;
            text.push('\n');
        }
    }
    let clean = failures == 0;
    text += &format!(
        "total {:.0} s; {}\n",
        start.elapsed().as_secs_f64(),
        if clean {
            "memcheck clean"
        } else {
            "memcheck FAILED"
        }
    );
    // The closing line in the form CI reads as a count (a caught control counts as passed).
    text += &format!("memcheck: {passed} passed, {failures} failed\n");
    Ok((text, clean))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log with a leak shown as loss records: the records leave the memory-error count, the
    /// bytes are read with their commas, and the header's command is kept.
    #[test]
    fn a_log_is_read_back_with_leaks_apart_from_errors() {
        let log = "\
==7== Command: /x/repro-edges top_k empty
==7== 8 bytes in 1 blocks are definitely lost in loss record 1 of 2
==7== 1,064 bytes in 1 blocks are indirectly lost in loss record 2 of 2
==7==    definitely lost: 8 bytes in 1 blocks
==7==    indirectly lost: 1,064 bytes in 1 blocks
==7== ERROR SUMMARY: 3 errors from 3 contexts (suppressed: 0 from 0)
";
        let l = parse(log);
        assert_eq!(
            (l.total, l.definitely, l.indirectly, l.records),
            (Some(3), 8, 1064, 2)
        );
        assert_eq!(l.errors(), 1);
        assert_eq!(l.command, "/x/repro-edges top_k empty");
        assert!(!l.signalled && !l.unhandled);
        let aborted =
            parse("==9== Process terminating with default action of signal 6 (SIGABRT)\n");
        assert!(aborted.signalled && aborted.total.is_none());
    }
}
