//! Classifies one probe: what the sampler did with the input, and what of it may be judged.
//!
//! Two questions, each asked only where it has an answer (the rows of `crate::rows` read
//! them):
//! - **Robustness** (no oracle needed), on every input without a NaN or `+inf` logit: the
//!   sampler must not kill the process (`aborts: SIG...`), run past the deadline (`times
//!   out`), leave a window the probe cannot read (`fails`), leave `selected` pointing outside
//!   the array it leaves (`selects outside`), or leave a NaN logit or a NaN, infinite or
//!   negative `p` (`returns NaN`). An input with NaN or `+inf` logits is garbage in: nothing
//!   about it is judged, what happens is recorded.
//! - **The set** (the oracle), where [`crate::inputs::domain`] gives a pool and the oracle
//!   answers for the sampler: the survivors with every surviving logit (bit-exact, temp_ext
//!   within 8(n+2) ulps), greedy's choice, or that a draw lands on a survivor. Where equal
//!   logits may be ordered either way, every tie-break is tried and any one of them may be
//!   matched; a difference that only a rounding margin can explain is `tie` (undecided).

use crate::inputs::{self, EdgeInput};
use crate::outcome::Outcome;
use crate::probe::Observed;
use crate::samplers::{Config, Expect};
use oracle::stage::Stage;
use oracle::truncation::{self, Entry, Pool, Step};
use oracle::TokenId;
use subject::RawResult;

/// Which robustness rule: PREREG's F6 section as first written, or as widened by its addendum
/// of 2026-11-30 (before the results were committed a second time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Only inputs the oracle has a set answer for (no empty array for a sampler that
    /// selects, no all `-inf` array, no repeated id).
    Preregistered,
    /// Every input without a NaN or `+inf` logit.
    Widened,
}

/// How much of a cell may be judged.
#[derive(Debug, Clone, PartialEq)]
pub enum Judged {
    /// Robustness and the set.
    Fully,
    /// Robustness only; why the oracle has no set answer.
    RobustnessOnly(String),
    /// Nothing (a NaN or `+inf` logit in the input).
    Not(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub sampler: &'static str,
    pub input: &'static str,
    pub outcome: Outcome,
    pub judged: Judged,
    /// What was seen, in one line (the array left, the oracle's answer where they differ).
    pub detail: String,
    /// The sampler returned and left some `p` NaN or infinite (dist's draw loop compares
    /// running sums of these, so it cannot find a candidate).
    pub p_not_finite: bool,
    /// Candidates in the input.
    pub input_size: usize,
}

impl Cell {
    /// Whether the cell breaks the robustness rule, widened (every input without a NaN or
    /// `+inf` logit) or as pre-registered (only inputs the oracle has a set answer for).
    pub fn unrobust(&self, rule: Rule) -> bool {
        let in_domain = match rule {
            Rule::Widened => !matches!(self.judged, Judged::Not(_)),
            Rule::Preregistered => self.judged == Judged::Fully,
        };
        in_domain && self.outcome.unrobust()
    }

    /// Whether the set check could run on the cell and the sampler kept a set (or drew an
    /// id) no tie-break explains.
    pub fn disagrees(&self) -> bool {
        self.judged == Judged::Fully && self.outcome == Outcome::Disagrees
    }

    /// Whether the set check ran and found the array matching the oracle, or differing only
    /// where a rounding margin decides.
    pub fn set_judged(&self) -> bool {
        self.judged == Judged::Fully
            && matches!(
                self.outcome,
                Outcome::Behaves | Outcome::Tie | Outcome::Disagrees
            )
    }

    /// Whether anything about the cell was judged.
    pub fn judged(&self) -> bool {
        !matches!(self.judged, Judged::Not(_))
    }

    /// The table's code: upper case when judged, lower case when not; `ran` for a probe that
    /// finished cleanly with no set answer to call it `ok` against.
    pub fn code(&self) -> String {
        match (&self.outcome, &self.judged) {
            (Outcome::Behaves, Judged::Fully) => "ok".to_string(),
            (Outcome::Behaves, _) => "ran".to_string(),
            (o, Judged::Not(_)) => o.code().to_lowercase(),
            (o, _) => o.code(),
        }
    }

    /// Whether the cell is worth a line of its own: neither `ok` nor `ran`.
    pub fn notable(&self) -> bool {
        !matches!(self.code().as_str(), "ok" | "ran")
    }

