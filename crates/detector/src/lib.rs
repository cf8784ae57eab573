//! F7's detector: one set of draws against one [`Expectation`], the survivor set as tie
//! classes with the renormalized probability of each survivor. The same function judges every
//! engine, every planted sampler and F2's chains that end in `dist`.
//!
//! Rule (PREREG, F7): if the survivor set rests on a rounding margin, `undecided`. Otherwise
//! a draw outside the oracle's possible set is a definite defect (`present`), and so is a tie
//! class that keeps the wrong number of ids: judged per call where the sampler shows what
//! each call kept (every call must keep exactly the class's count and draw only from what it
//! kept), else across calls (more distinct ids drawn from the class than it keeps). Otherwise
//! Pearson's chi-square test of the counts against the renormalized probabilities
//! (categories expecting fewer than 5 draws pooled into bands of the tail, with a Monte Carlo
//! p-value there, `oracle::fit`): `present` when p < the per-test level, else `absent`.

pub mod power;

pub use engine::Call;
use oracle::fit::{goodness_of_fit, GoodnessOfFit};
use oracle::TokenId;
use report::Verdict;
use serde::{Serialize, Serializer};
use std::collections::{BTreeMap, BTreeSet};

/// Ids of equal (tempered) logit, of which `kept` survive, each with probability `p_each`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Class {
    #[serde(serialize_with = "ids")]
    pub ids: Vec<TokenId>,
    pub kept: usize,
    pub p_each: f64,
}

/// Token ids as JSON: their numbers.
pub fn ids<S: Serializer>(ids: &[TokenId], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(ids.iter().map(|i| i.0))
}

/// The first [`JSON_CLASSES`] classes (highest probability first) and how many there are:
/// a 262,144-entry `all` has as many classes, which `--json` would otherwise print.
impl Serialize for Expectation {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Written<'a> {
            survivors: usize,
            classes_total: usize,
            classes: &'a [Class],
            undecided: &'a Option<String>,
        }
        Written {
            survivors: self.kept(),
            classes_total: self.classes.len(),
            classes: &self.classes[..self.classes.len().min(JSON_CLASSES)],
            undecided: &self.undecided,
        }
        .serialize(s)
    }
}

impl Class {
    pub fn is_split(&self) -> bool {
        self.kept < self.ids.len()
    }
}

/// Most classes a report lists.
pub const JSON_CLASSES: usize = 64;

#[derive(Debug, Clone, PartialEq)]
pub struct Expectation {
    /// Highest probability first, ids ascending within a class.
    pub classes: Vec<Class>,
    /// Why the survivor set is not decided in f32 (a rounding margin), if it is not.
    pub undecided: Option<String>,
}

impl Expectation {
    /// Every id that may be drawn (all members of every class with a survivor).
    pub fn possible(&self) -> BTreeSet<TokenId> {
        self.classes
            .iter()
            .flat_map(|c| c.ids.iter().copied())
            .collect()
    }

    /// The ids of every split class: those whose survival in each call the per-call tie rule
    /// needs to see.
    pub fn watch(&self) -> Vec<TokenId> {
        let mut ids: Vec<TokenId> = (self.classes.iter())
            .filter(|c| c.is_split())
            .flat_map(|c| c.ids.iter().copied())
            .collect();
        ids.sort();
        ids
    }

    /// Number of survivors.
    pub fn kept(&self) -> usize {
        self.classes.iter().map(|c| c.kept).sum()
    }

    /// One line: the classes, at most `max` of them, and how many more.
    pub fn describe(&self, max: usize) -> String {
        let mut parts: Vec<String> = self
            .classes
            .iter()
            .take(max)
            .map(|c| {
                if c.is_split() {
                    format!("{} of {} at {:.6}", c.kept, id_set(&c.ids), c.p_each)
                } else {
                    format!("{} at {:.6}", id_set(&c.ids), c.p_each)
                }
            })
            .collect();
        if self.classes.len() > max {
            parts.push(format!("{} more classes", self.classes.len() - max));
        }
        format!("{} survivors: {}", self.kept(), parts.join(", "))
    }
}

