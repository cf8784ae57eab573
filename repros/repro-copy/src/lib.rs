//! F9: `llama_sampler_copy`, judged by F1's duplicate-then-continue comparison
//! (`repro_clone::stateful`). `main.rs` only calls [`cli::main`]; everything it does is here,
//! so tests can call it.

pub mod audit;
pub mod cli;
pub mod refusal;

/// The finding these reports belong to.
pub const FINDING: report::Finding = report::finding!("F9");
