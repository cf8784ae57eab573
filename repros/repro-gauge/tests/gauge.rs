//! F4 on whichever build this test binary links (b11429 from the root workspace, b10200 from the
//! workspace `buildgen` generates for it under target/builds/0.1.154/), with the models from
//! `make models`. Snapshots are per build.

use oracle::gauge::{self, Operator};
use oracle::TokenId;
use repro_gauge::implementation::Implementation;
use repro_gauge::shift;
use repro_gauge::{free_running, json, schema};
use std::collections::BTreeSet;
use subject::BuildInfo;
use test_support::{assert_refused, json_report, one_at_a_time};

fn load(name: &str) -> harness::LoadedModel {
    harness::LoadedModel::load_with(
        models::resolve(name).expect("run `make models` first"),
        subject::Weights::AsStored,
    )
    .unwrap()
}

#[test]
fn oracle_examples() {
    // Id 0 was seen; logits 0.1 and 0.0. Each operator's output and choice at c = 0 and +5.
    let z = [0.1f32, 0.0];
    let seen: BTreeSet<TokenId> = [TokenId(0)].into_iter().collect();
    let mut out = String::new();
    for op in Operator::ALL {
        for c in [0.0f32, 5.0] {
            let x = gauge::apply(op, &z, c, &seen, 1.3);
            let p = gauge::softmax(&x);
            out.push_str(&format!(
                "{:<11} c={c:<3} out=[{:.6}, {:.6}] p=[{:.6}, {:.6}] choice {}\n",
                op.as_str(),
                x[0],
                x[1],
                p[0],
                p[1],
                gauge::argmax(&x)
            ));
        }
    }
    insta::assert_snapshot!("oracle_examples", out);
}

/// A run for the fork tests: the best token, or the second best at the steps listed, with
/// every row it was handed kept as bits.
struct Rule {
    second_at: Vec<usize>,
    rows: Vec<Vec<u32>>,
}

impl Rule {
    fn new(second_at: Vec<usize>) -> Rule {
        Rule {
            second_at,
            rows: Vec::new(),
        }
    }
    fn pick(&self, raw: &[f32], step: usize) -> TokenId {
        let (best, second, _) = ranked(raw);
        if self.second_at.contains(&step) {
            second
        } else {
            best
        }
    }
}

impl harness::fork::Run for Rule {
    fn choose(&mut self, row: &harness::fork::LogitsRow<'_>) -> anyhow::Result<TokenId> {
        let t = self.pick(row.raw, self.rows.len());
        self.rows
            .push(row.raw.iter().map(|z| z.to_bits()).collect());
        Ok(t)
    }
}

/// The best and second-best ids (lowest id among equals) and the margin between them.
fn ranked(raw: &[f32]) -> (TokenId, TokenId, f32) {
    let mut idx: Vec<usize> = (0..raw.len()).collect();
    idx.sort_by(|&a, &b| raw[b].total_cmp(&raw[a]).then(a.cmp(&b)));
    let id = |k: usize| TokenId(idx[k] as i32);
    (id(0), id(1), raw[idx[0]] - raw[idx[1]])
}

/// The fork plumbing: runs with different rules decode together, and every choice a run
/// made is its rule applied to the logits of its own history decoded alone (up to rounding:
/// the batched and the single-sequence logits may differ in the last bits, so a step whose
/// top-2 margin is below 1e-3 is skipped).
#[test]
fn forked_runs_choose_from_their_own_history() {
    let _serial = one_at_a_time();
    let m = load("smollm2");
    let prompt = m.chat_ids("Name three colours.").unwrap();
    let mut runs: Vec<Rule> = [vec![], vec![1], vec![3], vec![]].map(Rule::new).into();
    let out = harness::fork::run_forked(&m.model, &prompt, &mut runs, 8, 2).unwrap();
    // Runs 0 and 3 never part; 1 and 2 part at their steps: three sequences at most.
    assert_eq!(out.tokens[0], out.tokens[3]);
    assert_eq!(out.max_live, 3);
    assert!(out.decoded < 4 * 8);
    let mut session = harness::Session::new(&m.model, prompt.clone(), 8, 2).unwrap();
    let mut checked = 0;
    for (r, tokens) in runs.iter().zip(&out.tokens) {
        for t in 0..tokens.len() {
            let raw = session.logits_after(&tokens[..t]).unwrap();
            if ranked(&raw).2 < 1e-3 {
                continue;
            }
            assert_eq!(r.pick(&raw, t), tokens[t], "run {:?} step {t}", r.second_at);
            checked += 1;
        }
    }
    assert!(checked >= 24, "only {checked} steps had a clear margin");
}

