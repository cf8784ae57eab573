//! The oracle check ([`gate`]) and the chain fuzzer: random chains of 2 to 4 deterministic
//! stages ([`generate`]) through the real chain API, the final survivor set compared with the
//! oracle's composition. Each unsound chain is shrunk ([`shrink`]) while it stays unsound and
//! tie-free, and the minimized cases are grouped by shape (`sorter -> injector -> truncator`).
//!
//! Containment: the audit runs the fuzzer in chunks of [`CHUNK`] chains, each in its own
//! child process ([`CHUNK_TASK`]), and merges their reports; a chunk whose child dies is
//! recorded with how it died. The chains are one seeded stream whatever the chunking, so the
//! merged report equals the one-process report.

pub mod gate;
pub mod generate;
pub mod shrink;

pub use gate::{
    chain_gate, oracle_check, real_oracle, ulp_bound, ulps, GateMismatch, OracleCheck, OracleFn,
    StageTally, ORACLE_CHECK_SEED,
};
pub use generate::{guarded, random_case, random_stage, shape, signature};
pub use shrink::shrink;

use crate::chain::{self, ChainCase, Verdict};
use anyhow::{bail, Context, Result};
use contain::{Ended, Task};
use oracle::rng::Rng;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::time::Duration;
use subject::offered;

/// The fuzzer's report; its JSON is also how a chunk's child hands its report back.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FuzzReport {
    pub seed: u64,
    #[serde(rename = "chains_tried")]
    pub tried: usize,
    pub sound: usize,
    pub unsound: usize,
    #[serde(rename = "undecided_knife_edges")]
    pub undecided: usize,
    /// Unsound chains per shape of their minimized form.
    #[serde(rename = "unsound_by_shape")]
    pub by_shape: BTreeMap<String, usize>,
    /// The same chains with `sorted_guard` before every flag-reading stage.
    #[serde(rename = "with_sorted_guard")]
    pub guarded: GuardedCounts,
    /// One minimized case per stage signature (e.g. `top_k -> logit_bias -> top_p`), the
    /// first found; signatures in order of first appearance.
    pub minimized: Vec<Minimized>,
    /// Chunks whose child died (`chains 2000..4000: aborts: SIGABRT`); their chains are not
    /// counted in `tried`.
    #[serde(
        rename = "crashed_chunks",
        default,
        skip_serializing_if = "<[_]>::is_empty"
    )]
    pub crashed: Vec<String>,
    /// Chains with a stage the build does not offer, per reason (`top_n_sigma is not offered
    /// by this build's C API`): not run, so not counted in `tried`.
    #[serde(
        rename = "skipped_not_offered",
        default,
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub not_offered: BTreeMap<String, usize>,
}

/// How many guarded chains were unsound, and how many undecided.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GuardedCounts {
    pub unsound: usize,
    #[serde(rename = "undecided_knife_edges")]
    pub undecided: usize,
    /// Why no guarded chain ran, when the build cannot make the guard.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_run: Option<String>,
}

/// The first minimized case of one stage signature.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Minimized {
    pub shape: String,
    pub signature: String,
    /// Unsound chains that shrank to this signature.
    pub unsound_chains: usize,
    #[serde(rename = "command")]
    pub case: ChainCase,
}

pub const FUZZ_SEED: u64 = 0xF2;

pub fn fuzz(seed: u64, chains: usize) -> Result<FuzzReport> {
    fuzz_range(seed, 0, chains)
}

/// Chains `start..end` of the stream `seed` gives (the earlier ones are generated, not run).
pub fn fuzz_range(seed: u64, start: usize, end: usize) -> Result<FuzzReport> {
    let mut rng = Rng::new(seed);
    for _ in 0..start {
        random_case(&mut rng);
    }
    let mut r = FuzzReport {
        seed,
        ..FuzzReport::default()
    };
    for _ in start..end {
        let case = random_case(&mut rng);
        // A chain the build cannot make is skipped and counted apart, not kept out of the
        // stream: generating it anyway keeps chain i the same chain on every build, so two
        // builds' counts compare chain for chain and a skipped chain is seen, not hidden.
        let plain = match offered(chain::run(&case))? {
            Ok(run) => run,
            Err(why) => {
                *r.not_offered.entry(why.to_string()).or_insert(0) += 1;
                continue;
            }
        };
        r.tried += 1;
        // The chain comparison gives present, absent or undecided (a chain the build cannot
        // make is an error, split off by `offered`); anything else counts with the undecided.
        match offered(chain::run(&guarded(&case)))? {
            Ok(g) => match g.verdict {
                Verdict::Present => r.guarded.unsound += 1,
                Verdict::Absent => {}
                Verdict::Undecided | Verdict::Inconclusive | Verdict::NotOffered => {
                    r.guarded.undecided += 1
                }
            },
            Err(why) => {
                r.guarded.not_run.get_or_insert_with(|| why.to_string());
            }
        }
        match plain.verdict {
            Verdict::Absent => r.sound += 1,
            Verdict::Undecided | Verdict::Inconclusive | Verdict::NotOffered => r.undecided += 1,
            Verdict::Present => {
                r.unsound += 1;
                let small = shrink(&case);
                *r.by_shape.entry(shape(&small)).or_insert(0) += 1;
                r.add_minimized(Minimized {
                    shape: shape(&small),
                    signature: signature(&small),
                    unsound_chains: 1,
                    case: small,
                });
            }
        }
    }
    Ok(r)
}

