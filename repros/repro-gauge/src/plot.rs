//! SVG charts: a measure of the A1 design against shift (one panel per model, one line per
//! operator and theta, interval bands), and the share of valid JSON per penalty variant.

use crate::a1::{Cell, ModelRuns};
use crate::json::JsonReport;
use crate::reference::StructuralReport;
use oracle::gauge::Operator;
use oracle::stats::Estimate;
use report::svg::{self, escape as esc};

const COLOURS: [&str; 6] = [
    "#D55E00", "#E69F00", "#0072B2", "#56B4E9", "#009E73", "#CC79A7",
];

/// A measure against shift, one panel per model, one line per operator and theta, with its
/// 95% interval as a band. `unit`: the measure is a share, drawn from 0 to 100%.
pub fn curve_svg(
    models: &[ModelRuns],
    metric: impl Fn(&Cell) -> Estimate,
    label: &str,
    unit: bool,
    title: &str,
) -> anyhow::Result<String> {
    let (pw, ph, left, top, gap) = (330.0, 260.0, 60.0, 60.0, 70.0);
    let width = left + models.len() as f64 * (pw + gap) + 190.0;
    let height = top + ph + 70.0;
    let mut o = svg::open(width, height, (left, 24.0), title);
    let all = models
        .iter()
        .map(ModelRuns::cells)
        .collect::<anyhow::Result<Vec<Vec<Cell>>>>()?;
    // One vertical scale for every panel: 0..1 for shares, else 0..the largest upper bound.
    let ymax = if unit {
        1.0
    } else {
        all.iter()
            .flatten()
            .map(|c| metric(c).hi)
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max)
            .max(1e-9)
    };
    let mut legend: Vec<(String, &str, bool)> = Vec::new();
    for (m, (r, cells)) in models.iter().zip(&all).enumerate() {
        let x0 = left + m as f64 * (pw + gap);
        let mut shifts: Vec<f32> = cells.iter().map(|c| c.shift).collect();
        shifts.sort_by(|a, b| a.total_cmp(b));
        shifts.dedup();
        let (lo, hi) = (shifts[0] as f64, *shifts.last().unwrap_or(&0.0) as f64);
        let span = if hi > lo { hi - lo } else { 1.0 };
        let x = |c: f64| x0 + pw * (c - lo) / span;
        let y = |f: f64| top + ph * (1.0 - f / ymax);
        o.push_str(&format!(
            "<text x=\"{x0}\" y=\"{:.1}\" font-weight=\"bold\">{} ({} prompts)</text>\n",
            top - 12.0,
            esc(&r.model_label),
            r.prompts.len()
        ));
        for k in 0..=4 {
            let f = ymax * k as f64 / 4.0;
            let tick = if unit {
                format!("{:.0}%", 100.0 * f)
            } else {
                format!("{f:.2}")
            };
            o.push_str(&format!(
                "<line x1=\"{x0}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#ddd\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{tick}</text>\n",
                y(f), x0 + pw, y(f), x0 - 6.0, y(f) + 4.0
            ));
        }
        for c in &shifts {
            o.push_str(&format!(
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{c:+}</text>\n",
                x(*c as f64),
                top + ph + 18.0
            ));
        }
        o.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">shift c added to every logit; y: {}</text>\n",
            x0 + pw / 2.0,
            top + ph + 40.0,
            esc(label)
        ));
        let mut series: Vec<(Operator, f32)> =
            cells.iter().map(|c| (c.operator(), c.theta)).collect();
        series.dedup();
        for (i, (op, theta)) in series.iter().enumerate() {
            let colour = COLOURS[i % COLOURS.len()];
            let dashed = *op != Operator::Sign;
            let mut pts: Vec<(f64, Estimate)> = cells
                .iter()
                .filter(|c| c.operator() == *op && c.theta == *theta)
                .map(|c| (c.shift as f64, metric(c)))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            // The band: along the upper bounds, then back along the lower ones.
            let band = pts
                .iter()
                .map(|(c, e)| (x(*c), y(e.hi)))
                .chain(pts.iter().rev().map(|(c, e)| (x(*c), y(e.lo))));
            o.push_str(&format!(
                "<polygon points=\"{}\" fill=\"{colour}\" fill-opacity=\"0.15\" stroke=\"none\"/>\n",
                svg::points(band)
            ));
            o.push_str(&format!(
                "<polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"{}/>\n",
                svg::points(pts.iter().map(|(c, e)| (x(*c), y(e.mean)))),
                if dashed { " stroke-dasharray=\"6 3\"" } else { "" }
            ));
            for (c, e) in &pts {
                o.push_str(&format!(
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{colour}\"/>\n",
                    x(*c),
                    y(e.mean)
                ));
            }
            let name = format!("{} theta {}", op.as_str(), theta);
            if !legend.iter().any(|(l, _, _)| *l == name) {
                legend.push((name, colour, dashed));
            }
        }
    }
    let lx = left + models.len() as f64 * (pw + gap) - 40.0;
    for (i, (name, colour, dashed)) in legend.iter().enumerate() {
        let ly = top + 10.0 + 18.0 * i as f64;
        o.push_str(&format!(
            "<line x1=\"{lx}\" y1=\"{ly}\" x2=\"{:.1}\" y2=\"{ly}\" stroke=\"{colour}\" stroke-width=\"2\"{}/><text x=\"{:.1}\" y=\"{:.1}\">{}</text>\n",
            lx + 22.0,
            if *dashed { " stroke-dasharray=\"6 3\"" } else { "" },
            lx + 28.0,
            ly + 4.0,
            esc(name)
        ));
    }
    o.push_str(&format!(
        "<text x=\"{lx}\" y=\"{:.1}\" fill=\"#555\">bands: 95% bootstrap over prompts; c = 0 is each line's own reference</text>\n</svg>\n",
        top + 20.0 + 18.0 * legend.len() as f64
    ));
    Ok(o)
}

