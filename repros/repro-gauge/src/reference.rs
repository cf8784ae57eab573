//! Where penalties break JSON, measured along answers that are valid by construction.
//!
//! For each prompt/schema pair of the corpus, llama.cpp's grammar sampler (a grammar built
//! from the schema, [`Schema::grammar`]) walks the unpenalized model greedily: at each step the
//! reference token is the highest raw logit the grammar allows (ties: the lowest id). A walk
//! that ends (the grammar then allows only end-of-generation) is a JSON value its schema
//! accepts, whatever the model would have written unconstrained; walks that reach
//! [`MAX_REFERENCE`] tokens are reported apart and left out of the shares.
//!
//! Along the reference, every chooser's sampler sees the same history (prompt and reference so
//! far) and makes its own unconstrained greedy choice from the same raw row. At each
//! *structural* position (the reference token is JSON delimiters, possibly with whitespace,
//! [`crate::schema::is_structural`]) the choice either keeps the reference token, *leaves* it
//! for another token the grammar still allows (another valid spelling, e.g. `{` for `{"`), or
//! *breaks* the JSON: the grammar rejects it. Breaking is the measure; leaving is reported
//! beside it. Departures whose top-2 margin is a knife edge are counted apart.
//!
//! Controls run through the same path as the variants (a sampler stage, its output row, the
//! first maximum): a planted stage that picks a token the grammar rejects must break at every
//! structural position; a planted stage that doubles every logit (exact in f32, so the choice
//! cannot move, though the bits differ) must keep, leave and break exactly where `none` does.
//!
//! Each pair is decoded alone, on one sequence: decoded in a batch with other pairs, one of
//! Gemma3's walks parted from the same walk decoded alone (full run of 2026-11-30). Unlike
//! F4's forked runs, whose sequences always have equal lengths, these pairs have prompts of
//! different lengths, and the cause is not known, so no result here depends on batching.
//!
//! The grammar is applied to the [`SHORTLIST`] highest logits first and to the whole row only
//! when none of those is allowed; llama.cpp's grammar judges each token on its own, so this is
//! exact, and on the first [`FULL_CHECK_PAIRS`] pairs the whole-row pass also runs wherever the
//! shortlist decided, as a consistency check.

use crate::free_running::{first_max_of, is_knife_edge};
use crate::json::{chain_after, variant_sampler, Variant};
use crate::schema::Schema;
use anyhow::{ensure, Context as _, Result};
use harness::{argmax, LoadedModel};
use oracle::gauge::Operator;
use oracle::stats;
use oracle::TokenId;
use report::Control;
use serde::{Serialize, Serializer};
use serde_json::{json, Value};
use std::ffi::CStr;
use subject::{ArrayView, Attention, Candidates, Context, CustomSampler, Model, Sampler, Vocab};

/// The grammar shortcut's candidate count.
pub const SHORTLIST: usize = 256;
/// Pairs whose shortlist choices are also checked against the grammar on the whole row.
pub const FULL_CHECK_PAIRS: usize = 2;
/// Reference answers stop here if the grammar has not finished.
pub const MAX_REFERENCE: usize = 160;
/// The share of pairs whose walk must finish for the shares to count (PREREG F4, part 6).
pub const MIN_FINISHED: f64 = 0.8;

/// Who chooses at a structural position: a penalty variant, or a planted control.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Chooser {
    Variant(Variant),
    /// Positive control: a stage that leaves only the best token the grammar rejects.
    Breaker,
    /// Negative control: a stage that doubles every logit.
    Doubler,
}

impl Chooser {
    pub fn label(&self) -> String {
        match self {
            Chooser::Variant(v) => v.label(),
            Chooser::Breaker => "planted: grammar breaker".into(),
            Chooser::Doubler => "planted: logits doubled".into(),
        }
    }

    pub fn is_control(&self) -> bool {
        !matches!(self, Chooser::Variant(_))
    }

    /// The measured variants, then the two planted controls.
    pub fn all() -> Vec<Chooser> {
        let variants = Variant::all().into_iter().map(Chooser::Variant);
        variants
            .chain([Chooser::Breaker, Chooser::Doubler])
            .collect()
    }

