//! The reproducer's check on candle-transformers 0.11.1's `src/generation/mod.rs` with
//! `fix.patch` applied: exit 0 once top_p is cut on the renormalized top k.

// build.rs copies the file from the cargo registry into OUT_DIR and patches it there. It is
// candle's module as published plus the patch, so its unused items and lints are candle's.
#[allow(dead_code, clippy::all)]
mod generation {
    include!(concat!(env!("OUT_DIR"), "/generation_patched.rs"));
}

use candle::{Device, Tensor};
use candle_topk_then_topp::{check, logits, K, P};
use generation::{LogitsProcessor, Sampling};

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
    std::process::exit(check("candle-transformers 0.11.1 + fix.patch", draw));
}
