//! The one chart helper every SVG under `results/` is drawn with.
//!
//! A [`Chart`] is a canvas that measures what it draws. Every label's extent is estimated from
//! its characters ([`text_width`]: per-character widths of DejaVu Sans, rounded up; DejaVu is
//! the widest of the common sans-serif fonts and the one the charts are checked with), and the
//! finished page is the extent of everything drawn plus a margin, so no label falls outside it.
//! Series are registered with a [`Style`] (a colour and a dash pattern, and the marker that
//! goes with the dash); a second series with a style already taken in the same chart is a
//! programming error and panics. Every chart ends with the [`Basis`] it was drawn from: the
//! sample size and how its intervals were computed (or that it has none).
//!
//! [`check`] reads a finished SVG back and reports clipped or overlapping text, two legend
//! keys with one style, and a missing basis; the tests run it on every SVG under `results/`.
//! Coordinates print at one decimal; nothing depends on time or on the machine, so the same
//! data gives the same bytes.

use anyhow::{Context as _, Result};
use serde::Deserialize;
use serde_json::Value;

/// Colour-blind-safe colours (Okabe and Ito), in the order series take them; yellow is left
/// out (unreadable on white).
pub const COLOURS: [&str; 7] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000",
];

/// Dash patterns (`stroke-dasharray`), each with its marker (a circle, square, triangle and
/// diamond, in [`Chart::marker`]), so a series stays apart from the one in the same colour
/// even where its line is hidden.
pub const DASHES: [&str; 4] = ["", "7 3", "2 2", "9 3 2 3"];

/// The page margin around everything drawn.
pub const MARGIN: f64 = 20.0;

/// Body text size; titles are [`TITLE_SIZE`].
pub const BODY_SIZE: f64 = 12.0;
pub const TITLE_SIZE: f64 = 15.0;

/// Height of one line of body text, baseline to baseline.
pub const LINE: f64 = 18.0;

/// A series' look: an index into [`COLOURS`] and one into [`DASHES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    colour: usize,
    dash: usize,
}

impl Style {
    /// How many series one chart can tell apart.
    pub const COUNT: usize = COLOURS.len() * DASHES.len();

    pub fn new(colour: usize, dash: usize) -> Style {
        assert!(
            colour < COLOURS.len() && dash < DASHES.len(),
            "no style ({colour}, {dash})"
        );
        Style { colour, dash }
    }

    /// The `k`-th style: every colour solid first, then every colour in the next dash.
    pub fn nth(k: usize) -> Style {
        assert!(
            k < Style::COUNT,
            "a chart tells at most {} series apart",
            Style::COUNT
        );
        Style::new(k % COLOURS.len(), k / COLOURS.len())
    }

    pub fn hex(self) -> &'static str {
        COLOURS[self.colour]
    }

    /// The `stroke-dasharray` attribute with a leading space, or nothing for a solid line.
    fn dash_attr(self) -> String {
        match DASHES[self.dash] {
            "" => String::new(),
            d => format!(" stroke-dasharray=\"{d}\""),
        }
    }

    /// The key [`check`] compares: colour and dash.
    fn key(self) -> String {
        format!("{}/{}", self.hex(), DASHES[self.dash])
    }
}

/// Where a label's `x` is: its start, middle or end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    Start,
    Middle,
    End,
}

/// How a label is set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Font {
    pub size: f64,
    pub bold: bool,
    pub anchor: Anchor,
    pub grey: bool,
    /// Turned a quarter left (read bottom to top), about its anchor point.
    pub vertical: bool,
}

impl Font {
    pub const BODY: Font = Font {
        size: BODY_SIZE,
        bold: false,
        anchor: Anchor::Start,
        grey: false,
        vertical: false,
    };

    pub fn bold(self) -> Font {
        Font { bold: true, ..self }
    }
    pub fn grey(self) -> Font {
        Font { grey: true, ..self }
    }
    pub fn middle(self) -> Font {
        Font {
            anchor: Anchor::Middle,
            ..self
        }
    }
    pub fn end(self) -> Font {
        Font {
            anchor: Anchor::End,
            ..self
        }
    }
    pub fn vertical(self) -> Font {
        Font {
            vertical: true,
            ..self
        }
    }
}

