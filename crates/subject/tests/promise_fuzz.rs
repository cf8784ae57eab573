//! Random sampler specs, chains and candidate arrays through the safe API only: every input
//! that `subject::promise` says must be refused returns `Err` with no call into llama.cpp, and
//! every other input reaches llama.cpp, in this process (an abort there is a finding).
//!
//! The rules are restated here from the promise's list (each refusal is tallied under its
//! rule's name, `A1` to `G4`), not taken from the wrapper's own checks. The seed and the
//! number of cases are fixed, so the counts printed at the end are the same on every run of
//! one build. To find the input of an abort, run with `PROMISE_FUZZ_TRACE=1` (every input is
//! printed to stderr before its call); `PROMISE_FUZZ_CASES=N` and `PROMISE_FUZZ_FIRST=K`
//! choose the cases.

use oracle::penalty::PenaltyParams;
use oracle::rng::Rng;
use oracle::stage::table::Parser;
use oracle::stage::{Stage, STAGES};
use oracle::window::WindowLen;
use std::collections::BTreeMap;
use std::ffi::CStr;
use subject::{
    ffi_calls_on_this_thread, ArrayView, Candidate, Candidates, CustomSampler, DryParams, IdOrder,
    LogitsArray, ProbeArray, Sampler, SamplerSpec, TokenId,
};

/// The promise's window limit, 2^20 (checked against the crate's constant once).
const WINDOW_MAX: i32 = 1 << 20;
const SEED: u64 = 0x134c_5eed;
const CASES: u64 = 2500;

/// Every rule of the promise this test can reach without a model file (C3, E and H need a
/// vocabulary or a sampler without a clone function, which no constructor here makes).
const RULES: &[&str] = &[
    "A1", "A2", "A3", "A4", "A5", "A6", "B1", "B2", "B3", "C1", "C2", "D1", "D2", "D3", "D4", "D5",
    "D6", "D8", "D9", "D10", "D11", "F1", "F2", "G1", "G2", "G3", "G4",
];

const NAN: f32 = f32::NAN;
const INF: f32 = f32::INFINITY;
const MAX: f32 = f32::MAX;
const TINY: f32 = f32::MIN_POSITIVE;

// ---------------------------------------------------------------------------------------
// The promise, restated.

/// Whether any of `xs` is NaN or infinite.
fn non_finite(xs: &[f32]) -> bool {
    xs.iter().any(|x| x.is_nan() || x.is_infinite())
}

