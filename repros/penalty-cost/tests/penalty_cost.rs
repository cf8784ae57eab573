//! The end-to-end part on the real model, kept small: two rounds of four tokens. It checks the
//! shape of what is measured and that llama.cpp's penalties and ledger-penalties chose the same
//! tokens; nothing here asserts a speed.

use penalty_cost::e2e::{self, Plan, Variant};

#[test]
fn end_to_end_runs_every_variant_every_round() {
    let plan = Plan {
        rounds: 2,
        tokens: 4,
        threads: 1,
    };
    let e = e2e::run(models::resolve(e2e::MODEL).unwrap(), &plan).unwrap();
    assert!(e.prompt_tokens > 0);
    assert_eq!(e.rounds.len(), 2);
    for r in &e.rounds {
        assert_eq!(r.0.len(), Variant::ALL.len());
        for g in &r.0 {
            assert!((2..=4).contains(&g.tokens.len()), "{g:?}");
            assert!(g.ms_per_token.is_finite() && g.ms_per_token > 0.0, "{g:?}");
        }
    }
    assert!(e.builtin_tokens_equal_ledger());
    // Every round decodes the same prompt from a cleared context: same tokens every round.
    assert_eq!(
        e.rounds[0].of(Variant::None).tokens,
        e.rounds[1].of(Variant::None).tokens
    );
}
