//! `temp_ext`'s dynamic temperature (`delta > 0`): how far the graph's scaled logits may lie
//! from the CPU's, and the CPU's from the oracle's, when the two paths compute the same
//! formula and differ only in rounding and in the graph's clamp of the probabilities. The
//! derivation, with the lines of llama.cpp it rests on, is in docs/findings/F8.md ("temp_ext:
//! where the two implementations differ"); this module computes its bound for one input.
//!
//! The judged quantity is the relative difference of each survivor's scaled logit, which is
//! the relative difference of the two temperatures (each path divides the same logit by its
//! own, once). A formula that differs (another `max_entropy`, another branch) moves the
//! temperature by far more than the bound; a difference within it is rounding and clamp.

use oracle::stage::Stage;
use oracle::truncation::{compose, Pool};
use oracle::TokenId;
use serde::Serialize;
use std::collections::BTreeMap;

/// f32's unit roundoff, 2^-24: a correctly rounded f32 operation is off by at most this much,
/// relatively.
const U: f64 = 1.0 / 16_777_216.0;

/// The floor llama.cpp's graph clamps each probability to before `p log p`
/// (`ggml_clamp(ctx, probs, 1e-10f, 1.0f)`), as the f32 it is.
const CLAMP_FLOOR: f64 = 1e-10_f32 as f64;

/// How finely a measured relative difference of two f32 logits is known: two ulps of the
/// CPU's logit (an ulp is at most 2^-23 of a normal value).
const TWO_ULPS: f64 = 1.0 / 4_194_304.0;

/// One dynamic `temp_ext` on one input: what its bound rests on and the bound.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Derivation {
    /// Entries of the CPU's array (its `size`, `-inf` entries included).
    pub size: usize,
    /// The entropy of the input's softmax, in nats, and `ln size` (exact, f64).
    pub entropy: f64,
    pub max_entropy: f64,
    /// The oracle's dynamic temperature (exact), or `None` when the CPU leaves the array as it
    /// is (one entry) or keeps only its top entry (a temperature of 0).
    pub temperature: Option<f64>,
    /// Bound on one path's rounding error of the entropy (absolute, nats).
    pub rounding: f64,
    /// Bound on what the graph's clamp adds to the entropy (nats): each probability below
    /// 1e-10, the `-inf` entries of the graph's tensor among them, counts as 1e-10.
    pub clamp: f64,
    /// Bound on the entropy difference the inputs' own allowed difference makes (nats).
    pub input: f64,
    /// The allowed relative difference of a scaled logit: graph against CPU, CPU against
    /// oracle.
    pub graph_cpu: f64,
    pub cpu_oracle: f64,
}

/// The allowed relative differences of a chain's final logits, where the chain holds a
/// dynamic `temp_ext`: the last such stage's derivation, and the bounds carried to the end.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Allowed {
    pub derivation: Derivation,
    /// Infinite where a stage after it adds to the logits (the relative bound does not carry
    /// through a sum).
    pub graph_cpu: f64,
    pub cpu_oracle: f64,
    /// The input logits of that stage (the oracle's), to read each path's temperature from.
    #[serde(skip)]
    pub input: BTreeMap<TokenId, f32>,
}

/// Where a measured relative difference lies against its bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Reading {
    /// Below the bound by more than its rounding margin (or exactly 0): rounding and clamp
    /// alone can make it.
    Within,
    /// Within the rounding margin of the bound, either side: undecided.
    Margin,
    /// Above the bound by more than its margin: the two paths compute different temperatures.
    Beyond,
}

/// `limit`'s rounding margin: two ulps of the compared logits, and the second-order terms a
/// first-order derivation drops (at most `limit²`).
pub fn margin(limit: f64) -> f64 {
    TWO_ULPS + limit * limit
}

/// Reads `measured` against `limit`. An infinite limit is one the derivation could not give
/// (a temperature whose range reaches 0, a sum after the stage): only an exact copy is decided.
pub fn read(measured: f64, limit: f64) -> Reading {
    if measured == 0.0 {
        Reading::Within
    } else if !limit.is_finite() || (measured - limit).abs() <= margin(limit) {
        Reading::Margin
    } else if measured < limit {
        Reading::Within
    } else {
        Reading::Beyond
    }
}

