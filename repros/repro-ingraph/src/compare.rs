//! One case on both paths and the oracle: the chain in the graph (and its CPU tail, if any),
//! the same chain on the CPU over the raw logits of the same prompt decoded by a plain
//! context of the same shape, and the oracle's composition of the same stages over those
//! logits. That the plain context's row is the row the graph started from is a checked
//! precondition ([`raw_logits`]), not an assumption.

use crate::case::Case;
use crate::check::Check;
use crate::dyntemp::{self, DynTemp, Reading};
use crate::ties;
use anyhow::{ensure, Context as _, Result};
use oracle::stage::Stage;
use oracle::truncation::{compose, Pool};
use oracle::TokenId;
use report::Verdict;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use subject::SamplerSpec;
use subject::{Attention, Candidates, Context, GraphContext, Model, Sampler, StagePlace};

/// What one path left: the ids it kept (logit above `-inf`), their logits, and its choice.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Side {
    /// Kept ids, ascending.
    #[serde(serialize_with = "capped_ids")]
    pub survivors: Vec<TokenId>,
    #[serde(skip)]
    pub logits: BTreeMap<TokenId, f32>,
    #[serde(serialize_with = "opt_id")]
    pub selected: Option<TokenId>,
}

impl Side {
    fn from_pairs(
        pairs: impl IntoIterator<Item = (TokenId, f32)>,
        selected: Option<TokenId>,
    ) -> Side {
        let logits: BTreeMap<TokenId, f32> = pairs
            .into_iter()
            .filter(|(_, l)| *l > f32::NEG_INFINITY)
            .collect();
        Side {
            survivors: logits.keys().copied().collect(),
            logits,
            selected,
        }
    }

    fn from_candidates(c: &Candidates) -> Side {
        Side::from_pairs(c.entries.iter().map(|e| (e.id, e.logit)), c.selected_id())
    }

    /// The same result with ids exchanged as `pairs` say ([`crate::ties`]).
    fn relabelled(self, pairs: &[(TokenId, TokenId)]) -> Side {
        if pairs.is_empty() {
            return self;
        }
        let logits: BTreeMap<TokenId, f32> = (self.logits.iter())
            .map(|(&id, &l)| (ties::apply(pairs, id), l))
            .collect();
        Side {
            survivors: logits.keys().copied().collect(),
            logits,
            selected: self.selected.map(|t| ties::apply(pairs, t)),
        }
    }
}

/// The oracle's answer for the case.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OracleSide {
    #[serde(serialize_with = "capped_ids")]
    pub survivors: Vec<TokenId>,
    #[serde(serialize_with = "opt_id")]
    pub selected: Option<TokenId>,
    /// Why its answer rests on a tie or a rounding margin, if it does.
    pub undecided: Option<String>,
    /// Whether that answer is still decided up to a tie-break (every edge a tie, no stage
    /// reading ids after it; see [`crate::ties`]): then the graph's result is read under the
    /// tie-break that matches it best, and any difference left is one.
    pub ties_decided: bool,
}