fn short_design() -> free_running::Design {
    free_running::Design::standard(vec![1.0, 1.3], vec![-5.0, 0.0, 5.0], 16, 2)
}

/// The design on two prompts of both models: the no-op leg is identical, the value checks
/// find no mismatch, and the table is pinned per build.
/// Pins F4, live on both builds. Upstream: no upstream report found (searched the ggml-org/llama.cpp issues and pull requests, 2026-11-30).
#[test]
fn short_design_on_both_models() {
    let _serial = one_at_a_time();
    let prompts = vec![
        "Name three colours.".to_string(),
        "Write a haiku about rain.".into(),
    ];
    let mut text = String::new();
    for name in ["smollm2", "gemma3"] {
        let r = free_running::ModelRuns::run(&load(name), &short_design(), &prompts).unwrap();
        let one = std::slice::from_ref(&r);
        let n = free_running::ModelRuns::no_op_leg(one);
        // 2 prompts x (3 operators x 3 shifts - the reference itself).
        assert_eq!((n.compared, n.failures), (2 * 8, 0), "{:?}", n.first);
        let f = free_running::ModelRuns::fork_check(one);
        // Two prompts x (sign at theta 1.3, c = 0 and c = +5) decoded alone.
        assert_eq!((f.compared, f.failures), (4, 0), "{:?}", f.first);
        for (op, c) in r.checks() {
            assert!(c.compared > 0 && c.clean(), "{op:?}: {c:?}");
        }
        text.push_str(&free_running::to_text(&r).unwrap());
    }
    test_support::assert_build_snapshot!("design_short", text);
}

