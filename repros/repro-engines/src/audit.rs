//! One engine over the grid (`--audit`), or one input from the command line; the controls
//! that every report carries; the report.

use crate::expect;
use crate::planted::{self, Defect};
use crate::vectors::{self, GridRow};
use crate::{oracle_check, FINDING, NAME};
use anyhow::{Context, Result};
use detector::power::{self as stated_power, simulate, Power, Stated};
use detector::{judge, Expectation, Outcome, TieRule};
use engine::{Call, Engine, EngineInfo, Sampling};
use oracle::fit::bonferroni;
use oracle::TokenId;
use report::{Control, Report, Verdict};
use serde::Serialize;

/// The family-wise significance level of one report (PREREG, F7); each of its `m`
/// chi-square tests is held to `ALPHA / m` (Bonferroni).
pub const ALPHA: f64 = 0.01;

/// Vectors longer than this are named, not printed, in reports.
const PRINT_MAX: usize = 16;

/// One input: a vector, a configuration, a number of draws, a seed.
#[derive(Debug, Clone)]
pub struct Case {
    pub vector: String,
    pub logits: Vec<f32>,
    pub sampling: Sampling,
    pub draws: usize,
    pub seed: u64,
}

impl Case {
    pub fn of(row: &GridRow, index: usize) -> Case {
        let v = vectors::by_name(row.vector).expect("grid rows name known vectors");
        Case {
            vector: row.vector.to_string(),
            logits: v.logits,
            sampling: row.sampling.clone(),
            draws: row.draws,
            seed: index as u64 + 1,
        }
    }

    pub fn row_name(&self) -> String {
        format!("{NAME}-{}-{}", self.vector, self.sampling)
    }

    /// The input in a form a reader can rerun: the logits (or the vector's name) and flags.
    pub fn input(&self) -> String {
        let logits = if self.vector != "command-line" {
            format!("--vector {}", self.vector)
        } else if self.logits.len() <= PRINT_MAX {
            let v: Vec<String> = self.logits.iter().map(|x| x.to_string()).collect();
            format!("--logits {}", v.join(","))
        } else {
            format!("--logits ({} values)", self.logits.len())
        };
        format!(
            "{logits} --sampling {} --draws {} --seed {}",
            self.sampling, self.draws, self.seed
        )
    }

    /// The logits as written (`1.5`, not `1.5000000`), or the vector's name and length when
    /// they are too many to print.
    fn logits_data(&self) -> Logits {
        if self.logits.len() <= PRINT_MAX {
            Logits::Listed(self.logits.iter().map(|x| x.to_string()).collect())
        } else {
            Logits::Named(format!("{} ({} entries)", self.vector, self.logits.len()))
        }
    }
}

#[derive(Serialize)]
#[serde(untagged)]
enum Logits {
    Listed(Vec<String>),
    Named(String),
}

/// One case run: the detector's power on it, stated before the draws; what the engine drew
/// and how it was judged, or why the engine has no such configuration (then no power).
#[derive(Debug, Clone)]
pub struct CaseRun {
    pub case: Case,
    pub expectation: Expectation,
    pub power: Option<Stated>,
    pub outcome: Result<Outcome, String>,
}

impl Serialize for CaseRun {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Written<'a> {
            vector: &'a str,
            logits: Logits,
            sampling: String,
            draws: usize,
            seed: u64,
            input: String,
            oracle: &'a Expectation,
            #[serde(skip_serializing_if = "Option::is_none")]
            power: Option<&'a Stated>,
            #[serde(flatten)]
            outcome: Option<&'a Outcome>,
            #[serde(skip_serializing_if = "Option::is_none")]
            not_offered: Option<&'a str>,
        }
        let c = &self.case;
        Written {
            vector: &c.vector,
            logits: c.logits_data(),
            sampling: c.sampling.to_string(),
            draws: c.draws,
            seed: c.seed,
            input: c.input(),
            oracle: &self.expectation,
            power: self.power.as_ref(),
            outcome: self.outcome.as_ref().ok(),
            not_offered: self.outcome.as_ref().err().map(String::as_str),
        }
        .serialize(s)
    }
}

/// The audit's JSON after the header and the verdict rows: every case.
#[derive(Serialize)]
struct AuditBody<'a> {
    alpha_family: f64,
    alpha_each: f64,
    planted: &'a [PlantedRun],
    cases: &'a [CaseRun],
}

