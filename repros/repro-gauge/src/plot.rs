//! F4's charts, drawn from the results' JSON (so the committed SVGs can be redrawn from the
//! committed results alone): from the report, a measure of the free-running design against
//! shift (one panel per model, one line per operator and theta, interval bands); from the
//! reported-only tables, the share of JSON answers that parse and are schema-valid per penalty
//! variant, and where each variant breaks JSON along grammar references.

use anyhow::{Context as _, Result};
use report::chart::{widest, Basis, Chart, Field, Font, Key, Style, LINE, MARGIN};
use serde_json::Value;

/// Colours of the thetas in the order the rows list them: black first (theta 1, where every
/// operator is the identity), then the palette.
const THETA_COLOURS: [usize; 7] = [6, 1, 0, 2, 3, 4, 5];

/// The measure a curve chart draws: its file stem, JSON keys (mean, interval), axis label,
/// whether it is a share (drawn from 0 to 100%) and its title's opening.
pub struct Measure {
    stem: &'static str,
    mean: &'static str,
    ci: &'static str,
    label: &'static str,
    share: bool,
    title: &'static str,
}

/// The share of generated tokens that change against the same line at c = 0.
pub const DIFFERING: Measure = Measure {
    stem: "gauge-differing",
    mean: "differing_share",
    ci: "ci",
    label: "differing share against c = 0",
    share: true,
    title: "F4: share of generated tokens that change when every logit moves by c",
};

pub const DISTINCT2: Measure = Measure {
    stem: "gauge-distinct2",
    mean: "distinct2",
    ci: "distinct2_ci",
    label: "distinct-2",
    share: false,
    title: "F4: distinct-2 of the generated tokens against c",
};

/// The design's charts, drawn from `report` (a `gauge.<build>.json`), as `(file name, SVG)`:
/// the differing share and distinct-2 against the shift.
pub fn files(report: &Value) -> Result<Vec<(String, String)>> {
    let tag = Field::new(report).str("build")?;
    let mut files = Vec::new();
    for m in [&DIFFERING, &DISTINCT2] {
        let name = format!("{}.{tag}.svg", m.stem);
        let svg = curve_svg(report, m).with_context(|| format!("drawing {name}"))?;
        files.push((name, svg));
    }
    Ok(files)
}

/// The reported-only tables' charts, drawn from `tables` (a `tables/gauge.<build>.json`): the
/// JSON answers per variant and the grammar walks' break shares.
pub fn table_files(tables: &Value) -> Result<Vec<(String, String)>> {
    let tag = Field::new(tables).str("build")?;
    type Draw = fn(&Value) -> Result<String>;
    let charts: [(&str, Draw); 2] = [("json-valid", json_svg), ("json-structure", structural_svg)];
    (charts.into_iter())
        .map(|(stem, draw)| {
            let svg = draw(tables).with_context(|| format!("drawing {stem}"))?;
            Ok((format!("{stem}.{tag}.svg"), svg))
        })
        .collect()
}

/// The bootstrap the report's intervals come from: `(level in percent, resamples)`; no level
/// when the design ran fewer prompts than a 95% interval needs (`interval::MIN_FOR_95`).
fn bootstrap(r: Field) -> Result<(Option<f64>, usize)> {
    let b = r.get("design")?.get("bootstrap")?;
    let level = b.at::<Option<f64>>("level")?.map(|l| 100.0 * l);
    Ok((level, b.usize("resamples")?))
}

/// How a chart names its intervals over `things`: by the level when there is one, else as
/// the percentiles they are.
fn interval_words(level: Option<f64>, things: &str, resamples: usize) -> String {
    match level {
        Some(level) => format!(
            "{level:.0}% percentile bootstrap interval of the mean over {things}, {resamples} resamples"
        ),
        None => format!(
            "2.5th to 97.5th percentiles of the bootstrap mean over {things}, {resamples} resamples; fewer than {} {things}, so not a 95% interval",
            crate::interval::MIN_FOR_95
        ),
    }
}

