//! `matrix.svg`: one coloured cell per verdict row (down) and revision (across), with a
//! legend.
//!
//! Written as text on a fixed grid, so the same matrix gives the same bytes. It keeps the
//! rules `report::chart::check` holds every SVG under `results/` to (every label measured with
//! `report::chart::text_width` and inside the page, none over another, distinct legend keys,
//! an `n` and an `interval` line), since the runner's folder lives there.

use crate::read::{BuildStatus, Matrix, State};
use report::chart::{escape, text_width};

const MARGIN: f64 = 20.0;
const TITLE: f64 = 15.0;
const BODY: f64 = 12.0;
/// Row and column labels.
const LABEL: f64 = 11.0;
const LINE: f64 = 18.0;
const CELL_W: f64 = 20.0;
const CELL_H: f64 = 16.0;

/// A cell's paint and the legend entry it shares with others.
struct Look {
    fill: &'static str,
    stroke: Option<&'static str>,
    legend: &'static str,
}

/// Okabe and Ito's colours where a state matters, greys where there is no data. Inconclusive
/// and undecided share one: neither is an answer.
fn look(s: State) -> Look {
    let (fill, stroke, legend) = match s {
        State::Present => ("#D55E00", None, "present"),
        State::Absent => ("#A8DCC4", None, "absent"),
        State::NotOffered => (
            "#56B4E9",
            None,
            "not offered (the release lacks the sampler)",
        ),
        State::Inconclusive | State::Undecided => ("#F0E442", None, "inconclusive or undecided"),
        State::NotBuilt => ("#555555", None, "not built (build failed or refused)"),
        State::NotRun => ("#FFFFFF", Some("#BBBBBB"), "not run"),
        State::Missing => ("#DDDDDD", None, "missing from the revision's reports"),
    };
    Look {
        fill,
        stroke,
        legend,
    }
}

fn paint(l: &Look) -> String {
    match l.stroke {
        Some(s) => format!("fill=\"{}\" stroke=\"{s}\" stroke-width=\"1\"", l.fill),
        None => format!("fill=\"{}\"", l.fill),
    }
}

/// How a label is set.
#[derive(Clone, Copy)]
struct Font {
    size: f64,
    bold: bool,
    /// Turned a quarter left about its start, reading upwards.
    vertical: bool,
}

const fn font(size: f64) -> Font {
    Font {
        size,
        bold: false,
        vertical: false,
    }
}

/// Collects the body and the extent of everything drawn.
struct Page {
    body: String,
    right: f64,
    bottom: f64,
}

impl Page {
    /// A label with its baseline at `(x, y)`; `attrs` (a class, a fill) open the tag, where
    /// `report::chart::check` looks for the class.
    fn text(&mut self, x: f64, y: f64, s: &str, f: Font, attrs: &str) {
        let w = text_width(s, f.size, f.bold);
        let (right, bottom) = if f.vertical {
            (x + 0.24 * f.size, y)
        } else {
            (x + w, y + 0.24 * f.size)
        };
        self.right = self.right.max(right);
        self.bottom = self.bottom.max(bottom);
        let mut tag = format!(
            "<text{attrs} x=\"{x:.1}\" y=\"{y:.1}\" font-size=\"{}\"",
            f.size
        );
        if f.bold {
            tag.push_str(" font-weight=\"bold\"");
        }
        if f.vertical {
            tag.push_str(&format!(" transform=\"rotate(-90 {x:.1} {y:.1})\""));
        }
        self.body.push_str(&format!("{tag}>{}</text>\n", escape(s)));
    }

    fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, paint: &str, title: Option<&str>) {
        self.right = self.right.max(x + w);
        self.bottom = self.bottom.max(y + h);
        let shape = format!("x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" {paint}");
        match title {
            Some(t) => self.body.push_str(&format!(
                "<rect {shape}><title>{}</title></rect>\n",
                escape(t)
            )),
            None => self.body.push_str(&format!("<rect {shape}/>\n")),
        }
    }
}

