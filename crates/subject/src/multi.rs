//! A decoding context that holds many sequences at once, for runs that share a prefix: while
//! their tokens agree they share one sequence of the KV cache; when their choices part, the
//! sequence is forked (`llama_memory_seq_cp`). One `llama_decode` advances every live sequence.
//!
//! Each sequence has its own stream of the cache (`kv_unified = false`, `n_ctx / n_seq` cells
//! each), and a fork copies the stream. Not the unified cache: there, removing a forked
//! sequence (`llama_memory_seq_rm`) changes the next logits of its parent (by up to 0.8 on
//! SmolLM2, 0.1.161, probed 2026-11-30). For the same reason no sequence is ever removed:
//! finished sequences stay until [`MultiContext::clear`].
//!
//! A row of a batch must not depend on its neighbours, or forked runs would not be the runs
//! they stand for. Two settings make it so, both checked against lone decoding bit for bit:
//! the model loaded [`Weights::AsStored`] (checked here; repacked, Gemma3's rows in a group of
//! four differ from lone decoding by up to 1.66 in a logit, see [`Weights`]), and flash
//! attention off ([`Attention::Plain`]: it changed a prompt's batched result on its own; a
//! single-sequence context compared with this one must use it too).
//!
//! Positions are assigned here, never by the caller: a sequence's next position is its
//! length, so a batch only extends sequences, as llama.cpp's batch checks require.

use crate::compat as sys;
use crate::model::{init_context, Attention, Model, RawContext, Weights};
use anyhow::{ensure, Context as _, Result};
use oracle::TokenId;
use std::sync::Arc;

/// A sequence of the KV cache, `0..n_seq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeqId(pub i32);

/// One token to append to one sequence; `logits` asks for its next-token logits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Append {
    pub seq: SeqId,
    pub token: TokenId,
    pub logits: bool,
}

/// Owns a `llama_batch` from `llama_batch_init` (one sequence id per token) and frees it once.
pub(crate) struct Batch {
    pub(crate) raw: sys::llama_batch,
    pub(crate) capacity: usize,
}

impl Batch {
    pub(crate) fn new(capacity: usize) -> Batch {
        // SAFETY: plain allocation; one sequence id per token; freed in Drop.
        let raw = unsafe { ffi!(sys::llama_batch_init(capacity as i32, 0, 1)) };
        Batch { raw, capacity }
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        // SAFETY: `raw` came from llama_batch_init and is freed only here.
        unsafe { ffi!(sys::llama_batch_free(self.raw)) }
    }
}

/// A context of `n_ctx` cells split evenly among `n_seq` sequences.
pub struct MultiContext {
    /// Declared first, so the context is freed before the batch.
    ctx: RawContext,
    batch: Batch,
    /// Each sequence's length (its next position).
    len: Vec<usize>,
    /// Batch index of each logits row the last decode kept, in the order asked.
    rows: Vec<i32>,
}

impl MultiContext {
    /// `n_ctx` cells in all, `n_seq` sequences, at most `n_batch` tokens per decode call.
    pub fn new(
        model: &Arc<Model>,
        n_ctx: u32,
        n_seq: u32,
        n_batch: u32,
        threads: i32,
    ) -> Result<MultiContext> {
        ensure!(
            model.weights() == Weights::AsStored,
            "a multi-sequence context needs a model loaded with Weights::AsStored (repacked \
             weights make a row depend on the rows that share its batch)"
        );
        Ok(MultiContext {
            ctx: init_context(model, n_ctx, n_batch, n_seq, Attention::Plain, threads)?,
            batch: Batch::new(n_batch as usize),
            len: vec![0; n_seq as usize],
            rows: Vec::new(),
        })
    }

    pub fn model(&self) -> &Arc<Model> {
        &self.ctx.model
    }