/// A tie class with more distinct ids drawn than it keeps.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Overfull {
    #[serde(serialize_with = "ids")]
    pub ids: Vec<TokenId>,
    pub drawn: usize,
    pub kept: usize,
}

/// How a split tie class was judged: per call, from what each call kept, or across calls,
/// from the distinct ids drawn (where the sampler shows only its draws).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TieRule {
    PerCall,
    AcrossCalls,
}

/// The first call that kept the wrong number of a tie class, or drew an id of the class that
/// it did not keep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallBreach {
    /// Position of the call, from 0.
    pub call: usize,
    #[serde(serialize_with = "ids")]
    pub class: Vec<TokenId>,
    #[serde(serialize_with = "ids")]
    pub kept_in_call: Vec<TokenId>,
    pub kept: usize,
    #[serde(serialize_with = "id")]
    pub drawn: TokenId,
}

/// A token id as JSON: its number.
fn id<S: Serializer>(id: &TokenId, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_i32(id.0)
}

#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Drawn ids the oracle never keeps.
    pub outside: Vec<TokenId>,
    /// Tie classes with more distinct ids drawn than they keep (the across-calls rule).
    pub overfull: Vec<Overfull>,
    /// The rule split tie classes were judged by; `None` where no class is split.
    pub tie_rule: Option<TieRule>,
    /// Calls that broke a split class's count (the per-call rule), and the first of them.
    pub call_breaches: usize,
    pub first_breach: Option<CallBreach>,
    /// How often each id was drawn.
    pub support: BTreeMap<TokenId, u64>,
    pub fit: Option<GoodnessOfFit>,
    /// The per-test significance level the p-value was compared with.
    pub alpha: f64,
    pub verdict: Verdict,
    /// The rule that decided, in one line.
    pub why: String,
}

/// `{1,2,3}`.
fn id_set(ids: &[TokenId]) -> String {
    let ids: Vec<String> = ids.iter().map(|i| i.0.to_string()).collect();
    format!("{{{}}}", ids.join(","))
}

pub fn count(draws: &[TokenId]) -> BTreeMap<TokenId, u64> {
    let mut m = BTreeMap::new();
    for &d in draws {
        *m.entry(d).or_insert(0) += 1;
    }
    m
}

/// The chi-square categories: one per id of a class that is whole, or whose drawn ids are as
/// many as it keeps (then the drawn ones are the kept ones); otherwise the class is one bin.
fn bins(exp: &Expectation, support: &BTreeMap<TokenId, u64>) -> (Vec<String>, Vec<u64>, Vec<f64>) {
    let (mut labels, mut observed, mut p) = (Vec::new(), Vec::new(), Vec::new());
    for c in &exp.classes {
        let drawn: Vec<TokenId> = c
            .ids
            .iter()
            .copied()
            .filter(|id| support.contains_key(id))
            .collect();
        let members: Vec<TokenId> = if !c.is_split() {
            c.ids.clone()
        } else if drawn.len() == c.kept {
            drawn.clone()
        } else {
            labels.push(format!("{} of {}", c.kept, id_set(&c.ids)));
            observed.push(drawn.iter().map(|id| support[id]).sum());
            p.push(c.kept as f64 * c.p_each);
            continue;
        };
        for id in members {
            labels.push(id.0.to_string());
            observed.push(support.get(&id).copied().unwrap_or(0));
            p.push(c.p_each);
        }
    }
    (labels, observed, p)
}

