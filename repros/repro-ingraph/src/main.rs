//! F8, `ingraph-<case>`: since b7709 a llama.cpp context can run a sampler chain's
//! backend-capable prefix (greedy, dist, top_k, top_p, min_p, temp, temp_ext, logit_bias,
//! penalties) as ggml ops after the model's output. Those ops are separate implementations of
//! the same samplers; llama.cpp counts every op as supported on a CPU backend, so they run on
//! this machine (each row prints which stages did).
//!
//! Mechanism: each chain runs in a context that samples in the graph (and its CPU tail, if
//! any, through `llama_sampler_sample`'s steps); the same chain runs on the CPU over the raw
//! logits of the same prompt from a plain context of the same shape, checked first to be the
//! graph's starting row bit for bit; and the oracle composes the same stages over them.
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
