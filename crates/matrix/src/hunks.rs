//! Which lines of the sampler source changed between two revisions, and in which sampler's
//! code.
//!
//! A changed line belongs to the definition that encloses it: the nearest line above it (or
//! the line itself) that starts at column 0 and opens a function (`... name(`) or a struct or
//! table (`struct name {`, `... name = {`), unless a column-0 `}` closes a definition first,
//! in which case the line is at file level. A definition belongs to a sampler when its name
//! holds the sampler's name between underscores or name ends (`llama_sampler_penalties_clone`,
//! `llama_sampler_init_top_p`, `llama_sample_dist`); where two sampler names overlap the
//! longer one wins, so `llama_sampler_temp_ext_apply` is `temp_ext`'s and not `temp`'s.
//! This reads C the way llama.cpp's sampler file is laid out, not C in general.

use similar::{ChangeTag, TextDiff};

/// The samplers of `llama.h` (`llama_sampler_init_<name>`), and `chain`, whose clone and
/// apply run every member's.
pub const SAMPLERS: [&str; 20] = [
    "adaptive_p",
    "chain",
    "dist",
    "dry",
    "grammar",
    "greedy",
    "infill",
    "logit_bias",
    "min_p",
    "mirostat",
    "mirostat_v2",
    "penalties",
    "softmax",
    "temp",
    "temp_ext",
    "top_k",
    "top_n_sigma",
    "top_p",
    "typical",
    "xtc",
];

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The samplers a verdict row names: its words (split at anything but letters, digits and
/// `_`) that are sampler names. `clone-incomplete-chain(penalties,mirostat_v2)` names chain,
/// penalties and mirostat_v2; `edge-set-top_p-min_keep` names top_p.
pub fn samplers_in_row(row: &str) -> Vec<&'static str> {
    let mut out = Vec::new();
    for word in row.split(|c: char| !is_word(c)) {
        if let Some(s) = SAMPLERS.iter().find(|s| **s == word) {
            if !out.contains(s) {
                out.push(*s);
            }
        }
    }
    out
}

/// The samplers whose code a definition named `name` is (see the module documentation).
pub fn samplers_of(name: &str) -> Vec<&'static str> {
    let bounded = |at: usize, len: usize| {
        let before = name[..at].chars().next_back();
        let after = name[at + len..].chars().next();
        !before.is_some_and(|c| c.is_ascii_alphanumeric())
            && !after.is_some_and(|c| c.is_ascii_alphanumeric())
    };
    let mut found: Vec<(usize, usize, &'static str)> = Vec::new();
    for s in SAMPLERS {
        for (at, _) in name.match_indices(s) {
            if bounded(at, s.len()) {
                found.push((at, at + s.len(), s));
            }
        }
    }
    let inside_longer = |&(a, b, s): &(usize, usize, &str)| {
        found
            .iter()
            .any(|&(c, d, t)| t != s && c <= a && b <= d && d - c > b - a)
    };
    let mut out: Vec<&'static str> = Vec::new();
    for f in found.iter().filter(|f| !inside_longer(f)) {
        if !out.contains(&f.2) {
            out.push(f.2);
        }
    }
    out
}

/// The name a column-0 line defines, when it opens a definition (see the module
/// documentation): the identifier before the first `(`, or before `= {` or `{`.
pub fn definition_name(line: &str) -> Option<String> {
    let first = line.chars().next()?;
    if !(first.is_ascii_alphabetic() || first == '_') {
        return None;
    }
    let code = line.split("//").next().unwrap_or("").trim_end();
    if code.ends_with(';') {
        return None;
    }
    let keyword = code.split(|c: char| !is_word(c)).next().unwrap_or("");
    if ["namespace", "template", "typedef", "using", "extern"].contains(&keyword) {
        return None;
    }
    if ["struct", "class", "union", "enum"].contains(&keyword) && !code.contains(['(', '=']) {
        // `struct llama_sampler_penalties : public llama_sampler_backend {` is the former's.
        let rest = code[keyword.len()..].trim_start();
        let name = &rest[..rest.find(|c: char| !is_word(c)).unwrap_or(rest.len())];
        return (!name.is_empty() && code.ends_with('{')).then(|| name.to_string());
    }
    let before = match (code.find('('), code.find('=')) {
        (Some(i), _) => &code[..i],
        (None, Some(i)) if code.ends_with('{') => &code[..i],
        (None, _) => code.strip_suffix('{')?,
    };
    let before = before.trim_end();
    let is_name = |c: char| is_word(c) || c == ':' || c == '~';
    let start = (before.char_indices().rev())
        .find(|&(_, c)| !is_name(c))
        .map_or(0, |(i, c)| i + c.len_utf8());
    let name = &before[start..];
    (!name.is_empty()).then(|| name.to_string())
}