/// The per-call rule over `calls`, each of which shows what it kept: how many calls kept a
/// split class's ids in another number than the class keeps, or drew one of its ids that the
/// call did not keep; and the first such call.
fn call_breaches(calls: &[Call], split: &[&Class]) -> (usize, Option<CallBreach>) {
    let mut first = None;
    let mut count = 0;
    for (i, call) in calls.iter().enumerate() {
        let kept = call.kept.as_deref().unwrap_or_default();
        let breach = split.iter().find_map(|c| {
            let in_call: Vec<TokenId> = (kept.iter())
                .copied()
                .filter(|id| c.ids.contains(id))
                .collect();
            let drew_unkept = c.ids.contains(&call.drawn) && !in_call.contains(&call.drawn);
            (in_call.len() != c.kept || drew_unkept).then(|| CallBreach {
                call: i,
                class: c.ids.clone(),
                kept_in_call: in_call,
                kept: c.kept,
                drawn: call.drawn,
            })
        });
        if let Some(b) = breach {
            count += 1;
            first.get_or_insert(b);
        }
    }
    (count, first)
}

/// Judges `calls` against `exp` at level `alpha` (the rule at the top of this crate).
pub fn judge(calls: &[Call], exp: &Expectation, alpha: f64) -> Outcome {
    let draws: Vec<TokenId> = calls.iter().map(|c| c.drawn).collect();
    let support = count(&draws);
    let possible = exp.possible();
    let outside: Vec<TokenId> = support
        .keys()
        .copied()
        .filter(|id| !possible.contains(id))
        .collect();
    let split: Vec<&Class> = exp.classes.iter().filter(|c| c.is_split()).collect();
    let tie_rule = if split.is_empty() {
        None
    } else if calls.iter().all(|c| c.kept.is_some()) {
        Some(TieRule::PerCall)
    } else {
        Some(TieRule::AcrossCalls)
    };
    let overfull: Vec<Overfull> = if tie_rule == Some(TieRule::AcrossCalls) {
        (split.iter())
            .filter_map(|c| {
                let drawn = c.ids.iter().filter(|id| support.contains_key(id)).count();
                (drawn > c.kept).then(|| Overfull {
                    ids: c.ids.clone(),
                    drawn,
                    kept: c.kept,
                })
            })
            .collect()
    } else {
        Vec::new()
    };
    let (breaches, first_breach) = if tie_rule == Some(TieRule::PerCall) {
        call_breaches(calls, &split)
    } else {
        (0, None)
    };
    let mut out = Outcome {
        support,
        outside,
        overfull,
        tie_rule,
        call_breaches: breaches,
        first_breach,
        fit: None,
        alpha,
        verdict: Verdict::Absent,
        why: String::new(),
    };
    let definite_defect =
        !out.outside.is_empty() || !out.overfull.is_empty() || out.call_breaches > 0;
    // A set that rests on a rounding margin decides nothing, not even where it ends: a draw
    // just past the cut may be the engine rounding the other way.
    (out.verdict, out.why) = if let Some(edge) = &exp.undecided {
        let mut why = format!("the survivor set rests on a rounding margin: {edge}");
        if definite_defect {
            why += &format!(" ({})", definite(&out));
        }
        (Verdict::Undecided, why)
    } else if definite_defect {
        (Verdict::Present, definite(&out))
    } else {
        let (labels, observed, p) = bins(exp, &out.support);
        match goodness_of_fit(&labels, &observed, &p) {
            Err(category) => (
                Verdict::Present,
                format!("drawn: {category}, which the oracle gives probability 0 in f64"),
            ),
            Ok(fit) => {
                let reject = fit.p_value < alpha;
                let why = if fit.df == 0 {
                    "every draw inside the survivor set; one category, so no distribution to test"
                        .to_string()
                } else {
                    format!(
                        "chi-square {:.3} on {} df, p = {:.3e}{} {} {:.1e}",
                        fit.statistic,
                        fit.df,
                        fit.p_value,
                        match fit.monte_carlo {
                            Some(reps) => format!(" (Monte Carlo, {reps} replicates)"),
                            None => String::new(),
                        },
                        if reject { "<" } else { ">=" },
                        alpha
                    )
                };
                out.fit = Some(fit);
                (Verdict::found(reject), why)
            }
        }
    };
    out
}

