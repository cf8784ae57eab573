//! The committed F5 chart is the one the committed results draw, byte for byte, and passes
//! the chart check (`REDRAW_CHARTS=1` rewrites it from the results instead).

#[test]
fn the_committed_chart_is_drawn_from_the_committed_results() {
    // The committed results folder, found the same way on every build (a generated build's
    // manifest folder is elsewhere).
    let json = test_support::results_dir().join("bench/penalty-cost.json");
    let draw = |v: &serde_json::Value| {
        Ok(vec![(
            "penalty-cost.svg".to_string(),
            penalty_cost::output::svg(v)?,
        )])
    };
    assert_eq!(report::chart::redraw_from(&json, draw).unwrap(), 1);
}
