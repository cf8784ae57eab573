//! Greedy decoding with a repetition penalty over one scope, on [`harness::Session`] (every
//! trajectory from a cleared context, so two trajectories see bit-identical logits for as long
//! as their tokens agree). The greedy choice is the first maximum in id order, which is what
//! llama.cpp's greedy sampler picks on an id-ordered array.
//!
//! Every step of every scope computes the penalty twice, once through the oracle and once
//! through llama.cpp's penalties sampler over the same tokens (`all` and `N`: a window of that
//! length with the prompt accepted; `gen:N`: window N, prompt not accepted; `llama:N`: the real
//! chain, against the oracle's `N`), and counts the steps where the two logit rows differ in
//! any bit. Planted scopes (controls) have no llama.cpp twin. Beside every oracle scope, the
//! two planted penalties of [`crate::planted_penalty`] go through the same comparison, as its
//! controls. A planted penalties sampler ([`crate::planted_sampler`]) takes llama.cpp's place
//! in a `llama:N` chain and goes down exactly that chain's path.
//!
//! Given a reference trajectory (`all`), the step where a scope first chooses differently is
//! explained: the top-2 margin under both scopes, and the ids of the two scopes' symmetric
//! difference that decide it (only the two chosen ids can: every other logit is below both
//! maxima).

use crate::planted_penalty::PlantedPenalty;
use crate::planted_sampler;
use crate::scope::{PlantedSampler, PlantedScope, ScopeSpec};
use anyhow::{ensure, Context as _, Result};
use engine::{Engine, EngineName, Logits};
use engine_llama::LlamaLogits;
use oracle::penalty::PenaltyParams;
use oracle::scope::{apply_repetition, penalized_ids, Scope};
use oracle::stage::Stage;
use oracle::window::WindowLen;
use oracle::TokenId;
use serde::{Serialize, Serializer};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use subject::{Candidates, Model, Sampler, SamplerSpec};

pub use harness::{argmax, Stop};

/// One penalty's rows against the oracle's, step by step. Every penalty compared with the
/// oracle goes through [`Tally::compare`]: llama.cpp's twin, another engine's own penalty, and
/// the planted penalties that are this comparison's controls, so the controls test the code
/// that judges the subjects.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    pub steps: usize,
    /// Steps whose row differs from the oracle's in any bit (or in length).
    pub mismatching_steps: usize,
}

impl Tally {
    /// Counts one step: `row` against the oracle's `oracle`, bit for bit.
    pub fn compare(&mut self, row: &[f32], oracle: &[f32]) {
        self.steps += 1;
        let differs = row.len() != oracle.len() || count_changed(row, oracle) != 0;
        self.mismatching_steps += usize::from(differs);
    }
}

/// The checks counted along a trajectory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StepChecks {
    pub steps: usize,
    /// llama.cpp's twin against the oracle.
    pub twin: Tally,
    /// `llama:N`, or another engine: steps where the greedy choice was not the first maximum.
    pub greedy_mismatches: usize,
    /// An engine other than llama.cpp: its own penalty against the oracle.
    pub engine_twin: Tally,
    /// Oracle scopes: the planted exact penalty against the oracle (the comparison's negative
    /// control: it must never mismatch).
    pub planted_exact: Tally,
    /// Oracle scopes: the planted penalty with theta one f32 step higher against the oracle
    /// (the comparison's positive control: it must mismatch somewhere).
    pub planted_wrong: Tally,
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

/// The first step where a scope chose differently from the reference, explained.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Divergence {
    pub step: usize,
    #[serde(serialize_with = "token")]
    pub reference_token: TokenId,
    #[serde(serialize_with = "token")]
    pub token: TokenId,
    /// Top-1 minus top-2 of the penalized logits under the reference scope and under this one.
    pub top2_margin_reference: f32,
    pub top2_margin_scope: f32,
    /// Size of the symmetric difference of the two scopes' penalized sets at this step.
    pub symmetric_difference: usize,
    /// Neither choice rests on an exact tie, and an id of the symmetric difference explains it.
    pub decisive: bool,
    /// The ids of that difference that decide the choice (a subset of the two chosen ids).
    pub causes: Vec<Cause>,
}