    /// Whether a top-2 margin could have been decided by rounding alone.
    fn knife_edge(&self, margin: f32, top: f32) -> bool {
        match self {
            Chooser::Variant(Variant::Normalized { theta }) => {
                is_knife_edge(Operator::Normalized, *theta, margin, top)
            }
            _ => is_knife_edge(Operator::Sign, 1.0, margin, top),
        }
    }
}

/// Doubles every logit: exact in f32, so it never changes which token is largest.
struct Doubler;

impl CustomSampler for Doubler {
    fn name(&self) -> &'static CStr {
        c"planted-doubler"
    }
    fn apply(&mut self, view: &mut ArrayView<'_>) {
        (0..view.len()).for_each(|i| view.set_logit(i, view.logit(i) * 2.0));
    }
    fn clone_sampler(&self) -> Box<dyn CustomSampler> {
        Box::new(Doubler)
    }
}

/// Keeps only the highest-logit token that its own copy of the pair's grammar rejects.
struct Breaker {
    grammar: Sampler,
}

impl Breaker {
    /// The index (into the view) of the best token the grammar rejects: first among the
    /// [`SHORTLIST`] highest logits, then, if all of those are allowed, among the rest.
    fn pick(&mut self, view: &ArrayView<'_>) -> Option<usize> {
        let by_rank =
            |a: &usize, b: &usize| view.logit(*b).total_cmp(&view.logit(*a)).then(a.cmp(b));
        let mut order: Vec<usize> = (0..view.len()).collect();
        let k = SHORTLIST.min(order.len());
        if k == 0 {
            return None;
        }
        order.select_nth_unstable_by(k - 1, by_rank);
        let (head, tail) = order.split_at_mut(k);
        head.sort_by(by_rank);
        let grammar = &mut self.grammar;
        let mut rejected = |i: &usize| grammar_allows(grammar, view.id(*i)).is_ok_and(|ok| !ok);
        if let Some(&i) = head.iter().find(|i| rejected(i)) {
            return Some(i);
        }
        tail.sort_by(by_rank);
        tail.iter().find(|i| rejected(i)).copied()
    }
}

impl CustomSampler for Breaker {
    fn name(&self) -> &'static CStr {
        c"planted-breaker"
    }
    fn apply(&mut self, view: &mut ArrayView<'_>) {
        let keep = self.pick(view);
        for i in 0..view.len() {
            if Some(i) != keep {
                view.set_logit(i, f32::NEG_INFINITY);
            }
        }
    }
    fn accept(&mut self, id: TokenId) {
        // It is fed the prompt, which its grammar (covering only the answer) refuses without a
        // change of state, then the reference tokens, which are the grammar's own choices.
        let _ = self.grammar.accept(id);
    }
    fn clone_sampler(&self) -> Box<dyn CustomSampler> {
        // Nothing here clones a chooser. `clone_sampler` cannot fail, so if the grammar could
        // not be cloned the copy would be a doubler; no result depends on it.
        match self.grammar.try_clone() {
            Ok(grammar) => Box::new(Breaker { grammar }),
            Err(_) => Box::new(Doubler),
        }
    }
}

/// A chooser's sampler for one pair (none for the unpenalized `none`), prompt accepted.
fn chooser_sampler(
    chooser: Chooser,
    model: &Model,
    prompt: &[TokenId],
    grammar: impl FnOnce() -> Result<Sampler>,
) -> Result<Option<Sampler>> {
    let planted = match chooser {
        Chooser::Variant(v) => {
            return variant_sampler(v, model, prompt, prompt.len() + MAX_REFERENCE)
        }
        Chooser::Breaker => Sampler::custom(Breaker {
            grammar: grammar()?,
        })?,
        Chooser::Doubler => Sampler::custom(Doubler)?,
    };
    chain_after(planted, prompt).map(Some)
}

/// What a chooser did at one structural position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Keep,
    /// Another token the grammar allows.
    Leave,
    /// A token the grammar rejects.
    Break,
}