/// The first rule of `rules` whose condition holds.
fn first(rules: &[(&'static str, bool)]) -> Option<&'static str> {
    rules.iter().find(|(_, bad)| *bad).map(|(rule, _)| *rule)
}

/// Rule D: the rule that refuses `spec`, if any.
fn spec_refusal(spec: &SamplerSpec) -> Option<&'static str> {
    let not_window = |n: i32| !(0..=WINDOW_MAX).contains(&n);
    let big = |n: usize| n > WINDOW_MAX as usize;
    let (rule, bad) = match spec {
        SamplerSpec::Stage { stage, n_vocab, .. } => match stage {
            Stage::Greedy | Stage::TopK { .. } | Stage::Dist { .. } => return None,
            Stage::TopP { p, min_keep }
            | Stage::MinP { p, min_keep }
            | Stage::Typical { p, min_keep } => ("D1", non_finite(&[*p]) || big(*min_keep)),
            Stage::Temp { t } => ("D2", non_finite(&[*t])),
            Stage::TempExt { t, delta, exponent } => ("D2", non_finite(&[*t, *delta, *exponent])),
            Stage::Xtc {
                probability,
                threshold,
                min_keep,
            } => (
                "D3",
                non_finite(&[*probability, *threshold]) || big(*min_keep),
            ),
            Stage::TopNSigma { n } => ("D4", non_finite(&[*n])),
            Stage::Penalties { last_n, params: q } => (
                "D5",
                *n_vocab <= 0
                    || big(last_n.0)
                    || non_finite(&[q.repeat, q.freq, q.present])
                    || q.repeat <= 0.0,
            ),
            Stage::LogitBias { biases } => (
                "D6",
                *n_vocab <= 0
                    || biases
                        .iter()
                        .any(|(id, b)| id.0 < 0 || id.0 >= *n_vocab || non_finite(&[*b])),
            ),
        },
        SamplerSpec::Dist { .. } => return None,
        SamplerSpec::Mirostat {
            n_vocab: n,
            tau,
            eta,
            m,
            ..
        } => (
            "D8",
            *n <= 0 || non_finite(&[*tau, *eta]) || *m < 1 || *m > *n,
        ),
        SamplerSpec::MirostatV2 { tau, eta, .. } => ("D9", non_finite(&[*tau, *eta])),
        SamplerSpec::Dry(d) => (
            "D10",
            non_finite(&[d.multiplier, d.base])
                || [d.allowed_length, d.last_n, d.n_ctx_train]
                    .into_iter()
                    .any(not_window),
        ),
        // NaN fails both comparisons, so it is refused too.
        SamplerSpec::AdaptiveP { target, decay, .. } => (
            "D11",
            non_finite(&[*target]) || !(*decay >= 0.0 && *decay <= 0.99),
        ),
    };
    bad.then_some(rule)
}

/// The vocabulary bound a built spec carries (the promise's "vocabulary bound" paragraph).
fn spec_bound(spec: &SamplerSpec) -> Option<i32> {
    match spec {
        SamplerSpec::Stage {
            stage: Stage::Penalties { .. } | Stage::LogitBias { .. },
            n_vocab,
            ..
        }
        | SamplerSpec::Mirostat { n_vocab, .. } => Some(*n_vocab),
        _ => None,
    }
}

fn bad_logit(x: f32) -> bool {
    x.is_nan() || x == INF
}

/// "More entries than the bound", for a bound of any sign.
fn more_than_bound(len: usize, bound: Option<i32>) -> bool {
    bound.is_some_and(|n| len as i64 > n as i64)
}

/// Rule A for `Sampler::apply`; `ProbeArray::new` is the same with no bound (rule F1).
fn array_refusal(entries: &[Candidate], selected: i64, bound: Option<i32>) -> Option<&'static str> {
    let mut ids: Vec<i32> = entries.iter().map(|c| c.id.0).collect();
    ids.sort_unstable();
    first(&[
        ("A1", entries.is_empty()),
        ("A2", entries.iter().any(|c| bad_logit(c.logit))),
        ("A3", ids.first().is_some_and(|&id| id < 0)),
        ("A4", ids.windows(2).any(|w| w[0] == w[1])),
        ("A5", bound.is_some_and(|n| ids.iter().any(|&id| id >= n))),
        ("A6", selected < -1 || selected >= entries.len() as i64),
    ])
}

/// Rule B for `Sampler::apply_in_id_order`.
fn row_refusal(row: &[f32], bound: Option<i32>) -> Option<&'static str> {
    first(&[
        ("B1", row.is_empty()),
        ("B2", row.iter().any(|&x| bad_logit(x))),
        ("B3", more_than_bound(row.len(), bound)),
    ])
}

/// Rule C for `Sampler::accept` (no grammar stages here, so no C3).
fn accept_refusal(id: i32, bound: Option<i32>) -> Option<&'static str> {
    first(&[("C1", id < 0), ("C2", bound.is_some_and(|n| id >= n))])
}

/// Rule G3 for `IdOrder::new`.
fn order_refusal(ids: &[i32]) -> Option<&'static str> {
    let n = ids.len();
    let mut seen = vec![false; n];
    for &id in ids {
        match usize::try_from(id).ok().filter(|&i| i < n) {
            Some(i) if !seen[i] => seen[i] = true,
            _ => return Some("G3"),
        }
    }
    (n == 0).then_some("G3")
}

// ---------------------------------------------------------------------------------------
// Bookkeeping.

#[derive(Default)]
struct Tally {
    /// Per entry point: generated, refused before C, sent to C and Ok, sent to C then Err,
    /// accepted by an entry point that never calls C.
    ops: BTreeMap<&'static str, [u64; 5]>,
    rules: BTreeMap<&'static str, u64>,
    /// Spec kinds built (accepted and sent to C).
    built: BTreeMap<&'static str, u64>,
    /// Arrays sent to C by `Sampler::apply`, by edge class, and the longest one.
    classes_to_c: BTreeMap<&'static str, u64>,
    longest_to_c: usize,
    /// Errors returned after a call into C, by message, with one example input.
    after_c: BTreeMap<String, (u64, String)>,
    trace: bool,
    case: u64,
}

