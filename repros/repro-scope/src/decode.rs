//! Greedy decoding with a repetition penalty over one scope, on [`harness::Session`] (every
//! trajectory from a cleared context, so two trajectories see bit-identical logits for as long
//! as their tokens agree). The greedy choice is the first maximum in id order, which is what
//! llama.cpp's greedy sampler picks on an id-ordered array.
//!
//! Every step of every scope computes the penalty twice, once through the oracle and once
//! through llama.cpp's penalties sampler over the same tokens (`all` and `N`: a window of that
//! length with the prompt accepted; `gen:N`: window N, prompt not accepted; `llama:N`: the real
//! chain, against the oracle's `N`), and counts the steps where the two logit rows differ in
//! any bit. Planted scopes (controls) have no llama.cpp twin.
//!
//! Given a reference trajectory (`all`), the step where a scope first chooses differently is
//! explained: the top-2 margin under both scopes, and the ids of the two scopes' symmetric
//! difference that decide it (only the two chosen ids can: every other logit is below both
//! maxima).

use crate::scope::{PlantedScope, ScopeSpec};
use anyhow::ensure;
use anyhow::{Context as _, Result};
use engine::{Engine, EngineName, Logits};
use engine_llama::LlamaLogits;
use oracle::penalty::PenaltyParams;
use oracle::scope::{apply_repetition, penalized_ids, Scope};
use oracle::stage::Stage;
use oracle::window::WindowLen;
use oracle::TokenId;
use serde::{Serialize, Serializer};
use std::collections::BTreeSet;
use std::sync::Arc;
use subject::{Candidates, Model, Sampler, SamplerSpec};

pub use harness::{argmax, Stop};

/// The checks counted along a trajectory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StepChecks {
    pub steps: usize,
    /// Steps where llama.cpp's twin was compared with the oracle.
    pub twin_steps: usize,
    /// Of those, steps whose logit rows differed in any bit.
    pub twin_mismatches: usize,
    /// `llama:N` only: steps where llama.cpp's greedy choice was not the first maximum.
    pub greedy_mismatches: usize,
    /// An engine other than llama.cpp: steps where its own penalty was compared with the
    /// oracle, and of those the steps whose logit rows differed in any bit.
    pub engine_twin_steps: usize,
    pub engine_twin_mismatches: usize,
    /// Another engine, `all` only: steps where the same engine's penalty with theta one f32
    /// step higher differs from the oracle (the positive control of that comparison).
    pub planted_engine_twin_mismatches: usize,
    /// `all` only: steps where a planted twin, llama.cpp's penalties with theta one f32 step
    /// higher, differs from the oracle (the positive control of the twin comparison).
    pub planted_twin_mismatches: usize,
}

/// One id that decides a divergence: in one scope's penalized set and not the other's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cause {
    #[serde(serialize_with = "token")]
    pub id: TokenId,
    pub raw: f32,
    pub under_reference: f32,
    pub under_scope: f32,
    /// Which scope penalizes it: `reference` or `scope`.
    pub penalized_by: &'static str,
}

/// A token id as JSON: its number.
pub fn token<S: Serializer>(t: &TokenId, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_i32(t.0)
}

impl Serialize for Divergence {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Written<'a> {
            step: usize,
            reference_token: i32,
            token: i32,
            top2_margin_reference: f32,
            top2_margin_scope: f32,
            symmetric_difference: usize,
            decisive: bool,
            causes: &'a [Cause],
        }
        Written {
            step: self.step,
            reference_token: self.reference_token.0,
            token: self.token.0,
            top2_margin_reference: self.margin_reference,
            top2_margin_scope: self.margin_scope,
            symmetric_difference: self.symmetric_difference,
            decisive: self.decisive(),
            causes: &self.causes,
        }
        .serialize(s)
    }
}

/// The first step where a scope chose differently from the reference, explained.
#[derive(Debug, Clone, PartialEq)]
pub struct Divergence {
    pub step: usize,
    pub reference_token: TokenId,
    pub token: TokenId,
    /// Top-1 minus top-2 of the penalized logits under the reference scope and under this one.
    pub margin_reference: f32,
    pub margin_scope: f32,
    /// Size of the symmetric difference of the two scopes' penalized sets at this step.
    pub symmetric_difference: usize,
    /// The ids of that difference that decide the choice (a subset of the two chosen ids).
    pub causes: Vec<Cause>,
}

impl Divergence {
    /// Neither choice rests on an exact tie, and an id of the symmetric difference explains it.
    pub fn decisive(&self) -> bool {
        self.margin_reference > 0.0 && self.margin_scope > 0.0 && !self.causes.is_empty()
    }

