//! A chain that ends in `dist`: each surviving candidate's id, logit and `p` after every stage
//! (llama.cpp's and the oracle's), the `p` dist writes, and its seeded draws judged by F7's
//! detector (`detector::judge`).
//!
//! dist's oracle is `oracle::draw::softmax` (f64) of the array exactly as llama.cpp hands it
//! to dist, so an earlier stage's wrong survivor set (F2's chain comparison, reported beside
//! this) is not charged to dist: the verdict isolates dist's use of the `sorted` flag. The
//! planted dists of [`crate::planted::DistRule`], in chains of planted stages only, run
//! through the same [`run`]; they are the controls.

use crate::chain::{self, ChainCase, ChainReport};
use crate::planted::{DistRule, PlantedBias, PlantedDist, PlantedRule, PlantedTruncator};
use crate::stage::ChainStage;
use crate::text::join;
use anyhow::{ensure, Context, Result};
use detector::{judge, Class, Expectation, Outcome};
use oracle::draw::{self, Share, WrongP};
use oracle::truncation::{compose, Entry, Pool};
use oracle::TokenId;
use report::{Control, Report, Verdict};
use serde::{Serialize, Serializer};
use subject::offered;
use subject::{BuildInfo, Candidates};

/// Draws per chain. With the per-test level [`ALPHA`], a shift of 0.025 of the mass between
/// two of four categories of probability 0.25 (noncentrality 10,000 * 2 * 0.025^2 / 0.25 = 50
/// on 3 df) is rejected with probability about 0.99 (normal approximation; the simulated rate
/// is checked by the test `power_at_the_stated_shift`).
pub const DRAWS: usize = 10_000;

/// The level of each chain's goodness-of-fit test: one test per chain run, and each control
/// at the same level.
pub const ALPHA: f64 = 1e-3;

/// The cause, as the report names it.
pub const CAUSE: &str = "cause: logit_bias changes logits without clearing `sorted`; dist \
trusts the flag as llama.h asks and takes data[0] as the maximum, so expf overflows and p \
becomes NaN: F2's stale flag showing in dist's output, not a defect of dist's own code";

/// The verdict's name.
pub const NAME: &str = "stale-sorted-dist";

/// A probability as JSON: a number when finite, else the text `NaN`, `inf` or `-inf` (JSON
/// has no non-finite numbers, and a non-finite `p` is what this report looks for).
fn number_or_text<S: Serializer>(p: &f32, s: S) -> Result<S::Ok, S::Error> {
    if p.is_finite() {
        s.serialize_f32(*p)
    } else {
        s.serialize_str(&p.to_string())
    }
}

/// One candidate as llama.cpp left it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SubjectCandidate {
    pub id: i32,
    pub logit: f32,
    #[serde(serialize_with = "number_or_text")]
    pub p: f32,
}

/// One candidate as the oracle has it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OracleCandidate {
    pub id: i32,
    pub logit: f32,
    pub p: f64,
}

/// What one stage left: llama.cpp's survivors in array order (with the `p` field as that
/// stage left it), and the oracle's in canonical order with the softmax over them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AfterStage {
    pub stage: String,
    pub sorted_flag: bool,
    pub subject: Vec<SubjectCandidate>,
    pub oracle: Vec<OracleCandidate>,
}

/// The detector's outcome, as the report states it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DetectorOutcome {
    /// How often each id was drawn, ids ascending.
    pub support: Vec<(i32, u64)>,
    pub outside: Vec<i32>,
    pub statistic: Option<f64>,
    pub df: Option<usize>,
    pub p_value: Option<f64>,
    pub pooled_categories: Option<usize>,
    pub alpha: f64,
    pub verdict: Verdict,
    pub why: String,
    /// Set when the goodness of fit cannot fail by construction (one category after
    /// pooling): then it is a note, not evidence, and the draw check is only that every draw
    /// is inside the survivor set.
    pub fit_not_testable: Option<String>,
}

