//! Delimiter corruption measured along answers that are valid by construction.
//!
//! For each prompt/schema pair of the corpus, llama.cpp's grammar sampler (a grammar built
//! from the schema, [`Schema::grammar`]) walks the unpenalized model greedily: at each step the
//! reference token is the highest raw logit the grammar allows (ties: the lowest id). The
//! reference is therefore a JSON value the schema accepts, whatever the model would have
//! written unconstrained. Along it, every variant's sampler sees the same history (prompt and
//! reference so far) and makes its own unconstrained greedy choice from the same raw row. At
//! each *structural* position (the reference token is only JSON delimiters and whitespace,
//! [`crate::schema::is_structural`]) a variant *leaves the structure* when its choice differs from the
//! reference token. That share, per variant, is the measure; the unpenalized `none` variant
//! gives the model's own rate.
//!
//! The grammar is applied to the 256 highest logits first and to the whole row only when none
//! of those is allowed. That is exact, because the grammar judges each token on its own; the
//! first [`FULL_CHECK_PAIRS`] pairs also run the whole-row pass at every step and must agree.

use crate::json::{variant_sampler, Variant};
use crate::schema::Schema;
use anyhow::{ensure, Context as _, Result};
use harness::{argmax, LoadedModel};
use oracle::stats::{self, Estimate};
use oracle::TokenId;
use report::Control;
use serde_json::{json, Value};
use std::sync::Arc;
use subject::{Append, Candidates, MultiContext, Sampler, SeqId, Vocab};

/// The grammar shortcut's candidate count.
const SHORTLIST: usize = 256;
/// Pairs whose every step is also checked against the grammar on the whole row.
pub const FULL_CHECK_PAIRS: usize = 2;
/// Reference answers stop here if the grammar has not finished.
pub const MAX_REFERENCE: usize = 160;
/// Pairs decoded together in one context.
const PAIRS_PER_CONTEXT: usize = 16;

/// Who chooses at a structural position: a penalty variant, or a planted control.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Chooser {
    Variant(Variant),
    /// Positive control: the best token that is *not* structural, so it must leave the
    /// structure at every structural position.
    AvoidStructural,
}

impl Chooser {
    pub fn label(&self) -> String {
        match self {
            Chooser::Variant(v) => v.label(),
            Chooser::AvoidStructural => "planted: avoid structural".into(),
        }
    }

    /// The measured variants, then the controls: the normalized penalty at theta 1 (a no-op
    /// that must choose exactly like `none`) and the structure-avoiding chooser.
    pub fn all() -> Vec<Chooser> {
        let mut v: Vec<Chooser> = Variant::all().into_iter().map(Chooser::Variant).collect();
        v.push(Chooser::Variant(Variant::Normalized { theta: 1.0 }));
        v.push(Chooser::AvoidStructural);
        v
    }
}

/// One pair's reference and what every chooser did along it.
#[derive(Debug, Clone, PartialEq)]
pub struct PairResult {
    pub prompt: String,
    pub reference: Vec<TokenId>,
    pub text: String,
    /// The grammar finished (an end-of-generation token was its choice).
    pub complete: bool,
    pub schema_valid: bool,
    pub structural: usize,
    /// Per chooser, in [`Chooser::all`] order: structural positions where its choice differs
    /// from the reference token, and those where its choice is not structural at all.
    pub leaves: Vec<usize>,
    pub corrupts: Vec<usize>,
    /// Steps where the shortcut was checked against the whole-row grammar, and mismatches.
    pub shortcut_checked: usize,
    pub shortcut_mismatches: usize,
}

/// One pair in flight.
struct PairState {
    grammar: Sampler,
    samplers: Vec<Option<Sampler>>,
    full_check: bool,
    out: PairResult,
    done: bool,
}

/// The grammar's greedy choice on the shortlist, or on the whole row if the shortlist has
/// no allowed token.
fn grammar_choice(grammar: &mut Sampler, row: &[f32]) -> Result<TokenId> {
    let mut order: Vec<usize> = (0..row.len()).collect();
    let k = SHORTLIST.min(row.len());
    // Highest logit first, lowest id among equals (the greedy rule on an id-ordered row);
    // -0 and +0 compare equal there, so they do here.
    let by_rank = |a: &usize, b: &usize| {
        let (x, y) = (row[*a] + 0.0, row[*b] + 0.0);
        y.total_cmp(&x).then(a.cmp(b))
    };
    order.select_nth_unstable_by(k - 1, by_rank);
    order.truncate(k);
    order.sort_by(by_rank);
    let mut short = Candidates::new(order.iter().map(|&i| (TokenId(i as i32), row[i])));
    grammar.apply(&mut short)?;
    if let Some(c) = short.entries.iter().find(|c| c.logit > f32::NEG_INFINITY) {
        return Ok(c.id);
    }
    grammar_choice_full(grammar, row)
}