/// A report's models: the `models` list, or the report itself when it ran one model.
fn models(r: Field) -> Result<Vec<Field>> {
    match r.get("models") {
        Ok(_) => r.list("models"),
        Err(_) => Ok(vec![r]),
    }
}

/// `(model, count)` pairs as `model count, ...`.
fn per_model(counts: &[(&str, usize)]) -> String {
    let each: Vec<String> = counts.iter().map(|(l, k)| format!("{l} {k}")).collect();
    each.join(", ")
}

/// One point of a line: shift, mean, interval.
struct Point {
    shift: f64,
    mean: f64,
    lo: f64,
    hi: f64,
}

/// One model's lines: `(operator, theta)` in the rows' order, each with its points by shift.
type Lines = Vec<((String, f64), Vec<Point>)>;

fn lines(model: Field, m: &Measure) -> Result<Lines> {
    let (mean_key, ci_key) = (m.mean, m.ci);
    let mut lines: Lines = Vec::new();
    for row in model.list("rows")? {
        let key = (row.str("operator")?.to_string(), row.f64("theta")?);
        let (lo, hi) = row.at::<(f64, f64)>(ci_key)?;
        let p = Point {
            shift: row.f64("shift")?,
            mean: row.f64(mean_key)?,
            lo,
            hi,
        };
        match lines.iter_mut().find(|(k, _)| *k == key) {
            Some((_, pts)) => pts.push(p),
            None => lines.push((key, vec![p])),
        }
    }
    for (_, pts) in &mut lines {
        pts.sort_by(|a, b| a.shift.total_cmp(&b.shift));
    }
    Ok(lines)
}