impl DetectorOutcome {
    fn of(o: &Outcome) -> DetectorOutcome {
        let fit = o.fit.as_ref();
        let one_category = fit.is_some_and(|f| f.df == 0) && o.verdict == Verdict::Absent;
        DetectorOutcome {
            support: o.support.iter().map(|(id, n)| (id.0, *n)).collect(),
            outside: o.outside.iter().map(|i| i.0).collect(),
            statistic: fit.map(|f| f.statistic),
            df: fit.map(|f| f.df),
            p_value: o.p_value(),
            pooled_categories: fit.map(|f| f.pooled),
            alpha: o.alpha,
            verdict: o.verdict,
            why: o.why.clone(),
            fit_not_testable: one_category.then(|| {
                "not testable: one category after pooling; the verdict rests on the survivor-set \
                 check and the p check"
                    .to_string()
            }),
        }
    }
}

/// What the p check allows, as the report states it (`oracle::draw::subject_tolerance`).
pub const P_TOLERANCE_RULE: &str = "relative per entry: 2 (|l - m| 2^-24 + 2^-22 + the sum's \
error (its weights' errors by share + n 2^-53) + 2^-53 + 2^-24 + (n + 4) 2^-52), m the logit \
llama.cpp subtracts; at least 2^-126 absolute";

/// The `p` check: llama.cpp's `p` after dist against the oracle's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PCheck {
    /// [`P_TOLERANCE_RULE`].
    pub tolerance_rule: &'static str,
    /// The logit llama.cpp subtracts before `expf`: `data[0]`'s when the array it is handed
    /// is flagged sorted, else the maximum.
    pub subtracted: Option<f32>,
    /// The largest relative tolerance over the entries.
    pub max_relative_tolerance: Option<f64>,
    /// One line per wrong `p`.
    pub wrong: Vec<String>,
    /// `None`: not checked (the oracle has no distribution).
    pub verdict: Option<Verdict>,
}

/// One chain's draws and what they were judged against.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DrawRun {
    pub after_each_stage: Vec<AfterStage>,
    pub draws: usize,
    /// The drawing stage, as `--stage` text.
    pub drawn_by: String,
    /// Why the oracle has no distribution, if it has none.
    pub undecided: Option<String>,
    pub detector: DetectorOutcome,
    pub p_check: PCheck,
    /// `present` when a draw falls outside the array handed to dist, the draws do not fit
    /// its softmax (where that is testable), or a `p` is wrong.
    pub verdict: Verdict,
}

fn survivors_of(c: &Candidates) -> Vec<SubjectCandidate> {
    (c.entries.iter().filter(|e| e.logit > f32::NEG_INFINITY))
        .map(|e| SubjectCandidate {
            id: e.id.0,
            logit: e.logit,
            p: e.p,
        })
        .collect()
}

/// The oracle's softmax over the survivors of the first `stages` stages.
fn oracle_after(case: &ChainCase, stages: usize) -> Vec<OracleCandidate> {
    let logits = Pool::from_logits(&case.logits);
    let pool = compose(&case.stages[..stages], &logits, &case.history).pool;
    let survivors = pool.entries().iter().copied();
    let shares = draw::softmax(&Pool::new(
        survivors.filter(|e| e.logit > f32::NEG_INFINITY),
    ));
    (shares.unwrap_or_default().iter())
        .map(|s| OracleCandidate {
            id: s.id.0,
            logit: s.logit,
            p: s.p,
        })
        .collect()
}

/// The oracle's distribution as F7's detector reads it: one class per survivor.
fn expectation(shares: &[Share], undecided: Option<String>) -> Expectation {
    Expectation {
        classes: shares
            .iter()
            .map(|s| Class {
                ids: vec![s.id],
                kept: 1,
                p_each: s.p,
            })
            .collect(),
        undecided,
    }
}

