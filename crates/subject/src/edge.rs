//! Applying a sampler to an array the wrapper would refuse, for the edge-input probes only.
//!
//! [`Sampler::apply`] refuses empty arrays, NaN and `+inf` logits and repeated ids, because
//! llama.cpp may abort on them. The edge-input finding (F6) asks exactly what llama.cpp
//! does with such arrays, so this path hands them over. It keeps the guarantees that protect
//! *memory*: ids are never negative and stay below the sampler's vocabulary (samplers index
//! tables by id), an empty array still points at one readable slot (a sampler that reads
//! `data[0]` of an empty array reads that slot, not a dangling pointer), and the header C
//! leaves behind is checked before anything is read back.
//!
//! What it does not protect against is the process ending: a `GGML_ASSERT` aborts. Call it only
//! inside a contained child (`contain::run`), as `repro-edges` does.

use crate::candidates::lend_first;
use crate::compat as sys;
use crate::sampler::Sampler;
use anyhow::{bail, Context, Result};
use oracle::TokenId;

/// One entry as C left it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RawEntry {
    pub id: i32,
    pub logit: f32,
    pub p: f32,
}

/// The array after an unvalidated apply: the entries inside the window C described, and its
/// `selected` and `sorted` fields exactly as left (`selected` may point outside the window).
#[derive(Debug, Clone, PartialEq)]
pub struct RawResult {
    pub entries: Vec<RawEntry>,
    pub selected: i64,
    pub sorted: bool,
}

/// The value of the readable slot behind an empty array.
const SLOT: sys::llama_token_data = sys::llama_token_data {
    id: 0,
    logit: 0.0,
    p: 0.0,
};

impl Sampler {
    /// Applies the sampler to `entries` (in the order given, `p` 0, `sorted` as given,
    /// `selected` -1) without the checks of [`Sampler::apply`] beyond those that keep memory
    /// safe. **May abort the process**: run it in a contained child.
    pub fn apply_unvalidated(
        &mut self,
        entries: &[(TokenId, f32)],
        sorted: bool,
    ) -> Result<RawResult> {
        for (id, _) in entries {
            if id.0 < 0 {
                bail!("id {id} is negative (samplers index tables by id)");
            }
            if let Some(n) = self.n_vocab() {
                if id.0 >= n {
                    bail!("id {id} is outside the sampler's vocabulary of {n}");
                }
            }
        }
        let mut data: Vec<sys::llama_token_data> = entries
            .iter()
            .map(|(id, logit)| sys::llama_token_data {
                id: id.0,
                logit: *logit,
                p: 0.0,
            })
            .collect();
        let len = data.len();
        if data.is_empty() {
            data.push(SLOT);
        }
        // SAFETY: `data` holds at least max(len, 1) initialized entries and lives for the
        // whole call; every id is in the sampler's range.
        let left = lend_first(&mut data, len, -1, sorted, |arr| unsafe {
            self.apply_raw(arr)
        })
        .context("the sampler left the array's window outside the buffer it was given")?;
        Ok(RawResult {
            entries: data[left.window()]
                .iter()
                .map(|d| RawEntry {
                    id: d.id,
                    logit: d.logit,
                    p: d.p,
                })
                .collect(),
            selected: left.selected,
            sorted: left.sorted,
        })
    }
}