/// One case's JSON (a run on the command line), then the family level.
#[derive(Serialize)]
struct CaseBody<'a> {
    #[serde(flatten)]
    run: &'a CaseRun,
    alpha_family: f64,
    planted: &'a [PlantedRun],
}

/// Runs `case` through `draw` (given the ids whose survival each call should show: those of
/// the oracle's split tie classes) and the detector at level `alpha`, its power against
/// [`stated_power::ONE_POINT`] stated first, from the oracle's expectation alone.
fn judged(case: &Case, alpha: f64, draw: impl Fn(&Case, &[TokenId]) -> Calls) -> Result<CaseRun> {
    let expectation = expect::of(&case.logits, &case.sampling)?;
    let power = stated_power::stated(&expectation, case.draws, alpha);
    let calls = (draw(case, &expectation.watch()))
        .with_context(|| format!("drawing for {}", case.row_name()))?;
    Ok(CaseRun {
        outcome: Ok(judge(&calls, &expectation, alpha)),
        case: case.clone(),
        expectation,
        power: Some(power),
    })
}

/// A planted sampler's outcome on `case` (planted samplers offer every configuration).
fn planted_outcome(case: &Case, alpha: f64, defect: Defect) -> Result<Outcome> {
    let draw = |c: &Case, watch: &[TokenId]| {
        planted::draw(&c.logits, &c.sampling, c.seed, c.draws, defect, watch)
    };
    let run = judged(case, alpha, draw)?;
    run.outcome.map_err(anyhow::Error::msg)
}

type Calls = Result<Vec<Call>>;

/// The inputs of the planted sampler that breaks ties afresh on every call (a negative
/// control of the per-call tie rule): every grid row whose survivor set splits a tie.
pub const FRESH_TIE_ROWS: [(&str, &str); 5] = [
    ("ties", "top_k=2"),
    ("ties", "top_p=0.5"),
    ("boundary4", "top_p=0.5"),
    ("boundary8", "top_p=0.75"),
    ("ties", "top_k=4"),
];

/// What a planted sampler's run decides: a registered positive control must have power at
/// least [`CONTROL_POWER`] and be caught (either failing fails the control); a reported one
/// is printed beside its power and decides nothing. Fixed here, before any run, so the
/// detector under test never chooses its own controls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Control,
    Reported,
}

/// Every planted sampler with a defect, the grid row it runs on (with that row's draws and
/// seed) and its role: (defect, vector, configuration, role).
pub const PLANTED_ROWS: [(Defect, &str, &str, Role); 10] = [
    (Defect::KeepsOneExtra, "published", "top_k=3", Role::Control),
    (
        Defect::SkipsRenormalization,
        "published",
        "top_k=2",
        Role::Control,
    ),
    (
        Defect::TopPOnFullMass,
        "published",
        "top_k=3,top_p=0.9",
        Role::Control,
    ),
    (Defect::KeepsWholeTie, "ties", "top_k=2", Role::Control),
    (Defect::DropsOneOfTie, "ties", "top_k=2", Role::Control),
    (
        Defect::ShiftsMass { points: 1 },
        "published",
        "all",
        Role::Control,
    ),
    (
        Defect::ShiftsMass { points: 2 },
        "published",
        "all",
        Role::Control,
    ),
    (
        Defect::ShiftsMass { points: 1 },
        "published",
        "top_k=2",
        Role::Reported,
    ),
    (
        Defect::ShiftsMass { points: 2 },
        "published",
        "top_k=2",
        Role::Control,
    ),
    (
        Defect::TempAfterTruncation,
        "published",
        "top_p=0.9,temp=2",
        Role::Control,
    ),
];

/// The detector's power against a planted sampler is simulated with this many runs of the
/// input's draw count, from this seed, at the subject's level (PREREG, F7).
pub const POWER_REPS: usize = 400;
pub const POWER_SEED: u64 = 20_261_202;

/// The simulated power a registered positive control must reach (a control the detector
/// could miss often would show nothing by passing).
pub const CONTROL_POWER: f64 = 0.99;

/// One planted sampler: its input, the power stated before its draws, and what the detector
/// read from them.
#[derive(Debug, Clone, Serialize)]
pub struct PlantedRun {
    pub sampler: String,
    pub input: String,
    pub power: Power,
    pub role: Role,
    pub verdict: Verdict,
    pub why: String,
}

