//! The in-graph rows on the linked build: one per case (`ingraph-<case>`), the planted
//! controls through the same comparison, and the report.

use crate::case::{self, Case, MIN_KEEP};
use crate::check::Check;
use crate::compare::{self, Outcome};
use crate::draws::{self, DrawRow};
use crate::planted::{History, Kind};
use anyhow::Result;
use harness::LoadedModel;
use report::{Control, ControlKind, Report, Table, Verdict};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;
use subject::{graph_offered, BuildInfo, NotOffered};

/// Every row's name starts with this.
pub const ROW: &str = "ingraph";

/// The prompt every case decodes, through the model's chat template.
pub const PROMPT: &str = "Name three rivers.";

/// Everything measured on a build that samples in the graph.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    pub model: String,
    pub prompt: String,
    pub prompt_tokens: usize,
    pub rows: Vec<Outcome>,
    /// Registered cases the build cannot run in the graph (a primed chain whose stages lack an
    /// in-graph implementation there), by name.
    pub not_offered: Vec<(String, NotOffered)>,
    /// The oracle check of temp_ext ([`case::temp_ext_cases`] on the CPU against the oracle).
    pub oracle_checks: Vec<compare::OracleCheck>,
    /// Each planted pair: (exact, wrong), in [`case::planted`]'s order.
    pub planted: Vec<[Outcome; 2]>,
    /// Draws through the graph's dist (the registered run only), its controls (exact,
    /// skewed) and the detector's power, stated before the verdicts.
    pub draws: Option<Draws>,
    /// [`case::stepped`] over [`case::STEPS`] steps (the registered run only), or why the
    /// build cannot run it in the graph.
    pub steps: Option<Result<Vec<Outcome>, NotOffered>>,
    /// The stepped row's planted controls ([`case::stepped_planted`], same order), run with
    /// it; or why they could not run on a build that runs the row.
    pub stepped_planted: Result<Vec<SteppedControl>, NotOffered>,
}

