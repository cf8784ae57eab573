//! F3, `penalty-scope-divergence`: the same sign-branched repetition penalty (theta 1.3,
//! once per distinct id) applied over different scopes of the sequence sends greedy
//! decoding down different paths, silently: transformers penalizes the whole sequence,
//! prompt included; candle's examples pass the last 128 or 64 tokens; llama.cpp penalizes
//! its `penalty_last_n` window of accepted tokens.
//!
//! Mechanism: identical formula, different sets of penalized ids. Once the window slides
//! past the system prompt and the user turn, their tokens stop being penalized under a
//! window but stay penalized under `all`, and the argmax eventually differs.
//!
//! Builds: llama.cpp b11429 (llama-cpp-sys-2 0.1.161) and b10200 (0.1.154); models
//! SmolLM2-135M-Instruct Q4_1 (default) and Gemma3-270M Q4_K_M from `make models`, or any GGUF
//! path.
//!
//! Output: per scope, where it first differs from `all` (top-2 margins, deciding ids) and
//! stopped, llama.cpp's twin mismatches (must be 0), the texts, the single-vector table, the
//! controls, and `penalty-scope-divergence: <verdict> on <build>`; `--json` prints the same
//! report; `--audit` adds the sweep over the prompt corpus and writes
//! `results/scope.<build>.{json,txt}` and `results/scope-sweep.<build>.svg`.

fn main() {
    cmdline::one_line_panics();
    // A model file the user names is loaded first in a child of this binary, by llama.cpp and
    // by the engine `--engine` names.
    let tasks = [subject::LOAD_TASK, repro_scope::engine_load::LOAD_TASK];
    if let Some(code) = contain::serve(&tasks) {
        std::process::exit(code);
    }
    std::process::exit(repro_scope::cli::main(std::env::args_os()));
}
