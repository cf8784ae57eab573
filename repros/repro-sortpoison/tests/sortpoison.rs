//! F2 on whichever build this test binary links (b11429 from the root workspace, b10200 from the
//! workspace `buildgen` generates for it under target/builds/0.1.154/).
//! Snapshots are named per build, so a change upstream shows up as a reviewed snapshot diff.

use oracle::stage::Stage;
use oracle::token_ids as ids;
use oracle::TokenId;
use repro_sortpoison::chain::{self, Verdict};
use repro_sortpoison::planted::Injector;
use repro_sortpoison::stage::ChainStage;
use repro_sortpoison::{census, cli, draws, fuzz, perm, planted};
use subject::BuildInfo;
use test_support::{assert_refused, json_report, run_bin};

/// Pins F2, live on both builds. Upstream: no upstream report found (searched the ggml-org/llama.cpp issues and pull requests, 2026-11-30); pull request 15665 (bucket sort in
/// top-p and min-p) is where the truncation samplers' sorting last changed.
#[test]
fn published_chain_keeps_four_where_one_is_right() {
    let case = chain::published();
    let r = chain::run(&case).unwrap();
    assert_eq!(r.subject.survivors, ids(&[0, 1, 2, 3]));
    assert_eq!(r.oracle, ids(&[3]));
    assert!(r.subject.sorted_flag);
    assert_eq!(r.verdict, Verdict::Present);
    test_support::assert_build_snapshot!(
        "published_chain",
        chain::report(&case, &r, &BuildInfo::current(), chain::controls().unwrap()).to_text()
    );
}

/// The chain comparison on the planted truncators: the one that trusts the flag must be
/// flagged in the published chain, the one that sorts must pass.
#[test]
fn chain_comparison_flags_a_planted_truncator_that_trusts_the_flag() {
    let t = chain::run(&chain::planted_published(true)).unwrap();
    assert_eq!(t.verdict, Verdict::Present);
    assert_eq!(t.subject.survivors, ids(&[0, 1, 2, 3]));
    // No llama.cpp stage takes part in the planted chains.
    for trusting in [true, false] {
        assert!(chain::planted_published(trusting)
            .stages
            .iter()
            .all(|s| s.name().starts_with("shadow_")));
    }
    let h = chain::run(&chain::planted_published(false)).unwrap();
    assert_eq!(h.verdict, Verdict::Absent);
    assert!(chain::controls().unwrap().iter().all(|c| c.passed));
}

#[test]
fn oracle_agrees_with_llama_cpp_on_honest_input() {
    // The gate before any verdict: single stages, random orders, sorted = false; survivor
    // sets and every surviving logit.
    let check = fuzz::oracle_check(0xC0FFEE, 5_000, &fuzz::real_oracle).unwrap();
    assert!(check.passed(), "{}", check.to_text());
    assert!(check.knife_edges < check.inputs / 20, "{}", check.to_text());
    // Truncating stages were exercised where they remove entries, and value-only stages had
    // their logits compared.
    let removing = ["top_k", "top_p", "min_p", "typical", "xtc", "top_n_sigma"];
    for stage in removing {
        let tally = check.per_stage[stage];
        assert!(tally.removing > 0, "{stage}: {}", check.to_text());
    }
    let valued = ["logit_bias", "penalties", "temp", "temp_ext"];
    for stage in valued {
        assert!(check.per_stage[stage].values > 0, "{stage}");
    }
    // The two lists above are every stage the generator draws, and the gate saw each.
    let mut listed = [&removing[..], &valued].concat();
    listed.sort();
    let mut fuzzed = fuzz::generate::FUZZED.to_vec();
    fuzzed.sort();
    assert_eq!(listed, fuzzed);
    let mut gated: Vec<&str> = check.per_stage.keys().copied().collect();
    gated.sort();
    assert_eq!(gated, fuzzed);
}