fn definite(o: &Outcome) -> String {
    let mut parts = Vec::new();
    if !o.outside.is_empty() {
        let ids: Vec<String> = o
            .outside
            .iter()
            .map(|id| format!("{} ({}x)", id, o.support[id]))
            .collect();
        parts.push(format!(
            "drawn outside the survivor set: {}",
            ids.join(", ")
        ));
    }
    for Overfull { ids, drawn, kept } in &o.overfull {
        parts.push(format!(
            "{drawn} distinct ids drawn from the tie class {}, which keeps {kept}",
            id_set(ids)
        ));
    }
    if let Some(b) = &o.first_breach {
        let what = if b.kept_in_call.len() != b.kept {
            format!("kept {} of the tie class", id_set(&b.kept_in_call))
        } else {
            format!("drew {}, which it did not keep of the tie class", b.drawn)
        };
        parts.push(format!(
            "call {} {what} {}, which keeps {} ({} of {} calls break the class's count)",
            b.call,
            id_set(&b.class),
            b.kept,
            o.call_breaches,
            o.support.values().sum::<u64>()
        ));
    }
    parts.join("; ")
}

impl Outcome {
    pub fn p_value(&self) -> Option<f64> {
        self.fit.as_ref().map(|f| f.p_value)
    }

    /// The drawn ids, with counts, at most `max` of them (the rest summed).
    pub fn describe_support(&self, max: usize) -> String {
        let mut parts: Vec<String> = self
            .support
            .iter()
            .take(max)
            .map(|(id, n)| format!("{id}:{n}"))
            .collect();
        if self.support.len() > max {
            let rest: u64 = self.support.values().skip(max).sum();
            parts.push(format!("{} more ids:{rest}", self.support.len() - max));
        }
        format!("{} ids drawn ({})", self.support.len(), parts.join(" "))
    }
}

