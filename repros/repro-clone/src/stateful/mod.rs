//! Clone equivalence for every built-in sampler that keeps state across steps: one verdict
//! row `clone-incomplete-<sampler>` per sampler and build.
//!
//! Each sampler runs `HISTORY` steps on pseudo-random logits, is cloned, and then the original
//! and the clone get identical inputs for `CONTINUE` more steps: the same logits and the same
//! accepted token (the original's choice where the sampler chooses, a scripted token where it
//! does not). A complete clone produces bit-identical output at every step (selected id, and
//! every candidate's id, logit and p), so any difference is `present`; no tolerance applies.
//!
//! For a clone that differs, two diagnostics say what it dropped:
//! - *draw only*: at the first differing step the candidate arrays are bit-identical and only
//!   the selected id differs, so the state that shapes the distribution was copied and the
//!   random draw was not (the RNG state);
//! - *like a fresh sampler*: over every continuation step the clone's output equals that of a
//!   sampler built afresh with the same parameters and fed the same tokens, so the clone kept
//!   none of the accumulated state.
//!
//! The accept-before-apply path on a clone (llama.cpp's adaptive-p reads a cache the clone
//! does not copy) is checked in a child process under valgrind memcheck, never run natively.
//!
//! Controls, run through the same comparison: a planted Rust sampler whose clone forgets its
//! state (must differ) and one whose clone copies it (must be equivalent); for the memcheck
//! probe, a planted sampler that reads past a heap buffer in `accept` (must be reported) and
//! the complete planted clone (must be clean).

mod audit;
mod equivalence;
mod inputs;
mod memcheck;
mod samplers;

pub use audit::{run, Audit, SamplerRow};
pub use equivalence::{
    check, check_across, check_leak, duplicate, leak_visible, Duplicate, Equivalence,
};
pub use inputs::OTHER_HISTORY;
pub use memcheck::{
    controls as memcheck_controls, memcheck, probe_main, probe_target, Memcheck, ProbeTarget,
    PROBE_ENV,
};
pub use samplers::{penalties_over, planted, planted_copy, subjects, SamplerRecipe};

/// Candidate ids per step: every step offers ids `0..VOCAB`.
pub const VOCAB: i32 = 32;
/// Steps every sampler runs before it is cloned (or copied).
pub const HISTORY: usize = 24;
/// Steps the original and the clone then run on the same input.
pub const CONTINUE: usize = 24;
/// The seed of every seeded sampler (so a fresh sampler and a clone can be compared).
pub const SEED: u32 = 20_261_129;

/// The verdict family's name; each row is `clone-incomplete-<sampler>`.
pub const FAMILY: &str = "clone-incomplete";
