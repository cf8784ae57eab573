//! F4 on whichever build this test binary links (the root workspace: 0.1.161; legacy/: 0.1.154),
//! with the models from `make models`. Snapshots are per build.

use oracle::gauge::{self, Operator};
use oracle::TokenId;
use report::Header;
use repro_gauge::shift::{self, GaugeConfig, Implementation};
use repro_gauge::{json, schema};
use std::collections::BTreeSet;
use std::process::Command;
use subject::BuildInfo;

/// Decoding spins two ggml threads; two decoders at once on a 2-core machine slow each other
/// down many times over, so every test that decodes holds this.
static DECODER: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    DECODER.lock().unwrap_or_else(|e| e.into_inner())
}

fn slug() -> String {
    format!("b{}", BuildInfo::current().slug())
}

fn load(name: &str) -> harness::LoadedModel {
    harness::LoadedModel::load(models::resolve(name).expect("run `make models` first")).unwrap()
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

#[test]
fn short_gauge_run_on_both_models() {
    let _serial = one_at_a_time();
    let cfg = GaugeConfig {
        sampler: shift::SamplerKind::Builtin,
        prompt: "Name three colours.".into(),
        thetas: vec![1.3],
        shifts: vec![-5.0, 5.0],
        max_new: 16,
        threads: 2,
    };
    let mut text = String::new();
    for name in ["smollm2", "gemma3"] {
        let r = shift::run(&load(name), &cfg).unwrap();
        assert_eq!(
            r.sign_mismatches, 0,
            "llama.cpp's sign branch must equal the oracle's"
        );
        text.push_str(&r.to_text());
    }
    insta::assert_snapshot!(format!("gauge_short_{}", slug()), text);
}

#[test]
fn ledger_normalized_never_flips_through_a_real_chain() {
    let _serial = one_at_a_time();
    let cfg = GaugeConfig {
        sampler: shift::SamplerKind::Ledger,
        prompt: "Name three colours.".into(),
        thetas: vec![1.3],
        shifts: vec![-5.0, -1.0, 2.0, 5.0],
        max_new: 16,
        threads: 2,
    };
    for name in ["smollm2", "gemma3"] {
        let r = shift::run(&load(name), &cfg).unwrap();
        // Measured through the chain in f32, not by construction.
        assert!(r
            .rows
            .iter()
            .filter(|x| x.operator() == Operator::Normalized)
            .all(|x| x.implementation == Implementation::LedgerNormalized));
        assert_eq!(r.flagged(Operator::Normalized), 0, "{}", r.to_text());
        // The ledger's default mode is bit-identical to llama.cpp's, so the sign branch still
        // equals the oracle's at every step.
        assert_eq!(r.sign_mismatches, 0);
    }
}

/// The flip detector on the planted case, through the same `measure` and the same f32 chain
/// path as the subject: our sign-branched sampler must flip, our normalized one must not, and
/// llama.cpp's stage on the same case flips exactly like ours. Disabling the detector fails
/// this test.
#[test]
fn flip_detector_fires_on_the_planted_case_and_not_on_a_gauge_free_sampler() {
    let run = |imp| {
        shift::measure(
            &mut shift::planted_source(),
            imp,
            1.3,
            &[-5.0, 5.0],
            4,
            false,
        )
        .unwrap()
        .0
    };
    let ours = run(Implementation::LedgerSign);
    assert!(ours
        .iter()
        .all(|r| r.flips == 4 && r.diverges_at == Some(0)));
    let theirs = run(Implementation::LlamaSign);
    assert_eq!(
        ours.iter()
            .map(|r| (r.flips, r.diverges_at))
            .collect::<Vec<_>>(),
        theirs
            .iter()
            .map(|r| (r.flips, r.diverges_at))
            .collect::<Vec<_>>()
    );
    for gauge_free in [
        Implementation::LedgerNormalized,
        Implementation::PlantedSubtractive,
    ] {
        assert!(run(gauge_free)
            .iter()
            .all(|r| r.flips == 0 && r.diverges_at.is_none()));
    }
    // The sign comparison catches a sampler that is not the sign branch, and passes ours.
    let compared = |imp| {
        shift::measure(&mut shift::planted_source(), imp, 1.3, &[5.0], 4, true)
            .unwrap()
            .1
    };
    assert!(compared(Implementation::PlantedSubtractive) > 0);
    assert_eq!(compared(Implementation::LedgerSign), 0);
    assert!(shift::planted_controls().unwrap().iter().all(|c| c.passed));
}

#[test]
fn json_subset() {
    let _serial = one_at_a_time();
    let corpus = json::corpus().unwrap();
    assert!(corpus.len() >= 50, "the corpus has at least 50 prompts");
    let r = json::run(&load("smollm2"), &corpus[..3], 256, 2).unwrap();
    let t = r.totals();
    assert_eq!(t.len(), json::Variant::all().len());
    assert!(t.iter().all(|x| x.schema_valid <= x.parses));
    insta::assert_snapshot!(format!("json_subset_{}", slug()), r.to_text());
}

#[test]
fn every_corpus_schema_parses() {
    for (prompt, s) in json::corpus().unwrap() {
        assert!(!prompt.is_empty());
        assert!(!matches!(s, schema::Schema::Object(ref f) if f.is_empty()));
    }
}

fn run_bin(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_repro-gauge"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn json_output_shape() {
    let _serial = one_at_a_time();
    let (code, stdout, stderr) = run_bin(&[
        "--model",
        "gemma3",
        "--prompt",
        "Say hello.",
        "--theta",
        "1.3",
        "--shifts",
        "-5,5",
        "--max-new",
        "8",
        "--json",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let h = Header::from_json(&v).unwrap();
    assert_eq!(h.subject.build, BuildInfo::current().tag());
    assert!(h.controls.iter().all(|c| c.passed));
    assert_eq!(v["model"], "gemma3");
    assert!(v["positive_share"].is_f64());
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 6);
    for r in rows {
        assert!(["sign", "subtractive", "normalized"].contains(&r["operator"].as_str().unwrap()));
        assert!(r["shift"] == -5.0 || r["shift"] == 5.0);
        assert!(r["flip_rate"].is_f64() && r["differing_share"].is_f64());
        if r["operator"] != "sign" {
            assert_eq!(r["flip_rate"], 0.0);
            assert!(r["diverges_at"].is_null());
            assert_eq!(r["zero_by_construction"], true);
        }
    }
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let _serial = one_at_a_time();
    for args in [
        &["--theta", "0"][..],
        &["--theta", "-1.3"],
        &["--theta", "x"],
        &["--shifts", "nan"],
        &["--shifts", "1,,2"],
        &["--shifts", "1e9"],
        &["--prompt", ""],
        &["--max-new", "0"],
        &["--model", "/no/such/model.gguf"],
        &["--json-prompts", "3"],
    ] {
        let (code, stdout, stderr) = run_bin(args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{args:?}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("error"), "{args:?}: {stderr}");
    }
}
