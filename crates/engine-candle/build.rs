//! Copies candle-transformers' sampling module out of cargo's registry next to the build's
//! output, where the crate embeds it (`SOURCES`): a defect on candle quotes its contract from
//! the very source the binary was compiled from.

/// The release pinned in Cargo.toml (`=0.11.1`).
const CRATE: (&str, &str) = ("candle-transformers", "0.11.1");
const FILE: &str = "src/generation/mod.rs";

fn main() {
    if let Err(e) = run() {
        eprintln!("error: engine-candle's build script: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").map_err(|_| "no OUT_DIR")?);
    let home = builds::cargo_home().ok_or("no CARGO_HOME or HOME")?;
    let dir = builds::registry_source(&home, CRATE.0, CRATE.1).ok_or_else(|| {
        format!(
            "{} {} is not unpacked in cargo's registry",
            CRATE.0, CRATE.1
        )
    })?;
    let from = dir.join(FILE);
    println!("cargo:rerun-if-changed={}", from.display());
    std::fs::copy(&from, out.join("generation.rs"))
        .map_err(|e| format!("copying {}: {e}", from.display()))?;
    Ok(())
}
