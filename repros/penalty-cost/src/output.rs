//! What a run prints and writes: the text tables, `bench/penalty-cost.json` and
//! `bench/penalty-cost.svg`, all from the same measurements.

use crate::apply::ApplyRow;
use crate::e2e::{EndToEnd, Variant};
use crate::layout::{Layout, SHUFFLE_SEED};
use crate::penalty::{Penalty, THETA, WINDOW};
use crate::stats::{bootstrap_median, MedianCi};
use crate::FINDING;
use oracle::stats::{BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED};
use serde_json::{json, Map, Value};
use subject::BuildInfo;

/// Said with every result: what the numbers can and cannot carry.
pub const NOTE: &str =
    "timings from one run on a shared 2-core machine; ratios within the run are the claim";

/// The end-to-end summary: per variant, the median ms per token and, for the penalized
/// variants, the median paired overhead, each with its bootstrap interval.
pub struct Summary {
    pub ms: Vec<(Variant, MedianCi)>,
    pub overhead: Vec<(Variant, MedianCi)>,
}

impl Summary {
    pub fn of(e: &EndToEnd) -> Summary {
        Summary {
            ms: Variant::ALL
                .iter()
                .map(|&v| (v, bootstrap_median(&e.ms_per_token(v))))
                .collect(),
            overhead: [Variant::Builtin, Variant::Ledger]
                .iter()
                .map(|&v| (v, bootstrap_median(&e.overheads(v))))
                .collect(),
        }
    }

    fn overhead_of(&self, v: Variant) -> Option<MedianCi> {
        self.overhead.iter().find(|(w, _)| *w == v).map(|(_, c)| *c)
    }
}

/// The tables printed on stdout.
pub fn text(build: &BuildInfo, rounds: usize, rows: &[ApplyRow], e: &EndToEnd) -> String {
    let mut out = format!(
        "F5 penalty cost on {}\nper apply (median of {rounds} interleaved rounds, window {WINDOW}, theta {THETA}; \
         the refill is timed apart and not included)\n  candidates  layout     llama.cpp ms   ledger ms      ratio  \
         normalized ms   ratio  refill ms\n",
        build.describe()
    );
    for r in rows {
        out.push_str(&format!(
            "  {:>10}  {:<9}  {:>12.4}  {:>10.5}  {:>8.1}x  {:>13.4}  {:>5.2}x  {:>9.4}\n",
            r.vocab,
            r.layout.key(),
            r.ms_of(Penalty::Builtin),
            r.ms_of(Penalty::Ledger),
            r.ratio(Penalty::Ledger),
            r.ms_of(Penalty::LedgerNormalized),
            r.ratio(Penalty::LedgerNormalized),
            r.refill_ms
        ));
    }
    let s = Summary::of(e);
    out.push_str(&format!(
        "end to end: {} ({}), {}-token prompt, {} tokens per generation x {} interleaved rounds \
         (none, builtin, ledger in each), decoding threads: {}\n  median ms per token and \
         overhead over no penalty (paired within rounds), [95% bootstrap interval]\n",
        crate::e2e::MODEL,
        e.model,
        e.prompt_tokens,
        e.plan.tokens,
        e.plan.rounds,
        e.plan.threads
    ));
    for (v, c) in &s.ms {
        out.push_str(&format!(
            "    {:<20} {:>8.2} [{:.2}, {:.2}]",
            v.label(),
            c.median,
            c.lo,
            c.hi
        ));
        if let Some(o) = s.overhead_of(*v) {
            out.push_str(&format!(
                "   {:+.1}% [{:+.1}, {:+.1}]",
                o.median, o.lo, o.hi
            ));
        }
        out.push('\n');
    }
    out.push_str(&format!(
        "  llama.cpp's penalties and ledger-penalties chose the same tokens in every round: {}; \
         generations ended by an end-of-generation token: none {}, builtin {}, ledger {}\n",
        if e.builtin_tokens_equal_ledger() {
            "yes"
        } else {
            "no"
        },
        e.eos_stops(Variant::None),
        e.eos_stops(Variant::Builtin),
        e.eos_stops(Variant::Ledger)
    ));
    out.push_str(&format!("  ({NOTE})\n"));
    out
}

/// An f32 parameter as it is written in the source (1.1, not 1.100000023841858).
fn as_written(x: f32) -> f64 {
    x.to_string().parse().unwrap_or(f64::NAN)
}

