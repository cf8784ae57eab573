//! Copies between samplers that are not the same type and configuration, each in a contained
//! child: llama.cpp's header says "src and dst must have the same type and configuration",
//! and `llama_sampler_copy` asserts the type (`GGML_ASSERT`, an abort), a chain's length, and
//! through the chain each member's type. The configuration is the caller's duty.
//!
//! Parent side: [`run`] starts this binary with the task [`TASK`] and a pair's name, and
//! reads how the child ended ([`CopyOutcome`]). Child side: the pair's source runs its
//! history, is copied unchecked onto a fresh destination, and both continue
//! (`repro_clone::stateful::check_across`); the child prints what the continuation showed.

use anyhow::{Context, Result};
use contain::{Ended, Task};
use repro_clone::planted::{Tally, TallyCopy};
use repro_clone::stateful::{check_across, penalties_over, SamplerRecipe, SEED, VOCAB};
use serde::Serialize;
use std::ffi::{CStr, OsString};
use std::time::Duration;
use subject::{ArrayView, CustomSampler, Sampler, SamplerSpec};

pub const TASK: Task = Task {
    name: "copy-pair",
    handler: child,
};

/// How long a copy and its continuation may take in the child (they take milliseconds).
const TIMEOUT: Duration = Duration::from_secs(60);

/// A source and a destination recipe, and the name the report gives the pair.
pub struct Pair {
    pub name: &'static str,
    pub src: SamplerRecipe,
    pub dst: SamplerRecipe,
}

fn pair(name: &'static str, src: SamplerRecipe, dst: SamplerRecipe) -> Pair {
    Pair { name, src, dst }
}

fn one(name: &'static str, spec: SamplerSpec) -> SamplerRecipe {
    SamplerRecipe::from_specs(name, vec![spec])
}

fn dist() -> SamplerSpec {
    SamplerSpec::Dist { seed: SEED }
}

fn penalties() -> SamplerSpec {
    penalties_over(oracle::window::WindowLen(8))
}

/// The pairs llama.cpp documents as refused: one verdict row `copy-unrefused-<name>` each.
pub fn refused_pairs() -> Vec<Pair> {
    let chain = |name, specs| SamplerRecipe::from_specs(name, specs);
    vec![
        pair(
            "across-types",
            one("penalties", penalties()),
            one("dist", dist()),
        ),
        pair(
            "across-chain-lengths",
            chain("chain(penalties,dist)", vec![penalties(), dist()]),
            chain(
                "chain(penalties,top_k,dist)",
                vec![
                    penalties(),
                    oracle::stage::Stage::TopK { k: 20 }.into(),
                    dist(),
                ],
            ),
        ),
        pair(
            "across-chain-members",
            chain("chain(penalties,dist)", vec![penalties(), dist()]),
            chain("chain(dist,penalties)", vec![dist(), penalties()]),
        ),
    ]
}

/// The pair of the same type and another configuration: not refused by the API, so it is a
/// note of what llama.cpp does, not a verdict row.
pub fn configuration_pair() -> Pair {
    use oracle::window::WindowLen;
    pair(
        "across-configurations",
        one("penalties(last_n=8)", penalties_over(WindowLen(8))),
        one("penalties(last_n=16)", penalties_over(WindowLen(16))),
    )
}

/// A sampler written in Rust of another type than the planted tally, which shares the
/// tally's llama.cpp iface: llama.cpp's type assertion cannot tell them apart.
#[derive(Debug, Clone)]
struct Passive;

impl CustomSampler for Passive {
    fn name(&self) -> &'static CStr {
        c"planted-passive"
    }

    /// Shares the planted tally's iface (one with a copy_state), so llama.cpp's type
    /// assertion sees one type.
    fn has_copy_state(&self) -> bool {
        true
    }

    fn apply(&mut self, _view: &mut ArrayView<'_>) {}

    fn clone_sampler(&self) -> Box<dyn CustomSampler> {
        Box::new(Passive)
    }
}

/// Name of the planted pair the detector must flag: a copy that goes through.
pub const PLANTED_UNREFUSED: &str = "planted-foreign-type";
/// Name of the planted pair the detector must pass: a copy refused by an abort.
pub const PLANTED_REFUSED: &str = "planted-other-size";