impl Divergence {
    /// `(step, reference token, token)`, the two penalized rows and the deciding ids.
    pub fn new(
        (step, reference_token, token): (usize, TokenId, TokenId),
        z_reference: &[f32],
        z_scope: &[f32],
        symmetric_difference: usize,
        causes: Vec<Cause>,
    ) -> Divergence {
        let (a, b) = (top2_margin(z_reference), top2_margin(z_scope));
        Divergence {
            step,
            reference_token,
            token,
            top2_margin_reference: a,
            top2_margin_scope: b,
            symmetric_difference,
            decisive: a > 0.0 && b > 0.0 && !causes.is_empty(),
            causes,
        }
    }

    pub fn describe(&self) -> String {
        let causes: Vec<String> = (self.causes.iter())
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
            self.top2_margin_reference,
            self.top2_margin_scope,
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
    /// Against the reference given to [`ScopeDecoder::greedy`], if it differs.
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
        ScopeSpec::Llama(n) | ScopeSpec::PlantedSampler(PlantedSampler::Window(n)) => {
            penalized_ids(Scope::Last(n), prompt, generated)
        }
        ScopeSpec::PlantedSampler(PlantedSampler::WholeSequence) => {
            penalized_ids(Scope::All, prompt, generated)
        }
        ScopeSpec::Planted(PlantedScope::DropOne(d) | PlantedScope::DropQuiet(d)) => {
            let mut ids = penalized_ids(Scope::All, prompt, generated);
            ids.remove(&d);
            ids
        }
    }
}

/// `raw` with the oracle's penalty on `ids`.
pub fn penalized(raw: &[f32], ids: &BTreeSet<TokenId>, theta: f32) -> Vec<f32> {
    let mut z = raw.to_vec();
    apply_repetition(&mut z, ids, theta);
    z
}

/// Top-1 minus top-2 of a logit row (0 on an exact tie; `inf` with a single entry).
pub fn top2_margin(z: &[f32]) -> f32 {
    let a = argmax(z).0 as usize;
    let second = (z.iter().enumerate())
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
    let raw_of = |d: &TokenId| raw[d.0 as usize];
    (ids.iter().copied())
        .filter(|&d| d != a && raw_of(&d) > top)
        .max_by(|x, y| raw_of(x).total_cmp(&raw_of(y)).then(y.cmp(x)))
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
    (ids.into_iter().copied())
        .filter(move |&d| d != a)
        .map(move |d| (d, raw[d.0 as usize] - top))
}

/// What `all` records along its way for the planted scopes of [`crate::controls`].
#[derive(Default)]
struct PlantedWitness {
    first_mattering: Option<(usize, TokenId)>,
    /// Per prompt id, its closest approach to the choice (max of `raw - top` over the steps).
    closest: BTreeMap<TokenId, f32>,
    /// Prompt ids (in prompt order) whose raw logit at the first step is non-zero.
    nonzero_at_start: Vec<TokenId>,
}

impl PlantedWitness {
    fn observe(&mut self, prompt: &[TokenId], step: Step<'_>) {
        if self.first_mattering.is_none() {
            self.first_mattering =
                mattering_id(step.raw, step.z, step.ids).map(|d| (step.tokens.len(), d));
        }
        let prompt_ids: BTreeSet<TokenId> = prompt.iter().copied().collect();
        for (d, gap) in gaps_to_choice(step.raw, step.z, &prompt_ids) {
            let c = self.closest.entry(d).or_insert(f32::NEG_INFINITY);
            *c = c.max(gap);
        }
        if step.tokens.is_empty() {
            self.nonzero_at_start = (prompt.iter().copied())
                .filter(|t| step.raw[t.0 as usize] != 0.0)
                .collect();
        }
    }

    /// The quiet id (see [`Trajectory::quiet_id`]) once `all` generated `tokens`.
    fn quiet_id(&self, tokens: &[TokenId]) -> Option<(TokenId, f32)> {
        (self.nonzero_at_start.iter())
            .filter(|t| !tokens.contains(t))
            .filter_map(|t| self.closest.get(t).map(|&g| (*t, g)))
            .filter(|(_, g)| *g < 0.0)
            .max_by(|x, y| x.1.total_cmp(&y.1).then(y.0.cmp(&x.0)))
    }
}

