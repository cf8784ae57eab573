//! The oracle check and the chain fuzzer.
//!
//! The oracle check comes first: single stages on random arrays in random order with the
//! honest flag (`sorted = false`), where llama.cpp is expected to be right. Every tie-free
//! disagreement there would be an oracle bug, so the audit reports it before any verdict.
//!
//! The fuzzer then builds random chains of 2 to 4 deterministic stages, runs each through
//! the real chain API and compares the final survivor set with the oracle's composition.
//! Each unsound chain is shrunk (fewer stages, fewer logits, rounder numbers, shorter
//! history) while it stays unsound and tie-free, and the minimized cases are grouped by
//! shape, e.g. `sorter -> injector -> truncator`.
//!
//! Code map: [`generate`] (random stages and chains), [`shrink`] (minimizing an unsound
//! chain), [`gate`] (the oracle check), and here the fuzzing loop that ties them together.
//!
//! Containment: the audit runs the fuzzer in chunks of [`CHUNK`] chains, each in its own
//! child process ([`CHUNK_TASK`]), and merges their reports; a chunk whose child dies is
//! recorded with how it died and the rest go on. The chains are one seeded stream whatever
//! the chunking, so the merged report equals the one-process report.

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
use crate::stage::ChainStage;
use anyhow::{bail, Context, Result};
use contain::{Ended, Task};
use oracle::rng::Rng;
use oracle::TokenId;
use serde::{Serialize, Serializer};
use serde_json::Value;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
pub struct FuzzReport {
    pub seed: u64,
    pub tried: usize,
    pub sound: usize,
    pub unsound: usize,
    pub undecided: usize,
    /// Unsound chains per shape of their minimized form.
    pub by_shape: BTreeMap<String, usize>,
    /// One minimized case per stage signature (e.g. `top_k -> logit_bias -> top_p`), the
    /// first found; signatures in order of first appearance.
    pub minimized: Vec<ChainCase>,
    /// Unsound chains per stage signature of their minimized form.
    pub by_signature: BTreeMap<String, usize>,
    /// The same chains with `sorted_guard` before every flag-reading stage: how many were
    /// unsound, and how many undecided.
    pub guarded_unsound: usize,
    pub guarded_undecided: usize,
    /// Chunks whose child died (`chains 2000..4000: aborts: SIGABRT`); their chains are not
    /// counted in `tried`.
    pub crashed: Vec<String>,
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
        tried: 0,
        sound: 0,
        unsound: 0,
        undecided: 0,
        by_shape: BTreeMap::new(),
        minimized: Vec::new(),
        by_signature: BTreeMap::new(),
        guarded_unsound: 0,
        guarded_undecided: 0,
        crashed: Vec::new(),
    };
    for _ in start..end {
        let case = random_case(&mut rng);
        r.tried += 1;
        match chain::run(&guarded(&case))?.verdict {
            Verdict::Present => r.guarded_unsound += 1,
            // The chain comparison never returns inconclusive; count it with the undecided.
            Verdict::Undecided | Verdict::Inconclusive => r.guarded_undecided += 1,
            Verdict::Absent => {}
        }
        match chain::run(&case)?.verdict {
            Verdict::Absent => r.sound += 1,
            Verdict::Undecided | Verdict::Inconclusive => r.undecided += 1,
            Verdict::Present => {
                r.unsound += 1;
                let small = shrink(&case);
                *r.by_shape.entry(shape(&small)).or_insert(0) += 1;
                let sig = signature(&small);
                let seen = r.by_signature.contains_key(&sig);
                *r.by_signature.entry(sig).or_insert(0) += 1;
                if !seen {
                    r.minimized.push(small);
                }
            }
        }
    }
    Ok(r)
}

