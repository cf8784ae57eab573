//! The planted controls: stages written here that run in the graph through llama.cpp's public
//! `backend_init`/`backend_apply`, each once exact and once wrong in the one way a check of
//! the comparison exists to catch. Their CPU side is always right, so only the graph path can
//! be wrong, and each goes through the same context, comparison and oracle as llama.cpp's own
//! stages.
//!
//! - `min_p(0.5, 8)`, ignoring `min_keep` in the graph: the survivor-set check.
//! - `temp(0.5)`, multiplying by a factor 4 ulp above 2 in the graph: the value check; and
//!   `temp(1)` multiplying by `draws::SKEW` there, before llama.cpp's `dist`: the draw
//!   detector.
//! - `greedy` after a narrowing stage, returning the top candidate's index instead of its id
//!   in the graph: the choice check.
//! - `greedy` that also hands back probabilities, a softmax at temperature 1/1.05 in the graph:
//!   the probability check.
//! - a draw of our own on the CPU tail, after llama.cpp's `top_k` in the graph: the draw
//!   detector's exact control, independent of llama.cpp's `dist`.
//! - `top_k` at a cut through equal logits: the tie-break reading of the survivor-set check
//!   ([`crate::ties`]). Its exact version runs on the CPU tail and keeps the highest ids of
//!   the tie, the opposite of the oracle's canonical order, so it passes only if another
//!   tie-break is accepted; its wrong version runs in the graph and keeps the whole tie.
//! - `penalties` over several decode steps, with the token counts it keeps itself uploaded to
//!   the graph as two per-id inputs before each run: the stepped row's history check. Its CPU
//!   path always counts llama.cpp's window; its graph path counts that window (exact), each
//!   accepted token twice, or every token since the start (two wrong versions).
//! - `temp_ext` after a stage that masks in the graph: the value check under the bound derived
//!   for the dynamic temperature ([`crate::dyntemp`]). Its graph path computes the CPU's rule
//!   (the entropy over the softmax, normalized by the log of the number of entries the CPU's
//!   array would hold, those above `-inf`); the wrong one normalizes by the log of the whole
//!   tensor's length, as llama.cpp's graph does.

use crate::check::Check;
use anyhow::Result;
use oracle::penalty::PenaltyParams;
use oracle::stage::Stage;
use oracle::window::WindowLen;
use oracle::TokenId;
use std::collections::{BTreeMap, VecDeque};
use std::ffi::CStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use subject::{ArrayView, CustomSampler, GraphInputs, GraphOps, Sampler};

/// What a planted stage does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    MinP {
        p: f32,
        min_keep: usize,
    },
    /// `temp(t)`; the wrong version's graph factor is `skew / t`.
    Temp {
        t: f32,
        skew: f32,
    },
    Greedy,
    SoftmaxGreedy,
    /// A draw on the CPU (never in the graph) from the softmax of the array, by inverse CDF
    /// in f64 with this workspace's own generator: the draw detector's exact control, which
    /// shares no code with llama.cpp's `dist`.
    CpuDist {
        seed: u64,
    },
    /// `top_k(k)` where the cut splits equal logits. Exact: on the CPU tail, the `k` entries of
    /// largest logit, equal logits in descending id order. Wrong: in the graph, every entry
    /// whose logit is at least the `k`-th largest (the whole tie at the cut).
    TieTopK {
        k: i32,
    },
    /// `penalties(last_n, params)`; its graph path counts `graph_history` (the version is
    /// exact exactly when that is [`History::Window`]).
    Penalties {
        last_n: usize,
        params: PenaltyParams,
        graph_history: History,
    },
    /// `temp_ext(t, delta, exponent)` with `delta > 0`, `t - delta > 0` and `exponent > 0`:
    /// its temperature never reaches 0 (where the CPU keeps only the top entry, a branch its
    /// graph path does not take) and a power of a normalized entropy of 0 stays 0. Exact: the
    /// CPU's size (entries above `-inf`) in the graph; wrong: the tensor's length.
    TempExt {
        t: f32,
        delta: f32,
        exponent: f32,
    },
}

