//! Reads every `<report>.<build>.json` in a results folder (default `results/`) and prints one
//! row per verdict: finding, name, build, verdict, controls passed, evidence, defects,
//! divergences and robustness rows in three tables (each verdict's kind is the one catalog's, `report::kind`, and
//! the report states it too). A report with verdict rows (`clone-incomplete-<sampler>`, say)
//! gives one line per row; its own verdict only summarizes them.
//!
//! It judges nothing itself: it tabulates what the repros wrote, after checking that every
//! file keeps the report contract (`report::Header::from_json`). A file that breaks it stops
//! the table with one line naming the file and exit 2. The command line keeps the repros'
//! contract (`cmdline::run_checked`): under `SAMPLER_AUDIT_CHECK_ONLY=1` it reads and checks
//! every file and prints nothing.

use anyhow::{Context, Result};
use clap::Parser;
use report::{Header, Kind, Table};
use std::path::{Path, PathBuf};

/// The verdict table from a results folder.
#[derive(Parser, Debug)]
#[command(
    name = "verdicts",
    about = "Prints one line per verdict from every <report>.<build>.json in a results folder"
)]
pub struct Args {
    /// The results folder.
    #[arg(default_value = "results")]
    pub dir: PathBuf,
    /// Print the verdict matrix in Markdown instead (what results/VERDICTS.md and the README
    /// hold): one row per verdict, defects, divergences and robustness rows apart, one column per build, and
    /// each row's affected releases from the release matrix.
    #[arg(long)]
    pub markdown: bool,
    /// With --markdown: the README's form. A row that reads absent on every build here and
    /// that the release matrix never saw present is counted per finding instead of listed
    /// (results/VERDICTS.md lists every row).
    #[arg(long, requires = "markdown")]
    pub compact: bool,
    /// Write the --compact matrix into this Markdown file between the lines
    /// `<!-- verdicts:begin -->` and `<!-- verdicts:end -->` (the README) instead of printing.
    #[arg(long, value_name = "FILE")]
    pub embed: Option<PathBuf>,
}

/// The lines that bound the generated verdict matrix in a Markdown file.
pub const BEGIN: &str = "<!-- verdicts:begin -->";
pub const END: &str = "<!-- verdicts:end -->";

/// `doc` with the text between its markers replaced by `matrix`; an error if the markers are
/// missing, repeated or out of order.
pub fn embed(doc: &str, matrix: &str) -> Result<String> {
    let (b, e) = (doc.matches(BEGIN).count(), doc.matches(END).count());
    anyhow::ensure!(
        b == 1 && e == 1,
        "the file must hold '{BEGIN}' and '{END}' once each (found {b} and {e})"
    );
    let start = doc.find(BEGIN).unwrap() + BEGIN.len();
    let end = doc.find(END).unwrap();
    anyhow::ensure!(start <= end, "'{END}' comes before '{BEGIN}'");
    Ok(format!("{}\n{matrix}{}", &doc[..start], &doc[end..]))
}

/// The generated matrix between the markers of `doc`, if it has them.
pub fn embedded(doc: &str) -> Option<&str> {
    let start = doc.find(BEGIN)? + BEGIN.len();
    let end = doc.find(END)?;
    doc.get(start..end)?.strip_prefix('\n')
}

/// What the command line asks for, checked: the verdicts of the folder (and of its `fixes/`
/// folder, the patched build's, when there is one), and the form.
pub struct Checked {
    pub lines: Vec<Line>,
    /// The release matrix's affected range of each row (empty without `matrix/ranges.json`).
    pub ranges: std::collections::BTreeMap<String, String>,
    pub markdown: bool,
    pub compact: bool,
    pub embed: Option<PathBuf>,
    pub dir: PathBuf,
}

pub struct Line {
    kind: Kind,
    finding: String,
    name: String,
    /// The model a report's file names after its finding (`ingraph-gemma3`, `scope-smollm2`),
    /// which keeps rows of the same name on two models apart.
    model: Option<String>,
    engine: String,
    build: String,
    /// The report's one-line build description (llama.cpp tag and commit, crate release).
    build_detail: String,
    verdict: String,
    controls: String,
    evidence: String,
}

