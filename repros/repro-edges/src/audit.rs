//! The edge-input audit: every sampler on every input, each in its own child; the planted
//! controls through the same probe and judge; the oracle's own check; one verdict row per
//! sampler and the report.

use crate::judge::{self, Cell, Judged, Rule};
use crate::outcome::Outcome;
use crate::planted::{Flag, Planted};
use crate::probe::{self, Observed};
use crate::rows;
use crate::samplers::{self, Config};
use crate::{inputs, oracle_check, FINDING, NAME};
use anyhow::{Context, Result};
use contain::Ended;
use report::{Control, ControlKind, Report, Table, Verdict};
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;
use subject::offered;
use subject::{BuildInfo, NotOffered};

#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Sampler names (every subject when empty).
    pub samplers: Vec<String>,
    /// Input names (every input when empty).
    pub inputs: Vec<String>,
    pub timeout: Duration,
}

/// Probes `config` on `input`. A probe that times out is run once more before it is recorded,
/// so a machine busy for a moment cannot make a sampler look stuck.
fn probe(config: &Config, input: &inputs::EdgeInput, timeout: Duration) -> Result<Cell> {
    let mut observed = probe::run(config.name, input.name, timeout)?;
    if matches!(observed, Observed::Crashed(Ended::TimedOut(_), _)) {
        observed = probe::run(config.name, input.name, timeout)?;
    }
    Ok(judge::classify(config, input, &observed))
}

fn probe_all(configs: &[Config], inputs: &[inputs::EdgeInput], t: Duration) -> Result<Vec<Cell>> {
    let pairs = configs
        .iter()
        .flat_map(|c| inputs.iter().map(move |i| (c, i)));
    let mut progress =
        cmdline::Progress::new("F6 edge probes", (configs.len() * inputs.len()) as u64);
    let cells = pairs
        .map(|(c, i)| {
            let cell = probe(c, i, t);
            progress.inc(1);
            cell
        })
        .collect();
    progress.finish();
    cells
}

pub struct Audit {
    pub build: BuildInfo,
    pub samplers: Vec<Config>,
    pub inputs: Vec<inputs::EdgeInput>,
    pub cells: Vec<Cell>,
    pub control_cells: Vec<Cell>,
    pub oracle_cases: usize,
    pub oracle_failures: Vec<String>,
    pub timeout: Duration,
    /// Samplers and controls the build cannot make, by name: never probed.
    pub not_offered: BTreeMap<&'static str, NotOffered>,
}

pub fn run(plan: &Plan) -> Result<Audit> {
    let build = BuildInfo::verified()?;
    let samplers: Vec<Config> = samplers::subjects()
        .into_iter()
        .filter(|s| plan.samplers.is_empty() || plan.samplers.iter().any(|n| n == s.name))
        .collect();
    let all_inputs = inputs::all();
    let inputs: Vec<inputs::EdgeInput> = all_inputs
        .iter()
        .filter(|i| plan.inputs.is_empty() || plan.inputs.iter().any(|n| n == i.name))
        .cloned()
        .collect();
    // Building is safe (validated parameters): a configuration that cannot be built is our
    // error, found here rather than reported as the sampler failing in every probe. One the
    // build does not offer is no error: it is recorded and never probed.
    let mut not_offered = BTreeMap::new();
    for c in samplers.iter().cloned().chain(samplers::controls()) {
        let built = (c.build()).with_context(|| format!("building probe sampler {}", c.name));
        if let Err(why) = offered(built)? {
            not_offered.insert(c.name, why);
        }
    }
    let offered_only = |configs: Vec<Config>| -> Vec<Config> {
        let each = configs.into_iter();
        each.filter(|c| !not_offered.contains_key(c.name)).collect()
    };
    let (oracle_cases, oracle_failures) = oracle_check::run();
    let cells = probe_all(&offered_only(samplers.clone()), &inputs, plan.timeout)?;
    // The controls always see every input, whatever the selection.
    let controls = offered_only(samplers::controls());
    let control_cells = probe_all(&controls, &all_inputs, plan.timeout)?;
    Ok(Audit {
        build,
        samplers,
        inputs,
        cells,
        control_cells,
        oracle_cases,
        oracle_failures,
        timeout: plan.timeout,
        not_offered,
    })
}

/// The sampler whose own code states the fallback `edge-dist-fallback` looks for.
const DIST: &str = "dist";

fn row<'a>(cells: &'a [Cell], sampler: &str) -> Vec<&'a Cell> {
    cells.iter().filter(|c| c.sampler == sampler).collect()
}

