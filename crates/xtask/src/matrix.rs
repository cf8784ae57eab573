//! `make matrix`: every distinct llama.cpp revision of the release table built through
//! buildgen, and on each the findings the registry gives a matrix run (`registry::plan::matrix`)
//! with their controls, then every standalone reproducer of upstream/llama.cpp/ (`upstream
//! record`). Reports go to results/matrix/ under the revision's name; then crates/matrix turns
//! them into the affected-range table, the plot and the quoted source changes.
//!
//! A revision that buildgen refuses or that does not compile gets a status line with the first
//! error line, and the matrix goes on. Builds are cached under target/builds/<crate version>/,
//! so a rerun only compiles what changed. JOBS (default 2) revisions run their findings at
//! once; a finding that decodes a model holds a lock while it runs (llama.cpp's CPU threads
//! spin while they wait for each other, so two decoding runs on 2 cores crawl).
//!
//! Runs are cached too. Every finding is deterministic (the same binary with the same
//! arguments writes the same bytes), so a finding whose binary and arguments hash as they did
//! at its last run, and whose reports still have the bytes that run wrote, is not run again:
//! `status/<revision>.<binary>.key` holds the input hash and each report's sha256 (the form
//! `sha256sum` reads). FORCE=1 runs every finding again regardless.

use anyhow::{bail, Context};
use sha2::{Digest, Sha256};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

const LOGS: &str = "target/matrix";
const BUILDGEN: &str = "target/release/buildgen";

/// What `make matrix` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Build what is missing, run every revision, write the table.
    All,
    /// Build (or find the cache of) every revision, run nothing.
    BuildOnly,
    /// Only the table, from the reports and status lines the folder holds.
    TableOnly,
}

struct Dirs {
    out: PathBuf,
    status: PathBuf,
    timing: PathBuf,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn sha256_file(path: &Path) -> anyhow::Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(hex(&Sha256::digest(&bytes)))
}

/// An error log's first `error` line, else its last line.
fn first_error(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    (text.lines().find(|l| l.starts_with("error")))
        .or_else(|| text.lines().last())
        .unwrap_or("")
        .to_string()
}

fn append(path: &Path, line: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    writeln!(f, "{line}").with_context(|| format!("writing {}", path.display()))
}

/// The text `valgrind --version` prints, or `no valgrind` (F1's memcheck probe reports
/// differently where valgrind is missing), with its newline.
fn valgrind_line() -> String {
    match Command::new("valgrind").arg("--version").output() {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
        _ => "no valgrind\n".into(),
    }
}

/// The input hash of a run: sha256 over the binary's `sha256sum` line, the arguments' line
/// and valgrind's version, as the shell version of this job wrote them, so its keys still
/// hold.
fn input_hash(binary: &Path, args: &[String], valgrind: &str) -> anyhow::Result<String> {
    let mut text = format!("{}  -\n", sha256_file(binary)?);
    if !args.is_empty() {
        text += &args.join(" ");
        text.push('\n');
    }
    text += valgrind;
    Ok(hex(&Sha256::digest(text.as_bytes())))
}

/// The files of a run's reports for `revision` that exist, relative to the matrix folder.
fn reports_of(out: &Path, run: &registry::plan::MatrixRun, revision: &str) -> Vec<String> {
    let mut files = Vec::new();
    for stem in run.stems {
        for ext in ["json", "txt"] {
            let f = format!("{stem}.{revision}.{ext}");
            if out.join(&f).is_file() {
                files.push(f);
            }
        }
    }
    files
}

fn remove_all(out: &Path, files: &[String]) -> anyhow::Result<()> {
    for f in files {
        std::fs::remove_file(out.join(f)).with_context(|| format!("removing {f}"))?;
    }
    Ok(())
}

/// A key still holds: its input line matches and every report it lists has its bytes.
fn key_holds(key: &Path, input: &str, out: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(key) else {
        return false;
    };
    let mut lines = text.lines();
    if lines.next() != Some(&format!("input {input}")) {
        return false;
    }
    let reports: Vec<&str> = lines.collect();
    !reports.is_empty()
        && reports.iter().all(|l| {
            l.split_once("  ")
                .is_some_and(|(sum, file)| sha256_file(&out.join(file)).is_ok_and(|s| s == sum))
        })
}