fn read_lines(dir: &Path) -> Result<Vec<Line>> {
    let mut lines = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .collect::<std::io::Result<_>>()?;
    entries.sort_by_key(|e| e.path());
    for entry in entries {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let v: serde_json::Value =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        let h = Header::from_json(&v).with_context(|| format!("{}", path.display()))?;
        let passed = h.controls.iter().filter(|c| c.passed).count();
        let controls = format!("{passed}/{}", h.controls.len());
        let s = &h.subject;
        let stem = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let stem = stem.split('.').next().unwrap_or_default();
        let model = (models::KNOWN.iter())
            .find(|k| stem.ends_with(&format!("-{}", k.name)))
            .map(|k| k.name.to_string());
        let own = (s.name.clone(), h.verdict, h.evidence.clone());
        // A report with rows: its rows are the verdicts, its own line only their summary.
        let verdicts = if h.rows.is_empty() { vec![own] } else { h.rows };
        for (name, verdict, evidence) in verdicts {
            let kind = report::kind::basis(&s.engine, &name)
                .with_context(|| format!("{}: verdict {name} has no kind", path.display()))?
                .kind;
            lines.push(Line {
                kind,
                finding: s.finding.clone(),
                name,
                model: model.clone(),
                engine: s.engine.clone(),
                build: s.build.clone(),
                build_detail: s.build_detail.clone(),
                verdict: verdict.as_str().to_string(),
                controls: controls.clone(),
                evidence,
            });
        }
    }
    lines.sort_by(|a, b| {
        let (fa, fb) = (ById(&a.finding), ById(&b.finding));
        (a.kind, fa, &a.name, &a.model, &a.engine, &a.build)
            .cmp(&(b.kind, fb, &b.name, &b.model, &b.engine, &b.build))
    });
    Ok(lines)
}

/// The verdict table, under one line per build naming what it is (for llama.cpp, its tag,
/// commit and crate release), so a row's short build name can be looked up.
pub fn table(lines: &[Line]) -> String {
    let builds: std::collections::BTreeSet<(&str, &str)> = lines
        .iter()
        .map(|l| (l.build.as_str(), l.build_detail.as_str()))
        .collect();
    let mut b = Table::new().left("  ", 0).left(" ", 0);
    for (build, detail) in builds {
        b.row([build, detail]);
    }
    let mut out = format!("builds:\n{}", b.render());
    for (kind, what) in [
        (
            Kind::Defect,
            "defects: the engine breaks its own documented contract or a stated invariant",
        ),
        (
            Kind::Divergence,
            "divergences: the engine differs from a named reference (report key rests_on)",
        ),
        (
            Kind::Robustness,
            "robustness: the suite's own rule where the engine states no contract (not defects)",
        ),
    ] {
        let of: Vec<&Line> = lines.iter().filter(|l| l.kind == kind).collect();
        if !of.is_empty() {
            out += &format!("\n{what}\n{}", verdict_rows(&of));
        }
    }
    out
}

fn verdict_rows(lines: &[&Line]) -> String {
    // Name and build fit their longest entry; the other widths hold their longest value.
    let mut t = Table::new().left("", 4).left(" ", 7).left(" ", 9);
    t = t.left(" ", 5).left(" ", 12).left(" ", 8).left(" ", 0);
    t.row([
        "", "name", "engine", "build", "verdict", "controls", "evidence",
    ]);
    for l in lines {
        t.row([
            &l.finding,
            &l.name,
            &l.engine,
            &l.build,
            &l.verdict,
            &l.controls,
            &l.evidence,
        ]);
    }
    t.render()
}

/// Reads and checks every report in the folder; an empty folder is refused too.
pub fn check(args: Args) -> Result<Checked, cmdline::Failure> {
    let mut lines = cmdline::refuse(read_lines(&args.dir))?;
    if lines.is_empty() {
        return cmdline::refuse(Err(anyhow::anyhow!(
            "no results in {}; run `make audit` first",
            args.dir.display()
        )));
    }
    let markdown = args.markdown || args.embed.is_some();
    if markdown && args.dir.join("fixes").is_dir() {
        lines.extend(cmdline::refuse(read_lines(&args.dir.join("fixes")))?);
    }
    if let Some(file) = &args.embed {
        let doc =
            std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()));
        cmdline::refuse(
            doc.and_then(|d| embed(&d, ""))
                .with_context(|| format!("{}", file.display())),
        )?;
    }
    let ranges = if markdown {
        cmdline::refuse(ranges(&args.dir))?
    } else {
        Default::default()
    };
    Ok(Checked {
        lines,
        ranges,
        markdown,
        compact: args.compact || args.embed.is_some(),
        embed: args.embed,
        dir: args.dir,
    })
}