fn grammar_choice_full(grammar: &mut Sampler, row: &[f32]) -> Result<TokenId> {
    let masked = grammar.apply_in_id_order(row)?;
    ensure!(
        masked.iter().any(|&z| z > f32::NEG_INFINITY),
        "the grammar allows no token"
    );
    Ok(argmax(&masked))
}

impl PairState {
    /// Takes one step on `row` (the raw logits after prompt + reference so far); returns the
    /// reference token, or `None` once the pair is finished.
    fn step(
        &mut self,
        row: &[f32],
        choosers: &[Chooser],
        model: &subject::Model,
        structural: &[bool],
    ) -> Result<Option<TokenId>> {
        let reference = grammar_choice(&mut self.grammar, row)?;
        if self.full_check {
            self.out.shortcut_checked += 1;
            if grammar_choice_full(&mut self.grammar, row)? != reference {
                self.out.shortcut_mismatches += 1;
            }
        }
        if model.is_eog(reference) {
            self.out.complete = true;
            self.done = true;
            return Ok(None);
        }
        if structural[reference.0 as usize] {
            self.out.structural += 1;
            for (k, chooser) in choosers.iter().enumerate() {
                let own = match (chooser, self.samplers[k].as_mut()) {
                    (Chooser::AvoidStructural, _) => best_non_structural(row, structural),
                    (Chooser::Variant(_), Some(s)) => argmax(&s.apply_in_id_order(row)?),
                    (Chooser::Variant(_), None) => argmax(row),
                };
                if own != reference {
                    self.out.leaves[k] += 1;
                }
                if !structural[own.0 as usize] {
                    self.out.corrupts[k] += 1;
                }
            }
        }
        self.grammar.accept(reference)?;
        for s in self.samplers.iter_mut().flatten() {
            s.accept(reference)?;
        }
        self.out.reference.push(reference);
        if self.out.reference.len() >= MAX_REFERENCE {
            self.done = true;
            return Ok(None);
        }
        Ok(Some(reference))
    }
}

fn best_non_structural(row: &[f32], structural: &[bool]) -> TokenId {
    let mut best: Option<usize> = None;
    for (i, &z) in row.iter().enumerate() {
        if !structural[i] && best.is_none_or(|b| z > row[b]) {
            best = Some(i);
        }
    }
    TokenId(best.unwrap_or(0) as i32)
}

/// Everything measured on one model.
#[derive(Debug, Clone, PartialEq)]
pub struct StructuralReport {
    pub model_label: String,
    pub choosers: Vec<Chooser>,
    pub pairs: Vec<PairResult>,
}