/// The grid's case for `vector` under `sampling`, with its draws and seed, if it is a row.
fn grid_case(vector: &str, sampling: &str) -> Option<Case> {
    let grid = vectors::grid();
    let row =
        (grid.iter()).position(|r| r.vector == vector && r.sampling.to_string() == sampling)?;
    Some(Case::of(&grid[row], row))
}

/// The controls: the oracle's hand cases; each planted defect on its row, its power first,
/// then its draws at the subject's level `alpha`; the whole-tie sampler again with its calls
/// showing only their draws (the rule candle is judged by); the fresh tie-break, which must
/// pass per call; the exact Rust sampler on `negative_cases` and on the planted rows, which
/// must pass every one the oracle decides, each at ALPHA divided by their number.
pub fn controls(negative_cases: &[Case], alpha: f64) -> Result<(Vec<Control>, Vec<PlantedRun>)> {
    let mut out = oracle_check::run();
    let mut planted_runs = Vec::new();
    let mut exact_cases: Vec<Case> = negative_cases.to_vec();
    for (defect, vector, sampling, role) in PLANTED_ROWS {
        let case = grid_case(vector, sampling).expect("planted rows are grid rows");
        let exp = expect::of(&case.logits, &case.sampling)?;
        let alternative = planted::distribution(&case.logits, &case.sampling, defect)?;
        let power = simulate(
            &exp,
            &alternative,
            case.draws,
            alpha,
            POWER_REPS,
            POWER_SEED,
        );
        let o = planted_outcome(&case, alpha, defect)?;
        let name = format!("{} ({} {})", defect.label(), vector, sampling);
        if role == Role::Control {
            let powered = power.rate >= CONTROL_POWER;
            out.push(Control::positive(
                name.clone(),
                powered && o.verdict == Verdict::Present,
                format!(
                    "power {}{}; {}: {}",
                    power.describe(),
                    if powered {
                        String::new()
                    } else {
                        format!(" (below the {CONTROL_POWER} a control needs)")
                    },
                    o.describe_support(8),
                    o.why
                ),
            ));
        }
        planted_runs.push(PlantedRun {
            sampler: name,
            input: case.input(),
            power,
            role,
            verdict: o.verdict,
            why: o.why.clone(),
        });
        if !exact_cases.iter().any(|c| c.row_name() == case.row_name()) {
            exact_cases.push(case);
        }
    }
    // The across-calls rule, which judges an engine whose calls show only their draws: the
    // whole-tie sampler's calls stripped of what they kept must still be caught, by that rule.
    let (vector, sampling) = ("ties", "top_k=2");
    let case = grid_case(vector, sampling).expect("a grid row");
    let expectation = expect::of(&case.logits, &case.sampling)?;
    let calls = planted::draw(
        &case.logits,
        &case.sampling,
        case.seed,
        case.draws,
        Defect::KeepsWholeTie,
        &[],
    )?;
    let drawn: Vec<TokenId> = calls.iter().map(|c| c.drawn).collect();
    let o = judge(&Call::all_drawn_only(&drawn), &expectation, alpha);
    out.push(Control::positive(
        format!(
            "{} ({vector} {sampling}), its draws only",
            Defect::KeepsWholeTie.label()
        ),
        o.verdict == Verdict::Present && o.tie_rule == Some(TieRule::AcrossCalls),
        format!(
            "{}: {}{}",
            o.describe_support(8),
            o.why,
            match o.tie_rule {
                Some(TieRule::AcrossCalls) => " (judged across calls)",
                Some(TieRule::PerCall) => " (judged per call, not the rule under test)",
                None => " (no tie rule applied)",
            }
        ),
    ));
    // The fresh tie-break keeps each tie's count in every call: per call it must pass, each
    // input at ALPHA / (their number).
    let fresh_alpha = bonferroni(ALPHA, FRESH_TIE_ROWS.len());
    let mut fresh = Vec::new();
    for (vector, sampling) in FRESH_TIE_ROWS {
        let case = grid_case(vector, sampling).expect("the fresh-tie inputs are grid rows");
        let o = planted_outcome(&case, fresh_alpha, Defect::FreshTieBreak)?;
        fresh.push((case, o));
    }
    let flagged: Vec<String> = (fresh.iter())
        .filter(|(_, o)| o.verdict != Verdict::Absent || o.tie_rule != Some(TieRule::PerCall))
        .map(|(c, o)| format!("{}: {}", c.row_name(), o.why))
        .collect();
    out.push(Control::negative(
        format!(
            "{} on {} inputs",
            Defect::FreshTieBreak.label(),
            FRESH_TIE_ROWS.len()
        ),
        flagged.is_empty(),
        if flagged.is_empty() {
            let each: Vec<String> = (fresh.iter())
                .map(|(c, o)| {
                    format!(
                        "{} {}: {}, {}",
                        c.vector,
                        c.sampling,
                        o.describe_support(6),
                        o.why
                    )
                })
                .collect();
            format!(
                "judged per call, absent on each (level {fresh_alpha:.1e}): {}",
                each.join("; ")
            )
        } else {
            format!("flagged: {}", flagged.join("; "))
        },
    ));
    // The exact sampler's tests are a family of their own: each at ALPHA / (their number), so
    // a correct sampler fails this control with probability at most ALPHA.
    let exact_alpha = bonferroni(ALPHA, exact_cases.len());
    let mut failures = Vec::new();
    let mut undecided = 0;
    let mut smallest = f64::INFINITY;
    for case in &exact_cases {
        let o = planted_outcome(case, exact_alpha, Defect::Exact)?;
        if let Some(p) = o.p_value() {
            smallest = smallest.min(p);
        }
        match o.verdict {
            Verdict::Absent => {}
            // Nothing to pass or fail: the oracle has no answer there.
            Verdict::Undecided => undecided += 1,
            _ => failures.push(format!("{}: {}", case.row_name(), o.why)),
        }
    }
    out.push(Control::negative(
        format!("{} on {} inputs", Defect::Exact.label(), exact_cases.len()),
        failures.is_empty(),
        if failures.is_empty() {
            format!(
                "passes every input the oracle decides ({undecided} undecided); smallest p = {smallest:.3e}, level {exact_alpha:.1e}"
            )
        } else {
            format!("flagged: {}", failures.join("; "))
        },
    ));
    Ok((out, planted_runs))
}