/// Prints the table, or writes the README's matrix into the file --embed names.
pub fn run(c: &Checked) -> Result<String> {
    let out = render(c);
    match &c.embed {
        None => Ok(out),
        Some(file) => {
            let doc = std::fs::read_to_string(file)
                .with_context(|| format!("reading {}", file.display()))?;
            std::fs::write(file, embed(&doc, &out)?)
                .with_context(|| format!("writing {}", file.display()))?;
            Ok(String::new())
        }
    }
}

/// The output the command line asked for.
pub fn render(c: &Checked) -> String {
    if c.markdown {
        markdown(&c.lines, &c.ranges, c.compact)
    } else {
        table(&c.lines)
    }
}

/// Each row's affected releases from the release matrix (`matrix/ranges.json` of the
/// results folder), by verdict name; empty without a matrix.
pub fn ranges(dir: &Path) -> Result<std::collections::BTreeMap<String, String>> {
    let path = dir.join("matrix/ranges.json");
    if !path.exists() {
        return Ok(Default::default());
    }
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let rows = v["rows"]
        .as_array()
        .with_context(|| format!("{}: no 'rows' list", path.display()))?;
    rows.iter()
        .map(|r| {
            let field = |k: &str| {
                r[k].as_str()
                    .map(str::to_string)
                    .with_context(|| format!("{}: a row without '{k}'", path.display()))
            };
            Ok((field("row")?, field("summary")?))
        })
        .collect()
}

/// The builds as columns: llama.cpp releases oldest first (by the number in their tag), a
/// patched build after its release, then other engines.
fn columns(lines: &[Line]) -> Vec<(String, String)> {
    let mut cols: Vec<(String, String)> = lines
        .iter()
        .map(|l| (l.engine.clone(), l.build.clone()))
        .collect();
    cols.sort_by_key(|(engine, build)| {
        let digits: String = build
            .chars()
            .skip(1)
            .take_while(char::is_ascii_digit)
            .collect();
        (
            engine != report::DEFAULT_ENGINE,
            digits.parse::<u64>().unwrap_or(u64::MAX),
            build.clone(),
        )
    });
    cols.dedup();
    cols
}

/// A range summary's clauses, split at each `;` outside parentheses (a `;` inside a range's
/// parentheses belongs to the range).
fn clauses(summary: &str) -> Vec<&str> {
    let (mut out, mut depth, mut from) = (Vec::new(), 0i32, 0);
    for (i, c) in summary.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ';' if depth == 0 => {
                out.push(summary[from..i].trim());
                from = i + 1;
            }
            _ => {}
        }
    }
    out.push(summary[from..].trim());
    out
}

/// The README's form of a range summary: the ranges themselves and the revisions where the row
/// ran but was not decided (so a range that starts after them is not read as the first
/// affected release), without the `not offered` and `missing` clauses.
fn compact_range(summary: &str) -> String {
    let c = clauses(summary);
    let undecided = (c.iter().skip(1))
        .filter(|x| x.starts_with("inconclusive at") || x.starts_with("undecided at"));
    std::iter::once(c[0])
        .chain(undecided.copied())
        .collect::<Vec<_>>()
        .join("; ")
}

/// What the release matrix says of a row it ran and never saw present (crates/matrix); what
/// follows it, if anything, names revisions where the row was not decided.
const NEVER_PRESENT: &str = "never present where decided";

/// How a range starts when the release matrix decided the row nowhere.
const NEVER_DECIDED: &str = "never decided";

/// A finding id ordered as the registry orders findings: by number, `F10` after `F9`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ById<'a>(&'a str);

impl Ord for ById<'_> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        registry::compare_ids(self.0, other.0)
    }
}

impl PartialOrd for ById<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl std::fmt::Display for ById<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// One row of the verdict matrix: a verdict name of one kind, on one model when its report
/// names one.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct RowKey<'a> {
    finding: ById<'a>,
    name: &'a str,
    model: Option<&'a str>,
}

