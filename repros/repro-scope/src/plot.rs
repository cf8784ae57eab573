//! The sweep as a chart a person can read at a glance, drawn from the report's JSON (so the
//! committed SVG can be redrawn from the committed results alone): one column per window, one
//! dot per prompt at the index where that window first differs from `all`, hollow dots at the
//! top for prompts where it never does, and the share that diverged under each column.

use anyhow::{Context as _, Result};
use report::chart::{widest, Basis, Chart, Field, Font, Key, Style, LINE, MARGIN};
use serde_json::Value;

/// The chart F3 draws from `report` (a `scope.<build>.json` with its sweep), as
/// `(file name, SVG)`.
pub fn files(report: &Value) -> Result<Vec<(String, String)>> {
    let tag = Field::new(report).str("build")?;
    let name = format!("scope-sweep.{tag}.svg");
    let svg = svg(report).with_context(|| format!("drawing {name}"))?;
    Ok(vec![(name, svg)])
}

/// The sweep chart of `report`: its `build`, `model` and `sweep`.
pub fn svg(report: &Value) -> Result<String> {
    let r = Field::new(report);
    let s = r.get("sweep")?;
    let windows = s.list("windows")?;
    let summary = s.list("summary")?;
    let prompts = s.list("prompts")?;
    let max_new = s.usize("max_new")? as f64;
    // The penalty is an f32 written as f64: printed as the f32 it was.
    let theta = s.f64("penalty")? as f32;
    let mut c =
        Chart::new("F3: where a last-N penalty window parts from the whole-sequence penalty");
    c.subtitle(&format!(
        "{}, {}, theta {theta}",
        r.str("model")?,
        r.str("build")?
    ));
    let (plot_w, plot_h) = (520.0, 300.0);
    let ticks: Vec<f64> = (0..=4)
        .map(|k| (max_new * k as f64 / 4.0).round())
        .collect();
    let gutter = widest(ticks.iter().map(f64::to_string).chain(["never".into()]));
    let left = MARGIN + 2.0 * LINE + gutter;
    let top = c.head() + 2.0 * LINE + 16.0;
    let never_y = top - 16.0;
    let y = |i: f64| top + plot_h * (i / max_new);
    let col_w = plot_w / windows.len().max(1) as f64;
    let mut kinds: Vec<&str> = Vec::new();
    for p in &prompts {
        let k = p.str("kind")?;
        if !kinds.contains(&k) {
            kinds.push(k);
        }
    }
    let styles: Vec<Style> = kinds
        .iter()
        .enumerate()
        .map(|(k, kind)| c.series(kind, Style::nth(k)))
        .collect();
    // Axis and grid: generated-token index grows downwards, as text is read.
    for &v in &ticks {
        c.line((left, y(v)), (left + plot_w, y(v)), "#ddd", 1.0);
        c.text(left - 6.0, y(v) + 4.0, &v.to_string(), Font::BODY.end());
    }
    c.text(
        MARGIN + 12.0,
        top + plot_h / 2.0,
        "first generated index that differs from all",
        Font::BODY.vertical().middle(),
    );
    c.text(left - 6.0, never_y + 4.0, "never", Font::BODY.end().grey());
    let n = prompts.len();
    for (i, (w, sum)) in windows.iter().zip(&summary).enumerate() {
        let w = w
            .value()
            .as_u64()
            .with_context(|| format!("window {i} is not a count"))?;
        let cx = left + col_w * (i as f64 + 0.5);
        c.text(
            cx,
            top + plot_h + 20.0,
            &format!("last {w}"),
            Font::BODY.middle(),
        );
        c.text(
            cx,
            top + plot_h + 20.0 + LINE,
            &format!("{}/{n} diverge", sum.usize("diverged")?),
            Font::BODY.middle().grey(),
        );
        if let Some(m) = sum.at::<Option<usize>>("median")? {
            let ym = y(m as f64);
            c.line(
                (cx - col_w * 0.35, ym),
                (cx + col_w * 0.35, ym),
                "#333",
                2.0,
            );
        }
        for (j, p) in prompts.iter().enumerate() {
            let dx = col_w * 0.6 * ((j as f64 + 0.5) / n.max(1) as f64 - 0.5);
            let kind = p.str("kind")?;
            let style = styles[kinds.iter().position(|k| *k == kind).unwrap_or(0)];
            let cell = p
                .list("windows")?
                .get(i)
                .copied()
                .with_context(|| format!("prompt {j} has no window {i}"))?;
            let prompt = p.str("prompt")?;
            match cell.at::<Option<usize>>("diverges_at")? {
                Some(d) => c.marker(
                    (cx + dx, y(d as f64)),
                    style,
                    true,
                    Some(&format!("{prompt}: {d}")),
                ),
                None => c.marker(
                    (cx + dx, never_y),
                    style,
                    false,
                    Some(&format!("{prompt}: never")),
                ),
            }
        }
    }
    let lx = left + plot_w + 30.0;
    let legend = c.legend((lx, top), Some("prompt kind"), Key::Dot);
    let ly = legend.y1 + LINE;
    c.line((lx, ly - 4.0), (lx + 12.0, ly - 4.0), "#333", 2.0);
    c.text(lx + 16.0, ly, "median", Font::BODY);
    c.marker((lx + 5.0, ly + LINE - 4.0), Style::nth(6), false, None);
    c.text(lx + 16.0, ly + LINE, "never diverges", Font::BODY);
    Ok(c.finish(&Basis {
        n: format!(
            "n = {n} prompts, each greedy for up to {max_new} tokens under every window and under all"
        ),
        interval: "no interval: every prompt is a dot; bar: lower median of the prompts that diverge"
            .into(),
    }))
}