pub struct Audit {
    pub engine: EngineInfo,
    pub runs: Vec<CaseRun>,
    pub controls: Vec<Control>,
    pub planted: Vec<PlantedRun>,
    /// The per-test level: `ALPHA / (number of offered cases)`.
    pub alpha: f64,
    pub audit_mode: bool,
}

/// Runs `cases` on `e`. Cases the engine does not offer are kept as such (no draws).
pub fn run(e: &dyn Engine, cases: &[Case], audit_mode: bool) -> Result<Audit> {
    let offered = cases.iter().filter(|c| e.supports(&c.sampling).is_ok());
    let alpha = bonferroni(ALPHA, offered.count().max(1));
    // The controls are plain Rust and share nothing with the engine's draws: they run on
    // the second core meanwhile (each side is seeded, so the output does not depend on it).
    std::thread::scope(|scope| {
        let planted = scope.spawn(|| controls(cases, alpha));
        let runs = engine_runs(e, cases, alpha)?;
        let (controls, planted) = planted
            .join()
            .map_err(|_| anyhow::anyhow!("the controls' thread panicked"))??;
        Ok(Audit {
            engine: e.info(),
            runs,
            controls,
            planted,
            alpha,
            audit_mode,
        })
    })
}

/// Every case on `e` at level `alpha`; cases the engine does not offer are kept as such.
fn engine_runs(e: &dyn Engine, cases: &[Case], alpha: f64) -> Result<Vec<CaseRun>> {
    let mut progress = cmdline::Progress::new(
        format!("F7 draws on {}, rows", e.info().tag),
        cases.len() as u64,
    );
    let runs = (cases.iter())
        .map(|c| {
            let run = match e.supports(&c.sampling) {
                Ok(()) => judged(c, alpha, |c, watch| {
                    e.draw(&c.logits, &c.sampling, c.seed, c.draws, watch)
                }),
                Err(why) => Ok(CaseRun {
                    case: c.clone(),
                    expectation: expect::of(&c.logits, &c.sampling)?,
                    power: None,
                    outcome: Err(cmdline::one_line(&why)),
                }),
            };
            progress.inc(1);
            run
        })
        .collect::<Result<Vec<_>>>();
    progress.finish();
    runs
}

/// The grid's cases, seeds 1, 2, ... in grid order.
pub fn grid_cases() -> Vec<Case> {
    vectors::grid()
        .iter()
        .enumerate()
        .map(|(i, r)| Case::of(r, i))
        .collect()
}