impl Tally {
    /// Runs `call` (one call through the safe API) and checks it against the promise:
    /// `refuse` is the rule that must refuse it, or None. `reaches_c` says whether the entry
    /// point calls llama.cpp at all when it accepts.
    fn check<T>(
        &mut self,
        op: &'static str,
        refuse: Option<&'static str>,
        reaches_c: bool,
        input: &str,
        call: impl FnOnce() -> anyhow::Result<T>,
    ) -> Option<T> {
        let case = self.case;
        if self.trace {
            eprintln!("case {case} {op} [{}]: {input}", refuse.unwrap_or("-"));
        }
        let before = ffi_calls_on_this_thread();
        let out = call();
        let calls = ffi_calls_on_this_thread().wrapping_sub(before);
        let row = self.ops.entry(op).or_default();
        row[0] += 1;
        match (refuse, out) {
            (Some(rule), Err(_)) => {
                assert_eq!(
                    calls, 0,
                    "case {case}: {op} was refused (rule {rule}) after {calls} calls into \
                     llama.cpp: {input}"
                );
                row[1] += 1;
                *self.rules.entry(rule).or_default() += 1;
                None
            }
            (Some(rule), Ok(_)) => panic!(
                "case {case}: rule {rule} says {op} must be refused, but it returned Ok after \
                 {calls} calls into llama.cpp: {input}"
            ),
            (None, Ok(x)) if reaches_c => {
                let why = format!("case {case}: {op} returned Ok without calling llama.cpp");
                assert!(calls > 0, "{why}: {input}");
                row[2] += 1;
                Some(x)
            }
            (None, Ok(x)) => {
                assert_eq!(calls, 0, "case {case}: {op} called llama.cpp");
                row[4] += 1;
                Some(x)
            }
            (None, Err(e)) => {
                assert!(
                    reaches_c && calls > 0,
                    "case {case}: {op} was refused before llama.cpp ({e:#}) though no rule of \
                     the promise refuses it: {input}"
                );
                row[3] += 1;
                let example = || input.chars().take(120).collect();
                let entry = self.after_c.entry(format!("{op}: {e:#}"));
                entry.or_insert_with(|| (0, example())).0 += 1;
                None
            }
        }
    }
}

fn short(s: &str) -> String {
    if s.len() <= 300 {
        s.to_string()
    } else {
        format!("{}... ({} chars)", &s[..300], s.len())
    }
}

fn show_row(row: &[f32]) -> String {
    short(&format!("{} logits {row:?}", row.len()))
}

/// An array's Debug form, summarized above 64 entries (the case number reproduces it).
fn show_array(c: &Candidates) -> String {
    let (entries, selected, sorted) = (&c.entries, c.selected, c.sorted);
    if entries.len() <= 64 {
        format!("selected={selected} sorted={sorted} {entries:?}")
    } else {
        let (n, head) = (entries.len(), &entries[..4]);
        format!("selected={selected} sorted={sorted} {n} entries, first {head:?}")
    }
}

// ---------------------------------------------------------------------------------------
// Random inputs.

const F_EDGES: &[f32] = &[
    NAN, INF, -INF, 0.0, -0.0, MAX, -MAX, TINY, 1e-40, 1e30, -1e30, 1.0, -1.0, 0.5, 2.0, 1e-3,
];