/// Which accepted tokens a planted penalties stage counts in the graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum History {
    /// The last `last_n` accepted, each once: llama.cpp's window.
    Window,
    /// Each accepted token twice, in a window of `last_n` entries.
    Twice,
    /// Every token accepted since the start, each once.
    Unbounded,
}

impl History {
    /// The window `accept` keeps after `id`.
    fn accept(self, ring: &mut VecDeque<TokenId>, last_n: usize, id: TokenId) {
        let copies = if self == History::Twice { 2 } else { 1 };
        for _ in 0..copies {
            ring.push_back(id);
            if self != History::Unbounded && ring.len() > last_n {
                ring.pop_front();
            }
        }
    }
}

/// Per-id counts of a window. Not `oracle::window::histogram`: these stages are judged
/// against that oracle, so they share none of its code.
fn counts(ring: &VecDeque<TokenId>) -> BTreeMap<TokenId, u32> {
    let mut c = BTreeMap::new();
    for &id in ring {
        *c.entry(id).or_insert(0) += 1;
    }
    c
}

/// One planted stage: its kind, whether its graph path is right, and counts of the graph
/// builds it added its ops to and of its applies on the CPU (shared by its clones, so the
/// run can read them).
#[derive(Debug, Clone)]
pub struct Planted {
    pub kind: Kind,
    pub exact: bool,
    applied: Arc<AtomicUsize>,
    cpu_applied: Arc<AtomicUsize>,
    inputs_set: Arc<AtomicUsize>,
}