/// A measure against shift, one panel per model, one line per operator and theta with its
/// interval as a band. Colour names the theta, dash (and marker) the operator.
pub fn curve_svg(report: &Value, m: &Measure) -> Result<String> {
    let r = Field::new(report);
    let (level, resamples) = bootstrap(r)?;
    let models = models(r)?;
    let all = models
        .iter()
        .map(|&model| lines(model, m))
        .collect::<Result<Vec<_>>>()?;
    // Operators and thetas in the order the rows first list them.
    let (mut operators, mut thetas): (Vec<&str>, Vec<f64>) = (Vec::new(), Vec::new());
    for ((op, theta), _) in all.iter().flatten() {
        if !operators.contains(&op.as_str()) {
            operators.push(op);
        }
        if !thetas.contains(theta) {
            thetas.push(*theta);
        }
    }
    // One vertical scale for every panel: 0..1 for shares, else 0..the largest upper bound.
    let ymax = if m.share {
        1.0
    } else {
        all.iter()
            .flatten()
            .flat_map(|(_, pts)| pts.iter().map(|p| p.hi))
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max)
            .max(1e-9)
    };
    let tick = |f: f64| {
        if m.share {
            format!("{:.0}%", 100.0 * f)
        } else {
            format!("{f:.2}")
        }
    };
    let mut c = Chart::new(&format!("{} ({})", m.title, r.str("build")?));
    c.subtitle(&format!(
        "y: {}; c = 0 is each line's own reference",
        m.label
    ));
    let (pw, ph) = (330.0, 260.0);
    let gutter = widest((0..=4).map(|k| tick(ymax * k as f64 / 4.0))) + 10.0;
    let top = c.head() + 2.0 * LINE + 8.0;
    let y = |f: f64| top + ph * (1.0 - f / ymax);
    let mut right = 0.0f64;
    let mut prompts = Vec::new();
    for (i, (model, lines)) in models.iter().zip(&all).enumerate() {
        let x0 = MARGIN + gutter + i as f64 * (pw + gutter + 40.0);
        right = x0 + pw;
        let n = model.usize("prompts")?;
        let label = model.str("model")?;
        prompts.push((label, n));
        c.text(
            x0,
            top - 14.0,
            &format!("{label} ({n} prompts)"),
            Font::BODY.bold(),
        );
        let mut shifts: Vec<f64> = lines
            .iter()
            .flat_map(|(_, pts)| pts.iter().map(|p| p.shift))
            .collect();
        shifts.sort_by(f64::total_cmp);
        shifts.dedup();
        let (lo, hi) = (shifts[0], *shifts.last().unwrap_or(&0.0));
        let span = if hi > lo { hi - lo } else { 1.0 };
        let x = |s: f64| x0 + pw * (s - lo) / span;
        for k in 0..=4 {
            let f = ymax * k as f64 / 4.0;
            c.line((x0, y(f)), (x0 + pw, y(f)), "#ddd", 1.0);
            c.text(x0 - 6.0, y(f) + 4.0, &tick(f), Font::BODY.end());
        }
        for s in &shifts {
            c.text(
                x(*s),
                top + ph + 18.0,
                &format!("{s:+}"),
                Font::BODY.middle(),
            );
        }
        c.text(
            x0 + pw / 2.0,
            top + ph + 38.0,
            "shift c added to every logit",
            Font::BODY.middle(),
        );
        for ((op, theta), pts) in lines {
            let colour = thetas.iter().position(|t| t == theta).unwrap_or(0);
            let dash = operators.iter().position(|o| o == op).unwrap_or(0);
            let style = c.series(
                &format!("{op} theta {theta}"),
                Style::new(THETA_COLOURS[colour % THETA_COLOURS.len()], dash),
            );
            // The band: along the upper bounds, then back along the lower ones.
            let band: Vec<(f64, f64)> = pts
                .iter()
                .map(|p| (x(p.shift), y(p.hi)))
                .chain(pts.iter().rev().map(|p| (x(p.shift), y(p.lo))))
                .collect();
            c.band(&band, style);
            let line: Vec<(f64, f64)> = pts.iter().map(|p| (x(p.shift), y(p.mean))).collect();
            c.polyline(&line, style);
            for &xy in &line {
                c.marker(xy, style, true, None);
            }
        }
    }
    c.legend((right + 30.0, top + 4.0), None, Key::Line);
    let n = match prompts.as_slice() {
        [(_, n), rest @ ..] if rest.iter().all(|(_, k)| k == n) => {
            format!("n = {n} prompts per model, one greedy run per prompt and line")
        }
        each => format!(
            "n = {} (prompts), one greedy run per prompt and line",
            per_model(each)
        ),
    };
    Ok(c.finish(&Basis {
        n,
        interval: format!("bands: {}", interval_words(level, "prompts", resamples)),
    }))
}

/// Share of answers that parse and that are schema-valid, per variant: counts of the corpus's
/// prompts, one greedy answer each.
pub fn json_svg(report: &Value) -> Result<String> {
    let r = Field::new(report);
    let j = r.get("json_corpus")?;
    let n = j.usize("prompts_count")?;
    let variants = j.list("variants")?;
    let mut c = Chart::new(&format!(
        "F4: JSON answers per penalty variant ({}, {})",
        j.str("model")?,
        r.str("build")?
    ));
    let (bar_h, gap, pw) = (14.0, 12.0, 420.0);
    let labels = (variants.iter().map(|v| v.str("variant"))).collect::<Result<Vec<_>>>()?;
    let left = MARGIN + widest(&labels) + 8.0;
    let top = c.head() + LINE;
    let parses = c.series("parses", Style::nth(0));
    let valid = c.series("schema-valid", Style::nth(4));
    let share = |k: usize| k as f64 / n.max(1) as f64;
    for (i, (v, label)) in variants.iter().zip(&labels).enumerate() {
        let y0 = top + i as f64 * (2.0 * bar_h + gap);
        c.text(left - 8.0, y0 + bar_h + 4.0, label, Font::BODY.end());
        for (k, (key, style)) in [("parses", parses), ("schema_valid", valid)]
            .into_iter()
            .enumerate()
        {
            let count = v.usize(key)?;
            let yb = y0 + k as f64 * bar_h;
            c.bar((left, yb), pw * share(count), bar_h, style);
            c.text(
                left + pw * share(count) + 4.0,
                yb + bar_h - 3.0,
                &format!("{count}/{n} ({:.0}%)", 100.0 * share(count)),
                Font::BODY,
            );
        }
    }
    let count_w = widest([format!("{n}/{n} (100%)")]);
    c.legend((left + pw + count_w + 24.0, top + 10.0), None, Key::Box);
    Ok(c.finish(&Basis {
        n: format!(
            "n = {n} prompts, one greedy answer of up to {} tokens per prompt and variant",
            j.usize("max_new")?
        ),
        interval: format!("no interval: each bar counts the {n} answers"),
    }))
}