impl Serialize for FuzzReport {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Guarded {
            unsound: usize,
            undecided_knife_edges: usize,
        }
        #[derive(Serialize)]
        struct Minimized {
            shape: String,
            signature: String,
            unsound_chains: usize,
            command: String,
        }
        #[derive(Serialize)]
        struct Written<'a> {
            seed: u64,
            chains_tried: usize,
            sound: usize,
            unsound: usize,
            undecided_knife_edges: usize,
            unsound_by_shape: &'a BTreeMap<String, usize>,
            with_sorted_guard: Guarded,
            minimized: Vec<Minimized>,
            #[serde(skip_serializing_if = "<[_]>::is_empty")]
            crashed_chunks: &'a [String],
        }
        Written {
            seed: self.seed,
            chains_tried: self.tried,
            sound: self.sound,
            unsound: self.unsound,
            undecided_knife_edges: self.undecided,
            unsound_by_shape: &self.by_shape,
            with_sorted_guard: Guarded {
                unsound: self.guarded_unsound,
                undecided_knife_edges: self.guarded_undecided,
            },
            minimized: (self.minimized.iter())
                .map(|c| Minimized {
                    shape: shape(c),
                    signature: signature(c),
                    unsound_chains: self.by_signature[&signature(c)],
                    command: c.command(),
                })
                .collect(),
            crashed_chunks: &self.crashed,
        }
        .serialize(s)
    }
}

impl FuzzReport {
    pub fn to_text(&self) -> String {
        let mut out = format!(
            "chain fuzzer (seed {:#x}): {} chains of 2-4 stages, {} sound, {} unsound, {} undecided (knife edges)\n",
            self.seed, self.tried, self.sound, self.unsound, self.undecided
        );
        out.push_str(&format!(
            "  with sorted_guard before every flag-reading stage: {} unsound, {} undecided\n",
            self.guarded_unsound, self.guarded_undecided
        ));
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
        for c in &self.minimized {
            out.push_str(&format!(
                "  {:>6}  {:<32} {}\n",
                self.by_signature[&signature(c)],
                signature(c),
                c.command()
            ));
        }
        out
    }
}

/// Chains per contained chunk.
pub const CHUNK: usize = 2_000;

/// How long one chunk may take (a few seconds on this machine).
const CHUNK_TIMEOUT: Duration = Duration::from_secs(600);

/// The contained task that runs one chunk: `<seed> <start> <end>`; prints [`FuzzReport::chunk`].
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
        Ok(serde_json::to_string(&fuzz_range(seed, start as usize, end as usize)?.chunk())? + "\n")
    })())
}

/// [`fuzz`], chunk by chunk in contained children, merged.
pub fn fuzz_contained(seed: u64, chains: usize) -> Result<FuzzReport> {
    let mut total = fuzz_range(seed, 0, 0)?;
    let mut start = 0;
    while start < chains {
        let end = (start + CHUNK).min(chains);
        let args: Vec<OsString> = [seed as usize, start, end]
            .iter()
            .map(|n| OsString::from(n.to_string()))
            .collect();
        let out = contain::run(CHUNK_TASK.command(&args)?, CHUNK_TIMEOUT)?;
        match out.ended {
            Ended::Exited(0) => {
                let v: Value = serde_json::from_slice(&out.stdout)
                    .with_context(|| format!("reading fuzz chunk {start}..{end}"))?;
                total.merge(FuzzReport::from_chunk_json(&v)?);
            }
            Ended::Exited(_) => bail!(
                "fuzz chunk {start}..{end} failed: {}",
                out.last_stderr_line()
            ),
            died => total
                .crashed
                .push(format!("chains {start}..{end}: {}", died.describe())),
        }
        start = end;
    }
    Ok(total)
}

/// A chain case losslessly: logits as bit patterns.
#[derive(Serialize)]
struct CaseBits {
    logits: Vec<u32>,
    stages: Vec<String>,
    history: Vec<i32>,
}

fn case_bits(c: &ChainCase) -> CaseBits {
    CaseBits {
        logits: c.logits.iter().map(|x| x.to_bits()).collect(),
        stages: c.stages.iter().map(|s| s.to_string()).collect(),
        history: c.history.iter().map(|t| t.0).collect(),
    }
}

