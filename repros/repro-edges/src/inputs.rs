//! The edge inputs: arrays the public C API accepts that a careful caller might still hand
//! a sampler (after grammar masking, after a model overflows, from a buggy caller).
//!
//! Each names whether the oracle has an answer for it. Arrays with NaN or `+inf` logits,
//! repeated ids or no finite logit at all have none: a distribution over them is undefined,
//! so what a sampler does there is recorded, never judged.

use oracle::truncation::{Entry, Pool};
use oracle::TokenId;

/// Every input's ids are below this, so samplers that take a vocabulary size get this one.
pub const N_VOCAB: i32 = 8;

/// One edge input, handed over in the order listed with `sorted = false` (honest).
#[derive(Debug, Clone, PartialEq)]
pub struct EdgeInput {
    /// Short name used in tables, JSON and `--input`.
    pub name: &'static str,
    /// What it stands for, in one line.
    pub what: &'static str,
    pub entries: Vec<(TokenId, f32)>,
}

impl EdgeInput {
    /// The entries as `id:logit`, in order.
    pub fn written(&self) -> Vec<String> {
        (self.entries.iter())
            .map(|(id, l)| format!("{id}:{l}"))
            .collect()
    }
}

fn ids(logits: &[(i32, f32)]) -> Vec<(TokenId, f32)> {
    logits.iter().map(|&(i, l)| (TokenId(i), l)).collect()
}

const NEG: f32 = f32::NEG_INFINITY;

pub fn all() -> Vec<EdgeInput> {
    let input = |name, what, e: &[(i32, f32)]| EdgeInput {
        name,
        what,
        entries: ids(e),
    };
    vec![
        input(
            "plain",
            "four distinct finite logits, ids in order (the baseline)",
            &[(0, 2.0), (1, 1.0), (2, 0.5), (3, -1.0)],
        ),
        input("empty", "no candidates (size 0)", &[]),
        input("one", "a single candidate", &[(0, 1.0)]),
        input(
            "all-neg-inf",
            "every logit -inf (everything masked)",
            &[(0, NEG), (1, NEG), (2, NEG), (3, NEG)],
        ),
        input(
            "some-neg-inf",
            "two of four logits -inf (masked, as after a grammar)",
            &[(0, 2.0), (1, NEG), (2, 1.0), (3, NEG)],
        ),
        input(
            "nan",
            "one NaN logit among finite ones",
            &[(0, 2.0), (1, f32::NAN), (2, 0.5), (3, -1.0)],
        ),
        input(
            "pos-inf",
            "one +inf logit among finite ones",
            &[(0, 2.0), (1, f32::INFINITY), (2, 0.5), (3, -1.0)],
        ),
        input(
            "equal",
            "four equal logits",
            &[(0, 1.0), (1, 1.0), (2, 1.0), (3, 1.0)],
        ),
        input(
            "zero-prob",
            "a logit 200 below the top: its probability is 0 in f32 (typical's entropy)",
            &[(0, 0.0), (1, -200.0), (2, -1.0), (3, -2.0)],
        ),
        input(
            "large",
            "finite logits far above 88 (exp overflows f32 unless the max is subtracted)",
            &[(0, 200.0), (1, 150.0), (2, 1.0), (3, 0.0)],
        ),
        input(
            "out-of-order",
            "distinct logits, ids and logits in no order",
            &[(3, 0.5), (0, -1.0), (2, 2.0), (1, 1.0)],
        ),
        input(
            "repeated-id",
            "id 1 appears twice with different logits",
            &[(0, 2.0), (1, 1.0), (1, 0.5), (2, -1.0)],
        ),
    ]
}

/// Why the oracle has no answer for `entries`, or the pool it answers for.
pub fn domain(entries: &[(TokenId, f32)]) -> Result<Pool, String> {
    if let Some((id, l)) = entries
        .iter()
        .find(|(_, l)| l.is_nan() || *l == f32::INFINITY)
    {
        return Err(format!("id {id} has logit {l}: no distribution is defined"));
    }
    let mut seen: Vec<TokenId> = entries.iter().map(|(id, _)| *id).collect();
    seen.sort();
    if let Some(w) = seen.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!(
            "id {} appears twice: the array is no set of ids",
            w[0]
        ));
    }
    if !entries.is_empty() && entries.iter().all(|(_, l)| *l == f32::NEG_INFINITY) {
        return Err("every logit is -inf: softmax is undefined".to_string());
    }
    Ok(Pool::new(
        entries.iter().map(|&(id, logit)| Entry { id, logit }),
    ))
}