impl Audit {
    /// `present` if any case is, else `undecided` if any case is, else `absent`.
    pub fn measured(&self) -> Verdict {
        let of = |v| (self.runs.iter()).any(|r| matches!(&r.outcome, Ok(o) if o.verdict == v));
        [Verdict::Present, Verdict::Undecided]
            .into_iter()
            .find(|&v| of(v))
            .unwrap_or(Verdict::Absent)
    }

    /// The rule and the count of cases per verdict, then every present case with its input.
    pub fn evidence(&self) -> String {
        let mut counts = std::collections::BTreeMap::new();
        for r in &self.runs {
            let key = match &r.outcome {
                Ok(o) => o.verdict.as_str(),
                Err(_) => "not offered",
            };
            *counts.entry(key).or_insert(0) += 1;
        }
        let counts: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
        let present: Vec<String> = (self.runs.iter())
            .filter_map(|r| Some((r, r.outcome.as_ref().ok()?)))
            .filter(|(_, o)| o.verdict == Verdict::Present)
            .map(|(r, o)| format!("[{}: {}]", r.case.input(), o.why))
            .collect();
        format!(
            "{} of {} inputs: {}{}{}; {}",
            self.engine.name.label(),
            self.runs.len(),
            counts.join(", "),
            if present.is_empty() {
                ""
            } else {
                "; present on "
            },
            present.join(" "),
            self.power_summary()
        )
    }

    /// How many drawn rows reach [`stated_power::ENOUGH_POWER`] against the named effect, and
    /// every one that does not.
    fn power_summary(&self) -> String {
        let stated: Vec<(&CaseRun, &Stated)> = (self.runs.iter())
            .filter_map(|r| Some((r, r.power.as_ref()?)))
            .collect();
        let short: Vec<String> = (stated.iter())
            .filter(|(_, p)| !p.enough)
            .map(|(r, p)| format!("{} {} {:.3}", r.case.vector, r.case.sampling, p.power))
            .collect();
        let mut out = format!(
            "power against {} at least {} on {} of {} drawn inputs",
            stated_power::ONE_POINT_EFFECT,
            stated_power::ENOUGH_POWER,
            stated.len() - short.len(),
            stated.len()
        );
        if !short.is_empty() {
            out += &format!(
                ", below it (an absent there does not rule that effect out) on {}",
                short.join(", ")
            );
        }
        out
    }

    pub fn report(&self) -> Report {
        let subject = report::ReportId::new(
            &FINDING,
            NAME,
            self.engine.name.label(),
            self.engine.tag.clone(),
            self.engine.detail.clone(),
            report::Sources(self.engine.sources),
        );
        let mut r = Report::new(
            subject,
            self.measured(),
            self.evidence(),
            self.controls.clone(),
        );
        let r = if self.audit_mode {
            for run in &self.runs {
                if let (Ok(o), Some(power)) = (&run.outcome, &run.power) {
                    let evidence = [
                        power.describe(),
                        run.case.input(),
                        o.describe_support(6),
                        o.why.clone(),
                    ];
                    r.add_row(run.case.row_name(), o.verdict, evidence.join("; "), ());
                }
            }
            r.with_body(AuditBody {
                alpha_family: ALPHA,
                alpha_each: self.alpha,
                planted: &self.planted,
                cases: &self.runs,
            })
        } else {
            r.with_body(CaseBody {
                run: &self.runs[0],
                alpha_family: ALPHA,
                planted: &self.planted,
            })
        };
        r.with_text(self.to_text())
    }

    /// Each planted sampler's power, as simulated before its draws, and what the detector read.
    fn planted_text(&self) -> String {
        let mut out = format!(
            "Power against each planted sampler ({POWER_REPS} simulated runs through the detector, seed {POWER_SEED}, each test at {:.1e}; a registered control must reach {CONTROL_POWER} and be caught):\n",
            self.alpha
        );
        for p in &self.planted {
            out.push_str(&format!(
                "  {}\n    {}\n    power {} -> {} ({}): {}\n",
                p.sampler,
                p.input,
                p.power.describe(),
                if p.verdict == Verdict::Present {
                    "caught"
                } else {
                    "missed"
                },
                match p.role {
                    Role::Control => "control",
                    Role::Reported => "reported only",
                },
                p.why
            ));
        }
        out
    }