    pub fn describe(&self) -> String {
        let causes: Vec<String> = self
            .causes
            .iter()
            .map(|c| {
                format!(
                    "id {} (raw {}, penalized only by {}: {} vs {})",
                    c.id, c.raw, c.penalized_by, c.under_reference, c.under_scope
                )
            })
            .collect();
        format!(
            "step {}: {} instead of {}; top-2 margin {} under all, {} under the scope; {} ids in the symmetric difference, decided by {}",
            self.step,
            self.token,
            self.reference_token,
            self.margin_reference,
            self.margin_scope,
            self.symmetric_difference,
            if causes.is_empty() { "none".to_string() } else { causes.join(", ") }
        )
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Trajectory {
    pub scope: ScopeSpec,
    /// Generated ids, the end-of-generation token included when there is one.
    pub tokens: Vec<TokenId>,
    pub stop: Stop,
    pub checks: StepChecks,
    /// Against the reference given to [`Decoder::greedy`], if it differs.
    pub divergence: Option<Divergence>,
    /// `all` only: the first step at which unpenalizing one seen id would change the choice,
    /// and that id (the largest raw logit among them, smallest id on a tie).
    pub first_mattering: Option<(usize, TokenId)>,
    /// `all` only: a prompt id with a non-zero raw logit at the first step whose unpenalized
    /// logit stays below the chosen one at every step, so dropping it changes logits but never a
    /// choice; the one that comes closest (largest gap below the choice, smallest id on a tie),
    /// with that gap.
    pub quiet_id: Option<(TokenId, f32)>,
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
    let params = PenaltyParams {
        repeat: theta,
        freq: 0.0,
        present: 0.0,
    };
    SamplerSpec::penalties(model.n_vocab(), WindowLen(last_n), params).build()
}

/// Runs `penalties` on `logits` in id order and returns the logits it leaves.
pub fn through_llama(penalties: &mut Sampler, logits: &[f32]) -> Result<Vec<f32>> {
    penalties.apply_in_id_order(logits)
}

/// The tokens an engine's penalty is handed for `scope`, sliced the way candle's examples
/// slice them: the whole sequence, its last N tokens, or the last N generated tokens.
pub fn engine_context(scope: Scope, prompt: &[TokenId], generated: &[TokenId]) -> Vec<TokenId> {
    let all: Vec<TokenId> = prompt.iter().chain(generated).copied().collect();
    match scope {
        Scope::All => all,
        Scope::Last(n) => all[all.len().saturating_sub(n)..].to_vec(),
        Scope::Generated(n) => generated[generated.len().saturating_sub(n)..].to_vec(),
    }
}

/// The ids a scope penalizes after `prompt ++ generated`.
pub fn ids_of(scope: ScopeSpec, prompt: &[TokenId], generated: &[TokenId]) -> BTreeSet<TokenId> {
    match scope {
        ScopeSpec::Oracle(s) => penalized_ids(s, prompt, generated),
        ScopeSpec::Llama(n) => penalized_ids(Scope::Last(n), prompt, generated),
        ScopeSpec::Planted(PlantedScope::DropOne(d) | PlantedScope::DropQuiet(d)) => {
            let mut ids = penalized_ids(Scope::All, prompt, generated);
            ids.remove(&d);
            ids
        }
    }
}

/// Top-1 minus top-2 of a logit row (0 on an exact tie; `inf` with a single entry).
pub fn top2_margin(z: &[f32]) -> f32 {
    let a = argmax(z).0 as usize;
    let second = z
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != a)
        .map(|(_, &x)| x)
        .fold(f32::NEG_INFINITY, f32::max);
    z[a] - second
}

/// The first seen id whose penalty decides the choice: with the penalty lifted from it alone,
/// it would beat the chosen token. `None` if no seen id does.
fn mattering_id(raw: &[f32], z: &[f32], ids: &BTreeSet<TokenId>) -> Option<TokenId> {
    let a = argmax(z);
    let top = z[a.0 as usize];
    ids.iter()
        .copied()
        .filter(|&d| d != a && raw[d.0 as usize] > top)
        .max_by(|x, y| {
            raw[x.0 as usize]
                .total_cmp(&raw[y.0 as usize])
                .then(y.cmp(x))
        })
}

/// For every id of `ids` other than the choice: how far its unpenalized logit lies below the
/// chosen (penalized) one, `raw[d] - top` (negative while it cannot win or tie).
fn gaps_to_choice<'a>(
    raw: &'a [f32],
    z: &[f32],
    ids: impl IntoIterator<Item = &'a TokenId> + 'a,
) -> impl Iterator<Item = (TokenId, f32)> + 'a {
    let a = argmax(z);
    let top = z[a.0 as usize];
    ids.into_iter()
        .copied()
        .filter(move |&d| d != a)
        .map(move |d| (d, raw[d.0 as usize] - top))
}

