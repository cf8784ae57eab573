//! The penalty window, counted from scratch.
//!
//! Serves F1: a clone's counts are judged against `histogram` (and `dense_histogram` in the
//! sweep). `WindowLen` is also the window of F2's `penalties` stage and of every penalty that
//! F3, F4 and F5 build.
//!
//! llama.cpp keeps the last `penalty_last_n` accepted ids in a ring buffer and maintains a
//! per-id count incrementally on every accept. The reference here does the opposite: it
//! keeps nothing and recounts the window from the full accept history each time it is
//! asked, so it shares no bookkeeping (and no bookkeeping bug) with the subject.

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

    fn ids(xs: &[i32]) -> Vec<TokenId> {
        xs.iter().copied().map(TokenId).collect()
    }

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
        let got = histogram(&h, WindowLen(4));
        let want: Histogram = [
            (TokenId(5), 1),
            (TokenId(6), 1),
            (TokenId(7), 1),
            (TokenId(8), 1),
        ]
        .into_iter()
        .collect();
        assert_eq!(got, want);
        assert_eq!(count(&h, WindowLen(4), TokenId(5)), 1);
        assert_eq!(count(&h, WindowLen(5), TokenId(5)), 2);
        assert_eq!(count(&h, WindowLen(4), TokenId(9)), 0);
    }

    #[test]
    fn dense_histogram_equals_histogram() {
        let mut rng = crate::rng::Rng::new(7);
        let mut h = Vec::new();
        let mut dense = [0i64; 5];
        for _ in 0..60 {
            h.push(TokenId(rng.below(5) as i32));
            for n in 0..9 {
                dense_histogram(&h, WindowLen(n), &mut dense);
                let sparse = histogram(&h, WindowLen(n));
                for (i, &c) in dense.iter().enumerate() {
                    assert_eq!(c, sparse.get(&TokenId(i as i32)).copied().unwrap_or(0));
                }
            }
        }
    }

    #[test]
    fn histogram_total_is_the_window_length() {
        // Every prefix of a fixed pseudo-random sequence, every window length up to 10.
        let mut h = Vec::new();
        let mut rng = crate::rng::Rng::new(12345);
        for _ in 0..50 {
            h.push(TokenId(rng.below(4) as i32));
            for n in 0..10 {
                let total: i64 = histogram(&h, WindowLen(n)).values().sum();
                assert_eq!(total as usize, n.min(h.len()));
            }
        }
    }
}