fn interval(c: &MedianCi) -> Value {
    json!([c.lo, c.hi])
}

/// The rows of one layout: llama.cpp beside ledger's default mode, and beside its normalized
/// mode (the latter with the refill time).
fn layout_rows(rows: &[ApplyRow], layout: Layout) -> (Vec<Value>, Vec<Value>) {
    let of = rows.iter().filter(|r| r.layout == layout);
    let plain = of
        .clone()
        .map(|r| {
            json!({
                "vocab": r.vocab,
                "layout": layout.key(),
                "builtin_ms": r.ms_of(Penalty::Builtin),
                "ledger_ms": r.ms_of(Penalty::Ledger),
                "ratio": r.ratio(Penalty::Ledger),
            })
        })
        .collect();
    let normalized = of
        .map(|r| {
            json!({
                "vocab": r.vocab,
                "layout": layout.key(),
                "builtin_ms": r.ms_of(Penalty::Builtin),
                "ledger_normalized_ms": r.ms_of(Penalty::LedgerNormalized),
                "ratio": r.ratio(Penalty::LedgerNormalized),
                "refill_ms": r.refill_ms,
            })
        })
        .collect();
    (plain, normalized)
}

/// `bench/penalty-cost.json`: the keys of earlier runs (`rows` and `normalized_rows` are the
/// id-order layout; `end_to_end.ms_per_token` and `overhead_percent` now hold medians over
/// rounds) and the new ones beside them.
pub fn json(build: &BuildInfo, rounds: usize, rows: &[ApplyRow], e: &EndToEnd) -> Value {
    let (rows_id, norm_id) = layout_rows(rows, Layout::IdOrder);
    let (rows_sh, norm_sh) = layout_rows(rows, Layout::Shuffled);
    let s = Summary::of(e);
    let by_variant = |f: &dyn Fn(&MedianCi) -> Value, list: &[(Variant, MedianCi)]| {
        let mut m = Map::new();
        for (v, c) in list {
            m.insert(v.key().to_string(), f(c));
        }
        Value::Object(m)
    };
    let count = |f: &dyn Fn(Variant) -> usize| {
        let mut m = Map::new();
        for v in Variant::ALL {
            m.insert(v.key().to_string(), json!(f(v)));
        }
        Value::Object(m)
    };
    let per_round: Vec<Value> = e
        .rounds
        .iter()
        .map(|r| {
            let mut m = Map::new();
            for v in Variant::ALL {
                m.insert(v.key().to_string(), json!(r.of(v).ms_per_token));
            }
            Value::Object(m)
        })
        .collect();
    json!({
        "finding": FINDING,
        "build": build.tag(),
        "build_detail": build.describe(),
        "window": WINDOW,
        "theta": as_written(THETA),
        "rounds": rounds,
        "layouts": {
            "id-order": "entry i holds id i, as llama.cpp builds the array from a logits row",
            "shuffled": "the same candidates in a fixed-seed permutation of the ids (oracle::rng::Rng), as after a reordering stage such as top_k",
        },
        "shuffle_seed": SHUFFLE_SEED,
        "rows": rows_id,
        "normalized_rows": norm_id,
        "shuffled_rows": rows_sh,
        "shuffled_normalized_rows": norm_sh,
        "end_to_end": {
            "model": crate::e2e::MODEL,
            "model_detail": e.model,
            "prompt_tokens": e.prompt_tokens,
            "rounds": e.plan.rounds,
            "tokens_per_generation": e.plan.tokens,
            "tokens_per_round": e.plan.tokens * Variant::ALL.len(),
            "threads": e.plan.threads,
            "timed": "each generation from its first logits to its last: every step samples, accepts, decodes one token and reads the next logits; the prompt's decode is not timed",
            "statistic": format!("median over rounds with a 95% percentile bootstrap interval ({BOOTSTRAP_RESAMPLES} resamples, seed {BOOTSTRAP_SEED})"),
            "ms_per_token": by_variant(&|c| json!(c.median), &s.ms),
            "ms_per_token_interval": by_variant(&interval, &s.ms),
            "overhead_percent": by_variant(&|c| json!(c.median), &s.overhead),
            "overhead_percent_interval": by_variant(&interval, &s.overhead),
            "generated_tokens": count(&|v| e.generated(v)),
            "eos_stops": count(&|v| e.eos_stops(v)),
            "builtin_tokens_equal_ledger": e.builtin_tokens_equal_ledger(),
            "per_round_ms_per_token": per_round,
        },
        "note": NOTE,
    })
}

