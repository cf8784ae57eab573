//! The divergence detector's controls on one prompt, decoded through the same path as every
//! scope: a planted scope that drops one id `all` penalizes, chosen where that id decides a
//! choice (the detector must flag exactly that step), and a planted scope that drops a seen id
//! whose unpenalized logit never reaches the chosen one (its penalized logits differ from
//! `all`'s at every step, its choices never do: the detector must never flag it). And the
//! controls of the penalty comparison, which holds llama.cpp's penalties and another engine's
//! own penalty to the oracle bit for bit: the planted penalties of
//! [`crate::planted_penalty`], written here, one exact (it must pass) and one with theta one
//! f32 step high (it must be caught). And the controls of the verdict's own path: the planted
//! penalties samplers of [`crate::planted_sampler`] in llama.cpp's penalties slot, judged by
//! the rule that judges `llama:N` ([`SamplerRuns`]).

use crate::decode::{Divergence, ScopeDecoder, StepChecks, Tally, Trajectory};
use crate::planted_sampler::PLANTED_WINDOW;
use crate::scope::{PlantedSampler, PlantedScope, ScopeSpec};
use anyhow::Result;
use oracle::TokenId;
use report::{Control, Verdict};
use serde::Serialize;

/// The planted penalties samplers decoded in llama.cpp's penalties slot against `all`: the
/// whole-sequence one (the rule must read it `absent`) and the windowed one (it must read it
/// `present`), each judged by [`crate::rule::measured`], the rule of the verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplerRuns {
    pub whole: Trajectory,
    pub window: Trajectory,
}

impl SamplerRuns {
    /// Both samplers through `dec`'s `llama:N` path, against `all`.
    pub fn run(dec: &mut ScopeDecoder, all: &Trajectory, max_new: usize) -> Result<SamplerRuns> {
        let mut planted = |s| dec.greedy(ScopeSpec::PlantedSampler(s), max_new, Some(all));
        Ok(SamplerRuns {
            whole: planted(PlantedSampler::WholeSequence)?,
            window: planted(PlantedSampler::Window(PLANTED_WINDOW))?,
        })
    }

    /// What the verdict's rule reads on one planted sampler, alone.
    pub fn reads(t: &Trajectory) -> Verdict {
        crate::rule::measured([t])
    }

    /// One sampler's run: where it parts from `all` (or that it never does) and what the rule
    /// reads.
    fn detail(t: &Trajectory) -> String {
        let parted = t.divergence.as_ref().map_or(
            format!("matches all for all {} tokens", t.tokens.len()),
            |d| format!("diverges at {}", d.describe()),
        );
        format!(
            "{}: {parted}; its logits differ from the oracle's {} scope at {} of {} steps -> {}",
            t.scope,
            match t.scope {
                ScopeSpec::PlantedSampler(PlantedSampler::WholeSequence) => "all".to_string(),
                _ => format!("last-{PLANTED_WINDOW}"),
            },
            t.checks.twin.mismatching_steps,
            t.checks.twin.steps,
            SamplerRuns::reads(t)
        )
    }

    pub fn controls(&self) -> Vec<Control> {
        vec![
            Control::negative(
                "planted whole-sequence penalties sampler in llama.cpp's penalties slot (then llama.cpp's greedy): the verdict's rule reads absent",
                SamplerRuns::reads(&self.whole) == Verdict::Absent,
                SamplerRuns::detail(&self.whole),
            ),
            Control::positive(
                format!("planted last-{PLANTED_WINDOW} penalties sampler in llama.cpp's penalties slot (then llama.cpp's greedy): the verdict's rule reads present"),
                SamplerRuns::reads(&self.window) == Verdict::Present,
                SamplerRuns::detail(&self.window),
            ),
        ]
    }

