//! Classifies one probe: what the sampler did with the input, and whether the oracle may
//! judge it.
//!
//! Order of the rule (the first that applies): the child was killed (`aborts: SIG...`) or
//! ran past the deadline (`times out`); it ended without a result (`fails`); the array it
//! left holds a NaN logit or a `p` that is NaN, infinite or negative (`returns NaN`); the
//! oracle's answer differs (`disagrees`, or `tie` when that answer rests on a tie or a
//! rounding margin, or on a NaN llama.cpp computes: `tie`); otherwise `behaves`. A cell is *judged* only when the oracle has an
//! answer for the input (see [`crate::inputs::domain`]); other cells are recorded with the
//! same words and never count toward a verdict.

use crate::inputs::{self, EdgeInput};
use crate::probe::Observed;
use crate::samplers::{Config, Expect};
use contain::Ended;
use oracle::stage::Stage;
use oracle::truncation::{self, Pool};
use oracle::TokenId;
use subject::RawResult;

/// What a sampler did with one input.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Crashed(Ended),
    Fails,
    ReturnsNan,
    Disagrees,
    Tie,
    Behaves,
}

impl Outcome {
    /// The table's short code (upper case when judged).
    pub fn code(&self, judged: bool) -> String {
        let code = match self {
            Outcome::Crashed(Ended::Signal(s)) => contain::signal_name(*s)
                .trim_start_matches("SIG")
                .to_string(),
            Outcome::Crashed(Ended::TimedOut(_)) => "TIME".to_string(),
            Outcome::Crashed(Ended::Exited(_)) | Outcome::Fails => "FAIL".to_string(),
            Outcome::ReturnsNan => "NaN".to_string(),
            Outcome::Disagrees => "DIFF".to_string(),
            Outcome::Tie => "tie".to_string(),
            Outcome::Behaves => "ok".to_string(),
        };
        if judged {
            code
        } else {
            code.to_lowercase()
        }
    }

    /// The report's words.
    pub fn words(&self) -> String {
        match self {
            Outcome::Crashed(e) => e.describe(),
            Outcome::Fails => "fails".to_string(),
            Outcome::ReturnsNan => "returns NaN".to_string(),
            Outcome::Disagrees => "disagrees with the oracle".to_string(),
            Outcome::Tie => "differs where the oracle's answer is undecided".to_string(),
            Outcome::Behaves => "behaves".to_string(),
        }
    }

    /// Whether a judged cell with this outcome is a defect.
    pub fn is_defect(&self) -> bool {
        !matches!(self, Outcome::Behaves | Outcome::Tie)
    }
}

/// One probe's classification.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub sampler: &'static str,
    pub input: &'static str,
    pub outcome: Outcome,
    /// `None` when the oracle has an answer; otherwise why it has none.
    pub unjudged: Option<String>,
    /// What was seen, in one line (the array left, the oracle's answer where they differ).
    pub detail: String,
}

impl Cell {
    pub fn judged(&self) -> bool {
        self.unjudged.is_none()
    }

    /// The table's code: upper case when judged; `ran` for an unjudged probe that finished
    /// without NaN (there is no answer to call it `ok` against).
    pub fn code(&self) -> String {
        match (&self.outcome, self.judged()) {
            (Outcome::Behaves, false) => "ran".to_string(),
            (o, judged) => o.code(judged),
        }
    }

    /// The cell in words, with why it is not judged where it is not.
    pub fn words(&self) -> String {
        match (&self.outcome, &self.unjudged) {
            (Outcome::Behaves, Some(why)) => format!("finishes; not judged ({why})"),
            (o, Some(why)) => format!("{}; not judged ({why})", o.words()),
            (o, None) => o.words(),
        }
    }
}

fn show(entries: &[(i32, f32)]) -> String {
    let items: Vec<String> = entries.iter().map(|(i, l)| format!("{i}:{l}")).collect();
    format!("[{}]", items.join(" "))
}

fn left(r: &RawResult) -> String {
    let items: Vec<(i32, f32)> = r.entries.iter().map(|e| (e.id, e.logit)).collect();
    format!("left {} selected {}", show(&items), r.selected)
}

/// The oracle's answer for `config` on `input`, or why it has none.
enum Answer {
    /// The stage's result; the entry a selecting stage chose.
    Stage(truncation::Step, usize),
    /// A draw must land on one of these ids.
    Draw(Vec<TokenId>),
}

fn answer(config: &Config, input: &EdgeInput) -> Result<Answer, String> {
    let pool: Pool = inputs::domain(&input.entries)?;
    match &config.expect {
        Expect::Stage(stage) => {
            if *stage == Stage::Greedy && pool.is_empty() {
                return Err("an empty array has nothing to select".to_string());
            }
            Ok(Answer::Stage(
                truncation::apply(stage, &pool, &config.history),
                pool.len(),
            ))
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

/// Compares a returned array with the oracle's answer: `None` when they agree.
fn compare(config: &Config, r: &RawResult, answer: &Answer) -> Option<String> {
    match answer {
        Answer::Draw(allowed) => match selected_id(r) {
            Some(id) if allowed.contains(&TokenId(id)) => None,
            Some(id) => Some(format!(
                "drew id {id}, not one of the survivors {allowed:?}"
            )),
            None => Some(format!(
                "selected index {} is not an entry of the {} left",
                r.selected,
                r.entries.len()
            )),
        },
        Answer::Stage(step, n) => {
            let got = oracle::survivors(r.entries.iter().map(|e| (TokenId(e.id), e.logit)));
            let want = step.pool.survivors();
            if got != want {
                return Some(format!("survivors {got:?}, oracle {want:?}"));
            }
            let bound = ulp_bound(config, *n);
            for e in r.entries.iter().filter(|e| e.logit > f32::NEG_INFINITY) {
                let w = step
                    .pool
                    .entries()
                    .iter()
                    .find(|x| x.id == TokenId(e.id))
                    .map(|x| x.logit);
                if let Some(w) = w {
                    if oracle::ulps(e.logit, w) > bound {
                        return Some(format!(
                            "id {} has logit {}, oracle {w} (more than {bound} ulps apart)",
                            e.id, e.logit
                        ));
                    }
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
    }
}

/// Classifies one probe of `config` on `input`.
pub fn classify(config: &Config, input: &EdgeInput, observed: &Observed) -> Cell {
    let answer = answer(config, input);
    let unjudged = answer.as_ref().err().cloned();
    let cell = |outcome, detail: String| Cell {
        sampler: config.name,
        input: input.name,
        outcome,
        unjudged: unjudged.clone(),
        detail,
    };
    let r = match observed {
        Observed::Crashed(e, line) => {
            let said = if line.is_empty() {
                "nothing on stderr"
            } else {
                line
            };
            return cell(Outcome::Crashed(*e), format!("last line: {said}"));
        }
        Observed::Failed(line) => return cell(Outcome::Fails, line.clone()),
        Observed::Returned(r) => r,
    };
    if let Some(what) = has_nan(r) {
        return cell(Outcome::ReturnsNan, format!("{what}; {}", left(r)));
    }
    let Ok(answer) = answer else {
        return cell(Outcome::Behaves, left(r));
    };
    match compare(config, r, &answer) {
        None => cell(Outcome::Behaves, left(r)),
        Some(diff) => match &answer {
            Answer::Stage(step, _) if step.edge.is_some() => cell(
                Outcome::Tie,
                format!(
                    "{diff}; {}",
                    step.edge.as_ref().map_or(String::new(), |e| e.0.clone())
                ),
            ),
            _ => cell(Outcome::Disagrees, format!("{diff}; {}", left(r))),
        },
    }
}