/// The planted controls: a copy that goes through between two different Rust types (the
/// tally's `copy_state` ignores a source it cannot read), and one the tally refuses by
/// aborting (a source tally of another size).
pub fn planted_pairs() -> [Pair; 2] {
    let tally = |name, n: usize| {
        SamplerRecipe::new(name, move || {
            Sampler::custom(Tally::with_copy(n, TallyCopy::Complete))
        })
    };
    [
        pair(
            PLANTED_UNREFUSED,
            SamplerRecipe::new("planted-passive", || Sampler::custom(Passive)),
            tally("planted-tally-complete-copy", VOCAB as usize),
        ),
        pair(
            PLANTED_REFUSED,
            tally("planted-tally-complete-copy", VOCAB as usize),
            tally("planted-tally-complete-copy(16 ids)", 16),
        ),
    ]
}

fn find(name: &str) -> Option<Pair> {
    refused_pairs()
        .into_iter()
        .chain([configuration_pair()])
        .chain(planted_pairs())
        .find(|p| p.name == name)
}

/// How a copy in the child ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", content = "detail", rename_all = "lowercase")]
pub enum CopyOutcome {
    /// The child aborted, with the abort's message (an assertion's, with the source path cut
    /// to its file name): the documented refusal.
    Refused(String),
    /// The copy went through; what the continuation of source and destination showed.
    Copied(String),
    /// The child ended otherwise: another signal, a timeout, or an error line.
    Other(String),
}

impl CopyOutcome {
    /// Whether the copy was not refused (it went through, or the child ended otherwise).
    pub fn unrefused(&self) -> bool {
        !matches!(self, CopyOutcome::Refused(_))
    }

    /// Refused: absent; copied: present. Any other end (a timeout, a child error, another
    /// signal) is no evidence either way, and no control goes through it: inconclusive.
    pub fn verdict(&self) -> report::Verdict {
        match self {
            CopyOutcome::Refused(_) => report::Verdict::Absent,
            CopyOutcome::Copied(_) => report::Verdict::Present,
            CopyOutcome::Other(_) => report::Verdict::Inconclusive,
        }
    }

    pub fn summary(&self) -> String {
        match self {
            CopyOutcome::Refused(why) => format!("refused: the copy aborts ({why})"),
            CopyOutcome::Copied(what) => format!("not refused: the copy returns; {what}"),
            CopyOutcome::Other(what) => format!("not refused as documented: {what}"),
        }
    }
}

/// What the child writes on stderr just before `llama_sampler_copy`, and just after it.
const COPYING: &str = "copy-pair: copying";
const COPIED: &str = "copy-pair: copied";

/// Runs the copy of pair `name` in a child. It reads as refused only when the child aborted
/// inside the copy call (after the line the child writes before it, with none after) and
/// its last words are a failed assertion (`GGML_ASSERT(...) failed`): an abort elsewhere, or
/// any other end, is not the documented refusal.
pub fn run(name: &str) -> Result<CopyOutcome> {
    let cmd = TASK.command(&[OsString::from(name)])?;
    let out = contain::run(cmd, TIMEOUT)?;
    let in_copy = out.stderr.contains(COPYING) && !out.stderr.contains(COPIED);
    let words = out.last_words();
    let assertion = words.contains("GGML_ASSERT(") && words.ends_with(") failed");
    Ok(match out.ended {
        Ended::Exited(0) => CopyOutcome::Copied(String::from_utf8_lossy(&out.stdout).into_owned()),
        ended if ended.aborted() && in_copy && assertion => CopyOutcome::Refused(words),
        Ended::Exited(_) => CopyOutcome::Other(format!("the child failed: {words}")),
        ended => CopyOutcome::Other(format!(
            "the child {} {} ({words})",
            ended.describe(),
            if in_copy {
                "inside the copy"
            } else {
                "outside the copy"
            }
        )),
    })
}

/// The child: `<pair>`; prints what the copy's continuation showed, or one line and exit 3.
fn child(args: &[OsString]) -> i32 {
    contain::reply(child_result(args))
}

fn child_result(args: &[OsString]) -> Result<String> {
    let [name] = args else {
        anyhow::bail!("the copy-pair task takes one pair name");
    };
    let name = name.to_str().context("pair name is not UTF-8")?;
    let p = find(name).with_context(|| format!("no copy pair named '{name}'"))?;
    let e = check_across(
        &p.src,
        &p.dst,
        || cmdline::say(COPYING),
        || cmdline::say(COPIED),
    )?;
    Ok(e.describe(
        &format!("copy onto {}", p.dst.name),
        &format!("the source {}", p.src.name),
    ))
}