/// Every row of the oracle's stage table is generated (the generator's exhaustive match),
/// parsed from its example, built through the C builder, and passed by the oracle gate at
/// random parameters; and the fuzzer either draws it or says why not.
#[test]
fn every_table_stage_is_generated_parsed_built_and_gated() {
    use oracle::stage::{table::Parser, STAGES};
    let fuzzed = fuzz::generate::FUZZED;
    let left_out: Vec<&str> = fuzz::generate::NOT_FUZZED.iter().map(|x| x.0).collect();
    let mut rng = oracle::rng::Rng::new(11);
    for row in STAGES {
        assert!(
            fuzzed.contains(&row.name) != left_out.contains(&row.name),
            "{}: in exactly one of FUZZED and NOT_FUZZED",
            row.name
        );
        let stage = ChainStage::parse(row.example).unwrap();
        assert_eq!(stage.name(), row.name);
        assert_eq!(stage.to_string(), row.example);
        let stage = match row.parser {
            Parser::Llama(_) => {
                let template = fuzz::generate::template(row.name);
                let varied = fuzz::generate::randomize(&template, &mut rng, 6);
                assert_eq!(varied.name(), row.name);
                ChainStage::from(varied)
            }
            Parser::Suite(_) => stage,
        };
        assert!(
            stage.build(6).is_ok(),
            "{}: the C builder refused it",
            row.name
        );
        let case = chain::ChainCase {
            logits: vec![1.0, 0.5, 0.0, -0.5, 2.0, -1.0],
            stages: vec![stage.clone()],
            history: vec![TokenId(1)]
                .into_iter()
                .filter(|_| stage.reads_history())
                .collect(),
        };
        let gate = fuzz::chain_gate(&case, 3, 20).unwrap();
        assert!(gate.passed(), "{}", gate.to_text());
        if stage.draws() {
            // A drawing stage keeps the oracle's set unchanged, so the gate leaves it out;
            // its oracle is the distribution `draws::run` judges the draws and p against.
            assert!(!gate.per_stage.contains_key(row.name), "{}", row.name);
            let d = draws::run(&case).unwrap();
            assert_eq!(d.p_check.verdict, Some(Verdict::Absent), "{}", row.name);
        } else {
            assert_eq!(gate.per_stage[row.name].inputs, 20, "{}", row.name);
        }
    }
    for name in fuzzed.iter().chain(&left_out) {
        assert!(
            oracle::stage::table::row(name).is_some(),
            "{name} has no row"
        );
    }
}

/// The acceptance chain: with a stale flag llama.cpp's dist takes data[0] as the maximum, so
/// the +100 logit overflows expf. Its text per build, read before it was accepted.
#[test]
fn dist_after_a_stale_flag() {
    let case =
        cli::case_from_line("--stage top_k=4 --stage logit_bias=3:+100 --stage dist=1").unwrap();
    let d = draws::run(&case).unwrap();
    assert_eq!(d.after_each_stage.len(), 3);
    // Ids 0-2 expect about 1e-39 of the draws: one category after pooling, so the fit is a
    // note and the verdict rests on the survivor set and the p check.
    assert!(d.detector.fit_not_testable.is_some(), "{:?}", d.detector);
    assert_eq!(d.p_check.verdict, Some(Verdict::Present));
    // dist is judged against the array the earlier stages left: top_p's stale-flag survivor
    // set is F2's chain comparison, not charged to dist.
    let after_top_p = cli::case_from_line(
        "--stage top_k=4 --stage logit_bias=3:+6 --stage top_p=0.8 --stage dist=1",
    )
    .unwrap();
    let d3 = draws::run(&after_top_p).unwrap();
    assert_eq!(d3.verdict, Verdict::Absent, "{}", draws::to_text(&d3));
    assert_eq!(d3.p_check.verdict, Some(Verdict::Absent));
    let r = cli::chain_report(&case, &BuildInfo::current()).unwrap();
    assert!(r.controls().iter().all(|c| c.passed), "{:?}", r.controls());
    test_support::assert_build_snapshot!("dist_chain", r.to_text());
    // Two logits lifted past expf's range: the first in array order takes every draw.
    let two =
        cli::case_from_line("--stage top_k=4 --stage logit_bias=2:+100/3:+100 --stage dist=1")
            .unwrap();
    let d2 = draws::run(&two).unwrap();
    test_support::assert_build_snapshot!("dist_two_overflows", draws::to_text(&d2));
    // The guard before dist restores the distribution.
    let guarded = cli::case_from_line(
        "--stage top_k=4 --stage logit_bias=2:+100/3:+100 --stage sorted_guard --stage dist=1",
    )
    .unwrap();
    assert_eq!(draws::run(&guarded).unwrap().verdict, Verdict::Absent);
}

