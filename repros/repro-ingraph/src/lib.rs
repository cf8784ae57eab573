//! F8: llama.cpp's in-graph sampling, judged against the same chain on the CPU and the oracle
//! (`compare`). `main.rs` only calls [`cli::main`]; everything it does is here, so tests can
//! call it.

pub mod audit;
pub mod case;
pub mod check;
pub mod cli;
pub mod compare;
pub mod draws;
pub mod dyntemp;
pub mod planted;
pub mod ties;

/// The finding these reports belong to.
pub const FINDING: report::Finding = report::finding!("F8");
