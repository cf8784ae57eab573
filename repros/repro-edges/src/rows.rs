//! The three questions F6 asks of a sampler's cells, each a verdict row of its own kind (the
//! catalog, `report::kind`, says which):
//!
//! - `edge-set-<sampler>`: does it keep the set (or draw the id) its rule gives, where the
//!   oracle has an answer? A defect where llama.h states the rule, a divergence where it cites
//!   a reference.
//! - `edge-robustness-<sampler>`: does it abort, hang, leave an unreadable window, select
//!   outside the array or leave a NaN, on an input the C API accepts? llama.cpp states no
//!   contract for these inputs (its aborts are its own asserts), so this is the suite's own
//!   rule, reported and never a defect. Both the pre-registered rule and the widened one are
//!   computed and printed side by side.
//! - `edge-dist-fallback`: does dist reach the fallback its own code marks as unreachable?
//!   dist's draw loop compares running sums of the `p` it computed with a target; when those
//!   are NaN no comparison holds and the loop ends without a candidate ("fallback to the last
//!   token (don't think this can happen)", then `assert(found)`). A returned array whose `p`
//!   are not finite, on an input of two or more candidates with no NaN or `+inf` logit, is
//!   that path.

use crate::judge::{Cell, Judged, Rule};
use crate::outcome::Outcome;
use report::Verdict;

/// The set row: present when a cell keeps a set (or draws an id) no tie-break explains;
/// undecided when one differs only where a rounding margin decides, or when the set could be
/// judged nowhere; else absent.
pub fn set(cells: &[&Cell]) -> Verdict {
    if cells.iter().any(|c| c.disagrees()) {
        Verdict::Present
    } else if cells
        .iter()
        .any(|c| c.set_judged() && c.outcome == Outcome::Tie)
        || !cells.iter().any(|c| c.set_judged())
    {
        Verdict::Undecided
    } else {
        Verdict::Absent
    }
}

/// The robustness row under `rule`: present when a cell in the rule's domain breaks it,
/// undecided when the domain holds no cell, else absent.
pub fn robustness(cells: &[&Cell], rule: Rule) -> Verdict {
    let in_domain = |c: &&&Cell| match rule {
        Rule::Widened => !matches!(c.judged, Judged::Not(_)),
        Rule::Preregistered => c.judged == Judged::Fully,
    };
    if cells.iter().any(|c| c.unrobust(rule)) {
        Verdict::Present
    } else if !cells.iter().any(|c| in_domain(&c)) {
        Verdict::Undecided
    } else {
        Verdict::Absent
    }
}

/// Whether this cell is dist's fallback path: it returned, on an input of two or more
/// candidates without a NaN or `+inf` logit, with some `p` not finite.
pub fn fallback_ran(c: &Cell) -> bool {
    !matches!(c.judged, Judged::Not(_)) && c.input_size >= 2 && c.p_not_finite
}

/// The fallback row over a draw's cells: present when one cell took the path, undecided
/// when no cell could (none returned on two or more clean candidates), else absent.
pub fn fallback(cells: &[&Cell]) -> Verdict {
    let could = |c: &&&Cell| {
        !matches!(c.judged, Judged::Not(_))
            && c.input_size >= 2
            && !matches!(c.outcome, Outcome::Crashed(_) | Outcome::Fails)
    };
    if cells.iter().any(|c| fallback_ran(c)) {
        Verdict::Present
    } else if !cells.iter().any(|c| could(&c)) {
        Verdict::Undecided
    } else {
        Verdict::Absent
    }
}

/// The cells behind a row, as `input: words` (with what the array held when `detail`), or
/// the count of probes when none is notable.
pub fn evidence(cells: &[&Cell], notable: impl Fn(&Cell) -> bool, detail: bool) -> String {
    let shown: Vec<String> = (cells.iter())
        .filter(|c| notable(c))
        .map(|c| match detail {
            true => format!("{}: {} ({})", c.input, c.words(), c.detail),
            false => format!("{}: {}", c.input, c.words()),
        })
        .collect();
    if shown.is_empty() {
        format!("behaves on every input ({} probes)", cells.len())
    } else {
        shown.join("; ")
    }
}

/// The fallback row's evidence: the cells that took it, or how many could have.
pub fn fallback_evidence(cells: &[&Cell]) -> String {
    let took = evidence(cells, fallback_ran, true);
    if cells.iter().any(|c| fallback_ran(c)) {
        return took;
    }
    let could = (cells.iter())
        .filter(|c| !matches!(c.judged, Judged::Not(_)) && c.input_size >= 2)
        .count();
    format!("no probe took it: every p finite on each of the {could} inputs of two or more clean candidates")
}

