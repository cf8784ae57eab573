//! Sampling inside the compute graph (llama.cpp b7709 on, marked `[EXPERIMENTAL]` in llama.h):
//! a context made with a sampler chain for a sequence runs the chain's backend-capable prefix
//! as ggml ops after the model's output, and hands back the sampled token, candidates,
//! probabilities and logits through `llama_get_sampled_*_ith`. The rest of the chain runs on
//! the CPU over what came back ([`GraphContext::finish`]).
//!
//! The raw logits a CPU chain would start from are not handed back by such a context (its
//! logits row holds what the graph left), so a comparison decodes the same tokens in a plain
//! [`crate::Context`] of the same shape as well. That the two rows are the same bits is
//! checked, not assumed: a chain of `greedy` alone leaves the graph's logits untouched, and
//! they must equal the plain context's.
//!
//! Not done here: one output row in two sequences, one with a chain and one without, to get
//! both from one decode. On b11429 that row's raw logits came back holding what the graph
//! left, or the chain did not run at all, depending on the order of the two sequence ids.

use crate::compat as sys;
use crate::model::{Model, RawContext};
use crate::multi::Batch;
use crate::sampler::Sampler;
use crate::{Candidates, NotOffered};
use anyhow::{ensure, Context as _, Result};
use oracle::TokenId;
use std::cell::{Cell, RefCell};
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::Arc;

/// Whether the linked build samples in the graph, or what it lacks.
pub fn graph_offered() -> std::result::Result<(), NotOffered> {
    if cfg!(llama_fn = "llama_get_sampled_token_ith") {
        Ok(())
    } else {
        Err(NotOffered {
            what: "sampling in the compute graph (llama_context_params.samplers)",
        })
    }
}

/// Whether a Rust sampler in the graph can have inputs filled before each run of the graph
/// ([`GraphOps::input`]): llama.cpp calls `backend_set_input` for that and `backend_reset`
/// before it rebuilds a graph, after which the old input tensors are gone. Releases that
/// sample in the graph without `backend_reset` (b10200) are not offered it.
pub fn graph_inputs_offered() -> std::result::Result<(), NotOffered> {
    if cfg!(all(
        llama_fn = "llama_get_sampled_token_ith",
        llama_field = "llama_sampler_i.backend_set_input",
        llama_field = "llama_sampler_i.backend_reset"
    )) {
        Ok(())
    } else {
        Err(NotOffered {
            what: "inputs of a Rust sampler in the compute graph (llama_sampler_i.backend_reset)",
        })
    }
}

/// Where one stage of a context's chain runs, as llama.cpp names it after the chain was set
/// up: `+name` in the graph, `-name` on the CPU because the backend lacks an op, a bare name
/// on the CPU because an earlier stage (or the stage itself) cannot run in the graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagePlace {
    pub name: String,
    pub in_graph: bool,
}

/// What one output row of the last decode holds.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphOutput {
    /// The token the graph selected, if a selecting stage ran there.
    pub sampled: Option<TokenId>,
    /// The ids the rows below refer to, in their order (the whole vocabulary, in id order,
    /// when no stage in the graph narrowed or reordered them).
    pub candidates: Vec<TokenId>,
    /// The logits the graph left, one per candidate, if it left any.
    pub logits: Option<Vec<f32>>,
    /// The probabilities the graph computed, one per candidate, if it computed any.
    pub probs: Option<Vec<f32>>,
}

/// A context whose sequence 0 samples with `chain` in the graph (see the module docs).
pub struct GraphContext {
    /// Declared first, so the context (which points at the chain) is freed before it.
    ctx: RawContext,
    chain: Sampler,
    batch: Batch,
    n_ctx: usize,
    n_past: usize,
    /// Tokens decoded so far, to decode the last one again.
    tokens: Vec<TokenId>,
}