/// One pair's reference and what every chooser did along it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PairResult {
    pub prompt: String,
    pub reference: Vec<TokenId>,
    pub text: String,
    /// The grammar finished (an end-of-generation token was its choice).
    pub complete: bool,
    /// The reference's bytes are UTF-8, parse as JSON and the schema accepts the value.
    pub schema_valid: bool,
    /// Per chooser, in [`Chooser::all`] order, one outcome per structural position.
    pub outcomes: Vec<Vec<Outcome>>,
    /// Per chooser: departures (leave or break) whose top-2 margin was a knife edge.
    pub knife_edges: Vec<usize>,
    /// Steps the shortlist decided that were also run on the whole row, and mismatches.
    pub shortcut_checked: usize,
    pub shortcut_mismatches: usize,
}

impl PairResult {
    pub fn structural(&self) -> usize {
        self.outcomes.first().map_or(0, Vec::len)
    }
    fn count(&self, k: usize, f: impl Fn(Outcome) -> bool) -> usize {
        self.outcomes[k].iter().filter(|&&o| f(o)).count()
    }
    pub fn leaves(&self, k: usize) -> usize {
        self.count(k, |o| o != Outcome::Keep)
    }
    pub fn breaks(&self, k: usize) -> usize {
        self.count(k, |o| o == Outcome::Break)
    }
}

/// One pair in flight.
struct PairState {
    grammar: Sampler,
    samplers: Vec<Option<Sampler>>,
    full_check: bool,
    out: PairResult,
}

/// The grammar's greedy choice, and whether the shortlist decided it.
fn grammar_choice(grammar: &mut Sampler, row: &[f32]) -> Result<(TokenId, bool)> {
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
        return Ok((c.id, true));
    }
    Ok((grammar_choice_full(grammar, row)?, false))
}

fn grammar_choice_full(grammar: &mut Sampler, row: &[f32]) -> Result<TokenId> {
    let masked = grammar.apply_in_id_order(row)?;
    ensure!(
        masked.iter().any(|&z| z > f32::NEG_INFINITY),
        "the grammar allows no token"
    );
    Ok(argmax(&masked))
}

fn grammar_allows(grammar: &mut Sampler, t: TokenId) -> Result<bool> {
    let mut one = Candidates::new([(t, 0.0f32)]);
    grammar.apply(&mut one)?;
    Ok(one.entries[0].logit > f32::NEG_INFINITY)
}

impl PairState {
    /// Takes one step on `row` (the raw logits after prompt + reference so far); returns the
    /// reference token, or `None` once the pair is finished.
    fn step(
        &mut self,
        row: &[f32],
        choosers: &[Chooser],
        model: &Model,
        structural: &[bool],
    ) -> Result<Option<TokenId>> {
        let (reference, by_shortlist) = grammar_choice(&mut self.grammar, row)?;
        if self.full_check && by_shortlist {
            self.out.shortcut_checked += 1;
            if grammar_choice_full(&mut self.grammar, row)? != reference {
                self.out.shortcut_mismatches += 1;
            }
        }
        if model.is_eog(reference) {
            self.out.complete = true;
            return Ok(None);
        }
        if structural[reference.0 as usize] {
            for (k, chooser) in choosers.iter().enumerate() {
                let (own, margin, top) = match self.samplers[k].as_mut() {
                    Some(s) => first_max_of(&s.apply_in_id_order(row)?),
                    None => first_max_of(row),
                };
                let outcome = if own == reference {
                    Outcome::Keep
                } else if grammar_allows(&mut self.grammar, own)? {
                    Outcome::Leave
                } else {
                    Outcome::Break
                };
                if outcome != Outcome::Keep && chooser.knife_edge(margin, top) {
                    self.out.knife_edges[k] += 1;
                }
                self.out.outcomes[k].push(outcome);
            }
        }
        self.grammar.accept(reference)?;
        for s in self.samplers.iter_mut().flatten() {
            s.accept(reference)?;
        }
        self.out.reference.push(reference);
        if self.out.reference.len() >= MAX_REFERENCE {
            return Ok(None);
        }
        Ok(Some(reference))
    }
}

/// Everything measured on one model.
#[derive(Debug, Clone, PartialEq)]
pub struct StructuralReport {
    pub model_label: String,
    pub choosers: Vec<Chooser>,
    pub pairs: Vec<PairResult>,
}

