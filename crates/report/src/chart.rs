//! The pieces every chart in `results/` is written with: one document opening (white page,
//! sans-serif 12, a bold 15 title), text escaped for XML, and point lists at one decimal.
//! Numbers are written the way the charts always wrote them: sizes and positions given as
//! whole `f64`s print without a decimal point, points with exactly one.

/// `s` with `&`, `<` and `>` escaped, for SVG text and attributes.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The opening of a `width` by `height` chart: the `<svg>` element, a white background and
/// `title` (escaped) in bold at `(x, y)`, each on its own line.
pub fn open(width: f64, height: f64, (x, y): (f64, f64), title: &str) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{x}\" y=\"{y}\" font-size=\"15\" font-weight=\"bold\">{}</text>\n",
        escape(title)
    )
}

/// The `points` attribute of a polyline or polygon: `x,y` pairs at one decimal, space-separated.
pub fn points(xy: impl IntoIterator<Item = (f64, f64)>) -> String {
    xy.into_iter()
        .map(|(x, y)| format!("{x:.1},{y:.1}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_opening_and_the_points_print_as_the_charts_do() {
        assert_eq!(
            open(730.0, 440.5, (20.0, 24.0), "a <b> & c"),
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"730\" height=\"440.5\" viewBox=\"0 0 730 440.5\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"20\" y=\"24\" font-size=\"15\" font-weight=\"bold\">a &lt;b&gt; &amp; c</text>\n"
        );
        assert_eq!(points([(1.0, 2.25), (-0.04, 3.0)]), "1.0,2.2 -0.0,3.0");
        assert_eq!(points([]), "");
    }
}
