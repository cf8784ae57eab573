//! One chain of built-in samplers, run twice: through llama.cpp's real chain API and through
//! the oracle's composition of the same stages on the true multiset.

use crate::planted::{PlantedBias, PlantedRule, PlantedTruncator};
use crate::stage::ChainStage;
use anyhow::{ensure, Context, Result};
use oracle::truncation::{compose, Pool};
use oracle::TokenId;
use report::{Control, Report};
use serde_json::{json, Value};
use subject::{BuildInfo, Candidates, Sampler};

pub use oracle::stage::LOGIT_LIMIT;

/// The published chain: `top_k(4) -> logit_bias(+6 @ 3) -> top_p(0.8)` on 4..-3.
pub fn published() -> ChainCase {
    ChainCase {
        logits: vec![4.0, 3.0, 2.0, 1.0, 0.0, -1.0, -2.0, -3.0],
        stages: ["top_k=4", "logit_bias=3:+6", "top_p=0.8"]
            .iter()
            .map(|s| ChainStage::parse(s).expect("the published stages parse"))
            .collect(),
        history: Vec::new(),
    }
}

/// A chain and the input it runs on. Ids are positions in `logits`.
#[derive(Debug, Clone, PartialEq)]
pub struct ChainCase {
    pub logits: Vec<f32>,
    pub stages: Vec<ChainStage>,
    /// Ids accepted into the chain before it runs (what `penalties` counts).
    pub history: Vec<TokenId>,
}

/// What llama.cpp left after one stage (from the per-stage replay).
#[derive(Debug, Clone, PartialEq)]
pub struct TraceStep {
    pub stage: String,
    /// Entries left in the array, `-inf` ones included.
    pub size: usize,
    pub sorted_flag: bool,
    /// Whether the array really is in descending logit order.
    pub really_sorted: bool,
}

/// llama.cpp's result.
#[derive(Debug, Clone, PartialEq)]
pub struct SubjectRun {
    /// Ids left with a logit above `-inf`, ascending.
    pub survivors: Vec<TokenId>,
    pub size: usize,
    pub sorted_flag: bool,
    pub selected: Option<TokenId>,
    pub trace: Vec<TraceStep>,
}

/// A chain's verdict: `present` (the sets differ on a tie-free input), `absent` (equal), or
/// `undecided` (they differ but the oracle's answer rests on a tie or a rounding margin).
pub use report::Verdict;

#[derive(Debug, Clone, PartialEq)]
pub struct ChainReport {
    pub subject: SubjectRun,
    pub oracle: Vec<TokenId>,
    pub oracle_selected: Option<TokenId>,
    /// Why the oracle's answer is not a verdict, stage by stage (empty for tie-free input).
    pub knife_edges: Vec<String>,
    pub verdict: Verdict,
}

impl ChainCase {
    /// Refuses what neither side can run: no logits, non-finite logits, ids out of range.
    pub fn validate(&self) -> Result<()> {
        ensure!(!self.logits.is_empty(), "--logits needs at least one value");
        ensure!(!self.stages.is_empty(), "give at least one --stage");
        for (i, l) in self.logits.iter().enumerate() {
            ensure!(l.is_finite(), "logit {i} is {l}; logits must be finite");
            ensure!(
                l.abs() <= LOGIT_LIMIT,
                "logit {i} is {l}; logits must lie within +-{LOGIT_LIMIT}"
            );
        }
        let n = self.logits.len();
        for s in &self.stages {
            s.check_ids(n)?;
        }
        let last = self.stages.len() - 1;
        if let Some(i) = self.stages.iter().position(ChainStage::draws) {
            ensure!(
                i == last,
                "stage {} ({}) draws the token, so it must be the last stage",
                i + 1,
                self.stages[i]
            );
        }
        for id in &self.history {
            ensure!(
                (id.0 as usize) < n,
                "history id {id} is out of range (--logits has {n} entries)"
            );
        }
        let counts = self.stages.iter().any(ChainStage::reads_history);
        ensure!(
            counts || self.history.is_empty(),
            "--history is only read by a penalties stage"
        );
        Ok(())
    }

    fn n_vocab(&self) -> i32 {
        self.logits.len() as i32
    }