impl Planted {
    pub fn new(kind: Kind, exact: bool) -> Planted {
        if let Kind::Penalties { graph_history, .. } = kind {
            assert_eq!(
                exact,
                graph_history == History::Window,
                "a planted penalties stage is exact exactly when it counts the window"
            );
        }
        if let Kind::TempExt { t, delta, exponent } = kind {
            assert!(
                delta > 0.0 && t - delta > 0.0 && exponent > 0.0,
                "a planted temp_ext needs delta > 0, t - delta > 0 and exponent > 0"
            );
        }
        Planted {
            kind,
            exact,
            applied: Arc::new(AtomicUsize::new(0)),
            cpu_applied: Arc::new(AtomicUsize::new(0)),
            inputs_set: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// A planted penalties stage whose graph path counts `graph_history`.
    pub fn penalties(last_n: usize, params: PenaltyParams, graph_history: History) -> Planted {
        Planted::new(
            Kind::Penalties {
                last_n,
                params,
                graph_history,
            },
            graph_history == History::Window,
        )
    }

    /// Whether it asks to run in the graph (else it runs on the CPU tail).
    pub fn in_graph(&self) -> bool {
        match self.kind {
            Kind::CpuDist { .. } => false,
            Kind::TieTopK { .. } => !self.exact,
            _ => true,
        }
    }

    /// The oracle stage this sampler must agree with.
    pub fn stage(&self) -> Stage {
        match self.kind {
            Kind::MinP { p, min_keep } => Stage::MinP { p, min_keep },
            Kind::Temp { t, .. } => Stage::Temp { t },
            Kind::Greedy | Kind::SoftmaxGreedy => Stage::Greedy,
            Kind::CpuDist { seed } => Stage::Dist { seed: seed as u32 },
            Kind::TieTopK { k } => Stage::TopK { k },
            Kind::Penalties { last_n, params, .. } => Stage::Penalties {
                last_n: WindowLen(last_n),
                params,
            },
            Kind::TempExt { t, delta, exponent } => Stage::TempExt { t, delta, exponent },
        }
    }

    /// The check of the comparison its wrong version exists to trip.
    pub fn target(&self) -> Check {
        match self.kind {
            Kind::MinP { .. } => Check::Survivors,
            Kind::Temp { .. } => Check::Values,
            Kind::Greedy => Check::Choice,
            Kind::SoftmaxGreedy => Check::Probs,
            Kind::CpuDist { .. } => Check::Choice,
            Kind::TieTopK { .. } => Check::Survivors,
            Kind::Penalties { .. } => Check::Values,
            Kind::TempExt { .. } => Check::Values,
        }
    }

    pub fn name(&self) -> String {
        let what = match self.kind {
            Kind::MinP { .. } => "min_p",
            Kind::Temp { .. } => "temp",
            Kind::Greedy => "greedy",
            Kind::SoftmaxGreedy => "softmax-greedy",
            Kind::CpuDist { .. } => "cpu-dist",
            Kind::TieTopK { .. } => "tie-top_k",
            Kind::Penalties {
                graph_history: History::Window,
                ..
            } => "penalties",
            Kind::Penalties {
                graph_history: History::Twice,
                ..
            } => "penalties-twice",
            Kind::Penalties {
                graph_history: History::Unbounded,
                ..
            } => "penalties-no-window",
            Kind::TempExt { .. } => "temp_ext",
        };
        format!(
            "planted-{what}-{}",
            if self.exact { "exact" } else { "wrong" }
        )
    }

    /// How many sampling graphs it has added its ops to so far.
    pub fn graph_builds(&self) -> usize {
        self.applied.load(Ordering::SeqCst)
    }

    /// How many times it has run on the CPU so far.
    pub fn cpu_applies(&self) -> usize {
        self.cpu_applied.load(Ordering::SeqCst)
    }

    /// How many times llama.cpp has asked it to fill its graph inputs so far.
    pub fn inputs_set(&self) -> usize {
        self.inputs_set.load(Ordering::SeqCst)
    }

    /// A fresh sampler for a vocabulary of `n_vocab` ids.
    pub fn build(&self, n_vocab: i32) -> Result<Sampler> {
        Sampler::custom_for_vocab(
            Stage_ {
                planted: self.clone(),
                placed: false,
                rng: match self.kind {
                    Kind::CpuDist { seed } => Some(oracle::rng::Rng::new(seed)),
                    _ => None,
                },
                n_vocab: n_vocab.max(0) as usize,
                cpu_window: VecDeque::new(),
                graph_window: VecDeque::new(),
            },
            n_vocab,
        )
    }
}

/// The sampler llama.cpp calls (a [`Planted`] and whether it was placed in the graph).
#[derive(Clone)]
struct Stage_ {
    planted: Planted,
    placed: bool,
    rng: Option<oracle::rng::Rng>,
    n_vocab: usize,
    /// The accepted tokens a penalties stage counts on the CPU (llama.cpp's window) and in
    /// the graph (its [`History`]).
    cpu_window: VecDeque<TokenId>,
    graph_window: VecDeque<TokenId>,
}

/// Its name, with a `+` once placed in the graph, as llama.cpp names its own stages there.
fn name_of(kind: Kind, exact: bool, placed: bool) -> &'static CStr {
    match (kind, exact, placed) {
        (Kind::MinP { .. }, true, false) => c"planted-min_p-exact",
        (Kind::MinP { .. }, true, true) => c"+planted-min_p-exact",
        (Kind::MinP { .. }, false, false) => c"planted-min_p-wrong",
        (Kind::MinP { .. }, false, true) => c"+planted-min_p-wrong",
        (Kind::Temp { .. }, true, false) => c"planted-temp-exact",
        (Kind::Temp { .. }, true, true) => c"+planted-temp-exact",
        (Kind::Temp { .. }, false, false) => c"planted-temp-wrong",
        (Kind::Temp { .. }, false, true) => c"+planted-temp-wrong",
        (Kind::Greedy, true, false) => c"planted-greedy-exact",
        (Kind::Greedy, true, true) => c"+planted-greedy-exact",
        (Kind::Greedy, false, false) => c"planted-greedy-wrong",
        (Kind::Greedy, false, true) => c"+planted-greedy-wrong",
        (Kind::SoftmaxGreedy, true, false) => c"planted-softmax-greedy-exact",
        (Kind::SoftmaxGreedy, true, true) => c"+planted-softmax-greedy-exact",
        (Kind::SoftmaxGreedy, false, false) => c"planted-softmax-greedy-wrong",
        (Kind::SoftmaxGreedy, false, true) => c"+planted-softmax-greedy-wrong",
        (Kind::CpuDist { .. }, true, _) => c"planted-cpu-dist-exact",
        (Kind::CpuDist { .. }, false, _) => c"planted-cpu-dist-wrong",
        (Kind::TieTopK { .. }, true, _) => c"planted-tie-top_k-exact",
        (Kind::TieTopK { .. }, false, false) => c"planted-tie-top_k-wrong",
        (Kind::TieTopK { .. }, false, true) => c"+planted-tie-top_k-wrong",
        (Kind::TempExt { .. }, true, false) => c"planted-temp_ext-exact",
        (Kind::TempExt { .. }, true, true) => c"+planted-temp_ext-exact",
        (Kind::TempExt { .. }, false, false) => c"planted-temp_ext-wrong",
        (Kind::TempExt { .. }, false, true) => c"+planted-temp_ext-wrong",
        (Kind::Penalties { graph_history, .. }, _, placed) => match (graph_history, placed) {
            (History::Window, false) => c"planted-penalties-exact",
            (History::Window, true) => c"+planted-penalties-exact",
            (History::Twice, false) => c"planted-penalties-twice-wrong",
            (History::Twice, true) => c"+planted-penalties-twice-wrong",
            (History::Unbounded, false) => c"planted-penalties-no-window-wrong",
            (History::Unbounded, true) => c"+planted-penalties-no-window-wrong",
        },
    }
}

/// The index of the largest logit (the first of equals).
fn top(view: &ArrayView<'_>) -> usize {
    (0..view.len()).fold(0, |best, i| {
        if view.logit(i) > view.logit(best) {
            i
        } else {
            best
        }
    })
}

impl CustomSampler for Stage_ {
    fn name(&self) -> &'static CStr {
        name_of(self.planted.kind, self.planted.exact, self.placed)
    }