/// The next f32 above `x` (for `x` > 0).
fn next_up(x: f32) -> f32 {
    f32::from_bits(x.to_bits() + 1)
}

/// The engine whose logits and (for an engine other than llama.cpp) whose penalty and greedy
/// choice a trajectory uses.
pub struct EngineSide {
    pub engine: Box<dyn Engine>,
    pub logits: Box<dyn Logits>,
}

/// A model's logits (through the engine seam), a prompt and a theta, shared by every
/// trajectory of one run. llama.cpp's model is always loaded: it tokenizes, detokenizes,
/// knows the end-of-generation ids, and runs the llama.cpp twin.
pub struct Decoder {
    pub model: Arc<Model>,
    pub side: EngineSide,
    pub prompt: Vec<TokenId>,
    pub theta: f32,
    /// The longest generation, so `all`'s twin window covers every sequence.
    pub max_new: usize,
}

impl Decoder {
    /// llama.cpp's logits: the same context size and decode path as `harness::Session`.
    pub fn new(
        model: Arc<Model>,
        prompt: Vec<TokenId>,
        theta: f32,
        max_new: usize,
        threads: i32,
    ) -> Result<Decoder> {
        let logits = LlamaLogits::new(Arc::clone(&model), threads.max(1) as usize, max_new)?;
        let side = EngineSide {
            engine: Box::new(engine_llama::Llama),
            logits: Box::new(logits),
        };
        Decoder::with_engine(model, side, prompt, theta, max_new)
    }

    /// Another engine's logits, penalty and greedy choice; llama.cpp's `model` for the rest.
    pub fn with_engine(
        model: Arc<Model>,
        side: EngineSide,
        prompt: Vec<TokenId>,
        theta: f32,
        max_new: usize,
    ) -> Result<Decoder> {
        ensure!(!prompt.is_empty(), "the prompt has no tokens");
        ensure!(
            side.logits.n_vocab() == model.n_vocab() as usize,
            "{} has {} logits, llama.cpp's vocabulary {}",
            side.engine.info().name.label(),
            side.logits.n_vocab(),
            model.n_vocab()
        );
        Ok(Decoder {
            model,
            side,
            prompt,
            theta,
            max_new,
        })
    }

    pub fn engine_name(&self) -> EngineName {
        self.side.engine.info().name
    }

    /// The raw logits after `prompt ++ generated`.
    pub fn logits_after(&mut self, generated: &[TokenId]) -> Result<Vec<f32>> {
        self.side.logits.logits_after(&self.prompt, generated)
    }

    /// Up to `max_new` tokens, each chosen by `choose(raw logits, generated so far)`; stops
    /// after an end-of-generation token (kept) or at the limit.
    fn generate(
        side: &mut EngineSide,
        model: &Model,
        prompt: &[TokenId],
        max_new: usize,
        mut choose: impl FnMut(&dyn Engine, &[f32], &[TokenId]) -> Result<TokenId>,
    ) -> Result<(Vec<TokenId>, Stop)> {
        let mut tokens = Vec::new();
        while tokens.len() < max_new {
            let raw = side.logits.logits_after(prompt, &tokens)?;
            let next = choose(side.engine.as_ref(), &raw, &tokens)?;
            tokens.push(next);
            if model.is_eog(next) {
                return Ok((tokens, Stop::Eos));
            }
        }
        Ok((tokens, Stop::Limit))
    }

    /// llama.cpp's computation of `scope`'s penalty: (window, whether the prompt is accepted).
    /// Planted scopes have none.
    fn llama_window(&self, scope: ScopeSpec) -> Option<(usize, bool)> {
        match scope {
            ScopeSpec::Oracle(Scope::All) => Some((self.prompt.len() + self.max_new, true)),
            ScopeSpec::Oracle(Scope::Last(n)) | ScopeSpec::Llama(n) => Some((n, true)),
            ScopeSpec::Oracle(Scope::Generated(n)) => Some((n, false)),
            ScopeSpec::Planted(_) => None,
        }
    }