/// The allowed relative difference a stage adds where the graph multiplies by `fl(1/t)` and
/// the CPU divides by `t`: both are within half an ulp of `l / t` up to the reciprocal's own
/// rounding, so at most one ulp (2^-23 of the value) apart; none for a power of two.
fn temp_step(t: f32) -> f64 {
    if t > 0.0 && t.to_bits() & 0x007f_ffff != 0 {
        2.0 * U
    } else {
        0.0
    }
}

/// The allowed relative differences after `stages` over `pool` (after `history`), if the
/// chain holds a dynamic `temp_ext`. `graph_masked` counts the `-inf` entries of the graph's
/// tensor (at the end of its chain, so at least as many as at the stage: a bound that counts
/// more is looser, never wrong).
pub fn allowed(
    stages: &[Stage],
    pool: &Pool,
    history: &[TokenId],
    graph_masked: usize,
) -> Option<Allowed> {
    let (mut graph_cpu, mut cpu_oracle) = (0.0f64, 0.0f64);
    let mut out: Option<Allowed> = None;
    for (i, s) in stages.iter().enumerate() {
        match s {
            Stage::TempExt { t, delta, exponent } if *delta > 0.0 => {
                let input = compose(&stages[..i], pool, history).pool;
                let d = derive(
                    &input,
                    *t,
                    *delta,
                    *exponent,
                    graph_cpu,
                    cpu_oracle,
                    graph_masked,
                );
                graph_cpu = d.graph_cpu;
                cpu_oracle = d.cpu_oracle;
                out = Some(Allowed {
                    derivation: d,
                    graph_cpu,
                    cpu_oracle,
                    input: (input.entries().iter()).map(|e| (e.id, e.logit)).collect(),
                });
            }
            Stage::TempExt { t, .. } | Stage::Temp { t } => graph_cpu += temp_step(*t),
            // Adding to a logit that already differs can cancel: no relative bound survives.
            Stage::LogitBias { .. } | Stage::Penalties { .. } => {
                if graph_cpu > 0.0 || cpu_oracle > 0.0 {
                    graph_cpu = f64::INFINITY;
                    cpu_oracle = f64::INFINITY;
                }
            }
            // These keep or mask entries and copy the logits they keep.
            Stage::TopK { .. }
            | Stage::TopP { .. }
            | Stage::MinP { .. }
            | Stage::Typical { .. }
            | Stage::Xtc { .. }
            | Stage::TopNSigma { .. }
            | Stage::Greedy
            | Stage::Dist { .. } => {}
        }
        if let Some(a) = out.as_mut() {
            a.graph_cpu = graph_cpu;
            a.cpu_oracle = cpu_oracle;
        }
    }
    out
}

