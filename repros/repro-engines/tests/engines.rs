//! F7 on the engines this test binary links: llama.cpp (b11429 from the root workspace, or
//! b10200 from the workspace `buildgen` generates for it under target/builds/0.1.154/) and, on
//! the default build, candle 0.11.1. Each engine's audit table is pinned, so an upstream change
//! in what an engine draws shows up as a reviewed snapshot change; the one-input interface
//! keeps its keys and its refusals.

use report::Verdict;
use test_support::{assert_refused, json_report, run_bin};

const BIN: &str = env!("CARGO_BIN_EXE_repro-engines");

/// A command line written as one string, split at each space (`"--logits "` ends in an empty
/// argument).
fn args(line: &str) -> Vec<&str> {
    line.split(' ').collect()
}

/// One grid audit of `engine` into a temporary folder: the JSON and the text.
fn audit(engine: &str) -> (serde_json::Value, String, String) {
    let dir = std::env::temp_dir().join(format!("engines-test-{engine}-{}", std::process::id()));
    let results = dir.to_str().unwrap();
    let (code, _, err) = run_bin(BIN, &["--engine", engine, "--audit", "--results", results]);
    assert_eq!(code, 0, "{err}");
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .expect("a results file");
    let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
    let json = std::fs::read_to_string(&file).unwrap();
    let text = std::fs::read_to_string(file.with_extension("txt")).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    (serde_json::from_str(&json).unwrap(), text, stem)
}

fn check_audit(json: &serde_json::Value, text: &str, engine_label: &str) {
    let header = report::Header::from_json(json).unwrap();
    assert_eq!(header.subject.engine, engine_label);
    assert!(header.controls.iter().all(|c| c.passed), "{text}");
    let cases = json["cases"].as_array().unwrap();
    assert_eq!(cases.len(), repro_engines::vectors::grid().len());
    // A split tie class is judged per call where the engine shows each call's survivors
    // (llama.cpp's chain), across calls where it shows only the draw (candle); no rule is
    // named where nothing is split.
    let rule = if engine_label == "candle" {
        "across_calls"
    } else {
        "per_call"
    };
    let mut split = 0;
    for c in cases.iter().filter(|c| c.get("not_offered").is_none()) {
        let classes = c["oracle"]["classes"].as_array().unwrap();
        let is_split = classes
            .iter()
            .any(|k| k["kept"].as_u64().unwrap() < k["ids"].as_array().unwrap().len() as u64);
        if is_split {
            split += 1;
            assert_eq!(c["tie_rule"], rule, "{}", c["input"]);
        } else {
            assert!(c.get("tie_rule").is_none(), "{}", c["input"]);
        }
    }
    assert!(split >= 5, "only {split} rows split a tie");
    // Each planted sampler's power is stated, and each registered control reached the power
    // a control needs and was caught; the 1-point shift onto the smallest survivor is among
    // those.
    let planted = json["planted"].as_array().unwrap();
    assert_eq!(planted.len(), repro_engines::audit::PLANTED_ROWS.len());
    for p in planted {
        if p["role"] == "control" {
            let rate = p["power"]["rate"].as_f64().unwrap();
            assert!(rate >= repro_engines::audit::CONTROL_POWER, "{p}");
            assert_eq!(p["verdict"], "present", "{p}");
        } else {
            assert_eq!(p["role"], "reported", "{p}");
        }
    }
    assert!(planted.iter().any(|p| p["input"]
        == "--vector published --sampling all --draws 20000 --seed 1"
        && p["sampler"]
            .as_str()
            .unwrap()
            .starts_with("planted: 1 point")
        && p["verdict"] == "present"));
    // Every row names its input, and a present row either drew outside the oracle's set or
    // failed the test at the stated level. Every row states its power against the named
    // effect first, and a row below the power it needs says so.
    for (name, verdict, evidence) in &header.rows {
        assert!(evidence.contains("--sampling"), "{name}: {evidence}");
        let row_of = |c: &serde_json::Value| {
            let (vector, sampling) = (c["vector"].as_str(), c["sampling"].as_str());
            format!("draw-conformance-{}-{}", vector.unwrap(), sampling.unwrap())
        };
        let case = cases.iter().find(|c| row_of(c) == *name).unwrap();
        let power = &case["power"];
        assert_eq!(power["effect"], detector::power::ONE_POINT_EFFECT, "{name}");
        assert_eq!(power["draws"], case["draws"], "{name}");
        let rate = power["power"].as_f64().unwrap();
        assert!(
            evidence.starts_with(&format!("power {rate:.3}")),
            "{name}: {evidence}"
        );
        let enough = rate >= detector::power::ENOUGH_POWER;
        assert_eq!(power["enough"], enough, "{name}");
        let short = format!("< {} against", detector::power::ENOUGH_POWER);
        assert_eq!(evidence.contains(&short), !enough, "{name}: {evidence}");
        if *verdict == Verdict::Present {
            let outside = !case["outside"].as_array().unwrap().is_empty()
                || !case["overfull"].as_array().unwrap().is_empty();
            let rejected = case["p_value"]
                .as_f64()
                .is_some_and(|p| p < json["alpha_each"].as_f64().unwrap());
            assert!(outside || rejected, "{name}: {case}");
        }
    }
}

