//! The ledger samplers against llama.cpp's own penalties stage and against the oracles, on
//! whichever build this test binary links.

use ledger::{ledger_penalties, sorted_guard, Mode, PenaltyConfig};
use oracle::gauge;
use oracle::penalty::PenaltyParams;
use oracle::rng::Rng;
use oracle::window::WindowLen;
use oracle::TokenId;
use std::collections::BTreeSet;
use subject::{Candidates, Sampler};

const V: i32 = 32;

fn cfg(last_n: usize, repeat: f32, freq: f32, present: f32, mode: Mode) -> PenaltyConfig {
    PenaltyConfig {
        n_vocab: V,
        last_n: WindowLen(last_n),
        params: PenaltyParams {
            repeat,
            freq,
            present,
        },
        mode,
    }
}

fn logits_by_id(c: &Candidates) -> Vec<u32> {
    let mut v = vec![0u32; V as usize];
    c.entries
        .iter()
        .for_each(|e| v[e.id.0 as usize] = e.logit.to_bits());
    v
}

fn shuffled(rng: &mut Rng, logits: &[f32]) -> Candidates {
    let mut order: Vec<usize> = (0..logits.len()).collect();
    rng.shuffle(&mut order);
    Candidates::new(order.into_iter().map(|i| (TokenId(i as i32), logits[i])))
}

#[test]
fn default_mode_is_bit_identical_to_llama_cpp() {
    let mut rng = Rng::new(7);
    let mut compared = 0;
    for case in 0..400 {
        let c = cfg(
            [1, 2, 3, 4, 8, 64][case % 6],
            [0.5, 1.0, 1.1, 1.3, 2.0][rng.below(5)],
            [0.0, 0.25, 0.5][rng.below(3)],
            [0.0, 0.5, 1.0][rng.below(3)],
            Mode::Default,
        );
        let (mut a, mut b) = (c.builtin().build().unwrap(), ledger_penalties(c).unwrap());
        for _ in 0..rng.below(40) {
            let id = TokenId(rng.below(V as usize) as i32);
            a.accept(id).unwrap();
            b.accept(id).unwrap();
        }
        let logits: Vec<f32> = (0..V)
            .map(|_| (rng.below(2001) as f32 - 1000.0) / 97.0)
            .collect();
        // Both layouts: id order (the ledger's direct path) and shuffled (its fallback pass).
        for cand in [
            Candidates::from_logits(&logits),
            shuffled(&mut rng, &logits),
        ] {
            let (mut x, mut y) = (cand.clone(), cand);
            a.apply(&mut x).unwrap();
            b.apply(&mut y).unwrap();
            assert_eq!(logits_by_id(&x), logits_by_id(&y), "case {case} {c:?}");
            compared += 1;
        }
    }
    assert_eq!(compared, 800);
}

/// Accepts `ids` into `s`.
fn accept(s: &mut Sampler, ids: &[i32]) {
    ids.iter().for_each(|&id| s.accept(TokenId(id)).unwrap());
}

/// `s` applied to `logits` in id order, flagged `sorted` if `sorted`.
fn applied(s: &mut Sampler, logits: &[f32], sorted: bool) -> Candidates {
    let mut cand = Candidates::from_logits(logits);
    cand.sorted = sorted;
    s.apply(&mut cand).unwrap();
    cand
}

#[test]
fn clone_and_reset_carry_the_whole_ledger() {
    let mut s = ledger_penalties(cfg(4, 1.0, 0.5, 0.0, Mode::Default)).unwrap();
    accept(&mut s, &[5, 5, 6]);
    let mut clone = s.try_clone().unwrap();
    accept(&mut s, &[7, 8]);
    accept(&mut clone, &[7, 8]);
    let flat = [1024.0; V as usize];
    let read = |s: &mut Sampler| logits_by_id(&applied(s, &flat, false));
    assert_eq!(read(&mut s), read(&mut clone));
    // Window [5, 6, 7, 8] after 5,5,6,7,8: id 5 has count 1.
    assert_eq!(
        applied(&mut s, &flat, false).logit_of(TokenId(5)),
        Some(1023.5)
    );
    s.reset();
    assert_eq!(read(&mut s), logits_by_id(&Candidates::from_logits(&flat)));
}

#[test]
fn sorted_flag_is_cleared_exactly_when_the_order_breaks() {
    // Penalizing the top (4 -> 2) drops it below 3: the order breaks. Penalizing the bottom
    // (-1 -> -2) keeps the order: the flag stays.
    for (seen, logits, penalized, still_sorted) in [
        (0, [4.0, 3.0, 1.0], 2.0, false),
        (2, [4.0, 3.0, -1.0], -2.0, true),
    ] {
        let mut s = ledger_penalties(cfg(8, 2.0, 0.0, 0.0, Mode::Default)).unwrap();
        accept(&mut s, &[seen]);
        let out = applied(&mut s, &logits, true);
        assert_eq!(out.sorted, still_sorted, "{logits:?}");
        assert_eq!(out.logit_of(TokenId(seen)), Some(penalized));
    }
}

