//! Samplers written here, in plain Rust, run through the same detector as the engines: an
//! exact one and one that breaks ties afresh on every call (the negative controls), and seven
//! with a planted defect, five gross and two small (the positive controls, where the
//! detector's power against them is high enough).
//!
//! The exact sampler does not call the oracle: it states the seam's semantics again in f64
//! (sort by logit, then id; temperature; top-k; top-p on the renormalized remainder; min-p;
//! inverse-CDF draw from `oracle::rng::Rng`), so a mistake in either would show as a failed
//! control rather than cancel out.

use crate::expect::{modelled, Modelled};
use anyhow::{ensure, Result};
use detector::power::sample;
use engine::{Call, Sampling};
use oracle::rng::Rng;
use oracle::TokenId;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Defect {
    /// None: the exact sampler.
    Exact,
    /// After truncation, the best id that was cut is kept as well.
    KeepsOneExtra,
    /// Draws against the full-vocabulary probabilities of the survivors, without dividing by
    /// their mass; a uniform number past that mass lands on the last survivor.
    SkipsRenormalization,
    /// After top-k, top-p adds up the full-vocabulary probabilities instead of the
    /// renormalized ones (the mechanism read in candle's `sample_topk_topp`).
    TopPOnFullMass,
    /// A cut inside equal logits keeps every one of them.
    KeepsWholeTie,
    /// A cut inside equal logits keeps one of them fewer than the cut's count (never none):
    /// seen only per call, since every draw still lands in the class.
    DropsOneOfTie,
    /// Moves `points` hundredths of probability from the most probable survivor to the least
    /// probable one; the set is right.
    ShiftsMass { points: u8 },
    /// Applies the temperature after the truncating stages instead of before them, so the
    /// cuts see the untempered distribution.
    TempAfterTruncation,
    /// Exact, except that equal logits are ordered afresh, at random, in every call, so which
    /// ids of a tie survive a cut changes from call to call while how many never does. Not a
    /// defect: the seam promises a count per tie, not which ids (a negative control of the
    /// per-call tie rule).
    FreshTieBreak,
}

impl Defect {
    pub fn label(self) -> String {
        let fixed = match self {
            Defect::Exact => "exact Rust sampler",
            Defect::KeepsOneExtra => "planted: keeps one extra token",
            Defect::SkipsRenormalization => "planted: skips renormalization",
            Defect::TopPOnFullMass => "planted: top-p on the full-vocabulary mass after top-k",
            Defect::KeepsWholeTie => "planted: keeps the whole tie at a cut",
            Defect::DropsOneOfTie => "planted: keeps one fewer of a tie at a cut",
            Defect::ShiftsMass { points } => {
                return format!(
                    "planted: {points} point{} of probability moved from the first survivor to the last",
                    if points == 1 { "" } else { "s" }
                )
            }
            Defect::TempAfterTruncation => "planted: temperature after truncation",
            Defect::FreshTieBreak => "planted: breaks each tie afresh on every call, keeping the count",
        };
        fixed.to_string()
    }
}

/// The survivors (best first) and their weights: renormalized probabilities, or for
/// [`Defect::SkipsRenormalization`] the full-vocabulary ones. The stages run in the list's
/// order; this sampler states temp, top_k, top_p and min_p and refuses the others. Equal
/// logits are ordered by id.
pub fn distribution(logits: &[f32], s: &Sampling, defect: Defect) -> Result<Vec<(TokenId, f64)>> {
    ordered_distribution(logits, s, defect, None)
}