/// Per model, per variant: the share of structural positions where the greedy choice breaks
/// the JSON along the grammar reference, as a bar with its interval as a whisker (the planted
/// controls are left out; they are in the report's controls).
pub fn structural_svg(report: &Value) -> Result<String> {
    let r = Field::new(report);
    // The level follows the pairs each model's bootstrap ran over.
    let resamples = r.get("bootstrap")?.usize("resamples")?;
    let models = r.list("structural")?;
    let mut c = Chart::new(&format!(
        "F4: where each penalty variant breaks JSON, along grammar references ({})",
        r.str("build")?
    ));
    c.subtitle("bar: mean over prompt/schema pairs of each pair's break share; scale 0 to 100%");
    let (bar_h, gap, pw) = (14.0, 6.0, 360.0);
    let mut labels = Vec::new();
    for m in &models {
        for row in m.list("rows")? {
            labels.push(row.str("variant")?);
        }
    }
    let left = MARGIN + widest(&labels) + 8.0;
    let style = c.series(
        "share of structural positions where the greedy choice breaks the JSON",
        Style::nth(0),
    );
    let mut y_panel = c.head() + LINE + 8.0;
    let mut counted = Vec::new();
    for m in &models {
        // The bootstrap runs over the finished pairs that have structural positions.
        let mut n = 0;
        for p in m.list("per_pair")? {
            n += usize::from(p.at::<bool>("finished")? && p.usize("structural_positions")? > 0);
        }
        counted.push((m.str("model")?, n));
        c.text(
            left,
            y_panel + 12.0,
            &format!(
                "{} ({} finished pairs)",
                m.str("model")?,
                m.usize("finished")?
            ),
            Font::BODY.bold(),
        );
        let rows = m.list("rows")?;
        let bottom = y_panel + 24.0 + rows.len() as f64 * (bar_h + gap);
        c.line((left, y_panel + 20.0), (left, bottom), "#333", 1.0);
        let x = |f: f64| left + pw * f.clamp(0.0, 1.0);
        for (i, row) in rows.iter().enumerate() {
            let y0 = y_panel + 24.0 + i as f64 * (bar_h + gap);
            let mean = row.f64("break_share")?;
            let (lo, hi) = row.at::<(f64, f64)>("break_ci")?;
            c.text(
                left - 8.0,
                y0 + bar_h - 3.0,
                row.str("variant")?,
                Font::BODY.end(),
            );
            c.bar((left, y0), x(mean) - left, bar_h, style);
            c.line(
                (x(lo), y0 + bar_h / 2.0),
                (x(hi), y0 + bar_h / 2.0),
                "#000",
                1.0,
            );
            c.text(
                x(hi) + 6.0,
                y0 + bar_h - 3.0,
                &format!("{:.1}%", 100.0 * mean),
                Font::BODY,
            );
        }
        y_panel = bottom + 2.0 * LINE;
    }
    c.legend((MARGIN, y_panel - LINE), None, Key::Box);
    let fewest = counted.iter().map(|(_, n)| *n).min().unwrap_or(0);
    let pairs_level = crate::interval::is_95(fewest).then_some(95.0);
    Ok(c.finish(&Basis {
        n: format!(
            "n = {} (finished prompt/schema pairs with structural positions)",
            per_model(&counted)
        ),
        interval: format!(
            "whiskers: {}",
            interval_words(pairs_level, "pairs", resamples)
        ),
    }))
}
