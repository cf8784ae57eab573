//! repro-sortpoison's command line at every door: a closed stdout pipe, check-only mode, the
//! upper bounds of its flags, and 10,000 generated argument vectors through its check in
//! process, the first 200 also as processes (`test_support::argv_fuzz`).

use test_support::argv_fuzz::{self, Flag, Fuzz};
use test_support::{
    assert_check_only_ok, assert_quiet_on_closed_pipe, assert_refused, run_bin, run_bin_with_env,
    CHECK_ONLY,
};

const BIN: &str = env!("CARGO_BIN_EXE_repro-sortpoison");

#[test]
fn a_closed_stdout_pipe_ends_quietly() {
    for args in [&[][..], &["--json"], &["--help"]] {
        assert_quiet_on_closed_pipe(BIN, args, &[]);
    }
}

/// Under check-only mode a valid command line exits 0 without doing anything (the audit takes
/// minutes and writes reports), and a refused one is still refused.
#[test]
fn check_only_checks_and_stops() {
    let dir = std::env::temp_dir().join(format!("sortpoison-argv-check-{}", std::process::id()));
    let results = dir.join("results").display().to_string();
    for args in [
        &["--audit", "--results", &results][..],
        &["--logits", "2,1,0,-1", "--stage", "top_k=3", "--json"],
    ] {
        assert_check_only_ok(BIN, args);
    }
    assert!(!dir.exists(), "check-only wrote {}", dir.display());
    assert_refused(BIN, &["--stage", "top_p=1.5"], &[CHECK_ONLY]);
    assert_refused(BIN, &["--audit", "--stage", "top_k=1"], &[CHECK_ONLY]);
}

#[test]
fn upper_bounds_are_stated_and_refused_past_them() {
    let (_, help, _) = run_bin(BIN, &["--help"]);
    for bound in [
        "1 to 4096 finite values",
        "at most 32 stages",
        "at most 4096",
        "at most 1000000",
    ] {
        assert!(
            help.contains(bound),
            "--help does not state '{bound}':\n{help}"
        );
    }
    let logits = |n: usize| vec!["0.5"; n].join(",");
    let stages = |n: usize| -> Vec<String> {
        (0..n)
            .flat_map(|k| ["--stage".to_string(), format!("top_k={}", k + 1)])
            .collect()
    };
    let (many, most) = (logits(4097), logits(4096));
    let history = |n: usize| vec!["1"; n].join(",");
    for args in [
        vec!["--logits", &many, "--stage", "top_k=1"],
        vec!["--fuzz-chains", "1000001"],
        vec![
            "--logits",
            "1,2",
            "--stage",
            "penalties=4:1.1",
            "--history",
            &history(4097),
        ],
    ] {
        assert_refused(BIN, &args, &[]);
    }
    let too_many = stages(33);
    let too_many: Vec<&str> = too_many.iter().map(String::as_str).collect();
    assert_refused(BIN, &too_many, &[]);
    // At the bounds (4096 logits, 31 top_k stages and a penalties stage with the largest
    // window and 4096 ids of history), the command line passes its checks.
    let top_ks = stages(31);
    let h = history(4096);
    let mut args: Vec<&str> = vec!["--logits", &most];
    args.extend(top_ks.iter().map(String::as_str));
    args.extend(["--stage", "penalties=1048576:1.1", "--history", &h]);
    let (code, _, stderr) = run_bin_with_env(BIN, &args, &[CHECK_ONLY]);
    assert_eq!(code, 0, "{stderr}");
    let (code, _, stderr) =
        run_bin_with_env(BIN, &["--audit", "--fuzz-chains", "1000000"], &[CHECK_ONLY]);
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn argv_fuzz() {
    let tmp = std::env::temp_dir().display().to_string();
    let flags = vec![
        Flag::value(
            "--logits",
            &["4,3,2,1,0,-1,-2,-3", "2,1,0,-1", "1.5,-2,0.5,3", "1,2"],
        ),
        Flag::value(
            "--stage",
            &[
                "top_k=4",
                "logit_bias=3:+6",
                "logit_bias=0:-1/1:+2",
                "top_p=0.8",
                "min_p=0.2:2",
                "typical=0.9:2",
                "temp=0.7",
                "temp_ext=1:0.5:1",
                "xtc=1:0.1",
                "top_n_sigma=1.5",
                "penalties=4:1.1:0.5:0.2",
                "greedy",
                "sorted_guard",
                "shadow_top_p=0.8:trusting",
                "shadow_top_k=4:honest",
                "shadow_logit_bias=3:+6",
                "dist=1",
                "dist=4294967295",
                "shadow_dist=1:exact",
            ],
        ),
        Flag::value("--history", &["0", "1,2,1", "3"]),
        Flag::switch("--json"),
        Flag::value("--results", &["results", "/no/such/dir"]).with_good([tmp]),
        Flag::switch("--audit"),
        Flag::value("--fuzz-chains", &["100", "0", "100000", "1000000"]),
        Flag::value("--vocab-model", &["/no/such/model.gguf", "smollm2.gguf"]),
    ];
    let fuzz = Fuzz::new(BIN, flags, 0xf2f2);
    let t = argv_fuzz::in_process(&fuzz, repro_sortpoison::cli::check);
    assert!(t.ran > 0 && !t.stopped.is_empty(), "{t:?}");
    // The draw stages' refusals are reached: llama.cpp's random seed, and a draw before
    // another stage (a `--stage dist=...` followed by any other `--stage`).
    t.assert_reached(&["asks llama.cpp for a random seed", "must be the last stage"]);
    let s = argv_fuzz::run(&fuzz);
    assert!(s.exits[0] > 0 && s.exits[2] > 0, "{s:?}");
}
