//! Every SVG under `results/` passes the chart check (no label outside the page or over
//! another, no two series drawn alike, its n and interval stated), and, rendered to PNG by
//! `rsvg-convert` (librsvg, a renderer independent of the chart helper's width estimate), has
//! no ink within a few pixels of its border: text or lines cut by the page edge leave ink there.

use std::path::{Path, PathBuf};
use std::process::Command;

fn svgs(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            svgs(&path, out);
        } else if path.extension().is_some_and(|e| e == "svg") {
            out.push(path);
        }
    }
}

fn committed() -> Vec<PathBuf> {
    let mut found = Vec::new();
    svgs(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../results"),
        &mut found,
    );
    found.sort();
    assert!(found.len() >= 11, "{found:?}");
    found
}

#[test]
fn every_chart_under_results_passes_the_check() {
    for path in committed() {
        let problems = report::chart::check(&std::fs::read_to_string(&path).unwrap());
        assert!(problems.is_empty(), "{}: {problems:?}", path.display());
    }
}

/// How close to the border ink counts as cut by the page edge, in pixels.
const BORDER: usize = 2;

/// `svg` rendered by `rsvg-convert` to an 8-bit RGBA image: its width, height and pixels.
fn render(svg: &str, name: &str) -> (usize, usize, Vec<u8>) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let (svg_path, png_path) = (
        dir.join(format!("{name}.svg")),
        dir.join(format!("{name}.png")),
    );
    std::fs::write(&svg_path, svg).unwrap();
    let out = Command::new("rsvg-convert")
        .arg("-o")
        .arg(&png_path)
        .arg(&svg_path)
        .output()
        .unwrap_or_else(|e| {
            panic!("rsvg-convert (Debian package librsvg2-bin, `make deps` installs it): {e}")
        });
    assert!(
        out.status.success(),
        "rsvg-convert {}: {}",
        svg_path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(&png_path).unwrap(),
    ));
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let (w, h) = (info.width as usize, info.height as usize);
    let mut rgba = Vec::with_capacity(w * h * 4);
    for px in buf[..info.buffer_size()].chunks(channels) {
        match px {
            [g] => rgba.extend([*g, *g, *g, 255]),
            [g, a] => rgba.extend([*g, *g, *g, *a]),
            [r, g, b] => rgba.extend([*r, *g, *b, 255]),
            [r, g, b, a] => rgba.extend([*r, *g, *b, *a]),
            _ => panic!("{channels} channels in {}", png_path.display()),
        }
    }
    (w, h, rgba)
}

/// The pixels within [`BORDER`] of the image's edge that are not opaque white, as `(x, y)`.
fn ink_at_border(svg: &str, name: &str) -> Vec<(usize, usize)> {
    let (w, h, rgba) = render(svg, name);
    let mut ink = Vec::new();
    for y in 0..h {
        for x in 0..w {
            let edge = x < BORDER || y < BORDER || x >= w - BORDER || y >= h - BORDER;
            let px = &rgba[(y * w + x) * 4..][..4];
            if edge && px != [255, 255, 255, 255] {
                ink.push((x, y));
            }
        }
    }
    ink
}

#[test]
fn every_chart_under_results_renders_with_nothing_cut_by_its_edge() {
    for path in committed() {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let ink = ink_at_border(&std::fs::read_to_string(&path).unwrap(), &name);
        assert!(
            ink.is_empty(),
            "{}: {} pixels of ink at the border, first {:?}",
            path.display(),
            ink.len(),
            ink.first()
        );
    }
}

#[test]
fn a_label_past_the_right_edge_is_caught_by_the_render() {
    // A committed chart with one more label, starting 40 px left of the page's right edge.
    let path = &committed()[0];
    let svg = std::fs::read_to_string(path).unwrap();
    let root = svg.split('>').next().unwrap();
    let view: Vec<f64> = root
        .split("viewBox=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .split(' ')
        .map(|v| v.parse().unwrap())
        .collect();
    let (right, mid) = (view[0] + view[2], view[1] + view[3] / 2.0);
    let planted = svg.replace(
        "</svg>",
        &format!(
            "<text x=\"{:.1}\" y=\"{mid:.1}\" font-size=\"12\">a label past the right edge</text>\n</svg>",
            right - 40.0
        ),
    );
    let ink = ink_at_border(&planted, "planted-past-right-edge");
    assert!(!ink.is_empty(), "{}", path.display());
    assert!(
        ink.iter().all(|&(x, _)| x > 100),
        "ink only at the right edge: {:?}",
        ink.first()
    );
}
