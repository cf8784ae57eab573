//! Reproducer: candle-transformers 0.11.1's `Sampling::TopKThenTopP` compares top_p with the
//! top k's share of the whole vocabulary, not with their renormalized share. Exit 1 while it
//! does, 0 once it renormalizes first (src/lib.rs: the logits, and why the two rules differ).

use candle::{Device, Tensor};
use candle_topk_then_topp::{check, logits, K, P};
use candle_transformers::generation::{LogitsProcessor, Sampling};

fn main() {
    let logits = Tensor::new(logits(), &Device::Cpu).expect("a logits row");
    let sampling = Sampling::TopKThenTopP {
        k: K,
        p: P,
        temperature: 1.0,
    };
    let draw = |seed| {
        let mut processor = LogitsProcessor::from_sampling(seed, sampling.clone());
        processor.sample(&logits).expect("a draw")
    };
    std::process::exit(check("candle-transformers 0.11.1", draw));
}
