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
//! Builds: llama-cpp-sys-2 0.1.154 (defect present) and 0.1.161 (fixed; the clone copies
//! `token_count`). `make run BUILD=0.1.154 REPRO=repro-clone` picks the build.
//!
//! Output: without flags, the published case (window 4, history 5,5,6, clone, then 7,8) as a
//! table of subject counts beside the oracle's (a from-scratch histogram of the window) and
//! one line `clone-drops-token-count: present|absent on <build>`. `--json` prints the same as
//! one object. `--audit` adds the exhaustive sweep, clone equivalence at every prefix, the
//! controls and the clone table for every stateful sampler, and writes
//! `results/clone.<build>.json`; its timing goes to stderr only.

fn main() {
    cli::one_line_panics();
    std::process::exit(repro_clone::cli::main(std::env::args_os()));
}
