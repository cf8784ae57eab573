//! A safe wrapper over llama.cpp's sampler C API, as shipped by `llama-cpp-sys-2`: the subject
//! under audit, with no sampling logic of its own. It owns each llama.cpp handle exactly once
//! ([`Sampler`] frees on drop), keeps the candidate array's `size`, `sorted` and `selected`
//! visible ([`Candidates`]), and checks inputs before they reach C, because llama.cpp answers
//! bad input with `GGML_ASSERT` (an abort) or a C++ exception (which must never unwind into
//! Rust). What it refuses is listed in [`promise`]; [`ffi_calls_on_this_thread`] counts the
//! calls it makes.
//!
//! The same source builds against every release from b4240: the build script reads the linked
//! release's header, and [`compat`](crate) holds the few calls spelled differently across
//! releases. A sampler a release lacks is [`NotOffered`], never a build failure.

// First: `ffi!`, which every other module uses, is defined there.
#[macro_use]
pub mod promise;

mod build;
mod candidates;
mod compat;
mod copy;
mod custom;
mod edge;
mod graph;
mod logs;
mod model;
mod multi;
mod preflight;
mod probe;
mod sampler;
mod spec;
mod vocab;

pub use build::{BuildInfo, SOURCES};
pub use candidates::{Candidate, Candidates};
pub use copy::copy_offered;
pub use custom::{ArrayView, CustomSampler};
pub use edge::{RawEntry, RawResult};
pub use graph::{
    graph_inputs_offered, graph_offered, GraphContext, GraphInputs, GraphOps, GraphOutput,
    StagePlace, Tensor,
};
pub use model::{Attention, Context, Message, Model, Weights};
pub use multi::{Append, MultiContext, SeqId};
pub use oracle::TokenId;
pub use preflight::{preflight, LOAD_TASK, LOAD_TIMEOUT};
pub use probe::{IdOrder, LogitsArray, ProbeArray};
pub use promise::ffi_calls_on_this_thread;
pub use sampler::Sampler;
pub use spec::{offered, DryParams, NotOffered, SamplerSpec, MAX_WINDOW};
pub use vocab::Vocab;
