//! Exact reference semantics for the samplers under audit.
//!
//! This crate is plain Rust with no FFI and no dependency on llama.cpp: every function here
//! is a from-scratch statement of what a sampler's parameters promise, written so a reader
//! can check it by eye. Subjects are judged against these functions, never the other way
//! round, and each function is tested on its own before it judges anything.

pub mod gauge;
pub mod penalty;
pub mod rng;
pub mod scope;
pub mod stage;
pub mod stats;
pub mod truncation;
pub mod window;

/// A token id as llama.cpp sees it (`llama_token` is an `i32`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TokenId(pub i32);

impl std::fmt::Display for TokenId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}