/// Runs `case` (its last stage draws): the per-stage replay, [`DRAWS`] draws from one chain
/// applied to a fresh copy of the logits each time (dist's generator advancing, as in a
/// decode), the detector at [`ALPHA`], and the `p` check.
pub fn run(case: &ChainCase) -> Result<DrawRun> {
    case.validate()?;
    let last = case
        .stages
        .last()
        .context("a chain has at least one stage")?;
    ensure!(
        last.draws(),
        "{} does not end in a drawing stage",
        case.command()
    );
    let after = chain::replay(case)?;
    let after_each_stage = (case.stages.iter().zip(&after).enumerate())
        .map(|(i, (stage, c))| AfterStage {
            stage: stage.to_string(),
            sorted_flag: c.sorted,
            subject: survivors_of(c),
            oracle: oracle_after(case, i + 1),
        })
        .collect();
    // The array dist is handed: what the stages before it left.
    let (replay, handed) = match &after[..] {
        [.., handed, last] => (last, handed.clone()),
        [last] => (last, Candidates::from_logits(&case.logits)),
        [] => unreachable!("a chain has at least one stage"),
    };
    let mut chain = case.build(&case.stages)?;
    let mut draws = Vec::with_capacity(DRAWS);
    for i in 0..DRAWS {
        let mut c = Candidates::from_logits(&case.logits);
        chain.apply(&mut c).context("applying the chain")?;
        draws.push(
            c.selected_id()
                .with_context(|| format!("draw {i}: the chain selected nothing"))?,
        );
    }
    // dist's oracle: the softmax of the array as the earlier stages left it in the subject.
    let handed_pool = Pool::new(survivors_of(&handed).iter().map(|c| Entry {
        id: TokenId(c.id),
        logit: c.logit,
    }));
    let (shares, undecided) = match draw::softmax(&handed_pool) {
        Ok(s) => (s, None),
        Err(e) => (Vec::new(), Some(e)),
    };
    // Each class here is one id, so no tie rule applies and the calls need show only draws.
    let calls = detector::Call::all_drawn_only(&draws);
    let outcome = judge(&calls, &expectation(&shares, undecided.clone()), ALPHA);
    let subtracted = subtracted_logit(&handed);
    let subject_p: Vec<(TokenId, f32)> = replay.entries.iter().map(|e| (e.id, e.p)).collect();
    let (wrong, p_verdict, max_relative) = match (&undecided, subtracted) {
        (None, Some(m)) => {
            let wrong = draw::wrong_p(&subject_p, &shares, m as f64);
            let max = draw::subject_relative_tolerance(&shares, m as f64)
                .into_iter()
                .fold(0.0, f64::max);
            let v = Verdict::found(!wrong.is_empty());
            (wrong, Some(v), Some(max))
        }
        (Some(_), _) | (None, None) => (Vec::new(), None, None),
    };
    let verdict = combine(outcome.verdict, p_verdict.unwrap_or(Verdict::Undecided));
    Ok(DrawRun {
        after_each_stage,
        draws: DRAWS,
        drawn_by: last.to_string(),
        undecided,
        detector: DetectorOutcome::of(&outcome),
        p_check: PCheck {
            tolerance_rule: P_TOLERANCE_RULE,
            subtracted,
            max_relative_tolerance: max_relative,
            wrong: wrong.iter().map(WrongP::describe).collect(),
            verdict: p_verdict,
        },
        verdict,
    })
}

/// The logit llama.cpp's dist subtracts before `expf`: `data[0]`'s when the array is flagged
/// sorted (llama.h: "do not assume the data is sorted - always check this flag"), else the
/// largest; `None` for an empty array.
fn subtracted_logit(handed: &Candidates) -> Option<f32> {
    let first = handed.entries.first()?.logit;
    let logits = handed.entries.iter().map(|e| e.logit);
    Some(match handed.sorted {
        true => first,
        false => logits.fold(f32::NEG_INFINITY, f32::max),
    })
}

/// `present` if either check is, else `undecided` if either is, else `absent`.
fn combine(a: Verdict, b: Verdict) -> Verdict {
    if a == Verdict::Present || b == Verdict::Present {
        Verdict::Present
    } else if a == Verdict::Undecided || b == Verdict::Undecided {
        Verdict::Undecided
    } else {
        Verdict::Absent
    }
}

/// A planted chain: a Rust top_k(4) that sorts and flags the array sorted, a Rust logit_bias
/// per `(id, bias)` (leaving the flag stale), then a planted dist; on the published logits.
pub fn planted_chain(biases: &[(i32, f32)], rule: DistRule) -> ChainCase {
    let top_k = PlantedTruncator {
        rule: PlantedRule::TopK { k: 4 },
        trusts_flag: false,
    };
    let biases = biases.iter().map(|&(id, bias)| {
        ChainStage::PlantedBias(PlantedBias {
            id: TokenId(id),
            bias,
        })
    });
    let dist = ChainStage::PlantedDist(PlantedDist { seed: 1, rule });
    let stages = [ChainStage::PlantedTruncator(top_k)]
        .into_iter()
        .chain(biases);
    ChainCase {
        stages: stages.chain([dist]).collect(),
        ..chain::published()
    }
}

