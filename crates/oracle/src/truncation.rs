//! What each deterministic llama.cpp stage keeps, as a pure function of the multiset of
//! `(id, logit)` pairs it is given and its parameters. Serves F2: `compose` gives the survivor
//! set a chain must keep, and `apply` is what the oracle gate checks stage by stage.
//!
//! A [`Pool`] is stored in one canonical order (logit descending, then id ascending) whatever
//! order it was built from: a sampler whose survivor set changes when only the order of its
//! input changes is wrong by definition, and this module cannot be.
//!
//! # Definitions (llama.cpp's, on an honestly flagged array)
//! Probabilities are `softmax(logits)` over every entry still in the array (a `-inf` entry
//! has probability 0). "Top" means largest logit first.
//! - `top_k(k)`: `k <= 0` keeps everything; otherwise the `min(k, size)` top entries.
//! - `top_p(p, min_keep)`: `p >= 1` keeps everything; otherwise the shortest top prefix whose
//!   probability sum reaches `p` (`>=`) and has at least `min_keep` entries; all if none does.
//! - `min_p(p, min_keep)`: `p <= 0` keeps everything; otherwise every entry with
//!   `logit >= max + ln p`, topped up to `min_keep` (and at least 1) top entries.
//! - `typical(p, min_keep)`: `p >= 1` keeps everything; otherwise entries ranked by
//!   `|-ln p_i - H|` ascending (`H` the entropy) and the shortest such prefix whose
//!   probability sum exceeds `p` (`>`) with at least `min_keep` entries; all if none does.
//! - `xtc(probability, threshold, min_keep)`: with `probability >= 1` (always fires),
//!   `threshold <= 0.5` and at least 2 entries, the top entries with `p >= threshold` except
//!   the last of them are removed, if that removes something and leaves `min_keep`.
//! - `top_n_sigma(n)`: entries with `logit < max - n * std` become `-inf` (mean and std over
//!   the finite entries); `n <= 0` or a single entry does nothing.
//! - `temp(t)`: `t > 0` divides every logit by `t` (in f32, as llama.cpp does); `t <= 0` keeps
//!   the top entry and sets every other logit to `-inf`.
//! - `temp_ext(t, delta, exponent)`: `delta <= 0` is `temp(t)`; otherwise the temperature is
//!   `t - delta .. t + delta` (lower end clamped at 0) mapped from the normalized entropy
//!   `H / ln(size)` raised to `exponent`.
//! - `logit_bias`: adds each bias (f32) to its id if the id is still in the array.
//! - `penalties`: [`crate::penalty::llama_penalized`] with counts from the last `last_n` ids
//!   of the history ([`crate::window::histogram`]).
//! - `greedy`: selects the top entry. `dist` ([`crate::draw`]) and the suite's `sorted_guard`
//!   keep the set unchanged.
//!
//! # Tie rule
//! Where a definition needs an order among equal keys, the oracle orders by id ascending.
//! That choice is arbitrary and llama.cpp's sorts are not stable, so a result that depends on
//! it is not a verdict: every stage reports a [`KnifeEdge`] when its decision rests on a tie,
//! or when a threshold lies within the f32 rounding tolerance of the value it is compared
//! with (the subject computes in f32, the oracle in f64). Callers treat such inputs as
//! undecided.

use crate::penalty::{llama_penalized, PenaltyParams};
use crate::stage::{Stage, SuiteStage};
use crate::window::{histogram, WindowLen};
use crate::TokenId;
use std::cmp::Ordering;

/// One candidate: an id and its logit (`-inf` allowed, NaN and `+inf` never).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Entry {
    pub id: TokenId,
    pub logit: f32,
}

/// A multiset of candidates, held in canonical order (logit descending, id ascending).
#[derive(Debug, Clone, PartialEq)]
pub struct Pool {
    entries: Vec<Entry>,
}

fn canonical(a: &Entry, b: &Entry) -> Ordering {
    b.logit.total_cmp(&a.logit).then(a.id.cmp(&b.id))
}

impl Pool {
    /// The pool of `entries`, whatever their order. A stage can overflow f32 and leave NaN or
    /// `+inf`; such a pool is kept (ordered by `total_cmp`) and [`compose`] reports it as a
    /// knife edge, because no verdict can rest on it.
    pub fn new(entries: impl IntoIterator<Item = Entry>) -> Pool {
        let mut entries: Vec<Entry> = entries.into_iter().collect();
        entries.sort_by(canonical);
        Pool { entries }
    }