/// One decoding step: the raw logits after `tokens`, the scope's penalized ids and logits.
#[derive(Clone, Copy)]
struct Step<'a> {
    raw: &'a [f32],
    tokens: &'a [TokenId],
    ids: &'a BTreeSet<TokenId>,
    z: &'a [f32],
}

/// The engine whose logits and (for an engine other than llama.cpp) whose penalty and greedy
/// choice a trajectory uses.
pub struct EngineSide {
    pub engine: Box<dyn Engine>,
    pub logits: Box<dyn Logits>,
}

/// Greedy decoding under penalty scopes: a model's logits (through the engine seam), a prompt
/// and a theta, shared by every trajectory of one run. llama.cpp's model is always loaded: it
/// tokenizes, detokenizes, knows the end-of-generation ids, and runs the llama.cpp twin.
pub struct ScopeDecoder {
    pub model: Arc<Model>,
    pub side: EngineSide,
    pub prompt: Vec<TokenId>,
    pub theta: f32,
    /// The longest generation, so `all`'s twin window covers every sequence.
    pub max_new: usize,
}

impl ScopeDecoder {
    /// llama.cpp's logits: the same context size and decode path as `harness::Session`.
    pub fn new(
        model: Arc<Model>,
        prompt: Vec<TokenId>,
        theta: f32,
        max_new: usize,
        threads: i32,
    ) -> Result<ScopeDecoder> {
        let logits = LlamaLogits::new(Arc::clone(&model), threads.max(1) as usize, max_new)?;
        let side = EngineSide {
            engine: Box::new(engine_llama::Llama),
            logits: Box::new(logits),
        };
        ScopeDecoder::with_engine(model, side, prompt, theta, max_new)
    }

