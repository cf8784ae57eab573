//! The scope sweep: windows of several lengths over a corpus of prompts, each compared with
//! `all` (how often and how early does a window part ways?). Every window carries llama.cpp's
//! penalties stage of the same length as a twin, compared bit for bit at every step, and every
//! prompt runs the two planted scopes of [`crate::controls`].

use crate::controls::PlantedRuns;
use crate::decode::{Decoder, Divergence, Stop, Trajectory};
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
pub struct Cell {
    pub divergence: Option<Divergence>,
    pub stopped_at: usize,
    pub stop: Stop,
}

impl Cell {
    pub fn diverges_at(&self) -> Option<usize> {
        self.divergence.as_ref().map(|d| d.step)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PromptRow {
    pub kind: String,
    pub prompt: String,
    pub prompt_tokens: usize,
    pub all_stopped_at: usize,
    pub all_stop: Stop,
    pub cells: Vec<Cell>,
    /// `all` and every window, with their twin checks.
    pub trajectories: Vec<Trajectory>,
    pub planted: PlantedRuns,
}

impl PromptRow {
    /// llama.cpp's twin agreed at every step and both planted scopes behaved.
    pub fn checks_pass(&self) -> bool {
        self.trajectories
            .iter()
            .all(|t| t.checks.twin_mismatches == 0)
            && self.planted.drop_one_flagged()
            && self.planted.quiet_unflagged()
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
        struct Summary {
            window: usize,
            prompts: usize,
            diverged: usize,
            undecided: usize,
            earliest: Option<usize>,
            median: Option<usize>,
        }
        #[derive(Serialize)]
        struct Twin {
            scope: ScopeSpec,
            steps: usize,
            mismatching_steps: usize,
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
            summary: Vec<Summary>,
            prompts: Vec<Prompt<'a>>,
        }
        let prompt = |r: &'a PromptRow| Prompt {
            kind: &r.kind,
            prompt: &r.prompt,
            prompt_tokens: r.prompt_tokens,
            all_stopped_at: r.all_stopped_at,
            all_stop: r.all_stop.as_str(),
            checks_pass: r.checks_pass(),
            llama_twin: (r.trajectories.iter())
                .map(|t| Twin {
                    scope: t.scope,
                    steps: t.checks.twin_steps,
                    mismatching_steps: t.checks.twin_mismatches,
                })
                .collect(),
            planted: &r.planted,
            windows: (self.plan.windows.iter().zip(&r.cells))
                .map(|(&window, c)| Window {
                    window,
                    diverges_at: c.diverges_at(),
                    divergence: &c.divergence,
                    stopped_at: c.stopped_at,
                    stop: c.stop.as_str(),
                })
                .collect(),
        };
        Written {
            windows: &self.plan.windows,
            max_new: self.plan.max_new,
            penalty: self.theta,
            checks_pass: self.checks_pass(),
            summary: (self.summary().into_iter())
                .map(|s| Summary {
                    window: s.window,
                    prompts: self.rows.len(),
                    diverged: s.diverged,
                    undecided: s.undecided,
                    earliest: s.earliest,
                    median: s.median,
                })
                .collect(),
            prompts: self.rows.iter().map(prompt).collect(),
        }
        .serialize(s)
    }
}

pub fn run(m: &LoadedModel, plan: &SweepPlan, theta: f32, threads: i32) -> Result<Sweep> {
    ensure!(!plan.prompts.is_empty(), "the sweep has no prompts");
    let mut rows = Vec::new();
    for (kind, prompt) in &plan.prompts {
        let ids = m.chat_ids(prompt)?;
        let mut dec = Decoder::new(
            Arc::clone(&m.model),
            ids.clone(),
            theta,
            plan.max_new,
            threads,
        )?;
        let all = dec.greedy(ScopeSpec::Oracle(Scope::All), plan.max_new, None)?;
        let mut cells = Vec::new();
        let mut trajectories = vec![all.clone()];
        for &w in &plan.windows {
            let t = dec.greedy(ScopeSpec::Oracle(Scope::Last(w)), plan.max_new, Some(&all))?;
            cells.push(Cell {
                divergence: t.divergence.clone(),
                stopped_at: t.stopped_at(),
                stop: t.stop,
            });
            trajectories.push(t);
        }
        let planted = PlantedRuns::run(&mut dec, &all, plan.max_new)?;
        rows.push(PromptRow {
            kind: kind.clone(),
            prompt: prompt.clone(),
            prompt_tokens: ids.len(),
            all_stopped_at: all.stopped_at(),
            all_stop: all.stop,
            cells,
            trajectories,
            planted,
        });
    }
    Ok(Sweep {
        plan: plan.clone(),
        theta,
        rows,
    })
}

/// Per window: prompts that diverged, and the earliest and median divergence index.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowSummary {
    pub window: usize,
    pub diverged: usize,
    /// Of those, divergences that rest on an exact tie (not decisive).
    pub undecided: usize,
    pub earliest: Option<usize>,
    pub median: Option<usize>,
}