impl Audit {
    pub fn controls(&self) -> Vec<Control> {
        let mut out = vec![Control::oracle_check(
            "oracle on hand-computed edge cases",
            self.oracle_failures.is_empty(),
            if self.oracle_failures.is_empty() {
                format!(
                    "{} cases (k <= 0, min_keep above the size, -inf entries, ties, a 0 probability, penalties), every surviving logit bit-exact",
                    self.oracle_cases
                )
            } else {
                self.oracle_failures.join("; ")
            },
        )];
        for &p in Planted::ALL {
            let cells = row(&self.control_cells, p.name());
            if let Some(why) = self.not_offered.get(p.name()) {
                let kind = match p.must_flag() {
                    Some(_) => ControlKind::Positive,
                    None => ControlKind::Negative,
                };
                out.push(Control::not_run(kind, p.name(), why));
                continue;
            }
            match p.must_flag() {
                Some((input, flag)) => {
                    let cell = cells.iter().find(|c| c.input == input);
                    let flagged = cell.is_some_and(|c| match flag {
                        Flag::Robustness(want) => c.unrobust(Rule::Widened) && want(&c.outcome),
                        Flag::Set => c.disagrees(),
                        Flag::Fallback => rows::fallback_ran(c),
                    });
                    out.push(Control::new(
                        ControlKind::Positive,
                        p.name(),
                        flagged,
                        format!(
                            "{} on {input}: {}",
                            p.what(),
                            cell.map_or("not probed".to_string(), |c| c.words())
                        ),
                    ));
                }
                None => {
                    // Every question asked of the sampler it imitates must read absent.
                    let mut verdicts = vec![
                        ("set", rows::set(&cells)),
                        ("robustness", rows::robustness(&cells, Rule::Widened)),
                    ];
                    // Only a draw that writes `p` can show the fallback (NaN `p`); asked of
                    // one that leaves `p` alone, the question could not fail.
                    if p == Planted::SensibleDraw {
                        verdicts.push(("fallback", rows::fallback(&cells)));
                    }
                    let quiet = verdicts.iter().all(|(_, v)| *v == Verdict::Absent);
                    let said: Vec<String> =
                        (verdicts.iter()).map(|(q, v)| format!("{q} {v}")).collect();
                    let notable = rows::evidence(&cells, |c| c.notable(), false);
                    out.push(Control::negative(
                        p.name(),
                        quiet,
                        format!("{}: {} ({notable})", p.what(), said.join(", ")),
                    ));
                }
            }
        }
        out
    }

    /// The samplers the build offers: the ones probed.
    fn probed(&self) -> impl Iterator<Item = &Config> {
        let all = self.samplers.iter();
        all.filter(|s| !self.not_offered.contains_key(s.name))
    }

    /// dist's cells, the only ones the fallback row reads.
    fn dist_cells(&self) -> Vec<&Cell> {
        row(&self.cells, DIST)
    }

    /// The report's own verdict summarizes the rows that can be a defect or a divergence
    /// (sets and dist's fallback), present over undecided over absent; the robustness rows
    /// are reported beside them and never make the report present.
    pub fn measured(&self) -> Verdict {
        let mut rows: Vec<Verdict> = (self.probed())
            .map(|s| rows::set(&row(&self.cells, s.name)))
            .collect();
        if self.probes_dist() {
            rows.push(rows::fallback(&self.dist_cells()));
        }
        let mut worst = [Verdict::Present, Verdict::Undecided].into_iter();
        worst.find(|v| rows.contains(v)).unwrap_or(Verdict::Absent)
    }

    /// Whether dist was probed (it is unless a selection leaves it out).
    fn probes_dist(&self) -> bool {
        self.probed().any(|s| s.name == DIST)
    }

