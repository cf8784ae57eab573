//! F2, `stale-sorted-truncation`: llama.cpp's top_k, top_p and min_p trust the candidate
//! array's `sorted` flag and read a prefix of the array as it stands, so when a stage before
//! them reorders logits without clearing the flag they cut the wrong set of tokens.
//!
//! Mechanism: top_k (and top_p, min_p, xtc) sort the array and set `sorted = true`.
//! logit_bias (and other stages, see the census in `--audit`) then change logits in place
//! and leave the flag alone. A later top_p takes `data[0]` as the maximum and accumulates
//! probability in array order; top_k and min_p take the first entries. The survivor set then
//! depends on the order of the array, which a correct sampler's never does.
//!
//! Builds: llama-cpp-sys-2 0.1.161 and 0.1.154 (present on both). `make run BUILD=0.1.154
//! REPRO=repro-sortpoison ARGS='...'` picks the build.
//!
//! Output: without `--audit`, one chain (default: the published `top_k=4 -> logit_bias=3:+6
//! -> top_p=0.8` on logits 4..-3) run through the real `llama_sampler_chain_*` API, a per-stage
//! trace of the flag, the subject's survivor set beside the oracle's, the controls (the same
//! chain ending in planted Rust truncators that do and do not trust the flag) and one line
//! `stale-sorted-truncation: present|absent|undecided|inconclusive on <build>` (`undecided`:
//! the sets differ but the oracle's answer rests on a tie; `inconclusive`: a control failed).
//! `--json` prints the same report as one object. `--audit` runs the oracle gate (with a
//! planted oracle error), the permutation audit and the census (with planted truncators and
//! injectors), the chain fuzzer and the published chain, and writes
//! `results/sortpoison.<build>.{json,txt}` and `results/sortpoison-guard.<build>.{json,txt}`.

fn main() {
    cmdline::one_line_panics();
    // A model file the user names is loaded first in a child of this binary, and every
    // census row runs in one.
    if let Some(code) = contain::serve(&[
        subject::LOAD_TASK,
        repro_sortpoison::census::ROW_TASK,
        repro_sortpoison::fuzz::CHUNK_TASK,
    ]) {
        std::process::exit(code);
    }
    std::process::exit(repro_sortpoison::cli::main(std::env::args_os()));
}