/// Each detector on planted cases, through the same fork loop, runs, cells and verdict rule
/// as the models: the sign-branched sampler makes the verdict `present`, the planted
/// subtractive one in its place makes it `absent`, the planted normalized one in the
/// normalized slot makes the fix's rule `absent`, the value check flags three wrong
/// arithmetics and passes llama.cpp's and our sign branch. Disabling any of these detectors
/// fails this test.
#[test]
fn detectors_fire_on_planted_cases_and_stay_quiet_on_clean_ones() {
    let controls = shift::planted_controls().unwrap();
    assert_eq!(controls.len(), 8);
    assert!(controls.iter().all(|c| c.passed), "{controls:#?}");
    // The fix's row has a negative control of its own (the planted normalized sampler), and
    // the fix on the planted case is reported beside it, never one of its controls.
    assert!(controls
        .iter()
        .any(|c| c.kind == report::ControlKind::Negative
            && c.name.starts_with("planted normalized sampler")));
    assert!(!controls
        .iter()
        .any(|c| c.name.contains("ledger-penalties normalized on")));
    let (fix, line) = shift::fix_on_planted_case().unwrap();
    assert_eq!(fix, report::Verdict::Absent, "{line}");
    // The planted normalized sampler holds the normalized arithmetic at every step, and the
    // fix's rule would flag it if it parted (the sign branch in its slot is the positive).
    let plain = shift::planted_slots(vec![
        (Operator::Sign, Implementation::LedgerSign),
        (Operator::Normalized, Implementation::PlantedNormalized),
    ]);
    let runs = shift::planted_runs(&plain, "plain").unwrap();
    for (op, c) in runs.checks() {
        if op == Operator::Normalized {
            assert!(c.compared > 0 && c.clean(), "{c:?}");
        }
    }
    // The value check alone: llama.cpp's stage and ours pass as the sign branch.
    for imp in [Implementation::LlamaSign, Implementation::LedgerSign] {
        let design = shift::planted_design(imp, Implementation::PlantedSubtractive);
        let runs = shift::planted_runs(&design, "check").unwrap();
        for (op, c) in runs.checks() {
            if op == Operator::Sign {
                assert!(c.compared > 0 && c.clean(), "{imp:?}: {c:?}");
            }
        }
        // The planted rows depend on the history, and forks happened.
        assert!(runs.prompts.iter().all(|p| p.max_live > 1));
    }
    // The value check's arithmetic by hand: sign at x = 6 divides, at x = -4 multiplies.
    assert!(free_running::value_ok(Operator::Sign, 6.0, 6.0 / 1.3, 1.3, 0.0).0);
    assert!(!free_running::value_ok(Operator::Sign, 6.0, 6.0 * 1.3, 1.3, 0.0).0);
    assert!(free_running::value_ok(Operator::Sign, -4.0, -4.0 * 1.3, 1.3, 0.0).0);
    assert!(!free_running::value_ok(Operator::Subtractive, 6.0, 6.0 - 0.25, 1.3, 0.0).0);
    assert!(free_running::value_ok(Operator::Normalized, -3.0, -10.0 + 1.3 * 7.0, 1.3, -10.0).0);
    assert!(!free_running::value_ok(Operator::Normalized, -3.0, -10.0 + 1.29 * 7.0, 1.3, -10.0).0);
}

/// The verdict rule on planted designs: no theta above 1 is `undecided`, not `absent`.
#[test]
fn a_design_without_a_penalty_is_undecided() {
    let mut design = shift::planted_design(
        Implementation::LedgerSign,
        Implementation::PlantedSubtractive,
    );
    design.thetas = vec![1.0];
    let runs = shift::planted_runs(&design, "no penalty").unwrap();
    assert_eq!(
        repro_gauge::audit::verdict_of(&[runs]).unwrap(),
        report::Verdict::Undecided
    );
}

#[test]
fn json_subset() {
    let _serial = one_at_a_time();
    let corpus = json::corpus().unwrap();
    assert!(corpus.len() >= 100, "the corpus has at least 100 prompts");
    let r = json::run(&load("smollm2"), &corpus[..3], 256, 2).unwrap();
    let t = r.totals();
    assert_eq!(t.len(), json::Variant::all().len());
    assert!(t.iter().all(|x| x.schema_valid <= x.parses));
    test_support::assert_build_snapshot!("json_subset", r.to_text());
}

#[test]
fn every_corpus_schema_parses() {
    for (prompt, s) in json::corpus().unwrap() {
        assert!(!prompt.is_empty());
        assert!(!matches!(s, schema::Schema::Object(ref f) if f.is_empty()));
    }
}

const BIN: &str = env!("CARGO_BIN_EXE_repro-gauge");

