//! What a run prints and writes: the text tables, `bench/penalty-cost.json` and
//! `bench/penalty-cost.svg`, all from the same measurements.

use crate::apply::ApplyRow;
use crate::e2e::{EndToEnd, Variant};
use crate::layout::{Layout, SHUFFLE_SEED};
use crate::penalty::{Penalty, THETA, WINDOW};
use crate::stats::{bootstrap_median, MedianCi};
use crate::FINDING;
use oracle::stats::{BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED};
use report::chart::{text_width, Basis, Chart, Field, Font, Key, Style, LINE, MARGIN};
use serde::Serialize;
use serde_json::Value;
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

/// Pairs written as one JSON object, in their order.
struct Keyed<T>(Vec<(&'static str, T)>);

impl<T: Serialize> Serialize for Keyed<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

/// `f` of every variant, under the variant's JSON key.
fn per_variant<T>(f: impl Fn(Variant) -> T) -> Keyed<T> {
    Keyed(Variant::ALL.iter().map(|&v| (v.key(), f(v))).collect())
}

/// One per-apply row: llama.cpp beside ledger's default mode (`ledger_ms`), or beside its
/// normalized mode (`ledger_normalized_ms`, with the refill time).
#[derive(Serialize)]
struct ApplyData {
    vocab: usize,
    layout: &'static str,
    builtin_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    ledger_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ledger_normalized_ms: Option<f64>,
    ratio: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    refill_ms: Option<f64>,
}

/// The rows of one layout: llama.cpp beside ledger's default mode, and beside its normalized
/// mode (the latter with the refill time).
fn layout_rows(rows: &[ApplyRow], layout: Layout) -> (Vec<ApplyData>, Vec<ApplyData>) {
    let of = rows.iter().filter(|r| r.layout == layout);
    let row = |r: &ApplyRow, normalized: bool| {
        let stage = [Penalty::Ledger, Penalty::LedgerNormalized][normalized as usize];
        ApplyData {
            vocab: r.vocab,
            layout: layout.key(),
            builtin_ms: r.ms_of(Penalty::Builtin),
            ledger_ms: (!normalized).then(|| r.ms_of(stage)),
            ledger_normalized_ms: normalized.then(|| r.ms_of(stage)),
            ratio: r.ratio(stage),
            refill_ms: normalized.then_some(r.refill_ms),
        }
    };
    let plain = of.clone().map(|r| row(r, false)).collect();
    let normalized = of.map(|r| row(r, true)).collect();
    (plain, normalized)
}

#[derive(Serialize)]
struct Bench {
    finding: &'static str,
    build: String,
    build_detail: String,
    window: usize,
    theta: f64,
    rounds: usize,
    layouts: Layouts,
    shuffle_seed: u64,
    rows: Vec<ApplyData>,
    normalized_rows: Vec<ApplyData>,
    shuffled_rows: Vec<ApplyData>,
    shuffled_normalized_rows: Vec<ApplyData>,
    end_to_end: EndToEndData,
    note: &'static str,
}

#[derive(Serialize)]
struct Layouts {
    #[serde(rename = "id-order")]
    id_order: &'static str,
    shuffled: &'static str,
}

#[derive(Serialize)]
struct EndToEndData {
    model: &'static str,
    model_detail: String,
    prompt_tokens: usize,
    rounds: usize,
    tokens_per_generation: usize,
    tokens_per_round: usize,
    threads: i32,
    timed: &'static str,
    statistic: String,
    ms_per_token: Keyed<f64>,
    ms_per_token_interval: Keyed<[f64; 2]>,
    overhead_percent: Keyed<f64>,
    overhead_percent_interval: Keyed<[f64; 2]>,
    generated_tokens: Keyed<usize>,
    eos_stops: Keyed<usize>,
    builtin_tokens_equal_ledger: bool,
    per_round_ms_per_token: Vec<Keyed<f64>>,
}

/// `bench/penalty-cost.json`. `rows` and `normalized_rows` are the id-order layout and
/// `end_to_end.ms_per_token` and `overhead_percent` hold medians over rounds, under the keys
/// earlier results files use so that they stay comparable; the shuffled layout and per-round
/// keys sit beside them.
pub fn json(build: &BuildInfo, rounds: usize, rows: &[ApplyRow], e: &EndToEnd) -> Value {
    let (rows_id, norm_id) = layout_rows(rows, Layout::IdOrder);
    let (rows_sh, norm_sh) = layout_rows(rows, Layout::Shuffled);
    let s = Summary::of(e);
    fn by_variant<T>(list: &[(Variant, MedianCi)], f: impl Fn(&MedianCi) -> T) -> Keyed<T> {
        Keyed(list.iter().map(|(v, c)| (v.key(), f(c))).collect())
    }
    let per_round = (e.rounds.iter())
        .map(|r| per_variant(|v| r.of(v).ms_per_token))
        .collect();
    let interval = |c: &MedianCi| [c.lo, c.hi];
    let bench = Bench {
        finding: FINDING,
        build: build.tag().to_string(),
        build_detail: build.describe(),
        window: WINDOW,
        theta: as_written(THETA),
        rounds,
        layouts: Layouts {
            id_order: Layout::IdOrder.describe(),
            shuffled: Layout::Shuffled.describe(),
        },
        shuffle_seed: SHUFFLE_SEED,
        rows: rows_id,
        normalized_rows: norm_id,
        shuffled_rows: rows_sh,
        shuffled_normalized_rows: norm_sh,
        end_to_end: EndToEndData {
            model: crate::e2e::MODEL,
            model_detail: e.model.clone(),
            prompt_tokens: e.prompt_tokens,
            rounds: e.plan.rounds,
            tokens_per_generation: e.plan.tokens,
            tokens_per_round: e.plan.tokens * Variant::ALL.len(),
            threads: e.plan.threads,
            timed: "each generation from its first logits to its last: every step samples, accepts, decodes one token and reads the next logits; the prompt's decode is not timed",
            statistic: format!("median over rounds with a 95% percentile bootstrap interval ({BOOTSTRAP_RESAMPLES} resamples, seed {BOOTSTRAP_SEED})"),
            ms_per_token: by_variant(&s.ms, |c| c.median),
            ms_per_token_interval: by_variant(&s.ms, interval),
            overhead_percent: by_variant(&s.overhead, |c| c.median),
            overhead_percent_interval: by_variant(&s.overhead, interval),
            generated_tokens: per_variant(|v| e.generated(v)),
            eos_stops: per_variant(|v| e.eos_stops(v)),
            builtin_tokens_equal_ledger: e.builtin_tokens_equal_ledger(),
            per_round_ms_per_token: per_round,
        },
        note: NOTE,
    };
    serde_json::to_value(bench).expect("the bench's JSON has string keys")
}

/// The JSON key of a stage's per-apply median, and the rows that hold it.
fn ms_key(p: Penalty) -> (&'static str, &'static str) {
    match p {
        Penalty::Builtin => ("builtin_ms", "rows"),
        Penalty::Ledger => ("ledger_ms", "rows"),
        Penalty::LedgerNormalized => ("ledger_normalized_ms", "normalized_rows"),
    }
}

/// `bench/penalty-cost.svg`, drawn from `bench/penalty-cost.json` (so the committed SVG can be
/// redrawn from the committed results alone): per-apply medians on a log scale, one group per
/// vocabulary size and layout; beside it the end-to-end overhead medians with their intervals.
pub fn svg(report: &Value) -> anyhow::Result<String> {
    let r = Field::new(report);
    // Groups in the order measured: per vocabulary size, id order then shuffled.
    let mut groups: Vec<(usize, &str, [f64; 3])> = Vec::new();
    for (prefix, layout) in [("", Layout::IdOrder), ("shuffled_", Layout::Shuffled)] {
        for (k, &p) in Penalty::ALL.iter().enumerate() {
            let (key, list) = ms_key(p);
            for row in r.list(&format!("{prefix}{list}"))? {
                let vocab = row.usize("vocab")?;
                let same = |g: &(usize, &str, [f64; 3])| g.0 == vocab && g.1 == layout.key();
                let at = groups.iter().position(same).unwrap_or_else(|| {
                    groups.push((vocab, layout.key(), [f64::NAN; 3]));
                    groups.len() - 1
                });
                groups[at].2[k] = row.f64(key)?;
            }
        }
    }
    // Each vocabulary size where it first appears, id order before shuffled within it.
    let vocabs: Vec<usize> = groups.iter().map(|g| g.0).collect();
    groups.sort_by_key(|g| {
        let first = vocabs.iter().position(|&v| v == g.0);
        (first, g.1 != Layout::IdOrder.key())
    });
    let mut c = Chart::new(&format!(
        "F5: penalty stage cost per apply (median, window {}) and per token",
        r.usize("window")?
    ));
    let styles: Vec<Style> = Penalty::ALL
        .iter()
        .enumerate()
        .map(|(k, p)| c.series(p.label(), Style::nth(k)))
        .collect();
    let (lo, hi) = (-4.0f64, 1.0f64); // log10 ms: 0.1 us to 10 ms
    let tick = |e10: i32| format!("{} ms", 10f64.powi(e10));
    let left = MARGIN + text_width(&tick(lo as i32), 12.0, false) + 8.0;
    let (top, ph, group) = (c.head() + 2.0 * LINE, 240.0, 120.0);
    let y = |ms: f64| top + ph * (hi - ms.max(1e-4).log10()) / (hi - lo);
    let right = left + 20.0 + group * groups.len() as f64;
    for e10 in lo as i32..=hi as i32 {
        let yy = y(10f64.powi(e10));
        c.line((left, yy), (right, yy), "#ddd", 1.0);
        c.text(left - 6.0, yy + 4.0, &tick(e10), Font::BODY.end());
    }
    for (j, (vocab, layout, ms)) in groups.iter().enumerate() {
        let x0 = left + 16.0 + group * j as f64;
        for (k, &m) in ms.iter().enumerate() {
            c.bar(
                (x0 + 30.0 * k as f64, y(m)),
                26.0,
                top + ph - y(m),
                styles[k],
            );
        }
        for (dy, label) in [(18.0, vocab.to_string()), (34.0, layout.to_string())] {
            c.text(x0 + 43.0, top + ph + dy, &label, Font::BODY.middle());
        }
    }
    c.text(
        (left + right) / 2.0,
        top + ph + 18.0 + 2.0 * LINE,
        "candidates, layout",
        Font::BODY.middle(),
    );
    let e = r.get("end_to_end")?;
    let panel = overhead_panel(&mut c, e, &styles, (right + 70.0, top, ph))?;
    c.legend((panel + 30.0, top + 4.0), None, Key::Box);
    Ok(c.finish(&Basis {
        n: format!(
            "n = {} interleaved rounds per apply bar; {} rounds of {} tokens per end-to-end variant ({})",
            r.usize("rounds")?,
            e.usize("rounds")?,
            e.usize("tokens_per_generation")?,
            e.str("model")?
        ),
        interval: format!(
            "per-apply bars: medians, no interval; end-to-end bars and whiskers: {}",
            e.str("statistic")?
        ),
    }))
}

/// The end-to-end panel from `x0`: overhead over no penalty, median and interval per penalized
/// variant. Returns the panel's right edge.
fn overhead_panel(
    c: &mut Chart,
    e: Field,
    styles: &[Style],
    (x0, top, ph): (f64, f64, f64),
) -> anyhow::Result<f64> {
    let (median, interval) = (
        e.get("overhead_percent")?,
        e.get("overhead_percent_interval")?,
    );
    let mut cis = Vec::new();
    for (v, style) in [(Variant::Builtin, styles[0]), (Variant::Ledger, styles[1])] {
        let (lo, hi) = interval.at::<(f64, f64)>(v.key())?;
        cis.push((v, style, median.f64(v.key())?, lo, hi));
    }
    let finite = |x: f64| if x.is_finite() { x } else { 0.0 };
    // From below the lowest interval end to above the highest, 0 always inside.
    let (lo, hi) = (cis.iter()).fold((0.0f64, 0.0f64), |(lo, hi), c| {
        (lo.min(finite(c.3)), hi.max(finite(c.4)))
    });
    let (lo, hi) = (lo.floor() - 1.0, hi.ceil() + 1.0);
    let y = |p: f64| top + ph * (hi - finite(p)) / (hi - lo);
    let width = 180.0;
    c.text(
        x0,
        top - 12.0,
        &format!(
            "end to end, {} rounds x {} tokens",
            e.usize("rounds")?,
            e.usize("tokens_per_generation")?
        ),
        Font::BODY,
    );
    c.line((x0, y(0.0)), (x0 + width, y(0.0)), "#888", 1.0);
    for p in [lo, 0.0, hi] {
        let label = if p == 0.0 {
            "0%".to_string()
        } else {
            format!("{p:+.0}%")
        };
        c.text(x0 - 6.0, y(p) + 4.0, &label, Font::BODY.end());
    }
    for (k, (v, style, m, lo, hi)) in cis.iter().enumerate() {
        let x = x0 + 30.0 + 80.0 * k as f64;
        let (y0, ym) = (y(0.0), y(*m));
        c.bar((x, y0.min(ym)), 40.0, (y0 - ym).abs(), *style);
        c.line((x + 20.0, y(*lo)), (x + 20.0, y(*hi)), "black", 1.0);
        for (dy, label) in [(18.0, format!("{m:+.1}%")), (34.0, v.key().to_string())] {
            c.text(x + 20.0, top + ph + dy, &label, Font::BODY.middle());
        }
    }
    c.text(
        x0,
        top + ph + 18.0 + 2.0 * LINE,
        "overhead over no penalty (median, 95% interval)",
        Font::BODY,
    );
    Ok(x0 + width)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::e2e::{Generation, Plan, Round};
    use harness::Stop;
    use subject::TokenId;

    fn sample() -> (Vec<ApplyRow>, EndToEnd) {
        let row = |layout, ms, refill_ms| ApplyRow {
            vocab: 100,
            layout,
            ms,
            refill_ms,
        };
        let rows = vec![
            row(Layout::IdOrder, [1.0, 0.001, 0.5], 0.1),
            row(Layout::Shuffled, [1.0, 0.25, 0.5], 0.2),
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
            Value::from([0.0, 0.0].to_vec())
        );
        let interval = e2e["ms_per_token_interval"]["none"].as_array();
        assert_eq!(interval.unwrap().len(), 2);
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
        let s = svg(&json(&build, 7, &rows, &e)).unwrap();
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n"));
        assert_eq!(report::chart::check(&s), Vec::<String>::new());
        assert!(s.contains("shuffled") && s.contains("+10.0%"));
        assert!(!s.contains("NaN") && !s.contains("inf"));
    }
}
