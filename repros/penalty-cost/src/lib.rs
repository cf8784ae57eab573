//! F5: what llama.cpp's penalties stage costs beside `ledger-penalties`. The parts live here
//! so the tests can call them: the stages under test, built in one place ([`stage`]), the
//! synthetic rows and the two candidate layouts ([`layout`]), and medians with their
//! bootstrap intervals ([`stats`]).
//!
//! This is a measurement, not a verdict: it writes under `results/bench/`, and no test
//! asserts anything about speed.

pub mod layout;
pub mod stage;
pub mod stats;

/// The finding these measurements belong to.
pub const FINDING: &str = "F5";
