//! One chain of built-in samplers, run twice: through llama.cpp's real chain API and through
//! the oracle's composition of the same stages on the true multiset.

use crate::planted::{PlantedBias, PlantedRule, PlantedTruncator};
use crate::stage::ChainStage;
use crate::text::join;
use anyhow::{anyhow, ensure, Context, Result};
use clap::Parser;
use oracle::stage::{self as st, ParseError, LOGIT_LIMIT};
use oracle::truncation::{compose, Pool};
use oracle::TokenId;
use report::{Control, ControlKind, Report};
use serde::{Serialize, Serializer};
use subject::offered;
use subject::{BuildInfo, Candidates, NotOffered, Sampler};

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

/// A chain and the input it runs on. Ids are positions in `logits`. It serializes as the
/// command line that reruns it (Rust prints every f32 so that it parses back to the same bits).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct ChainCase {
    pub logits: Vec<f32>,
    pub stages: Vec<ChainStage>,
    /// Ids accepted into the chain before it runs (what `penalties` counts).
    pub history: Vec<TokenId>,
}

impl From<ChainCase> for String {
    fn from(case: ChainCase) -> String {
        case.command()
    }
}

impl TryFrom<String> for ChainCase {
    type Error = anyhow::Error;
    fn try_from(line: String) -> Result<ChainCase> {
        parse_line::<CaseLine>(&line)?.flags.case()
    }
}

/// `line` read as `repro-sortpoison` arguments; a refusal is clap's first line.
pub fn parse_line<P: Parser>(line: &str) -> Result<P> {
    let argv = std::iter::once("repro-sortpoison").chain(line.split_whitespace());
    P::try_parse_from(argv).map_err(|e| anyhow!("{}", cmdline::first_line(&e.to_string())))
}

/// Most values `--logits` takes (the ids are their positions).
pub const MAX_LOGITS: usize = 4096;
/// Most `--stage` flags in one chain.
pub const MAX_STAGES: usize = 32;
/// Most ids `--history` takes.
pub const MAX_HISTORY: usize = 4096;

/// The flags that describe one chain, as [`ChainCase::command`] writes them: the command line
/// takes them in (`cli::Args`), and a case read back from JSON parses them.
#[derive(clap::Args, Debug)]
pub struct CaseFlags {
    /// Logits for ids 0, 1, 2, ..., comma-separated: 1 to 4096 finite values within +-1e4
    /// (default: 4,3,2,1,0,-1,-2,-3).
    #[arg(long, allow_hyphen_values = true)]
    pub logits: Option<String>,
    /// One chain stage, repeated in chain order (the help text is the stage table's); at most
    /// 32 stages (default: the published chain top_k=4, logit_bias=3:+6, top_p=0.8).
    #[arg(
        long = "stage",
        allow_hyphen_values = true,
        help = format!("{}; at most 32 stages (default: the published chain top_k=4, logit_bias=3:+6, top_p=0.8)", crate::stage::help())
    )]
    pub stages: Vec<String>,
    /// Token ids accepted into the chain before it runs (read by penalties), comma-separated:
    /// at most 4096, each an id of --logits.
    #[arg(long, allow_hyphen_values = true)]
    pub history: Option<String>,
}

/// A line of [`CaseFlags`] alone.
#[derive(clap::Parser)]
#[command(name = "repro-sortpoison")]
struct CaseLine {
    #[command(flatten)]
    flags: CaseFlags,
}

/// A comma-separated list of at most `max` items, each trimmed part read by `one` (the stage
/// syntax's own number and id readers, so a flag and a stage word their errors alike).
fn comma_list<T>(
    flag: &str,
    max: usize,
    text: &str,
    one: fn(&str, &str) -> Result<T, ParseError>,
) -> Result<Vec<T>> {
    let n = text.split(',').count();
    ensure!(n <= max, "{flag} has {n} values; at most {max}");
    text.split(',')
        .map(|part| one(flag, part.trim()).map_err(anyhow::Error::from))
        .collect()
}

impl CaseFlags {
    /// Whether any flag of a case was given.
    pub fn given(&self) -> bool {
        self.logits.is_some() || !self.stages.is_empty() || self.history.is_some()
    }