/// The bound for `temp_ext(t, delta, exponent)`, `delta > 0`, over `input` (the CPU's array
/// as the oracle has it), when the graph's input may differ from the CPU's by `eps_gc` and
/// the CPU's from the oracle's by `eps_co` (relative, per logit).
pub fn derive(
    input: &Pool,
    t: f32,
    delta: f32,
    exponent: f32,
    eps_gc: f64,
    eps_co: f64,
    graph_masked: usize,
) -> Derivation {
    let n = input.len();
    let entries = input.entries();
    let probs = input.probabilities();
    let finite: Vec<(f64, f64)> = (entries.iter().zip(&probs))
        .filter(|(e, _)| e.logit > f32::NEG_INFINITY)
        .map(|(e, &p)| (e.logit as f64, p))
        .collect();
    let h = |p: f64| if p > 0.0 { -p * p.ln() } else { 0.0 };
    // (+ 0.0 turns the -0 of a lone p = 1 into 0.)
    let entropy: f64 = finite.iter().map(|&(_, p)| h(p)).sum::<f64>() + 0.0;
    let max_entropy = (n.max(1) as f64).ln();
    // The CPU's own f32 ends of the range, which both paths use as they are.
    let lo = (t - delta).max(0.0);
    let w = ((t + delta) - lo) as f64;
    let lo = lo as f64;
    let exact = |r: f64| lo + w * r.powf(exponent as f64);
    let temperature = (n > 1)
        .then(|| exact(entropy / max_entropy))
        .filter(|&x| x > 0.0);
    let Some(temp) = temperature else {
        // One entry (left alone) or a temperature of 0 (the top entry kept as it is): both
        // paths copy the logit they keep.
        return Derivation {
            size: n,
            entropy,
            max_entropy,
            temperature,
            rounding: 0.0,
            clamp: 0.0,
            input: 0.0,
            graph_cpu: eps_gc,
            cpu_oracle: eps_co,
        };
    };
    let max = finite.first().map_or(0.0, |&(l, _)| l);
    // The softmax's normalizing sum: each addition off by at most min(u S, the term), each
    // term off by the rounding of `l - max` (u |l - max| in the exponent), exp's own (2 ulps)
    // and the subtraction's.
    let sum_err: f64 = (finite.iter())
        .map(|&(l, p)| p.min(U) + p * U * ((l - max).abs() + 4.0))
        .sum();
    // One path's entropy: each p off by the sum's error and its own exponent (as above) and
    // the division or multiplication by the sum's reciprocal; log (2 ulps) and the product;
    // each addition of the sum off by at most min(u H, the term), in any order; terms whose
    // probability is subnormal or 0 in f32 can be lost whole; the final scale or negation.
    let rounding: f64 = (finite.iter())
        .map(|&(l, p)| {
            let eps_p = sum_err + U * ((l - max).abs() + 6.0);
            let lost = if p < f32::MIN_POSITIVE as f64 {
                h(p) + 1e-44
            } else {
                0.0
            };
            p * (p.ln() + 1.0).abs() * eps_p + 5.0 * U * h(p) + (U * entropy).min(h(p)) + lost
        })
        .sum::<f64>()
        + U * entropy;
    // The graph's clamp: a probability below the floor counts as the floor.
    let floor_term = h(CLAMP_FLOOR);
    let clamp: f64 = (finite.iter())
        .filter(|&&(_, p)| p < CLAMP_FLOOR)
        .map(|&(_, p)| floor_term - h(p))
        .sum::<f64>()
        + graph_masked as f64 * floor_term;
    // dH/dl_i = -p_i (ln p_i + H): a relative difference eps of each input logit moves the
    // entropy by at most eps sum p_i |ln p_i + H| |l_i|.
    let sensitivity: f64 = (finite.iter())
        .map(|&(l, p)| p * (p.ln() + entropy).abs() * l.abs())
        .sum();
    let input_gc = (eps_gc + eps_co) * sensitivity;
    let input_co = eps_co * sensitivity;
    // ln size: logf(n) on the graph, -logf(fl(1/n)) on the CPU.
    let dm = 4.0 * U * max_entropy + U;
    // The temperature's range for an entropy in [h_lo, h_hi]: the normalization (one
    // division, or a multiplication by a rounded reciprocal), the power (powf, or
    // exp(exponent log r), off by about 3 exponent |ln r| ulps), and lo + w P (two roundings).
    let range = |h_lo: f64, h_hi: f64| -> (f64, f64) {
        let r_lo = (h_lo.max(0.0) / (max_entropy + dm)) * (1.0 - 3.0 * U);
        let r_hi = (h_hi / (max_entropy - dm)) * (1.0 + 3.0 * U);
        let e = exponent as f64;
        let pow = |r: f64, sign: f64| {
            if e == 0.0 {
                1.0 + sign * 5.0 * U
            } else if r <= 0.0 {
                0.0
            } else {
                r.powf(e) * (1.0 + sign * (3.0 * e * r.ln().abs() + 5.0) * U)
            }
        };
        (
            (lo + w * pow(r_lo, -1.0)) * (1.0 - 2.0 * U),
            (lo + w * pow(r_hi, 1.0)) * (1.0 + 2.0 * U),
        )
    };
    let (c_lo, c_hi) = range(entropy - rounding - input_co, entropy + rounding + input_co);
    let (g_lo, g_hi) = range(
        entropy - rounding - input_gc,
        entropy + rounding + input_gc + clamp,
    );
    // Each path divides its input logit by its temperature once (one rounding each).
    let ratio_bound = |eps: f64, num_hi: f64, den_lo: f64, num_lo: f64, den_hi: f64, k: i32| {
        let up = (1.0 + U).powi(k) / (1.0 - U);
        let down = (1.0 - U).powi(k) / (1.0 + U);
        ((1.0 + eps) * num_hi / den_lo * up - 1.0).max(1.0 - (1.0 - eps) * num_lo / den_hi * down)
    };
    let graph_cpu = if g_lo > 0.0 && c_lo > 0.0 {
        ratio_bound(eps_gc, c_hi, g_lo, c_lo, g_hi, 1)
    } else {
        f64::INFINITY
    };
    // The oracle rounds its temperature to f32, then divides.
    let cpu_oracle = if c_lo > 0.0 {
        ratio_bound(eps_co, temp, c_lo, temp, c_hi, 2)
    } else {
        f64::INFINITY
    };
    Derivation {
        size: n,
        entropy,
        max_entropy,
        temperature: Some(temp),
        rounding,
        clamp,
        input: input_gc,
        graph_cpu,
        cpu_oracle,
    }
}