    /// Whether every logit is finite or `-inf` (the values llama.cpp's stages handle).
    pub fn is_well_formed(&self) -> bool {
        self.entries
            .iter()
            .all(|e| !e.logit.is_nan() && e.logit != f32::INFINITY)
    }

    /// Ids `0..logits.len()` with the given logits.
    pub fn from_logits(logits: &[f32]) -> Pool {
        Pool::new(logits.iter().enumerate().map(|(i, &logit)| Entry {
            id: TokenId(i as i32),
            logit,
        }))
    }

    /// Entries in canonical order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The ids a sampler could still choose: in the array with a logit above `-inf`.
    pub fn survivors(&self) -> Vec<TokenId> {
        crate::survivors(self.entries.iter().map(|e| (e.id, e.logit)))
    }

    /// `softmax` of the logits in canonical order, in f64.
    pub fn probabilities(&self) -> Vec<f64> {
        let max = self.entries.first().map_or(0.0, |e| e.logit as f64);
        if max == f64::NEG_INFINITY {
            return vec![f64::NAN; self.entries.len()];
        }
        let w: Vec<f64> = self
            .entries
            .iter()
            .map(|e| (e.logit as f64 - max).exp())
            .collect();
        let sum: f64 = w.iter().sum();
        w.into_iter().map(|x| x / sum).collect()
    }

    /// The first two entries, when they share the top logit (the tie llama.cpp settles by
    /// array order wherever it keeps or selects a single top entry).
    fn top_tie(&self) -> Option<(Entry, Entry)> {
        match self.entries.as_slice() {
            [a, b, ..] if a.logit == b.logit => Some((*a, *b)),
            _ => None,
        }
    }

    fn prefix(&self, n: usize) -> Pool {
        Pool {
            entries: self.entries[..n.min(self.entries.len())].to_vec(),
        }
    }

    fn map_logits(&self, f: impl Fn(&Entry) -> f32) -> Pool {
        Pool::new(self.entries.iter().map(|e| Entry {
            id: e.id,
            logit: f(e),
        }))
    }
}

/// Why a stage's result is not a function of the multiset alone, or not decidable in f32.
#[derive(Debug, Clone, PartialEq)]
pub struct KnifeEdge(pub String);

/// The words every tie edge uses (and no other edge does): [`split_tie`] and the top-tie
/// edges of temp, temp_ext and greedy. A test keeps them in step.
const TIE_WORDS: [&str; 2] = ["of equal logit", "share the top logit"];

impl KnifeEdge {
    /// Whether the answer is undecided only because equal logits may be ordered either way
    /// (not a rounding margin, nor a NaN llama.cpp computes), so every tie-break can be tried.
    pub fn is_tie(&self) -> bool {
        TIE_WORDS.iter().any(|w| self.0.contains(w))
    }
}

/// A stage's result: the pool it leaves and, if any, the reason its decision is undecided.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub pool: Pool,
    pub edge: Option<KnifeEdge>,
    /// The entry a selecting stage (greedy) chose.
    pub selected: Option<TokenId>,
}

/// A step that selects nothing.
fn step(pool: Pool, edge: Option<KnifeEdge>) -> Step {
    Step {
        pool,
        edge,
        selected: None,
    }
}

fn unchanged(pool: &Pool) -> Step {
    step(pool.clone(), None)
}

/// Rounding slack for a sum of `n` f32 probabilities compared with a threshold in [0, 1].
fn prob_tolerance(n: usize) -> f64 {
    8.0 * (n as f64 + 2.0) * f32::EPSILON as f64
}

/// Rounding slack for an f32 logit-scale quantity of magnitude about `scale`.
fn logit_tolerance(scale: f64) -> f64 {
    16.0 * f32::EPSILON as f64 * (1.0 + scale.abs())
}

fn edge(text: String) -> Option<KnifeEdge> {
    Some(KnifeEdge(text))
}

/// A cut after the first `keep` canonical entries splits equal logits.
fn split_tie(pool: &Pool, keep: usize, stage: &str) -> Option<KnifeEdge> {
    let e = pool.entries();
    if keep > 0 && keep < e.len() && e[keep - 1].logit == e[keep].logit {
        return edge(format!(
            "{stage}: the cut after {keep} entries splits ids {} and {} of equal logit {}",
            e[keep - 1].id,
            e[keep].id,
            e[keep].logit
        ));
    }
    None
}

