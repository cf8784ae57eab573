//! F7, `draw-conformance`: draws from an engine's sampler follow the distribution its
//! parameters promise, or they do not. candle 0.11.1's `TopKThenTopP` compares `p` with the
//! full-vocabulary probabilities of the top-k tokens instead of their renormalized ones, so it
//! keeps (and draws) a token that top-k then top-p must cut.
//!
//! Mechanism: each engine draws N times from one seeded sampler on a fixed logit vector
//! (llama.cpp: a chain of temp, top_k, top_p and min_p ending in `dist`; candle: its
//! `LogitsProcessor`). The oracle (`oracle::truncation`) gives the survivor set, as tie
//! classes, and the renormalized probabilities. A draw outside that set is a definite defect;
//! otherwise Pearson's chi-square test (`oracle::fit`) at the level PREREG states.
//!
//! Builds: llama.cpp b11429 (llama-cpp-sys-2 0.1.161) and b10200 (0.1.154); candle 0.11.1 on
//! the default build only.
//!
//! Output: per input (vector, configuration, draws, verdict), the ids drawn with their counts,
//! the oracle's classes (`2 of {0,1,2}` is a tie class that keeps two), the test; the
//! controls; a verdict row per input with `--audit`; `draw-conformance: <verdict> on <engine
//! build>`. `--json`: the report header (with `engine`), then `support`, `oracle`, `p_value`.

fn main() {
    cmdline::one_line_panics();
    std::process::exit(repro_engines::cli::main(std::env::args_os()));
}
