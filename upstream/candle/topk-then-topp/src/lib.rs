//! The check both binaries run: candle's `LogitsProcessor` with `Sampling::TopKThenTopP`, one
//! draw per seed, held against top_k then top_p over the renormalized top k.
//!
//! The logits are ln(1, 2, 1, 4, 1, 1): the softmax is 0.1, 0.2, 0.1, 0.4, 0.1, 0.1, and
//! top_k = 2 keeps ids 3 (0.4) and 1 (0.2), 0.1 clear of the four others. Then top_p = 0.5:
//! - over the renormalized top 2 (transformers' `TopKLogitsWarper` then `TopPLogitsWarper`,
//!   vLLM, llama.cpp) id 3 alone has 2/3 >= 0.5, so top_p keeps {3}: every draw is 3;
//! - over the whole vocabulary (candle 0.11.1) id 3 has 0.4 < 0.5 while the top 2 hold
//!   0.6 > 0.5, so top_p keeps {1, 3} and draws 1 with probability 1/3.
//!
//! Every comparison clears 0.5 by 0.1 or more, about a million times f32's rounding here, so
//! neither set depends on rounding; only the draws are random, and fixed by their seeds.

use std::collections::BTreeMap;

/// exp(logit) of each id; the softmax is each over their sum, 10.
const WEIGHTS: [f64; 6] = [1.0, 2.0, 1.0, 4.0, 1.0, 1.0];
pub const K: usize = 2;
pub const P: f64 = 0.5;
/// One draw per seed, seeds 0..DRAWS.
pub const DRAWS: u64 = 200;

/// The logits row the sampler gets.
pub fn logits() -> Vec<f32> {
    WEIGHTS.iter().map(|w| w.ln() as f32).collect()
}

/// top_k = K then top_p = P in f64, each id's probability taken over the top K
/// (`renormalized`) or over the whole vocabulary (candle 0.11.1): the ids kept (most probable
/// first, up to the one whose cumulative probability reaches P), each with its chance of a draw.
pub fn rule(renormalized: bool) -> Vec<(u32, f64)> {
    let mut ids: Vec<usize> = (0..WEIGHTS.len()).collect();
    ids.sort_by(|&a, &b| WEIGHTS[b].total_cmp(&WEIGHTS[a]));
    ids.truncate(K);
    let top: f64 = ids.iter().map(|&i| WEIGHTS[i]).sum();
    let scale = if renormalized {
        top
    } else {
        WEIGHTS.iter().sum()
    };
    let mut cum = 0.0;
    ids.retain(|&i| {
        let keep = cum < P;
        cum += WEIGHTS[i] / scale;
        keep
    });
    let kept: f64 = ids.iter().map(|&i| WEIGHTS[i]).sum();
    ids.iter().map(|&i| (i as u32, WEIGHTS[i] / kept)).collect()
}

/// Draws once per seed with `draw`, prints what the renormalized rule expects and what came,
/// and returns the exit status: 0 when every draw is an id that rule keeps, 1 otherwise.
pub fn check(what: &str, draw: impl Fn(u64) -> u32) -> i32 {
    let (reference, whole) = (rule(true), rule(false));
    let keeps = |id: &u32| reference.iter().any(|(i, _)| i == id);
    let ids = |set: &[(u32, f64)]| set.iter().map(|(i, _)| i.to_string()).collect::<Vec<_>>();
    // Under the whole-vocabulary rule each draw stays inside `reference` with chance `inside`.
    let inside: f64 = whole.iter().filter(|(i, _)| keeps(i)).map(|(_, q)| q).sum();
    let miss = inside.powi(DRAWS as i32);
    assert!(
        miss < 1e-9,
        "{DRAWS} draws miss the whole-vocabulary rule: {miss:e}"
    );
    let (kept, other) = (ids(&reference).join(","), ids(&whole).join(","));
    println!("expected: top_k={K} then top_p={P} over the renormalized top {K} keeps {{{kept}}}: all {DRAWS} draws (seeds 0..{DRAWS}) in it");
    println!("          (the whole-vocabulary rule keeps {{{other}}}: all {DRAWS} in {{{kept}}} has chance {miss:.1e})");
    let mut counts = BTreeMap::new();
    for seed in 0..DRAWS {
        *counts.entry(draw(seed)).or_insert(0u64) += 1;
    }
    let outside: u64 = counts
        .iter()
        .filter(|(id, _)| !keeps(id))
        .map(|(_, n)| n)
        .sum();
    let got: Vec<String> = counts.iter().map(|(id, n)| format!("{id}:{n}")).collect();
    println!(
        "got:      {what}: id:draws {}, {outside} outside {{{kept}}}",
        got.join(" ")
    );
    i32::from(outside > 0)
}
