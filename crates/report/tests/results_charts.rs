//! Every SVG under `results/` passes the chart check: no label outside the page or over
//! another, no two legend keys in one colour and dash, and its n and interval stated.

use std::path::Path;

fn svgs(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            svgs(&path, out);
        } else if path.extension().is_some_and(|e| e == "svg") {
            out.push(path);
        }
    }
}

#[test]
fn every_chart_under_results_passes_the_check() {
    let mut found = Vec::new();
    svgs(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../results"),
        &mut found,
    );
    assert!(found.len() >= 11, "{found:?}");
    for path in found {
        let problems = report::chart::check(&std::fs::read_to_string(&path).unwrap());
        assert!(problems.is_empty(), "{}: {problems:?}", path.display());
    }
}