/// One planted control of the stepped row: what its graph path counts, its chain's length,
/// and its steps.
#[derive(Debug, Clone, PartialEq)]
pub struct SteppedControl {
    pub history: History,
    pub last_n: usize,
    pub stages: usize,
    pub steps: Vec<Outcome>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Draws {
    pub row: DrawRow,
    pub planted: [DrawRow; 2],
    pub power: draws::Power,
}

/// The finding on the linked build.
pub struct Audit {
    pub build: BuildInfo,
    pub measured: Result<Measured, NotOffered>,
}

/// Runs `cases` (and the planted controls) on `m` after `prompt`; with `draws`, also the draw
/// row and its controls at that many draws each; with `stepped`, also the stepped penalties
/// row.
pub fn run(
    m: &LoadedModel,
    prompt: &str,
    cases: &[Case],
    draws: Option<usize>,
    stepped: bool,
    threads: i32,
) -> Result<Audit> {
    let build = BuildInfo::current();
    if let Err(why) = graph_offered() {
        return Ok(Audit {
            build,
            measured: Err(why),
        });
    }
    let ids = m.chat_ids(prompt)?;
    let raw = compare::raw_logits(&m.model, &ids, threads)?;
    let oracle_checks = (case::temp_ext_cases().iter())
        .map(|c| compare::cpu_against_oracle(&raw, c, m.model.n_vocab()))
        .filter_map(Result::transpose)
        .collect::<Result<Vec<_>>>()?;
    let go = |c: &Case| compare::run(&m.model, &ids, &raw, c, threads);
    let (mut rows, mut not_offered) = (Vec::new(), Vec::new());
    for c in cases {
        if !c.primed {
            rows.push(go(c)?);
        } else if c.build(m.model.n_vocab())?.has_graph_implementation() {
            let mut first = compare::run_steps(&m.model, &ids, c, 1, threads)?;
            rows.push(first.remove(0));
        } else {
            not_offered.push((c.name.clone(), NO_GRAPH_PENALTIES));
        }
    }
    let planted = (case::planted().iter())
        .map(|[exact, wrong]| Ok([go(exact)?, go(wrong)?]))
        .collect::<Result<Vec<_>>>()?;
    let draws = match draws {
        None => None,
        Some(n) => {
            let go = |c: &Case| draws::run(&m.model, &ids, &raw, c, n, threads);
            let [exact, skewed] = draws::planted_cases();
            Some(Draws {
                power: draws::power(&raw, n),
                row: go(&draws::subject_case())?,
                planted: [go(&exact)?, go(&skewed)?],
            })
        }
    };
    let run_steps = |c: &Case| compare::run_steps(&m.model, &ids, c, case::STEPS, threads);
    let steps = match stepped {
        false => None,
        true => {
            let stepped = case::stepped();
            Some(
                if stepped.build(m.model.n_vocab())?.has_graph_implementation() {
                    Ok(run_steps(&stepped)?)
                } else {
                    Err(NO_GRAPH_PENALTIES)
                },
            )
        }
    };
    let stepped_planted = match (&steps, subject::graph_inputs_offered()) {
        (Some(Ok(_)), Ok(())) => (case::stepped_planted().iter())
            .map(|c| {
                let p = c.planted().expect("a stepped control has a planted stage");
                let Kind::Penalties {
                    last_n,
                    graph_history,
                    ..
                } = p.kind
                else {
                    unreachable!("a stepped control plants penalties")
                };
                Ok(SteppedControl {
                    history: graph_history,
                    last_n,
                    stages: c.links.len(),
                    steps: run_steps(c)?,
                })
            })
            .collect::<Result<Vec<_>>>()
            .map(Ok)?,
        (_, Err(why)) => Err(why),
        (_, Ok(())) => Ok(Vec::new()),
    };
    Ok(Audit {
        build,
        measured: Ok(Measured {
            model: m.choice.label.clone(),
            prompt: prompt.to_string(),
            prompt_tokens: ids.len(),
            rows,
            not_offered,
            oracle_checks,
            planted,
            draws,
            steps,
            stepped_planted,
        }),
    })
}

/// The stepped row's name.
const STEPPED: &str = "penalties-steps";

/// Why a chain that starts with penalties cannot be primed in the graph on a release.
const NO_GRAPH_PENALTIES: NotOffered = NotOffered {
    what: "penalties in the compute graph (no backend_init in this release)",
};

/// The oracle check of temp_ext: on the prompt's raw logits, each registered temp_ext chain
/// run by llama.cpp's CPU path against the oracle's, within the one-path bound derived for its
/// input. The oracle's temp_ext is the CPU's documented rule; this holds it to the CPU on the
/// inputs where the graph is judged, and needs no graph.
fn temp_ext_oracle_check(checks: &[compare::OracleCheck]) -> Control {
    let each: Vec<String> = (checks.iter())
        .map(|c| format!("{} {:.3e} (allowed {:.3e})", c.case, c.measured, c.allowed))
        .collect();
    Control::oracle_check(
        "the oracle's temp_ext against llama.cpp's CPU temp_ext, each registered temp_ext chain over the prompt's raw logits: the CPU's survivor logits within the one-path bound derived for the input",
        !checks.is_empty() && checks.iter().all(|c| c.holds()),
        format!(
            "{} chains, the CPU's largest relative difference from the oracle: {}",
            checks.len(),
            each.join("; ")
        ),
    )
}

/// One step of the stepped row, as its JSON lists it.
#[derive(Serialize)]
struct StepData {
    step: usize,
    graph_chose: Option<i32>,
    cpu_chose: Option<i32>,
    in_graph: Vec<String>,
    graph_returned: usize,
    max_ulps: u32,
    max_ulps_oracle: u32,
    flags: Vec<Check>,
    undecided: Option<String>,
}

/// The primed history, as the evidence prints it (from the run's stored outcomes: the oracle
/// was given it, so it is read back from there rather than recomputed).
fn primed_text(steps: &[Outcome]) -> String {
    steps.first().map_or("nothing".to_string(), |o| {
        o.history
            .iter()
            .map(|t| t.to_string())
            .collect::<Vec<_>>()
            .join(" ")
    })
}

/// `inconclusive` if a step ran nothing in the graph, else `present` if a decided step
/// differs, else `undecided` if any step differs, else `absent`.
fn stepped_verdict(steps: &[Outcome]) -> Verdict {
    let v: Vec<Verdict> = steps.iter().map(|o| o.verdict()).collect();
    [Verdict::Inconclusive, Verdict::Present, Verdict::Undecided]
        .into_iter()
        .find(|x| v.contains(x))
        .unwrap_or(Verdict::Absent)
}

fn stepped_evidence(steps: &[Outcome]) -> String {
    let chain = steps.first().map_or(String::new(), |o| o.chain.clone());
    let tokens: Vec<String> = (steps.iter())
        .map(|o| o.graph.selected.map_or("-".to_string(), |t| t.to_string()))
        .collect();
    let first = steps.iter().position(|o| !o.flags().is_empty());
    let mut e = format!(
        "{chain}: both chains first accept {}; then {} decode steps, each compared with the CPU chain and with the oracle's logits after the history so far; in the graph: {}; the graph chose {}; ",
        primed_text(steps),
        steps.len(),
        (steps.first().map(|o| {
            let g: Vec<&str> = (o.places.iter()).filter(|p| p.in_graph).map(|p| p.stage.as_str()).collect();
            if g.is_empty() { "nothing".to_string() } else { g.join(", ") }
        }))
        .unwrap_or_default(),
        tokens.join(" ")
    );
    e += &match first {
        None => "every step agrees (survivors, logits to 0 ulp from the CPU's and the oracle's, choices)".to_string(),
        Some(i) => format!("step {i} differs first: {}", steps[i].evidence()),
    };
    e
}

/// Whether a stepped control ran in the graph: at every step every stage of its chain was
/// placed there and its stage filled its inputs for the decode, and its stage added ops to at
/// least one graph of those decodes (llama.cpp reuses a graph between decodes when it can).
fn stepped_ran(c: &SteppedControl) -> bool {
    let placed = |o: &Outcome| o.places.len() == c.stages && o.places.iter().all(|p| p.in_graph);
    !c.steps.is_empty()
        && (c.steps.iter()).all(|o| placed(o) && o.planted_inputs_set.is_some_and(|n| n > 0))
        && (c.steps.iter())
            .filter_map(|o| o.planted_graph_builds)
            .sum::<usize>()
            > 0
}

/// The first step at which a wrong history's counts differ from the window's, from the
/// design: at once for a doubled history (the primed one is counted from the start), and for
/// one without a window at the first step whose history is longer than the window.
fn first_wrong_step(c: &SteppedControl) -> Option<usize> {
    let primed = c.steps.first().map_or(0, |o| o.history.len());
    match c.history {
        History::Window => None,
        History::Twice => Some(0),
        History::Unbounded => Some((c.last_n + 1).saturating_sub(primed)),
    }
}

/// A stepped control: the exact history must read `absent` at every step; a wrong one
/// `present`, first differing at the step its design implies ([`first_wrong_step`]), there
/// in its values (and, where the changed logits move the top, in the choice), never in the
/// survivor set or probabilities.
fn stepped_control(c: &SteppedControl) -> Control {
    let chain = c.steps.first().map_or(String::new(), |o| o.chain.clone());
    let ran = stepped_ran(c);
    let sum = |f: fn(&Outcome) -> Option<usize>| c.steps.iter().filter_map(f).sum::<usize>();
    let detail = format!(
        "its stage added ops to {} graphs of the {} decodes and filled its inputs {} times; {}",
        sum(|o| o.planted_graph_builds),
        c.steps.len(),
        sum(|o| o.planted_inputs_set),
        stepped_evidence(&c.steps)
    );
    let Some(expected) = first_wrong_step(c) else {
        return Control::negative(
            format!("{chain}: an exact in-graph history passes every step"),
            ran && stepped_verdict(&c.steps) == Verdict::Absent,
            detail,
        );
    };
    let first = c.steps.iter().position(|o| !o.flags().is_empty());
    let flags = first.map(|i| c.steps[i].flags()).unwrap_or_default();
    Control::positive(
        format!(
            "{chain}: the wrong in-graph history trips the value check, first at step {expected}"
        ),
        ran && stepped_verdict(&c.steps) == Verdict::Present
            && first == Some(expected)
            && flags.contains(&Check::Values)
            && flags
                .iter()
                .all(|f| matches!(f, Check::Values | Check::Choice)),
        detail,
    )
}

/// Whether a planted row exercised what it plants: a stage that asks for the graph added ops
/// to the decode's graph and every stage of the chain ran there; one that runs on the CPU
/// tail (the tie-break control) ran there, after a chain that ran wholly in the graph; and
/// (for min_p) min_keep binds.
fn planted_ran(o: &Outcome) -> bool {
    let in_graph = planted_case(o)
        .planted()
        .expect("a planted case has a planted stage")
        .in_graph();
    let placed = if in_graph {
        o.planted_graph_builds.is_some_and(|n| n > 0) && o.places.iter().all(|p| p.in_graph)
    } else {
        let before = &o.places[..o.places.len().saturating_sub(1)];
        o.planted_tail_applies.is_some_and(|n| n > 0)
            && o.places.last().is_some_and(|p| !p.in_graph)
            && !before.is_empty()
            && before.iter().all(|p| p.in_graph)
    };
    placed && o.kept_without_min_keep.is_none_or(|k| k < MIN_KEEP)
}

/// The control's name: what is planted and which check must (or must not) fire.
fn control_name(o: &Outcome, exact: bool) -> String {
    if exact && !planted_case(o).planted().is_some_and(|p| p.in_graph()) {
        format!(
            "{}: an exact stage on the CPU tail, breaking the tie otherwise than the oracle, passes every check",
            o.chain
        )
    } else if exact {
        format!("{}: an exact in-graph stage passes every check", o.chain)
    } else {
        format!(
            "{}: the wrong in-graph stage trips the {} check",
            o.chain,
            target_of(o)
        )
    }
}

fn target_of(o: &Outcome) -> &'static str {
    match planted_target(o) {
        Check::Survivors => "survivor-set",
        Check::Values => "value",
        Check::Choice => "choice",
        Check::Probs => "probability",
    }
}