impl GraphContext {
    /// A context of `n_ctx` cells over `model` whose sequence 0 runs `chain` (a chain, as
    /// llama.cpp requires) with at most `outputs_per_seq` outputs per sequence and decode.
    pub fn new(
        model: &Arc<Model>,
        n_ctx: u32,
        chain: Sampler,
        outputs_per_seq: u32,
        threads: i32,
    ) -> Result<GraphContext> {
        graph_offered()?;
        ensure!(n_ctx >= 8, "context size must be at least 8, got {n_ctx}");
        ensure!(
            (1..=n_ctx).contains(&outputs_per_seq),
            "outputs per sequence must be in 1..={n_ctx}, got {outputs_per_seq}"
        );
        ensure!(
            threads >= 1,
            "thread count must be at least 1, got {threads}"
        );
        ensure!(
            chain.is_chain(),
            "a context's sampler must be a chain (llama.cpp throws otherwise)"
        );
        let raw = open(model, n_ctx, &chain, outputs_per_seq, threads)?;
        Ok(GraphContext {
            ctx: RawContext {
                raw,
                model: Arc::clone(model),
            },
            chain,
            batch: Batch::new(n_ctx as usize),
            n_ctx: n_ctx as usize,
            n_past: 0,
            tokens: Vec::new(),
        })
    }

    /// Where each stage of the chain runs: in the graph while every stage before it does and
    /// llama.cpp names it with a `+` (its chain runs only a prefix there; some releases also
    /// mark a stage after a CPU stage, which then still runs on the CPU), else on the CPU.
    pub fn places(&self) -> Vec<StagePlace> {
        let mut prefix = true;
        self.chain
            .member_names()
            .into_iter()
            .map(|name| {
                let marked = name.starts_with('+');
                prefix &= marked;
                StagePlace {
                    name: name.trim_start_matches(['+', '-']).to_string(),
                    in_graph: prefix,
                }
            })
            .collect()
    }

    /// Feeds `id` to the chain, as if it had been chosen (a history before the first step).
    pub fn accept(&mut self, id: TokenId) -> Result<()> {
        self.chain.accept(id)
    }

    /// Decodes `tokens` after what is already there; the last one is the output row.
    pub fn decode(&mut self, tokens: &[TokenId]) -> Result<()> {
        ensure!(!tokens.is_empty(), "nothing to decode");
        ensure!(
            self.n_past + tokens.len() <= self.n_ctx && tokens.len() <= self.batch.capacity,
            "the sequence would exceed the context of {} tokens",
            self.n_ctx
        );
        let n_vocab = self.ctx.model.n_vocab();
        for (i, t) in tokens.iter().enumerate() {
            ensure!(
                t.0 >= 0 && t.0 < n_vocab,
                "token id {t} is outside the vocabulary"
            );
            // SAFETY: `i` < capacity (checked above); llama_batch_init allocated every array
            // for `capacity` tokens and one sequence id each.
            unsafe {
                *self.batch.raw.token.add(i) = t.0;
                *self.batch.raw.pos.add(i) = (self.n_past + i) as i32;
                *self.batch.raw.n_seq_id.add(i) = 1;
                **self.batch.raw.seq_id.add(i) = 0;
                *self.batch.raw.logits.add(i) = (i + 1 == tokens.len()) as i8;
            }
        }
        self.batch.raw.n_tokens = tokens.len() as i32;
        // SAFETY: live context; the batch is filled for n_tokens entries.
        let rc = unsafe { ffi!(sys::llama_decode(self.ctx.ptr(), self.batch.raw)) };
        ensure!(rc == 0, "llama_decode failed with code {rc}");
        self.n_past += tokens.len();
        self.tokens.extend_from_slice(tokens);
        Ok(())
    }

    /// Forgets the last token and decodes it again: the same model output, and a fresh pass of
    /// the chain through the graph (a new draw for `dist`).
    pub fn redecode_last(&mut self) -> Result<()> {
        let last = *self.tokens.last().context("nothing decoded yet")?;
        let p0 = (self.n_past - 1) as i32;
        #[cfg(llama_fn = "llama_get_sampled_token_ith")]
        {
            // SAFETY: live context and memory handle; -1 names every sequence.
            let removed = unsafe {
                let mem = ffi!(sys::llama_get_memory(self.ctx.ptr()));
                ffi!(sys::llama_memory_seq_rm(mem, -1, p0, -1))
            };
            ensure!(removed, "llama.cpp could not remove the last position");
        }
        #[cfg(not(llama_fn = "llama_get_sampled_token_ith"))]
        let _ = p0;
        self.n_past -= 1;
        self.tokens.pop();
        self.decode(&[last])
    }

    /// The output row of the last decode.
    pub fn output(&self) -> Result<GraphOutput> {
        ensure!(self.n_past > 0, "nothing decoded yet");
        graph_offered()?;
        self.read_output()
    }