    /// llama.cpp's CPU rules, which both versions share.
    fn apply(&mut self, view: &mut ArrayView<'_>) {
        self.planted.cpu_applied.fetch_add(1, Ordering::SeqCst);
        let n = view.len();
        if n == 0 {
            return;
        }
        match self.planted.kind {
            Kind::TieTopK { k } => {
                let e = view.entries_mut();
                e.sort_by(|a, b| b.logit.total_cmp(&a.logit).then(b.id.cmp(&a.id)));
                view.truncate((k.max(0) as usize).min(n));
                view.set_sorted(true);
            }
            // Keep `logit >= max + ln p`, topped up to the `min_keep` top entries.
            Kind::MinP { p, min_keep } => {
                let max = (0..n)
                    .map(|i| view.logit(i))
                    .fold(f32::NEG_INFINITY, f32::max);
                let threshold = max + p.ln();
                let mut order: Vec<usize> = (0..n).collect();
                order.sort_by(|&a, &b| view.logit(b).total_cmp(&view.logit(a)));
                for (rank, &i) in order.iter().enumerate() {
                    if rank >= min_keep && view.logit(i) < threshold {
                        view.set_logit(i, f32::NEG_INFINITY);
                    }
                }
            }
            Kind::Temp { t, .. } => {
                for i in 0..n {
                    view.set_logit(i, view.logit(i) / t);
                }
            }
            // llama.cpp's CPU rule for delta > 0, in f32 as it computes it: an array of one is
            // left alone; the softmax over the sorted array, its entropy over p > 0 divided by
            // -ln(1/size), raised to the exponent, mapped into [t - delta, t + delta]; each
            // logit divided by that temperature (never 0 here, see `Kind::TempExt`).
            Kind::TempExt { t, delta, exponent } => {
                if n <= 1 {
                    return;
                }
                let min_temp = (t - delta).max(0.0);
                let max_temp = t + delta;
                let max_entropy = -(1.0f32 / n as f32).ln();
                let e = view.entries_mut();
                e.sort_by(|a, b| b.logit.total_cmp(&a.logit));
                let max = e[0].logit;
                let w: Vec<f32> = e.iter().map(|x| (x.logit - max).exp()).collect();
                let sum = w.iter().fold(0.0f32, |s, x| s + x);
                let mut entropy = 0.0f32;
                for x in &w {
                    let p = x / sum;
                    if p > 0.0 {
                        entropy -= p * p.ln();
                    }
                }
                let dyn_temp =
                    min_temp + (max_temp - min_temp) * (entropy / max_entropy).powf(exponent);
                for x in e.iter_mut() {
                    x.logit /= dyn_temp;
                }
                view.set_sorted(true);
            }
            Kind::Greedy | Kind::SoftmaxGreedy => {
                let i = top(view);
                view.set_selected(i);
            }
            // llama.cpp's CPU rule over the window: a counted id's logit is multiplied by
            // `repeat` when <= 0, else divided by it, then loses `count freq + present`.
            Kind::Penalties { params, .. } => {
                let c = counts(&self.cpu_window);
                for i in 0..n {
                    let Some(&count) = c.get(&view.id(i)) else {
                        continue;
                    };
                    let l = view.logit(i);
                    let l = if l <= 0.0 {
                        l * params.repeat
                    } else {
                        l / params.repeat
                    };
                    view.set_logit(i, l - (count as f32 * params.freq + params.present));
                }
                view.set_sorted(false);
            }
            Kind::CpuDist { .. } => {
                let max = view.logit(top(view)) as f64;
                let w: Vec<f64> = (0..n).map(|i| (view.logit(i) as f64 - max).exp()).collect();
                let total: f64 = w.iter().sum();
                let rng = self.rng.as_mut().expect("a planted draw has a generator");
                // 53 random bits: a uniform in [0, 1).
                let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * total;
                let mut acc = 0.0;
                let mut pick = n - 1;
                for (i, x) in w.iter().enumerate() {
                    acc += x;
                    if u < acc {
                        pick = i;
                        break;
                    }
                }
                view.set_selected(pick);
            }
        }
    }