/// The estimated width of `s` set at `size` pixels: DejaVu Sans's advance widths, each
/// character rounded up to its class's widest (0.30 em for `i l |`, 1.0 em for `m w M W %`
/// and anything outside ASCII), bold 12% wider.
pub fn text_width(s: &str, size: f64, bold: bool) -> f64 {
    let em: f64 = s
        .chars()
        .map(|c| match c {
            'i' | 'j' | 'l' | 'I' | 'J' | '\'' | '|' => 0.30,
            ' ' | ',' | '.' | ':' | ';' | '/' | '\\' | '!' | '`' => 0.41,
            '-' | '(' | ')' | '[' | ']' | 'f' | 't' | 'r' | '"' => 0.47,
            'm' | 'w' | 'M' | 'W' | '%' | '@' | '#' | '+' | '<' | '=' | '>' | '~' | '&' => 1.0,
            'a'..='z' | '0'..='9' | '_' | '?' | '$' | '{' | '}' | '*' | '^' => 0.64,
            'A'..='Z' => 0.80,
            _ => 1.0,
        })
        .sum();
    em * size * if bold { 1.12 } else { 1.0 }
}

/// The width of the widest of `labels` in body text (0 for none).
pub fn widest<S: AsRef<str>>(labels: impl IntoIterator<Item = S>) -> f64 {
    labels
        .into_iter()
        .map(|l| text_width(l.as_ref(), BODY_SIZE, false))
        .fold(0.0, f64::max)
}

/// A rectangle `[x0, x1] x [y0, y1]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Extent {
    pub x0: f64,
    pub y0: f64,
    pub x1: f64,
    pub y1: f64,
}

impl Extent {
    fn point(x: f64, y: f64) -> Extent {
        Extent::around((x, y), 0.0)
    }

    /// The square of half-width `r` around `(x, y)`.
    fn around((x, y): (f64, f64), r: f64) -> Extent {
        Extent {
            x0: x - r,
            y0: y - r,
            x1: x + r,
            y1: y + r,
        }
    }

    fn union(self, o: Extent) -> Extent {
        Extent {
            x0: self.x0.min(o.x0),
            y0: self.y0.min(o.y0),
            x1: self.x1.max(o.x1),
            y1: self.y1.max(o.y1),
        }
    }

    fn overlaps(self, o: Extent) -> bool {
        self.x0 < o.x1 && o.x0 < self.x1 && self.y0 < o.y1 && o.y0 < self.y1
    }

    fn within(self, o: Extent) -> bool {
        self.x0 >= o.x0 && self.x1 <= o.x1 && self.y0 >= o.y0 && self.y1 <= o.y1
    }
}

/// The extent of a label at `(x, y)` (its baseline): from cap height above to descender below.
fn label_extent(x: f64, y: f64, s: &str, f: Font) -> Extent {
    let w = text_width(s, f.size, f.bold);
    let start = match f.anchor {
        Anchor::Start => 0.0,
        Anchor::Middle => -w / 2.0,
        Anchor::End => -w,
    };
    let (up, down) = (0.76 * f.size, 0.24 * f.size);
    if f.vertical {
        // Turned about (x, y): the text runs upwards from y, its ascent to the left of x.
        Extent {
            x0: x - up,
            y0: y - start - w,
            x1: x + down,
            y1: y - start,
        }
    } else {
        Extent {
            x0: x + start,
            y0: y - up,
            x1: x + start + w,
            y1: y + down,
        }
    }
}

/// What a chart was drawn from: its sample size and how its intervals were computed.
#[derive(Debug, Clone, PartialEq)]
pub struct Basis {
    /// For example `n = 16 prompts per model`.
    pub n: String,
    /// For example `bands: 95% percentile bootstrap over prompts, 10000 resamples`, or why
    /// there are none.
    pub interval: String,
}

/// How a legend shows each series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// A line segment in the series' colour and dash, with its marker.
    Line,
    /// A filled box (bar charts).
    Box,
    /// The marker alone (dot plots).
    Dot,
}

/// `s` with `&`, `<`, `>` and `"` escaped, for SVG text and attributes.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
}

