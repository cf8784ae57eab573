//! F1, `clone-drops-token-count`: `llama_sampler_clone` on a penalties sampler copied the
//! window of recent tokens but not the per-token counts, so a clone stops penalizing repeats
//! and, once it evicts a token accepted before the clone, drives its count negative and
//! boosts it.
//!
//! Mechanism: `llama_sampler_penalties_clone` assigned `prev` (the ring buffer) and left
//! `token_count` (the incremental histogram) empty. The counts are private; this program reads
//! them through the public API with `penalty_repeat = 1`, `present = 0`, `freq = 0.5` and every
//! candidate at logit 1024, where `count = (1024 - logit') / 0.5` exactly.
//!
//! Builds: llama.cpp b10200 (llama-cpp-sys-2 0.1.154; defect present) and b11429 (0.1.161;
//! fixed, the clone copies `token_count`). `make run BUILD=b10200 REPRO=repro-clone` picks the
//! build.
//!
//! Output: the published case (window 4, history 5,5,6, clone, then 7,8): subject counts
//! beside the oracle's window histogram, the controls, and
//! `clone-drops-token-count: <verdict> on <build>` (`--json`: the same report). `--stateful`:
//! one row `clone-incomplete-<sampler>` per stateful sampler (adaptive-p differs on both
//! builds; mirostat and penalties too on b10200). `--audit` adds the exhaustive sweep and
//! writes `results/clone{,-stateful}.<build>.{json,txt}`, its timing to stderr and
//! `results/timing/`.

fn main() {
    cmdline::one_line_panics();
    std::process::exit(repro_clone::cli::main(std::env::args_os()));
}