fn uniform(rng: &mut Rng, lo: f32, hi: f32) -> f32 {
    let u = (rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
    lo + (hi - lo) * u
}

/// Mostly in `lo..hi`, one time in five an edge value (NaN, infinities, huge, tiny, zero).
fn fval(rng: &mut Rng, lo: f32, hi: f32) -> f32 {
    if rng.below(5) == 0 {
        *rng.pick(F_EDGES)
    } else {
        uniform(rng, lo, hi)
    }
}

fn ival(rng: &mut Rng, lo: i64, hi: i64) -> i32 {
    const EDGES: &[i32] = &[i32::MIN, -1, 0, 1, 2, WINDOW_MAX, WINDOW_MAX + 1, i32::MAX];
    if rng.below(6) == 0 {
        *rng.pick(EDGES)
    } else {
        rng.range(lo, hi) as i32
    }
}

fn uval(rng: &mut Rng, hi: i64) -> usize {
    const W: usize = WINDOW_MAX as usize;
    // 1 << 31 is one past i32::MAX.
    const EDGES: &[usize] = &[0, 1, W, W + 1, 1 << 31, usize::MAX];
    if rng.below(6) == 0 {
        *rng.pick(EDGES)
    } else {
        rng.range(0, hi) as usize
    }
}

fn vocab_size(rng: &mut Rng) -> i32 {
    const SIZES: &[i32] = &[i32::MIN, -1, 0, 1, 2, 5, 16, 64, 1000, 49152, i32::MAX];
    if rng.below(3) == 0 {
        *rng.pick(SIZES)
    } else {
        rng.range(1, 128) as i32
    }
}

/// A seed other than `u32::MAX` (LLAMA_DEFAULT_SEED, which draws a random seed and would make
/// the run irreproducible).
fn seed(rng: &mut Rng) -> u32 {
    (rng.next_u64() % u32::MAX as u64) as u32
}

fn random_stage(rng: &mut Rng, n_vocab: i32) -> Stage {
    match rng.below(23) {
        0 => Stage::Greedy,
        1 | 2 => Stage::TopK {
            k: ival(rng, -3, 200),
        },
        // top_p, min_p and typical take the same parameters.
        arm @ 3..=8 => {
            let (p, min_keep) = (fval(rng, -0.2, 1.2), uval(rng, 8));
            match arm {
                3 | 4 => Stage::TopP { p, min_keep },
                5 | 6 => Stage::MinP { p, min_keep },
                _ => Stage::Typical { p, min_keep },
            }
        }
        9 | 10 => Stage::Temp {
            t: fval(rng, -1.0, 3.0),
        },
        11 => Stage::TempExt {
            t: fval(rng, -1.0, 3.0),
            delta: fval(rng, -1.0, 1.0),
            exponent: fval(rng, -2.0, 3.0),
        },
        12 | 13 => Stage::Xtc {
            probability: if rng.below(2) == 0 {
                *rng.pick(&[0.0, 1.0])
            } else {
                fval(rng, -0.2, 1.2)
            },
            threshold: fval(rng, -0.2, 0.7),
            min_keep: uval(rng, 8),
        },
        14 => Stage::TopNSigma {
            n: fval(rng, -1.0, 4.0),
        },
        15 | 16 => {
            let n = n_vocab;
            let mut ids = vec![-1, i32::MIN, 0, n, n.saturating_sub(1), i32::MAX];
            let below = n.clamp(1, 200) as i64 - 1;
            ids.extend((0..3).map(|_| rng.range(0, below) as i32));
            let biases = (0..rng.below(5))
                .map(|_| (TokenId(*rng.pick(&ids)), fval(rng, -5.0, 5.0)))
                .collect();
            Stage::LogitBias { biases }
        }
        17..=21 => Stage::Penalties {
            last_n: WindowLen(uval(rng, 64)),
            params: PenaltyParams {
                repeat: if rng.below(8) == 0 {
                    *rng.pick(&[0.0, -0.0, -1.0, -TINY])
                } else {
                    fval(rng, 0.5, 2.0)
                },
                freq: fval(rng, -1.0, 1.0),
                present: fval(rng, -1.0, 1.0),
            },
        },
        _ => Stage::Dist { seed: seed(rng) },
    }
}

fn random_spec(rng: &mut Rng) -> SamplerSpec {
    let n_vocab = vocab_size(rng);
    let n = n_vocab;
    match rng.below(20) {
        0..=13 => SamplerSpec::Stage {
            stage: random_stage(rng, n_vocab),
            n_vocab,
            seed: seed(rng),
        },
        14 => SamplerSpec::Dist { seed: seed(rng) },
        15 => SamplerSpec::Mirostat {
            n_vocab,
            seed: seed(rng),
            tau: fval(rng, 0.0, 10.0),
            eta: fval(rng, 0.0, 1.0),
            m: *rng.pick(&[-1, 0, 1, 2, 100, n, n.saturating_add(1), i32::MAX]),
        },
        16 => SamplerSpec::MirostatV2 {
            seed: seed(rng),
            tau: fval(rng, 0.0, 10.0),
            eta: fval(rng, 0.0, 1.0),
        },
        17 | 18 => SamplerSpec::Dry(DryParams {
            multiplier: fval(rng, 0.0, 2.0),
            base: fval(rng, 0.5, 3.0),
            allowed_length: ival(rng, -1, 4),
            last_n: ival(rng, -1, 64),
            n_ctx_train: ival(rng, 0, 4096),
        }),
        _ => SamplerSpec::AdaptiveP {
            target: fval(rng, -0.5, 1.5),
            decay: if rng.below(3) == 0 {
                *rng.pick(&[-0.1, -0.0, 0.0, 0.99, 0.990_001, 1.0, NAN, INF])
            } else {
                uniform(rng, 0.0, 0.99)
            },
            seed: seed(rng),
        },
    }
}

fn spec_kind(spec: &SamplerSpec) -> &'static str {
    match spec {
        SamplerSpec::Stage { stage, .. } => stage.name(),
        SamplerSpec::Dist { .. } => "dist",
        SamplerSpec::Mirostat { .. } => "mirostat",
        SamplerSpec::MirostatV2 { .. } => "mirostat_v2",
        SamplerSpec::Dry(_) => "dry",
        SamplerSpec::AdaptiveP { .. } => "adaptive_p",
    }
}

