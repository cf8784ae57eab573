//! The permutation audit: every order of a multiset, handed to each truncation sampler with
//! a stale `sorted = true` (and, as the negative control, with the honest `sorted = false`).
//!
//! A survivor set must be a function of the multiset and the parameter. So more than one
//! distinct set across the orders of one multiset proves the sampler unsound, with no oracle
//! needed; the oracle then says which set is right.
//!
//! The detector's controls run through the same `run_case`: planted Rust truncators (top_k
//! and top_p) that trust the flag must be flagged, the same truncators that always sort must
//! give one set, the oracle's, in every case.

use crate::planted::{PlantedRule, PlantedTruncator};
use crate::stage::ChainStage;
use crate::text::join;
use anyhow::{ensure, Context, Result};
use oracle::stage::Stage;
use oracle::truncation::{compose, Pool};
use oracle::TokenId;
use serde::{Serialize, Serializer};
use std::collections::BTreeMap;
use subject::offered;
use subject::{Candidates, NotOffered, Sampler};

/// The multisets audited. Distinct logits, spaced so that no parameter below puts a
/// threshold at a probability level (the oracle checks this and skips any that would).
pub fn family() -> Vec<Vec<f32>> {
    vec![
        vec![4.0, 3.0, 2.0, 1.0, 0.0, -1.0, -2.0, -3.0],
        vec![3.5, 2.75, 2.5, 1.25, 0.5, 0.0, -1.5, -4.0],
        vec![1.0, 0.75, 0.5, 0.25, 0.0, -0.25, -0.5, -0.75],
        vec![2.0, 1.5, 0.0, -1.0, -2.5],
    ]
}

/// The parameters each truncation sampler is audited at.
pub fn truncators(n: usize) -> Vec<ChainStage> {
    let mut out: Vec<Stage> = (1..n as i32).map(|k| Stage::TopK { k }).collect();
    out.extend([0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95].map(|p| Stage::TopP { p, min_keep: 1 }));
    out.extend([0.02, 0.05, 0.1, 0.2, 0.3, 0.5].map(|p| Stage::MinP { p, min_keep: 1 }));
    out.extend([0.2, 0.5, 0.7, 0.9].map(|p| Stage::Typical { p, min_keep: 1 }));
    out.into_iter().map(ChainStage::from).collect()
}

/// Ids (as a bit set) whose logit is above `-inf` after the sampler ran on `order`.
fn survivors_bits(
    sampler: &mut Sampler,
    logits: &[f32],
    order: &[usize],
    sorted_flag: bool,
) -> Result<u64> {
    let mut c = Candidates::new(order.iter().map(|&i| (TokenId(i as i32), logits[i])));
    c.sorted = sorted_flag;
    sampler.apply(&mut c)?;
    Ok(ids_to_bits(&crate::chain::survivors(&c)))
}

pub fn bits_to_ids(bits: u64) -> Vec<i32> {
    (0..64).filter(|i| bits >> i & 1 == 1).collect()
}

fn ids_to_bits(ids: &[TokenId]) -> u64 {
    ids.iter().fold(0, |acc, id| acc | 1u64 << id.0)
}

/// Calls `f` on every permutation of `0..n` (Heap's algorithm; n! calls).
pub fn for_each_permutation(n: usize, mut f: impl FnMut(&[usize]) -> Result<()>) -> Result<()> {
    let mut a: Vec<usize> = (0..n).collect();
    let mut c = vec![0usize; n];
    f(&a)?;
    let mut i = 0;
    while i < n {
        if c[i] < i {
            if i % 2 == 0 {
                a.swap(0, i);
            } else {
                a.swap(c[i], i);
            }
            f(&a)?;
            c[i] += 1;
            i = 0;
        } else {
            c[i] = 0;
            i += 1;
        }
    }
    Ok(())
}