/// The status and timing of one revision's runs.
fn run_revision(
    d: &Dirs,
    name: &str,
    bin: &Path,
    runs: &[registry::plan::MatrixRun],
    valgrind: &str,
) -> anyhow::Result<()> {
    let runs_tsv = d.status.join(format!("{name}.runs.tsv"));
    let _ = std::fs::remove_file(&runs_tsv);
    let timing = d.timing.join(format!("{name}.tsv"));
    if let Ok(text) = std::fs::read_to_string(&timing) {
        let kept: String = text
            .lines()
            .filter(|l| !l.starts_with("run\t"))
            .map(|l| format!("{l}\n"))
            .collect();
        std::fs::write(&timing, kept).with_context(|| format!("writing {}", timing.display()))?;
    }
    let force = std::env::var("FORCE").is_ok_and(|v| v != "0" && !v.is_empty());
    for run in runs {
        // A run that cannot even start (a missing binary, a failed hash) is a status line
        // like a failed one, and the revision's other runs go on.
        let started = Instant::now();
        let done = one_run(
            d, name, bin, run, valgrind, force, &runs_tsv, &timing, started,
        );
        if let Err(e) = done {
            let why = format!("{e:#}");
            eprintln!("matrix: {} failed on {name}: {why}", run.binary);
            append(&runs_tsv, &format!("{name}\t{}\t{why}", run.binary))?;
            remove_all(&d.out, &reports_of(&d.out, run, name))?;
            append(
                &timing,
                &format!("run\t{}\t{}", run.binary, started.elapsed().as_secs()),
            )?;
        }
    }
    // The standalone C reproducers need no Rust controls: they decide the cells where the
    // suite's controls cannot run (before llama_sampler_init, b4718).
    let started = Instant::now();
    let log = PathBuf::from(format!("{LOGS}/run.{name}.upstream.out"));
    let logf = std::fs::File::create(&log).context("creating the reproducers' log")?;
    let status = Command::new("target/release/upstream")
        .args(["record", "--into"])
        .arg(d.out.join("upstream"))
        .arg(name)
        .stdin(Stdio::null())
        .stdout(logf.try_clone().context("sharing a log")?)
        .stderr(logf)
        .status()
        .context("starting target/release/upstream")?;
    if !status.success() {
        let why = first_error(&log);
        eprintln!("matrix: the reproducers failed on {name}: {why}");
        append(&runs_tsv, &format!("{name}\tupstream\t{why}"))?;
    }
    append(
        &timing,
        &format!("run\tupstream\t{}", started.elapsed().as_secs()),
    )?;
    eprintln!("matrix: ran {name}");
    Ok(())
}

/// One finding's run on one revision, or its cached reports.
#[allow(clippy::too_many_arguments)]
fn one_run(
    d: &Dirs,
    name: &str,
    bin: &Path,
    run: &registry::plan::MatrixRun,
    valgrind: &str,
    force: bool,
    runs_tsv: &Path,
    timing: &Path,
    started: Instant,
) -> anyhow::Result<()> {
    let binary = bin.join(run.binary);
    let key = d.status.join(format!("{name}.{}.key", run.binary));
    let input = input_hash(&binary, &run.args, valgrind)?;
    if !force && key_holds(&key, &input, &d.out) {
        append(timing, &format!("run\t{}\tcached", run.binary))?;
        return Ok(());
    }
    // A report is its last run's or absent: this finding's reports go before it runs again.
    let _ = std::fs::remove_file(&key);
    remove_all(&d.out, &reports_of(&d.out, run, name))?;
    let (out_log, err_log) = (
        PathBuf::from(format!("{LOGS}/run.{name}.{}.out", run.binary)),
        PathBuf::from(format!("{LOGS}/run.{name}.{}.err", run.binary)),
    );
    let mut cmd = if run.decodes {
        let mut c = Command::new("flock");
        c.arg(format!("{LOGS}/decode.lock")).arg(&binary);
        c
    } else {
        Command::new(&binary)
    };
    let status = cmd
        .args(["--audit", "--results"])
        .arg(&d.out)
        .args(&run.args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_log).context("creating a run's log")?)
        .stderr(std::fs::File::create(&err_log).context("creating a run's log")?)
        .status()
        .with_context(|| format!("starting {}", binary.display()))?;
    if status.success() {
        let reports = reports_of(&d.out, run, name);
        if reports.is_empty() {
            eprintln!(
                "matrix: {} on {name} wrote no report under its name",
                run.binary
            );
            append(
                runs_tsv,
                &format!("{name}\t{}\texit 0 but no report named {name}", run.binary),
            )?;
        } else {
            let mut text = format!("input {input}\n");
            for f in &reports {
                text += &format!("{}  {f}\n", sha256_file(&d.out.join(f))?);
            }
            std::fs::write(&key, text).with_context(|| format!("writing {}", key.display()))?;
        }
    } else {
        let why = first_error(&err_log);
        eprintln!("matrix: {} failed on {name}: {why}", run.binary);
        append(runs_tsv, &format!("{name}\t{}\t{why}", run.binary))?;
        // A failed run's partial reports are no data.
        remove_all(&d.out, &reports_of(&d.out, run, name))?;
    }
    append(
        timing,
        &format!("run\t{}\t{}", run.binary, started.elapsed().as_secs()),
    )?;
    Ok(())
}

