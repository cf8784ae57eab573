//! Which token ids a repetition penalty reaches, per stack, and the penalty itself.
//!
//! Serves F3: `penalized_ids` and `apply_repetition` are the reference each greedy step is
//! checked against. F4's sign operator (`gauge::sign`) reuses `apply_repetition`.
//!
//! The formula is the same everywhere (transformers' `RepetitionPenaltyLogitsProcessor`,
//! candle's `apply_repeat_penalty`, llama.cpp's penalties with only `penalty_repeat` set):
//! every distinct id in the scope is penalized once, a positive logit divided by theta and
//! any other multiplied by it. What differs between stacks is the scope, i.e. which tokens
//! of the sequence are looked at.

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
        let prompt = ids(&[1, 2, 3]);
        let generated = ids(&[4, 2, 5]);
        assert_eq!(
            penalized_ids(Scope::All, &prompt, &generated),
            set(&[1, 2, 3, 4, 5])
        );
        assert_eq!(
            penalized_ids(Scope::Last(4), &prompt, &generated),
            set(&[3, 4, 2, 5])
        );
        assert_eq!(
            penalized_ids(Scope::Last(2), &prompt, &generated),
            set(&[2, 5])
        );
        assert_eq!(
            penalized_ids(Scope::Generated(2), &prompt, &generated),
            set(&[2, 5])
        );
        assert_eq!(
            penalized_ids(Scope::Generated(9), &prompt, &generated),
            set(&[4, 2, 5])
        );
        // A window at least as long as the sequence is the whole sequence.
        assert_eq!(
            penalized_ids(Scope::Last(6), &prompt, &generated),
            penalized_ids(Scope::All, &prompt, &generated)
        );
        assert_eq!(penalized_ids(Scope::Last(0), &prompt, &generated), set(&[]));
    }

    #[test]
    fn penalty_is_sign_branched_and_once_per_id() {
        let mut z = vec![2.6, -2.0, 0.0, 1.0];
        apply_repetition(&mut z, &set(&[0, 1, 2, 9]), 1.3);
        assert_eq!(z, vec![2.6f32 / 1.3, -2.0f32 * 1.3, 0.0, 1.0]);
    }
}