    fn evidence(&self) -> String {
        let unrobust: Vec<&Cell> = (self.cells.iter())
            .filter(|c| c.unrobust(Rule::Widened))
            .collect();
        let count =
            |f: &dyn Fn(&Outcome) -> bool| unrobust.iter().filter(|c| f(&c.outcome)).count();
        let cells = |f: &dyn Fn(&Cell) -> bool| self.cells.iter().filter(|c| f(c)).count();
        let fully = cells(&|c| c.judged == Judged::Fully);
        let judged = cells(&|c| c.judged());
        let ties = cells(&|c| c.set_judged() && c.outcome == Outcome::Tie);
        let fallback = cells(&|c| c.sampler == DIST && rows::fallback_ran(c));
        let not_offered: Vec<&str> = (self.samplers.iter())
            .filter(|s| self.not_offered.contains_key(s.name))
            .map(|s| s.name)
            .collect();
        let skipped = match not_offered.is_empty() {
            true => String::new(),
            false => format!(
                "; not probed, not offered by this build: {}",
                not_offered.join(", ")
            ),
        };
        format!(
            "{} probes ({} samplers x {} inputs), {} garbage-in; sets: {} judged against the oracle, {} disagree, {} undecided (margin); probes that took dist's fallback: {}; robustness (widened rule, not defects): {} judged, {} crash or time out, {} select outside, {} return NaN",
            self.cells.len(),
            self.probed().count(),
            self.inputs.len(),
            self.cells.len() - judged,
            fully,
            cells(&|c| c.disagrees()),
            ties,
            fallback,
            judged,
            count(&|o| matches!(o, Outcome::Crashed(_) | Outcome::Fails)),
            count(&|o| *o == Outcome::SelectsOutside),
            count(&|o| *o == Outcome::ReturnsNan),
        ) + &skipped
    }

    fn table(&self, samplers: &[&str], cells: &[Cell], inputs: &[&str]) -> String {
        let mut t = Table::new().left("  ", 7);
        for _ in inputs {
            t = t.right(" ", 4);
        }
        t.row(std::iter::once("sampler").chain(inputs.iter().copied()));
        for s in samplers {
            let codes = inputs.iter().map(|i| {
                (cells.iter())
                    .find(|c| c.sampler == *s && c.input == *i)
                    .map_or("-".to_string(), |c| c.code())
            });
            t.row(std::iter::once(s.to_string()).chain(codes));
        }
        t.render()
    }

    pub fn to_text(&self) -> String {
        let names: Vec<&str> = self.samplers.iter().map(|s| s.name).collect();
        let inputs: Vec<&str> = self.inputs.iter().map(|i| i.name).collect();
        let mut out = format!(
            "edge inputs through llama_sampler_apply, each probe in a supervised child\n\
             (timeout {} s per probe, a time-out is retried once)\n\n",
            self.timeout.as_secs_f64()
        );
        out.push_str("== inputs (handed over in this order, sorted = false) ==\n");
        for i in &self.inputs {
            let items = i.written().join(" ");
            out.push_str(&format!("  {:<13} [{items}]  {}\n", i.name, i.what));
        }
        out.push_str("\n== samplers ==\n");
        for s in &self.samplers {
            out.push_str(&format!("  {:<17} {}\n", s.name, s.params));
        }
        if !self.not_offered.is_empty() {
            out.push_str("\n== not offered by this build (not probed; - in the tables) ==\n");
            let width = self.not_offered.keys().map(|n| n.len()).max().unwrap_or(0);
            for (name, why) in &self.not_offered {
                out.push_str(&format!("  {name:<width$} {why}\n"));
            }
        }
        out.push_str("\n== outcomes ==\n");
        out.push_str(&self.table(&names, &self.cells, &inputs));
        out.push_str(
            "  codes: ok behaves (matches the oracle under some tie-break); ran finishes cleanly, no set\n  answer to judge; ABRT/SEGV/... killed by that signal; TIME times out; FAIL unreadable\n  result; OUT selected outside the array left; NaN leaves a NaN logit or a NaN, infinite or\n  negative p; DIFF disagrees with the oracle under every tie-break; tie differs where only a\n  rounding margin decides; lower case: garbage in (a NaN or +inf logit), recorded, not judged\n",
        );
        out.push_str(&self.robustness_table());
        out.push_str("\n== every cell that is not ok or ran ==\n");
        for c in self.cells.iter().filter(|c| c.notable()) {
            out.push_str(&format!(
                "  {} on {}: {} ({})\n",
                c.sampler,
                c.input,
                c.words(),
                c.detail
            ));
        }
        out.push_str("\n== planted controls (each judged as the sampler it imitates) ==\n");
        let planted: Vec<&str> = Planted::ALL.iter().map(|p| p.name()).collect();
        let all_inputs: Vec<&str> = inputs::all().iter().map(|i| i.name).collect();
        out.push_str(&self.table(&planted, &self.control_cells, &all_inputs));
        out
    }

