//! The synthetic input of the per-apply bench: one logits row and one window of history per
//! vocabulary size, and the two layouts of the candidate array.
//!
//! - Id order: entry `i` holds id `i`, as llama.cpp builds the array from a logits row. Every
//!   id in the window sits at its own index, so `ledger-penalties` goes straight to it.
//! - Shuffled: the same candidates in a fixed-seed permutation of the ids, as a stage that
//!   reorders the array leaves it (top_k sorts by logit). `ledger-penalties` then cannot
//!   index by id and makes one pass over the array, like llama.cpp's stage does.
//!
//! Everything comes from `oracle::rng::Rng` with fixed seeds, so every run times the same
//! input.

use crate::penalty::WINDOW;
use oracle::rng::Rng;
use subject::TokenId;

/// Seed of the logits rows and the windows (the vocabulary size is added, so each size gets
/// its own row).
pub const ROW_SEED: u64 = 0xF5_0001;
/// Seed of the shuffled layout's permutation (the vocabulary size is added too).
pub const SHUFFLE_SEED: u64 = 0xF5_0002;

/// How the candidate array is ordered when the penalties stage sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    IdOrder,
    Shuffled,
}

impl Layout {
    pub const ALL: [Layout; 2] = [Layout::IdOrder, Layout::Shuffled];

    /// The name in the JSON and the tables.
    pub fn key(self) -> &'static str {
        match self {
            Layout::IdOrder => "id-order",
            Layout::Shuffled => "shuffled",
        }
    }

    /// What the layout is, in the JSON files.
    pub fn describe(self) -> &'static str {
        match self {
            Layout::IdOrder => "entry i holds id i, as llama.cpp builds the array from a logits row",
            Layout::Shuffled => "the same candidates in a fixed-seed permutation of the ids (oracle::rng::Rng), as after a reordering stage such as top_k",
        }
    }

    /// The ids `0..n` in this layout's order.
    pub fn order(self, n: usize) -> Vec<TokenId> {
        let mut ids: Vec<TokenId> = (0..n as i32).map(TokenId).collect();
        if self == Layout::Shuffled {
            Rng::new(SHUFFLE_SEED.wrapping_add(n as u64)).shuffle(&mut ids);
        }
        ids
    }
}

/// What every stage sees at one vocabulary size.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// Logits in [-10, 10) in steps of 1/200, so both branches of the repeat factor occur.
    pub row: Vec<f32>,
    /// [`WINDOW`] ids accepted before timing, drawn uniformly from the vocabulary.
    pub history: Vec<TokenId>,
}

impl Workload {
    pub fn new(n: usize) -> Workload {
        let mut rng = Rng::new(ROW_SEED.wrapping_add(n as u64));
        let row = (0..n)
            .map(|_| rng.below(4000) as f32 / 200.0 - 10.0)
            .collect();
        let history = (0..WINDOW).map(|_| TokenId(rng.below(n) as i32)).collect();
        Workload { row, history }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_permutation(ids: &[TokenId]) -> bool {
        let mut sorted: Vec<i32> = ids.iter().map(|t| t.0).collect();
        sorted.sort();
        sorted.iter().enumerate().all(|(i, &id)| id == i as i32)
    }

    #[test]
    fn id_order_is_the_identity() {
        let ids = Layout::IdOrder.order(5);
        assert_eq!(ids, (0..5).map(TokenId).collect::<Vec<_>>());
    }

    #[test]
    fn shuffled_is_a_fixed_permutation_far_from_id_order() {
        let n = 49_152;
        let a = Layout::Shuffled.order(n);
        assert!(is_permutation(&a));
        assert_eq!(a, Layout::Shuffled.order(n));
        // Almost no id stays at its own index (about one is expected), so a stage that
        // indexes by id finds none of its window there.
        let fixed = a
            .iter()
            .enumerate()
            .filter(|(i, t)| t.0 == *i as i32)
            .count();
        assert!(fixed < 10, "{fixed} fixed points");
        // Another size is another permutation, not a prefix of this one.
        assert!(is_permutation(&Layout::Shuffled.order(1000)));
    }

    #[test]
    fn workload_is_fixed_in_range_and_sized() {
        let w = Workload::new(1000);
        assert_eq!(w, Workload::new(1000));
        assert_eq!(w.row.len(), 1000);
        assert_eq!(w.history.len(), WINDOW);
        assert!(w.row.iter().all(|&z| (-10.0..10.0).contains(&z)));
        assert!(w.row.iter().any(|&z| z < 0.0) && w.row.iter().any(|&z| z > 0.0));
        assert!(w.history.iter().all(|t| (0..1000).contains(&t.0)));
    }
}