impl Serialize for Outcome {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        /// How often each id was drawn, keyed by the id.
        fn support<S: Serializer>(m: &BTreeMap<TokenId, u64>, s: S) -> Result<S::Ok, S::Error> {
            s.collect_map(m.iter().map(|(id, n)| (id.0.to_string(), n)))
        }
        #[derive(Serialize)]
        struct Written<'a> {
            #[serde(serialize_with = "support")]
            support: &'a BTreeMap<TokenId, u64>,
            #[serde(serialize_with = "ids")]
            outside: &'a [TokenId],
            overfull: &'a [Overfull],
            #[serde(skip_serializing_if = "Option::is_none")]
            tie_rule: Option<TieRule>,
            #[serde(skip_serializing_if = "Option::is_none")]
            first_call_breach: Option<&'a CallBreach>,
            #[serde(skip_serializing_if = "Option::is_none")]
            call_breaches: Option<usize>,
            statistic: Option<f64>,
            df: Option<usize>,
            p_value: Option<f64>,
            pooled_categories: Option<usize>,
            #[serde(skip_serializing_if = "Option::is_none")]
            monte_carlo_replicates: Option<usize>,
            alpha: f64,
            row_verdict: Verdict,
            why: &'a str,
        }
        let (statistic, df, pooled_categories) = match &self.fit {
            Some(f) => (Some(f.statistic), Some(f.df), Some(f.pooled)),
            None => (None, None, None),
        };
        Written {
            support: &self.support,
            outside: &self.outside,
            overfull: &self.overfull,
            tie_rule: self.tie_rule,
            first_call_breach: self.first_breach.as_ref(),
            call_breaches: (self.tie_rule == Some(TieRule::PerCall)).then_some(self.call_breaches),
            statistic,
            df,
            p_value: self.p_value(),
            pooled_categories,
            monte_carlo_replicates: self.fit.as_ref().and_then(|f| f.monte_carlo),
            alpha: self.alpha,
            row_verdict: self.verdict,
            why: &self.why,
        }
        .serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oracle::token_ids as ids;

    /// `{0}` whole at 0.5, then one of `{1, 2}` at 0.5.
    fn two_classes(undecided: Option<&str>) -> Expectation {
        let class = |v: &[i32]| Class {
            ids: ids(v),
            kept: 1,
            p_each: 0.5,
        };
        Expectation {
            classes: vec![class(&[0]), class(&[1, 2])],
            undecided: undecided.map(str::to_string),
        }
    }

    #[test]
    fn each_rule_decides_its_case() {
        let fair: Vec<i32> = (0..1000).map(|i| i % 2).collect();
        let skewed: Vec<i32> = (0..1000).map(|i| i32::from(i % 10 == 0)).collect();
        // (draws, rounding margin, verdict, words of the reason). A draw past a cut that rests
        // on a rounding margin may be the engine rounding the other way: undecided, and the
        // outside id still named.
        for (draws, margin, verdict, why) in [
            (
                &[0, 1, 3][..],
                None,
                Verdict::Present,
                "outside the survivor set",
            ),
            (
                &[0, 1, 2],
                None,
                Verdict::Present,
                "2 distinct ids drawn from the tie class {1,2}",
            ),
            (&[0, 1, 3], Some("margin"), Verdict::Undecided, "outside"),
            (&fair, None, Verdict::Absent, "chi-square"),
            (&skewed, None, Verdict::Present, "chi-square"),
        ] {
            let o = judge(
                &Call::all_drawn_only(&ids(draws)),
                &two_classes(margin),
                0.01,
            );
            assert_eq!(o.verdict, verdict, "{}", o.why);
            assert!(o.why.contains(why), "{}", o.why);
        }
    }

    /// A call that drew `drawn` and kept `kept` of the watched ids.
    fn call(drawn: i32, kept: &[i32]) -> Call {
        Call {
            drawn: TokenId(drawn),
            kept: Some(ids(kept)),
        }
    }

    #[test]
    fn ties_are_judged_per_call_where_calls_show_what_they_kept() {
        let exp = two_classes(None);
        // Each call keeps one of {1, 2}, afresh: the across-calls rule would flag the two
        // distinct ids drawn from the class; per call, each kept exactly one.
        let fresh: Vec<Call> = (0..1000)
            .map(|i| match i % 4 {
                0 | 2 => call(0, &[1 + (i / 4 % 2)]),
                1 => call(1, &[1]),
                _ => call(2, &[2]),
            })
            .collect();
        let o = judge(&fresh, &exp, 0.01);
        assert_eq!(o.tie_rule, Some(TieRule::PerCall));
        assert_eq!(o.verdict, Verdict::Absent, "{}", o.why);
        let drawn_only: Vec<Call> = fresh.iter().map(|c| Call::drawn_only(c.drawn)).collect();
        let o = judge(&drawn_only, &exp, 0.01);
        assert_eq!(o.tie_rule, Some(TieRule::AcrossCalls));
        assert_eq!(o.verdict, Verdict::Present, "{}", o.why);
        // A call that keeps both, and one that draws an id it did not keep.
        for (bad, why) in [
            (
                call(1, &[1, 2]),
                "call 3 kept {1,2} of the tie class {1,2}, which keeps 1 (1 of",
            ),
            (
                call(2, &[1]),
                "call 3 drew 2, which it did not keep of the tie class {1,2}",
            ),
            (
                call(0, &[]),
                "call 3 kept {} of the tie class {1,2}, which keeps 1",
            ),
        ] {
            let mut calls = fresh.clone();
            calls[3] = bad;
            let o = judge(&calls, &exp, 0.01);
            assert_eq!(o.verdict, Verdict::Present, "{}", o.why);
            assert_eq!(o.call_breaches, 1);
            assert!(o.why.contains(why), "{}", o.why);
        }
        // A margin still decides nothing.
        let mut calls = fresh.clone();
        calls[3] = call(1, &[1, 2]);
        assert_eq!(
            judge(&calls, &two_classes(Some("m")), 0.01).verdict,
            Verdict::Undecided
        );
    }
}