    #[cfg(not(llama_fn = "llama_get_sampled_token_ith"))]
    fn read_output(&self) -> Result<GraphOutput> {
        unreachable!("no GraphContext exists on a build without graph sampling")
    }

    #[cfg(llama_fn = "llama_get_sampled_token_ith")]
    fn read_output(&self) -> Result<GraphOutput> {
        let n = self.ctx.model.n_vocab() as usize;
        let idx = self.batch.raw.n_tokens - 1;
        let ctx = self.ctx.ptr();
        // SAFETY: `idx` is the batch index of the last decode's only output row; each row
        // llama.cpp returns holds the count it reports (at most n_vocab), copied at once.
        unsafe {
            let token = ffi!(sys::llama_get_sampled_token_ith(ctx, idx));
            let rows = |p: *const f32, count: u32| -> Result<Option<Vec<f32>>> {
                if p.is_null() {
                    return Ok(None);
                }
                ensure!(
                    count as usize <= n,
                    "a row of {count} exceeds the vocabulary"
                );
                Ok(Some(std::slice::from_raw_parts(p, count as usize).to_vec()))
            };
            let logits = rows(
                ffi!(sys::llama_get_sampled_logits_ith(ctx, idx)),
                ffi!(sys::llama_get_sampled_logits_count_ith(ctx, idx)),
            )?;
            let probs = rows(
                ffi!(sys::llama_get_sampled_probs_ith(ctx, idx)),
                ffi!(sys::llama_get_sampled_probs_count_ith(ctx, idx)),
            )?;
            let ids = ffi!(sys::llama_get_sampled_candidates_ith(ctx, idx));
            let count = ffi!(sys::llama_get_sampled_candidates_count_ith(ctx, idx)) as usize;
            // Without a narrowing stage llama.cpp reports no count and hands back its
            // full-vocabulary id list.
            let count = if count == 0 { n } else { count };
            ensure!(count <= n, "{count} candidates exceed the vocabulary");
            ensure!(!ids.is_null(), "llama.cpp returned no candidate ids");
            let candidates = std::slice::from_raw_parts(ids, count)
                .iter()
                .map(|&i| TokenId(i))
                .collect();
            Ok(GraphOutput {
                // LLAMA_TOKEN_NULL is -1 (a macro, so not in the bindings).
                sampled: (token != -1).then_some(TokenId(token)),
                candidates,
                logits,
                probs,
            })
        }
    }

    /// What `llama_sampler_sample` does with `out`: the token the graph selected, or else the
    /// chain's CPU tail run over the array built from what the graph returned (probabilities,
    /// else logits, else the context's logits row), and a selected token accepted into the
    /// chain.
    /// Returns the array the CPU tail left (`None` when the graph selected) and the token (none
    /// when no stage selects).
    pub fn finish(&mut self, out: &GraphOutput) -> Result<(Option<Candidates>, Option<TokenId>)> {
        if let Some(t) = out.sampled {
            self.chain.accept(t)?;
            return Ok((None, Some(t)));
        }
        let mut cands = match (&out.probs, &out.logits) {
            (Some(p), Some(l)) => Candidates::with_probs(
                (out.candidates.iter().zip(l).zip(p)).map(|((&i, &l), &p)| (i, l, p)),
            ),
            (_, Some(l)) => Candidates::new(out.candidates.iter().copied().zip(l.iter().copied())),
            _ => Candidates::from_logits(&self.logits_row()?),
        };
        // llama.cpp's chain skips the stages that ran in the graph.
        self.chain.apply(&mut cands)?;
        let t = cands.selected_id();
        if let Some(t) = t {
            self.chain.accept(t)?;
        }
        Ok((Some(cands), t))
    }
}

impl GraphContext {
    /// The context's logits row for the last output (`llama_get_logits_ith`).
    fn logits_row(&self) -> Result<Vec<f32>> {
        let n = self.ctx.model.n_vocab() as usize;
        // SAFETY: the last decode's last token is an output row of n_vocab floats.
        let row = unsafe {
            ffi!(sys::llama_get_logits_ith(
                self.ctx.ptr(),
                self.batch.raw.n_tokens - 1
            ))
        };
        ensure!(!row.is_null(), "llama.cpp returned no logits row");
        Ok(unsafe { std::slice::from_raw_parts(row, n) }.to_vec())
    }
}