/// The chart of `m`.
pub fn matrix_svg(m: &Matrix) -> String {
    let mut p = Page {
        body: String::new(),
        right: 0.0,
        bottom: 0.0,
    };
    let title_y = MARGIN + TITLE;
    p.text(
        MARGIN,
        title_y,
        "Verdict rows across the llama.cpp releases",
        Font {
            bold: true,
            ..font(TITLE)
        },
        "",
    );
    let sub_y = title_y + LINE;
    p.text(
        MARGIN,
        sub_y,
        &format!(
            "{} verdict rows down, {} llama.cpp revisions across (oldest left)",
            m.rows.len(),
            m.columns.len()
        ),
        font(BODY),
        " fill=\"#555\"",
    );

    let findings: Vec<&str> = m.rows.keys().map(|k| k.finding.as_str()).collect();
    let finding_w = findings
        .iter()
        .map(|f| text_width(f, LABEL, true))
        .fold(0.0, f64::max);
    let name_x = MARGIN + finding_w + 8.0;
    let name_w = (m.rows.keys())
        .map(|k| text_width(&k.name, LABEL, false))
        .fold(0.0, f64::max);
    let grid_x = name_x + name_w + 8.0;
    let label_w = (m.columns.iter())
        .map(|c| text_width(&c.name, LABEL, false))
        .fold(0.0, f64::max);
    // Column labels read upwards from just above the grid; their ascent lies left of x.
    let label_y = sub_y + 0.24 * BODY + 6.0 + label_w;
    let grid_y = label_y + 6.0;
    for (i, c) in m.columns.iter().enumerate() {
        // Centred on the column: a turned label spans 0.76 em left of x and 0.24 em right.
        let x = grid_x + i as f64 * CELL_W + CELL_W / 2.0 + 0.26 * LABEL;
        let f = Font {
            vertical: true,
            ..font(LABEL)
        };
        p.text(x, label_y, &c.name, f, "");
    }
    let grid_right = grid_x + m.columns.len() as f64 * CELL_W;
    let mut previous: Option<&str> = None;
    for (r, (key, states)) in m.rows.iter().enumerate() {
        let top = grid_y + r as f64 * CELL_H;
        let baseline = top + CELL_H - 4.0;
        if previous != Some(key.finding.as_str()) {
            if previous.is_some() {
                p.body.push_str(&format!(
                    "<line x1=\"{MARGIN:.1}\" y1=\"{top:.1}\" x2=\"{grid_right:.1}\" y2=\"{top:.1}\" stroke=\"#999999\" stroke-width=\"1\"/>\n"
                ));
            }
            let bold = Font {
                bold: true,
                ..font(LABEL)
            };
            p.text(MARGIN, baseline, &key.finding, bold, "");
            previous = Some(&key.finding);
        }
        p.text(name_x, baseline, &key.name, font(LABEL), "");
        for (i, (s, c)) in states.iter().zip(&m.columns).enumerate() {
            let x = grid_x + i as f64 * CELL_W + 1.0;
            let title = format!("{} {} at {}: {}", key.finding, key.name, c.name, s.as_str());
            p.rect(
                x,
                top + 1.0,
                CELL_W - 2.0,
                CELL_H - 2.0,
                &paint(&look(*s)),
                Some(&title),
            );
        }
    }
    let grid_bottom = grid_y + m.rows.len() as f64 * CELL_H;

    let mut y = grid_bottom + LINE + 8.0;
    let mut keyed: Vec<&str> = Vec::new();
    for s in State::ALL {
        let l = look(s);
        if keyed.contains(&l.legend) {
            continue;
        }
        keyed.push(l.legend);
        p.body.push_str(&format!(
            "<g class=\"key\" data-style=\"{}\">\n",
            l.legend.split(' ').next().unwrap_or("")
        ));
        p.rect(MARGIN, y - 10.0, 12.0, 12.0, &paint(&l), None);
        p.body.push_str("</g>\n");
        p.text(MARGIN + 18.0, y, l.legend, font(BODY), "");
        y += LINE;
    }

    let built = m
        .columns
        .iter()
        .filter(|c| c.status == BuildStatus::Ok)
        .count();
    let not_built = m.columns.iter().filter(|c| !c.status.built()).count();
    let basis_y = y + 4.0;
    p.text(
        MARGIN,
        basis_y,
        &format!(
            "n = {} verdict rows x {} revisions; {built} built and reported, {not_built} not built, {} not run",
            m.rows.len(),
            m.columns.len(),
            m.columns.len() - built - not_built
        ),
        font(BODY),
        " class=\"n\" fill=\"#555\"",
    );
    p.text(
        MARGIN,
        basis_y + LINE,
        "no intervals: each cell is one report's verdict, which its controls decide",
        font(BODY),
        " class=\"interval\" fill=\"#555\"",
    );

    let w = (p.right.max(grid_right) + MARGIN).ceil();
    let h = (p.bottom + MARGIN).ceil();
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" font-family=\"DejaVu Sans, sans-serif\" font-size=\"{BODY}\">\n<rect x=\"0\" y=\"0\" width=\"{w}\" height=\"{h}\" fill=\"white\"/>\n{}</svg>\n",
        p.body
    )
}