    /// Greedy decoding of up to `max_new` tokens with the penalty over `scope`. With a
    /// `reference`, the first step that chooses differently is explained.
    pub fn greedy(
        &mut self,
        scope: ScopeSpec,
        max_new: usize,
        reference: Option<&Trajectory>,
    ) -> Result<Trajectory> {
        let mut checks = StepChecks::default();
        // llama.cpp's side: the real chain for llama:N, the penalties stage as a twin otherwise.
        let mut llama = match self.llama_window(scope) {
            Some((window, with_prompt)) => {
                let penalties = llama_penalties(&self.model, window, self.theta)?;
                let mut s = if matches!(scope, ScopeSpec::Llama(_)) {
                    Sampler::chain(vec![penalties, SamplerSpec::from(Stage::Greedy).build()?])?
                } else {
                    penalties
                };
                if with_prompt {
                    for &t in &self.prompt {
                        s.accept(t)?;
                    }
                }
                Some(s)
            }
            None => None,
        };
        // Beside `all`: the planted twin, and what the planted scopes need.
        let is_all = scope == ScopeSpec::Oracle(Scope::All);
        let mut planted_twin = if is_all {
            let mut s = llama_penalties(
                &self.model,
                self.prompt.len() + self.max_new,
                next_up(self.theta),
            )?;
            for &t in &self.prompt {
                s.accept(t)?;
            }
            Some(s)
        } else {
            None
        };
        // Per prompt id, its closest approach to the choice (max of `raw - top` over the steps).
        let prompt_ids: BTreeSet<TokenId> = self.prompt.iter().copied().collect();
        let mut closest: std::collections::BTreeMap<TokenId, f32> =
            std::collections::BTreeMap::new();
        let mut nonzero_at_start: Vec<TokenId> = Vec::new();
        let mut divergence = None;
        let mut first_mattering = None;
        let (prompt, theta) = (&self.prompt, self.theta);
        let other_engine = self.engine_name() != EngineName::Llama;
        let (tokens, stop) = Self::generate(
            &mut self.side,
            &self.model,
            &self.prompt,
            max_new,
            |engine, raw, tokens| {
                let ids = ids_of(scope, prompt, tokens);
                let mut z = raw.to_vec();
                apply_repetition(&mut z, &ids, theta);
                let next = match (scope, llama.as_mut()) {
                    (ScopeSpec::Llama(_), Some(chain)) => {
                        let mut cand = Candidates::from_logits(raw);
                        chain.apply(&mut cand)?;
                        let chosen = cand.selected_id().context("greedy selected nothing")?;
                        let logits: Vec<f32> = cand.entries.iter().map(|e| e.logit).collect();
                        if argmax(&logits) != chosen {
                            checks.greedy_mismatches += 1;
                        }
                        checks.twin_steps += 1;
                        checks.twin_mismatches += usize::from(count_changed(&logits, &z) != 0);
                        chosen
                    }
                    (ScopeSpec::Oracle(oracle_scope), _) if other_engine => {
                        // The engine's own penalty over the tokens its examples pass, and its own
                        // greedy choice; the oracle's logits are the reference.
                        let context = engine_context(oracle_scope, prompt, tokens);
                        let penalized = engine.repeat_penalty(raw, theta, &context)?;
                        checks.engine_twin_steps += 1;
                        checks.engine_twin_mismatches +=
                            usize::from(count_changed(&penalized, &z) != 0);
                        if is_all {
                            let planted = engine.repeat_penalty(raw, next_up(theta), &context)?;
                            checks.planted_engine_twin_mismatches +=
                                usize::from(count_changed(&planted, &z) != 0);
                        }
                        if let Some(twin) = llama.as_mut() {
                            checks.twin_steps += 1;
                            checks.twin_mismatches +=
                                usize::from(count_changed(&twin.apply_in_id_order(raw)?, &z) != 0);
                        }
                        let chosen = engine.greedy(&penalized)?;
                        if chosen != argmax(&z) {
                            checks.greedy_mismatches += 1;
                        }
                        chosen
                    }
                    (_, Some(twin)) => {
                        checks.twin_steps += 1;
                        checks.twin_mismatches +=
                            usize::from(count_changed(&twin.apply_in_id_order(raw)?, &z) != 0);
                        argmax(&z)
                    }
                    (_, None) => argmax(&z),
                };
                if is_all {
                    if first_mattering.is_none() {
                        first_mattering = mattering_id(raw, &z, &ids).map(|d| (tokens.len(), d));
                    }
                    for (d, gap) in gaps_to_choice(raw, &z, &prompt_ids) {
                        let c = closest.entry(d).or_insert(f32::NEG_INFINITY);
                        *c = c.max(gap);
                    }
                    if tokens.is_empty() {
                        nonzero_at_start = prompt
                            .iter()
                            .copied()
                            .filter(|t| raw[t.0 as usize] != 0.0)
                            .collect();
                    }
                }
                if let Some(p) = planted_twin.as_mut() {
                    checks.planted_twin_mismatches +=
                        usize::from(count_changed(&p.apply_in_id_order(raw)?, &z) != 0);
                    p.accept(next)?;
                }
                if let Some(r) = reference {
                    let t = tokens.len();
                    let same_prefix = divergence.is_none() && r.tokens.get(..t) == Some(tokens);
                    if same_prefix && r.tokens.get(t) != Some(&next) {
                        let ref_ids = ids_of(r.scope, prompt, tokens);
                        let mut z_ref = raw.to_vec();
                        apply_repetition(&mut z_ref, &ref_ids, theta);
                        let a = argmax(&z_ref);
                        let causes = [a, next]
                            .into_iter()
                            .filter(|id| ref_ids.contains(id) != ids.contains(id))
                            .map(|id| Cause {
                                id,
                                raw: raw[id.0 as usize],
                                under_reference: z_ref[id.0 as usize],
                                under_scope: z[id.0 as usize],
                                penalized_by: if ref_ids.contains(&id) {
                                    "reference"
                                } else {
                                    "scope"
                                },
                            })
                            .collect();
                        divergence = Some(Divergence {
                            step: t,
                            reference_token: a,
                            token: next,
                            margin_reference: top2_margin(&z_ref),
                            margin_scope: top2_margin(&z),
                            symmetric_difference: ref_ids.symmetric_difference(&ids).count(),
                            causes,
                        });
                    }
                }
                checks.steps += 1;
                if let Some(s) = llama.as_mut() {
                    s.accept(next)?;
                }
                Ok(next)
            },
        )?;
        let quiet_id = nonzero_at_start
            .into_iter()
            .filter(|t| !tokens.contains(t))
            .filter_map(|t| closest.get(&t).map(|&g| (t, g)))
            .filter(|(_, g)| *g < 0.0)
            .max_by(|x, y| x.1.total_cmp(&y.1).then(y.0.cmp(&x.0)));
        Ok(Trajectory {
            scope,
            tokens,
            stop,
            checks,
            divergence,
            first_mattering,
            quiet_id: if is_all { quiet_id } else { None },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn divergence(margin_reference: f32, margin_scope: f32, caused: bool) -> Divergence {
        Divergence {
            step: 3,
            reference_token: TokenId(1),
            token: TokenId(2),
            margin_reference,
            margin_scope,
            symmetric_difference: 1,
            causes: if caused {
                vec![Cause {
                    id: TokenId(2),
                    raw: 2.0,
                    under_reference: 1.0,
                    under_scope: 2.0,
                    penalized_by: "reference",
                }]
            } else {
                Vec::new()
            },
        }
    }

    /// A divergence that rests on an exact tie, or that nothing in the symmetric difference
    /// explains, is not decisive.
    #[test]
    fn ties_and_unexplained_divergences_are_not_decisive() {
        assert!(divergence(0.5, 0.25, true).decisive());
        assert!(!divergence(0.0, 0.25, true).decisive());
        assert!(!divergence(0.5, 0.0, true).decisive());
        assert!(!divergence(0.5, 0.25, false).decisive());
    }

    #[test]
    fn margins_and_deciding_ids() {
        assert_eq!(top2_margin(&[1.0, 3.0, 2.5]), 0.5);
        assert_eq!(top2_margin(&[2.0, 2.0]), 0.0);
        let raw = [4.0, 3.0, 1.0];
        let z = [2.0, 3.0 / 1.3, 1.0];
        let ids: BTreeSet<TokenId> = [TokenId(0), TokenId(2)].into_iter().collect();
        // Chosen: id 1 (2.31); id 0 unpenalized (4.0) would beat it, id 2 (1.0) never.
        assert_eq!(mattering_id(&raw, &z, &ids), Some(TokenId(0)));
        let gaps: Vec<(TokenId, f32)> = gaps_to_choice(&raw, &z, &ids).collect();
        assert_eq!(
            gaps,
            vec![(TokenId(0), 4.0 - 3.0 / 1.3), (TokenId(2), 1.0 - 3.0 / 1.3)]
        );
        assert!(next_up(1.3) > 1.3);
    }
}