/// The first entry whose logit is within `tol` of `threshold`, as `stage`'s edge.
fn near_threshold<'a>(
    stage: &str,
    mut entries: impl Iterator<Item = &'a Entry>,
    threshold: f64,
    tol: f64,
) -> Option<KnifeEdge> {
    entries
        .find(|e| (e.logit as f64 - threshold).abs() <= tol)
        .map(|e| {
            KnifeEdge(format!(
                "{stage}: logit {} of id {} is within {tol:.1e} of the threshold {threshold:.9}",
                e.logit, e.id
            ))
        })
}

/// `-sum q ln q` over the positive probabilities.
fn entropy(probs: &[f64]) -> f64 {
    probs
        .iter()
        .filter(|&&q| q > 0.0)
        .map(|q| -q * q.ln())
        .sum()
}

pub fn top_k(pool: &Pool, k: i32) -> Step {
    if k <= 0 {
        return unchanged(pool);
    }
    let keep = (k as usize).min(pool.len());
    step(pool.prefix(keep), split_tie(pool, keep, "top_k"))
}

pub fn top_p(pool: &Pool, p: f32, min_keep: usize) -> Step {
    if p >= 1.0 {
        return unchanged(pool);
    }
    let probs = pool.probabilities();
    let p = p as f64;
    let tol = prob_tolerance(pool.len());
    let mut cum = 0.0;
    let mut keep = pool.len();
    let mut near = None;
    for (i, q) in probs.iter().enumerate() {
        cum += q;
        if i + 1 >= min_keep && (cum - p).abs() <= tol && near.is_none() {
            near = edge(format!(
                "top_p: the mass of the top {} entries ({cum:.9}) is within {tol:.1e} of p = {p}",
                i + 1
            ));
        }
        if cum >= p && i + 1 >= min_keep {
            keep = i + 1;
            break;
        }
    }
    let tie = split_tie(pool, keep, "top_p");
    step(pool.prefix(keep), near.or(tie))
}

pub fn min_p(pool: &Pool, p: f32, min_keep: usize) -> Step {
    if p <= 0.0 || pool.is_empty() {
        return unchanged(pool);
    }
    let max = pool.entries()[0].logit as f64;
    let threshold = max + (p as f64).ln();
    let tol = logit_tolerance(max.abs().max(threshold.abs()));
    let above = pool
        .entries()
        .iter()
        .filter(|e| e.logit as f64 >= threshold)
        .count();
    let near = near_threshold("min_p", pool.entries().iter(), threshold, tol);
    let keep = above.max(min_keep).max(1).min(pool.len());
    let tie = split_tie(pool, keep, "min_p");
    step(pool.prefix(keep), near.or(tie))
}

pub fn typical(pool: &Pool, p: f32, min_keep: usize) -> Step {
    typical_with(pool, p, min_keep, false)
}

/// `typical` in exact arithmetic: an entry whose probability is 0 (a `-inf` logit) adds
/// nothing to the entropy (0 ln 0 = 0) and is the least typical of all; a probability that
/// would underflow f32 is kept in f64. This is what the stage should do whatever llama.cpp's
/// f32 arithmetic does there, so it judges the edge-input probes (F6); F2 keeps [`typical`],
/// which calls such pools undecided because llama.cpp's own entropy is NaN on them.
pub fn typical_exact(pool: &Pool, p: f32, min_keep: usize) -> Step {
    typical_with(pool, p, min_keep, true)
}