    /// The chain the flags describe: the published chain's logits and stages where they are
    /// not given, checked.
    pub fn case(&self) -> Result<ChainCase> {
        ensure!(
            self.stages.len() <= MAX_STAGES,
            "{} --stage flags; a chain has at most {MAX_STAGES} stages",
            self.stages.len()
        );
        let default = published();
        let stages = (self.stages.iter())
            .map(|s| ChainStage::parse(s).with_context(|| format!("--stage {s}")));
        let case = ChainCase {
            logits: match &self.logits {
                Some(t) => comma_list("--logits", MAX_LOGITS, t, st::number)?,
                None => default.logits,
            },
            stages: match self.stages.is_empty() {
                true => default.stages,
                false => stages.collect::<Result<_>>()?,
            },
            history: match &self.history {
                Some(t) => comma_list("--history", MAX_HISTORY, t, st::token_id)?,
                None => Vec::new(),
            },
        };
        case.validate()?;
        Ok(case)
    }
}

/// What llama.cpp left after one stage (from the per-stage replay).
#[derive(Debug, Clone, PartialEq, Serialize)]
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
        if let Some(i) = self.stages.iter().position(ChainStage::draws) {
            ensure!(
                i == self.stages.len() - 1,
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
        ensure!(
            self.history.is_empty() || self.stages.iter().any(ChainStage::reads_history),
            "--history is only read by a penalties stage"
        );
        Ok(())
    }

    /// One llama.cpp chain of `stages` (planted stages as custom samplers), with the history
    /// accepted.
    pub fn build(&self, stages: &[ChainStage]) -> Result<Sampler> {
        let n_vocab = self.logits.len() as i32;
        let samplers = stages.iter().map(|s| s.build(n_vocab));
        let mut chain = Sampler::chain(samplers.collect::<Result<_>>()?)?;
        for &id in &self.history {
            chain.accept(id)?;
        }
        Ok(chain)
    }

    /// The command line that reruns this case.
    pub fn command(&self) -> String {
        let mut out = format!("--logits {}", join(&self.logits, ","));
        for s in &self.stages {
            out.push_str(&format!(" --stage {s}"));
        }
        if !self.history.is_empty() {
            out.push_str(&format!(" --history {}", join(&self.history, ",")));
        }
        out
    }
}