/// [`distribution`], with equal logits ordered by `rank[id]` where a rank is given.
fn ordered_distribution(
    logits: &[f32],
    s: &Sampling,
    defect: Defect,
    rank: Option<&[usize]>,
) -> Result<Vec<(TokenId, f64)>> {
    let mut order: Vec<(TokenId, f64)> = logits
        .iter()
        .enumerate()
        .filter(|(_, x)| **x > f32::NEG_INFINITY)
        .map(|(i, &x)| (TokenId(i as i32), f64::from(x)))
        .collect();
    let key = |id: TokenId| rank.map_or(id.0 as usize, |r| r[id.0 as usize]);
    let sort = |xs: &mut Vec<(TokenId, f64)>| {
        xs.sort_by(|a, b| b.1.total_cmp(&a.1).then(key(a.0).cmp(&key(b.0))))
    };
    sort(&mut order);
    let softmax = |xs: &[(TokenId, f64)]| -> Vec<f64> {
        let m = xs[0].1;
        let w: Vec<f64> = xs.iter().map(|(_, x)| (x - m).exp()).collect();
        let z: f64 = w.iter().sum();
        w.into_iter().map(|x| x / z).collect()
    };
    let mut keep = order.len();
    let mut t_after = 1.0;
    for stage in s.stages() {
        match modelled(stage)? {
            Modelled::Temp { t } => {
                ensure!(t > 0.0, "the exact sampler takes a positive temperature");
                let t = f64::from(t);
                if defect == Defect::TempAfterTruncation {
                    t_after *= t;
                    continue;
                }
                for (_, x) in &mut order {
                    *x /= t;
                }
                // Rounding may make two tempered values equal; they then sort by id.
                sort(&mut order);
            }
            Modelled::TopK { k } => {
                // k <= 0 keeps everything.
                if let Some(k) = usize::try_from(k).ok().filter(|&k| k > 0) {
                    keep = keep.min(k);
                }
            }
            Modelled::TopP { p, min_keep } => {
                let probs = if defect == Defect::TopPOnFullMass {
                    softmax(&order)[..keep].to_vec()
                } else {
                    softmax(&order[..keep])
                };
                let mut cum = 0.0;
                for (i, q) in probs.iter().enumerate() {
                    cum += q;
                    if cum >= f64::from(p) && i + 1 >= min_keep {
                        keep = i + 1;
                        break;
                    }
                }
            }
            Modelled::MinP { p, min_keep } => {
                let probs = softmax(&order[..keep]);
                let floor = probs[0] * f64::from(p);
                let above = probs.iter().take_while(|&&q| q >= floor).count();
                keep = above.max(min_keep).min(keep);
            }
        }
    }
    if defect == Defect::KeepsOneExtra {
        keep = (keep + 1).min(order.len());
    }
    if defect == Defect::DropsOneOfTie
        && keep > 1
        && keep < order.len()
        && order[keep].1 == order[keep - 1].1
    {
        keep -= 1;
    }
    if defect == Defect::KeepsWholeTie {
        while keep < order.len() && order[keep].1 == order[keep - 1].1 {
            keep += 1;
        }
    }
    // A positive temperature keeps the order, so tempering the kept ones now cuts nothing.
    for (_, x) in &mut order {
        *x /= t_after;
    }
    let kept = &order[..keep];
    let mut weights = match defect {
        Defect::SkipsRenormalization => softmax(&order),
        _ => softmax(kept),
    };
    if let Defect::ShiftsMass { points } = defect {
        let moved = f64::from(points) / 100.0;
        ensure!(
            weights.len() >= 2 && weights[0] >= moved,
            "moving {points} points needs two survivors and that much mass on the first"
        );
        weights[0] -= moved;
        *weights.last_mut().expect("two survivors") += moved;
    }
    Ok(kept.iter().map(|(id, _)| *id).zip(weights).collect())
}

