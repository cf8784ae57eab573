//! Many greedy runs of one prompt, decoded together, sharing a sequence while they agree.
//!
//! Each run chooses its own next token from the logits row of the sequence it sits on. Runs
//! whose token histories are identical sit on one sequence of a [`MultiContext`] and are
//! handed the same row (the same bits), so a run that would choose like its neighbours does
//! so by its own arithmetic, never by being skipped. When the runs of a sequence choose
//! differently, the sequence is forked once per extra choice and every branch goes on alone.
//! One `llama_decode` per step advances every live sequence.
//!
//! Cost: the prompt once, then one token per live sequence per step, so runs that never part
//! cost as much as one run.

use crate::Stop;
use anyhow::{ensure, Context as _, Result};
use oracle::TokenId;
use std::sync::Arc;
use std::sync::OnceLock;
use subject::{Append, Model, MultiContext, SeqId};

/// One run's decision rule. `choose` sees the raw logits row after the run's own history
/// and returns the run's next token (a sampler inside is expected to accept it).
pub trait Run {
    fn choose(&mut self, row: &LogitsRow<'_>) -> Result<TokenId>;
}

/// A logits row as the runs of one sequence see it, with quantities computed once for all
/// of them.
pub struct LogitsRow<'a> {
    pub raw: &'a [f32],
    lse: OnceLock<f64>,
}