/// The `points` attribute of a polyline or polygon: `x,y` pairs at one decimal, space-separated.
pub fn points(xy: impl IntoIterator<Item = (f64, f64)>) -> String {
    xy.into_iter()
        .map(|(x, y)| format!("{x:.1},{y:.1}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A chart being drawn; see the module documentation.
#[derive(Debug)]
pub struct Chart {
    body: String,
    drawn: Extent,
    series: Vec<(String, Style)>,
    legend_drawn: bool,
    head: f64,
}

impl Chart {
    /// A chart whose bold title sits at the top left.
    pub fn new(title: &str) -> Chart {
        let y = MARGIN + TITLE_SIZE;
        let mut c = Chart {
            body: String::new(),
            drawn: Extent::point(MARGIN, MARGIN),
            series: Vec::new(),
            legend_drawn: false,
            head: y,
        };
        c.text(
            MARGIN,
            y,
            title,
            Font {
                size: TITLE_SIZE,
                ..Font::BODY.bold()
            },
        );
        c
    }

    /// A grey line under the title (and under any earlier subtitle).
    pub fn subtitle(&mut self, s: &str) {
        self.head += LINE;
        self.text(MARGIN, self.head, s, Font::BODY.grey());
    }

    /// The lowest baseline of the title and subtitles: content starts below it.
    pub fn head(&self) -> f64 {
        self.head
    }

    fn grow(&mut self, e: Extent) {
        self.drawn = self.drawn.union(e);
    }

    fn grow_points(&mut self, pts: &[(f64, f64)]) {
        for &(x, y) in pts {
            self.grow(Extent::point(x, y));
        }
    }

    /// A label with its baseline at `(x, y)`; returns its extent.
    pub fn text(&mut self, x: f64, y: f64, s: &str, f: Font) -> Extent {
        let e = label_extent(x, y, s, f);
        self.grow(e);
        let mut attrs = format!("x=\"{x:.1}\" y=\"{y:.1}\" font-size=\"{}\"", f.size);
        if f.bold {
            attrs.push_str(" font-weight=\"bold\"");
        }
        match f.anchor {
            Anchor::Start => {}
            Anchor::Middle => attrs.push_str(" text-anchor=\"middle\""),
            Anchor::End => attrs.push_str(" text-anchor=\"end\""),
        }
        if f.grey {
            attrs.push_str(" fill=\"#555\"");
        }
        if f.vertical {
            attrs.push_str(&format!(" transform=\"rotate(-90 {x:.1} {y:.1})\""));
        }
        self.body
            .push_str(&format!("<text {attrs}>{}</text>\n", escape(s)));
        e
    }

    /// A plain line (axis, grid, whisker): `stroke` colour, `width` pixels.
    pub fn line(&mut self, (x1, y1): (f64, f64), (x2, y2): (f64, f64), stroke: &str, width: f64) {
        self.grow_points(&[(x1, y1), (x2, y2)]);
        self.body.push_str(&format!(
            "<line x1=\"{x1:.1}\" y1=\"{y1:.1}\" x2=\"{x2:.1}\" y2=\"{y2:.1}\" stroke=\"{stroke}\" stroke-width=\"{width}\"/>\n"
        ));
    }

    /// Registers a series under `name`; panics if another series in this chart has `style`.
    /// Registering the same name with the same style again (one series across panels) is fine.
    pub fn series(&mut self, name: &str, style: Style) -> Style {
        match self.series.iter().find(|(_, s)| *s == style) {
            Some((other, _)) => assert!(
                other == name,
                "series '{name}' and '{other}' would share colour {} and dash '{}'",
                style.hex(),
                DASHES[style.dash]
            ),
            None => {
                assert!(
                    !self.series.iter().any(|(n, _)| n == name),
                    "series '{name}' registered with two styles"
                );
                self.series.push((name.to_string(), style));
            }
        }
        style
    }

    /// A series' line through `pts`.
    pub fn polyline(&mut self, pts: &[(f64, f64)], style: Style) {
        self.grow_points(pts);
        self.body.push_str(&format!(
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{}/>\n",
            points(pts.iter().copied()),
            style.hex(),
            style.dash_attr()
        ));
    }

    /// A series' interval band: the polygon through `pts`, lightly filled.
    pub fn band(&mut self, pts: &[(f64, f64)], style: Style) {
        self.grow_points(pts);
        self.body.push_str(&format!(
            "<polygon points=\"{}\" fill=\"{}\" fill-opacity=\"0.15\" stroke=\"none\"/>\n",
            points(pts.iter().copied()),
            style.hex()
        ));
    }

    /// A series' marker at `(x, y)`, filled or hollow, with an optional hover text.
    pub fn marker(&mut self, (x, y): (f64, f64), style: Style, filled: bool, hover: Option<&str>) {
        let r = 4.5;
        self.grow(Extent::around((x, y), r));
        let paint = if filled {
            format!("fill=\"{}\"", style.hex())
        } else {
            format!(
                "fill=\"white\" stroke=\"{}\" stroke-width=\"1.5\"",
                style.hex()
            )
        };
        let (tag, shape) = match style.dash {
            0 => ("circle", format!("cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"4\"")),
            1 => (
                "rect",
                format!(
                    "x=\"{:.1}\" y=\"{:.1}\" width=\"7\" height=\"7\"",
                    x - 3.5,
                    y - 3.5
                ),
            ),
            2 => (
                "polygon",
                format!(
                    "points=\"{}\"",
                    points([(x, y - r), (x + r, y + 3.5), (x - r, y + 3.5)])
                ),
            ),
            _ => (
                "polygon",
                format!(
                    "points=\"{}\"",
                    points([(x, y - r), (x + r, y), (x, y + r), (x - r, y)])
                ),
            ),
        };
        match hover {
            Some(h) => self.body.push_str(&format!(
                "<{tag} {shape} {paint}><title>{}</title></{tag}>\n",
                escape(h)
            )),
            None => self.body.push_str(&format!("<{tag} {shape} {paint}/>\n")),
        }
    }

    /// A series' bar: the box from `(x, y)`, `w` by `h`; dashed styles are outlined in their
    /// dash over a lighter fill.
    pub fn bar(&mut self, (x, y): (f64, f64), w: f64, h: f64, style: Style) {
        self.grow(Extent {
            x0: x,
            y0: y,
            x1: x + w,
            y1: y + h,
        });
        self.body.push_str(&format!(
            "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" {}/>\n",
            Chart::box_paint(style)
        ));
    }

    fn box_paint(style: Style) -> String {
        match style.dash {
            0 => format!("fill=\"{}\"", style.hex()),
            _ => format!(
                "fill=\"{c}\" fill-opacity=\"0.4\" stroke=\"{c}\" stroke-width=\"1.5\"{}",
                style.dash_attr(),
                c = style.hex()
            ),
        }
    }

    /// The legend: every registered series, in order, from `(x, y)` (the first entry's
    /// baseline) downwards, under an optional bold heading. Returns its extent.
    pub fn legend(&mut self, (x, y): (f64, f64), heading: Option<&str>, key: Key) -> Extent {
        let mut e = Extent::point(x, y);
        let mut ly = y;
        if let Some(h) = heading {
            e = e.union(self.text(x, ly, h, Font::BODY.bold()));
            ly += LINE;
        }
        for (name, style) in self.series.clone() {
            let mid = ly - 4.0;
            self.body.push_str(&format!(
                "<g class=\"key\" data-style=\"{}\">\n",
                style.key()
            ));
            let text_x = match key {
                Key::Line => {
                    self.line_key((x, mid), style);
                    x + 34.0
                }
                Key::Box => {
                    self.grow(Extent {
                        x0: x,
                        y0: mid - 6.0,
                        x1: x + 12.0,
                        y1: mid + 6.0,
                    });
                    self.body.push_str(&format!(
                        "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"12\" height=\"12\" {}/>\n",
                        mid - 6.0,
                        Chart::box_paint(style)
                    ));
                    x + 18.0
                }
                Key::Dot => {
                    self.marker((x + 5.0, mid), style, true, None);
                    x + 16.0
                }
            };
            self.body.push_str("</g>\n");
            e = e.union(self.text(text_x, ly, &name, Font::BODY));
            ly += LINE;
        }
        self.legend_drawn = true;
        e
    }

    fn line_key(&mut self, (x, y): (f64, f64), style: Style) {
        self.grow_points(&[(x, y), (x + 28.0, y)]);
        self.body.push_str(&format!(
            "<line x1=\"{x:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"{}\" stroke-width=\"2\"{}/>\n",
            x + 28.0,
            style.hex(),
            style.dash_attr()
        ));
        self.marker((x + 14.0, y), style, true, None);
    }

    /// The finished SVG: the basis in two grey lines under everything drawn, and a page that
    /// holds it all with [`MARGIN`] to spare. Panics if series were registered and no legend
    /// was drawn.
    pub fn finish(mut self, basis: &Basis) -> String {
        assert!(
            self.series.is_empty() || self.legend_drawn,
            "a chart with series needs its legend"
        );
        let y = self.drawn.y1 + LINE + 4.0;
        self.tagged(MARGIN, y, &basis.n, "n");
        self.tagged(MARGIN, y + LINE, &basis.interval, "interval");
        let x0 = (self.drawn.x0 - MARGIN).min(0.0).floor();
        let y0 = (self.drawn.y0 - MARGIN).min(0.0).floor();
        let w = (self.drawn.x1 + MARGIN).ceil() - x0;
        let h = (self.drawn.y1 + MARGIN).ceil() - y0;
        format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"{x0} {y0} {w} {h}\" font-family=\"DejaVu Sans, sans-serif\" font-size=\"{BODY_SIZE}\">\n<rect x=\"{x0}\" y=\"{y0}\" width=\"{w}\" height=\"{h}\" fill=\"white\"/>\n{}</svg>\n",
            self.body
        )
    }

    /// A grey basis line, marked with `class` so [`check`] can find it.
    fn tagged(&mut self, x: f64, y: f64, s: &str, class: &str) {
        let before = self.body.len();
        self.text(x, y, s, Font::BODY.grey());
        self.body
            .insert_str(before + "<text".len(), &format!(" class=\"{class}\""));
    }
}

/// The value of attribute `name` in the tag text `tag`.
fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let pat = format!(" {name}=\"");
    let start = tag.find(&pat)? + pat.len();
    tag[start..].split('"').next()
}

/// The drawn elements of `svg` (shapes and lines), each as its tag name and attribute text.
fn shapes(svg: &str) -> impl Iterator<Item = (&str, String)> {
    svg.split('<').filter_map(|piece| {
        let tag = piece.split('>').next().unwrap_or("");
        let name = tag.split([' ', '/']).next().unwrap_or("");
        matches!(name, "line" | "polyline" | "polygon" | "rect" | "circle")
            .then(|| (name, format!(" {tag}")))
    })
}

/// How an element looks, from the attributes a renderer draws: its shape (with the number of
/// corners of a polygon, which tells the triangle and diamond markers apart), stroke, fill and
/// dash. Coordinates are left out: two elements with one look are told apart by nothing else.
fn look(name: &str, tag: &str) -> String {
    let corners = match name {
        "polygon" => attr(tag, "points").map_or(0, |p| p.split(' ').count()),
        _ => 0,
    };
    format!(
        "{name}{corners} stroke={} fill={} dash={}",
        attr(tag, "stroke").unwrap_or("none"),
        attr(tag, "fill").unwrap_or("black"),
        attr(tag, "stroke-dasharray").unwrap_or("")
    )
}

/// Two legend keys drawn alike, and series lines drawn in a colour and dash that no legend key
/// shows, read from the drawn attributes, not from any label the writer put beside them.
fn check_styles(svg: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let mut keys: Vec<String> = Vec::new();
    let mut key_strokes: Vec<(String, String)> = Vec::new();
    let mut pieces = svg.split("<g class=\"key\"");
    let mut outside = pieces.next().unwrap_or("").to_string();
    for piece in pieces {
        let (inside, after) = piece.split_once("</g>").unwrap_or((piece, ""));
        outside.push_str(after);
        let drawn: Vec<(&str, String)> = shapes(inside).collect();
        let key = drawn
            .iter()
            .map(|(name, tag)| look(name, tag))
            .collect::<Vec<_>>()
            .join("; ");
        if keys.contains(&key) {
            problems.push(format!("two legend keys drawn alike: {key}"));
        }
        keys.push(key);
        for (_, tag) in &drawn {
            // A key's colour is its stroke, or its fill when it has none.
            let colour = match attr(tag, "stroke") {
                None | Some("none") => attr(tag, "fill").unwrap_or("black"),
                Some(stroke) => stroke,
            };
            let dash = attr(tag, "stroke-dasharray").unwrap_or("");
            key_strokes.push((colour.to_string(), dash.to_string()));
        }
    }
    for (_, tag) in shapes(&outside).filter(|(name, _)| *name == "polyline") {
        let stroke = attr(&tag, "stroke").unwrap_or("none");
        let dash = attr(&tag, "stroke-dasharray").unwrap_or("");
        let problem =
            format!("a series line in colour {stroke} and dash '{dash}' that no legend key shows");
        let seen = (stroke.to_string(), dash.to_string());
        if !key_strokes.contains(&seen) && !problems.contains(&problem) {
            problems.push(problem);
        }
    }
    problems
}

/// What is wrong with a chart written by [`Chart::finish`]: text outside the page, two labels
/// over each other, two legend keys with one colour and dash, a missing `n` or interval line.
/// Empty when nothing is.
pub fn check(svg: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let root = svg.split('>').next().unwrap_or("");
    let page = attr(root, "viewBox").and_then(|v| {
        let n: Vec<f64> = v.split(' ').filter_map(|x| x.parse().ok()).collect();
        match n[..] {
            [x, y, w, h] => Some(Extent {
                x0: x,
                y0: y,
                x1: x + w,
                y1: y + h,
            }),
            _ => None,
        }
    });
    let Some(page) = page else {
        return vec!["no viewBox of four numbers".into()];
    };
    let mut labels: Vec<(String, Extent)> = Vec::new();
    for piece in svg.split("<text ").skip(1) {
        let (tag, rest) = piece.split_once('>').unwrap_or((piece, ""));
        let tag = &format!(" {tag}");
        let content = unescape(rest.split("</text>").next().unwrap_or(""));
        let num = |k: &str| attr(tag, k).and_then(|v| v.parse::<f64>().ok());
        let (Some(x), Some(y), Some(size)) = (num("x"), num("y"), num("font-size")) else {
            problems.push(format!("text '{content}' without x, y and font-size"));
            continue;
        };
        let f = Font {
            size,
            bold: attr(tag, "font-weight") == Some("bold"),
            anchor: match attr(tag, "text-anchor") {
                Some("middle") => Anchor::Middle,
                Some("end") => Anchor::End,
                _ => Anchor::Start,
            },
            grey: false,
            vertical: attr(tag, "transform").is_some(),
        };
        let e = label_extent(x, y, &content, f);
        if !e.within(page) {
            problems.push(format!("'{content}' reaches outside the page"));
        }
        if let Some((other, _)) = labels.iter().find(|(_, o)| o.overlaps(e)) {
            problems.push(format!("'{content}' overlaps '{other}'"));
        }
        labels.push((content, e));
    }
    problems.extend(check_styles(svg));
    for class in ["n", "interval"] {
        if !svg.contains(&format!("<text class=\"{class}\"")) {
            problems.push(format!("no '{class}' line"));
        }
    }
    problems
}

/// Redraws the charts of the results file `json` with `draw` and compares each with the file
/// of its name beside `json`; an error names any chart that fails [`check`] or differs from
/// the committed file. With `REDRAW_CHARTS` set in the environment it writes them instead:
/// how the committed charts are redrawn from the committed results without rerunning an
/// audit. Returns how many charts were drawn.
pub fn redraw_from(
    json: &std::path::Path,
    draw: impl Fn(&Value) -> Result<Vec<(String, String)>>,
) -> Result<usize> {
    let text =
        std::fs::read_to_string(json).with_context(|| format!("reading {}", json.display()))?;
    let value: Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", json.display()))?;
    let files = draw(&value).with_context(|| format!("drawing from {}", json.display()))?;
    let dir = json.parent().context("a results file has a directory")?;
    for (name, svg) in &files {
        let problems = check(svg);
        anyhow::ensure!(problems.is_empty(), "{name}: {}", problems.join("; "));
        let path = dir.join(name);
        if std::env::var_os("REDRAW_CHARTS").is_some() {
            std::fs::write(&path, svg).with_context(|| format!("writing {}", path.display()))?;
        } else {
            let committed = std::fs::read_to_string(&path).unwrap_or_default();
            anyhow::ensure!(
                committed == *svg,
                "{} is not what {} draws (REDRAW_CHARTS=1 rewrites it)",
                path.display(),
                json.display()
            );
        }
    }
    Ok(files.len())
}

/// The builds that have a chart `<stem>.<build>.svg` in `dir`.
pub fn builds_with(dir: &std::path::Path, stem: &str) -> Result<Vec<String>> {
    let mut builds = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if let Some(b) = name
            .strip_prefix(stem)
            .and_then(|n| n.strip_prefix('.'))
            .and_then(|n| n.strip_suffix(".svg"))
        {
            builds.push(b.to_string());
        }
    }
    builds.sort();
    Ok(builds)
}