#[test]
fn json_of_a_dist_chain() {
    let (v, h) = chain_json(
        "--logits 4,3,2,1,0,-1,-2,-3 --stage top_k=4 --stage logit_bias=3:+100 --stage dist=1",
    );
    assert_eq!(h.subject.name, draws::NAME);
    assert!(h.controls.iter().all(|c| c.passed));
    assert!(h
        .controls
        .iter()
        .any(|c| c.kind == report::ControlKind::Positive));
    let stages = v["draws"]["after_each_stage"].as_array().unwrap();
    assert_eq!(stages.len(), 3);
    for s in stages {
        for side in ["subject", "oracle"] {
            for c in s[side].as_array().unwrap() {
                assert!(c["id"].is_i64() && c["logit"].is_number() && !c["p"].is_null());
            }
        }
    }
    assert_eq!(v["draws"]["draws"], draws::DRAWS);
    assert!(v["draws"]["detector"]["support"].is_array());
    assert!(v["draws"]["p_check"]["verdict"].is_string());
}

/// The single-chain gate runs the chain's own stages at their own parameters: it passes for
/// the published chain and every stage shows up in it.
#[test]
fn single_chain_gate_covers_the_chains_stages() {
    let case = chain::published();
    let gate = fuzz::chain_gate(&case, 7, 50).unwrap();
    assert!(gate.passed(), "{}", gate.to_text());
    for stage in ["top_k", "logit_bias", "top_p"] {
        assert_eq!(gate.per_stage[stage].inputs, 50, "{stage}");
    }
}

/// An arithmetic error planted in a copy of the oracle's temp stage changes no survivor set,
/// so a set-only gate could not see it; the value gate must.
#[test]
fn oracle_gate_fails_on_a_planted_arithmetic_error() {
    let check = fuzz::oracle_check(0xC0FFEE, 5_000, &planted::oracle_with_reciprocal_temp).unwrap();
    assert!(!check.passed(), "the planted error went unnoticed");
    assert!(check.mismatches.iter().all(|m| m.kind == "value"));
    assert_eq!(
        check.mismatching_stages().keys().collect::<Vec<_>>(),
        ["temp"]
    );
}

#[test]
fn ulps_count_representable_steps() {
    assert_eq!(fuzz::ulps(1.0, 1.0), 0);
    assert_eq!(fuzz::ulps(1.0, f32::from_bits(1.0f32.to_bits() + 3)), 3);
    assert_eq!(fuzz::ulps(-0.0, 0.0), 0);
    assert_eq!(fuzz::ulps(f32::from_bits(1), -f32::from_bits(1)), 2);
    assert_eq!(fuzz::ulps(f32::NEG_INFINITY, f32::NEG_INFINITY), 0);
    assert_eq!(fuzz::ulps(f32::NEG_INFINITY, 1.0), u64::MAX);
}

#[test]
fn permutation_table_with_controls() {
    let audit = perm::run().unwrap();
    for row in &audit.rows {
        assert!(row.honest_ok, "negative control failed for {}", row.sampler);
        assert!(
            row.guarded_ok == Some(true),
            "sorted_guard must make {} order-invariant",
            row.sampler
        );
        assert_eq!(row.skipped_knife_edges, 0, "the family is chosen tie-free");
    }
    for row in &audit.planted {
        if row.sampler.ends_with(":trusting") {
            assert!(row.flagged(), "{} was not flagged", row.sampler);
        } else {
            assert!(row.sound(), "{} was flagged", row.sampler);
        }
    }
    test_support::assert_build_snapshot!("permutation", audit.to_text());
}

#[test]
fn permutation_detector_is_quiet_on_a_sound_sampler_and_fires_on_a_prefix_reader() {
    // typical re-sorts by its own key, so it must give one set per multiset even when stale.
    let logits = perm::family()[0].clone();
    let typical = perm::run_case(
        &ChainStage::from(Stage::Typical {
            p: 0.5,
            min_keep: 1,
        }),
        &logits,
    )
    .unwrap()
    .unwrap();
    assert_eq!(typical.stale.len(), 1);
    let top_k = perm::run_case(&Stage::TopK { k: 2 }.into(), &logits[..4])
        .unwrap()
        .unwrap();
    // A stale top_k keeps whichever two entries come first: all C(4,2) = 6 pairs occur.
    assert_eq!(top_k.stale.len(), 6);
    assert_eq!(top_k.permutations, 24);
    // The same detector on planted Rust truncators: trusting the flag gives the same 6 pairs,
    // always sorting gives one set.
    for (how, sets) in [("trusting", 6), ("honest", 1)] {
        let planted = ChainStage::parse(&format!("shadow_top_k=2:{how}")).unwrap();
        let case = perm::run_case(&planted, &logits[..4]).unwrap().unwrap();
        assert_eq!(case.stale.len(), sets, "{how}");
    }
}

