//! The closed-form power every draw row states (`detector::power::stated`) against the
//! detector itself on simulated draws (`detector::power::simulate`, through `judge`): an
//! independent route through draws, pooling and the test.

use detector::power::{simulate, stated, ONE_POINT};
use detector::{Class, Expectation};
use oracle::TokenId;

/// Softmax of `logits` (most probable first), one whole class per id, and the same
/// distribution by id with one point moved from the most probable id (0) to the least (the
/// last): the effect the stated power is about.
fn softmax_and_moved(logits: &[f64]) -> (Expectation, Vec<(TokenId, f64)>) {
    let w: Vec<f64> = logits.iter().map(|l| l.exp()).collect();
    let sum: f64 = w.iter().sum();
    let p: Vec<f64> = w.iter().map(|x| x / sum).collect();
    let classes = (p.iter().enumerate())
        .map(|(i, &p_each)| Class {
            ids: vec![TokenId(i as i32)],
            kept: 1,
            p_each,
        })
        .collect();
    let mut moved = p.clone();
    moved[0] -= ONE_POINT;
    *moved.last_mut().unwrap() += ONE_POINT;
    let dist = (moved.iter().enumerate())
        .map(|(i, &x)| (TokenId(i as i32), x))
        .collect();
    let exp = Expectation {
        classes,
        undecided: None,
    };
    (exp, dist)
}

/// F7's three- and four-survivor rows and a five-survivor one, at draw counts where the power
/// is neither near 0 nor near 1, so a wrong df, noncentrality or critical value shows as a gap
/// larger than 400 simulated runs leave (their rate's standard error is at most 0.025).
#[test]
fn the_stated_power_agrees_with_the_simulated_detector_on_several_shapes() {
    let alpha = 0.01 / 24.0;
    for (logits, draws) in [
        (&[3.0, 2.0, 1.0][..], 20_000),
        (&[3.0, 2.0, 1.0][..], 10_000),
        (&[3.0, 2.0, 1.0, 0.0][..], 4_000),
        (&[1.5, 1.0, 0.5, 0.0, -0.5][..], 10_000),
    ] {
        let (exp, moved) = softmax_and_moved(logits);
        let closed = stated(&exp, draws, alpha);
        assert!(
            closed.power > 0.05 && closed.power < 0.97,
            "{logits:?} at {draws}: choose a draw count whose power is away from 0 and 1: {closed:?}"
        );
        let sim = simulate(&exp, &moved, draws, alpha, 400, 20_261_205);
        assert!(
            (sim.rate - closed.power).abs() < 0.1,
            "{logits:?} at {draws}: simulated {sim:?} against the closed form {closed:?}"
        );
    }
}