/// A fresh walk of one pair (its grammar and every chooser's sampler, prompt accepted).
fn new_state(
    m: &LoadedModel,
    vocab: &std::sync::Arc<Vocab>,
    choosers: &[Chooser],
    (prompt_text, schema): &(String, Schema),
    prompt: &[TokenId],
    full_check: bool,
) -> Result<PairState> {
    let grammar_text = schema.grammar();
    let grammar = || {
        Sampler::grammar(vocab, &grammar_text, "root")
            .with_context(|| format!("the grammar of {prompt_text:?}"))
    };
    let samplers = choosers
        .iter()
        .map(|&c| chooser_sampler(c, &m.model, prompt, grammar))
        .collect::<Result<Vec<_>>>()?;
    Ok(PairState {
        grammar: grammar()?,
        samplers,
        full_check,
        out: PairResult {
            prompt: prompt_text.clone(),
            outcomes: vec![Vec::new(); choosers.len()],
            knife_edges: vec![0; choosers.len()],
            ..PairResult::default()
        },
    })
}

/// Strict UTF-8, then JSON, then the schema.
fn judge(m: &LoadedModel, schema: &Schema, out: &mut PairResult) -> Result<()> {
    let mut bytes = Vec::new();
    for &t in &out.reference {
        bytes.extend(m.model.token_bytes(t)?);
    }
    out.text = String::from_utf8_lossy(&bytes).into_owned();
    out.schema_valid = out.complete
        && String::from_utf8(bytes)
            .ok()
            .and_then(|s| serde_json::from_str::<Value>(&s).ok())
            .is_some_and(|v| schema.accepts(&v));
    Ok(())
}

/// Walks every pair's grammar reference on `m` and records each chooser's outcomes. Each pair
/// is decoded alone, on one sequence (see the module notes for why not in a batch).
pub fn run(m: &LoadedModel, corpus: &[(String, Schema)], threads: i32) -> Result<StructuralReport> {
    let choosers = Chooser::all();
    let vocab = Vocab::load(&m.choice.path).context("loading the vocabulary for the grammar")?;
    let structural = crate::json::structural_ids(&m.model)?;
    let prompts = corpus
        .iter()
        .map(|(p, _)| m.chat_ids(p))
        .collect::<Result<Vec<_>>>()?;
    let longest = prompts.iter().map(Vec::len).max().unwrap_or(1);
    let n_ctx = (longest + MAX_REFERENCE + 8) as u32;
    let mut ctx = Context::with_attention(&m.model, n_ctx, Attention::Plain, threads)?;
    let mut pairs = Vec::new();
    let mut progress = cmdline::Progress::new(
        format!("F4 grammar-reference pairs on {}", m.choice.label),
        corpus.len() as u64,
    );
    for (i, (pair, prompt)) in corpus.iter().zip(&prompts).enumerate() {
        let mut state = new_state(m, &vocab, &choosers, pair, prompt, i < FULL_CHECK_PAIRS)?;
        ctx.clear();
        ctx.decode(prompt)
            .with_context(|| format!("decoding JSON prompt {:?}", pair.0))?;
        while let Some(t) = state.step(&ctx.logits()?, &choosers, &m.model, &structural)? {
            ctx.decode(&[t])?;
        }
        judge(m, &pair.1, &mut state.out)?;
        pairs.push(state.out);
        progress.inc(1);
    }
    progress.finish();
    Ok(StructuralReport {
        model_label: m.choice.label.clone(),
        choosers,
        pairs,
    })
}

/// One chooser's outcomes over the finished pairs. Shares are means over finished pairs of
/// each pair's share, with the 2.5th and 97.5th percentiles of the bootstrap mean over them
/// (called a 95% interval from 16 pairs on: `interval`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Shares {
    #[serde(rename = "variant")]
    pub label: String,
    #[serde(skip)]
    pub control: bool,
    #[serde(rename = "structural_positions")]
    pub structural: usize,
    pub breaks: usize,
    pub break_share: f64,
    pub break_ci: [f64; 2],
    pub leaves: usize,
    pub leave_share: f64,
    pub leave_ci: [f64; 2],
    #[serde(rename = "knife_edge_departures")]
    pub knife_edges: usize,
}