/// Ids as JSON numbers.
pub fn ids<S: Serializer>(ids: &[TokenId], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(ids.iter().map(|i| i.0))
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

/// The array after each stage, each stage run alone by a fresh sampler on what the one before
/// left.
pub fn replay(case: &ChainCase) -> Result<Vec<Candidates>> {
    let mut cur = Candidates::from_logits(&case.logits);
    let mut out = Vec::with_capacity(case.stages.len());
    for stage in &case.stages {
        let mut one = case.build(std::slice::from_ref(stage))?;
        one.apply(&mut cur)
            .with_context(|| format!("applying {stage} alone"))?;
        out.push(cur.clone());
    }
    Ok(out)
}

/// Runs the case through one `llama_sampler_chain` (the verdict's input), then replays it
/// stage by stage with fresh samplers to record the flag after each stage.
pub fn run_subject(case: &ChainCase) -> Result<SubjectRun> {
    let mut chain = case.build(&case.stages)?;
    let mut cur = Candidates::from_logits(&case.logits);
    chain.apply(&mut cur).context("applying the chain")?;
    let after = replay(case)?;
    let trace = (case.stages.iter().zip(&after))
        .map(|(stage, c)| TraceStep {
            stage: stage.to_string(),
            size: c.len(),
            sorted_flag: c.sorted,
            really_sorted: really_sorted(c),
        })
        .collect();
    let last = after.last().context("a chain has at least one stage")?;
    ensure!(
        same_bits(last, &cur),
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
    let knife_edges: Vec<String> = (comp.edges.iter())
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

/// The chain's data: the case, both sets, the flag and the per-stage trace.
#[derive(Serialize)]
pub struct ChainJson<'a> {
    logits: &'a [f32],
    stages: &'a [ChainStage],
    #[serde(serialize_with = "ids")]
    history: &'a [TokenId],
    #[serde(serialize_with = "ids")]
    subject: &'a [TokenId],
    #[serde(serialize_with = "ids")]
    oracle: &'a [TokenId],
    sorted_flag_after: bool,
    subject_array_size: usize,
    subject_selected: Option<i32>,
    oracle_selected: Option<i32>,
    trace: &'a [TraceStep],
    knife_edges: &'a [String],
    chain_comparison: Verdict,
}

pub fn to_json<'a>(case: &'a ChainCase, r: &'a ChainReport) -> ChainJson<'a> {
    ChainJson {
        logits: &case.logits,
        stages: &case.stages,
        history: &case.history,
        subject: &r.subject.survivors,
        oracle: &r.oracle,
        sorted_flag_after: r.subject.sorted_flag,
        subject_array_size: r.subject.size,
        subject_selected: r.subject.selected.map(|i| i.0),
        oracle_selected: r.oracle_selected.map(|i| i.0),
        trace: &r.subject.trace,
        knife_edges: &r.knife_edges,
        chain_comparison: r.verdict,
    }
}

pub fn ids_text(ids: &[TokenId]) -> String {
    format!("{{{}}}", join(ids, ","))
}

/// The chain and its trace as text.
pub fn to_text(case: &ChainCase, r: &ChainReport) -> String {
    let mut out = format!("chain: {}\n", case.command());
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
    let truncator =
        |rule, trusts_flag| ChainStage::PlantedTruncator(PlantedTruncator { rule, trusts_flag });
    ChainCase {
        stages: vec![
            truncator(PlantedRule::TopK { k: 4 }, false),
            ChainStage::PlantedBias(PlantedBias {
                id: TokenId(3),
                bias: 6.0,
            }),
            truncator(PlantedRule::TopP { p: 0.8 }, trusts_flag),
        ],
        ..published()
    }
}

/// The chain comparison's controls: the planted chain ending in a top_p that trusts the flag
/// must be `present`; the same chain ending in one that sorts must be `absent`.
pub fn controls() -> Result<Vec<Control>> {
    let control = |kind, name: &str, trusts_flag, want| -> Result<Control> {
        let case = planted_published(trusts_flag);
        Ok(match offered(run(&case))? {
            Ok(r) => Control::new(
                kind,
                name,
                r.verdict == want,
                format!(
                    "{}: keeps {}, oracle {} ({})",
                    case.command(),
                    ids_text(&r.subject.survivors),
                    ids_text(&r.oracle),
                    r.verdict
                ),
            ),
            Err(why) => Control::not_run(kind, name, why),
        })
    };
    Ok(vec![
        control(
            ControlKind::Positive,
            "chain comparison on a planted chain whose top_p trusts the flag",
            true,
            Verdict::Present,
        )?,
        control(
            ControlKind::Negative,
            "chain comparison on a planted chain whose top_p always sorts",
            false,
            Verdict::Absent,
        )?,
    ])
}

/// The verdict's name.
pub const NAME: &str = "stale-sorted-truncation";

/// A report of F2 on `build`: verdict `name`, `measured` judged under `controls`.
pub fn new_report(
    build: &BuildInfo,
    name: &str,
    measured: Verdict,
    evidence: String,
    controls: Vec<Control>,
) -> Report {
    Report::new(
        build.report_subject(&crate::FINDING, name),
        measured,
        evidence,
        controls,
    )
}

/// One chain's report: its verdict under `controls` (the chain comparison's, and the oracle
/// gate on the chain's own stages: see `cli`).
pub fn report(
    case: &ChainCase,
    r: &ChainReport,
    build: &BuildInfo,
    controls: Vec<Control>,
) -> Report {
    let evidence = format!(
        "{} keeps {} (oracle {}, flag {})",
        case.command(),
        ids_text(&r.subject.survivors),
        ids_text(&r.oracle),
        r.subject.sorted_flag
    );
    new_report(build, NAME, r.verdict, evidence, controls)
        .with_body(to_json(case, r))
        .with_text(to_text(case, r))
}

/// The report of a chain the build cannot make: `not offered`, naming what the build lacks,
/// under the controls this build could run.
pub fn not_offered_report(
    case: &ChainCase,
    why: &NotOffered,
    build: &BuildInfo,
    controls: Vec<Control>,
) -> Report {
    let evidence = format!("{} not run: {why}", case.command());
    new_report(build, NAME, Verdict::NotOffered, evidence, controls)
        .with_text(format!("chain: {}\n  not run: {why}\n", case.command()))
}
