//! F1: cloning llama.cpp's penalties sampler drops its token histogram; and, per stateful
//! sampler, whether its clone is complete. `main.rs` only calls [`cli::main`]; everything it
//! does is here, so tests can call it.

pub mod audit;
pub mod cli;
pub mod counts;
pub mod minimal;
pub mod planted;
pub mod stateful;
pub mod sweep;

/// The finding these reports belong to.
pub const FINDING: report::Finding = report::finding!("F1");