fn prompt_file(name: &str, text: &str) -> String {
    let p = std::env::temp_dir().join(format!("sampler-audit-gauge-{name}.txt"));
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

/// The binary's `--json` report on two prompts (in a file with a comment and a blank line),
/// with the flags in `flags` (split at spaces).
fn report_on(flags: &str) -> (serde_json::Value, report::Header) {
    let file = prompt_file("two", "# two prompts\nSay hello.\n\nCount to three.\n");
    let mut args: Vec<&str> = flags.split(' ').collect();
    args.extend(["--prompt-file", &file, "--json"]);
    json_report(BIN, &args)
}

#[test]
fn json_output_shape() {
    let _serial = one_at_a_time();
    let flags = "--model gemma3 --theta 1.3 --shifts -5,5 --max-new 8 --positions 300";
    let (v, h) = report_on(flags);
    assert_eq!(h.subject.build, BuildInfo::current().tag());
    assert!(h.controls.iter().all(|c| c.passed), "{:#?}", h.controls);
    assert_eq!(v["model"], "gemma3");
    assert_eq!(v["prompts"], 2);
    let rows = v["rows"].as_array().unwrap();
    // theta 1 and 0 are added: 2 thetas x 3 operators x 3 shifts.
    assert_eq!(rows.len(), 18);
    for r in rows {
        assert!(["sign", "subtractive", "normalized"].contains(&r["operator"].as_str().unwrap()));
        assert!([-5.0, 0.0, 5.0].contains(&r["shift"].as_f64().unwrap()));
        assert!([1.0, 1.3].contains(&r["theta"].as_f64().unwrap()));
        let ci = r["ci"].as_array().unwrap();
        let d = r["differing_share"].as_f64().unwrap();
        assert!(ci[0].as_f64().unwrap() <= d && d <= ci[1].as_f64().unwrap());
        assert!(r["distinct2"].is_f64() && r["rep_rate"].is_f64());
        if r["operator"] != "sign" || r["theta"] == 1.0 {
            assert_eq!(r["differing_share"], 0.0, "{r}");
        }
    }
    let tf = &v["teacher_forced"];
    assert_eq!(tf["positions"], 300);
    let tf_rows = tf["rows"].as_array().unwrap();
    assert_eq!(tf_rows.len(), 18);
    for r in tf_rows {
        assert!(r["flips"].as_u64().unwrap() <= r["positions"].as_u64().unwrap());
        assert!(r["predictor_agreement"].is_f64() && r["flip_rate"].is_f64());
    }
    assert!(tf["natural_gauge"]["seen_positive_share"].is_f64());
}

/// The same command twice prints the same bytes (the decoding speed goes to stderr). Decodes
/// SmolLM2 twice (one prompt, 4 tokens, 16 teacher-forced positions): a model run, so it is
/// here and not in `gauge_argv.rs`.
#[test]
fn same_command_prints_the_same_bytes() {
    let _serial = one_at_a_time();
    let file = prompt_file("twice", "Say hello.\n");
    let line = format!(
        "--model smollm2 --prompt-file {file} --theta 1.3 --shifts 5 --max-new 4 --positions 16"
    );
    let args: Vec<&str> = line.split(' ').collect();
    let run = || {
        let (code, stdout, stderr) = test_support::run_bin(BIN, &args);
        assert_eq!(code, 0, "{stderr}");
        assert!(stderr.contains(" tokens/s)"), "{stderr}");
        assert!(!stdout.contains("tokens/s"), "{stdout}");
        stdout
    };
    let first = run();
    assert!(first == run(), "two runs printed different bytes:\n{first}");
}

/// Teacher forcing on a short stretch of the text: theta 1 and the gauge-free operators never
/// flip, the sign branch does, and the predictor agrees with the chain wherever the chain's
/// margin is not within rounding.
#[test]
fn teacher_forced_short() {
    let _serial = one_at_a_time();
    let text = std::fs::read_to_string(models::teacher_text()).expect("run `make models` first");
    let m = load("smollm2");
    let r = repro_gauge::teacher_forced::run(&m, &text, 1024, &[1.0, 1.3], &[-5.0, 0.0, 5.0], 2)
        .unwrap();
    assert_eq!(r.normalized_stride, 6, "SmolLM2's 49,152 ids over 8,192");
    for c in &r.cells {
        if c.operator() == Operator::Normalized && c.theta != 1.0 {
            // Every 6th position of each 512-token chunk.
            assert!(
                c.positions >= 1024 / 6 && c.positions <= 1024 / 6 + 2,
                "{c:?}"
            );
        } else {
            assert_eq!(c.positions, 1024, "{c:?}");
        }
        if c.theta == 1.0 || c.operator() != Operator::Sign || c.shift == 0.0 {
            assert_eq!(c.flips, 0, "{c:?}");
        }
        assert_eq!(c.agree + c.knife_edge_disagreements, c.positions, "{c:?}");
        assert_eq!(c.knife_edge_flips, 0, "{c:?}");
    }
    assert!(r
        .cells
        .iter()
        .any(|c| c.operator() == Operator::Sign && c.flips > 0));
    test_support::assert_build_snapshot!("teacher_forced_short", r.to_text());
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let _serial = one_at_a_time();
    let empty = prompt_file("empty", "# nothing but a comment\n\n");
    let lines = [
        "--theta 0 | --theta -1.3 | --theta x | --shifts nan | --shifts 1,,2 | --shifts 1e9",
        "--prompt-file /no/such/prompts.txt | --max-new 0 | --max-new -3 | --max-new 600",
        "--model /no/such/model.gguf | --prompts 3 | --positions 0 | --positions 199999",
        "--models smollm2 | --teacher-text /no/such/text.md",
        "--theta 1.1,1.2,1.3,1.4,1.5,1.6,1.7,1.8,1.9,2 --shifts -9,-8,-7,-6,-5,-4,-3,-2,-1,1",
    ];
    let empty_file = format!("--prompt-file {empty}");
    let cases = lines
        .iter()
        .flat_map(|l| l.split(" | "))
        .chain([empty_file.as_str()]);
    for case in cases {
        assert_refused(BIN, &case.split(' ').collect::<Vec<_>>(), &[]);
    }
}

/// Forked sequences see exactly the rows of the same tokens decoded alone, bit for bit, when
/// both use plain attention, including a sequence forked from one that was itself forked on
/// the step before (the pattern where Gemma3's forked rows parted from lone ones under flash
/// attention, see `subject::MultiContext`).
#[test]
fn forked_rows_equal_lone_rows_bit_for_bit() {
    let _serial = one_at_a_time();
    let m = load("gemma3");
    let prompt = m
        .chat_ids("Write a Python function that adds two numbers.")
        .unwrap();
    let second_at = [vec![], vec![2], vec![2, 3], vec![2, 3, 4], vec![5]];
    let mut runs: Vec<Rule> = second_at.map(Rule::new).into();
    let out = harness::fork::run_forked(&m.model, &prompt, &mut runs, 12, 2).unwrap();
    assert_eq!(out.max_live, 5, "every run parts from the others");
    let plain = subject::Attention::Plain;
    let mut session =
        harness::Session::with_attention(&m.model, prompt.clone(), 12, plain, 2).unwrap();
    for (r, tokens) in runs.iter().zip(&out.tokens) {
        for t in 0..tokens.len() {
            let raw = session.logits_after(&tokens[..t]).unwrap();
            let bits: Vec<u32> = raw.iter().map(|z| z.to_bits()).collect();
            assert!(
                bits == r.rows[t],
                "run {:?}: row {t} differs from the lone decode",
                r.second_at
            );
        }
    }
}

/// The schema grammars as oracles of their own: llama.cpp parses every corpus grammar, a
/// valid answer passes token by token, and answers that break the schema are stopped.
#[test]
fn schema_grammars_accept_valid_and_stop_invalid_answers() {
    let path = models::resolve("smollm2").unwrap().path;
    let vocab = subject::Vocab::load(&path).unwrap();
    for (prompt, s) in json::corpus().unwrap() {
        subject::Sampler::grammar(&vocab, &s.grammar(), "root")
            .unwrap_or_else(|e| panic!("{prompt}: {e:#}"));
    }
    // Whether the grammar lets `text` through token by token, and then lets it end.
    let eog = {
        let m = load("smollm2");
        (0..m.model.n_vocab())
            .map(TokenId)
            .find(|&t| m.model.is_eog(t))
            .unwrap()
    };
    let passes = |schema: &str, text: &str| -> bool {
        let s = schema::Schema::parse(schema).unwrap();
        let mut g = subject::Sampler::grammar(&vocab, &s.grammar(), "root").unwrap();
        for t in vocab.tokenize(text).unwrap().into_iter().chain([eog]) {
            let mut one = subject::Candidates::new([(t, 0.0f32)]);
            g.apply(&mut one).unwrap();
            if one.entries[0].logit == f32::NEG_INFINITY {
                return false;
            }
            if t != eog {
                g.accept(t).unwrap();
            }
        }
        true
    };
    let obj = "{name:string,age:integer,tags:array,owner:object}";
    // (schema, answer, whether it passes, why)
    let cases = [
        (obj, "{\n  \"name\": \"Ada\",\n  \"age\": 36,\n  \"tags\": [\"x\", 2, {\"k\": true}],\n  \"owner\": {\"id\": 1.5}\n}", true, "valid"),
        (obj, "{\"name\": \"Ada\", \"age\": 36, \"tags\": []", false, "unfinished: no end yet"),
        (obj, "{\"name\": \"Ada\", \"tags\": [], \"age\": 36}", false, "keys out of order"),
        (obj, "{\"name\": \"Ada\", \"age\": 3.5", false, "a number where an integer belongs"),
        (obj, "{\"name\": \"Ada\", \"age\": -0, \"tags\": [], \"owner\": {}}", false, "-0 reads as a float"),
        (obj, "{\"name\": Ada", false, "an unquoted string"),
        ("{n:integer}", "{\"n\": 0}", true, "zero"),
        ("{n:integer}", "{\"n\": -12}", true, "a negative integer"),
        ("[{t:string}]", "[{\"t\": \"a\"}, {\"t\": \"b\"}]", true, "an array of objects"),
        ("[{t:string}]", "[]", false, "an empty array"),
        ("[boolean]", "[true, false]", true, "an array of booleans"),
        ("[boolean]", "[true, 1]", false, "a number among booleans"),
    ];
    for (schema, text, want, why) in cases {
        assert_eq!(passes(schema, text), want, "{schema} {text:?}: {why}");
    }
}

/// Structural positions along grammar references, three pairs on SmolLM2: every control of the
/// measurement passes and the table is pinned per build.
#[test]
fn structural_subset() {
    let _serial = one_at_a_time();
    let corpus = json::corpus().unwrap();
    assert!(
        corpus.len() >= 100,
        "the corpus has at least 100 prompt/schema pairs"
    );
    let r = repro_gauge::reference::run(&load("smollm2"), &corpus[..3], 2).unwrap();
    let controls = r.controls();
    assert!(controls.iter().all(|c| c.passed), "{controls:#?}");
    test_support::assert_build_snapshot!("structural_subset", r.to_text());
}

/// F4 through candle: its `apply_repeat_penalty` in the sign slot, handed `z + c`, through the
/// same value check and planted controls as llama.cpp's penalties. Two prompts are too few for
/// the rule's 95% interval: the report takes no verdict of its own (`undecided`) and says what
/// it shows in a note, candle's penalty is the sign-branched arithmetic bit for bit; the
/// exact-zero boundary is a note with its input, not a verdict row.
#[cfg(feature = "candle")]
#[test]
fn candle_penalty_in_the_sign_slot() {
    let _serial = one_at_a_time();
    let (v, h) = report_on("--engine candle --theta 1.3 --shifts -5,5 --max-new 16");
    assert_eq!(h.subject.engine, "candle");
    assert_eq!(h.subject.build, "candle-0.11.1");
    assert!(h.controls.iter().all(|c| c.passed), "{:#?}", h.controls);
    let sign_rows: Vec<&serde_json::Value> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["operator"] == "sign")
        .collect();
    assert!(!sign_rows.is_empty());
    for r in sign_rows {
        assert_eq!(r["implementation"], "candle apply_repeat_penalty", "{r}");
    }
    assert!(
        h.rows.is_empty(),
        "the zero boundary is a note: {:?}",
        h.rows
    );
    assert_eq!(h.verdict, report::Verdict::Undecided, "{}", h.evidence);
    assert!(
        h.evidence.starts_with("no verdict of its own: 2 prompts"),
        "{}",
        h.evidence
    );
    let notes = v["notes"].as_array().unwrap();
    assert_eq!(notes.len(), 2, "{notes:?}");
    // What the run shows: candle's penalty is the sign-branched arithmetic, bit for bit.
    assert_eq!(
        notes[0]["name"],
        "penalty-gauge-dependence-candle-arithmetic"
    );
    assert_eq!(notes[0]["same_arithmetic"], true, "{}", notes[0]);
    assert_eq!(notes[0]["seen_values_differing"], 0, "{}", notes[0]);
    assert!(notes[0]["seen_values_compared"].as_u64().unwrap() > 0);
    assert_eq!(notes[1]["name"], "penalty-gauge-dependence-zero-boundary");
    // Both rules leave 0 and -0 as they are: the engines agree bit for bit there.
    let note = notes[1]["note"].as_str().unwrap();
    assert!(note.contains("logits [0.0, -0.0"), "{note}");
    assert!(note.contains("bit for bit the same"), "{note}");
    assert_eq!(notes[1]["engine"][1], "-0.0", "{}", notes[1]);
    // Two prompts: the percentiles are reported, never as a 95% interval.
    let bootstrap = &v["design"]["bootstrap"];
    assert!(bootstrap["level"].is_null(), "{bootstrap}");
    assert_eq!(bootstrap["prompts"], 2);
    assert!(h.evidence.contains("not a 95% interval"), "{}", h.evidence);
    assert!(!h.evidence.contains("95% percentile"), "{}", h.evidence);
}

