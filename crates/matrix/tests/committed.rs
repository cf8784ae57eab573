//! The committed release matrix (`results/matrix/`) against the code: every report was written
//! by the detector the tree holds today, and the ranges are what the committed reports give.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn matrix_dir() -> PathBuf {
    root().join("results/matrix")
}

/// Every report of the folder: `*.json` but the matrix's own outputs.
fn report_files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("json"))
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            !matrix::read::OUTPUTS.contains(&name)
        })
        .collect();
    out.sort();
    out
}

/// A committed matrix report whose detector (its finding's code, `builds::detector`) is not
/// today's is stale: its verdicts come from code that is gone. Rerun `make matrix`.
#[test]
fn every_matrix_report_was_written_by_todays_detector() {
    let mut stale = Vec::new();
    let mut versions = std::collections::BTreeMap::new();
    let files = report_files(&matrix_dir());
    assert!(!files.is_empty(), "no matrix reports");
    for path in files {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let (Some(package), Some(version)) = (
            v["detector"]["package"].as_str(),
            v["detector"]["version"].as_str(),
        ) else {
            stale.push(format!("{name}: names no detector"));
            continue;
        };
        let today = versions.entry(package.to_string()).or_insert_with(|| {
            let dir = ["repros", "crates"]
                .iter()
                .map(|d| root().join(d).join(package))
                .find(|d| d.join("Cargo.toml").is_file())
                .unwrap_or_else(|| panic!("{name}: no package {package} in the tree"));
            builds::detector::version(&dir).unwrap().0
        });
        if version != today {
            stale.push(format!("{name}: {package} {version}, today {today}"));
        }
    }
    assert!(
        stale.is_empty(),
        "matrix reports older than their detector (run `make matrix`):\n{}",
        stale.join("\n")
    );
}

/// The ranges, regenerated from the committed reports, builds log and reproducer runs, are the
/// committed ones byte for byte (the README, VERDICTS.md and every ISSUE.md are held to these).
#[test]
fn the_committed_ranges_are_what_the_committed_runs_give() {
    let m = matrix::load(&matrix_dir()).unwrap();
    let r = matrix::ranges(&m);
    for (file, text) in [
        ("ranges.txt", matrix::ranges_text(&r)),
        ("ranges.json", matrix::ranges_json(&r)),
        ("matrix.svg", matrix::matrix_svg(&m)),
    ] {
        let committed = std::fs::read_to_string(matrix_dir().join(file)).unwrap();
        assert!(
            committed == text,
            "results/matrix/{file} is not what the committed runs give; run `make matrix-table`"
        );
    }
}
