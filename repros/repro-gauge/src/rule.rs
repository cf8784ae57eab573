//! F4's verdict rules (PREREG F4, addenda of 2026-11-30), before controls: the subject's
//! (`penalty-gauge-dependence`) over the sign slot's strongest cells, and the fix's
//! (`+ledger-normalized`) over the normalized slot. Kept apart from the report so that the
//! planted controls (`shift`) and the audit judge with the same functions.

use crate::free_running::{Cell, ModelRuns};
use anyhow::Result;
use oracle::gauge::Operator;
use report::Verdict;

/// The differing share the sign operator's interval must clear at the strongest cells.
pub const THRESHOLD: f64 = 0.10;

/// The strongest cells of a model: the sign slot at the largest theta (if above 1) and at the
/// shifts of largest magnitude (if not 0).
pub fn strongest(cells: &[Cell]) -> Vec<&Cell> {
    let theta = cells
        .iter()
        .map(|c| c.theta)
        .fold(f32::NEG_INFINITY, f32::max);
    let reach = cells.iter().map(|c| c.shift.abs()).fold(0.0f32, f32::max);
    cells
        .iter()
        .filter(|c| {
            c.operator() == Operator::Sign
                && c.theta == theta
                && theta > 1.0
                && c.shift.abs() == reach
                && reach > 0.0
        })
        .collect()
}

/// Over the gauge-free slots' shifted cells with theta above 1 (at theta 1 every operator is
/// the identity, which the no-op leg covers): prompts that parted from c = 0, how many of those
/// at a knife edge, and of how many prompt-cells.
pub fn gauge_free_divergences(cells: &[Cell]) -> (usize, usize, usize) {
    cells
        .iter()
        .filter(|c| c.operator() != Operator::Sign && !c.is_reference() && c.theta > 1.0)
        .fold((0, 0, 0), |(d, k, n), c| {
            (
                d + c.diverged(),
                k + c.knife_edges(),
                n + c.per_prompt.len(),
            )
        })
}

/// The verdict rule of PREREG F4 (addenda 2026-11-30), before controls: `present` when on
/// some model the sign slot's differing-share interval at a strongest cell lies above
/// [`THRESHOLD`] and no gauge-free slot parted (theta above 1, beyond a knife edge) on any
/// model; `absent` when every model has strongest cells, all with upper bounds at or below
/// it, and the gauge-free slots never parted so; `undecided` otherwise (including a design
/// with no theta above 1 or no shift).
pub fn verdict_of(models: &[ModelRuns]) -> Result<Verdict> {
    let all = models
        .iter()
        .map(ModelRuns::cells)
        .collect::<Result<Vec<_>>>()?;
    // Partings at knife edges rest on rounding: reported, not counted against the rule.
    let gauge_free_clean = all.iter().all(|cells| {
        let (d, k, _) = gauge_free_divergences(cells);
        d == k
    });
    let present = all.iter().any(|cells| {
        strongest(cells)
            .iter()
            .any(|c| c.differing().lo > THRESHOLD)
    });
    let absent = all.iter().all(|cells| {
        !strongest(cells).is_empty()
            && strongest(cells)
                .iter()
                .all(|c| c.differing().hi <= THRESHOLD)
    });
    Ok(if !gauge_free_clean {
        Verdict::Undecided
    } else if present {
        Verdict::Present
    } else if absent {
        Verdict::Absent
    } else {
        Verdict::Undecided
    })
}

/// The fix's rule: `absent` when the normalized slot (theta above 1) never parts from its
/// c = 0 run, `undecided` when it parts only at knife edges, `present` otherwise.
pub fn fix_verdict_of(models: &[ModelRuns]) -> Result<Verdict> {
    let (mut diverged, mut knife) = (0, 0);
    for m in models {
        for c in m
            .cells()?
            .iter()
            .filter(|c| c.operator() == Operator::Normalized && c.theta > 1.0 && !c.is_reference())
        {
            diverged += c.diverged();
            knife += c.knife_edges();
        }
    }
    Ok(if diverged == 0 {
        Verdict::Absent
    } else if diverged == knife {
        Verdict::Undecided
    } else {
        Verdict::Present
    })
}