#[test]
fn injector_census() {
    // The census as the binary runs it: every row in its own child, handed back as JSON.
    let (code, out, err) = run_bin(BIN, &["--census", "--json"]);
    assert_eq!(code, 0, "{err}");
    let c: census::Census = serde_json::from_str(&out).unwrap();
    assert!(
        c.vocab_note.is_none(),
        "the census needs the SmolLM2 vocabulary: run `make models`"
    );
    let class = |label: &str| {
        let row = c.rows.iter().find(|r| r.sampler.starts_with(label));
        row.unwrap_or_else(|| panic!("no census row {label}")).class
    };
    // The published claim, checked by running: logit_bias and grammar leave the flag stale;
    // penalties, dry and typical reset it.
    assert_eq!(class("logit_bias"), census::Class::KeepsStale);
    assert_eq!(class("grammar"), census::Class::KeepsStale);
    assert_eq!(class("penalties"), census::Class::ResetsFlag);
    assert_eq!(class("dry"), census::Class::ResetsFlag);
    assert_eq!(class("typical"), census::Class::ResetsFlag);
    assert_eq!(class("temp 0.5"), census::Class::NeverReorders);
    // The planted injectors through the same rows.
    let planted = |i: Injector| {
        let name = subject::CustomSampler::name(&i).to_string_lossy();
        c.planted
            .iter()
            .find(|p| p.row.sampler == name)
            .unwrap()
            .row
            .class
    };
    assert_eq!(planted(Injector::KeepsFlag), census::Class::KeepsStale);
    assert_eq!(planted(Injector::ClearsFlag), census::Class::ResetsFlag);
    assert_eq!(planted(Injector::Identity), census::Class::NeverReorders);
    // Containment: the aborting injector is a row, and the census went on past it.
    assert_eq!(planted(Injector::Aborts), census::Class::Crashed);
    assert!(c.rows.iter().all(|r| r.class != census::Class::Crashed));
    test_support::assert_build_snapshot!("census", c.to_text());
}

#[test]
fn fuzzer_summary_and_minimized_cases() {
    let r = fuzz::fuzz(fuzz::FUZZ_SEED, 5_000).unwrap();
    assert_eq!(r.tried, 5_000);
    assert_eq!(r.sound + r.unsound + r.undecided, r.tried);
    assert_eq!(
        r.guarded.unsound, 0,
        "with sorted_guard no chain may be unsound"
    );
    for case in r.minimized.iter().map(|m| &m.case) {
        // Every minimized case is still unsound on its own, and no stage can be dropped.
        let v = chain::run(case).unwrap().verdict;
        assert_eq!(v, Verdict::Present, "{}", case.command());
        for i in 0..case.stages.len() {
            let mut smaller = case.clone();
            smaller.stages.remove(i);
            let still = smaller.validate().is_ok()
                && chain::run(&smaller).unwrap().verdict == Verdict::Present;
            assert!(!still, "stage {i} of {} is not needed", case.command());
        }
    }
    test_support::assert_build_snapshot!("fuzzer", r.to_text());
    // Contained: the binary runs the same chains in children of 2,000 chains each and merges
    // their reports; the merge must give the same bytes as the single run.
    let (code, out, err) = run_bin(BIN, &["--fuzz", "--fuzz-chains", "5000"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, r.to_text());
}

#[test]
fn regression_cases() {
    let text = include_str!("regressions.txt");
    let mut out = String::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let case = cli::case_from_line(line).unwrap();
        let r = chain::run(&case).unwrap();
        out.push_str(&format!(
            "{:<9} subject {} oracle {} flag {:<5}  {line}\n",
            r.verdict.as_str(),
            chain::ids_text(&r.subject.survivors),
            chain::ids_text(&r.oracle),
            r.subject.sorted_flag,
        ));
    }
    test_support::assert_build_snapshot!("regressions", out);
}