/// The registered planted case an outcome came from.
fn planted_case(o: &Outcome) -> Case {
    (case::planted().into_iter())
        .flatten()
        .find(|c| c.name == o.case)
        .expect("a planted outcome comes from a planted case")
}

/// The check a planted row's wrong version targets, from its case.
fn planted_target(o: &Outcome) -> Check {
    planted_case(o)
        .planted()
        .expect("a planted case has a planted stage")
        .target()
}

#[derive(Serialize)]
struct Protocol<'a> {
    model: &'a str,
    prompt: &'a str,
    prompt_tokens: usize,
    comparison: &'static str,
}

const COMPARISON: &str = "the chain in a context that samples in the graph, and its CPU tail if any; the same chain on the CPU over the raw logits of the same prompt from a plain context of the same shape (checked to be the graph's starting row bit for bit through a greedy-only graph context); the oracle's composition of the same stages over those logits";

impl Audit {
    pub fn controls(&self) -> Vec<Control> {
        let m = match &self.measured {
            Ok(m) => m,
            Err(why) => {
                return (case::planted().iter())
                    .flat_map(|[exact, wrong]| {
                        [
                            Control::not_run(ControlKind::Positive, wrong.describe(), why),
                            Control::not_run(ControlKind::Negative, exact.describe(), why),
                        ]
                    })
                    .collect()
            }
        };
        let mut out = vec![temp_ext_oracle_check(&m.oracle_checks)];
        if let Some(d) = &m.draws {
            let [exact, skewed] = &d.planted;
            out.push(Control::positive(
                format!(
                    "{}: the draw detector flags a planted skew of {} before dist",
                    skewed.chain,
                    draws::SKEW
                ),
                skewed.ran_in_graph && skewed.detector_verdict == Verdict::Present,
                skewed.evidence(),
            ));
            out.push(Control::negative(
                format!(
                    "{}: the draw detector passes an exact draw of our own",
                    exact.chain
                ),
                exact.ran_in_graph && exact.detector_verdict == Verdict::Absent,
                exact.evidence(),
            ));
        }
        if let Some(Ok(_)) = &m.steps {
            match &m.stepped_planted {
                Ok(runs) => out.extend(runs.iter().map(stepped_control)),
                Err(why) => out.extend(case::stepped_planted().iter().map(|c| {
                    let kind = if c.planted().is_some_and(|p| p.exact) {
                        ControlKind::Negative
                    } else {
                        ControlKind::Positive
                    };
                    Control::not_run(kind, c.describe(), why)
                })),
            }
        }
        for [exact, wrong] in &m.planted {
            // The wrong stage must trip exactly its own check.
            out.push(Control::positive(
                control_name(wrong, false),
                planted_ran(wrong) && wrong.flags() == vec![planted_target(wrong)],
                wrong.evidence(),
            ));
            out.push(Control::negative(
                control_name(exact, true),
                planted_ran(exact) && exact.verdict() == Verdict::Absent,
                exact.evidence(),
            ));
        }
        out
    }