/// `--tables` on a short budget (SmolLM2, 64 teacher-forced positions, one JSON prompt, one
/// grammar pair): it writes the tables and their two charts under `tables/`, and every check
/// passes and is printed.
#[test]
fn tables_are_their_own_run() {
    let _serial = one_at_a_time();
    let scratch = test_support::Scratch::new("gauge-tables");
    let results = scratch.folder("results");
    let line = format!(
        "--tables --models smollm2 --theta 1.3 --shifts -5,5 --positions 64 --json-prompts 1 --structural-pairs 1 --results {results} --json"
    );
    let args: Vec<&str> = line.split(' ').collect();
    let (code, stdout, stderr) = test_support::run_bin(BIN, &args);
    assert_eq!(code, 0, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let tag = BuildInfo::current().tag().to_string();
    assert_eq!(v["build"], tag.as_str());
    assert_eq!(v["teacher_forced"][0]["positions"], 64);
    assert_eq!(v["json_corpus"]["prompts_count"], 1);
    assert_eq!(v["structural"][0]["pairs"], 1);
    let checks = v["checks"].as_array().unwrap();
    // The theta-1 teacher-forced check, the grammar walks' two planted stages and their two
    // oracle checks.
    let kinds: Vec<&str> = checks.iter().map(|c| c["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "oracle-check",
            "positive",
            "negative",
            "oracle-check",
            "oracle-check"
        ],
        "{checks:#?}"
    );
    assert!(checks.iter().all(|c| c["passed"] == true), "{checks:#?}");
    let dir = std::path::Path::new(&results).join(repro_gauge::tables::DIR);
    for stem in ["gauge", "json-valid", "json-structure"] {
        let ext = if stem == "gauge" { "json" } else { "svg" };
        assert!(dir.join(format!("{stem}.{tag}.{ext}")).is_file(), "{stem}");
    }
    let written = std::fs::read_to_string(dir.join(format!("gauge.{tag}.json"))).unwrap();
    assert_eq!(written, stdout, "the file is what the run printed");
}
