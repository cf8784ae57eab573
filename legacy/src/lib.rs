//! Empty on purpose: this package only gives the repro binaries and tests under `../repros`
//! a second lockfile, pinned to llama-cpp-sys-2 0.1.154. See `Cargo.toml`.