/// An id the sampler may or may not know: mostly below its bound, sometimes at or past it,
/// negative or extreme.
fn random_id(rng: &mut Rng, bound: Option<i32>) -> i32 {
    let b = bound.unwrap_or(64);
    match rng.below(10) {
        0 => *rng.pick(&[-1, i32::MIN, b, b.saturating_add(1), i32::MAX]),
        _ => rng.range(0, (b.clamp(1, 1 << 16) - 1) as i64) as i32,
    }
}

/// The edge classes of `random_array`, by number (the ones past 16 are plain arrays).
const CLASSES: &[&str] = &[
    "empty",
    "one entry",
    "all -inf",
    "some -inf",
    "a NaN",
    "a +inf",
    "equal logits",
    "a repeated id",
    "a negative id",
    "an id past the bound",
    "shuffled ids",
    "huge (20k..150k)",
    "selected out of range",
    "selected in range",
    "sparse ids",
    "huge finite logits",
    "stale sorted flag",
];

/// A candidate array of one of the edge classes the promise names (or a plain one), with
/// its class's name.
fn random_array(rng: &mut Rng, bound: Option<i32>) -> (Candidates, &'static str) {
    let class = rng.below(20);
    let mut n = match rng.below(10) {
        0 => 1,
        1..=6 => rng.range(2, 40) as usize,
        _ => rng.range(40, 400) as usize,
    };
    if class == 11 {
        n = rng.range(20_000, 150_000) as usize;
    }
    // Mostly keep the ids inside the bound, so that most arrays reach C.
    let positive = bound.filter(|&b| b > 0);
    if let Some(b) = positive {
        if rng.below(5) != 0 {
            n = n.min(b as usize);
        }
    }
    let mut ids: Vec<i32> = if class == 14 {
        // Sparse distinct ids.
        let mut all: Vec<i32> = (0..(n as i32).saturating_mul(8).max(8)).collect();
        rng.shuffle(&mut all);
        all.truncate(n);
        if let Some(b) = positive {
            all.retain(|&id| id < b);
            if all.is_empty() {
                all.push(0);
            }
        }
        all
    } else {
        (0..n as i32).collect()
    };
    if class == 10 || rng.below(2) == 0 {
        rng.shuffle(&mut ids);
    }
    let mut entries: Vec<Candidate> = ids
        .iter()
        .map(|&id| Candidate {
            id: TokenId(id),
            logit: uniform(rng, -10.0, 10.0),
            p: if rng.below(20) == 0 {
                *rng.pick(F_EDGES)
            } else {
                0.0
            },
        })
        .collect();
    let len = entries.len();
    let mut selected = -1i64;
    let mut sorted = false;
    match class {
        0 => entries.clear(),
        1 => entries.truncate(1),
        2 => entries.iter_mut().for_each(|c| c.logit = -INF),
        3 => {
            for _ in 0..rng.range(1, len as i64) {
                entries[rng.below(len)].logit = -INF;
            }
        }
        4 => entries[rng.below(len)].logit = NAN,
        5 => entries[rng.below(len)].logit = INF,
        6 => {
            let v = uniform(rng, -5.0, 5.0);
            entries.iter_mut().for_each(|c| c.logit = v);
        }
        7 => {
            let (i, j) = (rng.below(len), rng.below(len));
            entries[i].id = entries[j].id;
            if len == 1 {
                entries.push(entries[0]);
            }
        }
        8 => entries[rng.below(len)].id = TokenId(*rng.pick(&[-1, -2, i32::MIN])),
        9 => {
            let b = bound.unwrap_or(1 << 20);
            let past = [b, b.saturating_add(1), b.saturating_add(1000), i32::MAX];
            entries[rng.below(len)].id = TokenId(*rng.pick(&past));
        }
        12 => selected = *rng.pick(&[-2, len as i64, len as i64 + 5, i64::MAX, i64::MIN]),
        13 => selected = rng.below(len) as i64,
        15 => {
            for _ in 0..rng.range(1, 3) {
                entries[rng.below(len)].logit = *rng.pick(&[MAX, -MAX, 1e38, -1e38, 1e30]);
            }
        }
        16 => sorted = true,
        _ => {}
    }
    if rng.below(8) == 0 {
        sorted = !sorted;
    }
    let c = Candidates {
        entries,
        sorted,
        selected,
    };
    (c, CLASSES.get(class).copied().unwrap_or("plain"))
}

