//! The engines this binary links, by name: the one registry the repros share. It sits in
//! harness, above the adapters (`engine-llama`, `engine-candle`), which depend only on the
//! seam and never on harness, so holding both makes no cycle. candle is linked on the
//! default build only (this crate's `candle` feature, which the repros turn on by default and
//! the workspace `buildgen` generates for any other build leaves off, as it leaves off every
//! member's default features); asking such a build for it is refused in one line.

use anyhow::Result;
use engine::{Engine, EngineName};

pub fn get(name: EngineName) -> Result<Box<dyn Engine>> {
    match name {
        EngineName::Llama => Ok(Box::new(engine_llama::Llama)),
        #[cfg(feature = "candle")]
        EngineName::Candle => Ok(Box::new(engine_candle::Candle)),
        #[cfg(not(feature = "candle"))]
        EngineName::Candle => not_linked(name),
    }
}

/// The refusal for an engine this build leaves out (unused when every engine is linked).
#[allow(dead_code)]
fn not_linked(name: EngineName) -> Result<Box<dyn Engine>> {
    anyhow::bail!(
        "--engine {name}: this binary was built without {} (build {} links llama.cpp only); use the default build",
        name.label(),
        subject::BuildInfo::current().tag()
    )
}