    /// The cell in words, with what was not judged and why.
    pub fn words(&self) -> String {
        match (&self.outcome, &self.judged) {
            (o, Judged::Fully) => o.words(),
            (Outcome::Behaves, Judged::RobustnessOnly(why)) => {
                format!("finishes cleanly; its set not judged ({why})")
            }
            (o, Judged::RobustnessOnly(_)) => o.words(),
            (Outcome::Behaves, Judged::Not(why)) => format!("finishes; not judged ({why})"),
            (o, Judged::Not(why)) => format!("{}; not judged ({why})", o.words()),
        }
    }
}

fn left(r: &RawResult) -> String {
    let items: Vec<String> = (r.entries.iter())
        .map(|e| format!("{}:{}", e.id, e.logit))
        .collect();
    format!("left [{}] selected {}", items.join(" "), r.selected)
}

/// The oracle's answer for `config` on `input`.
enum Answer {
    /// The stage's result under the canonical tie-break, and under every other one.
    Stage(Vec<Step>, usize),
    /// A draw must land on one of these ids.
    Draw(Vec<TokenId>),
}

/// The stage's result on `pool`; typical in exact arithmetic (see `typical_exact`).
pub fn oracle_step(stage: &Stage, pool: &Pool, history: &[TokenId]) -> Step {
    match stage {
        Stage::Typical { p, min_keep } => truncation::typical_exact(pool, *p, *min_keep),
        s => truncation::apply(s, pool, history),
    }
}

/// Every way to order equal logits: the pool's ids permuted within each group of equal
/// logits (the canonical order, logit descending then id ascending, breaks ties by id, so a
/// relabelled pool is the same pool under another tie-break).
fn relabelings(pool: &Pool) -> Vec<Vec<(TokenId, TokenId)>> {
    let groups = (pool.entries()).chunk_by(|a, b| a.logit.to_bits() == b.logit.to_bits());
    groups.fold(vec![Vec::new()], |out, group| {
        let ids: &Vec<TokenId> = &group.iter().map(|x| x.id).collect();
        let extended = |perm: &Vec<TokenId>, prefix: &Vec<(TokenId, TokenId)>| {
            let mut m = prefix.clone();
            m.extend(ids.iter().copied().zip(perm.iter().copied()));
            m
        };
        (permutations(ids).iter())
            .flat_map(|perm| out.iter().map(move |prefix| extended(perm, prefix)))
            .collect()
    })
}

fn permutations(ids: &[TokenId]) -> Vec<Vec<TokenId>> {
    if ids.len() <= 1 {
        return vec![ids.to_vec()];
    }
    let mut out = Vec::new();
    for k in 0..ids.len() {
        let mut rest = ids.to_vec();
        let first = rest.remove(k);
        for mut tail in permutations(&rest) {
            tail.insert(0, first);
            out.push(tail);
        }
    }
    out
}

/// The stage under the tie-break `map` (id -> the id it is ordered as), read back in the
/// original ids.
fn under(stage: &Stage, pool: &Pool, history: &[TokenId], map: &[(TokenId, TokenId)]) -> Step {
    let to = |id: TokenId| map.iter().find(|(a, _)| *a == id).map_or(id, |(_, b)| *b);
    let from = |id: TokenId| map.iter().find(|(_, b)| *b == id).map_or(id, |(a, _)| *a);
    let relabelled = Pool::new(pool.entries().iter().map(|e| Entry {
        id: to(e.id),
        logit: e.logit,
    }));
    let history: Vec<TokenId> = history.iter().map(|&h| to(h)).collect();
    let step = oracle_step(stage, &relabelled, &history);
    Step {
        pool: Pool::new(step.pool.entries().iter().map(|e| Entry {
            id: from(e.id),
            logit: e.logit,
        })),
        edge: step.edge,
        selected: step.selected.map(from),
    }
}

fn answer(config: &Config, input: &EdgeInput) -> Result<Answer, String> {
    let pool: Pool = inputs::domain(&input.entries)?;
    match &config.expect {
        Expect::Stage(stage) => {
            if *stage == Stage::Greedy && pool.is_empty() {
                return Err("an empty array has nothing to select".to_string());
            }
            let steps = relabelings(&pool)
                .iter()
                .map(|m| under(stage, &pool, &config.history, m))
                .collect();
            Ok(Answer::Stage(steps, pool.len()))
        }
        Expect::Draw => {
            let survivors = pool.survivors();
            if survivors.is_empty() {
                return Err("no candidate can be drawn".to_string());
            }
            Ok(Answer::Draw(survivors))
        }
    }
}

/// How far a surviving logit may be from the oracle's: 0 ulps (the subject's own f32
/// arithmetic), except temp_ext with delta > 0, whose temperature the subject derives in f32
/// from an entropy over `n` probabilities and the oracle in f64: `8 (n + 2)` ulps.
fn ulp_bound(config: &Config, n: usize) -> u64 {
    match &config.expect {
        Expect::Stage(Stage::TempExt { delta, .. }) if *delta > 0.0 => 8 * (n as u64 + 2),
        _ => 0,
    }
}

fn has_nan(r: &RawResult) -> Option<String> {
    r.entries
        .iter()
        .find(|e| e.logit.is_nan() || e.p.is_nan() || e.p.is_infinite() || e.p < 0.0)
        .map(|e| format!("id {} left with logit {} and p {}", e.id, e.logit, e.p))
}

fn selected_id(r: &RawResult) -> Option<i32> {
    usize::try_from(r.selected)
        .ok()
        .and_then(|i| r.entries.get(i))
        .map(|e| e.id)
}

/// How a returned array differs from one oracle step: `None` when they agree.
fn differs(config: &Config, r: &RawResult, step: &Step, n: usize) -> Option<String> {
    let got = oracle::survivors(r.entries.iter().map(|e| (TokenId(e.id), e.logit)));
    let want = step.pool.survivors();
    if got != want {
        return Some(format!("survivors {got:?}, oracle {want:?}"));
    }
    let bound = ulp_bound(config, n);
    for e in r.entries.iter().filter(|e| e.logit > f32::NEG_INFINITY) {
        let want = step.pool.entries().iter().find(|x| x.id == TokenId(e.id));
        if let Some(w) = want.filter(|w| oracle::ulps(e.logit, w.logit) > bound) {
            return Some(format!(
                "id {} has logit {}, oracle {} (more than {bound} ulps apart)",
                e.id, e.logit, w.logit
            ));
        }
    }
    if let Some(want) = step.selected {
        if selected_id(r) != Some(want.0) {
            return Some(format!(
                "selected index {} (id {:?}), oracle id {want}",
                r.selected,
                selected_id(r)
            ));
        }
    }
    None
}

/// The set verdict: `None` when the array matches the oracle (under some tie-break),
/// otherwise the outcome and why.
fn compare(config: &Config, r: &RawResult, answer: &Answer) -> Option<(Outcome, String)> {
    match answer {
        Answer::Draw(allowed) => match selected_id(r) {
            Some(id) if allowed.contains(&TokenId(id)) => None,
            Some(id) => Some((
                Outcome::Disagrees,
                format!("drew id {id}, not one of the survivors {allowed:?}"),
            )),
            None => Some((
                Outcome::Disagrees,
                format!("drew nothing (selected {})", r.selected),
            )),
        },
        Answer::Stage(steps, n) => {
            let first = differs(config, r, &steps[0], *n)?;
            if steps.iter().any(|s| differs(config, r, s, *n).is_none()) {
                return None;
            }
            // No tie-break explains it. Only a rounding margin (or a NaN llama.cpp computes)
            // could; a tie alone cannot, once every tie-break was tried.
            match steps
                .iter()
                .find_map(|s| s.edge.as_ref().filter(|e| !e.is_tie()))
            {
                Some(margin) => Some((Outcome::Tie, format!("{first}; {}", margin.0))),
                None => Some((
                    Outcome::Disagrees,
                    format!("{first} (under each of {} tie-breaks)", steps.len()),
                )),
            }
        }
    }
}

pub fn classify(config: &Config, input: &EdgeInput, observed: &Observed) -> Cell {
    let garbage = input
        .entries
        .iter()
        .find(|(_, l)| l.is_nan() || *l == f32::INFINITY)
        .map(|(id, l)| format!("garbage in: id {id} has logit {l}"));
    let answer = answer(config, input);
    let judged = match (&garbage, &answer) {
        (Some(g), _) => Judged::Not(g.clone()),
        (None, Err(why)) => Judged::RobustnessOnly(why.clone()),
        (None, Ok(_)) => Judged::Fully,
    };
    let p_not_finite = match observed {
        Observed::Returned(r) => r.entries.iter().any(|e| !e.p.is_finite()),
        _ => false,
    };
    let cell = |outcome, detail: String| Cell {
        sampler: config.name,
        input: input.name,
        outcome,
        judged: judged.clone(),
        detail,
        p_not_finite,
        input_size: input.entries.len(),
    };
    let r = match observed {
        Observed::Crashed(e, line) if line.is_empty() => {
            return cell(Outcome::Crashed(*e), "last line: nothing on stderr".into());
        }
        Observed::Crashed(e, line) => {
            return cell(Outcome::Crashed(*e), format!("last line: {line}"))
        }
        Observed::Failed(line) => return cell(Outcome::Fails, line.clone()),
        Observed::Returned(r) => r,
    };
    if r.selected != -1 && selected_id(r).is_none() {
        return cell(Outcome::SelectsOutside, left(r));
    }
    if let Some(what) = has_nan(r) {
        return cell(Outcome::ReturnsNan, format!("{what}; {}", left(r)));
    }
    let Ok(answer) = answer else {
        return cell(Outcome::Behaves, left(r));
    };
    match compare(config, r, &answer) {
        None => cell(Outcome::Behaves, left(r)),
        Some((outcome, why)) => cell(outcome, format!("{why}; {}", left(r))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tie_break_is_one_relabelling() {
        let pool = Pool::from_logits(&[1.0, 2.0, 1.0, 1.0]);
        // One group of one (id 1), one group of three: 3! orders.
        assert_eq!(relabelings(&pool).len(), 6);
        let distinct = Pool::from_logits(&[1.0, 2.0, 3.0]);
        assert_eq!(relabelings(&distinct).len(), 1);
    }

    #[test]
    fn under_a_tie_break_top_k_may_keep_any_two_of_equal_logits() {
        let pool = Pool::from_logits(&[1.0, 1.0, 1.0, 1.0]);
        let k2: Stage = "top_k=2".parse().unwrap();
        let mut kept: Vec<Vec<TokenId>> = relabelings(&pool)
            .iter()
            .map(|m| under(&k2, &pool, &[], m).pool.survivors())
            .collect();
        kept.sort();
        kept.dedup();
        assert_eq!(kept.len(), 6, "every pair of the four ids: {kept:?}");
    }
}
