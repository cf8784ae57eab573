//! Greedy decoding with a repetition penalty over one scope, on [`harness::Session`] (every
//! trajectory from a cleared context, so two trajectories see bit-identical logits for as
//! long as their tokens agree). The greedy choice is the first maximum in id order, which is
//! what llama.cpp's greedy sampler picks on an id-ordered array.

use crate::scope::ScopeSpec;
use anyhow::{Context as _, Result};
use harness::Session;
use oracle::scope::{apply_repetition, penalized_ids};
use oracle::TokenId;
use std::sync::Arc;
use subject::{Candidates, Model, Sampler, SamplerSpec};

pub use harness::{argmax, Stop};

/// The cross-checks counted along a trajectory (all must stay 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StepChecks {
    pub steps: usize,
    /// Steps where the number of logits the penalty changed was not the number of distinct
    /// ids in scope with a non-zero logit.
    pub changed_count_mismatches: usize,
    /// `all` only: steps where llama.cpp's penalties sampler, window covering the sequence,
    /// did not give bit-identical logits to the oracle.
    pub llama_full_window_mismatches: usize,
    /// `llama:N` only: steps where llama.cpp's greedy choice was not the first maximum.
    pub greedy_mismatches: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Trajectory {
    pub scope: ScopeSpec,
    /// Generated ids, the end-of-generation token included when there is one.
    pub tokens: Vec<TokenId>,
    pub stop: Stop,
    pub checks: StepChecks,
}

impl Trajectory {
    /// Number of generated tokens when decoding stopped (the eos token counts).
    pub fn stopped_at(&self) -> usize {
        self.tokens.len()
    }

    /// The first index where this trajectory and `reference` differ, or `None` if equal.
    pub fn diverges_from(&self, reference: &Trajectory) -> Option<usize> {
        harness::divergence(&self.tokens, &reference.tokens)
    }
}

/// Bits of two logit rows differ at how many positions.
pub fn count_changed(a: &[f32], b: &[f32]) -> usize {
    a.iter()
        .zip(b)
        .filter(|(x, y)| x.to_bits() != y.to_bits())
        .count()
}

/// llama.cpp's penalties stage (repeat only) for `model`.
pub fn llama_penalties(model: &Model, last_n: usize, theta: f32) -> Result<Sampler> {
    SamplerSpec::Penalties {
        n_vocab: model.n_vocab(),
        last_n: last_n as i32,
        repeat: theta,
        freq: 0.0,
        present: 0.0,
    }
    .build()
}

/// Runs `penalties` on `logits` in id order and returns the logits it leaves.
pub fn through_llama(penalties: &mut Sampler, logits: &[f32]) -> Result<Vec<f32>> {
    penalties.apply_in_id_order(logits)
}

/// A session and a theta, shared by every trajectory of one run.
pub struct Decoder {
    pub model: Arc<Model>,
    pub session: Session,
    pub prompt: Vec<TokenId>,
    pub theta: f32,
}

impl Decoder {
    pub fn new(
        model: Arc<Model>,
        prompt: Vec<TokenId>,
        theta: f32,
        max_new: usize,
        threads: i32,
    ) -> Result<Decoder> {
        let session = Session::new(&model, prompt.clone(), max_new, threads)?;
        Ok(Decoder {
            model,
            session,
            prompt,
            theta,
        })
    }

    /// The raw logits after `prompt ++ generated` (a fresh decode, prompt in one batch).
    pub fn logits_after(&mut self, generated: &[TokenId]) -> Result<Vec<f32>> {
        self.session.logits_after(generated)
    }

    /// Greedy decoding of up to `max_new` tokens with the penalty over `scope`.
    pub fn greedy(&mut self, scope: ScopeSpec, max_new: usize) -> Result<Trajectory> {
        let mut checks = StepChecks::default();
        // llama:N runs the real chain; `all` carries a full-window llama.cpp stage beside it.
        let mut chain = match scope {
            ScopeSpec::Llama(n) => {
                let mut c = Sampler::chain(vec![
                    llama_penalties(&self.model, n, self.theta)?,
                    SamplerSpec::Greedy.build()?,
                ])?;
                for &t in &self.prompt {
                    c.accept(t)?;
                }
                Some(c)
            }
            _ => None,
        };
        let mut full = if scope.is_all() {
            let mut s = llama_penalties(&self.model, self.prompt.len() + max_new, self.theta)?;
            for &t in &self.prompt {
                s.accept(t)?;
            }
            Some(s)
        } else {
            None
        };
        let (prompt, theta) = (&self.prompt, self.theta);
        let (tokens, stop) = self.session.generate(max_new, |raw, tokens| {
            let next = match (&scope, chain.as_mut()) {
                (ScopeSpec::Llama(_), Some(c)) => {
                    let mut cand = Candidates::from_logits(raw);
                    c.apply(&mut cand)?;
                    let chosen = cand.selected_id().context("greedy selected nothing")?;
                    let logits: Vec<f32> = cand.entries.iter().map(|e| e.logit).collect();
                    if argmax(&logits) != chosen {
                        checks.greedy_mismatches += 1;
                    }
                    c.accept(chosen)?;
                    chosen
                }
                (ScopeSpec::Oracle(s), _) => {
                    let ids = penalized_ids(*s, prompt, tokens);
                    let mut z = raw.to_vec();
                    apply_repetition(&mut z, &ids, theta);
                    let nonzero = ids.iter().filter(|id| raw[id.0 as usize] != 0.0).count();
                    if count_changed(raw, &z) != nonzero {
                        checks.changed_count_mismatches += 1;
                    }
                    if let Some(f) = full.as_mut() {
                        let via_llama = f.apply_in_id_order(raw)?;
                        if count_changed(&via_llama, &z) != 0 {
                            checks.llama_full_window_mismatches += 1;
                        }
                    }
                    argmax(&z)
                }
                _ => unreachable!("a llama scope always has its chain"),
            };
            checks.steps += 1;
            if let Some(f) = full.as_mut() {
                f.accept(next)?;
            }
            Ok(next)
        })?;
        Ok(Trajectory {
            scope,
            tokens,
            stop,
            checks,
        })
    }
}