    /// Both runs as lines under the run's scope table.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for (t, role) in [
            (&self.whole, "negative control, must read absent"),
            (&self.window, "positive control, must read present"),
        ] {
            out += &format!(
                "  {:<24} {:>11}  {:>4} ({:<5})  -> {} ({role})\n",
                t.scope.to_string(),
                t.divergence
                    .as_ref()
                    .map_or("-".to_string(), |d| d.step.to_string()),
                t.stopped_at(),
                t.stop.as_str(),
                SamplerRuns::reads(t)
            );
        }
        out
    }
}

impl Serialize for SamplerRuns {
    fn serialize<'a, S: serde::Serializer>(&'a self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Run<'a> {
            scope: ScopeSpec,
            tokens: Vec<i32>,
            diverges_at: Option<usize>,
            divergence: &'a Option<Divergence>,
            stopped_at: usize,
            stop: &'static str,
            /// Its logits against the oracle's scope of the same ids, bit for bit.
            logits_vs_oracle: Tally,
            greedy_not_first_max: usize,
            rule_reads: Verdict,
        }
        let run = |t: &'a Trajectory| Run {
            scope: t.scope,
            tokens: t.tokens.iter().map(|i| i.0).collect(),
            diverges_at: t.divergence.as_ref().map(|d| d.step),
            divergence: &t.divergence,
            stopped_at: t.stopped_at(),
            stop: t.stop.as_str(),
            logits_vs_oracle: t.checks.twin,
            greedy_not_first_max: t.checks.greedy_mismatches,
            rule_reads: SamplerRuns::reads(t),
        };
        #[derive(Serialize)]
        struct Written<'a> {
            window: usize,
            whole_sequence: Run<'a>,
            last_window: Run<'a>,
        }
        Written {
            window: PLANTED_WINDOW,
            whole_sequence: run(&self.whole),
            last_window: run(&self.window),
        }
        .serialize(s)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PlantedRuns {
    /// Where the dropped id decides a choice along `all`, if any id ever does.
    pub mattering: Option<(usize, TokenId)>,
    pub drop_one: Option<Trajectory>,
    /// The quiet id `all` found with its closest approach to the choice, and the scope without it.
    pub quiet: Option<(TokenId, f32)>,
    pub drop_quiet: Option<Trajectory>,
}

impl PlantedRuns {
    /// Decodes both planted scopes against `all` (which must carry `first_mattering`).
    pub fn run(dec: &mut ScopeDecoder, all: &Trajectory, max_new: usize) -> Result<PlantedRuns> {
        // Each planted scope runs only when `all` found the id it drops.
        let mut planted = |scope| dec.greedy(ScopeSpec::Planted(scope), max_new, Some(all));
        let drop_one = all
            .first_mattering
            .map(|(_, id)| planted(PlantedScope::DropOne(id)))
            .transpose()?;
        let drop_quiet = all
            .quiet_id
            .map(|(id, _)| planted(PlantedScope::DropQuiet(id)))
            .transpose()?;
        Ok(PlantedRuns {
            mattering: all.first_mattering,
            drop_one,
            quiet: all.quiet_id,
            drop_quiet,
        })
    }

    /// The detector flagged the dropped id at the step where it matters, decisively.
    pub fn drop_one_flagged(&self) -> bool {
        match (&self.mattering, &self.drop_one) {
            (Some((step, id)), Some(t)) => t.divergence.as_ref().is_some_and(|d| {
                d.step == *step && d.decisive && d.causes.iter().any(|c| c.id == *id)
            }),
            _ => false,
        }
    }

    /// The detector never flagged the scope without the quiet id.
    pub fn quiet_unflagged(&self) -> bool {
        self.drop_quiet
            .as_ref()
            .is_some_and(|t| t.divergence.is_none())
    }

    pub fn drop_one_detail(&self) -> String {
        match (&self.mattering, &self.drop_one) {
            (Some((step, id)), Some(t)) => format!(
                "id {id} decides step {step} of all; the planted scope {}",
                t.divergence
                    .as_ref()
                    .map_or("never diverges".to_string(), |d| format!("diverges at {}", d.describe()))
            ),
            _ => "no seen id decides any choice along all, so no planted divergence exists (and no scope that drops ids can diverge)".to_string(),
        }
    }

