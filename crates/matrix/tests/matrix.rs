//! The release matrix on synthetic runner folders: ranges that are fixed, still present, cut
//! by a failed build or not offered; byte-identical reruns; a chart that passes the chart
//! check; and the sampler source lines quoted for the rows whose samplers they belong to.

use matrix::read::{Column, BUILDS_TSV};
use report::{Control, Report, ReportId, Verdict};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// A scratch folder, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("matrix-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn write(&self, name: &str, text: &str) {
        std::fs::write(self.0.join(name), text).unwrap();
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.0.join(name)).unwrap()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A `clone-incomplete` report on `build` with these `(row, verdict)` rows, keeping the
/// report contract: the header keys in order and passing positive and negative controls.
fn report(build: &str, rows: &[(&str, &str)]) -> String {
    let own = if rows.iter().any(|r| r.1 == "present") {
        "present"
    } else {
        "absent"
    };
    let rows: Vec<Value> = rows
        .iter()
        .map(|(name, verdict)| {
            json!({"name": name, "verdict": verdict, "evidence": "synthetic",
                   "contract": {"file": "src/llama-sampler.cpp", "line": 1, "quote": "// copy the state"}})
        })
        .collect();
    let v = json!({
        "finding": "F1",
        "name": "clone-incomplete",
        "build": build,
        "build_detail": format!("llama.cpp {build} (synthetic)"),
        "verdict": own,
        "evidence": "synthetic",
        "controls": [
            {"name": "planted bad", "kind": "positive", "passed": true, "detail": "flagged"},
            {"name": "planted good", "kind": "negative", "passed": true, "detail": "quiet"},
        ],
        "engine": "llama.cpp",
        "contract": {"file": "src/llama-sampler.cpp", "line": 1, "quote": "// copy the state"},
        "measured": own,
        "verdict_rows": rows,
    });
    serde_json::to_string_pretty(&v).unwrap()
}

/// Writes one report per `(build, [penalties, adaptive_p, top_k])`.
fn reports(dir: &Scratch, runs: &[(&str, [&str; 3])]) {
    for (build, [penalties, adaptive_p, top_k]) in runs {
        let rows = [
            ("clone-incomplete-penalties", *penalties),
            ("clone-incomplete-adaptive_p", *adaptive_p),
            ("clone-incomplete-top_k", *top_k),
        ];
        dir.write(
            &format!("clone-stateful.{build}.json"),
            &report(build, &rows),
        );
    }
}

fn no_sources(_: &Column) -> Option<String> {
    None
}

/// The `ranges.txt` line of a row: its summary after the finding and the row's name.
fn line_of<'a>(ranges: &'a str, row: &str) -> &'a str {
    ranges
        .lines()
        .find_map(|l| {
            let rest = l.strip_prefix("F1")?.trim_start();
            rest.strip_prefix(row)?
                .strip_prefix("  ")
                .map(str::trim_start)
        })
        .unwrap_or_else(|| panic!("no line for {row} in\n{ranges}"))
}

fn states(dir: &Path, row: &str) -> Value {
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("ranges.json")).unwrap()).unwrap();
    let row = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["row"] == row)
        .unwrap_or_else(|| panic!("no {row} in ranges.json"));
    row["states"].clone()
}

/// A run with a failed build in the middle: penalties fixed at b10405, adaptive_p not offered
/// until b10200 and present since, top_k never present.
fn main_run(name: &str) -> Scratch {
    let dir = Scratch::new(name);
    let (p, a, no) = ("present", "absent", "not offered");
    reports(
        &dir,
        &[
            ("b4240", [p, no, a]),
            ("b7709", [p, no, a]),
            ("b8148", [p, no, a]),
            ("b8310", [p, no, a]),
            ("b10200", [p, p, a]),
            ("b10405", [a, p, a]),
            ("b11429", [a, p, a]),
        ],
    );
    dir.write(
        BUILDS_TSV,
        "b4240\t0.1.88\tok\t\nb7709\t0.1.136\tok\t\nb8148\t0.1.138\tok\t\n\
         b8233\t0.1.141\tbuild-failed\terror: could not compile `llama-cpp-sys-2`\n\
         b8310\t0.1.139\tok\t\nb10200\t0.1.154\tok\t\nb10405\t0.1.156\tok\t\nb11429\t0.1.161\tok\t\n",
    );
    dir
}

