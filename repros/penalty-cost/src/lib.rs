//! F5: what llama.cpp's penalties stage costs beside `ledger-penalties`, per apply and per
//! generated token. The binary in `main.rs` only calls [`cli::main`]; the parts live here so
//! the tests can call them: the stages under test, built in one place ([`penalty`]), the
//! synthetic rows and the two candidate layouts ([`layout`]), medians and their bootstrap
//! intervals ([`stats`]), the per-apply timing ([`apply`]), the model-decoding rounds
//! ([`e2e`]) and what is printed and written ([`output`]); the same stage on two llama.cpp
//! builds timed turn by turn in one run ([`versus`]: stock against patched, per apply;
//! [`overhead`]: each build's end-to-end overhead, interleaved); and the comparison of
//! bitcheck.c's outputs on the two builds ([`bitcheck`]).
//!
//! This is a measurement, not a verdict: it writes under `results/bench/`, and no test
//! asserts anything about speed.

pub mod apply;
pub mod bitcheck;
pub mod cli;
pub mod e2e;
pub mod layout;
pub mod output;
pub mod overhead;
pub mod penalty;
pub mod stats;
pub mod versus;

pub const FINDING: &str = "F5";