/// The sorted lines of every `status/*<suffix>` file, into `into`.
fn gather(d: &Dirs, suffix: &str, into: &Path) -> anyhow::Result<()> {
    let mut lines = Vec::new();
    for e in std::fs::read_dir(&d.status).context("reading the status folder")? {
        let p = e?.path();
        if p.file_name()
            .is_some_and(|n| n.to_string_lossy().ends_with(suffix))
        {
            let text =
                std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
            lines.extend(text.lines().map(str::to_string));
        }
    }
    lines.sort();
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(into, text).with_context(|| format!("writing {}", into.display()))
}

/// changes.txt quotes each revision's vendored sampler file from cargo's registry; a revision
/// built elsewhere (a shard) may not be unpacked here, so the crates of every revision that
/// built are fetched (downloads, nothing compiled) before the table is written.
fn table(d: &Dirs) -> anyhow::Result<()> {
    let builds = d.out.join("builds.tsv");
    gather(d, ".build.tsv", &builds)?;
    gather(d, ".runs.tsv", &d.out.join("runs-failed.tsv"))?;
    for line in std::fs::read_to_string(&builds)?.lines() {
        let cols: Vec<&str> = line.split('\t').collect();
        if cols.get(2) != Some(&"ok") {
            continue;
        }
        let Ok(ws) = workspace_quiet(cols[0]) else {
            continue;
        };
        let fetched = Command::new("cargo")
            .args(["fetch", "--locked", "--quiet", "--manifest-path"])
            .arg(ws.join("Cargo.toml"))
            .stdout(std::io::stderr())
            .status();
        if !fetched.is_ok_and(|s| s.success()) {
            eprintln!("matrix: could not fetch the sources of {}", cols[0]);
        }
    }
    let status = Command::new("target/release/matrix")
        .arg(&d.out)
        .status()
        .context("starting target/release/matrix")?;
    if !status.success() {
        bail!("the matrix table failed ({status})");
    }
    Ok(())
}