/// One sampler at one parameter on one multiset, over all orders. Its JSON is the worst
/// order's: the stage, the multiset, how many distinct sets, the oracle's, the order and its set.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PermutationCase {
    pub stage: ChainStage,
    pub logits: Vec<f32>,
    /// Distinct sets, and how many orders gave each, with the stale flag.
    #[serde(rename = "distinct_sets", serialize_with = "count")]
    pub stale: BTreeMap<u64, usize>,
    #[serde(serialize_with = "ids")]
    pub oracle: u64,
    #[serde(skip)]
    pub permutations: usize,
    /// The same with the honest flag (negative control).
    #[serde(skip)]
    pub honest: BTreeMap<u64, usize>,
    /// Stale flag again, with `sorted_guard` placed before the sampler (the fix); why not,
    /// when the build cannot make the guard.
    #[serde(skip)]
    pub guarded: Result<BTreeMap<u64, usize>, NotOffered>,
    /// An order whose stale result is furthest from the oracle's set, and that result.
    #[serde(rename = "order")]
    pub worst_order: Vec<usize>,
    #[serde(rename = "subject", serialize_with = "ids")]
    pub worst_set: u64,
}

fn count<S: Serializer>(m: &BTreeMap<u64, usize>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(m.len() as u64)
}

fn ids<S: Serializer>(bits: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(bits_to_ids(*bits))
}

impl PermutationCase {
    pub fn stale_differing(&self) -> usize {
        self.stale
            .iter()
            .filter(|(s, _)| **s != self.oracle)
            .map(|(_, n)| n)
            .sum()
    }

    /// The negative control holds: one set with the honest flag, the oracle's.
    pub fn honest_ok(&self) -> bool {
        self.honest.len() == 1 && self.honest.contains_key(&self.oracle)
    }

    /// The fix holds: with the guard in front, one set, the oracle's, whatever the order
    /// (`None` when the guard did not run).
    pub fn guarded_ok(&self) -> Option<bool> {
        let g = self.guarded.as_ref().ok()?;
        Some(g.len() == 1 && g.contains_key(&self.oracle))
    }
}

/// Runs one case; `None` when the oracle reports a knife edge for it (not a verdict input).
pub fn run_case(stage: &ChainStage, logits: &[f32]) -> Result<Option<PermutationCase>> {
    let comp = compose(std::slice::from_ref(stage), &Pool::from_logits(logits), &[]);
    if !comp.edges.is_empty() {
        return Ok(None);
    }
    let oracle = ids_to_bits(&comp.pool.survivors());
    let mut sampler = stage.build(logits.len() as i32)?;
    // The guard is written in Rust: a build that cannot plug one in runs the case without
    // it, and the case says so.
    let mut guarded_chain = match offered(ledger::sorted_guard())? {
        Ok(guard) => Ok(Sampler::chain(vec![
            guard,
            stage.build(logits.len() as i32)?,
        ])?),
        Err(why) => Err(why),
    };
    let (mut stale, mut honest, mut guarded) = (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
    let mut permutations = 0;
    let mut worst: (u32, Vec<usize>, u64) = (0, (0..logits.len()).collect(), oracle);
    for_each_permutation(logits.len(), |order| {
        permutations += 1;
        let s = survivors_bits(&mut sampler, logits, order, true)?;
        *stale.entry(s).or_insert(0) += 1;
        let distance = (s ^ oracle).count_ones();
        if distance > worst.0 {
            worst = (distance, order.to_vec(), s);
        }
        let h = survivors_bits(&mut sampler, logits, order, false)?;
        *honest.entry(h).or_insert(0) += 1;
        if let Ok(chain) = &mut guarded_chain {
            let g = survivors_bits(chain, logits, order, true)?;
            *guarded.entry(g).or_insert(0) += 1;
        }
        Ok(())
    })?;
    Ok(Some(PermutationCase {
        stage: stage.clone(),
        logits: logits.to_vec(),
        oracle,
        permutations,
        stale,
        honest,
        guarded: guarded_chain.map(|_| guarded),
        worst_order: worst.1,
        worst_set: worst.2,
    }))
}

/// Per sampler: how many cases it ran, how many distinct kept sets the permutations gave, and
/// whether its honest and guarded runs matched the oracle.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PermutationRow {
    pub sampler: &'static str,
    pub cases: usize,
    pub skipped_knife_edges: usize,
    pub max_distinct_sets: usize,
    pub permutations: usize,
    #[serde(rename = "permutations_differing_from_oracle")]
    pub differing: usize,
    #[serde(rename = "honest_flag_one_set_equal_to_oracle")]
    pub honest_ok: bool,
    /// With `sorted_guard` before the sampler, every case gives exactly the oracle's set
    /// (`null` when the build cannot make the guard).
    #[serde(rename = "sorted_guard_one_set_equal_to_oracle")]
    pub guarded_ok: Option<bool>,
    /// The case with the most distinct sets (first such in family order).
    pub worst: PermutationCase,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PermAudit {
    /// The multisets ([`family`]).
    pub family: Vec<Vec<f32>>,
    /// llama.cpp's truncators: top_k, top_p, min_p, typical.
    pub rows: Vec<PermutationRow>,
    /// The planted truncators through the same audit: trusting top_k and top_p (must
    /// be flagged), honest top_k and top_p (must give the oracle's set everywhere).
    #[serde(rename = "shadow_controls")]
    pub planted: Vec<PermutationRow>,
    /// Why the planted truncators did not run (and `planted` is empty), when the build cannot
    /// make them.
    #[serde(
        rename = "shadow_controls_not_run",
        skip_serializing_if = "Option::is_none"
    )]
    pub planted_not_run: Option<String>,
    /// A measurement on llama.cpp: top_p on a reverse-sorted array flagged `sorted = true`.
    #[serde(rename = "reverse_sorted_measurement")]
    pub reverse_sorted: ReverseSorted,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReverseSorted {
    pub stage: ChainStage,
    pub logits: Vec<f32>,
    pub order: Vec<usize>,
    #[serde(serialize_with = "ids")]
    pub subject: u64,
    #[serde(serialize_with = "ids")]
    pub oracle: u64,
    pub differs: bool,
}