    pub fn report(&self) -> Report {
        let subject = self.build.report_subject(&crate::FINDING, "ingraph");
        let m = match &self.measured {
            Ok(m) => m,
            Err(why) => {
                let mut r = Report::new(
                    subject,
                    Verdict::NotOffered,
                    why.to_string(),
                    self.controls(),
                );
                for c in case::registered() {
                    r.add_row(
                        format!("{ROW}-{}", c.name),
                        Verdict::NotOffered,
                        why.to_string(),
                        BTreeMap::from([("not_offered", why.to_string())]),
                    );
                }
                return r;
            }
        };
        let verdicts: Vec<(&Outcome, Verdict)> =
            (m.rows.iter()).map(|o| (o, o.verdict())).collect();
        let all: Vec<(&str, Verdict)> = (verdicts.iter())
            .map(|(o, v)| (o.case.as_str(), *v))
            .chain((m.not_offered.iter()).map(|(name, _)| (name.as_str(), Verdict::NotOffered)))
            .chain(
                m.draws
                    .iter()
                    .map(|d| (d.row.case.as_str(), d.row.verdict())),
            )
            .chain(m.steps.iter().map(|s| {
                (
                    STEPPED,
                    s.as_ref()
                        .map_or(Verdict::NotOffered, |s| stepped_verdict(s)),
                )
            }))
            .collect();
        let named = |v: Verdict| -> Vec<&str> {
            (all.iter())
                .filter(|(_, x)| *x == v)
                .map(|(c, _)| *c)
                .collect()
        };
        let list = |v: Vec<&str>| {
            if v.is_empty() {
                "none".to_string()
            } else {
                v.join(", ")
            }
        };
        let present = named(Verdict::Present);
        let undecided = named(Verdict::Undecided);
        let overall = if !present.is_empty() {
            Verdict::Present
        } else if !undecided.is_empty() {
            Verdict::Undecided
        } else {
            Verdict::Absent
        };
        let evidence = format!(
            "{} chains on {} after a {}-token prompt, in the graph against the same chain on the CPU and the oracle: {} differ ({}), {} undecided ({})",
            all.len(),
            m.model,
            m.prompt_tokens,
            present.len(),
            list(present.clone()),
            undecided.len(),
            list(undecided.clone()),
        );
        let mut r = Report::new(subject, overall, evidence, self.controls());
        for (o, v) in &verdicts {
            r.add_row(format!("{ROW}-{}", o.case), *v, o.evidence(), o);
        }
        for (name, why) in &m.not_offered {
            r.add_row(
                format!("{ROW}-{name}"),
                Verdict::NotOffered,
                why.to_string(),
                BTreeMap::from([("not_offered", why.to_string())]),
            );
        }
        if let Some(d) = &m.draws {
            r.add_row(
                format!("{ROW}-{}", d.row.case),
                d.row.verdict(),
                d.power.qualify(d.row.evidence()),
                &d.row,
            );
        }
        if let Some(Err(why)) = &m.steps {
            r.add_row(
                format!("{ROW}-{STEPPED}"),
                Verdict::NotOffered,
                why.to_string(),
                BTreeMap::from([("not_offered", why.to_string())]),
            );
        }
        if let Some(Ok(s)) = &m.steps {
            let data: Vec<StepData> = (s.iter().enumerate())
                .map(|(i, o)| StepData {
                    step: i,
                    graph_chose: o.graph.selected.map(|t| t.0),
                    cpu_chose: o.cpu.selected.map(|t| t.0),
                    in_graph: (o.places.iter())
                        .filter(|p| p.in_graph)
                        .map(|p| p.stage.clone())
                        .collect(),
                    graph_returned: o.graph_returned,
                    max_ulps: o.max_ulps,
                    max_ulps_oracle: o.max_ulps_oracle,
                    flags: o.flags(),
                    undecided: o.oracle.undecided.clone(),
                })
                .collect();
            r.add_row(
                format!("{ROW}-{STEPPED}"),
                stepped_verdict(s),
                stepped_evidence(s),
                BTreeMap::from([("steps", data)]),
            );
        }
        let body = BTreeMap::from([(
            "protocol",
            Protocol {
                model: &m.model,
                prompt: &m.prompt,
                prompt_tokens: m.prompt_tokens,
                comparison: COMPARISON,
            },
        )]);
        r.with_body(body).with_text(text(m, &verdicts))
    }