fn workspace_quiet(name: &str) -> anyhow::Result<PathBuf> {
    let out = Command::new(BUILDGEN)
        .args(["workspace", name])
        .stderr(Stdio::null())
        .output()?;
    if !out.status.success() {
        bail!("refused");
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// The llama-cpp-sys-2 version the root lockfile pins (the root workspace's crate).
fn root_crate() -> String {
    let lock = std::fs::read_to_string("Cargo.lock").unwrap_or_default();
    let mut lines = lines_after(&lock, "name = \"llama-cpp-sys-2\"");
    let version = lines.next().unwrap_or("");
    version
        .strip_prefix("version = \"")
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or("")
        .to_string()
}

fn lines_after<'a>(text: &'a str, line: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    text.lines().skip_while(move |l| *l != line).skip(1)
}

pub fn run(mode: Mode, results: &str, jobs: usize, shard: Option<String>) -> anyhow::Result<()> {
    let start = Instant::now();
    let out = PathBuf::from(results).join("matrix");
    let d = Dirs {
        status: out.join("status"),
        timing: out.join("timing"),
        out,
    };
    for dir in [&d.out, &d.status, &d.timing, &PathBuf::from(LOGS)] {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    if mode == Mode::TableOnly {
        return table(&d);
    }
    let names = match std::env::var("REVISIONS") {
        Ok(r) if !r.trim().is_empty() => r.split_whitespace().map(str::to_string).collect(),
        _ => {
            let mut c = Command::new(BUILDGEN);
            c.arg("names");
            if let Some(shard) = &shard {
                c.args(["--shard", shard]);
            }
            let o = c
                .stderr(Stdio::inherit())
                .output()
                .context("running buildgen names")?;
            if !o.status.success() {
                bail!("buildgen names failed");
            }
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .map(str::to_string)
                .collect::<Vec<_>>()
        }
    };
    let matrix_runs = registry::plan::matrix(registry::FINDINGS);
    let here = std::env::current_dir()?.canonicalize()?;
    // Phase 1, one revision at a time (cargo already uses both cores).
    let mut built: Vec<(String, PathBuf)> = Vec::new();
    for name in &names {
        let log = PathBuf::from(format!("{LOGS}/build.{name}.log"));
        let st = d.status.join(format!("{name}.build.tsv"));
        let o = Command::new(BUILDGEN)
            .args(["workspace", name])
            .output()
            .context("running buildgen")?;
        std::fs::write(&log, &o.stderr).context("writing a build log")?;
        if !o.status.success() {
            let why = first_error(&log);
            std::fs::write(&st, format!("{name}\t\trefused\t{why}\n"))?;
            eprintln!("matrix: {name} refused: {why}");
            continue;
        }
        let ws = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
        let is_root = ws.canonicalize().is_ok_and(|w| w == here);
        let krate = if is_root {
            root_crate()
        } else {
            ws.file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned()
        };
        eprintln!("matrix: building {name} ({})", ws.display());
        let started = Instant::now();
        let logf = std::fs::File::create(&log).context("creating a build log")?;
        let mut c = Command::new("cargo");
        c.args(["build", "--release", "--locked", "--manifest-path"])
            .arg(ws.join("Cargo.toml"));
        for r in &matrix_runs {
            c.args(["--bin", r.binary]);
        }
        let ok = c
            .stdout(logf.try_clone()?)
            .stderr(logf)
            .status()
            .context("starting cargo")?
            .success();
        if !ok {
            let why = first_error(&log);
            std::fs::write(&st, format!("{name}\t{krate}\tbuild-failed\t{why}\n"))?;
            eprintln!("matrix: {name} does not build: {why}");
            continue;
        }
        std::fs::write(&st, format!("{name}\t{krate}\tok\t\n"))?;
        std::fs::write(
            d.timing.join(format!("{name}.tsv")),
            format!("build\t{}\n", started.elapsed().as_secs()),
        )?;
        built.push((name.clone(), ws.join("target/release")));
    }
    if mode == Mode::BuildOnly {
        eprintln!(
            "matrix: {} revisions built in {} s (seconds per build: {}/)",
            built.len(),
            start.elapsed().as_secs(),
            d.timing.display()
        );
        return Ok(());
    }
    // Phase 2: the findings, `jobs` revisions at a time. A finding that exits non-zero is
    // recorded in the revision's status line; its report is then missing and the table says so.
    let valgrind = valgrind_line();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let errors = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some((name, bin)) = built.get(i) else {
                    break;
                };
                if let Err(e) = run_revision(&d, name, bin, &matrix_runs, &valgrind) {
                    errors
                        .lock()
                        .expect("a matrix worker panicked")
                        .push(format!("{name}: {e:#}"));
                }
            });
        }
    });
    let errors = errors.into_inner().expect("a matrix worker panicked");
    // Phase 3: the table, from every status line and report the folder holds, whatever
    // happened above.
    table(&d)?;
    if !errors.is_empty() {
        bail!("{}", errors.join("; "));
    }
    eprintln!(
        "matrix: {} revisions built and run in {} s (seconds per step: {}/)",
        built.len(),
        start.elapsed().as_secs(),
        d.timing.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The input hash is the one the shell pipeline of the run cache's keys gives, with and
    /// without arguments, so keys written before still hold.
    #[test]
    fn the_input_hash_is_the_shell_pipelines() {
        let f = std::env::temp_dir().join(format!("xtask-hash-{}", std::process::id()));
        std::fs::write(&f, b"a binary").unwrap();
        let shell = |args: &str| {
            let script = format!(
                "{{ sha256sum < {}; {args} printf 'valgrind-3.19.0\\n'; }} | sha256sum | cut -d' ' -f1",
                f.display()
            );
            let out = Command::new("bash").args(["-c", &script]).output().unwrap();
            String::from_utf8(out.stdout).unwrap().trim().to_string()
        };
        let args = vec!["--draws".to_string(), "300".to_string()];
        let v = "valgrind-3.19.0\n";
        assert_eq!(
            input_hash(&f, &args, v).unwrap(),
            shell("echo --draws 300;")
        );
        assert_eq!(input_hash(&f, &[], v).unwrap(), shell(""));
        std::fs::remove_file(&f).unwrap();
    }
}