    pub fn quiet_detail(&self) -> String {
        match (&self.quiet, &self.drop_quiet) {
            (Some((id, gap)), Some(t)) => format!(
                "prompt id {id} comes within {} of all's choice but never reaches it; the planted scope without it {}",
                -gap,
                t.divergence.as_ref().map_or(
                    format!("matches all for all {} tokens", t.tokens.len()),
                    |d| format!("diverges at {}", d.describe())
                )
            ),
            _ => "no prompt id stays below all's choice at every step, so no quiet scope exists"
                .to_string(),
        }
    }
}

impl Serialize for PlantedRuns {
    fn serialize<'a, S: serde::Serializer>(&'a self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct DropOne<'a> {
            id: Option<i32>,
            matters_at: Option<usize>,
            divergence: Option<&'a Divergence>,
            flagged: bool,
        }
        #[derive(Serialize)]
        struct DropQuiet<'a> {
            id: Option<i32>,
            closest_gap_below_choice: Option<f32>,
            divergence: Option<&'a Divergence>,
            unflagged: bool,
        }
        #[derive(Serialize)]
        struct Written<'a> {
            drop_one: DropOne<'a>,
            drop_quiet: DropQuiet<'a>,
        }
        let divergence = |t: &'a Option<Trajectory>| t.as_ref()?.divergence.as_ref();
        Written {
            drop_one: DropOne {
                id: self.mattering.map(|m| m.1 .0),
                matters_at: self.mattering.map(|m| m.0),
                divergence: divergence(&self.drop_one),
                flagged: self.drop_one_flagged(),
            },
            drop_quiet: DropQuiet {
                id: self.quiet.map(|q| q.0 .0),
                closest_gap_below_choice: self.quiet.map(|q| -q.1),
                divergence: divergence(&self.drop_quiet),
                unflagged: self.quiet_unflagged(),
            },
        }
        .serialize(s)
    }
}

/// The two controls over every prompt that ran (the published one, then the sweep's).
pub fn planted_controls<'a>(
    runs: impl IntoIterator<Item = (String, &'a PlantedRuns)>,
) -> Vec<Control> {
    let runs: Vec<(String, &PlantedRuns)> = runs.into_iter().collect();
    // The rule over every prompt, the first prompt's case, and every prompt that broke it
    // (each prompt's full record is in the report's data).
    let detail = |ok: fn(&PlantedRuns) -> bool, f: fn(&PlantedRuns) -> String, rule: &str| {
        let held = runs.iter().filter(|(_, r)| ok(r)).count();
        let mut d = format!("{held} of {} prompts {rule}", runs.len());
        if let Some((label, r)) = runs.first() {
            d += &format!("; [{label}] {}", f(r));
        }
        for (label, r) in runs.iter().skip(1).filter(|(_, r)| !ok(r)) {
            d += &format!("; FAILED [{label}] {}", f(r));
        }
        d
    };
    vec![
        Control::positive(
            "planted scope that drops one id all penalizes",
            runs.iter().all(|(_, r)| r.drop_one_flagged()),
            detail(
                PlantedRuns::drop_one_flagged,
                PlantedRuns::drop_one_detail,
                "flagged exactly at the step the dropped id decides",
            ),
        ),
        Control::negative(
            "planted scope that drops one seen id that never decides",
            runs.iter().all(|(_, r)| r.quiet_unflagged()),
            detail(
                PlantedRuns::quiet_unflagged,
                PlantedRuns::quiet_detail,
                "never flagged",
            ),
        ),
    ]
}

