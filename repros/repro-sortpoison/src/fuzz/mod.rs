//! The oracle check and the chain fuzzer.
//!
//! The oracle check comes first: single stages on random arrays in random order with the
//! honest flag (`sorted = false`), where llama.cpp is expected to be right. Every tie-free
//! disagreement there would be an oracle bug, so the audit reports it before any verdict.
//!
//! The fuzzer then builds random chains of 2 to 4 deterministic stages, runs each through
//! the real chain API and compares the final survivor set with the oracle's composition.
//! Each unsound chain is shrunk (fewer stages, fewer logits, rounder numbers, shorter
//! history) while it stays unsound and tie-free, and the minimized cases are grouped by
//! shape, e.g. `sorter -> injector -> truncator`.
//!
//! Code map: [`generate`] (random stages and chains), [`shrink`] (minimizing an unsound
//! chain), [`gate`] (the oracle check), and here the fuzzing loop that ties them together.

pub mod gate;
pub mod generate;
pub mod shrink;

pub use gate::{
    chain_gate, oracle_check, real_oracle, ulp_bound, ulps, GateMismatch, OracleCheck, OracleFn,
    StageTally, ORACLE_CHECK_SEED,
};
pub use generate::{guarded, random_case, random_stage, shape, signature};
pub use shrink::shrink;

use crate::chain::{self, ChainCase, Verdict};
use crate::rng::Rng;
use anyhow::Result;
use serde_json::{json, Value};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq)]
pub struct FuzzReport {
    pub seed: u64,
    pub tried: usize,
    pub sound: usize,
    pub unsound: usize,
    pub undecided: usize,
    /// Unsound chains per shape of their minimized form.
    pub by_shape: BTreeMap<String, usize>,
    /// One minimized case per stage signature (e.g. `top_k -> logit_bias -> top_p`), the
    /// first found; signatures in order of first appearance.
    pub minimized: Vec<ChainCase>,
    /// Unsound chains per stage signature of their minimized form.
    pub by_signature: BTreeMap<String, usize>,
    /// The same chains with `sorted_guard` before every flag-reading stage: how many were
    /// unsound, and how many undecided.
    pub guarded_unsound: usize,
    pub guarded_undecided: usize,
}

pub const FUZZ_SEED: u64 = 0xF2;

pub fn fuzz(seed: u64, chains: usize) -> Result<FuzzReport> {
    let mut rng = Rng::new(seed);
    let mut r = FuzzReport {
        seed,
        tried: 0,
        sound: 0,
        unsound: 0,
        undecided: 0,
        by_shape: BTreeMap::new(),
        minimized: Vec::new(),
        by_signature: BTreeMap::new(),
        guarded_unsound: 0,
        guarded_undecided: 0,
    };
    for _ in 0..chains {
        let case = random_case(&mut rng);
        r.tried += 1;
        match chain::run(&guarded(&case))?.verdict {
            Verdict::Present => r.guarded_unsound += 1,
            // The chain comparison never returns inconclusive; count it with the undecided.
            Verdict::Undecided | Verdict::Inconclusive => r.guarded_undecided += 1,
            Verdict::Absent => {}
        }
        match chain::run(&case)?.verdict {
            Verdict::Absent => r.sound += 1,
            Verdict::Undecided | Verdict::Inconclusive => r.undecided += 1,
            Verdict::Present => {
                r.unsound += 1;
                let small = shrink(&case);
                *r.by_shape.entry(shape(&small)).or_insert(0) += 1;
                let sig = signature(&small);
                let seen = r.by_signature.contains_key(&sig);
                *r.by_signature.entry(sig).or_insert(0) += 1;
                if !seen {
                    r.minimized.push(small);
                }
            }
        }
    }
    Ok(r)
}

impl FuzzReport {
    pub fn to_json(&self) -> Value {
        json!({
            "seed": self.seed,
            "chains_tried": self.tried,
            "sound": self.sound,
            "unsound": self.unsound,
            "undecided_knife_edges": self.undecided,
            "unsound_by_shape": self.by_shape,
            "with_sorted_guard": {"unsound": self.guarded_unsound, "undecided_knife_edges": self.guarded_undecided},
            "minimized": self.minimized.iter().map(|c| json!({
                "shape": shape(c),
                "signature": signature(c),
                "unsound_chains": self.by_signature[&signature(c)],
                "command": c.command(),
            })).collect::<Vec<_>>(),
        })
    }

    pub fn to_text(&self) -> String {
        let mut out = format!(
            "chain fuzzer (seed {:#x}): {} chains of 2-4 stages, {} sound, {} unsound, {} undecided (knife edges)\n",
            self.seed, self.tried, self.sound, self.unsound, self.undecided
        );
        out.push_str(&format!(
            "  with sorted_guard before every flag-reading stage: {} unsound, {} undecided\n",
            self.guarded_unsound, self.guarded_undecided
        ));
        for (shape, n) in &self.by_shape {
            out.push_str(&format!("  {n:>6}  {shape}\n"));
        }
        out.push_str(&format!(
            "  minimized, one per stage signature ({} signatures; count = unsound chains that shrank to it):\n",
            self.minimized.len()
        ));
        for c in &self.minimized {
            out.push_str(&format!(
                "  {:>6}  {:<32} {}\n",
                self.by_signature[&signature(c)],
                signature(c),
                c.command()
            ));
        }
        out
    }
}