    fn index(&self, seq: SeqId) -> Result<usize> {
        usize::try_from(seq.0)
            .ok()
            .filter(|&i| i < self.len.len())
            .with_context(|| format!("sequence {} is outside 0..{}", seq.0, self.len.len()))
    }

    fn memory(&self) -> sys::llama_memory_t {
        // SAFETY: live context; its memory handle lives as long as it.
        unsafe { ffi!(sys::llama_get_memory(self.ctx.ptr())) }
    }

    /// Appends each item's token to its sequence, all in one `llama_decode`.
    pub fn decode(&mut self, items: &[Append]) -> Result<()> {
        ensure!(!items.is_empty(), "nothing to decode");
        ensure!(
            items.len() <= self.batch.capacity,
            "{} tokens exceed the batch size {}",
            items.len(),
            self.batch.capacity
        );
        let n_vocab = self.ctx.model.n_vocab();
        let mut len = self.len.clone();
        let mut rows = Vec::new();
        for (i, a) in items.iter().enumerate() {
            ensure!(
                a.token.0 >= 0 && a.token.0 < n_vocab,
                "token id {} is outside the vocabulary",
                a.token
            );
            let s = self.index(a.seq)?;
            // SAFETY: `i` < capacity (checked above); llama_batch_init allocated every array
            // for `capacity` tokens and one sequence id each.
            unsafe {
                *self.batch.raw.token.add(i) = a.token.0;
                *self.batch.raw.pos.add(i) = len[s] as i32;
                *self.batch.raw.n_seq_id.add(i) = 1;
                **self.batch.raw.seq_id.add(i) = a.seq.0;
                *self.batch.raw.logits.add(i) = a.logits as i8;
            }
            len[s] += 1;
            if a.logits {
                rows.push(i as i32);
            }
        }
        self.batch.raw.n_tokens = items.len() as i32;
        // SAFETY: live context; the batch is filled for n_tokens entries.
        let rc = unsafe { ffi!(sys::llama_decode(self.ctx.ptr(), self.batch.raw)) };
        ensure!(
            rc == 0,
            "llama_decode failed with code {rc} (1: no room left in the cache)"
        );
        self.len = len;
        self.rows = rows;
        Ok(())
    }

    /// The logits of the `k`-th item of the last decode that asked for logits.
    pub fn logits(&self, k: usize) -> Result<&[f32]> {
        let i = *self.rows.get(k).with_context(|| {
            format!(
                "the last decode kept {} logits rows, not {}",
                self.rows.len(),
                k + 1
            )
        })?;
        let n = self.ctx.model.n_vocab() as usize;
        // SAFETY: batch index `i` asked for logits in the last decode; the row holds n_vocab
        // floats and stays valid until the next decode, which needs `&mut self`.
        let row = unsafe { ffi!(sys::llama_get_logits_ith(self.ctx.ptr(), i)) };
        ensure!(!row.is_null(), "llama.cpp returned no logits for row {i}");
        Ok(unsafe { std::slice::from_raw_parts(row, n) })
    }

    /// Makes empty sequence `dst` a copy of `src` (sharing its cells).
    pub fn fork(&mut self, src: SeqId, dst: SeqId) -> Result<()> {
        let (s, d) = (self.index(src)?, self.index(dst)?);
        ensure!(s != d, "cannot fork sequence {} onto itself", src.0);
        ensure!(self.len[d] == 0, "sequence {} is not empty", dst.0);
        // SAFETY: live memory handle; both ids are below n_seq_max.
        unsafe {
            ffi!(sys::llama_memory_seq_cp(
                self.memory(),
                src.0,
                dst.0,
                -1,
                -1
            ))
        };
        self.len[d] = self.len[s];
        Ok(())
    }

    /// Forgets every sequence.
    pub fn clear(&mut self) {
        // SAFETY: live memory handle.
        unsafe { ffi!(sys::llama_memory_clear(self.memory(), true)) };
        self.len.iter_mut().for_each(|l| *l = 0);
        self.rows.clear();
    }
}