/// Everything measured on one case.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    pub case: String,
    pub chain: String,
    /// Whether the chain draws (then its token is a draw: it must be a survivor, and the two
    /// paths' tokens are compared as a note).
    pub draws: bool,
    /// Whether the chain ends by choosing a token (then choosing none is a difference).
    pub selects: bool,
    /// Whether some stage ran in the graph and the graph handed anything back; without it the
    /// row compares the CPU with itself and cannot show an in-graph defect.
    pub ran_in_graph: bool,
    /// For a chain with a planted stage: how many sampling graphs of the decode it added its
    /// ops to (the graph llama.cpp builds once at set-up to probe a chain is not counted).
    pub planted_graph_builds: Option<usize>,
    /// For a chain with a planted stage: how many times it ran on the graph's CPU tail.
    pub planted_tail_applies: Option<usize>,
    /// For a chain with a planted stage: how many times it filled graph inputs during the
    /// decode (only a stage that makes inputs fills any).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub planted_inputs_set: Option<usize>,
    /// Where each stage ran (`in_graph`), as llama.cpp named it after setting up the chain.
    pub places: Vec<Place>,
    pub graph: Side,
    pub cpu: Side,
    pub oracle: OracleSide,
    /// Ids of equal logit the graph's result was read under another tie-break with, as
    /// (the graph's id, the oracle's id); the checks below judge the relabelled result.
    #[serde(serialize_with = "id_pairs", skip_serializing_if = "Vec::is_empty")]
    pub tie_relabelled: Vec<(TokenId, TokenId)>,
    /// Ids the graph kept and the oracle did not, and the other way round (all of them).
    #[serde(serialize_with = "detector::ids")]
    pub graph_only: Vec<TokenId>,
    #[serde(serialize_with = "detector::ids")]
    pub oracle_only: Vec<TokenId>,
    /// Entries the graph returned, and how many of them it masked with `-inf` instead of
    /// dropping.
    pub graph_returned: usize,
    pub graph_masked: usize,
    /// Entries the graph returned as NaN (never survivors).
    #[serde(skip_serializing_if = "is_zero")]
    pub graph_nan: usize,
    /// The largest distance, in units in the last place, between a survivor's logit on the two
    /// paths, over the survivors both kept; and the allowed one.
    pub max_ulps: u32,
    pub allowed_ulps: u32,
    /// The same distance to the oracle's logits for the same ids; judged only where the case
    /// says the oracle computes them as llama.cpp does (`values_against_oracle`).
    pub max_ulps_oracle: u32,
    pub values_against_oracle: bool,
    /// The ids the chains had accepted before this row (the oracle's history).
    #[serde(
        serialize_with = "detector::ids",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub history: Vec<TokenId>,
    /// The probabilities the graph returned, against the oracle's softmax of its survivors.
    pub probs: Option<Probs>,
    /// For a chain with a dynamic `temp_ext` (`delta > 0`): the survivor logits' relative
    /// differences against the bound derived for this input ([`crate::dyntemp`]), which then
    /// judges the values instead of an ulp count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dyn_temp: Option<DynTemp>,
    /// How many entries the stage alone keeps before `min_keep` tops it up (cases with a
    /// `min_keep` above 1 only; the case shows the parameter only if this is below it).
    pub kept_without_min_keep: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Place {
    pub stage: String,
    pub in_graph: bool,
}

impl From<StagePlace> for Place {
    fn from(p: StagePlace) -> Place {
        Place {
            stage: p.name,
            in_graph: p.in_graph,
        }
    }
}

/// The graph's probabilities against the oracle's, and the tolerance (f32 softmax over `n`
/// entries: `8 (n + 2) eps` absolute, the oracle's own slack for an f32 probability sum).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Probs {
    pub count: usize,
    /// Entries with probability 0 (masked), and whether every one of them was masked.
    pub zero: usize,
    pub max_abs_difference: f64,
    pub tolerance: f64,
}

impl Outcome {
    /// The graph kept a different set from the oracle's.
    pub fn survivors_differ(&self) -> bool {
        self.graph.survivors != self.oracle.survivors
    }

    /// A survivor's logit is further from the CPU's than the case allows: more ulps than
    /// its allowance, or, after a dynamic `temp_ext`, a relative difference beyond the derived
    /// bound and its rounding margin.
    pub fn values_differ(&self) -> bool {
        let from_cpu = match &self.dyn_temp {
            Some(d) => d.reading() == Reading::Beyond,
            None => self.max_ulps > self.allowed_ulps,
        };
        from_cpu || (self.values_against_oracle && self.max_ulps_oracle > self.allowed_ulps)
    }

    /// The values are above the derived bound by no more than its rounding margin.
    pub fn values_on_margin(&self) -> bool {
        self.dyn_temp
            .as_ref()
            .is_some_and(|d| d.reading() == Reading::Margin)
    }

    /// A deterministic choice (greedy) differs from the oracle's, or a draw lies outside the
    /// oracle's survivors.
    pub fn choice_wrong(&self) -> bool {
        match (self.draws, self.graph.selected) {
            (true, Some(t)) => !self.oracle.survivors.contains(&t),
            (false, Some(t)) => self.oracle.selected.is_some_and(|o| o != t),
            (_, None) => self.selects,
        }
    }