pub fn reverse_sorted() -> Result<ReverseSorted> {
    let logits = family()[0].clone();
    let stage = ChainStage::from(Stage::TopP {
        p: 0.8,
        min_keep: 1,
    });
    let comp = compose(
        std::slice::from_ref(&stage),
        &Pool::from_logits(&logits),
        &[],
    );
    ensure!(comp.edges.is_empty(), "the measurement must be tie-free");
    let mut order: Vec<usize> = (0..logits.len()).collect();
    order.sort_by(|&a, &b| logits[a].total_cmp(&logits[b]));
    let mut sampler = stage.build(logits.len() as i32)?;
    let subject = survivors_bits(&mut sampler, &logits, &order, true)?;
    let oracle = ids_to_bits(&comp.pool.survivors());
    Ok(ReverseSorted {
        stage,
        logits,
        order,
        subject,
        oracle,
        differs: subject != oracle,
    })
}

/// The planted truncators at every top_k and top_p parameter the built-ins are audited at.
fn planted_stages(logits: &[f32], trusts_flag: bool, top_p: bool) -> Vec<ChainStage> {
    truncators(logits.len())
        .into_iter()
        .filter_map(|s| match s {
            ChainStage::Sampler(Stage::TopK { k }) if !top_p => {
                Some(PlantedRule::TopK { k: k as usize })
            }
            ChainStage::Sampler(Stage::TopP { p, .. }) if top_p => Some(PlantedRule::TopP { p }),
            _ => None,
        })
        .map(|rule| ChainStage::PlantedTruncator(PlantedTruncator { rule, trusts_flag }))
        .collect()
}

/// Every case of `stages(multiset)` over the family, summarized as one row.
fn audit_row(
    label: &'static str,
    stages: impl Fn(&[f32]) -> Vec<ChainStage>,
) -> Result<PermutationRow> {
    let mut row: Option<PermutationRow> = None;
    let mut skipped = 0;
    for logits in family() {
        for stage in stages(&logits) {
            let Some(case) = run_case(&stage, &logits)? else {
                skipped += 1;
                continue;
            };
            let r = row.get_or_insert_with(|| PermutationRow {
                sampler: label,
                cases: 0,
                skipped_knife_edges: 0,
                max_distinct_sets: 0,
                permutations: 0,
                differing: 0,
                honest_ok: true,
                guarded_ok: Some(true),
                worst: case.clone(),
            });
            r.cases += 1;
            r.permutations += case.permutations;
            r.differing += case.stale_differing();
            r.honest_ok &= case.honest_ok();
            r.guarded_ok = r.guarded_ok.zip(case.guarded_ok()).map(|(a, b)| a && b);
            if case.stale.len() > r.max_distinct_sets {
                r.max_distinct_sets = case.stale.len();
                r.worst = case;
            }
        }
    }
    let mut r = row.with_context(|| format!("{label} has no tie-free case in the family"))?;
    r.skipped_knife_edges = skipped;
    Ok(r)
}