    /// Writes `<stem>.<build>.{json,txt}`.
    pub fn write(&self, dir: &Path, stem: &str) -> Result<()> {
        self.report().write(dir, stem)?;
        Ok(())
    }
}

fn text(m: &Measured, rows: &[(&Outcome, Verdict)]) -> String {
    let mut out = format!(
        "in-graph sampling on {}, prompt {:?} ({} tokens): each chain in the graph, on the CPU over the same raw logits, and in the oracle\n",
        m.model, m.prompt, m.prompt_tokens
    );
    let mut table = Table::new()
        .left("  ", 28)
        .left(" ", 14)
        .right(" ", 8)
        .right(" ", 8)
        .right(" ", 8)
        .right(" ", 6)
        .right(" ", 7)
        .right(" ", 7)
        .left(" ", 0);
    table.row([
        "case".to_string(),
        "verdict".to_string(),
        "graph".to_string(),
        "cpu".to_string(),
        "oracle".to_string(),
        "ulps".to_string(),
        "g.chose".to_string(),
        "c.chose".to_string(),
        "stages (cpu: run on the CPU)".to_string(),
    ]);
    for (o, v) in rows
        .iter()
        .copied()
        .chain(m.planted.iter().flatten().map(|o| (o, o.verdict())))
    {
        let places: Vec<String> = (o.places.iter())
            .map(|p| {
                if p.in_graph {
                    p.stage.clone()
                } else {
                    format!("{}(cpu)", p.stage)
                }
            })
            .collect();
        table.row([
            o.case.clone(),
            v.as_str().to_string(),
            o.graph.survivors.len().to_string(),
            o.cpu.survivors.len().to_string(),
            o.oracle.survivors.len().to_string(),
            o.max_ulps.to_string(),
            o.graph.selected.map_or("-".to_string(), |t| t.to_string()),
            o.cpu.selected.map_or("-".to_string(), |t| t.to_string()),
            places.join(" "),
        ]);
    }
    out += &table.render();
    if let Some(d) = &m.draws {
        let p = &d.power;
        out += &format!(
            "\ndraws through the graph's dist, each from its own decode, against the oracle (F7's detector, level {}); power of {} draws, stated before the verdicts ({} simulated runs through the detector, seed {}): {} against the planted skew, {} against {}\n",
            p.alpha,
            p.draws,
            draws::POWER_REPS,
            draws::POWER_SEED,
            p.against_planted_skew.describe(),
            p.against_one_point_shift.describe(),
            draws::NAMED_EFFECT
        );
        let mut t = Table::new()
            .left("  ", 36)
            .left(" ", 12)
            .right(" ", 10)
            .right(" ", 8)
            .right(" ", 12)
            .left(" ", 0);
        t.row(
            [
                "case",
                "verdict",
                "p",
                "outside",
                "cpu agrees",
                "counts (id drawn/expected)",
            ]
            .map(String::from),
        );
        for r in std::iter::once(&d.row).chain(d.planted.iter()) {
            let counts: Vec<String> = (r.counts.iter())
                .map(|(id, n, e)| format!("{id} {n}/{e:.0}"))
                .collect();
            t.row([
                r.case.clone(),
                r.verdict().as_str().to_string(),
                r.p_value.map_or("-".to_string(), |p| format!("{p:.2e}")),
                r.outside.to_string(),
                format!("{}/{}", r.cpu_same_seed_agree, r.draws),
                counts.join(", "),
            ]);
        }
        out += &t.render();
    }
    out
}