/// Share of answers that parse and that are schema-valid, per variant.
pub fn json_svg(r: &JsonReport, title: &str) -> String {
    let totals = r.totals();
    let n = r.prompts.len().max(1) as f64;
    let (left, top, bar_h, gap, pw) = (190.0, 60.0, 14.0, 12.0, 420.0);
    let height = top + totals.len() as f64 * (2.0 * bar_h + gap) + 60.0;
    let width = left + pw + 120.0;
    let mut o = svg::open(width, height, (20.0, 24.0), title);
    o.push_str(&format!(
        "<rect x=\"{left}\" y=\"34\" width=\"12\" height=\"10\" fill=\"#0072B2\"/><text x=\"{:.1}\" y=\"43\">parses</text><rect x=\"{:.1}\" y=\"34\" width=\"12\" height=\"10\" fill=\"#E69F00\"/><text x=\"{:.1}\" y=\"43\">schema-valid</text>\n",
        left + 16.0,
        left + 80.0,
        left + 96.0
    ));
    for (i, t) in totals.iter().enumerate() {
        let y0 = top + i as f64 * (2.0 * bar_h + gap);
        let (a, b) = (t.parses as f64 / n, t.schema_valid as f64 / n);
        o.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\n<rect x=\"{left}\" y=\"{y0:.1}\" width=\"{:.1}\" height=\"{bar_h}\" fill=\"#0072B2\"/><text x=\"{:.1}\" y=\"{:.1}\">{:.0}%</text>\n<rect x=\"{left}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{bar_h}\" fill=\"#E69F00\"/><text x=\"{:.1}\" y=\"{:.1}\">{:.0}%</text>\n",
            left - 8.0,
            y0 + bar_h + 4.0,
            esc(&t.label),
            pw * a,
            left + pw * a + 4.0,
            y0 + bar_h - 3.0,
            100.0 * a,
            y0 + bar_h,
            pw * b,
            left + pw * b + 4.0,
            y0 + 2.0 * bar_h - 3.0,
            100.0 * b
        ));
    }
    o.push_str("</svg>\n");
    o
}

/// Per model, per variant: the share of structural positions where the greedy choice breaks
/// the JSON along the grammar reference, as a bar with its 95% interval as a whisker (the
/// planted controls are left out; they are in the report's controls).
pub fn structural_svg(reports: &[StructuralReport], title: &str) -> String {
    let (left, top, bar_h, gap, pw, panel_gap) = (200.0, 60.0, 14.0, 6.0, 360.0, 40.0);
    let rows = reports
        .iter()
        .map(|r| r.choosers.iter().filter(|c| !c.is_control()).count())
        .max()
        .unwrap_or(0) as f64;
    let panel_h = rows * (bar_h + gap) + 30.0;
    let height = top + reports.len() as f64 * (panel_h + panel_gap) + 40.0;
    let width = left + pw + 160.0;
    let mut o = svg::open(width, height, (20.0, 24.0), title);
    o.push_str("<text x=\"20\" y=\"44\" fill=\"#555\">bar: mean over prompt/schema pairs; whisker: 95% bootstrap over pairs; scale 0 to 100%</text>\n");
    for (m, r) in reports.iter().enumerate() {
        let y_panel = top + m as f64 * (panel_h + panel_gap);
        o.push_str(&format!(
            "<text x=\"{left}\" y=\"{:.1}\" font-weight=\"bold\">{} ({} finished pairs)</text>\n<line x1=\"{left}\" y1=\"{:.1}\" x2=\"{left}\" y2=\"{:.1}\" stroke=\"#333\"/>\n",
            y_panel + 12.0,
            esc(&r.model_label),
            r.finished().len(),
            y_panel + 20.0,
            y_panel + panel_h,
        ));
        let shares = r.shares();
        for (i, s) in shares.iter().filter(|s| !s.control).enumerate() {
            let y0 = y_panel + 24.0 + i as f64 * (bar_h + gap);
            let x = |f: f64| left + pw * f.clamp(0.0, 1.0);
            let colour = COLOURS[2];
            o.push_str(&format!(
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\n<rect x=\"{left}\" y=\"{y0:.1}\" width=\"{:.1}\" height=\"{bar_h}\" fill=\"{colour}\"/>\n<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#000\"/>\n<text x=\"{:.1}\" y=\"{:.1}\">{:.1}%</text>\n",
                left - 8.0,
                y0 + bar_h - 3.0,
                esc(&s.label),
                x(s.break_share.mean) - left,
                x(s.break_share.lo),
                y0 + bar_h / 2.0,
                x(s.break_share.hi),
                y0 + bar_h / 2.0,
                x(s.break_share.hi) + 6.0,
                y0 + bar_h - 3.0,
                100.0 * s.break_share.mean
            ));
        }
    }
    o.push_str("</svg>\n");
    o
}