impl<'a> RowKey<'a> {
    fn of(l: &'a Line) -> RowKey<'a> {
        RowKey {
            finding: ById(&l.finding),
            name: &l.name,
            model: l.model.as_deref(),
        }
    }

    fn label(&self) -> String {
        match self.model {
            Some(m) => format!("`{}` on {m}", self.name),
            None => format!("`{}`", self.name),
        }
    }
}

/// The verdict matrix in Markdown: defects, then divergences, a row per verdict (and model), a
/// column per build, and the release matrix's affected range of llama.cpp's rows. `compact`:
/// rows absent on every build are counted per finding instead of listed, those the release
/// matrix never saw present apart from those it decided nowhere and those it did not run, and
/// a row on another model that reads as its default-model row does on every build is folded
/// into that row.
pub fn markdown(
    lines: &[Line],
    ranges: &std::collections::BTreeMap<String, String>,
    compact: bool,
) -> String {
    let all_cols = columns(lines);
    let mut out = String::new();
    for (kind, title) in [
        (
            Kind::Defect,
            "Defects (the engine breaks its own documented contract or a stated invariant)",
        ),
        (
            Kind::Divergence,
            "Divergences (the engine differs from a named reference; not bugs)",
        ),
        (
            Kind::Robustness,
            "Robustness (the suite's own rule on inputs the API accepts, where the engine states no contract; reported, not defects)",
        ),
    ] {
        let of: Vec<&Line> = lines.iter().filter(|l| l.kind == kind).collect();
        let mut rows: Vec<RowKey> = of.iter().map(|l| RowKey::of(l)).collect();
        rows.sort();
        rows.dedup();
        if rows.is_empty() {
            continue;
        }
        let cells =
            |row: &RowKey| -> Vec<&&Line> { of.iter().filter(|l| &RowKey::of(l) == row).collect() };
        // The README names the robustness rows found present in one line: they are no defects,
        // and results/VERDICTS.md has each with its builds.
        if compact && kind == Kind::Robustness {
            let present: Vec<String> = (rows.iter())
                .filter(|r| cells(r).iter().any(|l| l.verdict == "present"))
                .map(|r| r.label())
                .collect();
            out += &format!(
                "**{title}**: present on some build here: {}; {} more never present. [results/VERDICTS.md](results/VERDICTS.md) lists every row.\n\n",
                if present.is_empty() { "none".to_string() } else { present.join(", ") },
                rows.len() - present.len()
            );
            continue;
        }
        // The release matrix runs llama.cpp on its default model: its range belongs to a row
        // with llama.cpp lines and no model of its own.
        let range = |row: &RowKey| -> Option<&String> {
            let llama = cells(row)
                .iter()
                .any(|l| l.engine == report::DEFAULT_ENGINE);
            (llama && row.model.is_none())
                .then(|| ranges.get(row.name))
                .flatten()
        };
        let (mut never, mut undecided, mut unmatrixed) = (
            std::collections::BTreeMap::<ById, usize>::new(),
            std::collections::BTreeMap::<ById, usize>::new(),
            std::collections::BTreeMap::<ById, usize>::new(),
        );
        if compact {
            rows.retain(|row| {
                // Quiet: nothing but absent or not offered on every build here.
                let quiet = |l: &&&Line| l.verdict == "absent" || l.verdict == "not offered";
                if !cells(row).iter().all(quiet) {
                    return true;
                }
                let bucket = match range(row) {
                    Some(r) if r.starts_with(NEVER_PRESENT) => &mut never,
                    Some(r) if r.starts_with(NEVER_DECIDED) => &mut undecided,
                    Some(_) => return true,
                    None => &mut unmatrixed,
                };
                *bucket.entry(row.finding).or_default() += 1;
                false
            });
        }
        // The README folds a row on another model into its default-model row when the two read
        // the same on every build (results/VERDICTS.md keeps both).
        let verdicts_of = |row: &RowKey| -> Vec<(String, String, String)> {
            let mut v: Vec<(String, String, String)> = (cells(row).iter())
                .map(|l| (l.engine.clone(), l.build.clone(), l.verdict.clone()))
                .collect();
            v.sort();
            v
        };
        let mut same_on: std::collections::BTreeMap<(ById, &str), Vec<&str>> = Default::default();
        if compact {
            let listed = rows.clone();
            rows.retain(|row| {
                let Some(model) = row.model else { return true };
                let base = RowKey { model: None, ..row.clone() };
                if listed.contains(&base) && verdicts_of(&base) == verdicts_of(row) {
                    same_on.entry((row.finding, row.name)).or_default().push(model);
                    return false;
                }
                true
            });
        }
        // Only the builds the listed rows were run on (none of candle's defect rows is listed
        // when every one is absent, say).
        let cols: Vec<&(String, String)> = (all_cols.iter())
            .filter(|(e, b)| {
                (rows.iter().flat_map(&cells)).any(|l| &l.engine == e && &l.build == b)
            })
            .collect();
        out += &format!("**{title}**\n\n| | verdict |");
        for (engine, build) in cols.iter().copied() {
            let name = if engine == report::DEFAULT_ENGINE {
                build.clone()
            } else {
                format!(
                    "{engine} {}",
                    build.trim_start_matches(&format!("{engine}-"))
                )
            };
            out += &format!(" {name} |");
        }
        out += " releases affected (llama.cpp) |\n|---|---|";
        out += &"---|".repeat(cols.len() + 1);
        out.push('\n');
        for row in &rows {
            let also = match same_on.get(&(row.finding, row.name)) {
                Some(models) if row.model.is_none() => format!(" (same on {})", models.join(", ")),
                _ => String::new(),
            };
            out += &format!("| {} | {}{also} |", row.finding, row.label());
            let here = cells(row);
            for (engine, build) in cols.iter().copied() {
                let cell = here
                    .iter()
                    .find(|l| &l.engine == engine && &l.build == build)
                    .map_or("·".to_string(), |l| match l.verdict.as_str() {
                        "present" => "**present**".to_string(),
                        v => v.to_string(),
                    });
                out += &format!(" {cell} |");
            }
            // The README's form keeps the range itself; the revisions where a row was not
            // decided, after the first ';', are in results/VERDICTS.md.
            let shown = range(row).map_or("·".to_string(), |r| match compact {
                true => compact_range(r),
                false => r.clone(),
            });
            out += &format!(" {shown} |\n");
        }
        let count = |m: &std::collections::BTreeMap<ById, usize>| {
            let each: Vec<String> = m.iter().map(|(f, n)| format!("{f} {n}")).collect();
            format!("{} ({})", m.values().sum::<usize>(), each.join(", "))
        };
        let mut unlisted = Vec::new();
        if !never.is_empty() {
            unlisted.push(format!(
                "{} rows never present where the release matrix decided",
                count(&never)
            ));
        }
        if !undecided.is_empty() {
            unlisted.push(format!(
                "{} rows the release matrix decided nowhere",
                count(&undecided)
            ));
        }
        if !unmatrixed.is_empty() {
            unlisted.push(format!(
                "{} rows the release matrix does not run",
                count(&unmatrixed)
            ));
        }
        if !unlisted.is_empty() {
            out += &format!(
                "\nNot listed, absent (or not offered) on every build here: {}. [results/VERDICTS.md](results/VERDICTS.md) lists every row.\n",
                unlisted.join("; ")
            );
        }
        out.push('\n');
    }
    out += "`·`: not run on that build (a range: not in the release matrix). Verdict words: see the README.\n";
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) {
        std::fs::write(dir.join(name), text).unwrap();
    }

