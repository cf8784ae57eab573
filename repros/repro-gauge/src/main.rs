//! F4, `penalty-gauge-dependence`: the sign-branched repetition penalty (`z > 0 ? z / theta :
//! z * theta`, shipped by llama.cpp, transformers, vLLM and candle) changes what it does when
//! every logit moves by the same constant, which softmax ignores; the subtractive penalty
//! (`z - ln theta`) and the sign branch on log-probabilities do not.
//!
//! Mechanism: a seen id's logit above 0 is divided by theta (a cut of z(1 - 1/theta)), one
//! at or below 0 is multiplied (a cut of |z|(theta - 1)), so the cut depends on where the
//! model's zero point happens to sit. Shift the zero point and different tokens win.
//!
//! Builds: llama-cpp-sys-2 0.1.161 and 0.1.154; models SmolLM2-135M-Instruct Q4_1 (default)
//! and Gemma3-270M Q4_K_M from `make models`, or any GGUF path. The sign-branched operator
//! runs through llama.cpp's own penalties stage, handed the logits shifted by c in f32; the
//! other two run through the oracle (`oracle::gauge`), whose 0 is 0 by construction and is
//! labelled so. The controls run a planted two-token case through the same detector and chain
//! path: our sign-branched sampler must flip there, a planted subtractive one must not.
//!
//! Output: per operator, theta and shift, the teacher-forced flip rate along the unshifted
//! trajectory, where the free-running shifted trajectory diverges and the share of differing
//! tokens; the share of seen ids with a positive raw logit. `--json` prints the report (its
//! header, then `model`, `positive_share`, `rows`). `--audit` runs SmolLM2 and Gemma3 and the
//! structured-output corpus and writes `results/gauge.<build>.{json,txt}` and two plots.

fn main() {
    cli::one_line_panics();
    std::process::exit(repro_gauge::cli::main(std::env::args_os()));
}