fn random_row(rng: &mut Rng, bound: Option<i32>) -> Vec<f32> {
    let mut n = match rng.below(12) {
        0 => 0,
        1 => rng.range(20_000, 100_000) as usize,
        _ => rng.range(1, 300) as usize,
    };
    if let Some(b) = bound.filter(|&b| b > 0) {
        if rng.below(5) != 0 {
            n = n.min(b as usize);
        }
    }
    let mut row: Vec<f32> = (0..n).map(|_| uniform(rng, -10.0, 10.0)).collect();
    if n > 0 && rng.below(6) == 0 {
        let i = rng.below(n);
        row[i] = *rng.pick(&[NAN, INF, -INF, MAX, -MAX]);
    }
    row
}

/// A Rust stage for the chains: adds `shift` to every logit and may claim the array sorted.
#[derive(Clone, Copy)]
struct Nudge {
    shift: f32,
    claim_sorted: bool,
}

impl CustomSampler for Nudge {
    fn name(&self) -> &'static CStr {
        c"nudge"
    }

    fn apply(&mut self, view: &mut ArrayView<'_>) {
        for i in 0..view.len() {
            let l = view.logit(i);
            view.set_logit(i, l + self.shift);
        }
        if self.claim_sorted {
            view.set_sorted(true);
        }
    }

    fn clone_sampler(&self) -> Box<dyn CustomSampler> {
        Box::new(*self)
    }
}

// ---------------------------------------------------------------------------------------
// The run.

/// The stages of one case: a few random specs built, and sometimes a Rust stage among them,
/// each with the vocabulary bound it carries.
fn random_stages(t: &mut Tally, rng: &mut Rng) -> (Vec<Sampler>, Vec<Option<i32>>) {
    let (mut stages, mut bounds) = (Vec::new(), Vec::new());
    for _ in 0..rng.below(5) {
        let spec = random_spec(rng);
        let shown = format!("{spec:?}");
        let built = t.check(
            "SamplerSpec::build",
            spec_refusal(&spec),
            true,
            &shown,
            || spec.build(),
        );
        if let Some(s) = built {
            *t.built.entry(spec_kind(&spec)).or_default() += 1;
            stages.push(s);
            bounds.push(spec_bound(&spec));
        }
    }
    if rng.below(5) == 0 {
        let nudge = Nudge {
            shift: uniform(rng, -2.0, 2.0),
            claim_sorted: rng.below(2) == 0,
        };
        let n = (rng.below(3) == 0).then(|| vocab_size(rng));
        let (shift, claim) = (nudge.shift, nudge.claim_sorted);
        let shown = format!("shift={shift} claim_sorted={claim} n_vocab={n:?}");
        let built = t.check("Sampler::custom", None, true, &shown, || match n {
            Some(n) => Sampler::custom_for_vocab(nudge, n),
            None => Sampler::custom(nudge),
        });
        let at = rng.below(stages.len() + 1);
        stages.insert(at, built.expect("a custom sampler is never refused"));
        bounds.insert(at, n);
    }
    (stages, bounds)
}

