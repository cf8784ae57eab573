//! F2, `stale-sorted-truncation`: llama.cpp's top_k, top_p and min_p trust the candidate
//! array's `sorted` flag and read a prefix of the array as it stands. top_k (and top_p, min_p,
//! xtc) sort and set the flag; logit_bias (and the other stages the census finds) change
//! logits in place and leave it set; a later top_p then takes `data[0]` as the maximum and
//! top_k and min_p take the first entries, so the survivor set depends on the array's order.
//! On llama.cpp b11429 (llama-cpp-sys-2 0.1.161) and b10200 (0.1.154) (`make run BUILD=b10200
//! REPRO=repro-sortpoison`).
//!
//! Without `--audit`: one chain (default: the published `top_k=4 -> logit_bias=3:+6 ->
//! top_p=0.8` on logits 4..-3) through the real `llama_sampler_chain_*` API, the flag after each
//! stage, the subject's survivor set beside the oracle's, the controls (the same chain ending
//! in planted Rust truncators that do and do not trust the flag) and one line
//! `stale-sorted-truncation: present|absent|undecided|inconclusive on <build>` (`undecided`:
//! the oracle's answer rests on a tie; `inconclusive`: a control failed); `--json` for JSON.
//! `--audit` runs the oracle gate, the permutation audit, the census, the chain fuzzer and the
//! published chain, each with planted controls, and writes
//! `results/sortpoison{,-guard}.<build>.{json,txt}`.

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