const BIN: &str = env!("CARGO_BIN_EXE_repro-sortpoison");

/// The JSON report of `line` (`repro-sortpoison` arguments) with `--json`.
fn chain_json(line: &str) -> (serde_json::Value, report::Header) {
    json_report(BIN, &line.split(' ').chain(["--json"]).collect::<Vec<_>>())
}

const PUBLISHED: &str = "--logits 4,3,2,1,0,-1,-2,-3 --stage top_k=4 --stage logit_bias=3:+6";

#[test]
fn json_of_the_published_chain() {
    let (v, h) = chain_json(&format!("{PUBLISHED} --stage top_p=0.8"));
    assert_eq!(h.subject.build, BuildInfo::current().tag());
    assert!(h.controls.iter().all(|c| c.passed));
    assert_eq!(v["subject"], serde_json::json!([0, 1, 2, 3]));
    assert_eq!(v["oracle"], serde_json::json!([3]));
    assert_eq!(v["sorted_flag_after"], true);
    assert_eq!(v["verdict"], "present");
}

#[test]
fn the_guard_fixes_the_published_chain() {
    let (v, _) = chain_json(&format!(
        "{PUBLISHED} --stage sorted_guard --stage top_p=0.8"
    ));
    assert_eq!(v["subject"], serde_json::json!([3]));
    assert_eq!(v["verdict"], "absent");
}

#[test]
fn order_preserving_chain_is_absent() {
    let (v, _) = chain_json(
        "--logits 1.5,-2,0.5,3 --stage logit_bias=1:+4 --stage top_k=3 --stage top_p=0.9",
    );
    assert_eq!(v["verdict"], "absent");
    assert_eq!(v["subject"], v["oracle"]);
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    assert_refused(BIN, &["--logits", "", "--stage", "top_k=1"], &[]);
    for line in [
        "--stage frobnicate=1",
        "--stage top_p=1.5",
        "--logits 1,2,3 --stage logit_bias=3:+1",
        "--logits 1,NaN,3 --stage top_k=1",
        "--logits 1,inf --stage top_k=1",
        "--logits 1,2 --stage xtc=0.5:0.1",
        "--logits 1,2 --stage dist=4294967295",
        "--logits 1,2 --stage dist=1 --stage top_k=1",
        "--logits 1,2 --stage mirostat=1",
        "--stage shadow_dist=1:sometimes",
        "--logits 1,2 --stage penalties=-4:1.1 --history 0",
        "--logits 1,2 --stage penalties=4:1.1 --history 5",
        "--audit --stage top_k=1",
        "--stage shadow_top_p=0.8:maybe",
        "--no-such-flag",
    ] {
        let args: Vec<&str> = line.split(' ').collect();
        assert_refused(BIN, &args, &[]);
    }
}

#[test]
fn same_command_same_bytes() {
    let line = "--logits 2,1,0,-1 --stage top_k=3 --stage logit_bias=2:+3 --stage min_p=0.2";
    let args: Vec<&str> = line.split(' ').collect();
    assert_eq!(run_bin(BIN, &args), run_bin(BIN, &args));
}

/// The census probes every llama.cpp sampler of the stage table and every one the oracle does
/// not compose, each under its own name as the label's first word; grammar and infill, which
/// need a vocabulary, only on the vocabulary battery (census::subjects with a vocabulary,
/// run by the audit).
#[test]
fn the_census_has_every_stage_of_the_table() {
    const VOCAB_ONLY: [&str; 2] = ["grammar", "infill"];
    let labels: Vec<String> = repro_sortpoison::census::subjects(None)
        .iter()
        .map(|s| s.label.split(' ').next().unwrap_or("").to_string())
        .collect();
    let table = (oracle::stage::STAGES.iter())
        .filter(|r| matches!(r.parser, oracle::stage::table::Parser::Llama(_)))
        .map(|r| r.name);
    let others = (oracle::stage::NOT_COMPOSED.iter())
        .map(|(n, _)| *n)
        .filter(|n| !VOCAB_ONLY.contains(n));
    let missing: Vec<&str> = table
        .chain(others)
        .filter(|n| !labels.iter().any(|l| l == n))
        .collect();
    assert!(missing.is_empty(), "add to census::subjects: {missing:?}");
}