fn typical_with(pool: &Pool, p: f32, min_keep: usize, exact: bool) -> Step {
    if p >= 1.0 {
        return unchanged(pool);
    }
    let probs = pool.probabilities();
    // llama.cpp computes -p*ln(p) in f32, which is NaN once a probability underflows to 0;
    // every score is then NaN and its order is whatever its sort leaves.
    // "Not >" rather than "<=": a NaN probability counts as underflowed too.
    #[allow(clippy::neg_cmp_op_on_partial_ord)]
    let underflowed = pool
        .entries()
        .iter()
        .zip(&probs)
        .find(|(_, &q)| !(q > 1e-37));
    if let (Some(e), false) = (underflowed, exact) {
        return step(pool.clone(), edge(format!(
            "typical: id {} has probability {:.3e}, which is 0 in f32, so llama.cpp's entropy is NaN",
            e.0.id, e.1
        )));
    }
    let entropy = entropy(&probs);
    let scores: Vec<f64> = probs
        .iter()
        .map(|&q| {
            if q > 0.0 {
                (-q.ln() - entropy).abs()
            } else {
                f64::INFINITY
            }
        })
        .collect();
    let id = |i: usize| pool.entries()[i].id;
    let mut order: Vec<usize> = (0..pool.len()).collect();
    order.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]).then(id(a).cmp(&id(b))));
    let n = pool.len();
    let max_surprise = probs
        .iter()
        .filter(|&&q| q > 0.0)
        .map(|q| -q.ln())
        .fold(0.0, f64::max);
    let score_tol = 8.0 * (n as f64 + 2.0) * f32::EPSILON as f64 * (1.0 + entropy + max_surprise);
    let tol = prob_tolerance(n);
    let p = p as f64;
    let mut cum = 0.0;
    let mut keep = n;
    let mut near = None;
    for (i, &idx) in order.iter().enumerate() {
        cum += probs[idx];
        let may_stop = min_keep == 0 || i + 1 >= min_keep;
        if may_stop && (cum - p).abs() <= tol && near.is_none() {
            near = edge(format!(
                "typical: the mass of the {} most typical entries ({cum:.9}) is within {tol:.1e} of p = {p}",
                i + 1
            ));
        }
        if cum > p && may_stop {
            keep = i + 1;
            break;
        }
    }
    if near.is_none() && keep < n {
        let (a, b) = (order[keep - 1], order[keep]);
        if (scores[a] - scores[b]).abs() <= score_tol {
            near = edge(format!(
                "typical: ids {} and {} on either side of the cut have scores within {score_tol:.1e}",
                id(a),
                id(b)
            ));
        }
    }
    let kept = Pool::new(order[..keep].iter().map(|&i| pool.entries()[i]));
    step(kept, near)
}

/// `temp(t)` for `t <= 0`: the top entry keeps its logit, all others become `-inf`.
fn argmax_only(pool: &Pool, stage: &str) -> Step {
    let tie = pool.top_tie().and_then(|(a, b)| {
        edge(format!(
            "{stage}: ids {} and {} share the top logit {}; llama.cpp keeps whichever comes first",
            a.id, b.id, a.logit
        ))
    });
    let top = pool.entries().first().map(|x| x.id);
    let kept = pool.map_logits(|x| {
        if Some(x.id) == top {
            x.logit
        } else {
            f32::NEG_INFINITY
        }
    });
    step(kept, tie)
}

/// `temp(t)`: for `t > 0` an f32 division, bit for bit what llama.cpp computes.
pub fn temp(pool: &Pool, t: f32) -> Step {
    if pool.is_empty() {
        return unchanged(pool);
    }
    if t <= 0.0 {
        return argmax_only(pool, "temp");
    }
    step(pool.map_logits(|e| e.logit / t), None)
}

pub fn temp_ext(pool: &Pool, t: f32, delta: f32, exponent: f32) -> Step {
    if delta <= 0.0 {
        return temp(pool, t);
    }
    if pool.len() <= 1 {
        return unchanged(pool);
    }
    let normalized = entropy(&pool.probabilities()) / (pool.len() as f64).ln();
    let (lo, hi) = ((t - delta).max(0.0) as f64, (t + delta) as f64);
    let dyn_temp = lo + (hi - lo) * normalized.powf(exponent as f64);
    if dyn_temp <= 0.0 {
        return argmax_only(pool, "temp_ext");
    }
    // The subject derives its temperature in f32, so its logits may differ from these in
    // the last bits; later thresholds carry a tolerance for that.
    let t = dyn_temp as f32;
    step(pool.map_logits(|e| e.logit / t), None)
}

pub fn xtc(pool: &Pool, probability: f32, threshold: f32, min_keep: usize) -> Step {
    if probability <= 0.0 || threshold > 0.5 || pool.len() < 2 {
        return unchanged(pool);
    }
    assert!(
        probability >= 1.0,
        "xtc with probability in (0, 1) is random; the oracle models 0 and >= 1 only"
    );
    let probs = pool.probabilities();
    let t = threshold as f64;
    let tol = prob_tolerance(pool.len());
    let near = probs
        .iter()
        .zip(pool.entries())
        .find(|(&q, _)| (q - t).abs() <= tol)
        .map(|(q, e)| {
            KnifeEdge(format!(
                "xtc: id {} has probability {q:.9}, within {tol:.1e} of the threshold {t}",
                e.id
            ))
        });
    let above = probs.iter().take_while(|&&q| q >= t).count();
    let pos_last = above.saturating_sub(1);
    if pos_last > 0 && pool.len() - pos_last >= min_keep {
        let kept = Pool {
            entries: pool.entries()[pos_last..].to_vec(),
        };
        let tie = split_tie(pool, pos_last, "xtc");
        step(kept, near.or(tie))
    } else {
        step(pool.clone(), near)
    }
}

