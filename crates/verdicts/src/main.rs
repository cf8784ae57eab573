//! Reads every `<finding>.<build>.json` in a results folder (default `results/`) and prints
//! one row per finding and build: the verdict and the key evidence the repro recorded.
//! It judges nothing itself; it only tabulates what the repros wrote.

use anyhow::{Context, Result};
use std::path::Path;

struct Row {
    finding: String,
    name: String,
    build: String,
    verdict: String,
    evidence: String,
}

fn read_rows(dir: &Path) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        let file = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !file.ends_with(".json") || file.ends_with(".timing.json") {
            continue;
        }
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let v: serde_json::Value =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        let field = |k: &str| v[k].as_str().unwrap_or("?").to_string();
        if v.get("verdict").is_none() {
            continue;
        }
        rows.push(Row {
            finding: field("finding"),
            name: field("name"),
            build: field("build"),
            verdict: field("verdict"),
            evidence: field("evidence"),
        });
    }
    rows.sort_by(|a, b| (&a.finding, &a.name, &a.build).cmp(&(&b.finding, &b.name, &b.build)));
    Ok(rows)
}

fn main() {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "results".to_string());
    match read_rows(Path::new(&dir)) {
        Ok(rows) if rows.is_empty() => {
            eprintln!("error: no results in {dir}; run `make audit` first");
            std::process::exit(2);
        }
        Ok(rows) => {
            println!(
                "{:<4} {:<44} {:<9} {:<12} evidence",
                "", "finding", "build", "verdict"
            );
            for r in rows {
                println!(
                    "{:<4} {:<44} {:<9} {:<12} {}",
                    r.finding, r.name, r.build, r.verdict, r.evidence
                );
            }
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(2);
        }
    }
}
