//! Plain checks over the repository's files (no build, no FFI); `tests/tidy.rs` runs them.
//!
//! Each check returns the list of problems it found, one line each, so a failing test says
//! exactly which file to fix.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The repository root (this crate lives at `crates/tidy`).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `.rs` file below `dir`, sorted.
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let name = e.file_name();
            if name == "target" || name == "snapshots" {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Files whose first line is not a `//!` line saying what the file is.
pub fn files_without_summary(files: &[PathBuf]) -> Vec<String> {
    files
        .iter()
        .filter(|f| {
            let text = fs::read_to_string(f).unwrap_or_default();
            !text.lines().next().is_some_and(|l| l.starts_with("//!"))
        })
        .map(|f| format!("{} does not open with a //! line", f.display()))
        .collect()
}

/// The top-level modules a piece of code names through `crate::` paths: `crate::a::x`,
/// `crate::{a, b::y}` (groups may span lines). Comment lines are skipped first.
pub fn crate_refs(code: &str) -> BTreeSet<String> {
    let code: String = code
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level items of the group: split on commas outside nested braces.
            let (mut depth, mut start) = (0usize, 0usize);
            for (k, ch) in group.char_indices() {
                match ch {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        out.insert(ident(&group[start..k]));
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.insert(ident(&group[start..k]));
                        start = k + 1;
                    }
                    _ => {}
                }
            }
        } else {
            out.insert(ident(rest));
        }
    }
    out.retain(|m| !m.is_empty() && m != "self");
    out
}

/// Which of a crate's top-level modules each module names through `crate::` (see
/// [`crate_refs`]). `src` is the crate's `src` folder.
pub fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in rust_files(src) {
        let rel = f.strip_prefix(src).expect("below src");
        let first = rel.iter().next().unwrap_or_default().to_string_lossy();
        let top = first.trim_end_matches(".rs").to_string();
        if top == "lib" || top == "main" {
            continue;
        }
        let text = fs::read_to_string(&f).unwrap_or_default();
        let deps = graph.entry(top.clone()).or_default();
        deps.extend(crate_refs(&text).into_iter().filter(|d| *d != top));
    }
    graph
}

/// Modules that can reach themselves through `crate::` references, each with one such path.
pub fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut out = Vec::new();
    for start in graph.keys() {
        // Breadth-first from `start`, remembering how each module was reached.
        let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start.as_str()]);
        let mut back = None;
        while let Some(m) = queue.pop_front() {
            for d in graph.get(m).into_iter().flatten() {
                if d == start {
                    back = Some(m);
                    break;
                }
                if graph.contains_key(d) && !came_from.contains_key(d.as_str()) {
                    came_from.insert(d, m);
                    queue.push_back(d);
                }
            }
            if back.is_some() {
                break;
            }
        }
        if let Some(mut m) = back {
            let mut path = vec![start.as_str(), m];
            while m != start {
                m = came_from[m];
                path.push(m);
            }
            path.reverse();
            out.push(path.join(" -> "));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_a_file_without_a_summary_and_passes_one_with() {
        let dir = std::env::temp_dir().join(format!("tidy-summary-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let (good, bad) = (dir.join("good.rs"), dir.join("bad.rs"));
        fs::write(&good, "//! What this file is.\nfn f() {}\n").unwrap();
        fs::write(&bad, "// a plain comment\n//! too late\nfn f() {}\n").unwrap();
        let found = files_without_summary(&rust_files(&dir));
        fs::remove_dir_all(&dir).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("bad.rs"), "{found:?}");
    }

    fn graph(edges: &[(&str, &str)]) -> BTreeMap<String, BTreeSet<String>> {
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in edges {
            g.entry(a.to_string()).or_default().insert(b.to_string());
            g.entry(b.to_string()).or_default();
        }
        g
    }

    #[test]
    fn reads_plain_grouped_and_multi_line_crate_paths() {
        let code = "use crate::a::X;\nuse crate::{b, c::{D, E}, self};\nuse crate::{\n    f,\n    g::H,\n};\n// use crate::commented;\nlet x = crate::h::y();\n";
        let got: Vec<String> = crate_refs(code).into_iter().collect();
        assert_eq!(got, ["a", "b", "c", "f", "g", "h"]);
    }

    #[test]
    fn finds_a_planted_cycle_and_passes_a_chain() {
        let with_cycle = graph(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]);
        let found = cycles(&with_cycle);
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(found.contains(&"a -> b -> c -> a".to_string()), "{found:?}");
        assert!(cycles(&graph(&[("a", "b"), ("b", "c"), ("a", "c")])).is_empty());
    }
}
