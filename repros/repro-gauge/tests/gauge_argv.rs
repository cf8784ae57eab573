//! repro-gauge's command line at every door: a closed stdout pipe, check-only mode, the upper
//! bounds of its flags, and 10,000 generated argument vectors through its check in process,
//! the first 200 also as processes (`test_support::argv_fuzz`). Nothing here decodes: the
//! fuzz runs against a model cache without models, and the test that reads the real cache
//! only checks the models' sha256.

use std::path::{Path, PathBuf};
use test_support::argv_fuzz::{self, Flag, Fuzz};
use test_support::{
    assert_check_only_ok, assert_quiet_on_closed_pipe, assert_refused, run_bin, run_bin_with_env,
    CHECK_ONLY,
};

const BIN: &str = env!("CARGO_BIN_EXE_repro-gauge");

/// A scratch folder for this test binary and its paths.
struct Scratch {
    dir: PathBuf,
    /// A regular file that is not a model (`models::resolve` accepts it as a path; the
    /// check's contained load refuses it).
    garbage: String,
    /// A link to the real SmolLM2 file under another name: a user-named model, loaded once in
    /// a child by the check (about 0.15 s).
    model: String,
    /// A model cache with the teacher-forced text and no models: `smollm2` and `gemma3` are
    /// refused at once instead of hashed.
    cache: String,
    /// Prompt files: two prompts, none, 1024 and 1025.
    two: String,
    empty: String,
    most: String,
    too_many: String,
    /// A teacher-forced text.
    text: String,
}

fn scratch(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("gauge-argv-{name}-{}", std::process::id()));
    let cache = dir.join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    let write = |p: &Path, text: &[u8]| -> String {
        std::fs::write(p, text).unwrap();
        p.display().to_string()
    };
    let prompts = |n: usize| -> String { (0..n).map(|k| format!("Prompt {k}.\n")).collect() };
    let text = write(&dir.join("text.md"), b"# A short teacher-forced text\n");
    write(
        &cache.join("teacher-text.md"),
        b"# A short teacher-forced text\n",
    );
    let model = dir.join("my-model.gguf");
    let real = test_support::with_env_unchanged(|| models::resolve("smollm2"))
        .expect("run `make models` first")
        .path;
    std::os::unix::fs::symlink(real, &model).unwrap();
    Scratch {
        garbage: write(&dir.join("garbage.gguf"), &[7u8; 64]),
        model: model.display().to_string(),
        cache: cache.display().to_string(),
        two: write(
            &dir.join("two.txt"),
            b"# two\nSay hello.\n\nCount to three.\n",
        ),
        empty: write(&dir.join("empty.txt"), b"# nothing\n\n"),
        most: write(&dir.join("most.txt"), prompts(1024).as_bytes()),
        too_many: write(&dir.join("too-many.txt"), prompts(1025).as_bytes()),
        text,
        dir,
    }
}

#[test]
fn a_closed_stdout_pipe_ends_quietly() {
    assert_quiet_on_closed_pipe(BIN, &["--help"], &[]);
}

/// Under check-only mode a valid command line exits 0 without loading or decoding, and a
/// refused one is still refused. The published run and both of the Makefile's audit command
/// lines pass (this reads the real model cache: it checks both models' sha256).
#[test]
fn check_only_checks_and_stops() {
    let s = scratch("check");
    let results = s.dir.join("results").display().to_string();
    let makefile_default: Vec<&str> = "--audit --json-prompts 8".split(' ').collect();
    let makefile_legacy: Vec<&str> =
        "--audit --models smollm2 --prompts 4 --positions 2048 --json-prompts 4 --structural-pairs 16"
            .split(' ')
            .collect();
    for args in [
        &["--model", &s.model][..],
        &["--audit", "--models", &s.model, "--results", &results],
        &[],
        &makefile_default,
        &makefile_legacy,
    ] {
        assert_check_only_ok(BIN, args);
    }
    assert!(!s.dir.join("results").exists());
    assert_refused(BIN, &["--theta", "0"], &[CHECK_ONLY]);
    assert_refused(BIN, &["--prompt-file", &s.empty], &[CHECK_ONLY]);
    // A file llama.cpp cannot load is refused by the check's contained load.
    assert_refused(BIN, &["--model", &s.garbage], &[CHECK_ONLY]);
    std::fs::remove_dir_all(&s.dir).unwrap();
}