#[test]
fn ranges_are_fixed_still_present_or_not_offered_and_a_failed_build_is_not_a_fix() {
    let dir = main_run("main");
    let out = matrix::run(&dir.0, &no_sources).unwrap();
    assert_eq!(out, dir.read("ranges.txt"));
    // Present wherever it ran up to b10200, but a range holds no revision that was not run.
    assert_eq!(
        line_of(&out, "clone-incomplete-penalties"),
        "b4240 (no data at b4524), b7709..b8148 (no data at b8233), b8310 (no data at b8665), b10200 (first fixed: b10405)"
    );
    assert_eq!(
        line_of(&out, "clone-incomplete-adaptive_p"),
        "b10200..b10405 (no data at b11074), b11429.. (still present at b11429); not offered: b4240, b7709..b8148, b8310"
    );
    assert_eq!(
        line_of(&out, "clone-incomplete-top_k"),
        "never present where decided"
    );
    assert_eq!(
        line_of(&out, "clone-incomplete"),
        "b4240 (no data at b4524), b7709..b8148 (no data at b8233), b8310 (no data at b8665), b10200..b10405 (no data at b11074), b11429.. (still present at b11429)"
    );
    assert!(
        out.contains("  b8233 (llama-cpp-sys-2 0.1.141) build-failed: error: could not compile `llama-cpp-sys-2`\n"),
        "{out}"
    );
    assert!(
        out.contains("Not run (no data for any row): b4524 b4718 "),
        "{out}"
    );
    // The failed build is its own state, between two present ones, not an absent.
    let s = states(&dir.0, "clone-incomplete-penalties");
    assert_eq!(
        (&s["b8148"], &s["b8233"], &s["b8310"], &s["b4524"]),
        (
            &json!("present"),
            &json!("not built"),
            &json!("present"),
            &json!("not run")
        )
    );
    assert_eq!(s.as_object().unwrap().len(), 24);
    let changes = dir.read("changes.txt");
    assert!(
        changes.contains(
            "F1 clone-incomplete-penalties: present at b10200 -> absent at b10405\n\
             \x20 src/llama-sampler.cpp, b10200 (llama-cpp-sys-2 0.1.154) -> b10405 (0.1.156)\n\
             \x20 sources not available here: b10200 (llama-cpp-sys-2 0.1.154) and b10405 (llama-cpp-sys-2 0.1.156) not in cargo's registry\n"
        ),
        "{changes}"
    );
    // b8233 lies between b8148 and b8310, where penalties stays present: no change there.
    assert!(!changes.contains("b8233"), "{changes}");
    assert!(changes
        .contains("F1 clone-incomplete-adaptive_p: not offered at b8310 -> present at b10200\n"));
}

/// Where the suite's controls could not run (inconclusive), the defect's C reproducer decides
/// and the range names it; a cell the suite decided is never overridden, and a reproducer
/// that did not compile decides nothing.
#[test]
fn a_c_reproducer_decides_only_where_the_suite_is_inconclusive() {
    let dir = Scratch::new("repro");
    let report_of = |build: &str, verdict: &str| {
        let mut v: Value = serde_json::from_str(&report(build, &[])).unwrap();
        v["finding"] = "F2".into();
        v["name"] = "stale-sorted-truncation".into();
        v["verdict"] = verdict.into();
        v["measured"] = verdict.into();
        if verdict == "inconclusive" {
            v["controls"][1]["passed"] = false.into();
        }
        v.to_string()
    };
    let record = |exit: &str| format!("build x\n$ cc repro.c\n$ ./repro\ngot: something\n{exit}\n");
    std::fs::create_dir_all(dir.0.join("upstream")).unwrap();
    for (build, verdict, exit) in [
        ("b4240", "inconclusive", Some("exit 1")),
        ("b4524", "inconclusive", Some("does not compile: missing")),
        ("b4718", "present", Some("exit 0")),
        ("b5233", "present", None),
    ] {
        dir.write(
            &format!("sortpoison.{build}.json"),
            &report_of(build, verdict),
        );
        if let Some(e) = exit {
            dir.write(
                &format!("upstream/logit-bias-stale-sorted.{build}.txt"),
                &record(e),
            );
        }
    }
    dir.write(
        BUILDS_TSV,
        "b4240\t0.1.88\tok\t\nb4524\t0.1.94\tok\t\nb4718\t0.1.102\tok\t\nb5233\t0.1.103\tok\t\n",
    );
    let out = matrix::run(&dir.0, &no_sources).unwrap();
    let line = out
        .lines()
        .find(|l| l.starts_with("F2") && l.contains("stale-sorted-truncation"))
        .unwrap();
    assert!(
        line.ends_with(
            "b4240 (inconclusive at b4524; b4240 by logit-bias-stale-sorted/repro.c), b4718..b5233 (no data at b5474); inconclusive at b4524"
        ),
        "{out}"
    );
}