impl Serialize for StructuralReport {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (shares, choosers) = (self.shares(), 0..self.choosers.len());
        let rows = |control: bool| -> Vec<&Shares> {
            shares.iter().filter(|s| s.control == control).collect()
        };
        let per_pair: Vec<Value> = (self.pairs.iter())
            .map(|p| {
                json!({
                    "prompt": p.prompt,
                    "reference": p.text,
                    "finished": p.complete,
                    "schema_valid": p.schema_valid,
                    "structural_positions": p.structural(),
                    "breaks": choosers.clone().map(|k| p.breaks(k)).collect::<Vec<_>>(),
                    "leaves": choosers.clone().map(|k| p.leaves(k)).collect::<Vec<_>>(),
                })
            })
            .collect();
        json!({
            "model": self.model_label,
            "pairs": self.pairs.len(),
            "finished": self.finished().len(),
            "schema_valid": self.pairs.iter().filter(|p| p.schema_valid).count(),
            "reference_tokens": self.pairs.iter().map(|p| p.reference.len()).sum::<usize>(),
            "rows": rows(false),
            "control_rows": rows(true),
            "sign_1_3_to_normalized_1_3_break_ratio": self.sign_to_normalized(),
            "per_pair": per_pair,
        })
        .serialize(s)
    }
}

impl StructuralReport {
    pub fn finished(&self) -> Vec<&PairResult> {
        self.pairs.iter().filter(|p| p.complete).collect()
    }

    pub fn shares(&self) -> Vec<Shares> {
        let counted: Vec<&PairResult> = self
            .finished()
            .into_iter()
            .filter(|p| p.structural() > 0)
            .collect();
        self.choosers
            .iter()
            .enumerate()
            .map(|(k, c)| {
                let share = |count: fn(&PairResult, usize) -> usize| {
                    let v: Vec<f64> = (counted.iter())
                        .map(|p| count(p, k) as f64 / p.structural() as f64)
                        .collect();
                    let e = stats::bootstrap_mean(&v);
                    (e.mean, [e.lo, e.hi])
                };
                let ((break_share, break_ci), (leave_share, leave_ci)) =
                    (share(PairResult::breaks), share(PairResult::leaves));
                Shares {
                    label: c.label(),
                    control: c.is_control(),
                    structural: counted.iter().map(|p| p.structural()).sum(),
                    breaks: counted.iter().map(|p| p.breaks(k)).sum(),
                    break_share,
                    break_ci,
                    leaves: counted.iter().map(|p| p.leaves(k)).sum(),
                    leave_share,
                    leave_ci,
                    knife_edges: counted.iter().map(|p| p.knife_edges[k]).sum(),
                }
            })
            .collect()
    }

    fn index_of(&self, c: Chooser) -> Option<usize> {
        self.choosers.iter().position(|x| *x == c)
    }

    /// The sign penalty at 1.3 over the whole sequence against the normalized one at 1.3:
    /// the ratio of their mean break shares (`None` when the normalized share is 0).
    pub fn sign_to_normalized(&self) -> Option<f64> {
        let shares = self.shares();
        let find = |v: Variant| {
            self.index_of(Chooser::Variant(v))
                .map(|k| shares[k].break_share)
        };
        let sign = find(Variant::Llama {
            theta: 1.3,
            window: None,
        })?;
        let normalized = find(Variant::Normalized { theta: 1.3 })?;
        (normalized > 0.0).then(|| sign / normalized)
    }

    /// [`Self::sign_to_normalized`] as the text and the evidence write it.
    pub fn ratio_text(&self) -> String {
        (self.sign_to_normalized())
            .map_or("undefined (normalized 0)".into(), |x| format!("{x:.1}x"))
    }