/// `llama_init_from_model` with `chain` on sequence 0.
fn open(
    model: &Arc<Model>,
    n_ctx: u32,
    chain: &Sampler,
    outputs_per_seq: u32,
    threads: i32,
) -> Result<NonNull<sys::llama_context>> {
    #[cfg(llama_fn = "llama_get_sampled_token_ith")]
    {
        let mut seqs = [sys::llama_sampler_seq_config {
            seq_id: 0,
            sampler: chain.raw_ptr(),
        }];
        // SAFETY: params by value; live model; `seqs` outlives the call (llama.cpp keeps only
        // the sampler pointer, which `GraphContext` keeps alive longer than the context).
        // NULL means failure (exceptions are caught).
        let raw = unsafe {
            let mut p = ffi!(sys::llama_context_default_params());
            p.n_ctx = n_ctx;
            p.n_batch = n_ctx;
            p.n_ubatch = n_ctx;
            p.n_seq_max = 1;
            p.n_threads = threads;
            p.n_threads_batch = threads;
            p.no_perf = true;
            #[cfg(llama_field = "llama_context_params.n_outputs_max_per_seq")]
            {
                p.n_outputs_max_per_seq = outputs_per_seq;
            }
            #[cfg(not(llama_field = "llama_context_params.n_outputs_max_per_seq"))]
            let _ = outputs_per_seq;
            p.samplers = seqs.as_mut_ptr();
            p.n_samplers = 1;
            ffi!(sys::llama_init_from_model(model.raw.as_ptr(), p))
        };
        NonNull::new(raw).context("llama.cpp could not create a context with a sampler chain")
    }
    #[cfg(not(llama_fn = "llama_get_sampled_token_ith"))]
    {
        let _ = (model, n_ctx, chain, outputs_per_seq, threads);
        Err(graph_offered().unwrap_err().into())
    }
}

/// A ggml tensor of the sampling graph being built, valid only while the [`GraphOps`] it came
/// from is (inside [`CustomSampler::graph_apply`](crate::CustomSampler::graph_apply)): the
/// lifetime keeps a sampler from holding one across graph builds.
#[derive(Debug, Clone, Copy)]
pub struct Tensor<'g>(*mut sys::ggml_tensor, PhantomData<&'g GraphOps>);

/// The sampling graph a Rust sampler adds its ops to, and the tensors it works on: llama.cpp's
/// `llama_sampler_data` (the logits, and the candidate ids they map to once a stage narrowed
/// or reordered them). Each method adds one ggml op. ggml aborts on shapes that do not fit,
/// so only the planted stages written in this workspace, whose shapes are fixed, use it.
pub struct GraphOps {
    pub(crate) ctx: *mut sys::ggml_context,
    pub(crate) logits: Cell<*mut sys::ggml_tensor>,
    pub(crate) candidates: *mut sys::ggml_tensor,
    /// What a selecting stage chose (an id, not an index), and the probabilities it used.
    pub(crate) sampled: Cell<*mut sys::ggml_tensor>,
    pub(crate) probs: Cell<*mut sys::ggml_tensor>,
    /// The input tensors made by [`GraphOps::input`], in order.
    pub(crate) inputs: RefCell<Vec<*mut sys::ggml_tensor>>,
}

