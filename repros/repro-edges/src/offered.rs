//! What the linked build cannot make. A sampler a release lacks is a [`NotOffered`] error,
//! told apart from a failure by its type: the audit records it and goes on, while any other
//! error still ends the run.

use anyhow::Result;
use report::{Control, ControlKind};
use std::fmt::Display;
use subject::NotOffered;

/// `r` with a sampler the build does not offer (`Ok(Err(_))`) split from every other failure
/// (`Err`).
pub fn offered<T>(r: Result<T>) -> Result<Result<T, NotOffered>> {
    match r {
        Ok(x) => Ok(Ok(x)),
        Err(e) => match e.downcast_ref::<NotOffered>() {
            Some(n) => Ok(Err(n.clone())),
            None => Err(e),
        },
    }
}

/// A control the build cannot run. It is failed, not left out: a detector nobody checked
/// on this build allows no verdict (`report::judge` makes it inconclusive).
pub fn not_run(kind: ControlKind, name: impl Into<String>, why: impl Display) -> Control {
    Control::new(kind, name, false, format!("not run: {why}"))
}
