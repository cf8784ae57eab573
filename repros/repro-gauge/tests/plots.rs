//! The committed F4 charts are the ones the committed results draw, byte for byte, and pass
//! the chart check (`REDRAW_CHARTS=1` rewrites them from the results instead).

#[test]
fn the_committed_charts_are_drawn_from_the_committed_results() {
    let results = test_support::results_dir();
    let builds = report::chart::builds_with(&results, "gauge-differing").unwrap();
    assert!(builds.len() >= 2, "{builds:?}");
    for b in &builds {
        // Both curve charts, from the build's report.
        let report = results.join(format!("gauge.{b}.json"));
        let drawn = report::chart::redraw_from(&report, repro_gauge::plot::files).unwrap();
        assert_eq!(drawn, 2, "{b}");
    }
    // Both JSON charts, from each build's reported-only tables.
    let tables = results.join(repro_gauge::tables::DIR);
    let with_tables = report::chart::builds_with(&tables, "json-valid").unwrap();
    assert_eq!(with_tables, builds, "every audited build has its tables");
    for b in &with_tables {
        let json = tables.join(format!("gauge.{b}.json"));
        let drawn = report::chart::redraw_from(&json, repro_gauge::plot::table_files).unwrap();
        assert_eq!(drawn, 2, "{b}");
    }
}
