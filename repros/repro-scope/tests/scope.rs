//! F3 on whichever build this test binary links (b11429 from the root workspace, b10200 from the
//! workspace `buildgen` generates for it under target/builds/0.1.154/), with SmolLM2 from `make
//! models`. Greedy decoding on a fixed thread count is deterministic on this machine kind, so
//! trajectories and the single-vector table are pinned per build.

use oracle::scope::Scope;
use report::Header;
use report::Verdict;
use repro_scope::cli;
use repro_scope::controls::{PlantedRuns, SamplerRuns};
use repro_scope::decode::ScopeDecoder;
use repro_scope::run::{self, LoadedModel};
use repro_scope::scope::{PlantedScope, ScopeSpec};
use repro_scope::sweep::{self, SweepPlan};
use subject::BuildInfo;
use test_support::{assert_refused, one_at_a_time, run_bin};

fn smollm2() -> LoadedModel {
    LoadedModel::load(models::resolve("smollm2").expect("run `make models` first")).unwrap()
}

/// Pins F3 (a difference between penalty scopes, live on both builds). Upstream: no upstream report found (searched the ggml-org/llama.cpp issues and pull requests, 2026-11-30).
#[test]
fn published_prompt_with_cross_checks() {
    let _serial = one_at_a_time();
    let m = smollm2();
    let cfg = cli::published_config();
    let r = run::run(&m, &cfg).unwrap();
    assert_eq!(
        r.prompt_ids.len(),
        39,
        "the published run has 39 prompt tokens"
    );
    let report = r.report();
    assert!(
        report.controls().iter().all(|c| c.passed),
        "{}",
        report.to_text()
    );
    for t in &r.trajectories {
        assert_eq!(t.checks.twin.steps, t.tokens.len(), "{}", t.scope);
        assert_eq!(t.checks.twin.mismatching_steps, 0, "{}", t.scope);
        // The planted penalties ran beside every oracle scope at every step: the exact one
        // agreed with the oracle throughout.
        if let ScopeSpec::Oracle(_) = t.scope {
            assert_eq!(t.checks.planted_exact.steps, t.tokens.len(), "{}", t.scope);
            assert_eq!(t.checks.planted_exact.mismatching_steps, 0, "{}", t.scope);
            assert_eq!(t.checks.planted_wrong.steps, t.tokens.len(), "{}", t.scope);
        }
    }
    // The wrong one (theta one f32 step higher) is caught at every step of all: every step
    // penalizes the prompt's ids, and one rounding off in any of them is a mismatch.
    let all = &r.trajectories[0].checks;
    assert_eq!(all.planted_wrong.mismatching_steps, all.steps);
    // llama.cpp's own window of 64 and the oracle's last-64 are the same scope.
    let by = |s: &str| {
        let spec = ScopeSpec::parse(s).unwrap();
        r.trajectories.iter().find(|t| t.scope == spec).unwrap()
    };
    assert_eq!(by("64").tokens, by("llama:64").tokens);
    // The verdict rests on llama.cpp's own sampler alone: llama:64 against all.
    assert_eq!(r.measured(), run::measured([by("llama:64")]));
    // The planted penalties samplers in its slot, judged by the same rule: the whole-sequence
    // one decodes all's tokens, the windowed one parts; both samplers' logits are the oracle's
    // at every step.
    let s = r
        .samplers
        .as_ref()
        .expect("llama.cpp runs the planted samplers");
    assert_eq!(SamplerRuns::reads(&s.whole), Verdict::Absent);
    assert_eq!(SamplerRuns::reads(&s.window), Verdict::Present);
    assert_eq!(s.whole.tokens, r.all().tokens);
    for t in [&s.whole, &s.window] {
        assert_eq!(t.checks.twin.steps, t.tokens.len(), "{}", t.scope);
        assert_eq!(t.checks.twin.mismatching_steps, 0, "{}", t.scope);
        assert_eq!(t.checks.greedy_mismatches, 0, "{}", t.scope);
    }
    test_support::assert_build_snapshot!("published", report.to_text());
}