pub fn top_n_sigma(pool: &Pool, n: f32) -> Step {
    if n <= 0.0 || pool.len() <= 1 {
        return unchanged(pool);
    }
    let is_finite = |e: &&Entry| e.logit > f32::NEG_INFINITY;
    let finite: Vec<f64> = (pool.entries().iter().filter(is_finite))
        .map(|e| e.logit as f64)
        .collect();
    if finite.is_empty() {
        return unchanged(pool);
    }
    let max = finite.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let mean = finite.iter().sum::<f64>() / finite.len() as f64;
    let std = (finite.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / finite.len() as f64).sqrt();
    let threshold = max - n as f64 * std;
    let scale = finite.iter().fold(0.0f64, |a, x| a.max(x.abs()));
    let tol = logit_tolerance(scale) * (finite.len() as f64 + 2.0) * (1.0 + n.abs() as f64);
    let near = near_threshold(
        "top_n_sigma",
        pool.entries().iter().filter(is_finite),
        threshold,
        tol,
    );
    let kept = pool.map_logits(|e| {
        if (e.logit as f64) < threshold {
            f32::NEG_INFINITY
        } else {
            e.logit
        }
    });
    step(kept, near)
}

pub fn logit_bias(pool: &Pool, biases: &[(TokenId, f32)]) -> Step {
    let kept = pool.map_logits(|e| {
        (biases.iter())
            .filter(|(id, _)| *id == e.id)
            .fold(e.logit, |l, (_, b)| l + b)
    });
    step(kept, None)
}

pub fn penalties(
    pool: &Pool,
    last_n: WindowLen,
    params: PenaltyParams,
    history: &[TokenId],
) -> Step {
    let counts = histogram(history, last_n);
    let count = |id| counts.get(&id).copied().unwrap_or(0);
    step(
        pool.map_logits(|e| llama_penalized(e.logit, count(e.id), params)),
        None,
    )
}

pub fn greedy(pool: &Pool) -> Step {
    let tie = pool.top_tie().and_then(|(a, b)| {
        edge(format!(
            "greedy: ids {} and {} share the top logit {}",
            a.id, b.id, a.logit
        ))
    });
    Step {
        selected: pool.entries().first().map(|x| x.id),
        ..step(pool.clone(), tie)
    }
}

/// What `stage` leaves of `pool`; `history` is the ids accepted before it (what `penalties`
/// counts; every other stage ignores it).
pub fn apply(stage: &Stage, pool: &Pool, history: &[TokenId]) -> Step {
    match stage {
        Stage::TopK { k } => top_k(pool, *k),
        Stage::TopP { p, min_keep } => top_p(pool, *p, *min_keep),
        Stage::MinP { p, min_keep } => min_p(pool, *p, *min_keep),
        Stage::Typical { p, min_keep } => typical(pool, *p, *min_keep),
        Stage::Temp { t } => temp(pool, *t),
        Stage::TempExt { t, delta, exponent } => temp_ext(pool, *t, *delta, *exponent),
        Stage::Xtc {
            probability,
            threshold,
            min_keep,
        } => xtc(pool, *probability, *threshold, *min_keep),
        Stage::TopNSigma { n } => top_n_sigma(pool, *n),
        Stage::LogitBias { biases } => logit_bias(pool, biases),
        Stage::Penalties { last_n, params } => penalties(pool, *last_n, *params, history),
        Stage::Greedy => greedy(pool),
        Stage::Dist { .. } => unchanged(pool),
    }
}

/// A link of a chain the oracle can follow: llama.cpp's stages, the suite's own, and any
/// caller's type that reads as one of them (repro-sortpoison's planted stages).
pub trait Link {
    /// What the link leaves of `pool` after `history` (see [`apply`]).
    fn step(&self, pool: &Pool, history: &[TokenId]) -> Step;
}

impl Link for Stage {
    fn step(&self, pool: &Pool, history: &[TokenId]) -> Step {
        apply(self, pool, history)
    }
}

impl Link for SuiteStage {
    fn step(&self, pool: &Pool, _history: &[TokenId]) -> Step {
        match self {
            SuiteStage::SortedGuard => unchanged(pool),
        }
    }
}

/// The stages applied in order, each to the true multiset the previous one left.
#[derive(Debug, Clone, PartialEq)]
pub struct Composition {
    pub pool: Pool,
    /// `(stage index, reason)` for every stage whose decision was on a knife edge.
    pub edges: Vec<(usize, KnifeEdge)>,
    /// What the last selecting stage chose, if any.
    pub selected: Option<TokenId>,
}