/// What a chunk's child hands back ([`FuzzReport::from_chunk_json`] reads it).
#[derive(Serialize)]
pub struct Chunk<'a> {
    seed: u64,
    tried: usize,
    sound: usize,
    unsound: usize,
    undecided: usize,
    by_shape: &'a BTreeMap<String, usize>,
    by_signature: &'a BTreeMap<String, usize>,
    minimized: Vec<CaseBits>,
    guarded_unsound: usize,
    guarded_undecided: usize,
}

fn case_from_json(v: &Value) -> Result<ChainCase> {
    let list = |k: &str| {
        v[k].as_array()
            .with_context(|| format!("a case without '{k}'"))
    };
    Ok(ChainCase {
        logits: list("logits")?
            .iter()
            .map(|x| {
                x.as_u64()
                    .map(|b| f32::from_bits(b as u32))
                    .context("a logit's bits")
            })
            .collect::<Result<_>>()?,
        stages: list("stages")?
            .iter()
            .map(|x| ChainStage::parse(x.as_str().context("a stage's text")?))
            .collect::<Result<_>>()?,
        history: list("history")?
            .iter()
            .map(|x| {
                x.as_i64()
                    .map(|i| TokenId(i as i32))
                    .context("a history id")
            })
            .collect::<Result<_>>()?,
    })
}

impl FuzzReport {
    /// Everything a chunk found, losslessly (logits as bit patterns), for [`fuzz_contained`].
    pub fn chunk(&self) -> Chunk<'_> {
        Chunk {
            seed: self.seed,
            tried: self.tried,
            sound: self.sound,
            unsound: self.unsound,
            undecided: self.undecided,
            by_shape: &self.by_shape,
            by_signature: &self.by_signature,
            minimized: self.minimized.iter().map(case_bits).collect(),
            guarded_unsound: self.guarded_unsound,
            guarded_undecided: self.guarded_undecided,
        }
    }

    pub fn from_chunk_json(v: &Value) -> Result<FuzzReport> {
        let n = |k: &str| -> Result<usize> {
            v[k].as_u64()
                .map(|x| x as usize)
                .with_context(|| format!("a chunk without '{k}'"))
        };
        let map = |k: &str| -> Result<BTreeMap<String, usize>> {
            v[k].as_object()
                .with_context(|| format!("a chunk without '{k}'"))?
                .iter()
                .map(|(s, c)| Ok((s.clone(), c.as_u64().context("a count")? as usize)))
                .collect()
        };
        Ok(FuzzReport {
            seed: v["seed"].as_u64().context("a chunk without 'seed'")?,
            tried: n("tried")?,
            sound: n("sound")?,
            unsound: n("unsound")?,
            undecided: n("undecided")?,
            by_shape: map("by_shape")?,
            minimized: v["minimized"]
                .as_array()
                .context("a chunk without 'minimized'")?
                .iter()
                .map(case_from_json)
                .collect::<Result<_>>()?,
            by_signature: map("by_signature")?,
            guarded_unsound: n("guarded_unsound")?,
            guarded_undecided: n("guarded_undecided")?,
            crashed: Vec::new(),
        })
    }

    /// Adds a later chunk: counts add up, and minimized cases keep the first per signature.
    pub fn merge(&mut self, later: FuzzReport) {
        self.tried += later.tried;
        self.sound += later.sound;
        self.unsound += later.unsound;
        self.undecided += later.undecided;
        self.guarded_unsound += later.guarded_unsound;
        self.guarded_undecided += later.guarded_undecided;
        for (k, c) in later.by_shape {
            *self.by_shape.entry(k).or_insert(0) += c;
        }
        for case in later.minimized {
            if !self.by_signature.contains_key(&signature(&case)) {
                self.minimized.push(case);
            }
        }
        for (k, c) in later.by_signature {
            *self.by_signature.entry(k).or_insert(0) += c;
        }
        self.crashed.extend(later.crashed);
    }
}
