//! Both binaries: the stock one exits 1 (candle cuts top_p on the whole vocabulary's mass), the
//! one on the patched generation module exits 0, each printing what it expected and what it got.

use candle_topk_then_topp::rule;
use std::process::Command;

fn run(exe: &str) -> (Option<i32>, String) {
    let out = Command::new(exe).output().expect("the binary runs");
    let text = String::from_utf8(out.stdout).expect("utf-8");
    (out.status.code(), text)
}

#[test]
fn the_two_rules_keep_different_sets() {
    assert_eq!(rule(true), [(3, 1.0)]);
    let whole = rule(false);
    let ids: Vec<u32> = whole.iter().map(|&(i, _)| i).collect();
    assert_eq!(ids, [3, 1]);
    assert!((whole[1].1 - 1.0 / 3.0).abs() < 1e-12, "{whole:?}");
}

#[test]
fn stock_exits_1_and_patched_exits_0() {
    let (stock, s) = run(env!("CARGO_BIN_EXE_candle-topk-then-topp"));
    let (patched, p) = run(env!("CARGO_BIN_EXE_candle-topk-then-topp-patched"));
    for text in [&s, &p] {
        assert!(text.starts_with("expected: "), "{text}");
        assert!(text.contains("keeps {3}: all 200 draws"), "{text}");
        assert!(
            text.contains("\ngot:      candle-transformers 0.11.1"),
            "{text}"
        );
    }
    assert_eq!(stock, Some(1), "{s}");
    assert!(!s.contains(", 0 outside {3}"), "{s}");
    assert_eq!(patched, Some(0), "{p}");
    assert!(
        p.contains(
            "got:      candle-transformers 0.11.1 + fix.patch: id:draws 3:200, 0 outside {3}"
        ),
        "{p}"
    );
}
