//! `buildgen workspace <BUILD>` prints the folder of the workspace that builds the suite
//! against BUILD (checked and generated as needed); `buildgen names` lists the distinct
//! llama.cpp revisions of the release table in llama.cpp order (`--shard i/N` keeps every
//! N-th from the i-th); `buildgen hash <TREE>` prints a tree's sampler-sources hash and `buildgen api <TREE>` the C API
//! facts the wrapper is compiled with;
//! `buildgen table <UPSTREAM_TSV> <CRATES>` rewrites the release table from the upstream
//! mapping and the unpacked crates. The work is in the library.

use anyhow::Context;
use clap::{Parser, Subcommand};
use cmdline::{fail, refuse};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(name = "buildgen", about = "The builds of the suite: named, checked, generated")]
struct Args {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Prints the workspace folder for BUILD (a llama.cpp tag, a llama-cpp-sys-2 version or a
    /// path to a llama.cpp tree).
    Workspace { build: String },
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

fn main() {
    cmdline::one_line_panics();
    let root = std::env::current_dir().unwrap_or_default();
    std::process::exit(cmdline::run_checked(
        std::env::args_os(),
        |a: Args| {
            if let Cmd::Names { shard: Some(s) } = &a.command {
                refuse(buildgen::parse_shard(s))?;
            }
            Ok(a.command)
        },
        |cmd| match cmd {
            Cmd::Workspace { build } => {
                let b = refuse(buildgen::parse_build(&build))?;
                let ws = match b {
                    buildgen::Build::Release(ref r) => {
                        refuse(buildgen::prepare(&root, &b).with_context(|| format!("build {}", r.name())))?
                    }
                    buildgen::Build::Tree(_) => fail(buildgen::prepare(&root, &b))?,
                };
                Ok(format!("{}\n", ws.dir.display()))
            }
            Cmd::Names { shard } => {
                let names = buildgen::names(shard.as_deref().map(buildgen::parse_shard).transpose().unwrap_or(None));
                Ok(names.iter().map(|n| format!("{n}\n")).collect())
            }
            Cmd::Hash { tree } => refuse(builds::sources_sha256(&tree).map_err(anyhow::Error::msg)).map(|h| format!("{h}\n")),
            Cmd::Api { tree } => {
                let header = refuse(std::fs::read_to_string(tree.join("include/llama.h")).context("reading include/llama.h"))?;
                Ok(builds::api::scan(&header).cfgs().iter().map(|c| format!("{c}\n")).collect())
            }
            Cmd::Table { upstream, crates } => refuse(buildgen::table(&upstream, &crates)),
        },
    ));
}
