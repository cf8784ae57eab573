//! F6, `edge-inputs`: what llama.cpp's built-in samplers do with inputs the public C API
//! accepts but a careful caller might not expect (empty, all `-inf`, NaN, ties, `min_keep`
//! above the size, ...). Each probe runs in a supervised child (`contain`), so an abort is a
//! recorded outcome, not the end of the audit. See `main.rs` for how to read the output.

pub mod audit;
pub mod cli;
pub mod cost;
pub mod inputs;
pub mod judge;
pub mod oracle_check;
pub mod outcome;
pub mod planted;
pub mod probe;
pub mod rows;
pub mod samplers;

pub const FINDING: report::Finding = report::finding!("F6");
pub const NAME: &str = "edge-inputs";
