//! F8, `ingraph-<case>`: since b7709 a llama.cpp context can run a sampler chain's
//! backend-capable prefix (greedy, dist, top_k, top_p, min_p, temp, temp_ext, logit_bias,
//! penalties) as ggml ops after the model's output. Those ops are separate implementations of
//! the same samplers; on the CPU backend every op is supported, so they run on this machine.
//!
//! Mechanism: one decode whose output row belongs to two sequences, one with the chain and
//! one without, yields both the in-graph result and the raw logits it came from. The same
//! chain then runs on the CPU over those raw logits, and the oracle composes the same stages.
//! Each case is a verdict row: `present` when the graph keeps a different set from the
//! oracle's, a survivor's logit is further from the CPU's than the case allows, a greedy
//! choice differs, a draw falls outside the survivors, or the graph's probabilities are off
//! the oracle's softmax. Planted controls: a `min_p` written here that runs in the graph,
//! exact (must pass) and ignoring `min_keep` (must be flagged).
//!
//! Builds: b11429 and b10200 (both sample in the graph); a release before b7709 reports `not
//! offered`. `make run BUILD=b10200 REPRO=repro-ingraph` picks the build.
//!
//! Output: the rows, the controls and `ingraph: <verdict> on <build>` (`--json`: the same
//! report). `--stage TEXT` (repeatable, in chain order) runs one chain of your own instead of
//! the registered ones. `--audit` also writes `results/ingraph.<build>.{json,txt}`.

fn main() {
    cmdline::one_line_panics();
    // A model file the user names is loaded first in a child of this binary.
    if let Some(code) = contain::serve(&[subject::LOAD_TASK]) {
        std::process::exit(code);
    }
    std::process::exit(repro_ingraph::cli::main(std::env::args_os()));
}
