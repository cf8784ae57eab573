//! repro-scope's command line at every door: a closed stdout pipe, check-only mode, the upper
//! bounds of its flags, and 10,000 generated argument vectors through its check in process
//! (`test_support::argv_fuzz`). Nothing here decodes: the
//! fuzz runs against an empty model cache, and the one test that reads the real cache only
//! checks SmolLM2's sha256.

use test_support::argv_fuzz::{self, Flag, Fuzz};
use test_support::{Doors, Scratch};

const BIN: &str = env!("CARGO_BIN_EXE_repro-scope");

/// A scratch folder for this test binary, and in it a file that is not a model
/// (`models::resolve` accepts any regular file as a path; the check's contained load refuses
/// it), a link to the real SmolLM2 file under another name (a user-named model: the check
/// loads it once in a child, about 0.15 s), and an empty model cache, where `smollm2` and
/// `gemma3` are refused at once instead of hashed.
fn scratch(name: &str) -> (Scratch, String, String, String) {
    let s = Scratch::new(&format!("scope-argv-{name}"));
    let real = test_support::with_env_unchanged(|| models::resolve("smollm2"))
        .expect("run `make models` first")
        .path;
    let (garbage, cache) = (s.file("garbage.gguf", [7u8; 64]), s.folder("cache"));
    let model = s.link("my-model.gguf", &real);
    (s, garbage, cache, model)
}

/// Under check-only mode a valid command line (at the bounds too) exits 0 without decoding,
/// and a refused one is still refused; the published configuration (SmolLM2, sha256-checked)
/// passes, and a file llama.cpp cannot load is refused by the check's contained load.
#[test]
fn doors_hold() {
    let (_scratch, garbage, _, model) = scratch("doors");
    let list = |n: usize| (1..=n).map(|k| k.to_string()).collect::<Vec<_>>().join(",");
    let sixteen = format!("{},1048576,gen:1048576,llama:1048576", list(13));
    Doors {
        quiet: &["--help"],
        check_only_ok: &[
            &format!("--model {model}"),
            &format!("--model {model} --audit --results $RESULTS"),
            "",
            &format!("--model {model} --scopes {sixteen} --max-new 4096 --vector-at 4096"),
        ],
        check_only_refused: &[
            "--penalty nan",
            "--model /no/such/model.gguf",
            &format!("--model {garbage}"),
        ],
        not_utf8: &[b"--model \xff", b"--scopes 64,\xff"],
        help_states: &[
            "1 to 4096",
            "at most 16 scopes, each window N at most 1048576",
            "0 to 4096",
            "1 to 64",
        ],
        refused: &[
            &format!("--scopes {}", list(17)),
            "--scopes 1048577",
            "--scopes gen:1048577",
            "--scopes llama:1048577",
            "--max-new 4097",
            "--vector-at 4097",
            "--threads 65",
        ],
        ..Doors::of(BIN)
    }
    .check();
}

#[test]
fn argv_fuzz() {
    let (_scratch, garbage, cache, model) = scratch("fuzz");
    let flags = vec![
        Flag::value("--model", &["/no/such/model.gguf", "nope", &garbage])
            .with_rare(&["smollm2", "gemma3", &model]),
        Flag::value(
            "--prompt",
            &[
                "How do you say thank you in Chinese?",
                "Name three colours.",
                "x",
            ],
        ),
        Flag::value("--penalty", &["1.3", "1.1", "0.5", "2"]),
        Flag::value("--max-new", &["120", "12", "1", "4096"]),
        Flag::value(
            "--scopes",
            &[
                "all,64,128,gen:64,llama:64",
                "all,4,gen:4,llama:4,100000,llama:5000",
                "64",
                "gen:1048576",
            ],
        ),
        Flag::value("--vector-at", &["60", "0", "4096"]),
        Flag::switch("--audit"),
        Flag::switch("--json"),
        Flag::value("--engine", &["vllm", "", "llama", "candle"]),
        Flag::value("--results", &["results", "/no/such/dir"]),
        Flag::value("--threads", &["2", "1", "64"]),
    ];
    // In process a model path is refused (no contained child can start) and the empty cache
    // refuses every model name, so no vector is accepted; `doors_hold` runs the child's load of
    // a user-named path (the real model passes, a garbage file is refused in one line), and
    // `model_door.rs` runs files derived from both pinned models (at least 220) and four odd
    // paths through it.
    let fuzz = Fuzz::new(BIN, flags, 0x5c09e).env("MODELS_CACHE", cache);
    let reached = ["is not cached", "does not serve the contained task"];
    argv_fuzz::assert_in_process(&fuzz, repro_scope::cli::check, &reached, false);
}
