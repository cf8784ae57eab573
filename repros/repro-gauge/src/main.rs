//! F4, `penalty-gauge-dependence`: the sign-branched repetition penalty (`z > 0 ? z / theta :
//! z * theta`, shipped by llama.cpp, transformers, vLLM and candle) changes what it does when
//! every logit moves by the same constant, which softmax ignores; the subtractive penalty
//! (`z - ln theta`) and the sign branch on log-probabilities do not.
//!
//! Mechanism: a seen id's logit above 0 is divided by theta (a cut of z(1 - 1/theta)), one
//! at or below 0 is multiplied (a cut of |z|(theta - 1)), so the cut depends on where the
//! model's zero point happens to sit. Shift the zero point and different tokens win.
//!
//! Design (the paper's A1, PREREG F4 addendum 2026-11-30): per prompt, greedy runs for every
//! operator, theta and shift, each handed `z + c` in f32 through a real llama.cpp chain (sign:
//! llama.cpp's penalties stage; subtractive and normalized: `ledger-penalties`), compared with
//! the same operator and theta at c = 0. The runs of a prompt decode in one batch and share a
//! KV sequence while their tokens agree. theta = 1 is the no-op leg (a control); every seen
//! id's penalized value is checked against the oracle's arithmetic at every step; planted
//! samplers check the detector.
//!
//! Builds: llama-cpp-sys-2 0.1.161 and 0.1.154; models SmolLM2-135M-Instruct Q4_1 (default)
//! and Gemma3-270M Q4_K_M from `make models`, or any GGUF path.
//!
//! Output: per operator, theta and shift, over prompts: the differing share against c = 0,
//! the first divergence index, distinct-2 and the repetition rate, each a mean with a 95%
//! bootstrap interval; how many prompts parted and how many of those at a knife edge (a
//! top-2 margin within rounding). `--json` prints the report (header, then `model`, `rows`,
//! `value_checks`). `--audit` runs SmolLM2 and Gemma3 and the structured-output corpus and
//! writes `results/gauge.<build>.*`, `results/gauge-ledger.<build>.*` (the fix's verdict from
//! the same runs) and the plots.

fn main() {
    cmdline::one_line_panics();
    // A model file the user names is loaded first in a child of this binary.
    if let Some(code) = contain::serve(&[subject::LOAD_TASK]) {
        std::process::exit(code);
    }
    std::process::exit(repro_gauge::cli::main(std::env::args_os()));
}