/// One case: a sampler (a chain, a lone stage, or nothing but a Rust stage), then a random
/// sequence of calls on it.
fn run_case(t: &mut Tally, rng: &mut Rng) {
    let (mut stages, bounds) = random_stages(t, rng);
    let bound = bounds.iter().flatten().min().copied();
    let mut sampler = if stages.len() == 1 && rng.below(3) == 0 {
        stages.pop().unwrap()
    } else {
        let shown = format!("{} stages", stages.len());
        t.check("Sampler::chain", None, true, &shown, || {
            Sampler::chain(stages)
        })
        .expect("a chain is never refused")
    };

    // What the last apply left, to hand back to C (rule A applies to it as to any array).
    let mut left: Option<Candidates> = None;
    let mut logits = LogitsArray::new();
    for _ in 0..rng.range(1, 10) {
        match rng.below(12) {
            0..=3 => {
                let (mut c, class) = match left.take() {
                    Some(c) if rng.below(3) == 0 => (c, "left by the last apply"),
                    _ => random_array(rng, bound),
                };
                let refuse = array_refusal(&c.entries, c.selected, bound);
                let (shown, len) = (show_array(&c), c.len());
                let done = t.check("Sampler::apply", refuse, true, &shown, || {
                    sampler.apply(&mut c)
                });
                if done.is_some() {
                    *t.classes_to_c.entry(class).or_default() += 1;
                    t.longest_to_c = t.longest_to_c.max(len);
                    left = Some(c);
                }
            }
            4 | 5 => {
                let id = random_id(rng, bound);
                let refuse = accept_refusal(id, bound);
                t.check("Sampler::accept", refuse, true, &format!("{id}"), || {
                    sampler.accept(TokenId(id))
                });
            }
            6 => {
                let row = random_row(rng, bound);
                let refuse = row_refusal(&row, bound);
                t.check(
                    "Sampler::apply_in_id_order",
                    refuse,
                    true,
                    &show_row(&row),
                    || sampler.apply_in_id_order(&row),
                );
            }
            7 => {
                let (c, _) = random_array(rng, bound);
                let refuse = array_refusal(&c.entries, c.selected, None).map(|_| "F1");
                let shown = show_array(&c);
                let probe = t.check("ProbeArray::new", refuse, false, &shown, || {
                    ProbeArray::new(&c)
                });
                if let Some(mut probe) = probe {
                    let max_id = c.entries.iter().map(|e| e.id.0).max().unwrap_or(0);
                    let refuse = bound.is_some_and(|n| max_id >= n).then_some("F2");
                    t.check("ProbeArray::run", refuse, true, &shown, || {
                        probe.run(&mut sampler)
                    });
                }
            }
            8 | 9 => {
                let row = random_row(rng, bound);
                load_logits(t, rng, &mut logits, &row);
                // One apply, or two without a reload between them.
                for _ in 0..rng.range(1, 2) {
                    let refuse =
                        (logits.is_empty() || more_than_bound(logits.len(), bound)).then_some("G4");
                    let state = format!("{} entries loaded, bound {bound:?}", logits.len());
                    t.check("LogitsArray::apply", refuse, true, &state, || {
                        logits.apply(&mut sampler)
                    });
                }
            }
            10 => {
                let copy = t.check("Sampler::try_clone", None, true, "", || sampler.try_clone());
                if let Some(copy) = copy {
                    if rng.below(2) == 0 {
                        sampler = copy;
                    }
                }
            }
            _ => {
                t.check("Sampler::reset", None, true, "", || {
                    sampler.reset();
                    Ok(())
                });
            }
        }
    }
}

