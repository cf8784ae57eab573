//! Reading a result under another tie-break. Where the oracle's answer rests only on how equal
//! logits are ordered (a cut or a greedy choice inside a group of equal logits), any order is
//! allowed: the graph may keep other members of the group than the oracle's canonical order
//! (id ascending) keeps, but it must keep as many of them, and everything outside the groups
//! must be the same. Such a result equals the oracle's after a relabelling that exchanges ids
//! of equal logit; [`relabelling`] finds it when it exists.
//!
//! The groups are read from the pool entering the first stage whose decision was a tie, and a
//! relabelling is allowed only when no later stage reads ids (a `logit_bias` or `penalties`
//! after the cut would treat exchanged ids differently, so the oracle's answer would no
//! longer be one up to relabelling).

use oracle::stage::Stage;
use oracle::truncation::{compose, Composition, Pool};
use oracle::TokenId;
use std::collections::BTreeMap;

/// Whether the oracle's answer is decided up to a tie-break: it has edges, every one a tie,
/// and no stage after the first of them reads ids. Returns the pool that entered that stage.
pub fn decidable(
    stages: &[Stage],
    pool: &Pool,
    history: &[TokenId],
    comp: &Composition,
) -> Option<Pool> {
    let first = comp.edges.iter().map(|(i, _)| *i).min()?;
    let all_ties = comp.edges.iter().all(|(_, e)| e.is_tie());
    let reads_ids_after =
        (stages[first + 1..].iter()).any(|s| s.reads_history() || !s.named_ids().is_empty());
    (all_ties && !reads_ids_after).then(|| compose(&stages[..first], pool, history).pool)
}

/// A result to compare: the ids kept (ascending) and the id chosen, if any.
pub struct Answer<'a> {
    pub survivors: &'a [TokenId],
    pub selected: Option<TokenId>,
}

/// The exchange of ids of equal logit in `groups` (the pool [`decidable`] returned) that turns
/// `graph` into `oracle`, as `(graph's id, oracle's id)` pairs for the ids it moves; `None`
/// when no such exchange exists (then the two differ under every tie-break). An empty list
/// means they already agree.
///
/// `choice_is_draw`: a draw is not a tie-break; only a deterministic choice (greedy) may be
/// exchanged for the oracle's.
pub fn relabelling(
    groups: &Pool,
    graph: Answer<'_>,
    oracle: Answer<'_>,
    choice_is_draw: bool,
) -> Option<Vec<(TokenId, TokenId)>> {
    let key: BTreeMap<TokenId, u32> = (groups.entries().iter())
        .map(|e| (e.id, e.logit.to_bits()))
        .collect();
    let only = |a: &[TokenId], b: &[TokenId]| -> BTreeMap<u32, Vec<TokenId>> {
        let mut by_group: BTreeMap<u32, Vec<TokenId>> = BTreeMap::new();
        for id in a.iter().filter(|id| b.binary_search(id).is_err()) {
            // An id outside the pool (never a candidate) is its own group: it pairs with nothing.
            let k = key.get(id).copied().unwrap_or(u32::MAX - id.0 as u32);
            by_group.entry(k).or_default().push(*id);
        }
        by_group
    };
    let graph_only = only(graph.survivors, oracle.survivors);
    let oracle_only = only(oracle.survivors, graph.survivors);
    if graph_only.keys().ne(oracle_only.keys())
        || graph_only
            .iter()
            .any(|(k, g)| oracle_only.get(k).map(Vec::len) != Some(g.len()))
    {
        return None;
    }
    let mut map: BTreeMap<TokenId, TokenId> = BTreeMap::new();
    for (k, g) in &graph_only {
        for (&from, &to) in g.iter().zip(&oracle_only[k]) {
            map.insert(from, to);
        }
    }
    // A greedy choice among equal logits: exchange it with the oracle's when both are kept
    // and of equal logit; the set stays the same.
    if let (false, Some(chosen), Some(expected)) = (choice_is_draw, graph.selected, oracle.selected)
    {
        let moved = map.get(&chosen).copied().unwrap_or(chosen);
        let kept = |id| oracle.survivors.binary_search(&id).is_ok();
        if moved != expected
            && key.get(&moved) == key.get(&expected)
            && kept(moved)
            && kept(expected)
        {
            // The id that lands on `expected` now lands on `moved`, and the chosen one on `expected`.
            let onto_expected = (graph.survivors.iter())
                .find(|&&x| map.get(&x).copied().unwrap_or(x) == expected)
                .copied();
            map.insert(chosen, expected);
            if let Some(x) = onto_expected {
                map.insert(x, moved);
            }
        }
    }
    Some(map.into_iter().filter(|(a, b)| a != b).collect())
}