impl Sweep {
    pub fn checks_pass(&self) -> bool {
        self.rows.iter().all(PromptRow::checks_pass)
    }

    pub fn summary(&self) -> Vec<WindowSummary> {
        self.plan
            .windows
            .iter()
            .enumerate()
            .map(|(i, &window)| {
                let mut d: Vec<usize> = self
                    .rows
                    .iter()
                    .filter_map(|r| r.cells[i].diverges_at())
                    .collect();
                d.sort();
                WindowSummary {
                    window,
                    diverged: d.len(),
                    undecided: self
                        .rows
                        .iter()
                        .filter(|r| {
                            r.cells[i]
                                .divergence
                                .as_ref()
                                .is_some_and(|d| !d.decisive())
                        })
                        .count(),
                    earliest: d.first().copied(),
                    // Lower median: an actual observed index, never an average of two.
                    median: (!d.is_empty()).then(|| d[(d.len() - 1) / 2]),
                }
            })
            .collect()
    }

    pub fn to_text(&self) -> String {
        let mut out = format!(
            "scope sweep: last-N windows vs all, penalty {}, up to {} new tokens, {} prompts\n  first index where the window differs from all ('-' = never, '?' = rests on a tie; stop of all in brackets); checks = llama.cpp twin bit for bit at every step and both planted scopes\n  {:<6} {:>6} {:>10}",
            self.theta,
            self.plan.max_new,
            self.rows.len(),
            "kind",
            "prompt",
            "all stops"
        );
        for w in &self.plan.windows {
            out.push_str(&format!(" {:>6}", format!("N={w}")));
        }
        out.push_str("  checks\n");
        for r in &self.rows {
            out.push_str(&format!(
                "  {:<6} {:>6} {:>10}",
                r.kind,
                r.prompt_tokens,
                format!("{} ({})", r.all_stopped_at, r.all_stop.as_str())
            ));
            for c in &r.cells {
                out.push_str(&format!(
                    " {:>6}",
                    c.divergence.as_ref().map_or("-".to_string(), |d| format!(
                        "{}{}",
                        d.step,
                        if d.decisive() { "" } else { "?" }
                    ))
                ));
            }
            out.push_str(&format!(
                "  {}  {:?}\n",
                if r.checks_pass() { "ok" } else { "FAIL" },
                r.prompt
            ));
        }
        for s in self.summary() {
            out.push_str(&format!(
                "  N={:<4} diverged on {:>2} of {} prompts ({} resting on a tie); earliest {}, median {}\n",
                s.window,
                s.diverged,
                self.rows.len(),
                s.undecided,
                s.earliest.map_or("-".to_string(), |d| d.to_string()),
                s.median.map_or("-".to_string(), |d| d.to_string())
            ));
        }
        out
    }
}