/// The penalty comparison, totalled over `trajectories`: llama.cpp's penalties against the
/// oracle bit for bit at every step of every scope with a twin, another engine's own penalty
/// likewise, the comparison's planted controls beside every oracle scope, and the greedy rule
/// where `llama:N` ran.
pub fn twin_controls<'a>(trajectories: impl IntoIterator<Item = &'a Trajectory>) -> Vec<Control> {
    let all_trajectories: Vec<&Trajectory> = trajectories.into_iter().collect();
    // The sum of `f` over the trajectories `keep` selects.
    let sum = |keep: fn(&Trajectory) -> bool, f: fn(&StepChecks) -> usize| -> usize {
        (all_trajectories.iter())
            .filter(|t| keep(t))
            .map(|t| f(&t.checks))
            .sum()
    };
    let every: fn(&Trajectory) -> bool = |_| true;
    let chain: fn(&Trajectory) -> bool = |t| matches!(t.scope, ScopeSpec::Llama(_));
    let steps = sum(every, |c| c.twin.steps);
    let mismatches = sum(every, |c| c.twin.mismatching_steps);
    let exact_steps = sum(every, |c| c.planted_exact.steps);
    let exact_mismatches = sum(every, |c| c.planted_exact.mismatching_steps);
    let wrong_steps = sum(every, |c| c.planted_wrong.steps);
    let wrong_caught = sum(every, |c| c.planted_wrong.mismatching_steps);
    let mut c = vec![
        Control::oracle_check(
            "llama.cpp's penalties = the oracle's scope penalty, bit for bit",
            steps > 0 && mismatches == 0,
            format!("{mismatches} of {steps} steps differ in some logit (all, N, gen:N and llama:N, every prompt)"),
        ),
        Control::negative(
            "penalty comparison on a planted exact penalty (written in this repro from the definition)",
            exact_steps > 0 && exact_mismatches == 0,
            format!("{exact_mismatches} of {exact_steps} steps differ in some logit (every oracle scope, every prompt)"),
        ),
        Control::positive(
            "penalty comparison on a planted penalty with theta one f32 step higher (written in this repro)",
            wrong_caught > 0,
            format!("{wrong_caught} of {wrong_steps} steps caught (every oracle scope, every prompt)"),
        ),
    ];
    // Another engine's own penalty, compared by the same code; the planted pair above is the
    // control of that code whichever penalty it compares.
    let e_steps = sum(every, |c| c.engine_twin.steps);
    let e_mismatches = sum(every, |c| c.engine_twin.mismatching_steps);
    if e_steps > 0 {
        c.push(Control::oracle_check(
            "the engine's own penalty = the oracle's scope penalty, bit for bit",
            e_mismatches == 0,
            format!("{e_mismatches} of {e_steps} steps differ in some logit (all, N and gen:N)"),
        ));
    }
    let greedy_steps = sum(chain, |c| c.steps);
    let greedy_mismatches = sum(chain, |c| c.greedy_mismatches);
    if greedy_steps > 0 {
        c.push(Control::oracle_check(
            "llama.cpp's greedy = the first maximum",
            greedy_mismatches == 0,
            format!("{greedy_mismatches} of {greedy_steps} llama:N steps differ"),
        ));
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::{Stop, Tally};
    use oracle::scope::Scope;

    fn trajectory(scope: ScopeSpec) -> Trajectory {
        Trajectory {
            scope,
            tokens: vec![TokenId(1)],
            stop: Stop::Limit,
            checks: StepChecks::default(),
            divergence: None,
            first_mattering: None,
            quiet_id: None,
        }
    }

    /// A run where no seen id decides any choice cannot show the detector firing, so its
    /// positive control fails and the report cannot say absent.
    #[test]
    fn without_a_deciding_id_the_positive_control_fails() {
        let runs = PlantedRuns {
            mattering: None,
            drop_one: None,
            quiet: Some((TokenId(5), -1.5)),
            drop_quiet: Some(trajectory(ScopeSpec::Planted(PlantedScope::DropQuiet(
                TokenId(5),
            )))),
        };
        let c = planted_controls([("short".to_string(), &runs)]);
        assert!(!c[0].passed);
        assert!(c[1].passed);
        assert_eq!(
            report::judge(report::Verdict::Absent, &c),
            report::Verdict::Inconclusive
        );
    }

    /// A decisive divergence from all at step 3.
    fn parted() -> Divergence {
        let cause = crate::decode::Cause {
            id: TokenId(2),
            raw: 2.0,
            under_reference: 1.0,
            under_scope: 2.0,
            penalized_by: "reference",
        };
        Divergence::new(
            (3, TokenId(1), TokenId(2)),
            &[1.5, 1.0],
            &[1.25, 1.0],
            1,
            vec![cause],
        )
    }

    /// The planted penalties samplers are judged by the verdict's rule: the whole-sequence
    /// one passes only when it never parts from all, the windowed one only when it parts
    /// decisively; each way round fails its control.
    #[test]
    fn the_planted_samplers_are_judged_by_the_verdicts_rule() {
        let whole = trajectory(ScopeSpec::PlantedSampler(PlantedSampler::WholeSequence));
        let window = trajectory(ScopeSpec::PlantedSampler(PlantedSampler::Window(16)));
        let passed = |runs: &SamplerRuns| -> Vec<bool> {
            runs.controls().iter().map(|c| c.passed).collect()
        };
        let mut runs = SamplerRuns {
            whole: whole.clone(),
            window: window.clone(),
        };
        assert_eq!(passed(&runs), [true, false], "a window that never parts");
        runs.window.divergence = Some(parted());
        assert_eq!(passed(&runs), [true, true]);
        runs.whole.divergence = Some(parted());
        assert_eq!(passed(&runs), [false, true], "a whole sequence that parts");
        // A divergence that rests on a tie is not the windowed control's present.
        let mut tie = parted();
        tie.decisive = false;
        runs.window.divergence = Some(tie);
        assert_eq!(SamplerRuns::reads(&runs.window), Verdict::Undecided);
        assert!(!runs.controls()[1].passed);
        let kinds: Vec<report::ControlKind> = runs.controls().iter().map(|c| c.kind).collect();
        assert_eq!(
            kinds,
            [report::ControlKind::Negative, report::ControlKind::Positive]
        );
    }

    #[test]
    fn twin_mismatches_fail_the_oracle_check() {
        let mut t = trajectory(ScopeSpec::Oracle(Scope::All));
        t.checks.twin.steps = 3;
        assert!(twin_controls([&t])[0].passed);
        t.checks.twin.mismatching_steps = 1;
        assert!(!twin_controls([&t])[0].passed);
        t.checks.twin = Default::default();
        assert!(
            !twin_controls([&t])[0].passed,
            "a twin that never ran proves nothing"
        );
    }

    /// The comparison's planted pair: the exact penalty must have run and never mismatch, the
    /// wrong one must be caught somewhere; either failing fails its control.
    #[test]
    fn the_planted_penalties_are_the_comparisons_controls() {
        let mut t = trajectory(ScopeSpec::Oracle(Scope::All));
        t.checks.twin.steps = 3;
        let controls = |t: &Trajectory| -> Vec<(report::ControlKind, bool)> {
            (twin_controls([t]).iter())
                .map(|c| (c.kind, c.passed))
                .collect()
        };
        use report::ControlKind::{Negative, OracleCheck, Positive};
        assert_eq!(
            controls(&t),
            [(OracleCheck, true), (Negative, false), (Positive, false)],
            "planted penalties that never ran prove nothing"
        );
        t.checks.planted_exact = Tally {
            steps: 3,
            mismatching_steps: 0,
        };
        t.checks.planted_wrong = Tally {
            steps: 3,
            mismatching_steps: 2,
        };
        assert_eq!(
            controls(&t),
            [(OracleCheck, true), (Negative, true), (Positive, true)]
        );
        t.checks.planted_exact.mismatching_steps = 1;
        t.checks.planted_wrong.mismatching_steps = 0;
        assert_eq!(
            controls(&t),
            [(OracleCheck, true), (Negative, false), (Positive, false)]
        );
    }
}