    fn accept(&mut self, id: TokenId) {
        if let Kind::Penalties {
            last_n,
            graph_history,
            ..
        } = self.planted.kind
        {
            History::Window.accept(&mut self.cpu_window, last_n, id);
            graph_history.accept(&mut self.graph_window, last_n, id);
        }
    }

    fn reset(&mut self) {
        self.cpu_window.clear();
        self.graph_window.clear();
    }

    fn clone_sampler(&self) -> Box<dyn CustomSampler> {
        Box::new(self.clone())
    }

    /// A penalties stage's inputs, in pairs: 1 where the id is counted, else 0; and
    /// `count freq + present` where it is, else 0 (the f32 value the CPU subtracts).
    fn graph_set_input(&mut self, inputs: &GraphInputs<'_>) {
        let Kind::Penalties { params, .. } = self.planted.kind else {
            return;
        };
        // An input of another length than the vocabulary's is filled with NaN, which every
        // check flags, and the fill is not counted.
        if (0..inputs.len()).any(|i| inputs.len_of(i) != self.n_vocab) {
            for i in 0..inputs.len() {
                inputs.set(i, &vec![f32::NAN; inputs.len_of(i)]);
            }
            return;
        }
        self.planted.inputs_set.fetch_add(1, Ordering::SeqCst);
        let mut counted = vec![0.0f32; self.n_vocab];
        let mut subtract = vec![0.0f32; self.n_vocab];
        for (id, count) in counts(&self.graph_window) {
            counted[id.0 as usize] = 1.0;
            subtract[id.0 as usize] = count as f32 * params.freq + params.present;
        }
        for i in 0..inputs.len() {
            inputs.set(i, if i % 2 == 0 { &counted } else { &subtract });
        }
    }

    fn in_graph(&self) -> bool {
        self.planted.in_graph()
    }

    fn placed_in_graph(&mut self) {
        self.placed = true;
    }

