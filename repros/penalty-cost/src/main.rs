//! F5, the penalty stage's cost: llama.cpp's penalties stage costs time in proportion to the
//! whole vocabulary on every token, while `ledger-penalties` in id order costs time in
//! proportion to the few distinct ids in its window.
//!
//! Mechanism: llama.cpp's apply walks every candidate and looks each id up in a hash map of
//! counts. `ledger-penalties` keeps dense counts and the list of ids it has seen; when the
//! array is in id order (as llama.cpp builds it from a logits row) it goes straight to those
//! ids, and when the array has been reordered (shuffled, as after top_k) it falls back to one
//! pass over the array with an array lookup in place of the hash.
//!
//! Output (`make bench`): the per-apply table, one line per vocabulary size (49,152 and
//! 262,144) and layout (`id-order`, `shuffled`): median ms per `llama_sampler_apply` of
//! llama.cpp's stage, of `ledger-penalties` and of its normalized mode, the ratio llama.cpp
//! over ledger (how many times faster), and the refill time kept out of the samples. Then the
//! end-to-end block: Gemma3-270M greedy decoding with no penalty, llama.cpp's penalties and
//! `ledger-penalties`, interleaved over at least 20 rounds, each as the median ms per token
//! over rounds and the overhead over no penalty (paired within each round), with 95%
//! bootstrap intervals in brackets. The same numbers go to `results/bench/penalty-cost.json`
//! and a plot to `results/bench/penalty-cost.svg`. The timings are one run on a shared
//! machine: read the ratios and overheads, not the absolute milliseconds.
//!
//! Two more modes measure the upstream patch (`upstream/llama.cpp/penalties-full-pass`):
//! `--against <patched build's penalty-cost>` times llama.cpp's stage of both builds turn by
//! turn per apply, then both builds' end-to-end overhead interleaved round by round
//! (`results/bench/penalty-versus.json`, `results/bench/penalty-overhead-versus.json`);
//! `--bitcheck <stock output> <patched output>` compares bitcheck.c's two outputs
//! (`results/bench/penalty-bitcheck.json`), whose first sentence names the arrays where the
//! patch may differ.

fn main() {
    cmdline::one_line_panics();
    std::process::exit(penalty_cost::cli::main(std::env::args_os()));
}
