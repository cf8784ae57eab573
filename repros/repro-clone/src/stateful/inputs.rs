//! The input of every step, the same for an original and its clone: pseudo-random logits, and
//! a scripted token to accept where the sampler does not choose one.

use super::{HISTORY, VOCAB};
use anyhow::Result;
use oracle::TokenId;
use subject::{Candidates, Sampler};

/// A small deterministic generator (so inputs do not depend on any crate's RNG). It is not the
/// workspace's `oracle::rng::Rng`: the clone-stateful results and snapshots pin the text these
/// inputs give (the planted control's detail, adaptive_p's draws), and SplitMix64's inputs
/// would give other text.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) as u32
    }
}

/// The logits of step `t`: values in [-4, 4) on a 1/64 grid.
fn logits(t: usize) -> Vec<f32> {
    let mut g = Lcg(t as u64 + 1);
    (0..VOCAB)
        .map(|_| (g.next() % 512) as f32 / 64.0 - 4.0)
        .collect()
}

/// The token accepted at step `t` when the sampler does not choose: a small alphabet, so
/// repeats (which penalties and DRY react to) are frequent.
fn scripted(t: usize) -> TokenId {
    let mut g = Lcg(1000 + t as u64);
    TokenId((g.next() % 6) as i32)
}

/// One step: apply to step `t`'s logits; the token to accept is the selection, or the script.
pub(super) fn step(s: &mut Sampler, t: usize) -> Result<(Candidates, TokenId)> {
    let mut c = Candidates::from_logits(&logits(t));
    s.apply(&mut c)?;
    let token = c.selected_id().unwrap_or_else(|| scripted(t));
    Ok((c, token))
}

/// `s` after the `HISTORY` steps every sampler runs before it is cloned.
pub(super) fn with_history(mut s: Sampler) -> Result<Sampler> {
    for t in 0..HISTORY {
        let (_, token) = step(&mut s, t)?;
        s.accept(token)?;
    }
    Ok(s)
}

/// Where the history of a sampler that a copy overwrites starts: steps far from the ones
/// [`with_history`] and the continuation use, so its state differs from the original's.
const OTHER_HISTORY_START: usize = 10_000;

/// Steps of that history: not `HISTORY`, so a sampler whose state only counts its steps (a
/// seeded RNG drawn once per apply) still ends up in another state than the original's.
pub const OTHER_HISTORY: usize = HISTORY + 7;

/// `s` after `OTHER_HISTORY` steps of a history of its own, unlike the original's.
pub(super) fn with_other_history(mut s: Sampler) -> Result<Sampler> {
    for t in OTHER_HISTORY_START..OTHER_HISTORY_START + OTHER_HISTORY {
        let (_, token) = step(&mut s, t)?;
        s.accept(token)?;
    }
    Ok(s)
}