    /// Each sampler's robustness under both rules, side by side: PREREG's F6 rule as first
    /// written (only inputs the oracle has a set answer for) and as widened after the first
    /// run (every input without a NaN or `+inf` logit). Reported, never a defect.
    fn robustness_table(&self) -> String {
        let mut t = (Table::new().left("  ", 0).left("  ", 0))
            .left("  ", 0)
            .left("  ", 0);
        t.row([
            "sampler",
            "pre-registered",
            "widened",
            "cells (widened rule)",
        ]);
        for s in self.probed() {
            let cells = row(&self.cells, s.name);
            let broken: Vec<&str> = (cells.iter())
                .filter(|c| c.unrobust(Rule::Widened))
                .map(|c| c.input)
                .collect();
            t.row([
                s.name,
                rows::robustness(&cells, Rule::Preregistered).as_str(),
                rows::robustness(&cells, Rule::Widened).as_str(),
                &broken.join(" "),
            ]);
        }
        format!(
            "\n== robustness (the suite's own rule; llama.cpp states no contract for these inputs; reported, never a defect) ==\n{}",
            t.render()
        )
    }

    fn cell_data(c: &Cell) -> CellData<'_> {
        CellData {
            sampler: c.sampler,
            input: c.input,
            code: c.code(),
            outcome: c.words(),
            judged: match &c.judged {
                Judged::Fully => "robustness and set",
                Judged::RobustnessOnly(_) => "robustness only",
                Judged::Not(_) => "not judged",
            },
            unrobust: c.unrobust(Rule::Widened),
            disagrees: c.disagrees(),
            dist_fallback: c.sampler == DIST && rows::fallback_ran(c),
            detail: &c.detail,
        }
    }

    pub fn report(&self) -> Report {
        let mut r = Report::new(
            self.build.report_subject(&FINDING, NAME),
            self.measured(),
            self.evidence(),
            self.controls(),
        );
        let params = |s: &Config| BTreeMap::from([("params", s.params.clone())]);
        for s in &self.samplers {
            let cells = row(&self.cells, s.name);
            let not_offered = self.not_offered.get(s.name).map(|why| why.to_string());
            let (verdict, evidence) = match &not_offered {
                Some(why) => (Verdict::NotOffered, why.clone()),
                None => (rows::set(&cells), rows::set_evidence(&cells)),
            };
            r.add_row(format!("edge-set-{}", s.name), verdict, evidence, params(s));
        }
        for s in &self.samplers {
            let cells = row(&self.cells, s.name);
            let (verdict, evidence) = match self.not_offered.get(s.name) {
                Some(why) => (Verdict::NotOffered, why.to_string()),
                None => (
                    rows::robustness(&cells, Rule::Widened),
                    rows::robustness_evidence(&cells),
                ),
            };
            let mut data = params(s);
            data.insert(
                "preregistered_rule",
                rows::robustness(&cells, Rule::Preregistered).to_string(),
            );
            r.add_row(
                format!("edge-robustness-{}", s.name),
                verdict,
                evidence,
                data,
            );
        }
        if let Some(dist) = self.samplers.iter().find(|s| s.name == DIST) {
            let cells = self.dist_cells();
            let (verdict, evidence) = match self.not_offered.get(DIST) {
                Some(why) => (Verdict::NotOffered, why.to_string()),
                None => (rows::fallback(&cells), rows::fallback_evidence(&cells)),
            };
            r.add_row("edge-dist-fallback", verdict, evidence, params(dist));
        }
        let inputs = self.inputs.iter().map(|i| InputData {
            name: i.name,
            what: i.what,
            entries: i.written(),
        });
        r.with_body(Body {
            timeout_seconds: self.timeout.as_secs_f64(),
            inputs: inputs.collect(),
            cells: self.cells.iter().map(Audit::cell_data).collect(),
            control_cells: self.control_cells.iter().map(Audit::cell_data).collect(),
            not_offered: (self.not_offered.iter())
                .map(|(name, why)| (*name, why.to_string()))
                .collect(),
        })
        .with_text(self.to_text())
    }
}

/// The report's JSON after the header and the verdict rows.
#[derive(Serialize)]
struct Body<'a> {
    timeout_seconds: f64,
    inputs: Vec<InputData>,
    cells: Vec<CellData<'a>>,
    control_cells: Vec<CellData<'a>>,
    /// What the build lacks, by sampler or control name.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    not_offered: BTreeMap<&'static str, String>,
}

#[derive(Serialize)]
struct InputData {
    name: &'static str,
    what: &'static str,
    entries: Vec<String>,
}

#[derive(Serialize)]
struct CellData<'a> {
    sampler: &'static str,
    input: &'static str,
    code: String,
    outcome: String,
    judged: &'static str,
    /// Breaks the robustness rule (widened).
    unrobust: bool,
    /// The set check ran and no tie-break explains the array.
    disagrees: bool,
    /// dist's fallback path ran.
    dist_fallback: bool,
    detail: &'a str,
}