impl GraphOps {
    fn op(&self, f: impl FnOnce(*mut sys::ggml_context) -> *mut sys::ggml_tensor) -> Tensor<'_> {
        Tensor(f(self.ctx), PhantomData)
    }

    /// The logits as they reach this stage, flattened to one row.
    pub fn logits(&self) -> Tensor<'_> {
        let l = self.logits.get();
        // SAFETY: live graph context and tensor, inside backend_apply.
        self.op(|c| unsafe { ffi!(sys::ggml_reshape_1d(c, l, ffi!(sys::ggml_nelements(l)))) })
    }

    /// The logits this stage leaves: as many as it was given (masking, not truncating).
    pub fn set_logits(&self, t: Tensor<'_>) {
        let (now, new) = (self.logits(), t);
        assert_eq!(
            self.len(now),
            self.len(new),
            "a stage here masks; it must not change the length"
        );
        self.logits.set(t.0);
    }

    /// The ids the logits belong to, if an earlier stage narrowed or reordered them (then
    /// `logits[i]` belongs to candidate `i`, not to id `i`).
    pub fn candidates(&self) -> Option<Tensor<'_>> {
        let c = self.candidates;
        // SAFETY: a live tensor of this graph.
        (!c.is_null()).then(|| {
            self.op(|ctx| unsafe {
                ffi!(sys::ggml_reshape_1d(ctx, c, ffi!(sys::ggml_nelements(c))))
            })
        })
    }

    /// The token this stage chose: a one-element tensor holding an id.
    pub fn set_sampled(&self, t: Tensor<'_>) {
        assert_eq!(self.len(t), 1, "a choice is one id");
        self.sampled.set(t.0);
    }

    /// The probabilities this stage computed, one per logit.
    pub fn set_probs(&self, t: Tensor<'_>) {
        assert_eq!(
            self.len(t),
            self.len(self.logits()),
            "one probability per logit"
        );
        self.probs.set(t.0);
    }

    /// A new input of `n` f32 values, which llama.cpp allocates with the graph; the sampler
    /// fills it before each run of the graph in
    /// [`CustomSampler::graph_set_input`](crate::CustomSampler::graph_set_input), where it is
    /// input number `i` for the `i`-th call since the graph was built (counted from 0).
    /// Panics on a build without [`graph_inputs_offered`] (the callback then aborts).
    pub fn input(&self, n: i64) -> Tensor<'_> {
        assert!(
            graph_inputs_offered().is_ok(),
            "this build cannot fill a Rust sampler's graph inputs"
        );
        assert!(n > 0, "an input holds at least one value");
        // SAFETY: as for every op here; the tensor belongs to the graph's context, and the
        // sampler's wrapper forgets it when llama.cpp resets the graph.
        let t = self.op(|c| unsafe {
            let t = ffi!(sys::ggml_new_tensor_1d(c, sys::GGML_TYPE_F32, n));
            ffi!(sys::ggml_set_input(t));
            t
        });
        self.inputs.borrow_mut().push(t.0);
        t
    }

    /// `a * b`, elementwise (`b` broadcast over `a`).
    pub fn mul(&self, a: Tensor, b: Tensor<'_>) -> Tensor<'_> {
        // SAFETY: as for every op here.
        self.op(|c| unsafe { ffi!(sys::ggml_mul(c, a.0, b.0)) })
    }

    /// `softmax(a)`.
    pub fn soft_max(&self, a: Tensor<'_>) -> Tensor<'_> {
        // SAFETY: as for every op here.
        self.op(|c| unsafe { ffi!(sys::ggml_soft_max(c, a.0)) })
    }

    /// Number of elements of `t`.
    pub fn len(&self, t: Tensor<'_>) -> i64 {
        // SAFETY: a live tensor of this graph.
        unsafe { ffi!(sys::ggml_nelements(t.0)) }
    }

    /// Index of the largest element (ties: the first).
    pub fn argmax(&self, t: Tensor<'_>) -> Tensor<'_> {
        // SAFETY: as for every op here: a live graph context and tensors of this graph.
        self.op(|c| unsafe { ffi!(sys::ggml_argmax(c, t.0)) })
    }

    /// Indices of the `k` largest elements (in no promised order).
    pub fn top_k(&self, t: Tensor<'_>, k: i32) -> Tensor<'_> {
        self.op(|c| unsafe { ffi!(sys::ggml_top_k(c, t.0, k)) })
    }

    /// Indices that sort `t` ascending.
    pub fn argsort_ascending(&self, t: Tensor<'_>) -> Tensor<'_> {
        self.op(|c| unsafe { ffi!(sys::ggml_argsort(c, t.0, sys::GGML_SORT_ORDER_ASC)) })
    }

    /// The first `n` elements of `t` (a view).
    pub fn head(&self, t: Tensor<'_>, n: i64) -> Tensor<'_> {
        self.op(|c| unsafe { ffi!(sys::ggml_view_1d(c, t.0, n, 0)) })
    }

    /// `values[idx[j]]` for each j, as one flat row.
    pub fn gather(&self, values: Tensor, idx: Tensor<'_>) -> Tensor<'_> {
        let n = self.len(values);
        let m = self.len(idx);
        self.op(|c| unsafe {
            let rows = ffi!(sys::ggml_reshape_2d(c, values.0, 1, n));
            ffi!(sys::ggml_reshape_1d(
                c,
                ffi!(sys::ggml_get_rows(c, rows, idx.0)),
                m
            ))
        })
    }

    /// `a * s + b`, elementwise.
    pub fn scale_bias(&self, a: Tensor<'_>, s: f32, b: f32) -> Tensor<'_> {
        #[cfg(llama_fn = "ggml_scale_bias")]
        {
            self.op(|c| unsafe { ffi!(sys::ggml_scale_bias(c, a.0, s, b)) })
        }
        #[cfg(not(llama_fn = "ggml_scale_bias"))]
        {
            let _ = (a, s, b);
            unreachable!("GraphOps exists only on builds that sample in the graph")
        }
    }

    /// `a - b`, `b` broadcast over `a`.
    pub fn sub(&self, a: Tensor, b: Tensor<'_>) -> Tensor<'_> {
        self.op(|c| unsafe { ffi!(sys::ggml_sub(c, a.0, b.0)) })
    }

    /// `a + b`, `b` broadcast over `a`.
    pub fn add(&self, a: Tensor, b: Tensor<'_>) -> Tensor<'_> {
        self.op(|c| unsafe { ffi!(sys::ggml_add(c, a.0, b.0)) })
    }

    /// `max(a, 0)`, elementwise.
    pub fn relu(&self, a: Tensor<'_>) -> Tensor<'_> {
        self.op(|c| unsafe { ffi!(sys::ggml_relu(c, a.0)) })
    }

    /// 1 where `a > 0`, else 0.
    pub fn step(&self, a: Tensor<'_>) -> Tensor<'_> {
        self.op(|c| unsafe { ffi!(sys::ggml_step(c, a.0)) })
    }

    /// Natural log, elementwise (`log 0 = -inf`: how llama.cpp's own stages mask).
    pub fn log(&self, a: Tensor<'_>) -> Tensor<'_> {
        self.op(|c| unsafe { ffi!(sys::ggml_log(c, a.0)) })
    }

    /// `e^a`, elementwise.
    pub fn exp(&self, a: Tensor<'_>) -> Tensor<'_> {
        #[cfg(llama_fn = "ggml_exp")]
        {
            self.op(|c| unsafe { ffi!(sys::ggml_exp(c, a.0)) })
        }
        #[cfg(not(llama_fn = "ggml_exp"))]
        {
            let _ = a;
            unreachable!("GraphOps exists only on builds that sample in the graph")
        }
    }

    /// `a` clamped elementwise to `[min, max]`.
    pub fn clamp(&self, a: Tensor<'_>, min: f32, max: f32) -> Tensor<'_> {
        self.op(|c| unsafe { ffi!(sys::ggml_clamp(c, a.0, min, max)) })
    }

    /// The sum of every element of `a`, as a one-element tensor.
    pub fn sum(&self, a: Tensor<'_>) -> Tensor<'_> {
        self.op(|c| unsafe { ffi!(sys::ggml_sum(c, a.0)) })
    }

    /// `a / b`, elementwise (`b` broadcast over `a`).
    pub fn div(&self, a: Tensor, b: Tensor<'_>) -> Tensor<'_> {
        self.op(|c| unsafe { ffi!(sys::ggml_div(c, a.0, b.0)) })
    }
}

/// The inputs a Rust sampler made in the graph it last added ops to ([`GraphOps::input`]),
/// handed to it before each run of that graph to fill. Exists only inside that callback.
pub struct GraphInputs<'a> {
    pub(crate) tensors: &'a [*mut sys::ggml_tensor],
}

impl GraphInputs<'_> {
    /// How many inputs the sampler made.
    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }

    /// How many values input `i` holds.
    pub fn len_of(&self, i: usize) -> usize {
        // SAFETY: a live input tensor of the graph about to run.
        unsafe { ffi!(sys::ggml_nelements(self.tensors[i])) as usize }
    }

    /// Writes `values` into input `i`, which must hold exactly that many.
    pub fn set(&self, i: usize, values: &[f32]) {
        let t = self.tensors[i];
        // SAFETY: a live input tensor of the graph about to run, allocated by llama.cpp's
        // scheduler before it asks for inputs; the length is checked against it.
        unsafe {
            assert_eq!(
                ffi!(sys::ggml_nelements(t)),
                values.len() as i64,
                "input {i} holds another number of values"
            );
            ffi!(sys::ggml_backend_tensor_set(
                t,
                values.as_ptr().cast(),
                0,
                std::mem::size_of_val(values)
            ));
        }
    }
}
