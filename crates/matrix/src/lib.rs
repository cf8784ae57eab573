//! The release matrix: every verdict row of the model-free findings on every llama.cpp
//! revision of the release table, read from the folder the matrix runner writes.
//!
//! `matrix <DIR>` reads the reports (`<stem>.<build>.json`, checked against the report
//! contract) and the runner's `builds.tsv` in DIR ([`read`]), and writes into DIR:
//! `ranges.txt` and `ranges.json`, the revisions where each row is present ([`ranges`]);
//! `matrix.svg`, the whole matrix as a chart ([`svg`]); and `changes.txt`, each change of a
//! row's verdict between two revisions with the sampler source lines that changed between
//! them in that row's samplers' code ([`changes`], [`hunks`]). It prints `ranges.txt`.
//! The same folder gives the same bytes: nothing depends on time, and everything is iterated
//! in a fixed order.

pub mod changes;
pub mod hunks;
pub mod ranges;
pub mod read;
pub mod svg;

pub use changes::{changes_text, registry_source, Sources};
pub use ranges::{ranges, ranges_json, ranges_text};
pub use read::{load, Matrix, State};
pub use svg::matrix_svg;

use anyhow::{Context, Result};
use clap::Parser;
use std::path::{Path, PathBuf};

/// The release matrix of a results folder.
#[derive(Parser, Debug)]
#[command(
    name = "matrix",
    about = "Reads the release matrix runner's folder and writes ranges.txt, ranges.json, matrix.svg and changes.txt into it"
)]
pub struct Args {
    /// The folder the matrix runner wrote (reports and builds.tsv).
    #[arg(default_value = "results/matrix")]
    pub dir: PathBuf,
}

/// Reads and checks the folder: a report that breaks the contract, a malformed `builds.tsv`
/// or a folder with neither is refused.
pub fn check(args: Args) -> Result<(PathBuf, Matrix), cmdline::Failure> {
    let m = cmdline::refuse(load(&args.dir))?;
    Ok((args.dir, m))
}

/// The four files, by name, in the order they are written.
pub fn render(m: &Matrix, sources: Sources) -> Vec<(&'static str, String)> {
    let r = ranges(m);
    vec![
        ("ranges.txt", ranges_text(&r)),
        ("ranges.json", ranges_json(&r)),
        ("matrix.svg", matrix_svg(m)),
        ("changes.txt", changes_text(m, sources)),
    ]
}

/// Writes the four files into `dir`; returns `ranges.txt`.
pub fn write(dir: &Path, m: &Matrix, sources: Sources) -> Result<String> {
    let files = render(m, sources);
    for (name, text) in &files {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    let ranges = files.into_iter().find(|f| f.0 == "ranges.txt");
    Ok(ranges.map(|f| f.1).unwrap_or_default())
}

/// [`load`] then [`write`].
pub fn run(dir: &Path, sources: Sources) -> Result<String> {
    let m = load(dir)?;
    write(dir, &m, sources)
}