impl<'a> LogitsRow<'a> {
    pub fn new(raw: &'a [f32]) -> LogitsRow<'a> {
        LogitsRow {
            raw,
            lse: OnceLock::new(),
        }
    }

    /// `ln sum exp(raw)` in f64 (each term exact to f64 rounding), computed on first use.
    pub fn log_sum_exp(&self) -> f64 {
        *self.lse.get_or_init(|| {
            let max = self.raw.iter().fold(f32::NEG_INFINITY, |m, &z| m.max(z)) as f64;
            if !max.is_finite() {
                return max;
            }
            max + self
                .raw
                .iter()
                .map(|&z| (z as f64 - max).exp())
                .sum::<f64>()
                .ln()
        })
    }
}

/// What the fork loop needs from a decoder: sequences that can be extended, forked and
/// removed, and the logits rows of the last decode. A model context is one; a planted source
/// ([`Scripted`]) is another, so the controls run through the same loop as the models.
pub trait Decoder {
    /// Appends each item's token to its sequence, all in one step.
    fn decode(&mut self, items: &[Append]) -> Result<()>;
    /// The logits of the `k`-th item of the last decode that asked for logits.
    fn logits(&self, k: usize) -> Result<&[f32]>;
    fn fork(&mut self, src: SeqId, dst: SeqId) -> Result<()>;
    fn is_end(&self, t: TokenId) -> bool;
}

/// A model's context.
impl Decoder for MultiContext {
    fn decode(&mut self, items: &[Append]) -> Result<()> {
        MultiContext::decode(self, items)
    }
    fn logits(&self, k: usize) -> Result<&[f32]> {
        MultiContext::logits(self, k)
    }
    fn fork(&mut self, src: SeqId, dst: SeqId) -> Result<()> {
        MultiContext::fork(self, src, dst)
    }
    fn is_end(&self, t: TokenId) -> bool {
        self.model().is_eog(t)
    }
}

/// A planted decoder: the logits after a sequence are `row_after(its tokens)`, with no model.
pub struct Scripted<F: Fn(&[TokenId]) -> Vec<f32>> {
    row_after: F,
    seqs: Vec<Vec<TokenId>>,
    rows: Vec<Vec<f32>>,
    end: Option<TokenId>,
}

impl<F: Fn(&[TokenId]) -> Vec<f32>> Scripted<F> {
    /// `n_seq` sequences; `end` is the end-of-generation token, if any.
    pub fn new(n_seq: usize, row_after: F, end: Option<TokenId>) -> Self {
        Scripted {
            row_after,
            seqs: vec![Vec::new(); n_seq],
            rows: Vec::new(),
            end,
        }
    }
}

impl<F: Fn(&[TokenId]) -> Vec<f32>> Decoder for Scripted<F> {
    fn decode(&mut self, items: &[Append]) -> Result<()> {
        let mut rows = Vec::new();
        for a in items {
            let s = self
                .seqs
                .get_mut(a.seq.0 as usize)
                .context("sequence out of range")?;
            s.push(a.token);
            if a.logits {
                rows.push((self.row_after)(s));
            }
        }
        self.rows = rows;
        Ok(())
    }
    fn logits(&self, k: usize) -> Result<&[f32]> {
        self.rows
            .get(k)
            .map(Vec::as_slice)
            .context("no such logits row")
    }
    fn fork(&mut self, src: SeqId, dst: SeqId) -> Result<()> {
        ensure!(
            self.seqs[dst.0 as usize].is_empty(),
            "sequence {} is not empty",
            dst.0
        );
        self.seqs[dst.0 as usize] = self.seqs[src.0 as usize].clone();
        Ok(())
    }
    fn is_end(&self, t: TokenId) -> bool {
        self.end == Some(t)
    }
}

/// What the runs produced, in the order they were given.
#[derive(Debug, Clone, PartialEq)]
pub struct Forked {
    pub tokens: Vec<Vec<TokenId>>,
    pub stops: Vec<Stop>,
    /// Tokens decoded after the prompt (one per live sequence per step).
    pub decoded: usize,
    /// The most sequences alive at once.
    pub max_live: usize,
}

struct Group {
    seq: SeqId,
    runs: Vec<usize>,
}

/// Runs every run greedily for up to `max_new` tokens after `prompt` (a run stops after an
/// end-of-generation token, which it keeps).
pub fn run_forked<R: Run + Send>(
    model: &Arc<Model>,
    prompt: &[TokenId],
    runs: &mut [R],
    max_new: usize,
    threads: i32,
) -> Result<Forked> {
    ensure!(!prompt.is_empty(), "the prompt has no tokens");
    ensure!(!runs.is_empty(), "no runs");
    ensure!(
        runs.len() <= 256,
        "at most 256 runs share a context, got {}",
        runs.len()
    );
    ensure!(max_new >= 1, "max_new must be at least 1");
    // One stream per sequence, each long enough for the prompt and every new token.
    let n_ctx = runs.len() * (prompt.len() + max_new + 8);
    let n_batch = prompt.len().max(runs.len());
    let mut ctx = MultiContext::new(
        model,
        n_ctx as u32,
        runs.len() as u32,
        n_batch as u32,
        threads,
    )?;
    run_on(&mut ctx, prompt, runs, max_new)
}

/// The fork loop on any decoder with at least `runs.len()` sequences.
pub fn run_on<D: Decoder, R: Run + Send>(
    ctx: &mut D,
    prompt: &[TokenId],
    runs: &mut [R],
    max_new: usize,
) -> Result<Forked> {
    ensure!(!prompt.is_empty(), "the prompt has no tokens");
    ensure!(!runs.is_empty(), "no runs");
    let first = SeqId(0);
    let items: Vec<Append> = prompt
        .iter()
        .enumerate()
        .map(|(i, &token)| Append {
            seq: first,
            token,
            logits: i + 1 == prompt.len(),
        })
        .collect();
    ctx.decode(&items).context("decoding the prompt")?;

    let mut tokens: Vec<Vec<TokenId>> = vec![Vec::new(); runs.len()];
    let mut stops = vec![Stop::Limit; runs.len()];
    let mut free: Vec<SeqId> = (1..runs.len() as i32).rev().map(SeqId).collect();
    let mut groups = vec![Group {
        seq: first,
        runs: (0..runs.len()).collect(),
    }];
    let (mut decoded, mut max_live) = (0, 1);
    while !groups.is_empty() {
        // Every run chooses from its group's row; the context is only read here.
        let rows = (0..groups.len())
            .map(|g| ctx.logits(g).map(LogitsRow::new))
            .collect::<Result<Vec<_>>>()?;
        let mut group_of = vec![None; runs.len()];
        for (g, group) in groups.iter().enumerate() {
            for &r in &group.runs {
                group_of[r] = Some(g);
            }
        }
        let chosen = choose_all(runs, &group_of, &rows)?;
        // Then the sequences follow the choices: the runs of a group that chose alike stay
        // on one sequence, the group's own for the first such part, a fork for each other.
        let (mut next, mut appends) = (Vec::new(), Vec::new());
        for g in std::mem::take(&mut groups) {
            let mut by_token: Vec<(TokenId, Vec<usize>)> = Vec::new();
            for &r in &g.runs {
                let t = chosen[r].context("a live run made no choice")?;
                tokens[r].push(t);
                match by_token.iter_mut().find(|(u, _)| *u == t) {
                    Some((_, members)) => members.push(r),
                    None => by_token.push((t, vec![r])),
                }
            }
            let mut own = Some(g.seq);
            for (t, members) in by_token {
                let end = ctx.is_end(t);
                if end || tokens[members[0]].len() >= max_new {
                    for &r in &members {
                        stops[r] = if end { Stop::Eos } else { Stop::Limit };
                    }
                    continue;
                }
                let s = match own.take() {
                    Some(s) => s,
                    None => {
                        let s = free.pop().context("ran out of sequences")?;
                        ctx.fork(g.seq, s)?;
                        s
                    }
                };
                appends.push(Append {
                    seq: s,
                    token: t,
                    logits: true,
                });
                next.push(Group {
                    seq: s,
                    runs: members,
                });
            }
            // A sequence whose runs all ended stays in the cache, its id never reused (see
            // `subject::MultiContext` for why nothing is removed). Groups only split, so a
            // batch of n runs never needs more than n sequences.
        }
        if appends.is_empty() {
            break;
        }
        max_live = max_live.max(appends.len());
        decoded += appends.len();
        ctx.decode(&appends)?;
        groups = next;
    }
    Ok(Forked {
        tokens,
        stops,
        decoded,
        max_live,
    })
}

/// Threads that share the runs' choices at each step. The decoder is idle meanwhile, so the
/// cores it uses are free; each run's choice depends only on its own state and its row, so
/// the split cannot change any choice.
const CHOOSE_THREADS: usize = 2;

/// Each live run's choice (`None` for runs in no group), computed on [`CHOOSE_THREADS`]
/// threads over contiguous halves of `runs`.
fn choose_all<R: Run + Send>(
    runs: &mut [R],
    group_of: &[Option<usize>],
    rows: &[LogitsRow<'_>],
) -> Result<Vec<Option<TokenId>>> {
    let per = runs.len().div_ceil(CHOOSE_THREADS).max(1);
    let results: Vec<Result<Vec<Option<TokenId>>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = runs
            .chunks_mut(per)
            .zip(group_of.chunks(per))
            .map(|(part, groups)| {
                scope.spawn(move || {
                    part.iter_mut()
                        .zip(groups)
                        .map(|(run, g)| g.map(|g| run.choose(&rows[g])).transpose())
                        .collect::<Result<Vec<_>>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    Ok(results.into_iter().collect::<Result<Vec<_>>>()?.concat())
}