/// A moderate bias: the distribution after it is far from a point mass, so a wrong draw rule
/// shows in the counts.
pub const MODERATE: &[(i32, f32)] = &[(3, 2.0)];

/// Two biases that lift two logits about 97 above `data[0]`: `expf` overflows for both when
/// the maximum is taken from `data[0]`.
pub const TWO_OVERFLOWS: &[(i32, f32)] = &[(2, 100.0), (3, 100.0)];

/// The draw detector's controls, each a planted dist in a planted chain through [`run`]:
/// the biases, the planted rule, the control's kind and name, and what it must show.
pub fn controls() -> Result<Vec<Control>> {
    use report::ControlKind::{Negative, Positive};
    type Shows = fn(&DrawRun) -> bool;
    let absent: Shows = |r| r.verdict == Verdict::Absent;
    let draws_wrong: Shows = |r| r.detector.verdict == Verdict::Present;
    let p_wrong: Shows = |r| r.p_check.verdict == Some(Verdict::Present);
    let honest = "draws and p of a planted dist written as llama.cpp writes p, with an honest \
                  maximum, after";
    let rows = [
        (
            MODERATE,
            DistRule::Exact,
            Negative,
            format!("{honest} a moderate bias"),
            absent,
        ),
        (
            TWO_OVERFLOWS,
            DistRule::Exact,
            Negative,
            format!("{honest} two biases that overflow f32 from data[0]"),
            absent,
        ),
        (
            TWO_OVERFLOWS,
            DistRule::TrustsFlag,
            Positive,
            "draws of a planted dist that takes data[0] as the maximum on a stale flag".into(),
            draws_wrong,
        ),
        (
            MODERATE,
            DistRule::Unnormalized,
            Positive,
            "draws of a planted dist that skips renormalization".into(),
            draws_wrong,
        ),
        (
            MODERATE,
            DistRule::Unnormalized,
            Positive,
            "p check on the planted dist that skips renormalization".into(),
            p_wrong,
        ),
        (
            MODERATE,
            DistRule::DropsLastFromSum,
            Positive,
            "p check on a planted dist that renormalizes over all survivors but the last".into(),
            p_wrong,
        ),
    ];
    let control = |(biases, rule, kind, name, shows): (_, _, _, String, Shows)| {
        let case = planted_chain(biases, rule);
        let r = match offered(run(&case))? {
            Ok(r) => r,
            Err(why) => return Ok(Control::not_run(kind, name, why)),
        };
        let detail = format!(
            "{}: {}; p check {}",
            case.command(),
            detector_text(&r.detector),
            p_check_text(&r.p_check)
        );
        Ok(Control::new(kind, name, shows(&r), detail))
    };
    rows.into_iter().map(control).collect()
}

/// Six decimals, or three significant digits below 1e-4 (so a tiny p does not print as 0).
fn p_text(p: f64) -> String {
    if !p.is_finite() {
        p.to_string()
    } else if p != 0.0 && p.abs() < 1e-4 {
        format!("{p:.3e}")
    } else {
        format!("{p:.6}")
    }
}

/// The detector's outcome in one line: a fit that cannot fail is a note, not a verdict.
fn detector_text(d: &DetectorOutcome) -> String {
    match &d.fit_not_testable {
        Some(note) => format!("every draw inside the survivor set; goodness of fit {note}"),
        None => format!("{} ({})", d.verdict, d.why),
    }
}

/// The p check in one line.
fn p_check_text(p: &PCheck) -> String {
    match (p.verdict, p.subtracted, p.max_relative_tolerance) {
        (Some(v), Some(m), Some(rel)) => format!(
            "{v} ({} wrong; llama.cpp subtracts {m}; relative tolerance at most {rel:.2e}){}",
            p.wrong.len(),
            if p.wrong.is_empty() {
                String::new()
            } else {
                format!(": {}", p.wrong.join("; "))
            }
        ),
        _ => "not checked (the oracle has no distribution)".to_string(),
    }
}

