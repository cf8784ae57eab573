//! F2: stale `sorted` flags and llama.cpp's truncation samplers. The binary is a thin shell
//! over these modules so the tests can call every part of the audit directly.

pub mod audit;
pub mod census;
pub mod chain;
pub mod cli;
pub mod draws;
pub mod fuzz;
pub mod perm;
pub mod planted;
pub mod stage;
pub mod text;

/// The finding these reports belong to.
pub const FINDING: report::Finding = report::finding!("F2");