impl FuzzReport {
    /// The chunks whose child died, as the evidence lines name them (empty when none did).
    pub fn not_run(&self) -> String {
        match self.crashed.is_empty() {
            true => String::new(),
            false => format!(" (not run: {})", self.crashed.join("; ")),
        }
    }

    /// The chains skipped because the build cannot make them, as the evidence lines name them
    /// (empty when none were).
    pub fn skipped(&self) -> String {
        let each = self.not_offered.iter();
        each.map(|(why, n)| format!(" ({n} chains skipped: {why})"))
            .collect()
    }

    /// Counts `m` under its signature, keeping the first case found for each.
    fn add_minimized(&mut self, m: Minimized) {
        match self
            .minimized
            .iter_mut()
            .find(|x| x.signature == m.signature)
        {
            Some(first) => first.unsound_chains += m.unsound_chains,
            None => self.minimized.push(m),
        }
    }

    /// Adds a later chunk: counts add up, and minimized cases keep the first per signature.
    pub fn merge(&mut self, later: FuzzReport) {
        self.tried += later.tried;
        self.sound += later.sound;
        self.unsound += later.unsound;
        self.undecided += later.undecided;
        self.guarded.unsound += later.guarded.unsound;
        self.guarded.undecided += later.guarded.undecided;
        for (k, c) in later.by_shape {
            *self.by_shape.entry(k).or_insert(0) += c;
        }
        for m in later.minimized {
            self.add_minimized(m);
        }
        self.crashed.extend(later.crashed);
        for (why, n) in later.not_offered {
            *self.not_offered.entry(why).or_insert(0) += n;
        }
        if self.guarded.not_run.is_none() {
            self.guarded.not_run = later.guarded.not_run;
        }
    }

    pub fn to_text(&self) -> String {
        let mut out = format!(
            "chain fuzzer (seed {:#x}): {} chains of 2-4 stages, {} sound, {} unsound, {} undecided (knife edges)\n",
            self.seed, self.tried, self.sound, self.unsound, self.undecided
        );
        for (why, n) in &self.not_offered {
            out.push_str(&format!(
                "  skipped: {n} chains the build cannot make ({why})\n"
            ));
        }
        out.push_str(&match &self.guarded.not_run {
            Some(why) => {
                format!("  with sorted_guard before every flag-reading stage: not run ({why})\n")
            }
            None => format!(
                "  with sorted_guard before every flag-reading stage: {} unsound, {} undecided\n",
                self.guarded.unsound, self.guarded.undecided
            ),
        });
        for c in &self.crashed {
            out.push_str(&format!(
                "  not run: {c} (contained; the other chunks went on)\n"
            ));
        }
        for (shape, n) in &self.by_shape {
            out.push_str(&format!("  {n:>6}  {shape}\n"));
        }
        out.push_str(&format!(
            "  minimized, one per stage signature ({} signatures; count = unsound chains that shrank to it):\n",
            self.minimized.len()
        ));
        for m in &self.minimized {
            out.push_str(&format!(
                "  {:>6}  {:<32} {}\n",
                m.unsound_chains,
                m.signature,
                m.case.command()
            ));
        }
        out
    }
}

/// Chains per contained chunk.
pub const CHUNK: usize = 2_000;

/// How long one chunk may take (a few seconds on this machine).
const CHUNK_TIMEOUT: Duration = Duration::from_secs(600);

/// The contained task that runs one chunk: `<seed> <start> <end>`; prints its report's JSON.
pub const CHUNK_TASK: Task = Task {
    name: "fuzz-chunk",
    handler: chunk_child,
};

fn chunk_child(args: &[OsString]) -> i32 {
    contain::reply((|| -> Result<String> {
        let n: Vec<u64> = args
            .iter()
            .map(|a| Ok(a.to_string_lossy().parse::<u64>()?))
            .collect::<Result<_>>()?;
        let [seed, start, end] = n[..] else {
            bail!("the fuzz chunk task takes a seed, a start and an end");
        };
        Ok(serde_json::to_string(&fuzz_range(seed, start as usize, end as usize)?)? + "\n")
    })())
}

/// [`fuzz`], chunk by chunk in contained children, merged.
pub fn fuzz_contained(seed: u64, chains: usize) -> Result<FuzzReport> {
    let mut total = fuzz_range(seed, 0, 0)?;
    let mut progress = cmdline::Progress::new("F2 fuzzer, chains", chains as u64);
    for start in (0..chains).step_by(CHUNK) {
        let end = (start + CHUNK).min(chains);
        let args = [seed as usize, start, end].map(|n| OsString::from(n.to_string()));
        let out = contain::run(CHUNK_TASK.command(&args)?, CHUNK_TIMEOUT)?;
        match out.ended {
            Ended::Exited(0) => total.merge(
                serde_json::from_slice(&out.stdout)
                    .with_context(|| format!("reading fuzz chunk {start}..{end}"))?,
            ),
            Ended::Exited(_) => bail!(
                "fuzz chunk {start}..{end} failed: {}",
                out.last_stderr_line()
            ),
            died => total
                .crashed
                .push(format!("chains {start}..{end}: {}", died.describe())),
        }
        progress.inc((end - start) as u64);
    }
    progress.finish();
    Ok(total)
}