/// The largest relative difference of `a`'s logits from `b`'s over the ids both hold with a
/// finite logit (0 where none; infinite where `b` is 0 and `a` is not).
pub fn relative(a: &BTreeMap<TokenId, f32>, b: &BTreeMap<TokenId, f32>) -> f64 {
    (a.iter())
        .filter_map(|(id, &x)| b.get(id).map(|&y| (x, y)))
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .map(|(x, y)| {
            let (x, y) = (x as f64, y as f64);
            if y == 0.0 {
                if x == 0.0 {
                    0.0
                } else {
                    f64::INFINITY
                }
            } else {
                ((x - y) / y).abs()
            }
        })
        .fold(0.0, f64::max)
}

/// The temperature a path's logits imply, `input / output` at the input's largest finite
/// logit in magnitude that the path kept.
pub fn implied(input: &BTreeMap<TokenId, f32>, out: &BTreeMap<TokenId, f32>) -> Option<f64> {
    (input.iter())
        .filter(|(id, l)| l.is_finite() && **l != 0.0 && out.get(id).is_some_and(|o| *o != 0.0))
        .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
        .map(|(id, &l)| l as f64 / out[id] as f64)
}

/// What the comparison measured of a chain with a dynamic `temp_ext`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DynTemp {
    pub allowed: Allowed,
    /// The largest relative difference of a survivor's logit: graph against CPU, CPU against
    /// oracle.
    pub graph_cpu: f64,
    pub cpu_oracle: f64,
    /// The temperature each path's logits imply (where the stage is the chain's last to
    /// change them).
    pub implied_graph: Option<f64>,
    pub implied_cpu: Option<f64>,
}

impl DynTemp {
    pub fn measure(
        allowed: Allowed,
        graph: &BTreeMap<TokenId, f32>,
        cpu: &BTreeMap<TokenId, f32>,
        oracle: &BTreeMap<TokenId, f32>,
    ) -> DynTemp {
        DynTemp {
            graph_cpu: relative(graph, cpu),
            cpu_oracle: relative(cpu, oracle),
            implied_graph: implied(&allowed.input, graph),
            implied_cpu: implied(&allowed.input, cpu),
            allowed,
        }
    }

    /// The graph against the CPU.
    pub fn reading(&self) -> Reading {
        read(self.graph_cpu, self.allowed.graph_cpu)
    }

    /// The CPU against the oracle (the oracle check).
    pub fn oracle_reading(&self) -> Reading {
        read(self.cpu_oracle, self.allowed.cpu_oracle)
    }

