//! The scope sweep: windows of several lengths over a corpus of prompts, each compared with
//! `all` (how often and how early does a window part ways?). Every window carries llama.cpp's
//! penalties stage of the same length as a twin, compared bit for bit at every step beside the
//! planted penalties of [`crate::planted_penalty`], and every prompt runs the two planted scopes
//! of [`crate::controls`].

use crate::controls::PlantedRuns;
use crate::decode::{Divergence, ScopeDecoder, Tally, Trajectory};
use crate::run::LoadedModel;
use crate::scope::ScopeSpec;
use anyhow::{ensure, Result};
use oracle::scope::Scope;
use serde::Serialize;
use std::sync::Arc;

/// Prompts of `sweep-prompts.txt`: `(kind, prompt)`.
pub fn corpus() -> Vec<(String, String)> {
    include_str!("../sweep-prompts.txt")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (kind, prompt) = l.split_once('\t').expect("KIND<TAB>PROMPT");
            (kind.to_string(), prompt.to_string())
        })
        .collect()
}

#[derive(Debug, Clone, PartialEq)]
pub struct SweepPlan {
    pub prompts: Vec<(String, String)>,
    pub windows: Vec<usize>,
    pub max_new: usize,
}

impl SweepPlan {
    /// What `make audit` runs.
    pub fn full() -> SweepPlan {
        SweepPlan {
            prompts: corpus(),
            windows: vec![16, 32, 64, 128, 256],
            max_new: 160,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PromptRow {
    pub kind: String,
    pub prompt: String,
    pub prompt_tokens: usize,
    /// `all`, then one per window of the plan, with their twin checks.
    pub trajectories: Vec<Trajectory>,
    pub planted: PlantedRuns,
}

impl PromptRow {
    /// llama.cpp's twin and the planted exact penalty agreed with the oracle at every step,
    /// and both planted scopes behaved.
    pub fn checks_pass(&self) -> bool {
        (self.trajectories.iter()).all(|t| {
            t.checks.twin.mismatching_steps == 0 && t.checks.planted_exact.mismatching_steps == 0
        }) && self.planted.drop_one_flagged()
            && self.planted.quiet_unflagged()
    }

    pub fn all(&self) -> &Trajectory {
        &self.trajectories[0]
    }

    /// The windows' trajectories, in the plan's order.
    pub fn windows(&self) -> &[Trajectory] {
        &self.trajectories[1..]
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Sweep {
    pub plan: SweepPlan,
    pub theta: f32,
    pub rows: Vec<PromptRow>,
}

impl Serialize for Sweep {
    fn serialize<'a, S: serde::Serializer>(&'a self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Twin {
            scope: ScopeSpec,
            steps: usize,
            mismatching_steps: usize,
            planted_exact: Tally,
            planted_wrong: Tally,
        }
        #[derive(Serialize)]
        struct Window<'a> {
            window: usize,
            diverges_at: Option<usize>,
            divergence: &'a Option<Divergence>,
            stopped_at: usize,
            stop: &'static str,
        }
        #[derive(Serialize)]
        struct Prompt<'a> {
            kind: &'a str,
            prompt: &'a str,
            prompt_tokens: usize,
            all_stopped_at: usize,
            all_stop: &'static str,
            checks_pass: bool,
            llama_twin: Vec<Twin>,
            planted: &'a PlantedRuns,
            windows: Vec<Window<'a>>,
        }
        #[derive(Serialize)]
        struct Written<'a> {
            windows: &'a [usize],
            max_new: usize,
            penalty: f32,
            checks_pass: bool,
            summary: Vec<WindowSummary>,
            prompts: Vec<Prompt<'a>>,
        }
        let prompt = |r: &'a PromptRow| Prompt {
            kind: &r.kind,
            prompt: &r.prompt,
            prompt_tokens: r.prompt_tokens,
            all_stopped_at: r.all().stopped_at(),
            all_stop: r.all().stop.as_str(),
            checks_pass: r.checks_pass(),
            llama_twin: (r.trajectories.iter())
                .map(|t| Twin {
                    scope: t.scope,
                    steps: t.checks.twin.steps,
                    mismatching_steps: t.checks.twin.mismatching_steps,
                    planted_exact: t.checks.planted_exact,
                    planted_wrong: t.checks.planted_wrong,
                })
                .collect(),
            planted: &r.planted,
            windows: (self.plan.windows.iter().zip(r.windows()))
                .map(|(&window, t)| Window {
                    window,
                    diverges_at: t.divergence.as_ref().map(|d| d.step),
                    divergence: &t.divergence,
                    stopped_at: t.stopped_at(),
                    stop: t.stop.as_str(),
                })
                .collect(),
        };
        Written {
            windows: &self.plan.windows,
            max_new: self.plan.max_new,
            penalty: self.theta,
            checks_pass: self.checks_pass(),
            summary: self.summary(),
            prompts: self.rows.iter().map(prompt).collect(),
        }
        .serialize(s)
    }
}

