//! `ledger-penalties`: llama.cpp's penalties stage with a complete ledger.

use anyhow::Result;
use llama_cpp_sys_2 as sys;
use oracle::penalty::PenaltyParams;
use oracle::window::WindowLen;
use oracle::TokenId;
use std::ffi::CStr;
use subject::{ArrayView, CustomSampler, Sampler, SamplerSpec};

/// What the penalty acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// llama.cpp's arithmetic on the raw logits, bit for bit: sign-branched repeat factor, then
    /// `count * freq + present`.
    Default,
    /// The repeat factor on log-probabilities: a seen id's `z` becomes
    /// `lse + theta * (z - lse)` (`lse` = log-sum-exp of the array), then the same `freq` and
    /// `present` terms. Independent of the logits' zero point.
    Normalized,
    /// The repeat factor as a subtraction: a seen id's `z` becomes `z - ln(theta)` (the log
    /// taken in f64, rounded once to f32), then the same `freq` and `present` terms. A
    /// constant cut on the log-probability scale, so independent of the zero point too.
    Subtractive,
}

/// The same knobs as `llama_sampler_init_penalties` (in the oracle's types), and the mode.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PenaltyConfig {
    pub n_vocab: i32,
    pub last_n: WindowLen,
    pub params: PenaltyParams,
    pub mode: Mode,
}

impl PenaltyConfig {
    /// A repeat factor `theta` over the last `last_n` tokens, frequency and presence off (the
    /// setting F3 and F4 study).
    pub fn repeat_only(n_vocab: i32, last_n: WindowLen, theta: f32, mode: Mode) -> PenaltyConfig {
        PenaltyConfig {
            n_vocab,
            last_n,
            params: PenaltyParams {
                repeat: theta,
                freq: 0.0,
                present: 0.0,
            },
            mode,
        }
    }

    /// llama.cpp's own penalties stage with the same knobs (what `Mode::Default` imitates).
    pub fn builtin(&self) -> SamplerSpec {
        SamplerSpec::penalties(self.n_vocab, self.last_n, self.params)
    }
}

/// Which penalties stage a repro runs: llama.cpp's built-in one, or [`ledger_penalties`] in
/// the mode its [`PenaltyConfig`] names. The one switch every repro and the bench use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SamplerKind {
    #[default]
    Builtin,
    LedgerPenalties,
}

impl SamplerKind {
    /// The name on the command line (`--sampler builtin|ledger`) and in report names.
    pub fn as_str(self) -> &'static str {
        match self {
            SamplerKind::Builtin => "builtin",
            SamplerKind::LedgerPenalties => "ledger",
        }
    }

    /// This kind's stage for `cfg` (the builtin ignores `cfg.mode`).
    pub fn build(self, cfg: PenaltyConfig) -> Result<Sampler> {
        match self {
            SamplerKind::Builtin => cfg.builtin().build(),
            SamplerKind::LedgerPenalties => ledger_penalties(cfg),
        }
    }
}

/// The ledger: a ring of the last `last_n` accepted ids, dense counts, and the list of ids
/// with a non-zero count (with each id's slot in it, for O(1) removal). Everything is sized
/// once; accept and apply never allocate.
#[derive(Clone)]
struct Ledger {
    cfg: PenaltyConfig,
    /// `ln(repeat)` rounded to f32 (Subtractive mode).
    ln_repeat: f32,
    ring: Vec<i32>,
    head: usize,
    len: usize,
    counts: Vec<u32>,
    distinct: Vec<i32>,
    slot: Vec<u32>,
    /// Positions touched by the last apply (for the sorted check), reused.
    touched: Vec<usize>,
}

const NO_SLOT: u32 = u32::MAX;