const COLOURS: [&str; 3] = ["#D55E00", "#0072B2", "#009E73"];

/// `bench/penalty-cost.svg`: per-apply medians on a log scale, one group per vocabulary size
/// and layout; beside it the end-to-end overhead medians with their intervals.
pub fn svg(rows: &[ApplyRow], e: &EndToEnd) -> String {
    let (w, h, left, top, ph) = (940.0, 400.0, 80.0, 70.0, 240.0);
    let (lo, hi) = (-4.0f64, 1.0f64); // log10 ms: 0.1 us to 10 ms
    let y = |ms: f64| top + ph * (hi - ms.max(1e-4).log10()) / (hi - lo);
    let group = 120.0;
    let right = left + 20.0 + group * rows.len() as f64;
    let mut o = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" \
         font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{left}\" y=\"24\" font-size=\"15\" font-weight=\"bold\">F5: penalty stage cost per apply \
         (median, window {WINDOW}) and per token</text>\n"
    );
    for e10 in -4..=1 {
        let yy = y(10f64.powi(e10));
        o.push_str(&format!(
            "<line x1=\"{left}\" y1=\"{yy:.1}\" x2=\"{right:.1}\" y2=\"{yy:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{} ms</text>\n",
            left - 6.0,
            yy + 4.0,
            10f64.powi(e10)
        ));
    }
    for (j, r) in rows.iter().enumerate() {
        let x0 = left + 16.0 + group * j as f64;
        for (k, &stage) in Penalty::ALL.iter().enumerate() {
            let x = x0 + 30.0 * k as f64;
            let m = r.ms_of(stage);
            o.push_str(&format!(
                "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"26\" height=\"{:.1}\" fill=\"{}\"/>\n",
                y(m),
                top + ph - y(m),
                COLOURS[k]
            ));
        }
        let cx = x0 + 43.0;
        o.push_str(&format!(
            "<text x=\"{cx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\
             <text x=\"{cx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\n",
            top + ph + 18.0,
            r.vocab,
            top + ph + 34.0,
            r.layout.key()
        ));
    }
    o.push_str(&format!(
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">candidates, layout</text>\n",
        (left + right) / 2.0,
        top + ph + 54.0
    ));
    for (k, stage) in Penalty::ALL.iter().enumerate() {
        let lx = left + 200.0 * k as f64;
        o.push_str(&format!(
            "<rect x=\"{lx:.1}\" y=\"38\" width=\"12\" height=\"12\" fill=\"{}\"/>\
             <text x=\"{:.1}\" y=\"48\">{}</text>\n",
            COLOURS[k],
            lx + 18.0,
            stage.label()
        ));
    }
    o.push_str(&overhead_panel(e, right + 70.0, top, ph));
    o.push_str("</svg>\n");
    o
}