#[test]
fn a_build_failed_where_the_fix_lands_leaves_the_fix_between_two_revisions() {
    let dir = Scratch::new("gap");
    reports(
        &dir,
        &[
            ("b10200", ["present", "absent", "absent"]),
            ("b11074", ["absent", "absent", "absent"]),
        ],
    );
    dir.write(
        BUILDS_TSV,
        "b10200\t0.1.154\tok\t\nb10405\t0.1.156\trefused\tsources differ\nb11074\t0.1.159\tok\t\n",
    );
    let out = matrix::run(&dir.0, &no_sources).unwrap();
    assert_eq!(
        line_of(&out, "clone-incomplete-penalties"),
        "b10200 (no data at b10405)"
    );
    assert!(dir.read("changes.txt").contains(
        "F1 clone-incomplete-penalties: present at b10200 -> absent at b11074\n  no data between them: b10405 (not built)\n"
    ));
    assert_eq!(
        states(&dir.0, "clone-incomplete-penalties")["b10405"],
        "not built"
    );
}

#[test]
fn without_builds_tsv_the_revisions_with_reports_are_built_and_the_rest_not_run() {
    let dir = Scratch::new("nolog");
    reports(
        &dir,
        &[
            ("b10200", ["present", "absent", "absent"]),
            ("b11429", ["present", "absent", "absent"]),
        ],
    );
    // A report of another engine, and one of a release the table lacks, are left out.
    let mut candle: Value = serde_json::from_str(&report("candle-0.11.1", &[])).unwrap();
    candle["engine"] = "candle".into();
    dir.write("engines.candle-0.11.1.json", &candle.to_string());
    dir.write("clone.b99999.json", &report("b99999", &[]));
    let out = matrix::run(&dir.0, &no_sources).unwrap();
    assert_eq!(
        line_of(&out, "clone-incomplete-penalties"),
        "b10200 (no data at b10405), b11429.. (still present at b11429)"
    );
    assert!(out.contains("Built and reported: 2 of 24.\n"), "{out}");
    assert!(out.contains("No builds.tsv: a revision with reports counts as built"));
    assert!(out.contains("  engines.candle-0.11.1.json: engine candle, not llama.cpp\n"));
    assert!(out
        .contains("  clone.b99999.json: build 'b99999' is not a revision of the release table\n"));
    let s = states(&dir.0, "clone-incomplete-penalties");
    assert_eq!(
        (&s["b10405"], &s["b11074"]),
        (&json!("not run"), &json!("not run"))
    );
}

#[test]
fn the_same_folder_gives_the_same_bytes_and_a_chart_that_passes_the_check() {
    let first = main_run("same-a");
    let second = main_run("same-b");
    matrix::run(&first.0, &no_sources).unwrap();
    let files = ["ranges.txt", "ranges.json", "matrix.svg", "changes.txt"];
    let before: Vec<String> = files.iter().map(|f| first.read(f)).collect();
    // A second run reads the folder with the first run's output in it.
    matrix::run(&first.0, &no_sources).unwrap();
    matrix::run(&second.0, &no_sources).unwrap();
    for (f, b) in files.iter().zip(&before) {
        assert_eq!(first.read(f), *b, "{f} changed on a rerun");
        assert_eq!(second.read(f), *b, "{f} differs between two folders");
    }
    let svg = &before[2];
    let problems = report::chart::check(svg);
    assert!(problems.is_empty(), "{problems:?}");
    assert!(svg.contains(
        "fill=\"#555555\"><title>F1 clone-incomplete-penalties at b8233: not built</title>"
    ));
    assert!(svg.contains(
        "fill=\"#D55E00\"><title>F1 clone-incomplete-penalties at b10200: present</title>"
    ));
    assert!(svg.contains(
        "fill=\"#56B4E9\"><title>F1 clone-incomplete-adaptive_p at b4240: not offered</title>"
    ));
    assert!(svg.contains("font-family=\"DejaVu Sans, sans-serif\""));
    assert_eq!(svg.matches("<g class=\"key\"").count(), 7);
}