impl Ledger {
    fn new(cfg: PenaltyConfig) -> Ledger {
        let n = cfg.n_vocab as usize;
        let w = cfg.last_n.0;
        Ledger {
            cfg,
            ln_repeat: (cfg.params.repeat as f64).ln() as f32,
            ring: vec![0; w],
            head: 0,
            len: 0,
            counts: vec![0; n],
            distinct: Vec::with_capacity(w.min(n)),
            slot: vec![NO_SLOT; n],
            touched: Vec::with_capacity(w.min(n)),
        }
    }

    fn disabled(&self) -> bool {
        let c = &self.cfg.params;
        self.cfg.last_n.0 == 0 || (c.repeat == 1.0 && c.freq == 0.0 && c.present == 0.0)
    }

    fn add(&mut self, id: usize) {
        self.counts[id] += 1;
        if self.counts[id] == 1 {
            self.slot[id] = self.distinct.len() as u32;
            self.distinct.push(id as i32);
        }
    }

    fn remove(&mut self, id: usize) {
        self.counts[id] -= 1;
        if self.counts[id] == 0 {
            let s = self.slot[id] as usize;
            self.distinct.swap_remove(s);
            if let Some(&moved) = self.distinct.get(s) {
                self.slot[moved as usize] = s as u32;
            }
            self.slot[id] = NO_SLOT;
        }
    }

    /// Ids outside the vocabulary are ignored (llama.cpp would count them, but no candidate
    /// can carry them).
    fn accept(&mut self, id: i32) {
        let w = self.ring.len();
        if w == 0 || id < 0 || id >= self.cfg.n_vocab {
            return;
        }
        if self.len == w {
            let old = self.ring[self.head] as usize;
            self.remove(old);
            self.ring[self.head] = id;
            self.head = (self.head + 1) % w;
        } else {
            self.ring[(self.head + self.len) % w] = id;
            self.len += 1;
        }
        self.add(id as usize);
    }

    fn reset(&mut self) {
        for &id in &self.distinct {
            self.counts[id as usize] = 0;
            self.slot[id as usize] = NO_SLOT;
        }
        self.distinct.clear();
        self.head = 0;
        self.len = 0;
    }

    /// llama.cpp's per-candidate arithmetic, in f32 and in the same order.
    fn penalize(&self, logit: f32, count: u32, lse: f32) -> f32 {
        let c = &self.cfg.params;
        let scaled = match self.cfg.mode {
            Mode::Default => {
                if logit <= 0.0 {
                    logit * c.repeat
                } else {
                    logit / c.repeat
                }
            }
            Mode::Normalized => lse + c.repeat * (logit - lse),
            Mode::Subtractive => logit - self.ln_repeat,
        };
        scaled - (count as f32 * c.freq + (count > 0) as u32 as f32 * c.present)
    }

    /// Penalizes the seen ids in `data`; false when the array was flagged `sorted` and may no
    /// longer be.
    fn apply_to(&mut self, data: &mut [sys::llama_token_data], sorted: bool) -> bool {
        if self.disabled() || self.distinct.is_empty() || data.is_empty() {
            return true;
        }
        let lse = match self.cfg.mode {
            Mode::Default | Mode::Subtractive => 0.0,
            Mode::Normalized => log_sum_exp(data),
        };
        self.touched.clear();
        // Fast path: every seen id sits at its own index (an id-ordered array).
        let direct = self.distinct.iter().all(|&id| {
            let i = id as usize;
            i < data.len() && data[i].id == id
        });
        if direct {
            for k in 0..self.distinct.len() {
                let i = self.distinct[k] as usize;
                data[i].logit = self.penalize(data[i].logit, self.counts[i], lse);
                self.touched.push(i);
            }
        } else {
            // One pass with a dense lookup, no hashing.
            for (i, d) in data.iter_mut().enumerate() {
                if let Some(&n) = usize::try_from(d.id)
                    .ok()
                    .and_then(|id| self.counts.get(id))
                {
                    if n > 0 {
                        d.logit = self.penalize(d.logit, n, lse);
                        self.touched.push(i);
                    }
                }
            }
        }
        // Only touched entries moved, so the array is still sorted iff each touched entry is
        // in order with its neighbours.
        !sorted
            || self.touched.iter().all(|&i| {
                (i == 0 || data[i - 1].logit >= data[i].logit)
                    && (i + 1 >= data.len() || data[i].logit >= data[i + 1].logit)
            })
    }
}

