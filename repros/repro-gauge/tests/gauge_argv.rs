//! repro-gauge's command line at every door: a closed stdout pipe, check-only mode, the upper
//! bounds of its flags, and 10,000 generated argument vectors through its check in process
//! (`test_support::argv_fuzz`). Nothing here decodes: the
//! fuzz runs against a model cache without models, and the test that reads the real cache
//! only checks the models' sha256.

use test_support::argv_fuzz::{self, Flag, Fuzz};
use test_support::{Doors, Scratch};

const BIN: &str = env!("CARGO_BIN_EXE_repro-gauge");

/// The files of a scratch folder for this test binary.
struct Paths {
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

fn scratch(name: &str) -> (Scratch, Paths) {
    let s = Scratch::new(&format!("gauge-argv-{name}"));
    let real = test_support::with_env_unchanged(|| models::resolve("smollm2"))
        .expect("run `make models` first")
        .path;
    let prompts = |n: usize| -> String { (0..n).map(|k| format!("Prompt {k}.\n")).collect() };
    let text = b"# A short teacher-forced text\n";
    let cache = s.folder("cache");
    s.file("cache/teacher-text.md", text);
    let paths = Paths {
        garbage: s.file("garbage.gguf", [7u8; 64]),
        model: s.link("my-model.gguf", &real),
        cache,
        two: s.file("two.txt", "# two\nSay hello.\n\nCount to three.\n"),
        empty: s.file("empty.txt", "# nothing\n\n"),
        most: s.file("most.txt", prompts(1024)),
        too_many: s.file("too-many.txt", prompts(1025)),
        text: s.file("text.md", text),
    };
    (s, paths)
}

/// Under check-only mode a valid command line (at the bounds too) exits 0 without loading or
/// decoding, and a refused one is still refused. The published run and the Makefile's audit and
/// tables command lines pass (this reads the real model cache: it checks both
/// models' sha256); a file llama.cpp cannot load is refused by the check's contained load.
#[test]
fn doors_hold() {
    let (_scratch, s) = scratch("doors");
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
    let (five, four) = ([g; 5].join(","), [g; 4].join(","));
    Doors {
        quiet: &["--help"],
        check_only_ok: &[
            &format!("--model {g}"),
            &format!("--audit --models {g} --results $RESULTS"),
            "",
            "--audit --models smollm2 --prompts 4",
            "--tables --json-prompts 8",
            "--tables --models smollm2 --positions 2048 --json-prompts 4 --structural-pairs 16",
            &format!("--model {g} --max-new 512 --positions 200000"),
            &format!("--model {g} --theta {thetas_4} --shifts {shifts_16}"),
            &format!("--model {g} --prompt-file {}", s.most),
            &format!(
                "--audit --models {four} --prompt-file {} --prompts 1024",
                s.too_many
            ),
            &format!("--tables --models {four} --json-prompts 1024 --structural-pairs 1024"),
        ],
        check_only_refused: &[
            "--theta 0",
            &format!("--prompt-file {}", s.empty),
            &format!("--model {}", s.garbage),
        ],
        not_utf8: &[b"--prompt-file /no/\xff", b"--model \xff"],
        help_states: &[
            "At most 1024 prompts",
            "at most 85",
            "1 to 512",
            "at most 4",
            "1 to 1024",
            "1 to 200000",
            "1 to 64",
        ],
        refused: &[
            "--max-new 513",
            "--positions 200001",
            &format!("--audit --models {five}"),
            "--audit --prompts 1025",
            "--tables --json-prompts 1025",
            "--tables --structural-pairs 1025",
            "--audit --tables",
            "--audit --positions 2048",
            "--audit --json-prompts 8",
            "--tables --prompts 4",
            "--tables --prompt hello",
            "--tables --engine candle",
            "--tables --max-new 8",
            "--audit --teacher-text /no/such/text.md",
            &format!("--prompt-file {}", s.too_many),
            &format!("--theta {one_theta} --shifts {shifts_42}"),
            "--threads 65",
        ],
        ..Doors::of(BIN)
    }
    .check();
}

#[test]
fn argv_fuzz() {
    let (_scratch, s) = scratch("fuzz");
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
        Flag::value("--engine", &["vllm", "", "llama", "candle"]),
        Flag::value("--results", &["results", "/no/such/dir"]),
        Flag::switch("--audit"),
        Flag::switch("--tables"),
        models,
        Flag::value("--prompts", &["4", "1", "1024"]),
        Flag::value("--json-prompts", &["8", "4", "114"]),
        Flag::value("--structural-pairs", &["16", "114"]),
        Flag::value("--positions", &["2048", "300", "200000"]),
        Flag::value("--teacher-text", &["/no/such/text.md"]).with_good([s.text.clone()]),
    ];
    // In process a model path is refused (no contained child can start) and the empty cache
    // refuses every model name, so no vector is accepted; `doors_hold` runs the child's load of
    // a user-named path (the real model passes, a garbage file is refused in one line).
    let fuzz = Fuzz::new(BIN, flags, 0xf4f4).env("MODELS_CACHE", &s.cache);
    let reached = ["is not cached", "does not serve the contained task"];
    argv_fuzz::assert_in_process(&fuzz, repro_gauge::cli::check, &reached, false);
}
