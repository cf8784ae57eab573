//! F6, `edge-inputs`: llama.cpp's built-in samplers, handed inputs the public C API accepts
//! (an empty array, one candidate, all or some logits `-inf`, NaN and `+inf` logits, equal
//! logits, a probability that is 0 in f32, logits large enough to overflow `exp`, ids out of
//! order or repeated) and parameter edges (`top_k` 0 and negative, `min_keep` above the
//! size), variously abort the process, return NaN, keep a set the oracle disagrees with, or
//! behave.
//!
//! Mechanism: llama.cpp checks preconditions with `GGML_ASSERT`, which aborts, and computes
//! softmax and entropy in f32 without guarding `-inf` or underflow. This program probes each
//! sampler on each input in its own child process (`contain`), so an abort is a row in the
//! table, not the end of the run; the array a probe leaves is compared with the oracle
//! (`oracle::truncation`) wherever the oracle has an answer.
//!
//! Builds: llama.cpp b11429 (llama-cpp-sys-2 0.1.161) and b10200 (0.1.154) (`make run
//! BUILD=b10200 REPRO=repro-edges` picks the build).
//!
//! Output: the inputs, the samplers, a table of outcome codes (sampler x input; upper case is
//! judged against the oracle, lower case is recorded without an oracle answer), every cell
//! that is not `ok` with what the array held, the robustness table (both rules), the planted
//! controls' table, the controls, the verdict rows (`edge-set-<sampler>`,
//! `edge-robustness-<sampler>`, `edge-dist-fallback`) with each defect row's contract, and
//! `edge-inputs: <verdict> on <build>`.
//! `--json` prints the same report as one object; `--audit` also writes
//! `results/edges.<build>.{json,txt}`. The command-line tools elsewhere keep refusing these
//! inputs: only this program hands them to llama.cpp, and only inside a child.

fn main() {
    cmdline::one_line_panics();
    if let Some(code) = contain::serve(&[repro_edges::probe::TASK]) {
        std::process::exit(code);
    }
    std::process::exit(repro_edges::cli::main(std::env::args_os()));
}