/// The end-to-end panel: overhead over no penalty, median and 95% interval per variant.
fn overhead_panel(e: &EndToEnd, x0: f64, top: f64, ph: f64) -> String {
    let s = Summary::of(e);
    let cis: Vec<(Variant, MedianCi)> = s.overhead.clone();
    let finite = |x: f64| if x.is_finite() { x } else { 0.0 };
    let lo = cis
        .iter()
        .map(|(_, c)| finite(c.lo))
        .fold(0.0f64, f64::min)
        .floor()
        - 1.0;
    let hi = cis
        .iter()
        .map(|(_, c)| finite(c.hi))
        .fold(0.0f64, f64::max)
        .ceil()
        + 1.0;
    let y = |p: f64| top + ph * (hi - finite(p)) / (hi - lo);
    let width = 180.0;
    let mut o = format!(
        "<text x=\"{x0:.1}\" y=\"{:.1}\">end to end, {} rounds x {} tokens</text>\n\
         <line x1=\"{x0:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#888\"/>\
         <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">0%</text>\n",
        top - 8.0,
        e.plan.rounds,
        e.plan.tokens,
        y(0.0),
        x0 + width,
        y(0.0),
        x0 - 6.0,
        y(0.0) + 4.0
    );
    for p in [lo, hi] {
        o.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{p:+.0}%</text>\n",
            x0 - 6.0,
            y(p) + 4.0
        ));
    }
    for (k, (v, c)) in cis.iter().enumerate() {
        let colour = if *v == Variant::Builtin {
            COLOURS[0]
        } else {
            COLOURS[1]
        };
        let x = x0 + 30.0 + 80.0 * k as f64;
        let (y0, ym) = (y(0.0), y(c.median));
        o.push_str(&format!(
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"40\" height=\"{:.1}\" fill=\"{colour}\"/>\n\
             <line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"black\"/>\n\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{:+.1}%</text>\n\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\n",
            y0.min(ym),
            (y0 - ym).abs(),
            x + 20.0,
            y(c.lo),
            x + 20.0,
            y(c.hi),
            x + 20.0,
            top + ph + 18.0,
            c.median,
            x + 20.0,
            top + ph + 34.0,
            v.key()
        ));
    }
    o.push_str(&format!(
        "<text x=\"{x0:.1}\" y=\"{:.1}\">overhead over no penalty (median, 95% interval)</text>\n",
        top + ph + 54.0
    ));
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::e2e::{Generation, Plan, Round};
    use harness::Stop;
    use subject::TokenId;

    fn sample() -> (Vec<ApplyRow>, EndToEnd) {
        let rows = vec![
            ApplyRow {
                vocab: 100,
                layout: Layout::IdOrder,
                ms: [1.0, 0.001, 0.5],
                refill_ms: 0.1,
            },
            ApplyRow {
                vocab: 100,
                layout: Layout::Shuffled,
                ms: [1.0, 0.25, 0.5],
                refill_ms: 0.2,
            },
        ];
        let g = |ms: f64| Generation {
            ms_per_token: ms,
            tokens: vec![TokenId(1), TokenId(2)],
            stop: Stop::Limit,
        };
        let rounds = (0..4)
            .map(|i| {
                let base = 10.0 + i as f64;
                Round(vec![g(base), g(base * 1.1), g(base)])
            })
            .collect();
        let e = EndToEnd {
            model: "test".into(),
            prompt_tokens: 5,
            plan: Plan {
                rounds: 4,
                tokens: 2,
                threads: 1,
            },
            rounds,
        };
        (rows, e)
    }

    #[test]
    fn json_keeps_the_old_keys_and_adds_the_new() {
        let (rows, e) = sample();
        let build = BuildInfo::verified().unwrap();
        let v = json(&build, 7, &rows, &e);
        assert_eq!(v["finding"], "F5");
        assert_eq!(v["rounds"], 7);
        assert_eq!(v["theta"], 1.1);
        assert_eq!(v["note"], NOTE);
        assert_eq!(v["rows"][0]["layout"], "id-order");
        assert_eq!(v["rows"][0]["ratio"], 1000.0);
        assert_eq!(v["shuffled_rows"][0]["ratio"], 4.0);
        assert_eq!(v["normalized_rows"][0]["refill_ms"], 0.1);
        assert_eq!(v["shuffled_normalized_rows"][0]["ratio"], 2.0);
        let e2e = &v["end_to_end"];
        assert_eq!(e2e["rounds"], 4);
        assert_eq!(e2e["tokens_per_generation"], 2);
        assert_eq!(e2e["tokens_per_round"], 6);
        // Rounds of 10..13 ms: the median is 11.5 and builtin is 10% slower in every round.
        assert_eq!(e2e["ms_per_token"]["none"], 11.5);
        let over = e2e["overhead_percent"]["builtin"].as_f64().unwrap();
        assert!((over - 10.0).abs() < 1e-9, "{over}");
        assert_eq!(e2e["overhead_percent"]["ledger"], 0.0);
        assert_eq!(
            e2e["overhead_percent_interval"]["ledger"],
            json!([0.0, 0.0])
        );
        assert_eq!(
            e2e["ms_per_token_interval"]["none"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
        assert_eq!(e2e["generated_tokens"]["builtin"], 8);
        assert_eq!(e2e["builtin_tokens_equal_ledger"], true);
        assert_eq!(e2e["per_round_ms_per_token"].as_array().unwrap().len(), 4);
    }

    #[test]
    fn text_and_svg_name_every_layout_and_variant() {
        let (rows, e) = sample();
        let build = BuildInfo::verified().unwrap();
        let t = text(&build, 7, &rows, &e);
        for word in [
            "id-order",
            "shuffled",
            "no penalty",
            "ledger-penalties",
            NOTE,
        ] {
            assert!(t.contains(word), "{word} missing from\n{t}");
        }
        let s = svg(&rows, &e);
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n"));
        assert!(s.contains("shuffled") && s.contains("+10.0%"));
        assert!(!s.contains("NaN") && !s.contains("inf"));
    }
}