/// Walks every pair's grammar reference on `m` and counts each chooser's departures.
pub fn run(m: &LoadedModel, corpus: &[(String, Schema)], threads: i32) -> Result<StructuralReport> {
    let choosers = Chooser::all();
    let vocab = Vocab::load(&m.choice.path).context("loading the vocabulary for the grammar")?;
    let structural: Arc<Vec<bool>> = Arc::new(crate::json::structural_ids(&m.model)?);
    let mut pairs = Vec::new();
    for (chunk_no, chunk) in corpus.chunks(PAIRS_PER_CONTEXT).enumerate() {
        let prompts = chunk
            .iter()
            .map(|(p, _)| m.chat_ids(p))
            .collect::<Result<Vec<_>>>()?;
        let longest = prompts.iter().map(Vec::len).max().unwrap_or(1);
        let n_seq = chunk.len();
        let ctx_len = longest + MAX_REFERENCE + 8;
        let mut ctx = MultiContext::new(
            &m.model,
            (n_seq * ctx_len) as u32,
            n_seq as u32,
            longest.max(n_seq) as u32,
            threads,
        )?;
        let mut states = Vec::new();
        for (i, ((prompt_text, schema), prompt)) in chunk.iter().zip(&prompts).enumerate() {
            let grammar = Sampler::grammar(&vocab, &schema.grammar(), "root")
                .with_context(|| format!("the grammar of {prompt_text:?}"))?;
            let whole = prompt.len() + MAX_REFERENCE;
            let samplers = choosers
                .iter()
                .map(|c| match c {
                    Chooser::Variant(v) => variant_sampler(*v, &m.model, prompt, whole),
                    Chooser::AvoidStructural => Ok(None),
                })
                .collect::<Result<Vec<_>>>()?;
            states.push(PairState {
                grammar,
                samplers,
                full_check: chunk_no * PAIRS_PER_CONTEXT + i < FULL_CHECK_PAIRS,
                out: PairResult {
                    prompt: prompt_text.clone(),
                    reference: Vec::new(),
                    text: String::new(),
                    complete: false,
                    schema_valid: false,
                    structural: 0,
                    leaves: vec![0; choosers.len()],
                    corrupts: vec![0; choosers.len()],
                    shortcut_checked: 0,
                    shortcut_mismatches: 0,
                },
                done: false,
            });
        }
        // Each prompt alone (its last row is read before the next decode replaces it), then
        // every unfinished pair one token per decode.
        let mut pending: Vec<Append> = Vec::new();
        for (i, prompt) in prompts.iter().enumerate() {
            let seq = SeqId(i as i32);
            let items: Vec<Append> = prompt
                .iter()
                .enumerate()
                .map(|(j, &token)| Append {
                    seq,
                    token,
                    logits: j + 1 == prompt.len(),
                })
                .collect();
            ctx.decode(&items)?;
            let row = ctx.logits(0)?;
            if let Some(t) = states[i].step(row, &choosers, &m.model, &structural)? {
                pending.push(Append {
                    seq,
                    token: t,
                    logits: true,
                });
            }
        }
        while !pending.is_empty() {
            ctx.decode(&pending)?;
            let mut next = Vec::new();
            for (k, a) in pending.iter().enumerate() {
                let row = ctx.logits(k)?;
                let i = a.seq.0 as usize;
                if let Some(t) = states[i].step(row, &choosers, &m.model, &structural)? {
                    next.push(Append {
                        seq: a.seq,
                        token: t,
                        logits: true,
                    });
                }
            }
            pending = next;
        }
        for (mut s, (_, schema)) in states.into_iter().zip(chunk) {
            s.out.text = m.model.detokenize(&s.out.reference)?;
            s.out.schema_valid = s.out.complete
                && serde_json::from_str::<Value>(&s.out.text)
                    .ok()
                    .is_some_and(|v| schema.accepts(&v));
            pairs.push(s.out);
        }
    }
    Ok(StructuralReport {
        model_label: m.choice.label.clone(),
        choosers,
        pairs,
    })
}

/// One chooser's departures over all pairs.
#[derive(Debug, Clone, PartialEq)]
pub struct Leaves {
    pub label: String,
    pub leaves: usize,
    pub corrupts: usize,
    pub structural: usize,
    /// Mean over pairs of each pair's share, with a 95% bootstrap interval over pairs.
    pub share: Estimate,
    pub corrupt_share: Estimate,
}

impl StructuralReport {
    pub fn leaves(&self) -> Vec<Leaves> {
        let counted: Vec<&PairResult> = self.pairs.iter().filter(|p| p.structural > 0).collect();
        self.choosers
            .iter()
            .enumerate()
            .map(|(k, c)| {
                let share = |count: fn(&PairResult) -> &Vec<usize>| {
                    let shares: Vec<f64> = counted
                        .iter()
                        .map(|p| count(p)[k] as f64 / p.structural as f64)
                        .collect();
                    stats::bootstrap_mean(&shares)
                };
                Leaves {
                    label: c.label(),
                    leaves: self.pairs.iter().map(|p| p.leaves[k]).sum(),
                    corrupts: self.pairs.iter().map(|p| p.corrupts[k]).sum(),
                    structural: self.pairs.iter().map(|p| p.structural).sum(),
                    share: share(|p| &p.leaves),
                    corrupt_share: share(|p| &p.corrupts),
                }
            })
            .collect()
    }

    fn index_of(&self, c: Chooser) -> Option<usize> {
        self.choosers.iter().position(|x| *x == c)
    }

