//! The workspace's seeded generator lives in the oracle crate (`oracle::rng`); re-exported
//! here so the fuzzer's code reads as before.

pub use oracle::rng::Rng;
