//! Another engine's repetition penalty in F4's sign slot: a sampler written here that hands
//! the candidates, in id order, to the engine's own penalty (`engine::Engine::repeat_penalty`,
//! for candle its `apply_repeat_penalty`) over the last `window` accepted tokens, the way
//! candle's examples pass the last N tokens of the sequence. It runs in the same chain, the
//! same fork loop and the same value check as llama.cpp's penalties, so the engine's
//! penalty is judged by the same detector.
//!
//! A callback cannot return an error to llama.cpp: if the engine refuses, the logits are left
//! as they were, and the value check (every seen id against the oracle's arithmetic, every
//! step) reports it.

use anyhow::Result;
use engine::{Engine, EngineName};
use oracle::TokenId;
use std::collections::VecDeque;
use std::ffi::CStr;
use std::sync::Arc;
use subject::{ArrayView, CustomSampler};

#[derive(Clone)]
pub struct EnginePenalty {
    engine: Arc<dyn Engine>,
    n_vocab: usize,
    theta: f32,
    window: usize,
    recent: VecDeque<TokenId>,
}

impl EnginePenalty {
    pub fn new(
        name: EngineName,
        n_vocab: usize,
        theta: f32,
        window: usize,
    ) -> Result<EnginePenalty> {
        Ok(EnginePenalty {
            engine: Arc::from(harness::engines::get(name)?),
            n_vocab,
            theta,
            window,
            recent: VecDeque::new(),
        })
    }
}

impl CustomSampler for EnginePenalty {
    fn name(&self) -> &'static CStr {
        c"engine-penalty"
    }

    fn apply(&mut self, view: &mut ArrayView<'_>) {
        // Ids absent from the array stay -inf: a penalty never raises a logit above it.
        let mut z = vec![f32::NEG_INFINITY; self.n_vocab];
        for i in 0..view.len() {
            if let Some(slot) = z.get_mut(view.id(i).0 as usize) {
                *slot = view.logit(i);
            }
        }
        let context: Vec<TokenId> = self.recent.iter().copied().collect();
        if let Ok(out) = self.engine.repeat_penalty(&z, self.theta, &context) {
            for i in 0..view.len() {
                if let Some(&x) = out.get(view.id(i).0 as usize) {
                    view.set_logit(i, x);
                }
            }
        }
    }

    fn accept(&mut self, id: TokenId) {
        if self.window == 0 {
            return;
        }
        if self.recent.len() == self.window {
            self.recent.pop_front();
        }
        self.recent.push_back(id);
    }

    fn reset(&mut self) {
        self.recent.clear();
    }

    fn clone_sampler(&self) -> Box<dyn CustomSampler> {
        Box::new(self.clone())
    }
}

/// The exact-zero boundary, a note beside the verdict: llama.cpp multiplies a seen logit at
/// or below 0 and divides one above it; candle divides at or above 0 and multiplies below.
/// The two rules differ only at exactly 0 (and -0), where both a division and a
/// multiplication leave the same value. The note shows the bits rather than assuming them;
/// it is not a verdict, because IEEE arithmetic fixes the answer, so no engine's code could
/// make it come out otherwise.
#[derive(Debug, Clone, PartialEq)]
pub struct ZeroBoundary {
    pub engine: &'static str,
    pub logits: Vec<f32>,
    pub context: Vec<TokenId>,
    pub theta: f32,
    pub engine_out: Vec<f32>,
    pub llama_out: Vec<f32>,
}

impl ZeroBoundary {
    pub fn measure(engine: &dyn Engine) -> Result<ZeroBoundary> {
        let logits = vec![0.0, -0.0, 1.0, -1.0, 0.0, 2.0];
        let context = vec![TokenId(0), TokenId(1), TokenId(2), TokenId(3)];
        let theta = 1.3;
        Ok(ZeroBoundary {
            engine: engine.info().name.label(),
            engine_out: engine.repeat_penalty(&logits, theta, &context)?,
            llama_out: engine_llama::Llama.repeat_penalty(&logits, theta, &context)?,
            logits,
            context,
            theta,
        })
    }

    /// Whether the engine and llama.cpp leave the same bits everywhere.
    pub fn same_bits(&self) -> bool {
        self.engine_out.len() == self.llama_out.len()
            && (self.engine_out.iter().zip(&self.llama_out))
                .all(|(a, b)| a.to_bits() == b.to_bits())
    }

    /// The note's text: the input, both outputs, and what they show.
    pub fn note(&self) -> String {
        let show = |v: &[f32]| format!("[{}]", signed(v).join(", "));
        let ids: Vec<String> = self.context.iter().map(|t| t.0.to_string()).collect();
        format!(
            "exact-zero boundary, theta {}, seen ids {}: logits {} -> {} {}, llama.cpp {} ({})",
            self.theta,
            ids.join(","),
            show(&self.logits),
            self.engine,
            show(&self.engine_out),
            show(&self.llama_out),
            if self.same_bits() {
                "bit for bit the same, as IEEE arithmetic requires: 0 and -0 divided or multiplied by theta stay 0 and -0, so this note records where the two branch rules meet and cannot show a defect in the values"
            } else {
                "the bits differ, which IEEE arithmetic does not allow for one division or multiplication: a fault of the arithmetic under test, not of a branch rule"
            }
        )
    }

    /// The note's data: every value written with its sign (`-0.0`).
    pub fn data(&self) -> ZeroBoundaryData {
        ZeroBoundaryData {
            logits: signed(&self.logits),
            seen: self.context.iter().map(|t| t.0).collect(),
            theta: self.theta,
            engine: signed(&self.engine_out),
            llama: signed(&self.llama_out),
        }
    }
}

/// Each value written with its sign (`-0.0`).
fn signed(v: &[f32]) -> Vec<String> {
    v.iter().map(|x| format!("{x:?}")).collect()
}

#[derive(serde::Serialize)]
pub struct ZeroBoundaryData {
    logits: Vec<String>,
    seen: Vec<i32>,
    theta: f32,
    engine: Vec<String>,
    llama: Vec<String>,
}
