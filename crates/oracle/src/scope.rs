//! Which token ids a repetition penalty reaches, per stack, and the penalty itself (F3's
//! reference for each greedy step; F4's `gauge::sign` reuses `apply_repetition`).
//!
//! The formula is the same everywhere (transformers' `RepetitionPenaltyLogitsProcessor`,
//! candle's `apply_repeat_penalty`, llama.cpp's penalties with only `penalty_repeat` set):
//! every distinct id in the scope is penalized once, a positive logit divided by theta and
//! any other multiplied by it. What differs between stacks is the scope.

use crate::TokenId;
use std::collections::BTreeSet;

/// Which part of the sequence (prompt followed by generated tokens) is penalized.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    /// Every token of the sequence, prompt included (transformers).
    All,
    /// The last `n` tokens of the whole sequence (candle's llama example passes 128).
    Last(usize),
    /// The last `n` generated tokens only, prompt excluded.
    Generated(usize),
}

/// The distinct ids the penalty reaches in `prompt ++ generated` under `scope`.
pub fn penalized_ids(scope: Scope, prompt: &[TokenId], generated: &[TokenId]) -> BTreeSet<TokenId> {
    let total = prompt.len() + generated.len();
    let all = prompt.iter().chain(generated.iter());
    match scope {
        Scope::All => all.copied().collect(),
        Scope::Last(n) => all.skip(total.saturating_sub(n)).copied().collect(),
        Scope::Generated(n) => generated[generated.len().saturating_sub(n)..]
            .iter()
            .copied()
            .collect(),
    }
}

/// The sign-branched repetition penalty, once per distinct id in `ids`, in f32: `z / theta`
/// for `z > 0`, `z * theta` otherwise. (At `z == 0` both branches give 0, so `z > 0` and
/// llama.cpp's `z <= 0` test agree on every input.) Ids outside `logits` are ignored.
pub fn apply_repetition(logits: &mut [f32], ids: &BTreeSet<TokenId>, theta: f32) {
    for id in ids {
        if let Some(z) = usize::try_from(id.0).ok().and_then(|i| logits.get_mut(i)) {
            *z = if *z > 0.0 { *z / theta } else { *z * theta };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::token_ids as ids;

    fn set(v: &[i32]) -> BTreeSet<TokenId> {
        ids(v).into_iter().collect()
    }

    #[test]
    fn scopes_pick_the_right_tokens() {
        let (prompt, generated) = (ids(&[1, 2, 3]), ids(&[4, 2, 5]));
        // A window at least as long as the sequence is the whole sequence.
        for (scope, want) in [
            (Scope::All, &[1, 2, 3, 4, 5][..]),
            (Scope::Last(4), &[3, 4, 2, 5]),
            (Scope::Last(2), &[2, 5]),
            (Scope::Generated(2), &[2, 5]),
            (Scope::Generated(9), &[4, 2, 5]),
            (Scope::Last(6), &[1, 2, 3, 4, 5]),
            (Scope::Last(0), &[]),
        ] {
            assert_eq!(
                penalized_ids(scope, &prompt, &generated),
                set(want),
                "{scope:?}"
            );
        }
    }

    #[test]
    fn penalty_is_sign_branched_and_once_per_id() {
        let mut z = vec![2.6, -2.0, 0.0, 1.0];
        apply_repetition(&mut z, &set(&[0, 1, 2, 9]), 1.3);
        assert_eq!(z, vec![2.6f32 / 1.3, -2.0f32 * 1.3, 0.0, 1.0]);
    }
}
