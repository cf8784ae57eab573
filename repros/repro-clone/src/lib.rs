//! F1: cloning llama.cpp's penalties sampler drops its token histogram; and, per stateful
//! sampler, whether its clone is complete.
//!
//! The binary in `main.rs` only calls [`cli::main`]; everything it does is here so tests can
//! call it: the count readers ([`counts`]), the published case ([`minimal`]), the exhaustive sweep
//! ([`sweep`]), the clone check for every stateful sampler ([`stateful`]), the planted
//! samplers its controls use ([`planted`]) and the whole audit with its report ([`audit`]).

pub mod audit;
pub mod cli;
pub mod counts;
pub mod minimal;
pub mod planted;
pub mod stateful;
pub mod sweep;

/// The finding these reports belong to.
pub const FINDING: &str = "F1";
