//! Exact reference semantics for the samplers under audit: `window` and `penalty` serve F1;
//! `stage`, `truncation` and `draw` F2; `scope` F3; `gauge` and `stats` F4; `fit` and `power` F7; `rng`
//! the seeded cases of F2, F4 and F5.
//!
//! Plain Rust with no FFI and no dependency: every function is a from-scratch statement of
//! what a sampler's parameters promise, written to be checked by eye. Subjects are judged
//! against these functions, never the other way round, and each is tested on its own.

pub mod draw;
pub mod fit;
pub mod gauge;
pub mod penalty;
pub mod power;
pub mod rng;
pub mod scope;
pub mod stage;
pub mod stats;
pub mod truncation;
pub mod window;

/// A token id as llama.cpp sees it (`llama_token` is an `i32`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TokenId(pub i32);

impl std::fmt::Display for TokenId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// llama.cpp's greedy rule on an id-ordered array: the first maximum, so the lowest id among
/// equal values. The same rule for the f32 logits a model hands back and for the f64 values
/// the oracle computes.
pub fn argmax<T: PartialOrd>(x: &[T]) -> TokenId {
    let best = (0..x.len()).fold(0, |best, i| if x[i] > x[best] { i } else { best });
    TokenId(best as i32)
}

/// Token ids from plain integers (for tables of cases, in tests and audits alike).
pub fn token_ids(v: &[i32]) -> Vec<TokenId> {
    v.iter().map(|&i| TokenId(i)).collect()
}

/// The survivor set of `(id, logit)` pairs in any order: the ids a sampler could still choose,
/// those with a logit above `-inf` (NaN is not above it), ascending. The one definition: the
/// oracle's pools ([`truncation::Pool::survivors`]) and the repros' readings of llama.cpp's
/// arrays both go through it.
pub fn survivors(pairs: impl IntoIterator<Item = (TokenId, f32)>) -> Vec<TokenId> {
    let mut ids: Vec<TokenId> = pairs
        .into_iter()
        .filter(|&(_, logit)| logit > f32::NEG_INFINITY)
        .map(|(id, _)| id)
        .collect();
    ids.sort();
    ids
}

/// Distance between two f32 values in units in the last place (0 when equal, `-inf`
/// included; `u64::MAX` when only one is finite).
pub fn ulps(a: f32, b: f32) -> u64 {
    if a == b {
        return 0;
    }
    if !a.is_finite() || !b.is_finite() {
        return u64::MAX;
    }
    // Map the bit patterns onto a line where adjacent floats are adjacent integers.
    let key = |x: f32| {
        let bits = x.to_bits() as i32;
        (if bits < 0 { i32::MIN - bits } else { bits }) as i64
    };
    key(a).abs_diff(key(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argmax_takes_the_first_of_equal_maxima() {
        assert_eq!(argmax(&[0.5f32, 2.0, -1.0, 2.0]), TokenId(1));
        assert_eq!(argmax(&[f32::NEG_INFINITY, f32::NEG_INFINITY]), TokenId(0));
        assert_eq!(argmax(&[-3.0f64, -1.0, -1.0]), TokenId(1));
    }

    #[test]
    fn survivors_drop_minus_infinity_and_come_out_ascending() {
        let pairs = [
            (TokenId(7), 0.5),
            (TokenId(2), f32::NEG_INFINITY),
            (TokenId(3), -1e30),
            (TokenId(0), f32::NAN),
            (TokenId(5), 2.0),
        ];
        assert_eq!(survivors(pairs), [TokenId(3), TokenId(5), TokenId(7)]);
        assert!(survivors([(TokenId(1), f32::NEG_INFINITY)]).is_empty());
        assert!(survivors([]).is_empty());
    }
}
