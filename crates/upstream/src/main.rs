//! `upstream check [--results DIR] [--record DIR] [--same-as DIR] BUILD...`: every reproducer
//! compiled and run against each build, its exit status held against that build's verdicts
//! (exit 1 on any mismatch); `--record` writes each run to `DIR/<short>.<build>.txt`,
//! `--same-as` fails on a run that differs from the one recorded there.
//! `upstream record --into DIR BUILD...`: every reproducer compiled and run against each build,
//! written to `DIR/<short>.<build>.txt` and judged against nothing (the release matrix reads
//! them where the suite's own controls cannot run).
//! `upstream diff STOCK_DIR STOCK_BUILD PATCHED_DIR PATCHED_BUILD [--write FILE]`: every
//! verdict of the patched build against the stock one (exit 1 unless only the targeted rows
//! changed, each from present to absent).
//! `upstream issues [--check] [--results DIR]`: writes (or, with --check, compares) every
//! folder's ISSUE.md.

use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};

#[derive(Parser, Debug)]
#[command(
    name = "upstream",
    about = "The standalone reproducers and the reports they file"
)]
struct Args {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Compiles and runs every reproducer against each BUILD and checks its exit status
    /// against the build's verdicts.
    Check {
        /// The results folder whose verdicts the exit statuses are held against.
        #[arg(long, default_value = "results")]
        results: PathBuf,
        /// Write each run to DIR/<short>.<build>.txt.
        #[arg(long, value_name = "DIR")]
        record: Option<PathBuf>,
        /// Also fail when a run differs from what DIR/<short>.<build>.txt recorded.
        #[arg(long, value_name = "DIR")]
        same_as: Option<PathBuf>,
        #[arg(required = true)]
        builds: Vec<String>,
    },
    /// Compiles and runs every reproducer against each BUILD and writes each run to
    /// DIR/<short>.<build>.txt.
    Record {
        #[arg(long, value_name = "DIR")]
        into: PathBuf,
        #[arg(required = true)]
        builds: Vec<String>,
    },
    /// Compares the verdicts of two results folders (stock, then patched).
    Diff {
        stock: PathBuf,
        stock_build: String,
        patched: PathBuf,
        patched_build: String,
        /// Also write the comparison to this file.
        #[arg(long)]
        write: Option<PathBuf>,
    },
    /// Writes every ISSUE.md from the results (with --check: fails if one differs).
    Issues {
        #[arg(long, default_value = "results")]
        results: PathBuf,
        #[arg(long)]
        check: bool,
    },
}

fn root() -> PathBuf {
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    root.canonicalize().unwrap_or(root)
}

fn main() {
    cmdline::one_line_panics();
    std::process::exit(cmdline::run_checked(
        std::env::args_os(),
        |a: Args| {
            if let Cmd::Check { results, .. } | Cmd::Issues { results, .. } = &a.command {
                if !results.is_dir() {
                    return Err(cmdline::Failure::BadInput(anyhow::anyhow!(
                        "{} is not a results folder",
                        results.display()
                    )));
                }
            }
            Ok(a)
        },
        |a| cmdline::fail(work(a.command)),
    ));
}

fn work(cmd: Cmd) -> anyhow::Result<String> {
    let root = root();
    match cmd {
        Cmd::Check {
            results,
            record,
            same_as,
            builds,
        } => {
            let mut out = String::new();
            let mut bad = 0;
            for b in &builds {
                for c in upstream::check(&root, b, &results)? {
                    out += &c.line();
                    out.push('\n');
                    bad += usize::from(!c.agrees());
                    let file = format!("{}.{b}.txt", c.defect);
                    let text = c.run.record(b);
                    if let Some(dir) = &same_as {
                        let old = std::fs::read_to_string(dir.join(&file)).unwrap_or_default();
                        if old != text {
                            out += &format!(
                                "DIFFERS  {file}: the run is not what {} recorded\n",
                                dir.display()
                            );
                            bad += 1;
                        }
                    }
                    if let Some(dir) = &record {
                        std::fs::create_dir_all(dir)?;
                        std::fs::write(dir.join(&file), text)?;
                    }
                }
            }
            anyhow::ensure!(bad == 0, "{bad} problem(s):\n{out}");
            Ok(out)
        }
        Cmd::Record { into, builds } => {
            let mut out = String::new();
            std::fs::create_dir_all(&into)?;
            for b in &builds {
                for (d, run) in upstream::runs(&root, b)? {
                    let file = format!("{}.{b}.txt", d.short);
                    std::fs::write(into.join(&file), run.record(b))?;
                    let got = run
                        .exit
                        .map_or("does not compile".into(), |c| format!("exit {c}"));
                    out += &format!("{file}: {got}\n");
                }
            }
            Ok(out)
        }
        Cmd::Diff {
            stock,
            stock_build,
            patched,
            patched_build,
            write,
        } => {
            let changes = upstream::diff(&root, &stock, &stock_build, &patched, &patched_build)?;
            let reports =
                upstream::report_diff(&root, &stock, &stock_build, &patched, &patched_build)?;
            let unfixed = upstream::unfixed(&root, &stock, &stock_build, &patched, &patched_build)?;
            let text =
                upstream::diff_text(&stock_build, &patched_build, &changes, &unfixed, &reports);
            if let Some(w) = write {
                std::fs::write(&w, &text)?;
            }
            anyhow::ensure!(
                upstream::diff_holds(&changes, &unfixed) && upstream::reports_hold(&reports),
                "{text}"
            );
            Ok(text)
        }
        Cmd::Issues { results, check } => issues(&root, &results, check),
    }
}

fn issues(root: &Path, results: &Path, check: bool) -> anyhow::Result<String> {
    let mut out = String::new();
    for d in upstream::defects(root)? {
        let text = upstream::issue(&d, results)?;
        let path = d.dir.join("ISSUE.md");
        if check {
            let old = std::fs::read_to_string(&path).unwrap_or_default();
            anyhow::ensure!(
                old == text,
                "{} does not agree with the results; run `upstream issues`",
                path.display()
            );
        } else {
            std::fs::write(&path, &text)?;
        }
        out += &format!("{}\n", path.strip_prefix(root).unwrap_or(&path).display());
    }
    let unfiled = upstream::unfiled(root, results)?;
    if !unfiled.is_empty() {
        let list = unfiled.join(", ");
        anyhow::ensure!(
            !check,
            "defects present on {} without an upstream folder: {list}",
            upstream::NEWEST
        );
        eprintln!(
            "upstream: defects present on {} without an upstream folder: {list}",
            upstream::NEWEST
        );
    }
    Ok(out)
}