    pub fn probs_differ(&self) -> bool {
        self.probs
            .as_ref()
            .is_some_and(|p| p.max_abs_difference > p.tolerance)
    }

    /// The checks that found a difference.
    pub fn flags(&self) -> Vec<Check> {
        [
            (Check::Survivors, self.survivors_differ()),
            (Check::Values, self.values_differ()),
            (Check::Choice, self.choice_wrong()),
            (Check::Probs, self.probs_differ()),
        ]
        .into_iter()
        .filter_map(|(c, f)| f.then_some(c))
        .collect()
    }

    /// The row's verdict: `present` on any difference, `undecided` when the oracle's answer
    /// rests on a tie or margin and something differs, or when nothing else differs and the
    /// values lie on their bound's rounding margin; `inconclusive` when nothing ran in the
    /// graph.
    pub fn verdict(&self) -> Verdict {
        if !self.ran_in_graph {
            return Verdict::Inconclusive;
        }
        let differs = !self.flags().is_empty();
        match (differs, &self.oracle.undecided, self.oracle.ties_decided) {
            (true, Some(_), false) => Verdict::Undecided,
            (false, _, _) if self.values_on_margin() => Verdict::Undecided,
            (d, _, _) => Verdict::found(d),
        }
    }

    pub fn evidence(&self) -> String {
        let graph_places: Vec<&str> = (self.places.iter())
            .filter(|p| p.in_graph)
            .map(|p| p.stage.as_str())
            .collect();
        let mut e = format!(
            "{}: in the graph: {}; the graph returned {} entries ({} masked with -inf{}), keeps {} against the oracle's {}{}; the CPU keeps {}; survivor logits up to {} ulp from the CPU's ({})",
            self.chain,
            if graph_places.is_empty() { "nothing".to_string() } else { graph_places.join(", ") },
            self.graph_returned,
            self.graph_masked,
            if self.graph_nan > 0 { format!(", {} NaN", self.graph_nan) } else { String::new() },
            self.graph.survivors.len(),
            self.oracle.survivors.len(),
            if self.survivors_differ() { " (a different set)" } else { " (the same set)" },
            self.cpu.survivors.len(),
            self.max_ulps,
            if self.dyn_temp.is_some() {
                "judged relatively below".to_string()
            } else {
                format!("allowed {}", self.allowed_ulps)
            },
        );
        if let Some(k) = self.kept_without_min_keep {
            e += &format!("; without min_keep the stage would keep {k}");
        }
        if let Some(d) = &self.dyn_temp {
            e += &format!("; {}", d.describe());
        }
        if let Some(t) = self.graph.selected {
            e += &format!(
                "; the graph chose {t}, the CPU {}{}",
                self.cpu
                    .selected
                    .map_or("nothing".to_string(), |c| c.to_string()),
                if self.draws {
                    " (a draw each, same seed: a note, not the verdict; the draw must be a survivor)"
                } else {
                    ""
                }
            );
        }
        if let Some(p) = &self.probs {
            e += &format!(
                "; its {} probabilities ({} zero) are up to {:.2e} from the oracle's softmax (tolerance {:.2e})",
                p.count, p.zero, p.max_abs_difference, p.tolerance
            );
        }
        if !self.ran_in_graph {
            e += "; nothing ran in the graph, so this row cannot show an in-graph defect";
        }
        match (&self.oracle.undecided, self.oracle.ties_decided) {
            (Some(u), true) => {
                e += &format!("; the oracle's answer rests on a tie ({u}), so any order of equal logits is allowed");
                if !self.tie_relabelled.is_empty() {
                    let pairs: Vec<String> = (self.tie_relabelled.iter())
                        .map(|(g, o)| format!("{g}->{o}"))
                        .collect();
                    e += &format!(
                        "; the graph's result was read under its own tie-break ({})",
                        pairs.join(", ")
                    );
                }
            }
            (Some(u), false) => e += &format!("; the oracle is undecided: {u}"),
            (None, _) => {}
        }
        e
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Most ids a survivor list prints; a full-vocabulary set would otherwise write 49,152 ids per
/// side and row. The disagreement itself is listed in full ([`Outcome`]'s `graph_only` and
/// `oracle_only`).
const JSON_IDS: usize = 64;

/// A survivor set as JSON: its size and its first [`JSON_IDS`] ids.
fn capped_ids<S: serde::Serializer>(ids: &[TokenId], s: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Capped<'a> {
        count: usize,
        #[serde(serialize_with = "detector::ids")]
        first: &'a [TokenId],
    }
    Capped {
        count: ids.len(),
        first: &ids[..ids.len().min(JSON_IDS)],
    }
    .serialize(s)
}

fn id_pairs<S: serde::Serializer>(pairs: &[(TokenId, TokenId)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(pairs.iter().map(|(a, b)| [a.0, b.0]))
}

fn opt_id<S: serde::Serializer>(id: &Option<TokenId>, s: S) -> Result<S::Ok, S::Error> {
    serde::Serialize::serialize(&id.map(|t| t.0), s)
}

/// The ids of `a` not in `b` (both ascending).
fn difference(a: &[TokenId], b: &[TokenId]) -> Vec<TokenId> {
    a.iter()
        .filter(|id| b.binary_search(id).is_err())
        .copied()
        .collect()
}

/// Units in the last place between two finite f32 values of any sign.
pub fn ulps(a: f32, b: f32) -> u32 {
    let key = |x: f32| {
        let i = x.to_bits() as i32;
        if i < 0 {
            i32::MIN.wrapping_sub(i)
        } else {
            i
        }
    };
    key(a).wrapping_sub(key(b)).unsigned_abs()
}

/// The context size every case uses for `prompt`.
fn n_ctx(prompt: &[TokenId]) -> u32 {
    (prompt.len() as u32 + 8).max(64)
}

/// The raw logits after `prompt` from a plain context of the graph contexts' shape, checked
/// against what a graph context whose chain is `greedy` alone hands back (greedy leaves the
/// logits as they came): they must be the same bits, or no comparison here would mean
/// anything, and the run stops.
pub fn raw_logits(model: &Arc<Model>, prompt: &[TokenId], threads: i32) -> Result<Vec<f32>> {
    let mut plain = Context::with_attention(model, n_ctx(prompt), Attention::Auto, threads)?;
    plain.decode(prompt)?;
    let raw = plain.logits()?;
    let greedy = Sampler::chain(vec![SamplerSpec::from(Stage::Greedy).build()?])?;
    let mut g = GraphContext::new(model, n_ctx(prompt), greedy, 1, threads)?;
    g.decode(prompt)?;
    let out = g.output()?;
    let same = out.logits.as_ref().is_some_and(|l| {
        l.len() == raw.len()
            && out
                .candidates
                .iter()
                .zip(l)
                .all(|(id, x)| raw[id.0 as usize].to_bits() == x.to_bits())
    });
    ensure!(
        same,
        "a graph context's logits for the prompt are not the plain context's bit for bit, so the two paths would not start from the same row"
    );
    Ok(raw)
}

/// Runs `case` on `model` after `prompt`, whose raw logits are `raw` ([`raw_logits`]).
pub fn run(
    model: &Arc<Model>,
    prompt: &[TokenId],
    raw: &[f32],
    case: &Case,
    threads: i32,
) -> Result<Outcome> {
    let case = &case.on(raw)?;
    let n_vocab = model.n_vocab();
    let mut ctx = GraphContext::new(
        model,
        n_ctx(prompt),
        case.build(n_vocab)?,
        case.outputs_per_seq,
        threads,
    )?;
    let counts = decode_counted(case, &mut ctx, prompt)?;
    let mut cpu_chain = case.build(n_vocab)?;
    let (outcome, _) = step(case, &mut ctx, counts, raw, &mut cpu_chain, &[])?;
    Ok(outcome)
}

/// What a chain's planted stage did during one decode (none without one): graphs it added ops
/// to, and times it filled graph inputs. Counted around the decode alone, so the graphs
/// llama.cpp builds when it sets a context up are not in it.
#[derive(Debug, Clone, Copy, Default)]
struct PlantedCounts {
    graph_builds: Option<usize>,
    inputs_set: Option<usize>,
}

/// `ctx.decode(tokens)`, counting what `case`'s planted stage did during it.
fn decode_counted(
    case: &Case,
    ctx: &mut GraphContext,
    tokens: &[TokenId],
) -> Result<PlantedCounts> {
    let before = case.planted().map(|p| (p.graph_builds(), p.inputs_set()));
    ctx.decode(tokens)?;
    let after = case.planted().map(|p| (p.graph_builds(), p.inputs_set()));
    Ok(match before.zip(after) {
        Some(((b0, i0), (b1, i1))) => PlantedCounts {
            graph_builds: Some(b1 - b0),
            inputs_set: Some(i1 - i0),
        },
        None => PlantedCounts::default(),
    })
}

/// `case` over `steps` decode steps after `prompt`: at each step both paths are compared as
/// in [`run`], the graph's choice is accepted once into each chain (the graph's by
/// `finish`, the CPU's by `accept`) and decoded in both contexts, and the oracle is given
/// the history so far. Before the first step both chains accept [`primed`] of the first row
/// (the top three ids, three, two and one times), so counts above one are in the window from
/// the start. One outcome per step.
pub fn run_steps(
    model: &Arc<Model>,
    prompt: &[TokenId],
    case: &Case,
    steps: usize,
    threads: i32,
) -> Result<Vec<Outcome>> {
    let n_vocab = model.n_vocab();
    let n_ctx = n_ctx(prompt) + steps as u32;
    let mut plain = Context::with_attention(model, n_ctx, Attention::Auto, threads)?;
    plain.decode(prompt)?;
    let case = &case.on(&plain.logits()?)?;
    let mut ctx = GraphContext::new(
        model,
        n_ctx,
        case.build(n_vocab)?,
        case.outputs_per_seq,
        threads,
    )?;
    let mut cpu_chain = case.build(n_vocab)?;
    let mut history = primed(&plain.logits()?);
    // Before the graph's decode: its chain runs when the row is computed, so the history it
    // counts is the one accepted by then.
    for &t in &history {
        ctx.accept(t)?;
        cpu_chain.accept(t)?;
    }
    let mut counts = decode_counted(case, &mut ctx, prompt)?;
    let mut out = Vec::with_capacity(steps);
    for i in 0..steps {
        let raw = plain.logits()?;
        let (o, token) = step(case, &mut ctx, counts, &raw, &mut cpu_chain, &history)?;
        out.push(o);
        if i + 1 == steps {
            break;
        }
        let t = token.context("a stepped chain must choose a token")?;
        cpu_chain.accept(t)?;
        history.push(t);
        counts = decode_counted(case, &mut ctx, &[t])?;
        plain.decode(&[t])?;
    }
    Ok(out)
}

/// The history both chains accept before a stepped run: the three top ids of `raw`, three,
/// two and one times.
pub fn primed(raw: &[f32]) -> Vec<TokenId> {
    let top = Pool::from_logits(raw);
    let ids: Vec<TokenId> = top.entries().iter().take(3).map(|e| e.id).collect();
    ids.iter()
        .zip([3, 2, 1])
        .flat_map(|(&id, n)| std::iter::repeat_n(id, n))
        .collect()
}

/// One comparison on the row the last decode left: the graph's output and CPU tail (which
/// accepts its choice into the graph's chain), `cpu_chain` over `raw` (not accepting), and the
/// oracle after `history`. Returns the outcome and the graph's choice.
fn step(
    case: &Case,
    ctx: &mut GraphContext,
    planted: PlantedCounts,
    raw: &[f32],
    cpu_chain: &mut Sampler,
    history: &[TokenId],
) -> Result<(Outcome, Option<TokenId>)> {
    let out = ctx.output()?;
    let places: Vec<Place> = ctx.places().into_iter().map(Place::from).collect();
    let returned: Vec<(TokenId, f32)> = match &out.logits {
        Some(l) => out
            .candidates
            .iter()
            .copied()
            .zip(l.iter().copied())
            .collect(),
        None => (raw.iter().enumerate())
            .map(|(i, &l)| (TokenId(i as i32), l))
            .collect(),
    };
    let graph_masked = returned
        .iter()
        .filter(|(_, l)| *l == f32::NEG_INFINITY)
        .count();
    let graph_nan = (out.logits.iter().flatten()).filter(|l| l.is_nan()).count();
    let tail_before = case.planted().map(|p| p.cpu_applies());
    // The subject hands no NaN logit to C: where the graph left one and chose nothing, the
    // CPU tail (if any) is not run, and the row judges what the graph returned.
    let (tail, token) = if graph_nan > 0 && out.sampled.is_none() {
        (None, None)
    } else {
        ctx.finish(&out)?
    };
    let planted_tail_applies = (case.planted().zip(tail_before)).map(|(p, b)| p.cpu_applies() - b);
    let graph = match &tail {
        Some(c) => Side::from_candidates(c),
        None => Side::from_pairs(returned.iter().copied(), token),
    };
    let graph = Side {
        selected: token,
        ..graph
    };

    let mut cands = Candidates::from_logits(raw);
    cpu_chain.apply(&mut cands)?;
    let cpu = Side::from_candidates(&cands);

    let stages = case.oracle_stages();
    let pool = Pool::from_logits(raw);
    let comp = compose(&stages, &pool, history);
    let groups = ties::decidable(&stages, &pool, history, &comp);
    let oracle = OracleSide {
        survivors: comp.pool.survivors(),
        selected: comp.selected,
        undecided: (!comp.edges.is_empty()).then(|| {
            (comp.edges.iter())
                .map(|(i, e)| format!("stage {}: {}", i + 1, e.0))
                .collect::<Vec<_>>()
                .join("; ")
        }),
        ties_decided: groups.is_some(),
    };
    // Where only a tie-break separates them, read the graph's result under its own.
    let tie_relabelled = groups
        .and_then(|g| {
            ties::relabelling(
                &g,
                ties::Answer {
                    survivors: &graph.survivors,
                    selected: graph.selected,
                },
                ties::Answer {
                    survivors: &oracle.survivors,
                    selected: oracle.selected,
                },
                case.draws(),
            )
        })
        .unwrap_or_default();
    let graph = graph.relabelled(&tie_relabelled);

    let max_ulps = (graph.logits.iter())
        .filter_map(|(id, &g)| cpu.logits.get(id).map(|&c| ulps(g, c)))
        .max()
        .unwrap_or(0);
    let oracle_logits: BTreeMap<TokenId, f32> = comp
        .pool
        .entries()
        .iter()
        .map(|e| (e.id, e.logit))
        .collect();
    let max_ulps_oracle = (graph.logits.iter())
        .filter_map(|(id, &g)| oracle_logits.get(id).map(|&o| ulps(g, o)))
        .max()
        .unwrap_or(0);
    let probs = out.probs.as_ref().map(|p| {
        let exact: BTreeMap<TokenId, f64> = comp
            .pool
            .entries()
            .iter()
            .map(|e| e.id)
            .zip(comp.pool.probabilities())
            .collect();
        let max_abs_difference = (out.candidates.iter().zip(p))
            .map(|(&id, &q)| {
                let id = ties::apply(&tie_relabelled, id);
                (q as f64 - exact.get(&id).copied().unwrap_or(0.0)).abs()
            })
            .fold(0.0, f64::max);
        Probs {
            count: p.len(),
            zero: p.iter().filter(|&&q| q == 0.0).count(),
            max_abs_difference,
            tolerance: 8.0 * (p.len() as f64 + 2.0) * f32::EPSILON as f64,
        }
    });
    let kept_without_min_keep = min_keep_shown(&stages, &pool);
    let dyn_temp = dyntemp::allowed(&stages, &pool, history, graph_masked)
        .map(|a| DynTemp::measure(a, &graph.logits, &cpu.logits, &oracle_logits));
    let outcome = Outcome {
        case: case.name.clone(),
        chain: case.describe(),
        draws: case.draws(),
        selects: case.selects(),
        ran_in_graph: places.iter().any(|p| p.in_graph)
            && (out.logits.is_some() || out.sampled.is_some() || out.probs.is_some()),
        places,
        planted_graph_builds: planted.graph_builds,
        planted_tail_applies,
        planted_inputs_set: planted.inputs_set,
        graph_returned: returned.len(),
        graph_masked,
        graph_nan,
        tie_relabelled,
        graph_only: difference(&graph.survivors, &oracle.survivors),
        oracle_only: difference(&oracle.survivors, &graph.survivors),
        graph,
        cpu,
        oracle,
        max_ulps,
        max_ulps_oracle,
        values_against_oracle: case.values_against_oracle,
        history: history.to_vec(),
        allowed_ulps: case.ulps,
        probs,
        kept_without_min_keep,
        dyn_temp,
    };
    Ok((outcome, token))
}

/// One chain's oracle check of temp_ext: llama.cpp's CPU chain against the oracle's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OracleCheck {
    pub case: String,
    /// The largest relative difference of a survivor's logit, and the one-path bound.
    pub measured: f64,
    pub allowed: f64,
}

impl OracleCheck {
    pub fn holds(&self) -> bool {
        dyntemp::read(self.measured, self.allowed) == Reading::Within
    }
}

/// `case`'s chain on the CPU over `raw` (after [`primed`]'s history, for a primed case),
/// against the oracle's composition, within the one-path bound of its dynamic temp_ext; `None`
/// for a chain without one. Needs no graph, so it runs on every build.
pub fn cpu_against_oracle(raw: &[f32], case: &Case, n_vocab: i32) -> Result<Option<OracleCheck>> {
    let case = &case.on(raw)?;
    let history = if case.primed { primed(raw) } else { Vec::new() };
    let mut chain = case.build(n_vocab)?;
    for &t in &history {
        chain.accept(t)?;
    }
    let mut cands = Candidates::from_logits(raw);
    chain.apply(&mut cands)?;
    let cpu = Side::from_candidates(&cands);
    let stages = case.oracle_stages();
    let pool = Pool::from_logits(raw);
    let comp = compose(&stages, &pool, &history);
    let oracle: BTreeMap<TokenId, f32> = (comp.pool.entries().iter())
        .map(|e| (e.id, e.logit))
        .collect();
    Ok(
        dyntemp::allowed(&stages, &pool, &history, 0).map(|a| OracleCheck {
            case: case.name.clone(),
            measured: dyntemp::relative(&cpu.logits, &oracle),
            allowed: a.cpu_oracle,
        }),
    )
}

/// For a single top_p or min_p stage with `min_keep > 1`: what it keeps with `min_keep = 1`.
fn min_keep_shown(stages: &[oracle::stage::Stage], pool: &Pool) -> Option<usize> {
    use oracle::stage::Stage;
    let one = match stages {
        [Stage::TopP { p, min_keep }] if *min_keep > 1 => Stage::TopP { p: *p, min_keep: 1 },
        [Stage::MinP { p, min_keep }] if *min_keep > 1 => Stage::MinP { p: *p, min_keep: 1 },
        _ => return None,
    };
    Some(compose(&[one], pool, &[]).pool.survivors().len())
}

#[cfg(test)]
mod tests {
    use super::ulps;

    #[test]
    fn ulps_count_across_zero_and_between_neighbours() {
        assert_eq!(ulps(1.0, 1.0), 0);
        assert_eq!(ulps(1.0, f32::from_bits(1.0f32.to_bits() + 1)), 1);
        assert_eq!(ulps(-1.0, f32::from_bits((-1.0f32).to_bits() + 2)), 2);
        assert_eq!(ulps(0.0, -0.0), 0);
        assert_eq!(ulps(f32::from_bits(1), -f32::from_bits(1)), 2);
    }
}
