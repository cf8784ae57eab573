//! F7, `draw-conformance`: seeded draws from each engine's samplers, judged against the
//! oracle's survivor set and its renormalized distribution. See `main.rs` for how to read the
//! output.

pub mod audit;
pub mod cli;
pub mod expect;
pub mod oracle_check;
pub mod planted;
pub mod vectors;

pub const FINDING: report::Finding = report::finding!("F7");
pub const NAME: &str = "draw-conformance";