/// A stage of `mode` at `theta` that accepted 1 to 10 random ids, those ids, and random logits
/// in steps of `1 / scale`.
fn random_case(
    rng: &mut Rng,
    theta: f32,
    mode: Mode,
    scale: f32,
) -> (Sampler, BTreeSet<TokenId>, Vec<f32>) {
    let mut s = ledger_penalties(cfg(64, theta, 0.0, 0.0, mode)).unwrap();
    let mut seen = BTreeSet::new();
    for _ in 0..1 + rng.below(10) {
        let id = TokenId(rng.below(V as usize) as i32);
        s.accept(id).unwrap();
        seen.insert(id);
    }
    let logits = (0..V)
        .map(|_| (rng.below(4001) as f32 - 2000.0) / scale)
        .collect();
    (s, seen, logits)
}

#[test]
fn normalized_mode_chooses_like_the_oracle_at_every_shift() {
    let mut rng = Rng::new(11);
    for _ in 0..200 {
        let (mut s, seen, logits) = random_case(&mut rng, 1.3, Mode::Normalized, 211.0);
        let want = gauge::argmax(&gauge::normalized(&logits, 0.0, &seen, 1.3));
        for shift in [-5.0f32, 0.0, 5.0] {
            let shifted: Vec<f32> = logits.iter().map(|z| z + shift).collect();
            let out = s.apply_in_id_order(&shifted).unwrap();
            assert_eq!(oracle::argmax(&out), want, "shift {shift}");
        }
    }
}

/// Subtractive mode's values against the oracle's (`z - ln theta` in f64): within the f32
/// rounding of `ln theta` and of the result, and exactly `z` for unseen ids.
#[test]
fn subtractive_mode_values_match_the_oracle() {
    let mut rng = Rng::new(23);
    for theta in [1.05f32, 1.15, 1.3, 2.0] {
        let (mut s, seen, logits) = random_case(&mut rng, theta, Mode::Subtractive, 97.0);
        for shift in [-5.0f32, 0.0, 3.0] {
            let x: Vec<f32> = logits.iter().map(|z| z + shift).collect();
            let out = s.apply_in_id_order(&x).unwrap();
            let want = gauge::subtractive(&x, 0.0, &seen, theta);
            let max = x.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64;
            let ln = (theta as f64).ln();
            for (i, (&got, &w)) in out.iter().zip(&want).enumerate() {
                if seen.contains(&TokenId(i as i32)) {
                    // One rounding of ln theta and one of the difference, each half an ulp.
                    let tol = (ulp(ln as f32) + ulp(got)) as f64 / 2.0;
                    assert!(
                        (got as f64 - (w + max)).abs() <= tol,
                        "theta {theta} id {i}: {got} vs {}",
                        w + max
                    );
                } else {
                    assert_eq!(got, x[i], "unseen id {i} moved");
                }
            }
        }
    }
}

fn ulp(x: f32) -> f32 {
    let a = x.abs();
    f32::from_bits(a.to_bits() + 1) - a
}

#[test]
fn guard_clears_a_stale_flag_and_keeps_an_honest_one() {
    let mut g = sorted_guard().unwrap();
    assert!(!applied(&mut g, &[1.0, 3.0, 2.0], true).sorted);
    assert!(applied(&mut g, &[3.0, 2.0, 1.0], true).sorted);
    assert!(applied(&mut g.try_clone().unwrap(), &[3.0, 2.0, 1.0], true).sorted);
    assert_eq!(g.name(), "sorted-guard");
}

#[test]
fn refuses_bad_parameters() {
    let too_long = subject::MAX_WINDOW as usize + 1;
    for bad in [
        cfg(too_long, 1.1, 0.0, 0.0, Mode::Default),
        cfg(4, 0.0, 0.0, 0.0, Mode::Default),
        cfg(4, f32::NAN, 0.0, 0.0, Mode::Default),
        PenaltyConfig {
            n_vocab: 0,
            ..cfg(4, 1.1, 0.0, 0.0, Mode::Default)
        },
    ] {
        assert!(ledger_penalties(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn readme_shows_the_doc_tested_example() {
    let readme = include_str!("../../../docs/findings/F5.md");
    let usage = include_str!("../USAGE.md");
    assert!(
        readme.contains(usage),
        "docs/findings/F5.md must contain crates/ledger/USAGE.md verbatim"
    );
}