    /// Another engine's logits, penalty and greedy choice; llama.cpp's `model` for the rest.
    pub fn with_engine(
        model: Arc<Model>,
        side: EngineSide,
        prompt: Vec<TokenId>,
        theta: f32,
        max_new: usize,
    ) -> Result<ScopeDecoder> {
        ensure!(!prompt.is_empty(), "the prompt has no tokens");
        ensure!(
            side.logits.n_vocab() == model.n_vocab() as usize,
            "{} has {} logits, llama.cpp's vocabulary {}",
            side.engine.info().name.label(),
            side.logits.n_vocab(),
            model.n_vocab()
        );
        Ok(ScopeDecoder {
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

    /// `s` after accepting the prompt, as llama-server does.
    fn with_prompt(&self, mut s: Sampler) -> Result<Sampler> {
        for &t in &self.prompt {
            s.accept(t)?;
        }
        Ok(s)
    }

    /// llama.cpp's side of `scope`: the real chain for `llama:N` (llama.cpp's penalties, then
    /// its greedy), the same chain with our penalties sampler in the penalties slot for a
    /// planted sampler, the penalties stage as a twin for the oracle's scopes, none for
    /// planted scopes.
    fn llama_side(&self, scope: ScopeSpec) -> Result<Option<Sampler>> {
        let n_vocab = self.model.n_vocab();
        let penalties = match scope {
            ScopeSpec::Oracle(Scope::All) => {
                llama_penalties(&self.model, self.prompt.len() + self.max_new, self.theta)?
            }
            ScopeSpec::Oracle(Scope::Last(n)) | ScopeSpec::Llama(n) => {
                llama_penalties(&self.model, n, self.theta)?
            }
            ScopeSpec::Oracle(Scope::Generated(n)) => {
                // Without the prompt: the window holds generated tokens only.
                return Ok(Some(llama_penalties(&self.model, n, self.theta)?));
            }
            ScopeSpec::PlantedSampler(PlantedSampler::WholeSequence) => {
                let s = planted_sampler::WholeSequence::new(n_vocab as usize, self.theta);
                Sampler::custom_for_vocab(s, n_vocab)?
            }
            ScopeSpec::PlantedSampler(PlantedSampler::Window(n)) => {
                Sampler::custom_for_vocab(planted_sampler::Window::new(n, self.theta), n_vocab)?
            }
            ScopeSpec::Planted(_) => return Ok(None),
        };
        let s = match scope {
            ScopeSpec::Llama(_) | ScopeSpec::PlantedSampler(_) => {
                Sampler::chain(vec![penalties, SamplerSpec::from(Stage::Greedy).build()?])?
            }
            _ => penalties,
        };
        Ok(Some(self.with_prompt(s)?))
    }

    /// One step's choice under `scope`, counting the checks of llama.cpp's side and, for
    /// another engine, of its own penalty and greedy choice (the oracle's logits are the
    /// reference).
    fn choose(
        &self,
        scope: ScopeSpec,
        llama: Option<&mut Sampler>,
        step: Step<'_>,
        checks: &mut StepChecks,
    ) -> Result<TokenId> {
        let Step { raw, z, .. } = step;
        let twin = |twin: &mut Sampler, checks: &mut StepChecks| -> Result<()> {
            checks.twin.compare(&twin.apply_in_id_order(raw)?, z);
            Ok(())
        };
        match (scope, llama) {
            // llama.cpp's chain, or the same chain with a planted sampler in its penalties slot:
            // one path, so the planted samplers test the readout that judges llama.cpp's.
            (ScopeSpec::Llama(_) | ScopeSpec::PlantedSampler(_), Some(chain)) => {
                let mut cand = Candidates::from_logits(raw);
                chain.apply(&mut cand)?;
                let chosen = cand.selected_id().context("greedy selected nothing")?;
                let logits: Vec<f32> = cand.entries.iter().map(|e| e.logit).collect();
                checks.greedy_mismatches += usize::from(argmax(&logits) != chosen);
                checks.twin.compare(&logits, z);
                Ok(chosen)
            }
            (ScopeSpec::Oracle(oracle_scope), llama) if self.engine_name() != EngineName::Llama => {
                // The engine's own penalty over the tokens its examples pass.
                let engine = self.side.engine.as_ref();
                let context = engine_context(oracle_scope, &self.prompt, step.tokens);
                let penalized = engine.repeat_penalty(raw, self.theta, &context)?;
                checks.engine_twin.compare(&penalized, z);
                if let Some(s) = llama {
                    twin(s, checks)?;
                }
                let chosen = engine.greedy(&penalized)?;
                checks.greedy_mismatches += usize::from(chosen != argmax(z));
                Ok(chosen)
            }
            (_, llama) => {
                if let Some(s) = llama {
                    twin(s, checks)?;
                }
                Ok(argmax(z))
            }
        }
    }

    /// The planted penalties beside an oracle scope, handed the raw logits and the tokens the
    /// engine's own penalty is handed, through the same comparison as the subjects' rows.
    fn planted_penalties(
        &self,
        scope: ScopeSpec,
        step: Step<'_>,
        checks: &mut StepChecks,
    ) -> Result<()> {
        let ScopeSpec::Oracle(oracle_scope) = scope else {
            return Ok(());
        };
        let context = engine_context(oracle_scope, &self.prompt, step.tokens);
        for planted in PlantedPenalty::ALL {
            let row = planted.apply(step.raw, self.theta, &context)?;
            let tally = match planted {
                PlantedPenalty::Exact => &mut checks.planted_exact,
                PlantedPenalty::ThetaOneStepHigher => &mut checks.planted_wrong,
            };
            tally.compare(&row, step.z);
        }
        Ok(())
    }

    /// The divergence at this step if `next` is where this trajectory first leaves `reference`.
    fn diverges_here(
        &self,
        reference: &Trajectory,
        step: Step<'_>,
        next: TokenId,
    ) -> Option<Divergence> {
        let t = step.tokens.len();
        if reference.tokens.get(..t) != Some(step.tokens) || reference.tokens.get(t) == Some(&next)
        {
            return None;
        }
        let ref_ids = ids_of(reference.scope, &self.prompt, step.tokens);
        let z_ref = penalized(step.raw, &ref_ids, self.theta);
        let a = argmax(&z_ref);
        let causes = [a, next]
            .into_iter()
            .filter(|id| ref_ids.contains(id) != step.ids.contains(id))
            .map(|id| Cause {
                id,
                raw: step.raw[id.0 as usize],
                under_reference: z_ref[id.0 as usize],
                under_scope: step.z[id.0 as usize],
                penalized_by: if ref_ids.contains(&id) {
                    "reference"
                } else {
                    "scope"
                },
            })
            .collect();
        let symmetric = ref_ids.symmetric_difference(step.ids).count();
        Some(Divergence::new(
            (t, a, next),
            &z_ref,
            step.z,
            symmetric,
            causes,
        ))
    }

    /// Greedy decoding of up to `max_new` tokens with the penalty over `scope`, stopping after
    /// an end-of-generation token (kept). With a `reference`, the first step that chooses
    /// differently is explained.
    pub fn greedy(
        &mut self,
        scope: ScopeSpec,
        max_new: usize,
        reference: Option<&Trajectory>,
    ) -> Result<Trajectory> {
        let mut checks = StepChecks::default();
        let mut llama = self.llama_side(scope)?;
        // Beside `all`: what the planted scopes need.
        let mut witness = scope.is_all().then(PlantedWitness::default);
        let mut divergence = None;
        let (mut tokens, mut stop) = (Vec::new(), Stop::Limit);
        while tokens.len() < max_new {
            let raw = self.logits_after(&tokens)?;
            let ids = ids_of(scope, &self.prompt, &tokens);
            let z = penalized(&raw, &ids, self.theta);
            let step = Step {
                raw: &raw,
                tokens: &tokens,
                ids: &ids,
                z: &z,
            };
            let next = self.choose(scope, llama.as_mut(), step, &mut checks)?;
            self.planted_penalties(scope, step, &mut checks)?;
            if let Some(w) = witness.as_mut() {
                w.observe(&self.prompt, step);
            }
            if divergence.is_none() {
                divergence = reference.and_then(|r| self.diverges_here(r, step, next));
            }
            checks.steps += 1;
            if let Some(s) = llama.as_mut() {
                s.accept(next)?;
            }
            tokens.push(next);
            if self.model.is_eog(next) {
                stop = Stop::Eos;
                break;
            }
        }
        Ok(Trajectory {
            scope,
            stop,
            checks,
            divergence,
            first_mattering: witness.as_ref().and_then(|w| w.first_mattering),
            quiet_id: witness.as_ref().and_then(|w| w.quiet_id(&tokens)),
            tokens,
        })
    }

    /// `scopes[0]` (the reference, `all`), then every other scope against it, `n` tokens each.
    pub fn against_first(&mut self, scopes: &[ScopeSpec], n: usize) -> Result<Vec<Trajectory>> {
        let mut out = vec![self.greedy(scopes[0], n, None)?];
        for &s in &scopes[1..] {
            let t = self.greedy(s, n, Some(&out[0]))?;
            out.push(t);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn divergence(margin_reference: f32, margin_scope: f32, caused: bool) -> Divergence {
        let cause = Cause {
            id: TokenId(2),
            raw: 2.0,
            under_reference: 1.0,
            under_scope: 2.0,
            penalized_by: "reference",
        };
        // Rows whose top-2 margins are the ones given.
        let (a, b) = ([1.0 + margin_reference, 1.0], [1.0 + margin_scope, 1.0]);
        let causes = if caused { vec![cause] } else { Vec::new() };
        Divergence::new((3, TokenId(1), TokenId(2)), &a, &b, 1, causes)
    }

    /// A divergence that rests on an exact tie, or that nothing in the symmetric difference
    /// explains, is not decisive.
    #[test]
    fn ties_and_unexplained_divergences_are_not_decisive() {
        assert!(divergence(0.5, 0.25, true).decisive);
        assert!(!divergence(0.0, 0.25, true).decisive);
        assert!(!divergence(0.5, 0.0, true).decisive);
        assert!(!divergence(0.5, 0.25, false).decisive);
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
    }
}