const OLD_C: &str = "\
#include \"llama-sampler.h\"

struct llama_sampler_penalties {
    const int32_t penalty_last_n;
};

static struct llama_sampler * llama_sampler_penalties_clone(const struct llama_sampler * smpl) {
    const auto * ctx = (const llama_sampler_penalties *) smpl->ctx;
    auto * result = llama_sampler_init_penalties(ctx->penalty_last_n);
    return result;
}

static void llama_sampler_top_k_apply(struct llama_sampler * smpl, llama_token_data_array * cur_p) {
    llama_sampler_top_k_impl(cur_p, ((const llama_sampler_top_k *) smpl->ctx)->k);
}
";

/// `OLD_C` with the clone copying the token counts.
fn new_c() -> String {
    OLD_C.replace(
        "    return result;\n}\n\nstatic void",
        "    auto * result_ctx = (llama_sampler_penalties *) result->ctx;\n    result_ctx->token_count = ctx->token_count;\n    return result;\n}\n\nstatic void",
    )
}

/// `changes.txt` of a folder with b10200's and b10405's rows as given, where the sampler
/// source goes from `OLD_C` to `new_c()` (the penalties clone starts copying its counts).
fn changes_across_the_clone_fix(name: &str, b10200: [&str; 3], b10405: [&str; 3]) -> String {
    let dir = Scratch::new(name);
    reports(&dir, &[("b10200", b10200), ("b10405", b10405)]);
    let new = new_c();
    let sources = |c: &Column| match c.name.as_str() {
        "b10200" => Some(OLD_C.to_string()),
        "b10405" => Some(new.clone()),
        _ => None,
    };
    matrix::run(&dir.0, &sources).unwrap();
    dir.read("changes.txt")
}

#[test]
fn a_change_in_a_samplers_clone_is_quoted_for_its_row_and_not_for_another() {
    let changes = matrix::hunks::changed_lines(OLD_C, &new_c());
    assert_eq!(changes.len(), 2, "{changes:?}");
    assert_eq!(
        matrix::hunks::quote(&changes, &["penalties"], 100),
        "in llama_sampler_penalties_clone:\n\
         \x20 + 10 |     auto * result_ctx = (llama_sampler_penalties *) result->ctx;\n\
         \x20 + 11 |     result_ctx->token_count = ctx->token_count;\n"
    );
    assert_eq!(matrix::hunks::quote(&changes, &["top_k"], 100), "");

    // The same through changes.txt: penalties is fixed and top_k turns present between the two.
    let text = changes_across_the_clone_fix(
        "hunks",
        ["present", "absent", "absent"],
        ["absent", "absent", "present"],
    );
    let entry = |row: &str| {
        let start = text
            .find(&format!("F1 {row}: "))
            .unwrap_or_else(|| panic!("no {row} in\n{text}"));
        let rest = &text[start..];
        rest[..rest.find("\n\n").unwrap_or(rest.len())]
            .trim_end()
            .to_string()
    };
    assert_eq!(
        entry("clone-incomplete-penalties"),
        "F1 clone-incomplete-penalties: present at b10200 -> absent at b10405\n\
         \x20 src/llama-sampler.cpp, b10200 (llama-cpp-sys-2 0.1.154) -> b10405 (0.1.156)\n\
         \x20 samplers: penalties\n\
         \x20   in llama_sampler_penalties_clone:\n\
         \x20     + 10 |     auto * result_ctx = (llama_sampler_penalties *) result->ctx;\n\
         \x20     + 11 |     result_ctx->token_count = ctx->token_count;\n"
            .trim_end()
    );
    assert_eq!(
        entry("clone-incomplete-top_k"),
        "F1 clone-incomplete-top_k: absent at b10200 -> present at b10405\n\
         \x20 src/llama-sampler.cpp, b10200 (llama-cpp-sys-2 0.1.154) -> b10405 (0.1.156)\n\
         \x20 samplers: top_k\n\
         \x20 no line of these samplers' code changed: the change comes from elsewhere; 2 lines changed, in:\n\
         \x20   llama_sampler_penalties_clone (2 lines)"
    );
}