/// A field of a results JSON, with its path for error messages: charts are drawn from the
/// JSON beside them, so a chart can be redrawn from the committed results alone.
#[derive(Debug, Clone, Copy)]
pub struct Field<'a> {
    value: &'a Value,
}

impl<'a> Field<'a> {
    pub fn new(value: &'a Value) -> Field<'a> {
        Field { value }
    }

    pub fn value(self) -> &'a Value {
        self.value
    }

    pub fn get(self, key: &str) -> Result<Field<'a>> {
        self.value
            .get(key)
            .map(Field::new)
            .with_context(|| format!("no key '{key}'"))
    }

    /// The value under `key` as a `T`: a number, a count, a string, true or false, a
    /// `[lo, hi]` pair, or an `Option` of one where the JSON may hold `null`.
    pub fn at<T: Deserialize<'a>>(self, key: &str) -> Result<T> {
        T::deserialize(self.get(key)?.value)
            .with_context(|| format!("'{key}' is not a {}", std::any::type_name::<T>()))
    }

    pub fn f64(self, key: &str) -> Result<f64> {
        self.at(key)
    }

    pub fn usize(self, key: &str) -> Result<usize> {
        self.at(key)
    }

    pub fn str(self, key: &str) -> Result<&'a str> {
        self.at(key)
    }

    /// The list under `key`, each element with its index in error messages.
    pub fn list(self, key: &str) -> Result<Vec<Field<'a>>> {
        Ok(self
            .get(key)?
            .value
            .as_array()
            .with_context(|| format!("'{key}' is not a list"))?
            .iter()
            .map(Field::new)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basis() -> Basis {
        Basis {
            n: "n = 16 prompts".into(),
            interval: "bands: 95% percentile bootstrap over prompts, 10000 resamples".into(),
        }
    }

    #[test]
    fn twelve_and_more_series_get_distinct_styles_and_the_check_sees_them() {
        let mut c = Chart::new("many series");
        for k in 0..Style::COUNT {
            let s = c.series(&format!("series {k}"), Style::nth(k));
            c.polyline(&[(40.0, 60.0 + k as f64), (300.0, 80.0 + k as f64)], s);
        }
        let styles: Vec<Style> = (0..Style::COUNT).map(Style::nth).collect();
        for (i, a) in styles.iter().enumerate() {
            assert!(styles[i + 1..].iter().all(|b| b != a), "{a:?} repeats");
        }
        c.legend((340.0, 60.0), Some("legend"), Key::Line);
        let svg = c.finish(&basis());
        assert_eq!(svg.matches("<g class=\"key\"").count(), Style::COUNT);
        assert_eq!(check(&svg), Vec::<String>::new());
        // The same page with one series drawn in another's colour, its `data-style` label left
        // as it was: the check reads the drawn strokes and fills, and objects.
        let forged = svg
            .replace("stroke=\"#D55E00\"", "stroke=\"#0072B2\"")
            .replace("fill=\"#D55E00\"", "fill=\"#0072B2\"");
        assert!(forged.contains("data-style=\"#D55E00/\""));
        // Orange is taken by four series, one per dash; each now looks like its blue twin.
        let problems = check(&forged);
        assert_eq!(problems.len(), 4, "{problems:?}");
        assert_eq!(
            problems[0],
            "two legend keys drawn alike: line0 stroke=#0072B2 fill=black dash=; circle0 stroke=none fill=#0072B2 dash="
        );
        assert!(problems
            .iter()
            .all(|p| p.starts_with("two legend keys drawn alike")));
        // A series line in a dash no key shows is reported too.
        let stray = svg.replacen("<polyline ", "<polyline stroke-dasharray=\"1 5\" ", 1);
        assert_eq!(
            check(&stray),
            ["a series line in colour #0072B2 and dash '1 5' that no legend key shows"]
        );
    }

    #[test]
    #[should_panic(expected = "would share colour")]
    fn two_series_in_one_style_panic() {
        let mut c = Chart::new("t");
        c.series("sign theta 1", Style::new(1, 0));
        c.series("sign theta 1.3", Style::new(1, 0));
    }

    #[test]
    fn one_series_may_be_drawn_in_several_panels() {
        let mut c = Chart::new("t");
        assert_eq!(c.series("a", Style::nth(3)), c.series("a", Style::nth(3)));
    }

    #[test]
    #[should_panic(expected = "at most 28")]
    fn a_29th_style_is_refused() {
        Style::nth(Style::COUNT);
    }

    #[test]
    fn the_page_grows_to_hold_every_label() {
        let long = "a caption much longer than the plot it belongs to, in mixed Case 100%";
        let mut c = Chart::new("title");
        c.text(30.0, 60.0, "ends left of zero", Font::BODY.end());
        c.text(200.0, 80.0, long, Font::BODY.bold());
        c.text(20.0, 200.0, "axis label", Font::BODY.vertical().middle());
        let svg = c.finish(&basis());
        assert_eq!(check(&svg), Vec::<String>::new());
        let w = attr(&svg, "width").unwrap().parse::<f64>().unwrap();
        assert!(w >= 200.0 + text_width(long, 12.0, true), "{w}");
        assert!(
            svg.contains(" viewBox=\"-"),
            "the left overhang moves the page's origin"
        );
        // Shrink the page and the check reports the label it now clips.
        let clipped = svg.replacen(&format!("width=\"{w}\""), "width=\"300\"", 1);
        let clipped = clipped.replacen(&format!(" {w} "), " 300 ", 1);
        assert!(check(&clipped)
            .iter()
            .any(|p| p.contains("a caption much longer")));
    }

    #[test]
    fn overlapping_labels_and_a_missing_basis_are_reported() {
        let mut c = Chart::new("title");
        c.text(40.0, 80.0, "first label", Font::BODY);
        c.text(60.0, 84.0, "second label", Font::BODY);
        let svg = c.finish(&basis());
        assert_eq!(check(&svg), ["'second label' overlaps 'first label'"]);
        let bare = svg.replace("<text class=\"interval\"", "<text");
        assert!(check(&bare).contains(&"no 'interval' line".to_string()));
    }

    #[test]
    fn the_basis_is_written_under_everything() {
        let mut c = Chart::new("t");
        c.line((20.0, 50.0), (20.0, 300.0), "#333", 1.0);
        let svg = c.finish(&basis());
        assert!(svg.contains("<text class=\"n\" x=\"20.0\" y=\"322.0\" font-size=\"12\" fill=\"#555\">n = 16 prompts</text>"));
        assert!(svg.contains("95% percentile bootstrap over prompts, 10000 resamples"));
    }

    #[test]
    fn the_width_estimate_is_never_below_dejavu_sans() {
        // DejaVu Sans advance widths in em (from the font's hmtx table), for a few glyphs of
        // each class: the estimate rounds each up.
        for (c, em) in [
            ('i', 0.278),
            ('.', 0.3179),
            ('t', 0.392),
            ('r', 0.411),
            ('a', 0.613),
            ('0', 0.636),
            ('m', 0.974),
            ('W', 0.989),
            ('%', 0.950),
            ('M', 0.863),
            ('D', 0.770),
        ] {
            assert!(text_width(&c.to_string(), 1.0, false) >= em, "{c}");
        }
        assert_eq!(text_width("", 12.0, false), 0.0);
        assert!(text_width("ab", 12.0, true) > text_width("ab", 12.0, false));
    }

    #[test]
    fn fields_name_what_is_missing() {
        let v = serde_json::json!({"a": {"n": 3, "ci": [0.1, 0.2], "s": "x", "z": null}});
        let a = Field::new(&v).get("a").unwrap();
        assert_eq!(a.usize("n").unwrap(), 3);
        assert_eq!(a.at::<(f64, f64)>("ci").unwrap(), (0.1, 0.2));
        assert_eq!(a.str("s").unwrap(), "x");
        assert_eq!(a.at::<Option<usize>>("z").unwrap(), None);
        assert_eq!(a.f64("s").unwrap_err().to_string(), "'s' is not a f64");
        assert_eq!(a.get("q").unwrap_err().to_string(), "no key 'q'");
    }

    #[test]
    fn points_print_at_one_decimal_and_text_is_escaped() {
        assert_eq!(points([(1.0, 2.25), (-0.04, 3.0)]), "1.0,2.2 -0.0,3.0");
        assert_eq!(points([]), "");
        assert_eq!(escape("a <b> & \"c\""), "a &lt;b&gt; &amp; &quot;c&quot;");
        assert_eq!(unescape(&escape("a <b> & \"c\"")), "a <b> & \"c\"");
    }
}