    /// The controls of this measurement (see the module notes).
    pub fn controls(&self) -> Vec<Control> {
        let mut out = Vec::new();
        let structural: usize = self.pairs.iter().map(|p| p.structural).sum();
        let label = &self.model_label;
        if let Some(k) = self.index_of(Chooser::AvoidStructural) {
            let leaves: usize = self.pairs.iter().map(|p| p.leaves[k]).sum();
            out.push(Control::positive(
                format!("{label}: a chooser that avoids structural tokens leaves the structure at every structural position"),
                structural > 0 && leaves == structural,
                format!("{leaves} of {structural} structural positions"),
            ));
        }
        if let (Some(none), Some(noop)) = (
            self.index_of(Chooser::Variant(Variant::None)),
            self.index_of(Chooser::Variant(Variant::Normalized { theta: 1.0 })),
        ) {
            let differ = self
                .pairs
                .iter()
                .filter(|p| p.leaves[none] != p.leaves[noop])
                .count();
            out.push(Control::negative(
                format!("{label}: the normalized penalty at theta 1 departs exactly where the unpenalized choice does"),
                differ == 0,
                format!("{differ} of {} pairs differ in their count", self.pairs.len()),
            ));
        }
        let complete = self.pairs.iter().filter(|p| p.complete).count();
        let invalid = self
            .pairs
            .iter()
            .filter(|p| p.complete && !p.schema_valid)
            .count();
        out.push(Control::oracle_check(
            format!("{label}: every finished grammar reference parses and its schema accepts it"),
            complete > 0 && invalid == 0,
            format!(
                "{invalid} of {complete} finished references fail ({} of {} pairs finished within {MAX_REFERENCE} tokens)",
                complete,
                self.pairs.len()
            ),
        ));
        let checked: usize = self.pairs.iter().map(|p| p.shortcut_checked).sum();
        let mismatched: usize = self.pairs.iter().map(|p| p.shortcut_mismatches).sum();
        out.push(Control::oracle_check(
            format!("{label}: the grammar on the {SHORTLIST} highest logits chooses like the grammar on the whole row"),
            checked > 0 && mismatched == 0,
            format!("{mismatched} of {checked} steps differ"),
        ));
        out
    }

    pub fn to_json(&self) -> Value {
        json!({
            "model": self.model_label,
            "pairs": self.pairs.len(),
            "finished": self.pairs.iter().filter(|p| p.complete).count(),
            "schema_valid": self.pairs.iter().filter(|p| p.schema_valid).count(),
            "reference_tokens": self.pairs.iter().map(|p| p.reference.len()).sum::<usize>(),
            "rows": self.leaves().iter().map(|l| json!({
                "variant": l.label,
                "structural_positions": l.structural,
                "leaves": l.leaves,
                "share": l.share.mean,
                "ci": [l.share.lo, l.share.hi],
                "non_structural": l.corrupts,
                "non_structural_share": l.corrupt_share.mean,
                "non_structural_ci": [l.corrupt_share.lo, l.corrupt_share.hi],
            })).collect::<Vec<_>>(),
            "per_pair": self.pairs.iter().map(|p| json!({
                "prompt": p.prompt,
                "reference": p.text,
                "finished": p.complete,
                "schema_valid": p.schema_valid,
                "structural_positions": p.structural,
                "leaves": p.leaves,
                "non_structural": p.corrupts,
            })).collect::<Vec<_>>(),
        })
    }

    pub fn to_text(&self) -> String {
        let n = self.pairs.len();
        let mut out = format!(
            "structural positions along grammar references: {}, {n} prompt/schema pairs, {} finished, {} schema-valid, {} reference tokens\n  at each structural reference token, a variant 'leaves' when its greedy choice differs from it and 'corrupts' when its choice is not structural at all;\n  shares are means over pairs [95% bootstrap over pairs]\n  variant                     leaves / structural   share  [95% CI]               corrupts  share  [95% CI]\n",
            self.model_label,
            self.pairs.iter().filter(|p| p.complete).count(),
            self.pairs.iter().filter(|p| p.schema_valid).count(),
            self.pairs.iter().map(|p| p.reference.len()).sum::<usize>(),
        );
        for l in self.leaves() {
            out.push_str(&format!(
                "  {:<27} {:>6} / {:<6}        {:.4} [{:.4}, {:.4}]   {:>6}  {:.4} [{:.4}, {:.4}]\n",
                l.label,
                l.leaves,
                l.structural,
                l.share.mean,
                l.share.lo,
                l.share.hi,
                l.corrupts,
                l.corrupt_share.mean,
                l.corrupt_share.lo,
                l.corrupt_share.hi
            ));
        }
        out
    }
}