#[test]
fn llama_cpp_draws_follow_the_oracle_and_the_table_is_pinned() {
    let (json, text, stem) = audit("llama");
    let build = subject::BuildInfo::current();
    assert_eq!(stem, format!("engines.{}", build.tag()));
    check_audit(&json, &text, "llama.cpp");
    test_support::assert_build_snapshot!("audit_llama", text);
}

#[cfg(feature = "candle")]
#[test]
fn candle_draws_are_judged_by_the_same_detector_and_the_table_is_pinned() {
    let (json, text, stem) = audit("candle");
    assert_eq!(stem, "engines.candle-0.11.1");
    check_audit(&json, &text, "candle");
    // candle's TopKThenTopP keeps what top-k then top-p (renormalized) must cut.
    let header = report::Header::from_json(&json).unwrap();
    let row = header
        .rows
        .iter()
        .find(|r| r.0 == "draw-conformance-published-top_k=3,top_p=0.9")
        .unwrap();
    assert_eq!(row.1, Verdict::Present, "{}", row.2);
    // min_p is not one of candle's configurations: listed, not drawn, not a row.
    assert!(text.contains("not offered"), "{text}");
    insta::assert_snapshot!("audit_candle", text);
}

#[cfg(feature = "candle")]
#[test]
fn the_interface_example_prints_the_header_and_the_draw_keys() {
    let example = "--logits 3,2,1,0 --sampling top_k=3,top_p=0.9 --draws 20000 --seed 1";
    let (v, h) = json_report(BIN, &args(&format!("--engine candle {example} --json")));
    assert_eq!(h.subject.engine, "candle");
    for key in ["engine", "support", "oracle", "p_value", "verdict"] {
        assert!(v.get(key).is_some(), "no '{key}' in {v}");
    }
    assert_eq!(h.verdict, Verdict::Present);
    assert_eq!(v["outside"], serde_json::json!([2]));
    assert_refused(BIN, &["--engine", "candle", "--sampling", "min_p=0.1"], &[]);
}

#[test]
fn llama_cpp_offers_min_p_and_refuses_bad_input_in_one_line() {
    let line = "--logits 3,2,1,0 --sampling min_p=0.1 --draws 5000 --json";
    let (v, h) = json_report(BIN, &args(line));
    assert_eq!(h.subject.engine, "llama.cpp");
    assert!(v["support"].as_object().unwrap().len() <= 3, "{v}");
    for bad in [
        "--logits 1,nan",
        "--logits -inf,-inf",
        "--logits 1,inf",
        "--logits ",
        "--sampling top_p=1.5",
        "--sampling xtc=0.1",
        "--draws 0",
        "--draws -3",
        "--seed 4294967296",
        "--engine vllm",
        "--vector nope",
    ] {
        assert_refused(BIN, &args(bad), &[]);
    }
}