/// `draws` calls of the Rust sampler with `defect`, seeded with `seed`, each showing which
/// ids of `watch` it kept. [`Defect::FreshTieBreak`] orders ties from a second generator,
/// seeded with `seed` plus [`TIE_SEED_OFFSET`], so its draws use the same stream as the others.
pub fn draw(
    logits: &[f32],
    s: &Sampling,
    seed: u64,
    draws: usize,
    defect: Defect,
    watch: &[TokenId],
) -> Result<Vec<Call>> {
    ensure!(
        logits.iter().any(|x| x.is_finite()),
        "at least one logit must be finite"
    );
    let kept_of = |dist: &[(TokenId, f64)]| {
        let mut kept: Vec<TokenId> = (dist.iter())
            .map(|(id, _)| *id)
            .filter(|id| watch.contains(id))
            .collect();
        kept.sort();
        kept
    };
    let mut rng = Rng::new(seed);
    if defect != Defect::FreshTieBreak {
        let dist = distribution(logits, s, defect)?;
        let kept = kept_of(&dist);
        let drawn = sample(&dist, draws, &mut rng).into_iter();
        return Ok(drawn
            .map(|drawn| Call {
                drawn,
                kept: Some(kept.clone()),
            })
            .collect());
    }
    let mut ties = Rng::new(seed.wrapping_add(TIE_SEED_OFFSET));
    let mut rank: Vec<usize> = (0..logits.len()).collect();
    (0..draws)
        .map(|_| {
            ties.shuffle(&mut rank);
            let dist = ordered_distribution(logits, s, Defect::Exact, Some(&rank))?;
            Ok(Call {
                drawn: sample(&dist, 1, &mut rng)[0],
                kept: Some(kept_of(&dist)),
            })
        })
        .collect()
}

/// Added to a seed for the generator that orders ties afresh ([`Defect::FreshTieBreak`]).
pub const TIE_SEED_OFFSET: u64 = 1 << 32;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_planted_defects_change_what_they_say() {
        let of = |s: &str, d| distribution(&[3.0, 2.0, 1.0, 0.0], &Sampling::parse(s).unwrap(), d);
        let exact = of("top_k=2", Defect::Exact).unwrap();
        assert_eq!(exact.len(), 2);
        assert!((exact[0].1 + exact[1].1 - 1.0).abs() < 1e-15);
        assert_eq!(of("top_k=2", Defect::KeepsOneExtra).unwrap().len(), 3);
        let raw = of("top_k=2", Defect::SkipsRenormalization).unwrap();
        assert!(raw[0].1 + raw[1].1 < 0.95);
        // The same top-k then top-p example as the interface: the renormalized cut keeps 2.
        assert_eq!(of("top_k=3,top_p=0.9", Defect::Exact).unwrap().len(), 2);
        // Tempered first, top_p=0.9 keeps all four; at temperature 1 it keeps three.
        let s = "top_p=0.9,temp=2";
        assert_eq!(of(s, Defect::Exact).unwrap().len(), 4);
        assert_eq!(of(s, Defect::TempAfterTruncation).unwrap().len(), 3);
        let shifted = of("all", Defect::ShiftsMass { points: 2 }).unwrap();
        let exact = of("all", Defect::Exact).unwrap();
        assert!((exact[0].1 - shifted[0].1 - 0.02).abs() < 1e-15);
        assert!((shifted[3].1 - exact[3].1 - 0.02).abs() < 1e-15);
        assert_eq!(exact[1..3], shifted[1..3]);
    }

    #[test]
    fn the_fresh_tie_break_keeps_the_count_but_not_the_ids() {
        let ties = [1.0, 1.0, 1.0, 0.0, 0.0, -1.0];
        let s = Sampling::parse("top_k=2").unwrap();
        let watch = [0, 1, 2].map(TokenId);
        let calls = draw(&ties, &s, 8, 300, Defect::FreshTieBreak, &watch).unwrap();
        let sets: std::collections::BTreeSet<Vec<TokenId>> =
            calls.iter().map(|c| c.kept.clone().unwrap()).collect();
        // All three pairs of {0, 1, 2} occur, each call keeps two and draws from them.
        assert_eq!(sets.len(), 3);
        assert!(calls.iter().all(|c| {
            let kept = c.kept.as_ref().unwrap();
            kept.len() == 2 && kept.contains(&c.drawn)
        }));
        let fewer = distribution(&ties, &s, Defect::DropsOneOfTie).unwrap();
        assert_eq!(fewer.len(), 1);
        let exact = draw(&ties, &s, 8, 300, Defect::Exact, &watch).unwrap();
        assert!(exact
            .iter()
            .all(|c| c.kept == Some(vec![TokenId(0), TokenId(1)])));
    }
}