/// `id` under `pairs` (unchanged when it is not moved).
pub fn apply(pairs: &[(TokenId, TokenId)], id: TokenId) -> TokenId {
    pairs
        .iter()
        .find(|(from, _)| *from == id)
        .map_or(id, |(_, to)| *to)
}

#[cfg(test)]
mod tests {
    use super::*;
    use oracle::token_ids as ids;

    /// Ids 0..=5: 0 at 9, 1..=3 tied at 5, 4 and 5 tied at 1.
    fn pool() -> Pool {
        Pool::from_logits(&[9.0, 5.0, 5.0, 5.0, 1.0, 1.0])
    }

    fn answer(s: &[TokenId], selected: Option<i32>) -> Answer<'_> {
        Answer {
            survivors: s,
            selected: selected.map(TokenId),
        }
    }

    #[test]
    fn another_tie_break_inside_a_group_is_relabelled() {
        let (g, o) = (ids(&[0, 2, 3]), ids(&[0, 1, 2]));
        let pairs = relabelling(&pool(), answer(&g, None), answer(&o, None), false).unwrap();
        assert_eq!(pairs, vec![(TokenId(3), TokenId(1))]);
    }

    #[test]
    fn keeping_more_or_fewer_of_a_group_has_no_relabelling() {
        let o = ids(&[0, 1, 2]);
        for g in [ids(&[0, 1, 2, 3]), ids(&[0, 1]), ids(&[0, 1, 4])] {
            assert!(relabelling(&pool(), answer(&g, None), answer(&o, None), false).is_none());
        }
    }

    #[test]
    fn ids_of_different_logits_are_never_exchanged() {
        let (g, o) = (ids(&[0, 1, 4]), ids(&[0, 1, 2]));
        assert!(relabelling(&pool(), answer(&g, None), answer(&o, None), false).is_none());
    }

    #[test]
    fn a_greedy_choice_among_equals_is_exchanged_but_a_draw_is_not() {
        let all = ids(&[1, 2, 3]);
        let tied = Pool::from_logits(&[0.0, 5.0, 5.0, 5.0]);
        let pairs = relabelling(&tied, answer(&all, Some(3)), answer(&all, Some(1)), false);
        let pairs = pairs.unwrap();
        assert_eq!(apply(&pairs, TokenId(3)), TokenId(1));
        let mut moved: Vec<TokenId> = all.iter().map(|&x| apply(&pairs, x)).collect();
        moved.sort();
        assert_eq!(moved, all, "the exchange keeps the set");
        let drawn = relabelling(&tied, answer(&all, Some(3)), answer(&all, Some(1)), true);
        assert_eq!(drawn, Some(vec![]));
    }

    #[test]
    fn a_choice_and_a_cut_in_one_group_compose() {
        // The graph kept {2, 3} and chose 3; the oracle kept {1, 2} and chose 1.
        let (g, o) = (ids(&[2, 3]), ids(&[1, 2]));
        let tied = Pool::from_logits(&[0.0, 5.0, 5.0, 5.0]);
        let pairs = relabelling(&tied, answer(&g, Some(3)), answer(&o, Some(1)), false).unwrap();
        let mut moved: Vec<TokenId> = g.iter().map(|&x| apply(&pairs, x)).collect();
        moved.sort();
        assert_eq!(moved, o);
        assert_eq!(apply(&pairs, TokenId(3)), TokenId(1));
    }

    #[test]
    fn only_tie_edges_with_no_id_reader_after_them_are_decidable() {
        let p = Pool::from_logits(&[5.0, 5.0, 5.0, 1.0]);
        let top_k: Stage = "top_k=2".parse().unwrap();
        let bias: Stage = "logit_bias=3:+1".parse().unwrap();
        let greedy = Stage::Greedy;
        let go = |stages: &[Stage], p: &Pool| decidable(stages, p, &[], &compose(stages, p, &[]));
        assert!(go(std::slice::from_ref(&top_k), &p).is_some());
        assert!(go(&[bias.clone(), top_k.clone(), greedy], &p).is_some());
        assert!(
            go(&[top_k.clone(), bias], &p).is_none(),
            "a bias after the cut reads ids"
        );
        let margin: Stage = "top_p=0.5".parse().unwrap();
        let q = Pool::from_logits(&[1.0, 1.0, 1.0, 1.0]);
        assert!(go(&[margin], &q).is_none(), "a margin is no tie");
        let none = Pool::from_logits(&[3.0, 2.0, 1.0]);
        assert!(go(&[top_k], &none).is_none(), "no edge, nothing to decide");
    }
}