/// The definition enclosing line `index` (0-based) of `lines`, or `None` at file level.
pub fn enclosing(lines: &[&str], index: usize) -> Option<String> {
    for (i, line) in lines.iter().enumerate().take(index + 1).rev() {
        if i != index && line.starts_with('}') {
            return None;
        }
        if let Some(name) = definition_name(line) {
            return Some(name);
        }
    }
    None
}

/// One removed (`-`, numbered in the older file) or added (`+`, numbered in the newer file)
/// line, with the definition it is in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangedLine {
    pub sign: char,
    /// 1-based.
    pub number: usize,
    pub text: String,
    pub function: Option<String>,
}

/// Every changed line between `old` and `new`, in diff order.
pub fn changed_lines(old: &str, new: &str) -> Vec<ChangedLine> {
    let (old_lines, new_lines): (Vec<&str>, Vec<&str>) =
        (old.lines().collect(), new.lines().collect());
    let diff = TextDiff::from_lines(old, new);
    let mut out = Vec::new();
    for change in diff.iter_all_changes() {
        let (sign, index, lines) = match change.tag() {
            ChangeTag::Equal => continue,
            ChangeTag::Delete => ('-', change.old_index(), &old_lines),
            ChangeTag::Insert => ('+', change.new_index(), &new_lines),
        };
        let index = index.expect("a changed line has an index on its side");
        out.push(ChangedLine {
            sign,
            number: index + 1,
            text: change.value().trim_end_matches(['\n', '\r']).to_string(),
            function: enclosing(lines, index),
        });
    }
    out
}

/// Whether a changed line is in the code of one of `samplers`.
pub fn is_samplers(line: &ChangedLine, samplers: &[&str]) -> bool {
    line.function
        .as_deref()
        .is_some_and(|f| samplers_of(f).iter().any(|s| samplers.contains(s)))
}

/// The changed lines in the code of `samplers`, under a line naming each definition:
///
/// ```text
/// in llama_sampler_penalties_clone:
///   -  12 |     old line
///   +  12 |     new line
/// ```
///
/// At most `limit` lines are quoted; the rest are counted. Empty when none changed.
pub fn quote(changes: &[ChangedLine], samplers: &[&str], limit: usize) -> String {
    let kept: Vec<&ChangedLine> = changes
        .iter()
        .filter(|c| is_samplers(c, samplers))
        .collect();
    quote_lines(&kept, limit, "in these samplers' code")
}

/// Every changed line, in the form of [`quote`], where `changes` holds at most `limit`;
/// `None` when it holds more (a listing of the definitions says more than a cut quote).
pub fn quote_all(changes: &[ChangedLine], limit: usize) -> Option<String> {
    (changes.len() <= limit).then(|| quote_lines(&changes.iter().collect::<Vec<_>>(), limit, ""))
}

fn quote_lines(kept: &[&ChangedLine], limit: usize, whose: &str) -> String {
    let width = kept
        .iter()
        .map(|c| c.number.to_string().len())
        .max()
        .unwrap_or(1);
    let mut out = String::new();
    let mut current: Option<&str> = None;
    for c in kept.iter().take(limit) {
        let f = c.function.as_deref().unwrap_or("(file level)");
        if current != Some(f) {
            out.push_str(&format!("in {f}:\n"));
            current = Some(f);
        }
        let text = if c.text.is_empty() {
            String::new()
        } else {
            format!(" {}", c.text)
        };
        out.push_str(&format!("  {} {:>width$} |{text}\n", c.sign, c.number));
    }
    if kept.len() > limit {
        out.push_str(&format!(
            "... and {} more changed lines {whose}\n",
            kept.len() - limit
        ));
    }
    out
}