/// `row` into `logits`, in id order or in a random (sometimes broken) order of its ids.
fn load_logits(t: &mut Tally, rng: &mut Rng, logits: &mut LogitsArray, row: &[f32]) {
    let shown = show_row(row);
    let refuse = (row.is_empty() || row.iter().any(|&x| bad_logit(x))).then_some("G1");
    if rng.below(2) == 0 {
        t.check("LogitsArray::load", refuse, false, &shown, || {
            logits.load(row)
        });
        return;
    }
    let mut ids: Vec<i32> = (0..row.len() as i32).collect();
    rng.shuffle(&mut ids);
    match rng.below(6) {
        0 => ids.push(ids.len() as i32),
        1 if !ids.is_empty() => ids[0] = -1,
        2 if ids.len() > 1 => ids[1] = ids[0],
        3 => {
            ids.pop();
        }
        _ => {}
    }
    let order_ids: Vec<TokenId> = ids.iter().map(|&i| TokenId(i)).collect();
    let shown_ids = short(&format!("{ids:?}"));
    let order = t.check(
        "IdOrder::new",
        order_refusal(&ids),
        false,
        &shown_ids,
        || IdOrder::new(&order_ids),
    );
    if let Some(order) = order {
        let refuse = (refuse.is_some() || ids.len() != row.len()).then_some("G2");
        t.check("LogitsArray::load_in", refuse, false, &shown, || {
            logits.load_in(row, &order)
        });
    }
}

#[test]
fn refused_inputs_never_reach_c_and_the_rest_do() {
    assert_eq!(WINDOW_MAX, subject::MAX_WINDOW, "the promise says 2^20");
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let cases = env("PROMISE_FUZZ_CASES").unwrap_or(CASES);
    let first = env("PROMISE_FUZZ_FIRST").unwrap_or(0);
    let mut t = Tally {
        trace: std::env::var_os("PROMISE_FUZZ_TRACE").is_some(),
        ..Tally::default()
    };
    let start = std::time::Instant::now();
    for case in first..first + cases {
        t.case = case;
        // One generator per case, so any case can be rerun alone.
        let mut rng = Rng::new(SEED ^ case.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        run_case(&mut t, &mut rng);
    }

    let total = |k: usize| t.ops.values().map(|r| r[k]).sum::<u64>();
    let end = first + cases;
    println!("promise fuzz: seed {SEED:#x}, cases {first}..{end}");
    let head = ["generated", "refused", "to C ok", "to C err", "no C"];
    println!(
        "{:<28} {}",
        "entry point",
        head.map(|h| format!("{h:>9}")).join(" ")
    );
    for (op, r) in &t.ops {
        println!("{op:<28} {}", r.map(|n| format!("{n:>9}")).join(" "));
    }
    println!(
        "inputs generated {}, refused before C {}, sent to C {} ({} of them Err after C), \
         accepted by entry points that never call C {}",
        total(0),
        total(1),
        total(2) + total(3),
        total(3),
        total(4)
    );
    println!("refusals by rule: {:?}", t.rules);
    println!("specs built by kind: {:?}", t.built);
    println!(
        "arrays through Sampler::apply to C by class: {:?}; the longest had {} entries",
        t.classes_to_c, t.longest_to_c
    );
    for (msg, (n, example)) in &t.after_c {
        println!("Err after C, {n}x: {msg} (e.g. {example})");
    }
    eprintln!("promise fuzz took {:.1?}", start.elapsed());

    if cases < CASES {
        return;
    }
    // The generator must keep reaching every rule and every kind of sampler.
    let count = |m: &BTreeMap<&str, u64>, k: &str| m.get(k).copied().unwrap_or(0);
    for rule in RULES {
        assert!(count(&t.rules, rule) > 0, "no input hit rule {rule}");
    }
    // Every llama.cpp stage of the table, and the samplers outside it the fuzzer builds.
    let stages = STAGES
        .iter()
        .filter(|r| matches!(r.parser, Parser::Llama(_)));
    let others = ["mirostat", "mirostat_v2", "dry", "adaptive_p"];
    for kind in stages.map(|r| r.name).chain(others) {
        assert!(count(&t.built, kind) > 0, "no {kind} was built");
    }
    for class in [
        "one entry",
        "all -inf",
        "some -inf",
        "equal logits",
        "shuffled ids",
        "huge (20k..150k)",
        "selected in range",
        "sparse ids",
        "huge finite logits",
        "stale sorted flag",
        "left by the last apply",
    ] {
        let n = count(&t.classes_to_c, class);
        assert!(n > 0, "no array of class '{class}' reached C");
    }
    assert!(total(2) > total(1), "most inputs should reach C");
}
