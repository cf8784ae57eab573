//! F3: repetition-penalty scope. The binary is a thin shell over these modules so the tests
//! can call every part directly.

pub mod audit;
pub mod cli;
pub mod controls;
pub mod cross;
pub mod decode;
pub mod engine_load;
pub mod planted_penalty;
pub mod planted_sampler;
pub mod plot;
pub mod rule;
pub mod run;
pub mod scope;
pub mod sweep;
pub mod vector;

/// The finding these reports belong to.
pub const FINDING: report::Finding = report::finding!("F3");