/// The definitions with changed lines, in file order, each with its count of changed lines;
/// `(file level)` for lines outside any.
pub fn changed_definitions(changes: &[ChangedLine]) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize)> = Vec::new();
    for c in changes {
        let name = c.function.as_deref().unwrap_or("(file level)");
        match out.iter_mut().find(|(n, _)| n == name) {
            Some((_, k)) => *k += 1,
            None => out.push((name.to_string(), 1)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every llama.cpp sampler the stage table names, and every one the oracle does not
    /// compose, is a sampler whose source changes the matrix quotes.
    #[test]
    fn every_stage_of_the_table_is_a_quoted_sampler() {
        let llama_rows = (oracle::stage::STAGES.iter())
            .filter(|r| matches!(r.parser, oracle::stage::table::Parser::Llama(_)))
            .map(|r| r.name);
        let others = oracle::stage::NOT_COMPOSED.iter().map(|(n, _)| *n);
        let missing: Vec<&str> = llama_rows
            .chain(others)
            .filter(|n| !SAMPLERS.contains(n))
            .collect();
        assert!(missing.is_empty(), "add to SAMPLERS: {missing:?}");
    }

    #[test]
    fn the_longest_sampler_name_wins() {
        assert_eq!(samplers_of("llama_sampler_temp_ext_apply"), ["temp_ext"]);
        assert_eq!(samplers_of("llama_sampler_init_temp"), ["temp"]);
        assert_eq!(
            samplers_of("llama_sampler_mirostat_v2_clone"),
            ["mirostat_v2"]
        );
        assert_eq!(samplers_of("llama_sampler_mirostat_clone"), ["mirostat"]);
        assert_eq!(samplers_of("llama_sample_dist"), ["dist"]);
        assert_eq!(samplers_of("llama_sampler_penalties_i"), ["penalties"]);
        assert!(samplers_of("llama_sampler_distance").is_empty());
        assert!(samplers_of("llama_token_data_array_partial_sort").is_empty());
        assert_eq!(
            samplers_in_row("clone-incomplete-chain(penalties,dry,top_k,temp,dist)"),
            ["chain", "penalties", "dry", "top_k", "temp", "dist"]
        );
        assert_eq!(samplers_in_row("edge-set-top_p-min_keep"), ["top_p"]);
        assert_eq!(samplers_in_row("edge-dist-fallback"), ["dist"]);
        assert_eq!(samplers_in_row("edge-robustness-temp_ext"), ["temp_ext"]);
        assert_eq!(
            samplers_in_row("draw-conformance-published-top_k=3,top_p=0.9"),
            ["top_k", "top_p"]
        );
        assert!(samplers_in_row("clone-drops-token-count").is_empty());
    }

    #[test]
    fn definitions_are_read_from_column_zero() {
        let d = definition_name;
        assert_eq!(
            d("static struct llama_sampler * llama_sampler_penalties_clone(const struct llama_sampler * smpl) {").as_deref(),
            Some("llama_sampler_penalties_clone")
        );
        assert_eq!(
            d("struct llama_sampler_dry {").as_deref(),
            Some("llama_sampler_dry")
        );
        assert_eq!(
            d("struct llama_sampler_penalties : public llama_sampler_backend {").as_deref(),
            Some("llama_sampler_penalties")
        );
        assert_eq!(
            d("static struct llama_sampler_i llama_sampler_top_k_i = {").as_deref(),
            Some("llama_sampler_top_k_i")
        );
        assert_eq!(
            d("static bool llama_sampler_dist_backend_init(").as_deref(),
            Some("llama_sampler_dist_backend_init")
        );
        assert_eq!(
            d("static struct llama_sampler * llama_sampler_init_empty(const char * name);"),
            None
        );
        assert_eq!(d("    if (x) {"), None);
        assert_eq!(d("}"), None);
        assert_eq!(d("#define X(a) a"), None);
        let lines = [
            "void f_top_k(int a) {",
            "    a++;",
            "}",
            "",
            "int g;",
            "void h() {",
            "  x;",
            "}",
        ];
        assert_eq!(enclosing(&lines, 1).as_deref(), Some("f_top_k"));
        assert_eq!(enclosing(&lines, 2).as_deref(), Some("f_top_k"));
        assert_eq!(
            enclosing(&lines, 3),
            None,
            "after a closing brace is file level"
        );
        assert_eq!(enclosing(&lines, 6).as_deref(), Some("h"));
        assert_eq!(enclosing(&lines, 5).as_deref(), Some("h"));
    }
}
