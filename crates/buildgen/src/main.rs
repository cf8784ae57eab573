//! `buildgen workspace <BUILD>` prints the folder of the workspace that builds the suite
//! against BUILD (checked and generated as needed); `buildgen names` lists the distinct
//! llama.cpp revisions of the release table in llama.cpp order (`--shard i/N` keeps every
//! N-th from the i-th); `buildgen hash <TREE>` prints a tree's sampler-sources hash and `buildgen api <TREE>` the C API
//! facts the wrapper is compiled with;
//! `buildgen table <UPSTREAM_TSV> <CRATES>` rewrites the release table from the upstream
//! mapping and the unpacked crates. The work is in the library.

use anyhow::Context;
use clap::{Parser, Subcommand};
use cmdline::refuse;
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "buildgen",
    about = "The builds of the suite: named, checked, generated",
    arg_required_else_help = false
)]
struct Args {
    #[command(subcommand)]
    command: Cmd,
}

/// A command with its names resolved: what `check` hands to the work.
enum Checked {
    Workspace(buildgen::Build),
    Native(buildgen::Build),
    Names(Option<(usize, usize)>),
    Hash(PathBuf),
    Api(PathBuf),
    Table(PathBuf, PathBuf),
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Prints the workspace folder for BUILD (a llama.cpp tag, a llama-cpp-sys-2 version, a
    /// tag with the suite's fixes such as b11429+fixes, or a path to a llama.cpp tree).
    Workspace { build: String },
    /// Builds BUILD's llama.cpp (if needed) and prints its headers' and static libraries'
    /// folders, tab-separated (for compiling C against it).
    Native { build: String },
    /// Lists the distinct llama.cpp revisions, oldest first.
    Names {
        /// `i/N`: keep the revisions whose position p (from 1) has p mod N == i mod N.
        #[arg(long)]
        shard: Option<String>,
    },
    /// Prints the sampler-sources sha256 of a llama.cpp tree.
    Hash { tree: PathBuf },
    /// Prints the C API facts of a llama.cpp tree (the cfg flags the wrapper is built with).
    Api { tree: PathBuf },
    /// Prints the release table: the upstream mapping with each crate's sources hash.
    Table { upstream: PathBuf, crates: PathBuf },
}

/// Resolves build names and shards, so that check-only mode refuses what the work would.
fn check(a: Args) -> Result<Checked, cmdline::Failure> {
    Ok(match a.command {
        Cmd::Workspace { build } => Checked::Workspace(refuse(buildgen::parse_build(&build))?),
        Cmd::Native { build } => Checked::Native(refuse(buildgen::parse_build(&build))?),
        Cmd::Names { shard } => Checked::Names(refuse(
            shard.as_deref().map(buildgen::parse_shard).transpose(),
        )?),
        Cmd::Hash { tree } => Checked::Hash(tree),
        Cmd::Api { tree } => Checked::Api(tree),
        Cmd::Table { upstream, crates } => Checked::Table(upstream, crates),
    })
}

fn main() {
    cmdline::one_line_panics();
    // The workspace this tool belongs to, wherever it is run from.
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let root = root.canonicalize().unwrap_or(root);
    std::process::exit(cmdline::run_checked(
        std::env::args_os(),
        check,
        |cmd| match cmd {
            Checked::Workspace(b) => {
                let name = b.name();
                let ws =
                    refuse(buildgen::prepare(&root, &b).with_context(|| format!("build {name}")))?;
                Ok(format!("{}\n", ws.dir.display()))
            }
            Checked::Native(b) => {
                let name = b.name();
                let ws =
                    refuse(buildgen::prepare(&root, &b).with_context(|| format!("build {name}")))?;
                let n = refuse(buildgen::native(&ws))?;
                Ok(format!("{}\t{}\n", n.include.display(), n.lib.display()))
            }
            Checked::Names(shard) => Ok(buildgen::names(shard)
                .iter()
                .map(|n| format!("{n}\n"))
                .collect()),
            Checked::Hash(tree) => {
                refuse(builds::sources_sha256(&tree).map_err(anyhow::Error::msg))
                    .map(|h| format!("{h}\n"))
            }
            Checked::Api(tree) => {
                // The same two headers subject's build script scans.
                let mut header = String::new();
                for rel in ["include/llama.h", "ggml/include/ggml.h"] {
                    let text = std::fs::read_to_string(tree.join(rel));
                    header += &refuse(text.with_context(|| format!("reading {rel}")))?;
                    header.push('\n');
                }
                Ok(builds::api::scan(&header)
                    .cfgs()
                    .iter()
                    .map(|c| format!("{c}\n"))
                    .collect())
            }
            Checked::Table(upstream, crates) => refuse(buildgen::table(&upstream, &crates)),
        },
    ));
}