    #[test]
    fn the_compact_range_keeps_each_range_whole_and_says_where_nothing_was_decided() {
        assert_eq!(
            compact_range("b4240 (inconclusive at b4524; b4240 by x/repro.c), b4718.. (still present at b11429); inconclusive at b4524; not offered: b4240"),
            "b4240 (inconclusive at b4524; b4240 by x/repro.c), b4718.. (still present at b11429); inconclusive at b4524"
        );
        assert_eq!(
            compact_range("never present where decided; not offered: b4240"),
            "never present where decided"
        );
    }

    fn line(name: &str, model: Option<&str>, build: &str, verdict: &str) -> Line {
        Line {
            kind: Kind::Defect,
            finding: "F8".into(),
            name: name.into(),
            model: model.map(String::from),
            engine: report::DEFAULT_ENGINE.into(),
            build: build.into(),
            build_detail: String::new(),
            verdict: verdict.into(),
            controls: "2/2".into(),
            evidence: String::new(),
        }
    }

    /// A row on another model joins its default-model row only when every build reads the
    /// same; one build apart keeps it on its own line.
    #[test]
    fn the_readme_folds_a_model_row_only_when_it_reads_the_same() {
        let lines = [
            line("same", None, "b1", "present"),
            line("same", None, "b2", "absent"),
            line("same", Some("gemma3"), "b1", "present"),
            line("same", Some("gemma3"), "b2", "absent"),
            line("apart", None, "b1", "present"),
            line("apart", None, "b2", "absent"),
            line("apart", Some("gemma3"), "b1", "undecided"),
            line("apart", Some("gemma3"), "b2", "absent"),
        ];
        let md = markdown(&lines, &Default::default(), true);
        assert!(md.contains("| F8 | `same` (same on gemma3) |"), "{md}");
        assert!(!md.contains("`same` on gemma3"), "{md}");
        assert!(md.contains("| F8 | `apart` |"), "{md}");
        assert!(
            md.contains("| F8 | `apart` on gemma3 | undecided |"),
            "{md}"
        );
        // The full form keeps every row.
        let full = markdown(&lines, &Default::default(), false);
        assert!(full.contains("`same` on gemma3"), "{full}");
    }

