//! The implementations of F4's operators that the design runs (llama.cpp's penalties, the
//! ledger's modes, the planted subtractive and normalized samplers), and how numbers are
//! written in reports.

use engine::EngineName;
use oracle::gauge::Operator;

/// One implementation of one operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Implementation {
    /// llama.cpp's penalties stage (the subject), handed `z + c` in f32.
    LlamaSign,
    /// `ledger-penalties`, default mode, in a chain, handed `z + c` in f32.
    LedgerSign,
    /// `ledger-penalties`, normalized mode, in a chain, handed `z + c` in f32.
    LedgerNormalized,
    /// `ledger-penalties`, subtractive mode, in a chain, handed `z + c` in f32.
    LedgerSubtractive,
    /// The planted subtractive sampler (`crate::planted`), in a chain, handed `z + c` in f32.
    PlantedSubtractive,
    /// The planted normalized sampler (`crate::planted`), in a chain, handed `z + c` in f32.
    PlantedNormalized,
    /// Another engine's own repetition penalty through the engine seam
    /// (`crate::engine_slot`), in a chain, handed `z + c` in f32.
    EngineSign(EngineName),
}

impl Implementation {
    /// The design's implementation of each operator: the subject for the sign branch, the
    /// ledger's modes for the gauge-free ones.
    pub fn of(op: Operator) -> Implementation {
        match op {
            Operator::Sign => Implementation::LlamaSign,
            Operator::Subtractive => Implementation::LedgerSubtractive,
            Operator::Normalized => Implementation::LedgerNormalized,
        }
    }

    pub fn operator(self) -> Operator {
        match self {
            Implementation::LlamaSign
            | Implementation::LedgerSign
            | Implementation::EngineSign(_) => Operator::Sign,
            Implementation::LedgerNormalized | Implementation::PlantedNormalized => {
                Operator::Normalized
            }
            Implementation::LedgerSubtractive => Operator::Subtractive,
            Implementation::PlantedSubtractive => Operator::Subtractive,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Implementation::LlamaSign => "llama.cpp penalties",
            Implementation::LedgerSign => "ledger-penalties default",
            Implementation::LedgerNormalized => "ledger-penalties normalized",
            Implementation::LedgerSubtractive => "ledger-penalties subtractive",
            Implementation::PlantedSubtractive => "planted subtractive",
            Implementation::PlantedNormalized => "planted normalized",
            Implementation::EngineSign(engine) => engine.penalty_label(),
        }
    }
}

/// An f32 as the decimal it was written as (1.3, not 1.2999999523162842).
pub fn short(x: f32) -> f64 {
    x.to_string().parse().unwrap_or(x as f64)
}
