//! The committed F5 chart is the one the committed results draw, byte for byte, and passes
//! the chart check (`REDRAW_CHARTS=1` rewrites it from the results instead).

use std::path::Path;

#[test]
fn the_committed_chart_is_drawn_from_the_committed_results() {
    let json = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../results/bench/penalty-cost.json");
    let draw = |v: &serde_json::Value| {
        Ok(vec![(
            "penalty-cost.svg".to_string(),
            penalty_cost::output::svg(v)?,
        )])
    };
    assert_eq!(report::chart::redraw_from(&json, draw).unwrap(), 1);
}
