//! F9, `copy-incomplete` and `copy-leaks`: `llama_sampler_copy(src, dst)` (b10405 on) copies
//! `src`'s mutable state into `dst` "while keeping dst's references to the current sampling
//! graph". A sampler without its own `copy_state` gets a clone of `src` instead, so a clone
//! defect carries over into the copy.
//!
//! Mechanism: F1's duplicate-then-continue comparison with the copy in place of the clone.
//! Every stateful sampler (and two chains) runs a history, is copied onto a fresh sampler of
//! the same recipe, and both continue on identical input: any difference in any candidate's
//! bits is `copy-incomplete-<sampler>`. The same original copied onto a sampler that ran a
//! history of its own must behave exactly like the copy onto a fresh one: any difference is
//! `copy-leaks-<sampler>` (the destination's old state survived). The accept-before-apply
//! path on a copy runs under valgrind memcheck in a child. Copies llama.cpp documents as
//! refused (different types, chains of different shapes) run in a contained child, and a
//! refusal (`GGML_ASSERT`, an abort) is the documented outcome: `copy-unrefused-<pair>` is
//! `present` only when the copy goes through or crashes otherwise.
//!
//! Builds: llama.cpp b11429 (llama-cpp-sys-2 0.1.161) and b10200 (0.1.154, where every row is
//! `not offered`: the call arrived in b10405). `make run BUILD=b10200 REPRO=repro-copy` picks
//! the build.
//!
//! Output: the rows, the note on copies between configurations, the controls, and
//! `copy: <verdict> on <build>` (`--json`: the same report). `--audit` also writes
//! `results/copy.<build>.{json,txt}`.

fn main() {
    cmdline::one_line_panics();
    if let Some(code) = contain::serve(&[repro_copy::refusal::TASK]) {
        std::process::exit(code);
    }
    std::process::exit(repro_copy::cli::main(std::env::args_os()));
}
