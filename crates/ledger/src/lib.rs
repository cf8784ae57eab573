//! Two samplers written in Rust that plug into any llama.cpp chain through the public
//! custom-sampler interface (`llama_sampler_i` + `llama_sampler_init`):
//!
//! - [`ledger_penalties`]: llama.cpp's penalties (same parameters; in [`Mode::Default`] the same
//!   f32 arithmetic, bit for bit) with a complete clone, a complete reset, an apply that costs
//!   O(distinct ids in the window) instead of O(vocabulary), a `sorted` flag cleared exactly
//!   when the order may have broken, and a [`Mode::Normalized`] that penalizes log-probabilities
//!   (which makes the penalty independent of the logits' zero point).
//! - [`sorted_guard`]: a stage that checks, in one pass, that an array flagged sorted really is,
//!   and clears the flag when it is not. Put it before each truncation stage in chains where a
//!   reordering stage (logit_bias, grammar) may follow a sorter. A guard was chosen over
//!   rewriting top_k/top_p/min_p because it keeps llama.cpp's own truncation code (the
//!   subject) and fixes every stage after it at once, at the cost of one pass over an array
//!   that a previous truncation has usually already shortened.
//!
//! ```
//! use ledger::{ledger_penalties, sorted_guard, Mode, PenaltyConfig};
//! use subject::{Candidates, Sampler, SamplerSpec, TokenId};
//!
//! // A chain built with llama_sampler_chain_add, as any llama.cpp program builds one.
//! let cfg = PenaltyConfig { n_vocab: 8, last_n: 64, repeat: 1.3, freq: 0.0, present: 0.0, mode: Mode::Default };
//! let mut chain = Sampler::chain(vec![
//!     ledger_penalties(cfg)?,
//!     SamplerSpec::TopK { k: 4 }.build()?,
//!     SamplerSpec::LogitBias { n_vocab: 8, biases: vec![(TokenId(3), 6.0)] }.build()?,
//!     sorted_guard()?,
//!     SamplerSpec::TopP { p: 0.8, min_keep: 1 }.build()?,
//! ])?;
//! chain.accept(TokenId(0))?;
//! let mut c = Candidates::from_logits(&[4.0, 3.0, 2.0, 1.0, 0.0, -1.0, -2.0, -3.0]);
//! chain.apply(&mut c)?;
//! // With the guard, top_p keeps only the biased token (without it: 4 tokens).
//! assert_eq!(c.ids_ascending(), vec![TokenId(3)]);
//! # Ok::<(), anyhow::Error>(())
//! ```

mod guard;
mod penalties;

pub use guard::sorted_guard;
pub use penalties::{ledger_penalties, Mode, PenaltyConfig};
