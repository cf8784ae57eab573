//! Two samplers written in Rust that plug into any llama.cpp chain through the public
//! custom-sampler interface (`llama_sampler_i` + `llama_sampler_init`):
//!
//! - [`ledger_penalties`]: llama.cpp's penalties (same parameters; in [`Mode::Default`] the same
//!   f32 arithmetic, bit for bit) with a complete clone, a complete reset, an apply that costs
//!   O(distinct ids in the window) instead of O(vocabulary), a `sorted` flag cleared exactly
//!   when the order may have broken, a [`Mode::Normalized`] that penalizes log-probabilities
//!   and a [`Mode::Subtractive`] that subtracts `ln theta` (both independent of the logits'
//!   zero point).
//! - [`sorted_guard`]: a stage that checks, in one pass, that an array flagged sorted really is,
//!   and clears the flag when it is not. Put it before each truncation stage in chains where a
//!   reordering stage (logit_bias, grammar) may follow a sorter. A guard was chosen over
//!   rewriting top_k/top_p/min_p because it keeps llama.cpp's own truncation code (the
//!   subject) and fixes every stage after it at once, at the cost of one pass over an array
//!   that a previous truncation has usually already shortened.
//!
//! Usage (this block is also in docs/findings/F5.md; a test keeps the two identical):

#![doc = include_str!("../USAGE.md")]

mod guard;
mod penalties;

pub use guard::sorted_guard;
pub use penalties::{ledger_penalties, Mode, PenaltyConfig, SamplerKind};