pub fn run(m: &LoadedModel, plan: &SweepPlan, theta: f32, threads: i32) -> Result<Sweep> {
    ensure!(!plan.prompts.is_empty(), "the sweep has no prompts");
    let mut rows = Vec::new();
    let mut progress = cmdline::Progress::new(
        format!("F3 scope sweep prompts on {}", m.choice.label),
        plan.prompts.len() as u64,
    );
    for (kind, prompt) in &plan.prompts {
        let ids = m.chat_ids(prompt)?;
        let prompt_tokens = ids.len();
        let model = Arc::clone(&m.model);
        let mut dec = ScopeDecoder::new(model, ids, theta, plan.max_new, threads)?;
        let windows = plan.windows.iter().map(|&w| Scope::Last(w));
        let scopes: Vec<ScopeSpec> = std::iter::once(Scope::All)
            .chain(windows)
            .map(ScopeSpec::Oracle)
            .collect();
        let trajectories = dec.against_first(&scopes, plan.max_new)?;
        rows.push(PromptRow {
            kind: kind.clone(),
            prompt: prompt.clone(),
            prompt_tokens,
            planted: PlantedRuns::run(&mut dec, &trajectories[0], plan.max_new)?,
            trajectories,
        });
        progress.inc(1);
    }
    progress.finish();
    Ok(Sweep {
        plan: plan.clone(),
        theta,
        rows,
    })
}

/// Per window: prompts that diverged, and the earliest and median divergence index.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowSummary {
    pub window: usize,
    /// Every prompt of the sweep.
    pub prompts: usize,
    pub diverged: usize,
    /// Of those, divergences that rest on an exact tie (not decisive).
    pub undecided: usize,
    pub earliest: Option<usize>,
    pub median: Option<usize>,
}

/// An index, or `-` for none.
fn or_dash(i: Option<usize>) -> String {
    i.map_or("-".to_string(), |d| d.to_string())
}

impl Sweep {
    pub fn checks_pass(&self) -> bool {
        self.rows.iter().all(PromptRow::checks_pass)
    }

    pub fn summary(&self) -> Vec<WindowSummary> {
        (self.plan.windows.iter().enumerate())
            .map(|(i, &window)| {
                let found: Vec<&Divergence> = (self.rows.iter())
                    .filter_map(|r| r.windows()[i].divergence.as_ref())
                    .collect();
                let mut d: Vec<usize> = found.iter().map(|d| d.step).collect();
                d.sort();
                WindowSummary {
                    window,
                    prompts: self.rows.len(),
                    diverged: d.len(),
                    undecided: found.iter().filter(|d| !d.decisive).count(),
                    earliest: d.first().copied(),
                    // Lower median: an actual observed index, never an average of two.
                    median: (!d.is_empty()).then(|| d[(d.len() - 1) / 2]),
                }
            })
            .collect()
    }

    pub fn to_text(&self) -> String {
        let mut out = format!(
            "scope sweep: last-N windows vs all, penalty {}, up to {} new tokens, {} prompts\n  first index where the window differs from all ('-' = never, '?' = rests on a tie; stop of all in brackets); checks = llama.cpp twin and the planted exact penalty bit for bit at every step, and both planted scopes\n  {:<6} {:>6} {:>10}",
            self.theta,
            self.plan.max_new,
            self.rows.len(),
            "kind",
            "prompt",
            "all stops"
        );
        for w in &self.plan.windows {
            out += &format!(" {:>6}", format!("N={w}"));
        }
        out += "  checks\n";
        for r in &self.rows {
            let all = r.all();
            let stop = format!("{} ({})", all.stopped_at(), all.stop.as_str());
            out += &format!("  {:<6} {:>6} {stop:>10}", r.kind, r.prompt_tokens);
            for t in r.windows() {
                let at = (t.divergence.as_ref()).map_or("-".to_string(), |d| {
                    format!("{}{}", d.step, if d.decisive { "" } else { "?" })
                });
                out += &format!(" {at:>6}");
            }
            let checks = if r.checks_pass() { "ok" } else { "FAIL" };
            out += &format!("  {checks}  {:?}\n", r.prompt);
        }
        for s in self.summary() {
            out += &format!(
                "  N={:<4} diverged on {:>2} of {} prompts ({} resting on a tie); earliest {}, median {}\n",
                s.window,
                s.diverged,
                s.prompts,
                s.undecided,
                or_dash(s.earliest),
                or_dash(s.median)
            );
        }
        out
    }
}