#[test]
fn a_row_that_names_no_sampler_quotes_a_small_change_whole() {
    let text = changes_across_the_clone_fix(
        "unnamed",
        ["present", "absent", "absent"],
        ["absent", "absent", "absent"],
    );
    assert!(
        text.contains(
            "F1 clone-incomplete: present at b10200 -> absent at b10405\n\
             \x20 src/llama-sampler.cpp, b10200 (llama-cpp-sys-2 0.1.154) -> b10405 (0.1.156)\n\
             \x20 the row names no sampler; every changed line (2 lines):\n\
             \x20   in llama_sampler_penalties_clone:\n\
             \x20     + 10 |     auto * result_ctx = (llama_sampler_penalties *) result->ctx;\n\
             \x20     + 11 |     result_ctx->token_count = ctx->token_count;\n"
        ),
        "{text}"
    );
    // Past the limit, the definitions are listed instead.
    let changes = matrix::hunks::changed_lines(OLD_C, &new_c());
    assert!(matrix::hunks::quote_all(&changes, 1).is_none());
    assert!(matrix::hunks::quote_all(&changes, 2).is_some());
}

#[test]
fn bad_input_is_refused_with_one_line_and_exit_2() {
    let decide = |dir: &Path| {
        let argv = ["matrix".into(), dir.as_os_str().to_owned()];
        match cmdline::decide(argv, matrix::check) {
            cmdline::Decision::Stop(code, line) => (code, line),
            _ => panic!("{} was not refused", dir.display()),
        }
    };
    let (code, line) = decide(Path::new("/no/such/dir"));
    assert_eq!(code, 2);
    assert!(
        line.starts_with("error: /no/such/dir is not a folder"),
        "{line}"
    );

    let dir = Scratch::new("refused");
    let (code, line) = decide(&dir.0);
    assert_eq!(code, 2);
    assert!(
        line.starts_with("error: no reports and no builds.tsv"),
        "{line}"
    );

    dir.write("clone.b10200.json", "{\"verdict\": \"present\"}");
    let (code, line) = decide(&dir.0);
    assert!(code == 2 && line.contains("clone.b10200.json"), "{line}");

    std::fs::remove_file(dir.0.join("clone.b10200.json")).unwrap();
    dir.write(BUILDS_TSV, "b10200\t0.1.154\tbroken\t\n");
    let (code, line) = decide(&dir.0);
    assert!(code == 2 && line.contains("status 'broken'"), "{line}");
    assert!(!line.contains('\n'));

    dir.write(BUILDS_TSV, "b10200\t0.1.154\tok\t\n");
    dir.write(
        "clone.b10200.json",
        &report("b10200", &[("clone-incomplete-dry", "maybe")]),
    );
    let (code, line) = decide(&dir.0);
    assert!(
        code == 2 && line.contains("'maybe' is not a verdict"),
        "{line}"
    );
}

#[test]
fn revisions_without_an_answer_are_named_and_a_failed_run_is_a_note() {
    let dir = std::env::temp_dir().join(format!("matrix-undecided-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (build, verdict) in [
        ("b4240", Verdict::Inconclusive),
        ("b4524", Verdict::Inconclusive),
        ("b4718", Verdict::Absent),
    ] {
        let r = Report::new(
            ReportId {
                finding: "F9".into(),
                name: "copy-planted".into(),
                engine: "llama.cpp".into(),
                build: build.into(),
                build_detail: build.into(),
                sources: report::kind::sources_stating_every_contract(),
                detector: None,
            },
            verdict,
            "e",
            vec![
                Control::positive("p", true, ""),
                Control::negative("n", true, ""),
            ],
        );
        std::fs::write(dir.join(format!("copy.{build}.json")), r.to_json_text()).unwrap();
    }
    std::fs::write(
        dir.join("runs-failed.tsv"),
        "b4718\trepro-edges\terror: boom\n",
    )
    .unwrap();
    let m = matrix::read::load(&dir).unwrap();
    let text = matrix::ranges::ranges_text(&matrix::ranges::ranges(&m));
    let line = text.lines().find(|l| l.contains("copy-planted")).unwrap();
    // Inconclusive where the controls did not run is no absence: the row says where.
    assert!(
        line.contains("never present where decided; inconclusive at b4240, b4524"),
        "{text}"
    );
    assert!(
        text.contains("repro-edges failed on b4718: error: boom"),
        "{text}"
    );
    std::fs::write(dir.join("runs-failed.tsv"), "one field only\n").unwrap();
    assert!(matrix::read::load(&dir).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}
