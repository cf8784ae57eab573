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
            c.op == Operator::Sign
                && c.theta == theta
                && theta > 1.0
                && c.shift.abs() == reach
                && reach > 0.0
        })
        .collect()
}

/// Over the shifted cells with theta above 1 of the slots `pick` names (at theta 1 every
/// operator is the identity, which the no-op leg covers): prompts that parted from c = 0, how
/// many of those at a knife edge, and of how many prompt-cells.
pub fn divergences(cells: &[Cell], pick: impl Fn(Operator) -> bool) -> (usize, usize, usize) {
    let counted = cells
        .iter()
        .filter(|c| pick(c.op) && !c.is_reference() && c.theta > 1.0);
    counted.fold((0, 0, 0), |(d, k, n), c| {
        (
            d + c.diverged(),
            k + c.knife_edges(),
            n + c.per_prompt.len(),
        )
    })
}

/// [`divergences`] over the gauge-free slots.
pub fn gauge_free_divergences(cells: &[Cell]) -> (usize, usize, usize) {
    divergences(cells, |op| op != Operator::Sign)
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
    let strong_above = |cells: &Vec<Cell>| {
        strongest(cells)
            .iter()
            .any(|c| c.differing().lo > THRESHOLD)
    };
    let present = all.iter().any(strong_above);
    let absent = all.iter().all(|cells| {
        let strong = strongest(cells);
        !strong.is_empty() && strong.iter().all(|c| c.differing().hi <= THRESHOLD)
    });
    Ok(match (gauge_free_clean, present, absent) {
        (true, true, _) => Verdict::Present,
        (true, false, true) => Verdict::Absent,
        _ => Verdict::Undecided,
    })
}

/// The fix's rule: `absent` when the normalized slot (theta above 1) never parts from its
/// c = 0 run, `undecided` when it parts only at knife edges, `present` otherwise.
pub fn fix_verdict_of(models: &[ModelRuns]) -> Result<Verdict> {
    let (mut diverged, mut knife) = (0, 0);
    for m in models {
        let (d, k, _) = divergences(&m.cells()?, |op| op == Operator::Normalized);
        (diverged, knife) = (diverged + d, knife + k);
    }
    Ok(if diverged == 0 {
        Verdict::Absent
    } else if diverged == knife {
        Verdict::Undecided
    } else {
        Verdict::Present
    })
}