    /// The controls of this measurement (see the module notes).
    pub fn controls(&self) -> Vec<Control> {
        let mut out = Vec::new();
        let label = &self.model_label;
        let finished = self.finished();
        let structural: usize = finished.iter().map(|p| p.structural()).sum();
        if let Some(k) = self.index_of(Chooser::Breaker) {
            let breaks: usize = finished.iter().map(|p| p.breaks(k)).sum();
            out.push(Control::positive(
                format!("{label}: a planted stage that picks a token the grammar rejects breaks the JSON at every structural position"),
                structural > 0 && breaks == structural,
                format!("{breaks} of {structural} structural positions of the finished pairs"),
            ));
        }
        if let (Some(none), Some(doubled)) = (
            self.index_of(Chooser::Variant(Variant::None)),
            self.index_of(Chooser::Doubler),
        ) {
            let differ: usize = self
                .pairs
                .iter()
                .map(|p| {
                    p.outcomes[none]
                        .iter()
                        .zip(&p.outcomes[doubled])
                        .filter(|(a, b)| a != b)
                        .count()
                })
                .sum();
            let all: usize = self.pairs.iter().map(PairResult::structural).sum();
            out.push(Control::negative(
                format!("{label}: a planted stage that doubles every logit keeps, leaves and breaks exactly where the unpenalized choice does"),
                all > 0 && differ == 0,
                format!("{differ} of {all} structural positions differ"),
            ));
        }
        let complete = finished.len();
        let invalid = finished.iter().filter(|p| !p.schema_valid).count();
        let enough = complete as f64 >= MIN_FINISHED * self.pairs.len() as f64;
        out.push(Control::oracle_check(
            format!("{label}: grammar references finish and their schemas accept them"),
            enough && complete > 0 && invalid == 0,
            format!(
                "{complete} of {} walks finished within {MAX_REFERENCE} tokens (at least {:.0}% must); {invalid} finished references fail strict UTF-8, JSON or the schema",
                self.pairs.len(),
                100.0 * MIN_FINISHED
            ),
        ));
        let checked: usize = self.pairs.iter().map(|p| p.shortcut_checked).sum();
        let mismatched: usize = self.pairs.iter().map(|p| p.shortcut_mismatches).sum();
        out.push(Control::oracle_check(
            format!("{label}: consistency of the grammar shortcut: the {SHORTLIST} highest logits choose like the whole row"),
            checked > 0 && mismatched == 0,
            format!("{mismatched} of {checked} steps decided by the shortlist differ (first {FULL_CHECK_PAIRS} pairs)"),
        ));
        out
    }

    pub fn to_text(&self) -> String {
        let n = self.pairs.len();
        let finished = self.finished();
        // The bootstrap runs over the finished pairs with structural positions.
        let counted = (finished.iter()).filter(|p| p.structural() > 0).count();
        let ci = crate::interval::column(counted);
        let mut out = format!(
            "structural positions along grammar references: {}, {n} prompt/schema pairs, {} walks finished ({} schema-valid), {} reference tokens; shares over the finished pairs\n  at each structural reference token a variant's greedy choice keeps it, leaves it for a token the grammar allows, or breaks the JSON (the grammar rejects it);\n  shares are means over pairs [{}]; departures at knife edges are counted apart\n  variant                       breaks / structural  share  [{ci}]            leaves  share  [{ci}]            knife-edge\n",
            self.model_label,
            finished.len(),
            finished.iter().filter(|p| p.schema_valid).count(),
            self.pairs.iter().map(|p| p.reference.len()).sum::<usize>(),
            crate::interval::words(counted, "pairs"),
        );
        let line = |s: &Shares| {
            format!(
                "  {:<29} {:>6} / {:<6}      {:.4} [{:.4}, {:.4}]   {:>6}  {:.4} [{:.4}, {:.4}]   {:>6}\n",
                s.label,
                s.breaks,
                s.structural,
                s.break_share,
                s.break_ci[0],
                s.break_ci[1],
                s.leaves,
                s.leave_share,
                s.leave_ci[0],
                s.leave_ci[1],
                s.knife_edges
            )
        };
        let shares = self.shares();
        for s in shares.iter().filter(|s| !s.control) {
            out.push_str(&line(s));
        }
        out.push_str(&format!(
            "  break share, llama 1.3 whole over normalized 1.3: {}\n",
            self.ratio_text()
        ));
        out.push_str("  controls (planted, by construction: the breaker must break everywhere, the doubler must match none):\n");
        for s in shares.iter().filter(|s| s.control) {
            out.push_str(&line(s));
        }
        out
    }
}
