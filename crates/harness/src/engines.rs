//! The engines this binary links, by name: the one registry the repros share. candle is
//! linked on the default build only (this crate's `candle` feature, which the repros turn on
//! by default and the legacy workspace leaves off); asking the legacy build for it is refused
//! in one line.

use anyhow::Result;
use engine::{Engine, EngineName};

pub fn get(name: EngineName) -> Result<Box<dyn Engine>> {
    match name {
        EngineName::Llama => Ok(Box::new(crate::engine::Llama)),
        EngineName::Candle => candle(),
    }
}

#[cfg(feature = "candle")]
fn candle() -> Result<Box<dyn Engine>> {
    Ok(Box::new(engine_candle::Candle))
}

#[cfg(not(feature = "candle"))]
fn candle() -> Result<Box<dyn Engine>> {
    anyhow::bail!(
        "--engine candle: this binary was built without candle (llama-cpp-sys-2 {} links llama.cpp only); use the default build",
        subject::BuildInfo::current().tag()
    )
}
