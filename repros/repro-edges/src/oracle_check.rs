//! The oracle checked on its own, on edge inputs where it could be wrong, before it judges a
//! probe: each case states by hand (computed on paper, exact in f32) which ids survive with
//! which logits, or that the answer rests on a tie or on a margin, and the oracle the judge
//! uses (`judge::oracle_step`, exact typical included) must match every value.

use crate::inputs::{self, EdgeInput};
use oracle::stage::Stage;
use oracle::TokenId;

struct Case {
    stage: &'static str,
    input: &'static str,
    history: &'static [i32],
    /// Surviving ids with their exact logits, ascending by id; ignored when `tie`.
    survivors: Vec<(i32, f32)>,
    /// The answer must carry a knife edge: `Some(true)` a tie, `Some(false)` a margin.
    tie: Option<bool>,
    /// The id a selecting stage must choose.
    selected: Option<i32>,
}

fn cases() -> Vec<Case> {
    let plain = vec![(0, 2.0), (1, 1.0), (2, 0.5), (3, -1.0)];
    let case = |stage, input, survivors: Vec<(i32, f32)>| Case {
        stage,
        input,
        history: &[],
        survivors,
        tie: None,
        selected: None,
    };
    vec![
        // k <= 0 disables top_k.
        case("top_k=0", "plain", plain.clone()),
        case("top_k=-1", "plain", plain.clone()),
        // min_keep above the size keeps everything.
        case("top_p=0.5:8", "plain", plain.clone()),
        case("min_p=0.3:8", "plain", plain.clone()),
        // p(0) = e^2 / (e^2 + e + e^0.5 + e^-1) = 0.609 >= 0.5.
        case("top_p=0.5", "plain", vec![(0, 2.0)]),
        // threshold 2 + ln 0.3 = 0.796: ids 0 and 2; the -inf ids stay out.
        case("min_p=0.3", "some-neg-inf", vec![(0, 2.0), (2, 1.0)]),
        // ids 0, 1, 2 have p >= 0.1 (0.609, 0.224, 0.136): all but the last of them go.
        case("xtc=1:0.1", "plain", vec![(2, 0.5), (3, -1.0)]),
        // dividing by 0.5 doubles every logit exactly.
        case(
            "temp=0.5",
            "plain",
            vec![(0, 4.0), (1, 2.0), (2, 1.0), (3, -2.0)],
        ),
        // id 1 (count 2): 1 / 1.5 - (2 * 0.5 + 0.5); id 2 (count 1): 0.5 / 1.5 - 1.
        Case {
            history: &[1, 1, 2],
            ..case(
                "penalties=4:1.5:0.5:0.5",
                "plain",
                vec![
                    (0, 2.0),
                    (1, 1.0f32 / 1.5 - 1.5),
                    (2, 0.5f32 / 1.5 - 1.0),
                    (3, -1.0),
                ],
            )
        },
        Case {
            selected: Some(0),
            ..case("greedy", "one", vec![(0, 1.0)])
        },
        // The cut after two of four equal logits is a tie.
        Case {
            tie: Some(true),
            ..case("top_k=2", "equal", vec![])
        },
        // Two of four equal entries hold exactly p = 0.5: a margin, not a tie.
        Case {
            tie: Some(false),
            ..case("top_p=0.5", "equal", vec![])
        },
        // Exact typical where llama.cpp's f32 entropy is NaN: p = (0.665, 0, 0.245, 0.090),
        // entropy 0.832, the most typical entry alone holds 0.665 > 0.5.
        case("typical=0.5", "zero-prob", vec![(0, 0.0)]),
        // Masked entries add nothing to the entropy and are the least typical: p = (0.731,
        // 0.269) over ids 0 and 2, scores 0.269 and 0.731, so id 0 alone (0.731 > 0.5).
        case("typical=0.5", "some-neg-inf", vec![(0, 2.0)]),
    ]
}

fn check(c: &Case, inputs: &[EdgeInput]) -> Option<String> {
    let Ok(stage) = c.stage.parse::<Stage>() else {
        return Some(format!("'{}' does not parse", c.stage));
    };
    let Some(input) = inputs.iter().find(|i| i.name == c.input) else {
        return Some(format!("no input '{}'", c.input));
    };
    let label = format!("{} on {}", c.stage, c.input);
    let pool = match inputs::domain(&input.entries) {
        Ok(p) => p,
        Err(why) => return Some(format!("{label}: {why}")),
    };
    let step = crate::judge::oracle_step(&stage, &pool, &oracle::token_ids(c.history));
    if let Some(tie) = c.tie {
        return match &step.edge {
            Some(e) if e.is_tie() == tie => None,
            Some(e) => Some(format!("{label}: the edge is of the other kind ({})", e.0)),
            None => Some(format!("{label}: expected an edge, the oracle decided")),
        };
    }
    if let Some(e) = &step.edge {
        return Some(format!("{label}: unexpected knife edge ({})", e.0));
    }
    let mut got: Vec<(i32, f32)> = (step.pool.entries().iter())
        .filter(|e| e.logit > f32::NEG_INFINITY)
        .map(|e| (e.id.0, e.logit))
        .collect();
    got.sort_by_key(|e| e.0);
    let bits = |v: &[(i32, f32)]| v.iter().map(|&(i, l)| (i, l.to_bits())).collect::<Vec<_>>();
    if bits(&got) != bits(&c.survivors) {
        return Some(format!(
            "{label}: oracle {got:?}, by hand {:?}",
            c.survivors
        ));
    }
    if c.selected.map(TokenId) != step.selected {
        return Some(format!(
            "{label}: oracle selects {:?}, by hand {:?}",
            step.selected, c.selected
        ));
    }
    None
}

/// Runs every case: (cases run, failures).
pub fn run() -> (usize, Vec<String>) {
    let inputs = inputs::all();
    let cases = cases();
    let failures = cases.iter().filter_map(|c| check(c, &inputs)).collect();
    (cases.len(), failures)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oracle_matches_every_hand_computed_case() {
        let (n, failures) = run();
        assert!(n >= 12);
        assert!(failures.is_empty(), "{failures:?}");
    }

    #[test]
    fn a_wrong_hand_value_is_caught() {
        let inputs = inputs::all();
        let mut c = cases().remove(0);
        c.survivors[3].1 = -0.5;
        assert!(check(&c, &inputs).is_some());
    }
}