    /// One llama.cpp chain of `stages` (planted stages as custom samplers), with the history
    /// accepted.
    pub fn build(&self, stages: &[ChainStage]) -> Result<Sampler> {
        let samplers = stages
            .iter()
            .map(|s| s.build(self.n_vocab()))
            .collect::<Result<Vec<_>>>()?;
        let mut chain = Sampler::chain(samplers)?;
        for &id in &self.history {
            chain.accept(id)?;
        }
        Ok(chain)
    }

    /// The command line that reruns this case.
    pub fn command(&self) -> String {
        let mut out = format!("--logits {}", join_numbers(&self.logits));
        for s in &self.stages {
            out.push_str(&format!(" --stage {s}"));
        }
        if !self.history.is_empty() {
            let ids: Vec<String> = self.history.iter().map(|i| i.to_string()).collect();
            out.push_str(&format!(" --history {}", ids.join(",")));
        }
        out
    }
}

pub fn join_numbers(xs: &[f32]) -> String {
    xs.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// Bit-for-bit equality of two arrays (NaN probabilities compare equal to themselves).
fn same_bits(a: &Candidates, b: &Candidates) -> bool {
    a.sorted == b.sorted
        && a.entries.len() == b.entries.len()
        && a.entries.iter().zip(&b.entries).all(|(x, y)| {
            x.id == y.id && x.logit.to_bits() == y.logit.to_bits() && x.p.to_bits() == y.p.to_bits()
        })
}

pub fn really_sorted(c: &Candidates) -> bool {
    c.entries.windows(2).all(|w| w[0].logit >= w[1].logit)
}

/// Ids left in the array with a logit above `-inf`, ascending: the survivor set, by the
/// oracle's one definition ([`oracle::survivors`]).
pub fn survivors(c: &Candidates) -> Vec<TokenId> {
    oracle::survivors(c.entries.iter().map(|e| (e.id, e.logit)))
}

/// Runs the case through one `llama_sampler_chain` (the verdict's input), then replays it
/// stage by stage with fresh samplers to record the flag after each stage.
pub fn run_subject(case: &ChainCase) -> Result<SubjectRun> {
    let mut chain = case.build(&case.stages)?;
    let mut cur = Candidates::from_logits(&case.logits);
    chain.apply(&mut cur).context("applying the chain")?;

    let mut trace = Vec::with_capacity(case.stages.len());
    let mut replay = Candidates::from_logits(&case.logits);
    for stage in &case.stages {
        let mut one = case.build(std::slice::from_ref(stage))?;
        one.apply(&mut replay)
            .with_context(|| format!("applying {stage} alone"))?;
        trace.push(TraceStep {
            stage: stage.to_string(),
            size: replay.len(),
            sorted_flag: replay.sorted,
            really_sorted: really_sorted(&replay),
        });
    }
    ensure!(
        same_bits(&replay, &cur),
        "the stage-by-stage replay of {} disagrees with the chain (a stage with hidden state?)",
        case.command()
    );
    Ok(SubjectRun {
        survivors: survivors(&cur),
        size: cur.len(),
        sorted_flag: cur.sorted,
        selected: cur.selected_id(),
        trace,
    })
}

/// The oracle's composition and the verdict against the subject.
pub fn judge(case: &ChainCase, subject: SubjectRun) -> ChainReport {
    let comp = compose(
        &case.stages,
        &Pool::from_logits(&case.logits),
        &case.history,
    );
    let oracle = comp.pool.survivors();
    let knife_edges: Vec<String> = comp
        .edges
        .iter()
        .map(|(i, e)| format!("stage {} ({}): {}", i + 1, case.stages[*i], e.0))
        .collect();
    let verdict = if subject.survivors == oracle {
        Verdict::Absent
    } else if knife_edges.is_empty() {
        Verdict::Present
    } else {
        Verdict::Undecided
    };
    ChainReport {
        subject,
        oracle,
        oracle_selected: comp.selected,
        knife_edges,
        verdict,
    }
}

pub fn run(case: &ChainCase) -> Result<ChainReport> {
    case.validate()?;
    let subject = run_subject(case)?;
    Ok(judge(case, subject))
}

fn ids_json(ids: &[TokenId]) -> Value {
    json!(ids.iter().map(|i| i.0).collect::<Vec<_>>())
}

/// The chain's data: the case, both sets, the flag and the per-stage trace.
pub fn to_json(case: &ChainCase, r: &ChainReport) -> Value {
    json!({
        "logits": case.logits,
        "stages": case.stages.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        "history": ids_json(&case.history),
        "subject": ids_json(&r.subject.survivors),
        "oracle": ids_json(&r.oracle),
        "sorted_flag_after": r.subject.sorted_flag,
        "subject_array_size": r.subject.size,
        "subject_selected": r.subject.selected.map(|i| i.0),
        "oracle_selected": r.oracle_selected.map(|i| i.0),
        "trace": r.subject.trace.iter().map(|t| json!({
            "stage": t.stage,
            "size": t.size,
            "sorted_flag": t.sorted_flag,
            "really_sorted": t.really_sorted,
        })).collect::<Vec<_>>(),
        "knife_edges": r.knife_edges,
        "chain_comparison": r.verdict.as_str(),
    })
}

pub fn ids_text(ids: &[TokenId]) -> String {
    let v: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
    format!("{{{}}}", v.join(","))
}

/// The chain and its trace as text.
pub fn to_text(case: &ChainCase, r: &ChainReport) -> String {
    let mut out = String::new();
    out.push_str(&format!("chain: {}\n", case.command()));
    out.push_str("  after stage                         size  sorted flag  really sorted\n");
    for t in &r.subject.trace {
        let stale = if t.sorted_flag && !t.really_sorted {
            "  <- stale"
        } else {
            ""
        };
        out.push_str(&format!(
            "  {:<34} {:>5}  {:<11}  {}{}\n",
            t.stage, t.size, t.sorted_flag, t.really_sorted, stale
        ));
    }
    out.push_str(&format!(
        "  subject keeps {}\n",
        ids_text(&r.subject.survivors)
    ));
    out.push_str(&format!("  oracle keeps  {}\n", ids_text(&r.oracle)));
    for e in &r.knife_edges {
        out.push_str(&format!("  knife edge: {e}\n"));
    }
    out.push_str(&format!(
        "  chain comparison (before controls): {}\n",
        r.verdict
    ));
    out
}

/// The published chain's shape built only from planted Rust stages: a top_k that sorts, a
/// logit_bias that leaves the flag alone, and a top_p that does or does not trust the flag.
/// No llama.cpp stage takes part, so the controls do not depend on the subject's behaviour.
pub fn planted_published(trusts_flag: bool) -> ChainCase {
    let mut case = published();
    case.stages = vec![
        ChainStage::PlantedTruncator(PlantedTruncator {
            rule: PlantedRule::TopK { k: 4 },
            trusts_flag: false,
        }),
        ChainStage::PlantedBias(PlantedBias {
            id: TokenId(3),
            bias: 6.0,
        }),
        ChainStage::PlantedTruncator(PlantedTruncator {
            rule: PlantedRule::TopP { p: 0.8 },
            trusts_flag,
        }),
    ];
    case
}

/// The chain comparison's controls: the planted chain ending in a top_p that trusts the flag
/// must be `present`; the same chain ending in one that sorts must be `absent`.
pub fn controls() -> Result<Vec<Control>> {
    let trusting = planted_published(true);
    let honest = planted_published(false);
    let (t, h) = (run(&trusting)?, run(&honest)?);
    let detail = |c: &ChainCase, r: &ChainReport| {
        format!(
            "{}: keeps {}, oracle {} ({})",
            c.command(),
            ids_text(&r.subject.survivors),
            ids_text(&r.oracle),
            r.verdict
        )
    };
    Ok(vec![
        Control::positive(
            "chain comparison on a planted chain whose top_p trusts the flag",
            t.verdict == Verdict::Present,
            detail(&trusting, &t),
        ),
        Control::negative(
            "chain comparison on a planted chain whose top_p always sorts",
            h.verdict == Verdict::Absent,
            detail(&honest, &h),
        ),
    ])
}

/// The verdict's name.
pub const NAME: &str = "stale-sorted-truncation";

/// One chain's report: its verdict under `controls` (the chain comparison's, and the oracle
/// gate on the chain's own stages: see `cli`).
pub fn report(
    case: &ChainCase,
    r: &ChainReport,
    build: &BuildInfo,
    controls: Vec<Control>,
) -> Result<Report> {
    let evidence = format!(
        "{} keeps {} (oracle {}, flag {})",
        case.command(),
        ids_text(&r.subject.survivors),
        ids_text(&r.oracle),
        r.subject.sorted_flag
    );
    Ok(Report::new(
        build.report_subject(crate::FINDING, NAME),
        r.verdict,
        evidence,
        controls,
    )
    .with_body(to_json(case, r))
    .with_text(to_text(case, r)))
}