#[test]
fn sweep_subset() {
    let _serial = one_at_a_time();
    let m = smollm2();
    let corpus = sweep::corpus();
    assert!(corpus.len() >= 10);
    let plan = SweepPlan {
        prompts: ["code", "json"]
            .iter()
            .map(|kind| corpus.iter().find(|(k, _)| k == kind).unwrap().clone())
            .collect(),
        windows: vec![16, 64],
        max_new: 48,
    };
    let s = sweep::run(&m, &plan, 1.3, 2).unwrap();
    assert!(s.checks_pass(), "{}", s.to_text());
    for r in &s.rows {
        // Every window ran with its llama.cpp twin at every step.
        for t in &r.trajectories {
            assert_eq!(t.checks.twin.steps, t.tokens.len(), "{}", t.scope);
            assert_eq!(t.checks.planted_exact.steps, t.tokens.len(), "{}", t.scope);
        }
    }
    let report = serde_json::json!({"build": "test", "model": "test", "sweep": s});
    let svg = repro_scope::plot::svg(&report).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert_eq!(report::chart::check(&svg), Vec::<String>::new());
    test_support::assert_build_snapshot!("sweep_subset", s.to_text());
}

const BIN: &str = env!("CARGO_BIN_EXE_repro-scope");

/// A short run on one small prompt: `--prompt "Name three colours." --max-new N`, then `rest`.
fn colours<'a>(max_new: &'a str, rest: &[&'a str]) -> Vec<&'a str> {
    let head = ["--prompt", "Name three colours.", "--max-new", max_new];
    head.iter().chain(rest).copied().collect()
}

#[test]
fn json_shape_and_windows_longer_than_the_sequence() {
    let _serial = one_at_a_time();
    let scopes = ["all", "4", "gen:4", "llama:4", "100000", "llama:5000"];
    let list = scopes.join(",");
    let args = colours("12", &["--scopes", &list, "--json"]);
    let (code, stdout, stderr) = run_bin(BIN, &args);
    assert_eq!(code, 0, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let h = Header::from_json(&v).unwrap();
    assert_eq!(h.subject.build, BuildInfo::current().tag());
    assert_eq!(v["model"], "smollm2");
    assert!(v["prompt_tokens"].as_u64().unwrap() > 0);
    for s in scopes {
        let t = &v["scopes"][s];
        assert!(t["tokens"].is_array() && t["text"].is_string(), "{s}");
        assert!(t["stopped_at"].is_u64(), "{s}");
        assert!(t["stop"] == "eos" || t["stop"] == "limit", "{s}");
        assert_eq!(t["llama_twin"]["mismatching_steps"], 0, "{s}");
    }
    assert!(v["scopes"]["all"]["diverges_at"].is_null());
    // Windows longer than the sequence are the whole sequence.
    assert!(v["scopes"]["100000"]["diverges_at"].is_null());
    assert!(v["scopes"]["llama:5000"]["diverges_at"].is_null());
    // Same command, same bytes.
    assert_eq!(run_bin(BIN, &args).1, stdout);
    // The planted penalties samplers ran in llama.cpp's slot, each read by the verdict's rule.
    for k in ["whole_sequence", "last_window"] {
        let run = &v["planted_samplers"][k];
        assert!(run["rule_reads"].is_string(), "{k}: {run}");
        assert_eq!(
            run["logits_vs_oracle"]["mismatching_steps"], 0,
            "{k}: {run}"
        );
    }
    // Without a llama:N scope nothing the verdict judges ran: no verdict of its own.
    let args = colours("4", &["--scopes", "all,4", "--json"]);
    let (code, stdout, stderr) = run_bin(BIN, &args);
    assert_eq!(code, 0, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["measured"], "undecided", "{}", v["evidence"]);
    assert!(v["evidence"]
        .as_str()
        .unwrap()
        .contains("no llama:N scope ran"));
}

/// The same command twice prints the same bytes, in text (the JSON form is compared in
/// `json_shape_and_windows_longer_than_the_sequence`). Decodes SmolLM2 twice (8 tokens per
/// scope): a model run, so it is here and not in `scope_argv.rs`.
#[test]
fn same_command_prints_the_same_bytes() {
    let _serial = one_at_a_time();
    let args = colours("8", &["--scopes", "all,4,gen:4,llama:4"]);
    test_support::assert_same_bytes_twice(BIN, &args);
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let _serial = one_at_a_time();
    let corrupt_dir = std::env::temp_dir().join("sampler-audit-scope-corrupt");
    std::fs::create_dir_all(&corrupt_dir).unwrap();
    std::fs::write(
        corrupt_dir.join("smollm2.gguf"),
        b"GGUF\x03\0\0\0 truncated",
    )
    .unwrap();
    let garbage = corrupt_dir.join("garbage.gguf");
    std::fs::write(&garbage, vec![7u8; 4096]).unwrap();
    let garbage = garbage.to_string_lossy().into_owned();
    let corrupt = corrupt_dir.to_string_lossy().into_owned();
    let corrupt_env = [("MODELS_CACHE", corrupt.as_str())];
    // (arguments, whether MODELS_CACHE names the corrupt folder, what the error line must say)
    let cases: [(&[&str], bool, &str); 13] = [
        (&["--model", "nope"], false, "neither"),
        (&["--model", "/nonexistent/model.gguf"], false, "neither"),
        (&["--model", &garbage], false, "could not load"),
        (&["--model", "smollm2"], true, "make models"),
        (&["--model", "gemma3"], true, "make models"),
        (&["--penalty", "-1"], false, "--penalty"),
        (&["--penalty", "nan"], false, "--penalty"),
        (&["--max-new", "0"], false, "--max-new"),
        (&["--scopes", "64,foo"], false, "scope"),
        (&["--scopes", "llama:-1"], false, "scope"),
        (&["--threads", "0"], false, "--threads"),
        (&["--prompt", " "], false, "--prompt"),
        (&["--no-such-flag"], false, ""),
    ];
    for (args, corrupt_cache, needle) in cases {
        let env: &[(&str, &str)] = if corrupt_cache { &corrupt_env } else { &[] };
        let stderr = assert_refused(BIN, args, env);
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

/// The divergence detector on the planted scopes, through the same decoder as every scope: the
/// scope that drops the id deciding a step must be flagged at exactly that step, and the scope
/// identical to all never. Disabling the detector fails this test.
#[test]
fn divergence_detector_flags_a_planted_dropped_id_and_not_a_copy_of_all() {
    let _serial = one_at_a_time();
    let m = smollm2();
    let prompt = m.chat_ids("List ten fruits that are red.").unwrap();
    let mut dec = ScopeDecoder::new(std::sync::Arc::clone(&m.model), prompt, 1.3, 48, 2).unwrap();
    let all = dec.greedy(ScopeSpec::Oracle(Scope::All), 48, None).unwrap();
    let (step, id) = all.first_mattering.expect("some seen id decides a step");
    let planted = PlantedRuns::run(&mut dec, &all, 48).unwrap();
    assert!(planted.drop_one_flagged(), "{}", planted.drop_one_detail());
    assert!(planted.quiet_unflagged(), "{}", planted.quiet_detail());
    // The quiet scope really differs from all: its penalized logits are not all's.
    let (quiet, gap) = planted.quiet.expect("a prompt id stays below the choice");
    assert!(dec.prompt.contains(&quiet) && gap < 0.0);
    // The penalty comparison passed the planted exact penalty and caught the planted one with
    // theta one f32 step higher beside all.
    assert_eq!(all.checks.planted_exact.mismatching_steps, 0);
    assert!(all.checks.planted_wrong.mismatching_steps > 0);
    let d = planted.drop_one.unwrap().divergence.unwrap();
    assert_eq!((d.step, d.token), (step, id));
    assert_eq!(d.causes.len(), 1);
    assert_eq!(d.causes[0].penalized_by, "reference");
    // Dropping an id that never occurs leaves the scope equal to all: never flagged.
    let unseen = (0..m.model.n_vocab())
        .map(oracle::TokenId)
        .find(|t| !dec.prompt.contains(t) && !all.tokens.contains(t))
        .unwrap();
    let quiet = dec
        .greedy(
            ScopeSpec::Planted(PlantedScope::DropOne(unseen)),
            48,
            Some(&all),
        )
        .unwrap();
    assert!(quiet.divergence.is_none());
}

/// F3 through candle: its own decoder, penalty and greedy choice on the same file and prompt
/// ids, the same keys as llama.cpp's report, the cross-engine comparison beside it, and the
/// text pinned (a change in what candle decodes is a reviewed snapshot change).
#[cfg(feature = "candle")]
#[test]
fn candle_decodes_the_same_scopes_with_its_own_penalty() {
    let _serial = one_at_a_time();
    let common = ["--vector-at", "8", "--scopes", "all,4,16"];
    let llama_args = colours("24", &[&common[..], &["--json"]].concat());
    // One candle run with --audit writes the JSON and the text from one report value.
    let dir = std::env::temp_dir().join(format!("scope-candle-{}", std::process::id()));
    let results = dir.display().to_string();
    let candle = ["--engine", "candle", "--audit", "--results", &results];
    let candle_args = colours("24", &[&common[..], &candle].concat());
    let (code, llama_out, err) = run_bin(BIN, &llama_args);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = run_bin(BIN, &candle_args);
    assert_eq!(code, 0, "{err}");
    let candle_out = std::fs::read_to_string(dir.join("scope-smollm2.candle-0.11.1.json")).unwrap();
    let text = std::fs::read_to_string(dir.join("scope-smollm2.candle-0.11.1.txt")).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let l: serde_json::Value = serde_json::from_str(&llama_out).unwrap();
    let c: serde_json::Value = serde_json::from_str(&candle_out).unwrap();
    let h = Header::from_json(&c).unwrap();
    assert_eq!(h.subject.engine, "candle");
    assert_eq!(h.subject.build, "candle-0.11.1");
    assert!(h.controls.iter().all(|x| x.passed), "{candle_out}");
    // Every key of llama.cpp's report, at the top and per scope, but its notes: the oracle's
    // scopes are a note on llama.cpp (its verdict rests on llama:N), while candle's verdict
    // rests on candle's own penalty in every scope, which leaves nothing to note.
    for k in l.as_object().unwrap().keys().filter(|k| *k != "notes") {
        assert!(c.get(k).is_some(), "candle's report lacks '{k}'");
    }
    assert_eq!(l["prompt_ids"], c["prompt_ids"], "the same prompt ids");
    for s in ["all", "4", "16"] {
        for k in l["scopes"][s].as_object().unwrap().keys() {
            assert!(c["scopes"][s].get(k).is_some(), "scope {s} lacks '{k}'");
        }
        // candle's own penalty ran at every step and agreed with the oracle.
        let twin = &c["scopes"][s]["engine_twin"];
        assert!(twin["steps"].as_u64().unwrap() > 0, "{twin}");
        assert_eq!(twin["mismatching_steps"], 0, "{twin}");
    }
    // The comparison names, per scope, where the engines part or that they never do.
    let cross = c["cross_engine"].as_array().unwrap();
    assert_eq!(cross.len(), 3);
    for p in cross {
        assert!(p["max_logit_diff"].as_f64().unwrap() >= 0.0, "{p}");
        assert!(p["shared_prefix"].is_u64(), "{p}");
    }
    insta::assert_snapshot!("candle_short", text);
    // llama:N names llama.cpp's chain: refused with another engine.
    test_support::assert_refused(
        BIN,
        &["--engine", "candle", "--scopes", "all,llama:64"],
        &[],
    );
}
