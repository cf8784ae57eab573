//! The oracle's expectation checked on its own, before it judges anything: hand-computed
//! survivor sets and probabilities (closed forms in f64), on inputs where it could be wrong
//! (a top-p after top-k that must renormalize, an exact `cum == p`, a tie cut, `-inf`
//! entries, a temperature).

use crate::expect;
use engine::Sampling;
use report::Control;

struct Case {
    name: &'static str,
    logits: Vec<f32>,
    sampling: &'static str,
    /// Expected classes: (ids, kept, probability of each kept id).
    classes: Vec<(Vec<i32>, usize, f64)>,
}

fn cases() -> Vec<Case> {
    let e = std::f64::consts::E;
    let ninf = f32::NEG_INFINITY;
    // masked, top_p = 0.9: weights e^2, e^1, e^0.5 survive (cum 0.579, 0.792, 0.921).
    let masked_z = e * e + e + e.sqrt();
    // temp 0.5 doubles the logits: 6, 4, 2, 0.
    let hot_z = e.powi(6) + e.powi(4) + e.powi(2) + 1.0;
    vec![
        Case {
            name: "top_k=3 then top_p=0.9 renormalizes before it cuts",
            logits: vec![3.0, 2.0, 1.0, 0.0],
            sampling: "top_k=3,top_p=0.9",
            classes: vec![
                (vec![0], 1, 1.0 / (1.0 + 1.0 / e)),
                (vec![1], 1, 1.0 / (1.0 + e)),
            ],
        },
        Case {
            name: "cum == p exactly keeps the entry that reaches p",
            logits: vec![0.0; 4],
            sampling: "top_p=0.5",
            classes: vec![(vec![0, 1, 2, 3], 2, 0.5)],
        },
        Case {
            name: "a top_k cut inside a tie keeps a count, not ids",
            logits: vec![1.0, 1.0, 1.0, 0.0, 0.0, -1.0],
            sampling: "top_k=2",
            classes: vec![(vec![0, 1, 2], 2, 0.5)],
        },
        Case {
            name: "-inf entries are never survivors",
            logits: vec![2.0, ninf, 1.0, ninf, 0.0, 0.5],
            sampling: "top_p=0.9",
            classes: vec![
                (vec![0], 1, e * e / masked_z),
                (vec![2], 1, e / masked_z),
                (vec![5], 1, e.sqrt() / masked_z),
            ],
        },
        Case {
            name: "temperature 0.5 before the draw",
            logits: vec![3.0, 2.0, 1.0, 0.0],
            sampling: "all,temp=0.5",
            classes: vec![
                (vec![0], 1, e.powi(6) / hot_z),
                (vec![1], 1, e.powi(4) / hot_z),
                (vec![2], 1, e.powi(2) / hot_z),
                (vec![3], 1, 1.0 / hot_z),
            ],
        },
    ]
}

/// Relative tolerance on a probability: the oracle sums f64 exponentials in a different
/// order than the closed forms above; 1e-12 is far above that rounding and far below any
/// difference a draw could show.
const TOLERANCE: f64 = 1e-12;

fn check(c: &Case) -> Result<(), String> {
    let s = Sampling::parse(c.sampling).map_err(|e| e.to_string())?;
    let exp = expect::of(&c.logits, &s).map_err(|e| e.to_string())?;
    if let Some(u) = &exp.undecided {
        return Err(format!("left undecided: {u}"));
    }
    let got: Vec<(Vec<i32>, usize, f64)> = exp
        .classes
        .iter()
        .map(|k| (k.ids.iter().map(|i| i.0).collect(), k.kept, k.p_each))
        .collect();
    let same = got.len() == c.classes.len()
        && got
            .iter()
            .zip(&c.classes)
            .all(|(g, w)| g.0 == w.0 && g.1 == w.1 && ((g.2 - w.2) / w.2).abs() <= TOLERANCE);
    if same {
        Ok(())
    } else {
        Err(format!("expected {:?}, got {:?}", c.classes, got))
    }
}

pub fn run() -> Vec<Control> {
    cases()
        .iter()
        .map(|c| {
            let hand = || format!("{:?} under {} as computed by hand", c.logits, c.sampling);
            let detail = check(c).map(|()| hand());
            let passed = detail.is_ok();
            Control::oracle_check(
                format!("oracle: {}", c.name),
                passed,
                detail.unwrap_or_else(|e| e),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_hand_case_passes_and_a_wrong_value_would_fail() {
        for c in super::run() {
            assert!(c.passed, "{}: {}", c.name, c.detail);
        }
        let mut wrong = super::cases().remove(0);
        wrong.classes[0].2 *= 1.0 + 1e-9;
        assert!(super::check(&wrong).is_err());
    }
}