/// `max + ln(sum exp(z - max))` over the array, with a short polynomial exp in 8 independent
/// lanes so the pass vectorizes. The result is within about 1e-6 of the exact value; it feeds
/// only the seen ids' shift, identically for all of them.
fn log_sum_exp(data: &[sys::llama_token_data]) -> f32 {
    let max = data.iter().fold(f32::NEG_INFINITY, |m, d| m.max(d.logit));
    if !max.is_finite() {
        return max;
    }
    let mut lanes = [0.0f32; 8];
    let chunks = data.chunks_exact(8);
    let rest = chunks.remainder();
    for c in chunks {
        for k in 0..8 {
            lanes[k] += fast_exp(c[k].logit - max);
        }
    }
    let mut sum: f64 = lanes.iter().map(|&x| x as f64).sum();
    for d in rest {
        sum += fast_exp(d.logit - max) as f64;
    }
    max + (sum as f32).ln()
}

/// `e^x` for `x <= 0` (about 0 below -87): 2^(x log2 e) split into the nearest integer and a
/// fraction in [-1/2, 1/2], the fraction by its degree-6 Taylor polynomial. Relative error
/// below `3e-7 + 1e-7 |x|` (the second term is the f32 rounding of `x log2 e`); the terms far
/// below the maximum, where it grows, barely move the sum.
fn fast_exp(x: f32) -> f32 {
    let x = x.max(-87.0);
    let t = x * std::f32::consts::LOG2_E;
    // Round to nearest without a libm call (so the loop vectorizes): adding 1.5 * 2^23 pushes
    // the fraction bits out of an f32, subtracting it back leaves the rounded value.
    const MAGIC: f32 = 12_582_912.0;
    let i = (t + MAGIC) - MAGIC;
    let f = t - i;
    let p = 1.0
        // LN_2 is the f32 that 0.693_147_2 rounds to (same bits).
        + f * (std::f32::consts::LN_2
            + f * (0.240_226_5
                + f * (0.055_504_11
                    + f * (0.009_618_129 + f * (0.001_333_355 + f * 0.000_154_035_3)))));
    f32::from_bits(((i as i32 + 127) as u32) << 23) * p
}

impl CustomSampler for Ledger {
    fn name(&self) -> &'static CStr {
        c"ledger-penalties"
    }

    fn apply(&mut self, view: &mut ArrayView<'_>) {
        let sorted = view.sorted();
        if !self.apply_to(view.entries_mut(), sorted) {
            view.set_sorted(false);
        }
    }

    fn accept(&mut self, id: TokenId) {
        Ledger::accept(self, id.0);
    }

    fn reset(&mut self) {
        Ledger::reset(self);
    }

    /// The whole ledger: window, counts and distinct list.
    fn clone_sampler(&self) -> Box<dyn CustomSampler> {
        Box::new(self.clone())
    }
}

/// A new `ledger-penalties` stage. Parameters are checked as for llama.cpp's own stage.
pub fn ledger_penalties(cfg: PenaltyConfig) -> Result<Sampler> {
    cfg.builtin().validate()?;
    Sampler::custom_for_vocab(Ledger::new(cfg), cfg.n_vocab)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_exp_is_close() {
        for k in 0..2000 {
            let x = -(k as f32) * 0.043;
            let (a, b) = (fast_exp(x) as f64, (x as f64).exp());
            assert!(
                (a - b).abs() <= (3e-7 + 1e-7 * x.abs() as f64) * b + 1e-38,
                "x {x}: {a} vs {b}"
            );
        }
    }
}