    fn graph_apply(&mut self, g: &GraphOps) {
        self.planted.applied.fetch_add(1, Ordering::SeqCst);
        let exact = self.planted.exact;
        let l = g.logits();
        match self.planted.kind {
            // threshold = max + ln p, lowered to the min_keep-th largest logit when exact;
            // entries below it get log 0 = -inf added.
            Kind::MinP { p, min_keep } => {
                let max = g.gather(l, g.argmax(l));
                let mut threshold = g.scale_bias(max, 1.0, p.ln());
                let k = (min_keep as i64).min(g.len(l));
                if exact && k > 0 {
                    let top = g.gather(l, g.top_k(l, k as i32));
                    let kth = g.gather(top, g.head(g.argsort_ascending(top), 1));
                    // min(threshold, kth) = threshold - max(threshold - kth, 0)
                    threshold = g.sub(threshold, g.relu(g.sub(threshold, kth)));
                }
                // 1 where l >= threshold: 1 - step(threshold - l).
                let below = g.step(g.scale_bias(g.sub(l, threshold), -1.0, 0.0));
                let keep = g.scale_bias(below, -1.0, 1.0);
                g.set_logits(g.add(l, g.log(keep)));
            }
            // 1/t is exact for the t used here (0.5, 1); the wrong version skews it.
            Kind::Temp { t, skew } => {
                let factor = if exact { 1.0 / t } else { skew / t };
                g.set_logits(g.scale_bias(l, factor, 0.0));
            }
            Kind::CpuDist { .. } => unreachable!("a planted CPU draw is never placed in the graph"),
            Kind::TieTopK { .. } if exact => {
                unreachable!("the exact tie-break control is never placed in the graph")
            }
            // The k-th largest logit, and 1 where l >= it: every entry tied with the cut stays.
            Kind::TieTopK { k } => {
                let top = g.gather(l, g.top_k(l, k));
                let kth = g.gather(top, g.head(g.argsort_ascending(top), 1));
                let below = g.step(g.scale_bias(g.sub(l, kth), -1.0, 0.0));
                let keep = g.scale_bias(below, -1.0, 1.0);
                g.set_logits(g.add(l, g.log(keep)));
            }
            // f = 1/repeat where l > 0, else repeat, for a counted id; 1 for the rest (exact
            // for a repeat that is a power of two). Then l f - (count freq + present).
            // Its inputs are per id. Without candidates they take the row's length, which is
            // the vocabulary's in a graph that decodes (set_input checks) but need not be in
            // one llama.cpp only reserves.
            Kind::Penalties { params, .. } => {
                let n = match g.candidates() {
                    Some(_) => self.n_vocab as i64,
                    None => g.len(l),
                };
                let (mut counted, mut subtract) = (g.input(n), g.input(n));
                if let Some(c) = g.candidates() {
                    counted = g.gather(counted, c);
                    subtract = g.gather(subtract, c);
                }
                let r = params.repeat;
                let by_sign = g.scale_bias(g.step(l), 1.0 / r - r, r);
                let f = g.scale_bias(g.mul(counted, g.scale_bias(by_sign, 1.0, -1.0)), 1.0, 1.0);
                g.set_logits(g.sub(g.mul(l, f), subtract));
            }
            // The CPU's rule as ops: the softmax's entropy (p log p of a p of 0 is 0: the log
            // is taken of p raised to the least normal f32), over -ln(1/n) for the n entries
            // above -inf (l + FLT_MAX > 0 exactly for them) or, in the wrong version, for
            // every entry of the tensor; the power as exp(exponent ln x); a divisor of 1 where
            // fewer than 2 entries are left, as the CPU leaves such an array alone.
            Kind::TempExt { t, delta, exponent } => {
                let lo = (t - delta).max(0.0);
                let w = (t + delta) - lo;
                let probs = g.soft_max(l);
                let logs = g.log(g.clamp(probs, f32::MIN_POSITIVE, 1.0));
                let entropy = g.scale_bias(g.sum(g.mul(probs, logs)), -1.0, 0.0);
                let above = g.sum(g.step(g.scale_bias(l, 1.0, f32::MAX)));
                let n = if exact {
                    above
                } else {
                    g.scale_bias(above, 0.0, g.len(l) as f32)
                };
                let at_least_two = g.clamp(n, 2.0, f32::MAX);
                let one = g.scale_bias(at_least_two, 0.0, 1.0);
                let max_entropy = g.scale_bias(g.log(g.div(one, at_least_two)), -1.0, 0.0);
                let norm = g.div(entropy, max_entropy);
                let pow = g.exp(g.scale_bias(g.log(norm), exponent, 0.0));
                let dyn_temp = g.scale_bias(pow, w, lo);
                let alone = g.step(g.scale_bias(n, -1.0, 1.5));
                let divisor = g.add(g.mul(dyn_temp, g.scale_bias(alone, -1.0, 1.0)), alone);
                g.set_logits(g.div(l, divisor));
            }
            Kind::Greedy | Kind::SoftmaxGreedy => {
                let idx = g.argmax(l);
                let id = match g.candidates() {
                    // The wrong greedy hands back the index, as if no stage had narrowed.
                    Some(c) if exact || self.planted.kind == Kind::SoftmaxGreedy => {
                        g.gather(c, idx)
                    }
                    _ => idx,
                };
                g.set_sampled(id);
                if self.planted.kind == Kind::SoftmaxGreedy {
                    let scaled = if exact { l } else { g.scale_bias(l, 1.05, 0.0) };
                    g.set_probs(g.soft_max(scaled));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(h: History, last_n: usize, ids: &[i32]) -> Vec<i32> {
        let mut ring = VecDeque::new();
        for &id in ids {
            h.accept(&mut ring, last_n, TokenId(id));
        }
        ring.iter().map(|t| t.0).collect()
    }

    #[test]
    fn each_history_counts_what_its_name_says() {
        let ids = [1, 2, 3, 4, 5];
        assert_eq!(window(History::Window, 3, &ids), [3, 4, 5]);
        assert_eq!(window(History::Twice, 3, &ids), [4, 5, 5]);
        assert_eq!(window(History::Unbounded, 3, &ids), ids);
        let c = counts(&VecDeque::from([TokenId(7), TokenId(2), TokenId(7)]));
        assert_eq!(c, BTreeMap::from([(TokenId(2), 1), (TokenId(7), 2)]));
    }

    /// The CPU path the three versions share, against the oracle's penalties over the same
    /// history: a window of 4 holding a positive logit (id 1), a zero one twice (id 5) and a
    /// negative one (id 7), with older repeats outside it.
    #[test]
    fn the_penalties_cpu_path_is_the_oracles() {
        let params = PenaltyParams {
            repeat: 2.0,
            freq: 0.5,
            present: 0.25,
        };
        let raw: Vec<f32> = (0..64)
            .map(|i| {
                if i == 5 {
                    0.0
                } else {
                    ((i * 37 % 64) as f32 - 30.0) * 0.731
                }
            })
            .collect();
        let history: Vec<TokenId> = [5, 1, 2, 2, 9, 40, 1, 1, 63, 5, 1, 7, 5]
            .into_iter()
            .map(TokenId)
            .collect();
        for h in [History::Window, History::Twice, History::Unbounded] {
            let p = Planted::penalties(4, params, h);
            let mut s = p.build(64).unwrap();
            for &t in &history {
                s.accept(t).unwrap();
            }
            let mut cands = subject::Candidates::from_logits(&raw);
            s.apply(&mut cands).unwrap();
            let pool = oracle::truncation::Pool::from_logits(&raw);
            let want = oracle::truncation::compose(&[p.stage()], &pool, &history).pool;
            assert_eq!(want.len(), 64);
            for e in want.entries() {
                let got = cands.logit_of(e.id).unwrap();
                assert_eq!(got.to_bits(), e.logit.to_bits(), "{h:?}, id {}", e.id);
            }
            let changed = (want.entries().iter())
                .filter(|e| e.logit != raw[e.id.0 as usize])
                .count();
            assert_eq!(changed, 3, "ids 1, 5 and 7 are in the window of 4");
        }
    }
}
