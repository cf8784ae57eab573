//! The sweep as an SVG a person can read at a glance: one column per window, one dot per
//! prompt at the index where that window first differs from `all`, hollow dots at the top for
//! prompts where it never does, and the share that diverged above each column.

use crate::sweep::Sweep;
use report::svg::{self, escape as esc};

const W: f64 = 760.0;
const H: f64 = 440.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 170.0;
const TOP: f64 = 80.0;
const BOTTOM: f64 = 60.0;

/// Colours per prompt kind, in order of first appearance (colour-blind-safe palette).
const PALETTE: [&str; 6] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9",
];

/// `title` is drawn as a bold headline; a trailing parenthesis, if any, goes on a second line.
pub fn svg(s: &Sweep, title: &str) -> String {
    let (headline, subtitle) = match title.rfind(" (") {
        Some(i) if title.ends_with(')') => (&title[..i], &title[i + 2..title.len() - 1]),
        _ => (title, ""),
    };
    let max_new = s.plan.max_new as f64;
    let plot_h = H - TOP - BOTTOM;
    let plot_w = W - LEFT - RIGHT;
    let never_y = TOP - 16.0;
    let y = |i: f64| TOP + plot_h * (i / max_new);
    let col_w = plot_w / s.plan.windows.len() as f64;
    let mut kinds: Vec<&str> = Vec::new();
    for r in &s.rows {
        if !kinds.contains(&r.kind.as_str()) {
            kinds.push(&r.kind);
        }
    }
    let colour = |k: &str| PALETTE[kinds.iter().position(|x| *x == k).unwrap_or(0) % PALETTE.len()];
    let mut o = svg::open(W, H, (LEFT, 22.0), headline);
    o.push_str(&format!(
        "<text x=\"{LEFT}\" y=\"40\" fill=\"#555\">{}</text>\n",
        esc(subtitle)
    ));
    // Axis and grid: generated-token index grows downwards, as text is read.
    for k in 0..=4 {
        let v = max_new * k as f64 / 4.0;
        let yy = y(v);
        o.push_str(&format!(
            "<line x1=\"{LEFT}\" y1=\"{yy:.1}\" x2=\"{:.1}\" y2=\"{yy:.1}\" stroke=\"#ddd\"/>\n<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\n",
            LEFT + plot_w,
            LEFT - 6.0,
            yy + 4.0,
            v.round()
        ));
    }
    o.push_str(&format!(
        "<text x=\"18\" y=\"{:.1}\" transform=\"rotate(-90 18 {:.1})\" text-anchor=\"middle\">first generated index that differs from all</text>\n",
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0
    ));
    o.push_str(&format!(
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#555\">never</text>\n",
        LEFT - 6.0,
        never_y + 4.0
    ));
    for (i, (w, sum)) in s.plan.windows.iter().zip(s.summary()).enumerate() {
        let cx = LEFT + col_w * (i as f64 + 0.5);
        o.push_str(&format!(
            "<text x=\"{cx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">last {w}</text>\n<text x=\"{cx:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#555\">{}/{} diverge</text>\n",
            H - BOTTOM + 20.0,
            H - BOTTOM + 38.0,
            sum.diverged,
            s.rows.len()
        ));
        if let Some(m) = sum.median {
            o.push_str(&format!(
                "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#333\" stroke-width=\"2\"/>\n",
                cx - col_w * 0.35,
                y(m as f64),
                cx + col_w * 0.35,
                y(m as f64)
            ));
        }
        let n = s.rows.len().max(1) as f64;
        for (j, r) in s.rows.iter().enumerate() {
            let dx = col_w * 0.6 * ((j as f64 + 0.5) / n - 0.5);
            let c = colour(&r.kind);
            match r.cells[i].diverges_at() {
                Some(d) => o.push_str(&format!(
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"4.5\" fill=\"{c}\"><title>{}: {}</title></circle>\n",
                    cx + dx,
                    y(d as f64),
                    esc(&r.prompt),
                    d
                )),
                None => o.push_str(&format!(
                    "<circle cx=\"{:.1}\" cy=\"{never_y:.1}\" r=\"4.5\" fill=\"none\" stroke=\"{c}\"><title>{}: never</title></circle>\n",
                    cx + dx,
                    esc(&r.prompt)
                )),
            }
        }
    }
    let lx = W - RIGHT + 20.0;
    o.push_str(&format!(
        "<text x=\"{lx}\" y=\"{TOP}\" font-weight=\"bold\">prompt kind</text>\n"
    ));
    for (k, kind) in kinds.iter().enumerate() {
        let ly = TOP + 20.0 + 18.0 * k as f64;
        o.push_str(&format!(
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"4.5\" fill=\"{}\"/><text x=\"{:.1}\" y=\"{:.1}\">{}</text>\n",
            lx + 5.0,
            ly - 4.0,
            colour(kind),
            lx + 16.0,
            ly,
            esc(kind)
        ));
    }
    let ly = TOP + 30.0 + 18.0 * kinds.len() as f64;
    o.push_str(&format!(
        "<line x1=\"{lx}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#333\" stroke-width=\"2\"/><text x=\"{:.1}\" y=\"{:.1}\">median</text>\n<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"4.5\" fill=\"none\" stroke=\"#333\"/><text x=\"{:.1}\" y=\"{:.1}\">never diverges</text>\n",
        ly - 4.0,
        lx + 12.0,
        ly - 4.0,
        lx + 16.0,
        ly,
        lx + 5.0,
        ly + 14.0,
        lx + 16.0,
        ly + 18.0
    ));
    o.push_str("</svg>\n");
    o
}
