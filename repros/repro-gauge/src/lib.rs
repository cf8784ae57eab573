//! F4: the zero-point dependence of the sign-branched repetition penalty. The binary is a
//! thin shell over these modules so the tests can call every part directly.

pub mod audit;
pub mod cli;
pub mod engine_slot;
pub mod free_running;
pub mod implementation;
pub mod interval;
pub mod json;
pub mod planted;
pub mod plot;
pub mod reference;
pub mod rule;
pub mod schema;
pub mod shift;
pub mod tables;
pub mod teacher_forced;

/// The finding these reports belong to.
pub const FINDING: report::Finding = report::finding!("F4");