/// The set row's evidence: the cells that differ, or on how many inputs the set matched.
pub fn set_evidence(cells: &[&Cell]) -> String {
    let judged = cells.iter().filter(|c| c.set_judged()).count();
    let differ: Vec<&&Cell> = (cells.iter())
        .filter(|c| c.set_judged() && c.outcome != Outcome::Behaves)
        .collect();
    if differ.is_empty() {
        format!(
            "keeps the oracle's set on each of the {judged} inputs with a set answer (of {})",
            cells.len()
        )
    } else {
        let shown: Vec<String> = (differ.iter())
            .map(|c| format!("{}: {} ({})", c.input, c.words(), c.detail))
            .collect();
        shown.join("; ")
    }
}

/// The robustness row's evidence: the widened rule's cells, then what the pre-registered
/// rule says, side by side.
pub fn robustness_evidence(cells: &[&Cell]) -> String {
    let widened = evidence(cells, |c| c.unrobust(Rule::Widened), false);
    let pre = robustness(cells, Rule::Preregistered);
    let pre_cells: Vec<&str> = (cells.iter())
        .filter(|c| c.unrobust(Rule::Preregistered))
        .map(|c| c.input)
        .collect();
    let pre_text = match pre_cells.is_empty() {
        true => pre.to_string(),
        false => format!("{pre} ({})", pre_cells.join(", ")),
    };
    format!("widened rule: {widened}; pre-registered rule: {pre_text}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use contain::Ended;

    fn cell(input: &'static str, outcome: Outcome, judged: Judged, size: usize) -> Cell {
        Cell {
            sampler: "s",
            input,
            p_not_finite: outcome == Outcome::ReturnsNan,
            outcome,
            judged,
            detail: String::new(),
            input_size: size,
        }
    }

    /// Each row reads only its own question: an abort on an empty array is a robustness
    /// finding under the widened rule and the pre-registered one where the oracle has an
    /// answer; NaN on an all -inf array only under the widened rule; neither touches the set
    /// row; a disagreement touches only the set row.
    #[test]
    fn each_row_reads_its_own_question() {
        let abrt = Outcome::Crashed(Ended::Signal(6));
        let why = || Judged::RobustnessOnly("no answer".into());
        let empty_judged = cell("empty", abrt.clone(), Judged::Fully, 0);
        let empty_unjudged = cell("empty", abrt, why(), 0);
        let nan_masked = cell("all-neg-inf", Outcome::ReturnsNan, why(), 4);
        let plain = cell("plain", Outcome::Behaves, Judged::Fully, 4);
        let diff = cell("plain", Outcome::Disagrees, Judged::Fully, 4);

        let row = [&empty_judged, &plain];
        assert_eq!(robustness(&row, Rule::Widened), Verdict::Present);
        assert_eq!(robustness(&row, Rule::Preregistered), Verdict::Present);
        assert_eq!(set(&row), Verdict::Absent);

        let row = [&empty_unjudged, &nan_masked, &plain];
        assert_eq!(robustness(&row, Rule::Widened), Verdict::Present);
        assert_eq!(robustness(&row, Rule::Preregistered), Verdict::Absent);
        assert_eq!(set(&row), Verdict::Absent);
        assert_eq!(
            robustness_evidence(&row),
            "widened rule: empty: aborts: SIGABRT; all-neg-inf: returns NaN; pre-registered rule: absent"
        );

        let row = [&diff, &plain];
        assert_eq!(set(&row), Verdict::Present);
        assert_eq!(robustness(&row, Rule::Widened), Verdict::Absent);
        assert_eq!(set(&[&empty_unjudged]), Verdict::Undecided);
    }

    /// The fallback is NaN `p` on two or more clean candidates: not on one candidate, not on
    /// garbage in, and a crash is no answer.
    #[test]
    fn the_fallback_needs_two_clean_candidates_and_a_nan_p() {
        let nan4 = cell(
            "all-neg-inf",
            Outcome::ReturnsNan,
            Judged::RobustnessOnly("x".into()),
            4,
        );
        let nan1 = cell("one", Outcome::ReturnsNan, Judged::Fully, 1);
        let garbage = cell("nan", Outcome::ReturnsNan, Judged::Not("g".into()), 4);
        let fine = cell("plain", Outcome::Behaves, Judged::Fully, 4);
        assert!(fallback_ran(&nan4));
        assert!(!fallback_ran(&nan1) && !fallback_ran(&garbage) && !fallback_ran(&fine));
        assert_eq!(fallback(&[&nan4, &fine]), Verdict::Present);
        assert_eq!(fallback(&[&nan1, &garbage, &fine]), Verdict::Absent);
        assert_eq!(fallback(&[&nan1, &garbage]), Verdict::Undecided);
    }
}