pub fn run() -> Result<PermAudit> {
    let mut rows = Vec::new();
    for name in ["top_k", "top_p", "min_p", "typical"] {
        let stages = |l: &[f32]| truncators(l.len()).into_iter().filter(|s| s.name() == name);
        rows.push(audit_row(name, |l| stages(l).collect())?);
    }
    let planted = || -> Result<Vec<PermutationRow>> {
        Ok(vec![
            audit_row("shadow_top_k:trusting", |l| planted_stages(l, true, false))?,
            audit_row("shadow_top_p:trusting", |l| planted_stages(l, true, true))?,
            audit_row("shadow_top_k:honest", |l| planted_stages(l, false, false))?,
            audit_row("shadow_top_p:honest", |l| planted_stages(l, false, true))?,
        ])
    };
    let (planted, planted_not_run) = match offered(planted())? {
        Ok(rows) => (rows, None),
        Err(why) => (Vec::new(), Some(why.to_string())),
    };
    Ok(PermAudit {
        family: family(),
        rows,
        planted,
        planted_not_run,
        reverse_sorted: reverse_sorted()?,
    })
}

impl PermutationRow {
    /// The detector flags this sampler: some tie-free case gives more than one set.
    pub fn flagged(&self) -> bool {
        self.max_distinct_sets > 1 && self.differing > 0
    }

    /// The detector passes this sampler: one set per case, the oracle's.
    pub fn sound(&self) -> bool {
        self.max_distinct_sets == 1 && self.differing == 0
    }
}

fn set_text(bits: u64) -> String {
    format!("{{{}}}", join(bits_to_ids(bits), ","))
}

impl PermAudit {
    pub fn to_text(&self) -> String {
        let mut out = String::from(
            "permutation audit: every order of each multiset, sorted flag forced true (stale)\n",
        );
        for (i, m) in self.family.iter().enumerate() {
            out.push_str(&format!("  multiset {}: {}\n", i + 1, join(m, ",")));
        }
        out.push_str("  sampler                cases  skipped  max distinct sets  orders differing from oracle  honest flag: 1 set = oracle  with sorted_guard: 1 set = oracle\n");
        let line = |r: &PermutationRow| {
            format!(
                "  {:<21} {:>6} {:>8} {:>18} {:>17} of {:>9}  {:<29} {}\n",
                r.sampler,
                r.cases,
                r.skipped_knife_edges,
                r.max_distinct_sets,
                r.differing,
                r.permutations,
                if r.honest_ok { "yes" } else { "NO" },
                match r.guarded_ok {
                    Some(true) => "yes",
                    Some(false) => "NO",
                    None => "not offered",
                }
            )
        };
        for r in &self.rows {
            out.push_str(&line(r));
        }
        out.push_str("  planted controls through the same audit (Rust truncators that trust the flag, or always sort):\n");
        for r in &self.planted {
            out.push_str(&line(r));
        }
        if let Some(why) = &self.planted_not_run {
            out.push_str(&format!("  not run ({why})\n"));
        }
        for r in self.rows.iter().chain(&self.planted) {
            let w = &r.worst;
            out.push_str(&format!(
                "  worst {}: {} on {}: {} distinct sets; order [{}] keeps {}, the oracle keeps {}\n",
                r.sampler,
                w.stage,
                join(&w.logits, ","),
                w.stale.len(),
                join(&w.worst_order, ","),
                set_text(w.worst_set),
                set_text(w.oracle)
            ));
        }
        let m = &self.reverse_sorted;
        out.push_str(&format!(
            "  measurement: llama.cpp {} on the ascending order [{}] flagged sorted keeps {}, the oracle keeps {}\n",
            m.stage,
            join(&m.order, ","),
            set_text(m.subject),
            set_text(m.oracle),
        ));
        out
    }
}