#[test]
fn upper_bounds_are_stated_and_refused_past_them() {
    let (_, help, _) = run_bin(BIN, &["--help"]);
    for bound in [
        "At most 1024 prompts",
        "at most 85",
        "1 to 512",
        "at most 4",
        "1 to 1024",
        "1 to 200000",
        "1 to 64",
    ] {
        assert!(
            help.contains(bound),
            "--help does not state '{bound}':\n{help}"
        );
    }
    let s = scratch("bounds");
    let values = |n: usize, step: f32| -> String {
        (1..=n)
            .map(|k| (1.0 + k as f32 * step).to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    // 2 thetas (1 added) x 43 shifts (0 added) = 86 > 85.
    let (one_theta, shifts_42) = (values(1, 0.1), values(42, 1.0));
    // 5 thetas x 17 shifts = 85, at the bound.
    let (thetas_4, shifts_16) = (values(4, 0.1), values(16, 1.0));
    let g = s.model.as_str();
    let five = [g; 5].join(",");
    let four = [g; 4].join(",");
    for args in [
        &["--max-new", "513"][..],
        &["--positions", "200001"],
        &["--audit", "--models", &five],
        &["--audit", "--prompts", "1025"],
        &["--audit", "--json-prompts", "1025"],
        &["--audit", "--structural-pairs", "1025"],
        &["--prompt-file", &s.too_many],
        &["--theta", &one_theta, "--shifts", &shifts_42],
        &["--threads", "65"],
    ] {
        assert_refused(BIN, args, &[]);
    }
    for args in [
        &["--model", g, "--max-new", "512", "--positions", "200000"][..],
        &["--model", g, "--theta", &thetas_4, "--shifts", &shifts_16],
        &["--model", g, "--prompt-file", &s.most],
        &[
            "--audit",
            "--models",
            &four,
            "--prompt-file",
            &s.too_many,
            "--prompts",
            "1024",
            "--json-prompts",
            "1024",
            "--structural-pairs",
            "1024",
        ],
    ] {
        let (code, _, stderr) = run_bin_with_env(BIN, args, &[CHECK_ONLY]);
        assert_eq!(code, 0, "{args:?}: {stderr}");
    }
    std::fs::remove_dir_all(&s.dir).unwrap();
}

#[test]
fn argv_fuzz() {
    let s = scratch("fuzz");
    let garbage_list = format!("{},/no/such.gguf", s.garbage);
    let models = Flag::value(
        "--models",
        &["nope", "/no/such/model.gguf", &s.garbage, &garbage_list],
    )
    .with_rare(&["smollm2", "gemma3", "smollm2,gemma3", &s.model]);
    let flags = vec![
        Flag::value("--model", &["/no/such/model.gguf", "nope", &s.garbage])
            .with_rare(&["smollm2", "gemma3", &s.model]),
        Flag::value("--prompt-file", &["/no/such/prompts.txt"]).with_good([
            s.two.clone(),
            s.empty.clone(),
            s.too_many.clone(),
        ]),
        Flag::value("--theta", &["1.0,1.15,1.3", "1.3", "1.1,1.2"]),
        Flag::value("--shifts", &["-5,-3,-1,0,1,3,5", "-5,5", "1", "0"]),
        Flag::value("--max-new", &["200", "8", "1", "512"]),
        Flag::value("--threads", &["2", "1", "64"]),
        Flag::switch("--json"),
        Flag::value("--engine", &["vllm", ""])
            .with_good(["llama".to_string(), "candle".to_string()]),
        Flag::value("--results", &["results", "/no/such/dir"]),
        Flag::switch("--audit"),
        models,
        Flag::value("--prompts", &["4", "1", "1024"]),
        Flag::value("--json-prompts", &["8", "4", "114"]),
        Flag::value("--structural-pairs", &["16", "114"]),
        Flag::value("--positions", &["2048", "300", "200000"]),
        Flag::value("--teacher-text", &["/no/such/text.md"]).with_good([s.text.clone()]),
    ];
    let fuzz = Fuzz::new(BIN, flags, 0xf4f4).env("MODELS_CACHE", &s.cache);
    let t = argv_fuzz::in_process(&fuzz, repro_gauge::cli::check);
    t.assert_reached(&["is not cached", "does not serve the contained task"]);
    let summary = argv_fuzz::run(&fuzz);
    std::fs::remove_dir_all(&s.dir).unwrap();
    // In process a model path is always refused (no contained child can start) and an empty
    // cache refuses every other command line, so the exits 0 of these vectors are help texts,
    // unless one names the real model path (rare). The child's load of a user-named path is
    // run every time by `check_only_checks_and_stops`: the real model exits 0, a garbage file
    // exits 2 in one line.
    assert!(summary.exits[0] > 0 && summary.exits[2] > 0, "{summary:?}");
}