    /// A finding numbered 10 comes after F9 in the table, not between F1 and F2.
    #[test]
    fn findings_sort_by_number() {
        let numbered = |finding: &str| Line {
            finding: finding.into(),
            ..line(finding, None, "b1", "present")
        };
        let lines = [
            numbered("F10"),
            numbered("F2"),
            numbered("F9"),
            numbered("F1"),
        ];
        let md = markdown(&lines, &Default::default(), false);
        let at = |f: &str| md.find(&format!("| {f} |")).unwrap();
        assert!(
            at("F1") < at("F2") && at("F2") < at("F9") && at("F9") < at("F10"),
            "{md}"
        );
    }

    #[test]
    fn a_results_file_without_the_header_stops_the_table() {
        let dir = std::env::temp_dir().join(format!("verdicts-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = report::Report::new(
            report::ReportId {
                finding: "F9".into(),
                name: "copy-planted".into(),
                engine: "llama.cpp".into(),
                build: "b1".into(),
                build_detail: "test".into(),
                sources: report::kind::sources_stating_every_contract(),
                detector: None,
            },
            report::Verdict::Present,
            "e",
            vec![
                report::Control::positive("p", true, ""),
                report::Control::negative("n", true, ""),
            ],
        );
        write(&dir, "planted.b1.json", &good.to_json_text());
        let lines = read_lines(&dir).unwrap();
        assert_eq!(lines.len(), 1);
        assert_eq!(
            (lines[0].verdict.as_str(), lines[0].controls.as_str()),
            ("present", "2/2")
        );
        // The same finding on another engine is its own line, in the engine column.
        let mut other = good.clone();
        other.subject.engine = "candle".into();
        other.subject.build = "candle-0.0.1".into();
        write(&dir, "planted.candle-0.0.1.json", &other.to_json_text());
        let lines = read_lines(&dir).unwrap();
        let engines: Vec<&str> = lines.iter().map(|l| l.engine.as_str()).collect();
        assert_eq!(engines, ["candle", "llama.cpp"]);
        let text = table(&lines);
        let header = text.lines().find(|l| l.contains("verdict")).unwrap();
        assert!(header.contains("engine"), "{text}");
        assert!(text.contains("candle    candle-0.0.1"), "{text}");
        // Every build is named once above the rows, with its description.
        assert!(
            text.starts_with("builds:\n  b1           test\n  candle-0.0.1 test\n\ndefects:"),
            "{text}"
        );
        std::fs::remove_file(dir.join("planted.candle-0.0.1.json")).unwrap();
        write(&dir, "bare.b1.json", "{\"rows\": []}");
        let e = read_lines(&dir).err().unwrap();
        assert!(format!("{e:#}").contains("bare.b1.json"), "{e:#}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
