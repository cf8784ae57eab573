//! The penalty window, counted from scratch (F1 judges a clone's counts against `histogram`,
//! and `dense_histogram` in the sweep). llama.cpp keeps a ring buffer and updates per-id
//! counts on every accept; this keeps nothing and recounts the window from the full history
//! each time, so it shares no bookkeeping (and no bookkeeping bug) with the subject.

use crate::TokenId;
use std::collections::BTreeMap;

/// How many of the most recent accepted ids a penalty looks at (`penalty_last_n`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WindowLen(pub usize);

/// Per-id counts; ids absent from the map have count 0.
pub type Histogram = BTreeMap<TokenId, i64>;

/// The ids a window of `last_n` covers after `history` was accepted in order.
pub fn window(history: &[TokenId], last_n: WindowLen) -> &[TokenId] {
    let start = history.len().saturating_sub(last_n.0);
    &history[start..]
}

/// Counts of each id among the last `last_n` accepted ids, recounted from scratch.
pub fn histogram(history: &[TokenId], last_n: WindowLen) -> Histogram {
    let mut counts = Histogram::new();
    for &id in window(history, last_n) {
        *counts.entry(id).or_insert(0) += 1;
    }
    counts
}

/// The same counts for ids `0..out.len()`, written into `out` without allocating: the form an
/// exhaustive sweep over a small alphabet needs at every step. Every id in the window must be
/// below `out.len()` (a caller bug otherwise, which panics).
pub fn dense_histogram(history: &[TokenId], last_n: WindowLen, out: &mut [i64]) {
    out.fill(0);
    for &id in window(history, last_n) {
        out[id.0 as usize] += 1;
    }
}

/// The count of one id in the window (0 when absent).
pub fn count(history: &[TokenId], last_n: WindowLen, id: TokenId) -> i64 {
    window(history, last_n).iter().filter(|&&x| x == id).count() as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::token_ids as ids;

    #[test]
    fn window_keeps_the_most_recent_ids() {
        let h = ids(&[1, 2, 3, 4, 5]);
        assert_eq!(window(&h, WindowLen(2)), &ids(&[4, 5])[..]);
        assert_eq!(window(&h, WindowLen(9)), &h[..]);
        assert!(window(&h, WindowLen(0)).is_empty());
    }

    #[test]
    fn histogram_counts_only_the_window() {
        let h = ids(&[5, 5, 6, 7, 8]);
        let want: Histogram = ids(&[5, 6, 7, 8]).into_iter().map(|id| (id, 1)).collect();
        assert_eq!(histogram(&h, WindowLen(4)), want);
        assert_eq!(count(&h, WindowLen(4), TokenId(5)), 1);
        assert_eq!(count(&h, WindowLen(5), TokenId(5)), 2);
        assert_eq!(count(&h, WindowLen(4), TokenId(9)), 0);
    }

    /// Every prefix of a seeded sequence and every window length: the dense counts equal the
    /// sparse ones, and they sum to the window's length.
    #[test]
    fn dense_histogram_equals_histogram_and_totals_the_window() {
        let mut rng = crate::rng::Rng::new(7);
        let mut h = Vec::new();
        let mut dense = [0i64; 5];
        for _ in 0..60 {
            h.push(TokenId(rng.below(5) as i32));
            for n in 0..10 {
                dense_histogram(&h, WindowLen(n), &mut dense);
                let sparse = histogram(&h, WindowLen(n));
                for (i, &c) in dense.iter().enumerate() {
                    assert_eq!(c, sparse.get(&TokenId(i as i32)).copied().unwrap_or(0));
                }
                assert_eq!(sparse.values().sum::<i64>() as usize, n.min(h.len()));
            }
        }
    }
}