/// `stages` applied in order to `pool`, after `history` was accepted into the chain.
pub fn compose<L: Link>(stages: &[L], pool: &Pool, history: &[TokenId]) -> Composition {
    let overflow = |what: &str| KnifeEdge(format!("{what} a NaN or +inf logit (an f32 overflow)"));
    let mut out = Composition {
        pool: pool.clone(),
        edges: Vec::new(),
        selected: None,
    };
    for (i, stage) in stages.iter().enumerate() {
        if !out.pool.is_well_formed() {
            out.edges.push((i, overflow("its input holds")));
            break;
        }
        let step = stage.step(&out.pool, history);
        out.pool = step.pool;
        out.edges.extend(step.edge.map(|e| (i, e)));
        out.selected = step.selected.or(out.selected);
    }
    if !out.pool.is_well_formed() && out.edges.last().map(|e| e.0) != Some(stages.len() - 1) {
        out.edges.push((stages.len() - 1, overflow("it leaves")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::token_ids as ids;

    fn published() -> Pool {
        Pool::from_logits(&[4.0, 3.0, 2.0, 1.0, 0.0, -1.0, -2.0, -3.0])
    }

    #[test]
    fn tie_edges_say_so_and_margin_edges_do_not() {
        let equal = Pool::from_logits(&[1.0, 1.0, 1.0, 1.0]);
        let nan = Pool::from_logits(&[0.0, -200.0]);
        // The mass of two of four equal entries is exactly p = 0.5: a margin, not a tie.
        for (step, tie) in [
            (top_k(&equal, 2), true),
            (greedy(&equal), true),
            (temp(&equal, 0.0), true),
            (top_p(&equal, 0.5, 1), false),
            (typical(&nan, 0.5, 1), false),
        ] {
            let e = step.edge.unwrap();
            assert_eq!(e.is_tie(), tie, "{}", e.0);
        }
    }

    #[test]
    fn exact_typical_decides_where_llama_cpp_entropy_is_nan() {
        // p = (0.665, 0, 0.245, 0.090): entropy 0.832; scores 0.425, inf, 0.575, 1.575; the
        // most typical entry alone holds 0.665 > 0.5. A masked entry is the least typical and
        // never kept before the others.
        let ninf = f32::NEG_INFINITY;
        for (logits, p, want) in [
            (&[0.0, -200.0, -1.0, -2.0][..], 0.5, &[0][..]),
            (&[2.0, ninf, 1.0, ninf], 0.9, &[0, 2]),
        ] {
            let s = typical_exact(&Pool::from_logits(logits), p, 1);
            assert_eq!(s.edge, None);
            assert_eq!(s.pool.survivors(), ids(want));
        }
        // Without zeros, exact and llama.cpp-shaped typical agree.
        let plain = Pool::from_logits(&[2.0, 1.0, 0.5, -1.0]);
        assert_eq!(typical_exact(&plain, 0.5, 1), typical(&plain, 0.5, 1));
    }

    /// temp_ext against values computed by hand (in f64, then rounded to f32 as the stage
    /// rounds), at each branch of llama.cpp's CPU rule: `delta <= 0` is temp, one entry is left
    /// alone, the size counts `-inf` entries, `t <= 0` with `delta > 0` is still dynamic, a
    /// temperature of 0 keeps only the top entry, and `0^0 = 1`.
    #[test]
    fn temp_ext_follows_each_branch_of_the_cpu_rule() {
        let ninf = f32::NEG_INFINITY;
        let logits = |s: &Step| -> Vec<f32> {
            let mut e = s.pool.entries().to_vec();
            e.sort_by_key(|x| x.id);
            e.iter().map(|x| x.logit).collect()
        };
        // delta 0: temp(0.5), which doubles every logit.
        let p = Pool::from_logits(&[1.0, -3.0]);
        assert_eq!(logits(&temp_ext(&p, 0.5, 0.0, 1.0)), [2.0, -6.0]);
        // One entry: unchanged, whatever the temperature would be.
        let one = Pool::from_logits(&[7.0]);
        assert_eq!(logits(&temp_ext(&one, 0.8, 0.5, 1.0)), [7.0]);
        // Four equal logits: normalized entropy 1, so the upper end t + delta = 1.5.
        let flat = Pool::from_logits(&[3.0; 4]);
        assert_eq!(logits(&temp_ext(&flat, 1.0, 0.5, 1.0)), [2.0; 4]);
        // Logits 0 and fl(-ln 3): p = 0.75, 0.25 (to 4e-9), H = 0.5623351, H / ln 2 = 0.8112781;
        // exponent 2 and range [0.5, 1.5]: T = 0.5 + 0.6581722 = 1.1581722.
        let l1 = -(3.0f64.ln()) as f32;
        let s = temp_ext(&Pool::from_logits(&[0.0, l1]), 1.0, 0.5, 2.0);
        assert_eq!(logits(&s), [0.0, -0.948_574_3]);
        // Two -inf entries are still in the array: H = 0.5822031 over ln 4, not ln 2, so
        // T = 0.5 + 0.4199708 = 0.9199708, and 2 / T = 2.1739821, 1 / T = 1.0869911.
        let masked = Pool::from_logits(&[2.0, 1.0, ninf, ninf]);
        assert_eq!(
            logits(&temp_ext(&masked, 1.0, 0.5, 1.0)),
            [2.173_982_1, 1.086_991_1, ninf, ninf]
        );
        // t = 0, delta = 0.5: the range is [0, 0.5] and the temperature still dynamic; two
        // equal logits give H / ln 2 = 1, so T = 0.5 and every logit doubles.
        let two = Pool::from_logits(&[1.0, 1.0]);
        assert_eq!(logits(&temp_ext(&two, 0.0, 0.5, 1.0)), [2.0, 2.0]);
        // One finite entry among three: H = 0, so T = 0 on [0, 0.5] and only the top is kept
        // (as it was); with exponent 0, 0^0 = 1 and T = 0.5 divides it.
        let lone = Pool::from_logits(&[1.5, ninf, ninf]);
        assert_eq!(logits(&temp_ext(&lone, 0.0, 0.5, 1.0)), [1.5, ninf, ninf]);
        assert_eq!(logits(&temp_ext(&lone, 0.0, 0.5, 0.0)), [3.0, ninf, ninf]);
        // The same lone entry with t - delta = fl(0.3) > 0: T = fl(0.3) (exponent 1), and
        // 1.5 / fl(0.3) rounds to 5.
        assert_eq!(logits(&temp_ext(&lone, 0.8, 0.5, 1.0)), [5.0, ninf, ninf]);
    }

    #[test]
    fn pool_ignores_input_order() {
        let shuffled = [(1, 3.0), (2, 2.0), (0, 1.0)].map(|(id, logit)| Entry {
            id: TokenId(id),
            logit,
        });
        assert_eq!(Pool::from_logits(&[1.0, 3.0, 2.0]), Pool::new(shuffled));
    }

    /// Each stage on the published pool: the survivors it leaves, and the pool's length.
    #[test]
    fn stages_keep_what_their_definitions_say() {
        let all = [0, 1, 2, 3, 4, 5, 6, 7];
        let cases: [(Step, &[i32], usize); 23] = [
            (top_k(&published(), 3), &[0, 1, 2], 3),
            (top_k(&published(), 0), &all, 8),
            (top_k(&published(), 99), &all, 8),
            // Masses of 4, 3, 2, ...: 0.632, 0.233, 0.086, ...; cumulative 0.632, 0.865.
            (top_p(&published(), 0.6, 1), &[0], 1),
            (top_p(&published(), 0.7, 1), &[0, 1], 2),
            (top_p(&published(), 0.7, 3), &[0, 1, 2], 3),
            (top_p(&published(), 1.0, 1), &all, 8),
            // ln 0.2 = -1.609: logits 4 and 3 pass, 2 does not.
            (min_p(&published(), 0.2, 1), &[0, 1], 2),
            (min_p(&published(), 0.2, 4), &[0, 1, 2, 3], 4),
            (min_p(&published(), 0.0, 1), &all, 8),
            (min_p(&published(), 2.0, 1), &[0], 1),
            // The entropy is 1.038 nats; -ln p is 0.459 for the top and 1.459 for the second,
            // so the second (distance 0.42) is more typical than the top (0.58).
            (typical(&published(), 0.5, 1), &[0, 1], 2),
            (typical(&published(), 0.2, 1), &[1], 1),
            (typical(&published(), 1.0, 1), &all, 8),
            // Probabilities 0.632, 0.233, 0.086: with threshold 0.1 the top two are above it
            // and only the first is removed.
            (xtc(&published(), 1.0, 0.1, 1), &all[1..], 7),
            (xtc(&published(), 1.0, 0.7, 1), &all, 8),
            (xtc(&published(), 0.0, 0.1, 1), &all, 8),
            (xtc(&published(), 1.0, 0.1, 8), &all, 8),
            // Mean 0.5, std sqrt(5.25) = 2.291; n = 1 masks everything below 1.709.
            (top_n_sigma(&published(), 1.0), &[0, 1, 2], 8),
            (temp(&published(), 0.0), &[0], 8),
            (temp(&published(), 0.5), &all, 8),
            (apply(&Stage::Dist { seed: 1 }, &published(), &[]), &all, 8),
            (SuiteStage::SortedGuard.step(&published(), &[]), &all, 8),
        ];
        for (i, (s, want, len)) in cases.into_iter().enumerate() {
            assert_eq!(s.pool.survivors(), ids(want), "case {i}");
            assert_eq!(
                (s.pool.len(), s.edge, s.selected),
                (len, None, None),
                "case {i}"
            );
        }
        assert_eq!(temp(&published(), 0.5).pool.entries()[0].logit, 8.0);
        // Dist and the guard keep the multiset itself.
        assert_eq!(
            apply(&Stage::Dist { seed: 1 }, &published(), &[]).pool,
            published()
        );
        assert_eq!(
            SuiteStage::SortedGuard.step(&published(), &[]).pool,
            published()
        );
    }

    #[test]
    fn knife_edges_at_ties_and_thresholds() {
        let tied = Pool::from_logits(&[1.0, 2.0, 2.0]);
        assert!(top_k(&tied, 1).edge.is_some());
        assert!(top_k(&tied, 2).edge.is_none());
        // Four equal logits: the mass after two is exactly 0.5, a knife edge for p = 0.5.
        assert!(top_p(&Pool::from_logits(&[0.0; 4]), 0.5, 1).edge.is_some());
        // p = e^-1: the threshold is exactly logit 3.
        assert!(min_p(&published(), (-1.0f32).exp(), 1).edge.is_some());
    }

    #[test]
    fn published_chain_keeps_only_the_biased_token() {
        let stages = [
            Stage::TopK { k: 4 },
            Stage::LogitBias {
                biases: vec![(TokenId(3), 6.0)],
            },
            Stage::TopP {
                p: 0.8,
                min_keep: 1,
            },
        ];
        let c = compose(&stages, &published(), &[]);
        assert_eq!(c.pool.survivors(), ids(&[3]));
        assert!(c.edges.is_empty());
        // The biased token carries 1 / (1 + e^-3 + e^-4 + e^-5) = 93.0% of the mass of the four.
        let after_bias = compose(&stages[..2], &published(), &[]).pool;
        assert!((after_bias.probabilities()[0] - 0.93037).abs() < 1e-5);
    }

    #[test]
    fn a_shared_top_logit_is_a_knife_edge_for_greedy_and_temp_zero() {
        let tied = Pool::from_logits(&[1.0, 2.0, 2.0]);
        let g = greedy(&tied);
        assert_eq!(g.selected, Some(TokenId(1)));
        let edge_of = |s: Step| s.edge.map(|e| e.0);
        assert_eq!(
            edge_of(g).as_deref(),
            Some("greedy: ids 1 and 2 share the top logit 2")
        );
        assert_eq!(
            edge_of(temp(&tied, 0.0)).as_deref(),
            Some("temp: ids 1 and 2 share the top logit 2; llama.cpp keeps whichever comes first")
        );
        let clear = Pool::from_logits(&[1.0, 2.0, 1.0]);
        assert_eq!(greedy(&clear).edge, None);
        assert_eq!(temp(&clear, 0.0).edge, None);
        assert_eq!(greedy(&Pool::from_logits(&[3.0])).edge, None);
    }

    #[test]
    fn an_overflowing_stage_is_a_knife_edge_not_a_panic() {
        let stages = [Stage::Temp { t: 1e-38 }, Stage::TopK { k: 1 }];
        assert!(!compose(&stages, &published(), &[]).edges.is_empty());
    }

    #[test]
    fn penalties_use_the_window_counts() {
        let params = PenaltyParams {
            repeat: 2.0,
            freq: 0.0,
            present: 0.0,
        };
        let s = penalties(&published(), WindowLen(2), params, &ids(&[0, 5, 1]));
        // Window [5, 1]: id 1 (3.0) halves to 1.5, id 5 (-1.0) doubles to -2.0, id 0 untouched.
        let logit = |id| {
            s.pool
                .entries()
                .iter()
                .find(|e| e.id == TokenId(id))
                .unwrap()
                .logit
        };
        assert_eq!((logit(0), logit(1), logit(5)), (4.0, 1.5, -2.0));
    }
}