/// The per-stage tables, the draws and the checks as text.
pub fn to_text(r: &DrawRun) -> String {
    let mut out = String::from(
        "after each stage (id logit p; llama.cpp in array order, the oracle's softmax in f64)\n",
    );
    let row = |cs: Vec<(i32, f32, f64)>| {
        join(
            cs.iter()
                .map(|(id, l, p)| format!("{id} {l} {}", p_text(*p))),
            ", ",
        )
    };
    for a in &r.after_each_stage {
        out.push_str(&format!("  {} (sorted flag {})\n", a.stage, a.sorted_flag));
        let subject = a.subject.iter().map(|c| (c.id, c.logit, c.p as f64));
        let oracle = a.oracle.iter().map(|c| (c.id, c.logit, c.p));
        out.push_str(&format!("    llama.cpp: {}\n", row(subject.collect())));
        out.push_str(&format!("    oracle:    {}\n", row(oracle.collect())));
    }
    let support = r.detector.support.iter().map(|(id, n)| format!("{id}:{n}"));
    out.push_str(&format!(
        "  draws: {} with {} ({})\n",
        r.draws,
        r.drawn_by,
        join(support, " ")
    ));
    if let Some(u) = &r.undecided {
        out.push_str(&format!("  undecided: {u}\n"));
    }
    out.push_str(
        "  dist judged against the f64 softmax of the array as the earlier stages left it in \
         llama.cpp\n",
    );
    out.push_str(&format!(
        "  detector (F7's, level {:.0e}): {}\n",
        r.detector.alpha,
        detector_text(&r.detector)
    ));
    out.push_str(&format!("  p check: {}\n", p_check_text(&r.p_check)));
    out.push_str(&format!("    tolerance: {}\n", r.p_check.tolerance_rule));
    out.push_str(&format!("  draws and p (before controls): {}\n", r.verdict));
    out
}

/// The report of a chain that ends in dist: the chain comparison's body and text, then the
/// draws; its verdict is the draws' under `controls`.
pub fn report(
    case: &ChainCase,
    chain_report: &ChainReport,
    r: &DrawRun,
    build: &BuildInfo,
    controls: Vec<Control>,
) -> Report {
    let evidence = format!(
        "{}: {} draws, {}; p check {}; {}",
        case.command(),
        r.draws,
        detector_text(&r.detector),
        p_check_text(&r.p_check),
        if r.verdict == Verdict::Present {
            CAUSE
        } else {
            "no defect in dist's draws or p"
        }
    );
    #[derive(Serialize)]
    struct Body<'a> {
        #[serde(flatten)]
        chain: chain::ChainJson<'a>,
        draws: &'a DrawRun,
    }
    let body = Body {
        chain: chain::to_json(case, chain_report),
        draws: r,
    };
    chain::new_report(build, NAME, r.verdict, evidence, controls)
        .with_body(body)
        .with_text(chain::to_text(case, chain_report) + &to_text(r))
}

#[cfg(test)]
mod tests {
    use super::*;
    use oracle::fit::goodness_of_fit;
    use oracle::rng::Rng;

    #[test]
    fn power_at_the_stated_shift() {
        // Four categories of 0.25; the sampler moves 0.025 from the first to the second.
        let claimed = [0.25; 4];
        let truth = [0.225, 0.275, 0.25, 0.25];
        let labels: Vec<String> = (0..4).map(|i| i.to_string()).collect();
        let mut rejected = 0;
        for seed in 0..200 {
            let mut rng = Rng::new(seed);
            let mut counts = [0u64; 4];
            for _ in 0..DRAWS {
                let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                let mut cum = 0.0;
                let k = truth
                    .iter()
                    .position(|p| {
                        cum += p;
                        u < cum
                    })
                    .unwrap_or(3);
                counts[k] += 1;
            }
            let fit = goodness_of_fit(&labels, &counts, &claimed).unwrap();
            rejected += usize::from(fit.p_value < ALPHA);
        }
        assert!(rejected >= 190, "rejected in {rejected} of 200 seeds");
    }

    #[test]
    fn combine_takes_the_strongest() {
        use Verdict::*;
        assert_eq!(combine(Absent, Absent), Absent);
        assert_eq!(combine(Absent, Undecided), Undecided);
        assert_eq!(combine(Undecided, Present), Present);
        assert_eq!(combine(Present, Absent), Present);
    }
}