    /// One clause for the row's evidence.
    pub fn describe(&self) -> String {
        let d = &self.allowed.derivation;
        let t = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{x:.6}"));
        let mut e = match d.temperature {
            Some(temp) => format!(
                "temp_ext's dynamic temperature over {} entries: the oracle's {temp:.6} (entropy {:.6} over ln {} = {:.6}), implied by the CPU's logits {}, by the graph's {}",
                d.size, d.entropy, d.size, d.max_entropy, t(self.implied_cpu), t(self.implied_graph)
            ),
            None => format!(
                "temp_ext over {} entries leaves its survivor as it is (one entry, or a temperature of 0)",
                d.size
            ),
        };
        e += &format!(
            "; survivor logits up to {:.3e} (relative) from the CPU's, allowed {:.3e}",
            self.graph_cpu, self.allowed.graph_cpu
        );
        if d.temperature.is_some() {
            e += &format!(
                " (derived: the graph's clamp adds up to {:.3e} nats to the entropy, each path's rounding up to {:.3e}, the inputs' allowed difference up to {:.3e})",
                d.clamp, d.rounding, d.input
            );
        }
        e += match self.reading() {
            Reading::Within => ", within it",
            Reading::Margin => ", within its rounding margin (undecided)",
            Reading::Beyond => ", beyond it: another temperature",
        };
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logits(v: &[f32]) -> BTreeMap<TokenId, f32> {
        v.iter()
            .enumerate()
            .map(|(i, &l)| (TokenId(i as i32), l))
            .collect()
    }

    #[test]
    fn relative_differences_and_readings() {
        let a = logits(&[2.0, -4.0, f32::NEG_INFINITY, 0.0]);
        let b = logits(&[2.0, -4.0004, f32::NEG_INFINITY, 0.0]);
        assert!((relative(&a, &b) - 1e-4).abs() < 1e-7);
        assert_eq!(relative(&a, &a), 0.0);
        assert_eq!(relative(&logits(&[1e-30]), &logits(&[0.0])), f64::INFINITY);
        assert_eq!(read(0.9e-4, 1e-4), Reading::Within);
        assert_eq!(read(1e-4, 1e-4), Reading::Margin);
        assert_eq!(read(1e-4 - 1e-7, 1e-4), Reading::Margin);
        assert_eq!(read(1e-4 + 1e-7, 1e-4), Reading::Margin);
        assert_eq!(read(1e-3, 1e-4), Reading::Beyond);
        assert_eq!(read(1e-9, 0.0), Reading::Margin);
        assert_eq!(read(0.0, 0.0), Reading::Within);
        assert_eq!(read(1.0, f64::INFINITY), Reading::Margin);
        assert_eq!(read(0.0, f64::INFINITY), Reading::Within);
    }

    /// The clamp term is what the derivation says: on an input with no probability below the
    /// floor, only the graph's `-inf` entries count, each 1e-10 |ln 1e-10|.
    #[test]
    fn the_clamp_counts_masked_entries_at_the_floor() {
        let pool = Pool::from_logits(&[1.0, 0.5, 0.0, -0.5]);
        let d = derive(&pool, 0.8, 0.5, 1.0, 0.0, 0.0, 1000);
        let per = CLAMP_FLOOR * -CLAMP_FLOOR.ln();
        assert!((d.clamp - 1000.0 * per).abs() < 1e-15);
        assert!((2.3e-9..2.31e-9).contains(&per));
        assert!(d.graph_cpu > 0.0 && d.graph_cpu < 1e-3, "{d:?}");
        assert!(d.cpu_oracle < d.graph_cpu);
    }

    /// Against the CPU's rule computed in f32 as llama.cpp computes it, on a pool with many
    /// tiny probabilities: the f32 temperature lies within the one-path bound of the exact
    /// one, and a max_entropy over another size lies far outside the two-path bound.
    #[test]
    fn the_bound_holds_f32_arithmetic_and_not_another_formula() {
        let raw: Vec<f32> = (0..5000)
            .map(|i| ((i * 7919 % 5000) as f32 / 5000.0 - 0.9) * 40.0)
            .collect();
        let pool = Pool::from_logits(&raw);
        let (t, delta, e) = (0.8f32, 0.5f32, 1.0f32);
        let d = derive(&pool, t, delta, e, 0.0, 0.0, 0);
        let f32_temp = |size: usize| -> f32 {
            let mut l: Vec<f32> = raw.clone();
            l.sort_by(|a, b| b.total_cmp(a));
            let m = l[0];
            let mut p: Vec<f32> = l.iter().map(|x| (x - m).exp()).collect();
            let s: f32 = p.iter().sum();
            p.iter_mut().for_each(|x| *x /= s);
            let mut h = 0.0f32;
            for &x in &p {
                if x > 0.0 {
                    h -= x * x.ln();
                }
            }
            let me = -(1.0f32 / size as f32).ln();
            let lo = (t - delta).max(0.0);
            lo + ((t + delta) - lo) * (h / me).powf(e)
        };
        let exact = d.temperature.unwrap();
        let ours = f32_temp(raw.len()) as f64;
        assert!(
            (ours / exact - 1.0).abs() <= d.cpu_oracle,
            "{ours} {exact} {d:?}"
        );
        let other = f32_temp(2 * raw.len()) as f64;
        assert!((ours / other - 1.0).abs() > 10.0 * d.graph_cpu, "{d:?}");
    }

    /// One entry, or a temperature of 0, is a copy on both paths: nothing allowed beyond the
    /// input's own difference.
    #[test]
    fn a_lone_entry_is_copied() {
        let one = Pool::from_logits(&[3.0]);
        let d = derive(&one, 0.8, 0.5, 1.0, 0.0, 0.0, 7);
        assert_eq!((d.temperature, d.graph_cpu, d.cpu_oracle), (None, 0.0, 0.0));
        let lone = Pool::from_logits(&[3.0, f32::NEG_INFINITY]);
        let d = derive(&lone, 0.0, 0.5, 1.0, 2.0 * U, 0.0, 0);
        assert_eq!((d.temperature, d.graph_cpu), (None, 2.0 * U));
    }

    #[test]
    fn the_chain_walk_carries_bounds_and_drops_them_through_a_sum() {
        let raw: Vec<f32> = (0..64).map(|i| (i as f32 * 0.37).sin() * 9.0).collect();
        let pool = Pool::from_logits(&raw);
        let te = Stage::TempExt {
            t: 0.8,
            delta: 0.5,
            exponent: 1.0,
        };
        // An input that may differ by one ulp widens the graph's bound, not the oracle's.
        let exact_in = derive(&pool, 0.8, 0.5, 1.0, 0.0, 0.0, 0);
        let ulp_in = derive(&pool, 0.8, 0.5, 1.0, 2.0 * U, 0.0, 0);
        assert!(ulp_in.graph_cpu > exact_in.graph_cpu + 2.0 * U);
        assert_eq!(ulp_in.cpu_oracle, exact_in.cpu_oracle);
        // An inexact temp before it carries that ulp; a power of two carries none.
        let after = |t| {
            allowed(&[Stage::Temp { t }, te.clone()], &pool, &[], 0)
                .unwrap()
                .derivation
                .input
        };
        assert!(after(0.7) > 0.0);
        assert_eq!(after(0.5), 0.0);
        let alone = allowed(std::slice::from_ref(&te), &pool, &[], 0).unwrap();
        assert_eq!(alone.graph_cpu, alone.derivation.graph_cpu);
        let twice = allowed(&[te.clone(), te.clone()], &pool, &[], 0).unwrap();
        assert!(twice.derivation.input > 0.0);
        let summed = allowed(
            &[
                te.clone(),
                Stage::LogitBias {
                    biases: vec![(TokenId(3), 1.0)],
                },
            ],
            &pool,
            &[],
            0,
        )
        .unwrap();
        assert_eq!(summed.graph_cpu, f64::INFINITY);
        assert!(allowed(&[Stage::Temp { t: 0.7 }], &pool, &[], 0).is_none());
    }
}