    pub fn to_text(&self) -> String {
        let mut out = self.planted_text();
        out += &format!(
            "\n{} draws judged against the oracle (family level {ALPHA}, each test at {:.1e}); power = the chance, stated before the draws, that the test flags {} (closed form over the test's bins at the row's draws; below {} the row says so)\n",
            self.engine.name.label(),
            self.alpha,
            stated_power::ONE_POINT_EFFECT,
            stated_power::ENOUGH_POWER
        );
        out.push_str(
            "  vector     sampling                draws  power       verdict    support / oracle / test\n",
        );
        for r in &self.runs {
            let power = r.power.as_ref().map_or("-".to_string(), |p| {
                let mark = if p.enough {
                    String::new()
                } else {
                    format!(" < {}", stated_power::ENOUGH_POWER)
                };
                format!("{:.3}{mark}", p.power)
            });
            let (verdict, detail) = match &r.outcome {
                Ok(o) => (
                    o.verdict.as_str().to_string(),
                    format!(
                        "{}\n{:>60}oracle: {}\n{:>60}{}",
                        o.describe_support(6),
                        "",
                        r.expectation.describe(4),
                        "",
                        o.why
                    ),
                ),
                Err(why) => ("not offered".to_string(), why.clone()),
            };
            out.push_str(&format!(
                "  {:<10} {:<22} {:>6}  {:<11} {:<10} {}\n",
                r.case.vector,
                r.case.sampling.to_string(),
                r.case.draws,
                power,
                verdict,
                detail
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The grid rows whose stated power against one point moved is below
    /// [`stated_power::ENOUGH_POWER`] at llama.cpp's level (24 tests) and candle's (21, its
    /// min_p rows not drawn), computed from the oracle's expectations before any draw: the
    /// rows PREREG's F7 addendum of 2026-12-05 lists.
    #[test]
    fn grid_powers_are_what_prereg_states() {
        // Rows of the grid below the power they need, by level.
        let llama = [
            "published top_k=2",
            "published top_k=3,top_p=0.9",
            "ties top_k=2",
            "ties top_p=0.5",
            "boundary4 top_p=0.5",
            "boundary8 top_p=0.75",
            "masked top_k=2",
            "masked top_p=0.9",
            "vocab262k all",
            "vocab262k top_k=40",
            "vocab262k top_k=40,top_p=0.9",
            "published top_p=0.9,temp=0.5",
            "published min_p=0.1,temp=0.5",
            "published top_k=3,temp=2",
        ];
        // At candle's level (fewer tests, so a higher one) the two temperature-0.5 rows that
        // keep {0, 1} reach 0.808; its min_p rows are not drawn.
        let candle: Vec<&str> = (llama.iter().copied())
            .filter(|r| !r.ends_with(",temp=0.5"))
            .collect();
        for (tests, want) in [(24, llama.to_vec()), (21, candle)] {
            let alpha = bonferroni(ALPHA, tests);
            let mut short = Vec::new();
            for case in grid_cases() {
                if tests == 21 && case.sampling.to_string().contains("min_p") {
                    continue;
                }
                let exp = expect::of(&case.logits, &case.sampling).unwrap();
                let p = stated_power::stated(&exp, case.draws, alpha);
                if !p.enough {
                    short.push(format!("{} {}", case.vector, case.sampling));
                }
            }
            assert_eq!(short, want, "at 0.01/{tests}");
        }
    }

    /// The power PREREG states for each planted sampler at llama.cpp's level (24 tests) and
    /// candle's (21), computed before any subject drew on the planted inputs; every
    /// registered control reaches [`CONTROL_POWER`] at both.
    #[test]
    fn planted_power_is_what_prereg_states() {
        for (tests, want) in [
            (24, [400, 400, 400, 400, 400, 400, 400, 168, 400, 400]),
            (21, [400, 400, 400, 400, 400, 400, 400, 177, 400, 400]),
        ] {
            let (_, planted) = controls(&[], bonferroni(ALPHA, tests)).unwrap();
            let caught: Vec<usize> = planted.iter().map(|p| p.power.caught).collect();
            assert_eq!(caught, want, "at 0.01/{tests}");
            for p in &planted {
                assert_eq!(
                    p.role == Role::Control,
                    p.power.rate >= CONTROL_POWER,
                    "{p:?}"
                );
            }
        }
    }
}
