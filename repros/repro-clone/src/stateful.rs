//! Clone equivalence for every built-in sampler that keeps state across steps: one verdict
//! row `clone-incomplete-<sampler>` per sampler and build.
//!
//! Each sampler runs `HISTORY` steps on pseudo-random logits, is cloned, and then the original
//! and the clone get identical inputs for `CONTINUE` more steps: the same logits and the same
//! accepted token (the original's choice where the sampler chooses, a scripted token where it
//! does not). A complete clone produces bit-identical output at every step (selected id, and
//! every candidate's id, logit and p), so any difference is `present`; no tolerance applies.
//!
//! For a clone that differs, two diagnostics say what it dropped:
//! - *draw only*: at the first differing step the candidate arrays are bit-identical and only
//!   the selected id differs, so the state that shapes the distribution was copied and the
//!   random draw was not (the RNG state);
//! - *like a fresh sampler*: over every continuation step the clone's output equals that of a
//!   sampler built afresh with the same parameters and fed the same tokens, so the clone kept
//!   none of the accumulated state.
//!
//! The accept-before-apply path on a clone (llama.cpp's adaptive-p reads a cache the clone
//! does not copy) is checked in a child process under valgrind memcheck, never run natively.
//!
//! Controls, run through the same comparison: a planted Rust sampler whose clone forgets its
//! state (must differ) and one whose clone copies it (must be equivalent); for the memcheck
//! probe, a planted sampler that reads past a heap buffer in `accept` (must be reported) and
//! the complete planted clone (must be clean).

use crate::planted::{ReadsPastEnd, Tally};
use anyhow::{bail, Context, Result};
use oracle::penalty::PenaltyParams;
use oracle::stage::Stage;
use oracle::window::WindowLen;
use oracle::TokenId;
use report::{Control, Report, Table, Verdict};
use serde::{Serialize, Serializer};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use subject::{BuildInfo, Candidates, DryParams, Sampler, SamplerSpec};

pub const VOCAB: i32 = 32;
pub const HISTORY: usize = 24;
pub const CONTINUE: usize = 24;
const SEED: u32 = 20_261_129;

/// The verdict family's name; each row is `clone-incomplete-<sampler>`.
pub const FAMILY: &str = "clone-incomplete";

/// A named recipe for a stateful sampler (or a chain of them).
pub struct Subject {
    pub name: &'static str,
    build: Box<dyn Fn() -> Result<Sampler>>,
}

impl Subject {
    fn from_specs(name: &'static str, stages: Vec<SamplerSpec>) -> Subject {
        Subject {
            name,
            build: Box::new(move || {
                if stages.len() == 1 {
                    return stages[0].build();
                }
                Sampler::chain(
                    stages
                        .iter()
                        .map(SamplerSpec::build)
                        .collect::<Result<_>>()?,
                )
            }),
        }
    }

    pub fn build(&self) -> Result<Sampler> {
        (self.build)().with_context(|| format!("building {}", self.name))
    }
}

fn penalties() -> SamplerSpec {
    let params = PenaltyParams {
        repeat: 1.3,
        freq: 0.25,
        present: 0.5,
    };
    SamplerSpec::penalties(VOCAB, WindowLen(8), params)
}

fn dry() -> SamplerSpec {
    SamplerSpec::Dry(DryParams {
        multiplier: 0.8,
        base: 1.75,
        allowed_length: 2,
        last_n: 16,
        n_ctx_train: 4096,
    })
}

fn mirostat_v2() -> SamplerSpec {
    SamplerSpec::MirostatV2 {
        seed: SEED,
        tau: 3.0,
        eta: 0.5,
    }
}

/// Every stateful sampler in the public API of both builds, and two chains of them.
pub fn subjects() -> Vec<Subject> {
    let one = |name, spec| Subject::from_specs(name, vec![spec]);
    vec![
        one("penalties", penalties()),
        one("dry", dry()),
        one(
            "mirostat",
            SamplerSpec::Mirostat {
                n_vocab: VOCAB,
                seed: SEED,
                tau: 3.0,
                eta: 0.5,
                m: VOCAB,
            },
        ),
        one("mirostat_v2", mirostat_v2()),
        one("dist", SamplerSpec::Dist { seed: SEED }),
        one(
            "xtc",
            SamplerSpec::from(Stage::Xtc {
                probability: 0.5,
                threshold: 0.05,
                min_keep: 1,
            })
            .with_seed(SEED),
        ),
        one(
            "adaptive_p",
            SamplerSpec::AdaptiveP {
                target: 0.3,
                decay: 0.9,
                seed: SEED,
            },
        ),
        Subject::from_specs(
            "chain(penalties,dry,top_k,temp,dist)",
            vec![
                penalties(),
                dry(),
                Stage::TopK { k: 20 }.into(),
                Stage::Temp { t: 0.8 }.into(),
                SamplerSpec::Dist { seed: SEED },
            ],
        ),
        Subject::from_specs(
            "chain(penalties,mirostat_v2)",
            vec![penalties(), mirostat_v2()],
        ),
    ]
}

/// The planted controls: a clone that forgets its state, one that keeps it.
pub fn planted() -> [Subject; 2] {
    [
        Subject {
            name: "planted-tally-forgetful-clone",
            build: Box::new(|| Sampler::custom(Tally::new(VOCAB as usize, false))),
        },
        Subject {
            name: "planted-tally-complete-clone",
            build: Box::new(|| Sampler::custom(Tally::new(VOCAB as usize, true))),
        },
    ]
}

/// A small deterministic generator (so inputs do not depend on any crate's RNG). It stays
/// apart from the workspace's `oracle::rng::Rng` on purpose: the committed clone-stateful
/// results and snapshots were made from its inputs, and SplitMix64 inputs change their text
/// (the planted control's detail, adaptive_p's draws).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) as u32
    }
}

/// The logits of step `t`: values in [-4, 4) on a 1/64 grid.
fn logits(t: usize) -> Vec<f32> {
    let mut g = Lcg(t as u64 + 1);
    (0..VOCAB)
        .map(|_| (g.next() % 512) as f32 / 64.0 - 4.0)
        .collect()
}

/// The token accepted at step `t` when the sampler does not choose: a small alphabet, so
/// repeats (which penalties and DRY react to) are frequent.
fn scripted(t: usize) -> TokenId {
    let mut g = Lcg(1000 + t as u64);
    TokenId((g.next() % 6) as i32)
}

/// One step: apply to step `t`'s logits; the token to accept is the selection, or the script.
fn step(s: &mut Sampler, t: usize) -> Result<(Candidates, TokenId)> {
    let mut c = Candidates::from_logits(&logits(t));
    s.apply(&mut c)?;
    let token = c.selected_id().unwrap_or_else(|| scripted(t));
    Ok((c, token))
}

/// The first way two outputs of the same step differ, in words.
fn difference(a: &Candidates, b: &Candidates) -> Option<String> {
    if a.selected_id() != b.selected_id() {
        let show = |c: &Candidates| {
            c.selected_id()
                .map_or("none".to_string(), |t| t.0.to_string())
        };
        return Some(format!(
            "original selected {}, clone selected {}",
            show(a),
            show(b)
        ));
    }
    if a.len() != b.len() {
        return Some(format!(
            "original kept {} candidates, clone kept {}",
            a.len(),
            b.len()
        ));
    }
    for (x, y) in a.entries.iter().zip(&b.entries) {
        if x.id != y.id || x.logit.to_bits() != y.logit.to_bits() || x.p.to_bits() != y.p.to_bits()
        {
            return Some(format!(
                "id {}: original logit {} p {}, clone id {} logit {} p {}",
                x.id.0, x.logit, x.p, y.id.0, y.logit, y.p
            ));
        }
    }
    None
}

/// Everything but `selected` is bit-identical.
fn same_distribution(a: &Candidates, b: &Candidates) -> bool {
    let mut x = a.clone();
    x.selected = b.selected;
    difference(&x, b).is_none()
}

/// How a clone compared with its original.
#[derive(Debug, Clone, PartialEq)]
pub enum Equivalence {
    Equivalent,
    Differs {
        /// First continuation step whose outputs differ.
        step: usize,
        detail: String,
        /// At that step only the selected id differs.
        draw_only: bool,
        /// Over every continuation step the clone behaves like a freshly built sampler.
        like_fresh: bool,
    },
}

impl Equivalence {
    pub fn differs(&self) -> bool {
        matches!(self, Equivalence::Differs { .. })
    }

    pub fn first_step(&self) -> Option<usize> {
        match self {
            Equivalence::Equivalent => None,
            Equivalence::Differs { step, .. } => Some(*step),
        }
    }

    /// What the comparison shows, in one line.
    pub fn summary(&self) -> String {
        match self {
            Equivalence::Equivalent => {
                format!("clone equals the original for all {CONTINUE} continuation steps")
            }
            Equivalence::Differs {
                step,
                detail,
                draw_only,
                like_fresh,
            } => {
                let mut s = format!("clone differs at continuation step {step} ({detail})");
                if *draw_only {
                    s += "; there every candidate's logit and p are bit-identical and only the draw differs, so the RNG state was not copied";
                }
                if *like_fresh {
                    s += &format!("; for all {CONTINUE} steps the clone behaves exactly like a freshly built sampler, so none of its state was copied");
                }
                s
            }
        }
    }
}

/// Runs the clone-then-continue check on one subject.
pub fn check(subject: &Subject) -> Result<Equivalence> {
    let mut original = subject.build()?;
    for t in 0..HISTORY {
        let (_, token) = step(&mut original, t)?;
        original.accept(token)?;
    }
    let mut clone = original.try_clone()?;
    let mut tokens = Vec::with_capacity(CONTINUE);
    let mut clone_out = Vec::with_capacity(CONTINUE);
    let mut first: Option<(usize, String, bool)> = None;
    for k in 0..CONTINUE {
        let t = HISTORY + k;
        let (a, token) = step(&mut original, t)?;
        let (b, _) = step(&mut clone, t)?;
        if first.is_none() {
            if let Some(detail) = difference(&a, &b) {
                first = Some((k, detail, same_distribution(&a, &b)));
            }
        }
        original.accept(token)?;
        clone.accept(token)?;
        tokens.push(token);
        clone_out.push(b);
    }
    let Some((step_k, detail, draw_only)) = first else {
        return Ok(Equivalence::Equivalent);
    };
    // The same continuation on a sampler that never saw the history.
    let mut fresh = subject.build()?;
    let mut like_fresh = true;
    for (k, token) in tokens.iter().enumerate() {
        let (f, _) = step(&mut fresh, HISTORY + k)?;
        like_fresh &= difference(&f, &clone_out[k]).is_none();
        fresh.accept(*token)?;
    }
    Ok(Equivalence::Differs {
        step: step_k,
        detail,
        draw_only,
        like_fresh,
    })
}

/// What valgrind memcheck saw when a clone accepted a token before any apply.
#[derive(Debug, Clone, PartialEq)]
pub enum Memcheck {
    /// No memcheck error, normal exit.
    Clean,
    /// The first memcheck error (`Invalid read of size 4 in llama_sampler_adaptive_p_accept`)
    /// and how the process ended.
    Error { what: String, ended: String },
    /// No memcheck error, but the probe did not exit cleanly (refused, or crashed otherwise).
    Failed { ended: String },
    /// Not run, and why.
    NotRun(String),
}

impl Memcheck {
    pub fn summary(&self) -> String {
        match self {
            Memcheck::Clean => "memcheck clean".to_string(),
            Memcheck::Error { what, ended } => format!("memcheck: {what}; {ended}"),
            Memcheck::Failed { ended } => format!("no memcheck error, but the probe {ended}"),
            Memcheck::NotRun(why) => format!("not checked ({why})"),
        }
    }
}

impl Serialize for Memcheck {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(tag = "memcheck")]
        enum Written<'a> {
            #[serde(rename = "clean")]
            Clean,
            #[serde(rename = "error")]
            Error {
                first_error: &'a str,
                process: &'a str,
            },
            #[serde(rename = "probe failed")]
            Failed { process: &'a str },
            #[serde(rename = "not run")]
            NotRun { why: &'a str },
        }
        match self {
            Memcheck::Clean => Written::Clean,
            Memcheck::Error { what, ended } => Written::Error {
                first_error: what,
                process: ended,
            },
            Memcheck::Failed { ended } => Written::Failed { process: ended },
            Memcheck::NotRun(why) => Written::NotRun { why },
        }
        .serialize(s)
    }
}

/// The environment variable the parent sets for the probe child; the probe refuses without it.
pub const PROBE_ENV: &str = "SAMPLER_AUDIT_MEMCHECK_PROBE";

/// The sampler the memcheck probe's child runs: one of [`subjects`] or [`planted`], or the
/// planted read past the end.
pub struct ProbeTarget(Subject);

/// Checks the child side of the memcheck probe (`repro-clone --memcheck-probe NAME`) before it
/// runs: it refuses unless started by [`memcheck`] under valgrind, and `name` must be a sampler
/// it knows.
pub fn probe_target(name: &str) -> Result<ProbeTarget> {
    let preload = std::env::var("LD_PRELOAD").unwrap_or_default();
    if std::env::var(PROBE_ENV).is_err() || !preload.contains("vgpreload") {
        bail!("--memcheck-probe runs only as a child of the memcheck probe, under valgrind");
    }
    if name == "planted-reads-past-end" {
        return Ok(ProbeTarget(Subject {
            name: "planted-reads-past-end",
            build: Box::new(|| Sampler::custom(ReadsPastEnd::new())),
        }));
    }
    subjects()
        .into_iter()
        .chain(planted())
        .find(|s| s.name == name)
        .map(ProbeTarget)
        .with_context(|| format!("no stateful sampler named '{name}'"))
}

/// The child side of the memcheck probe: history, one apply on the original, clone, then the
/// clone accepts the original's token without applying first.
pub fn probe_main(target: &ProbeTarget) -> Result<()> {
    let mut original = target.0.build()?;
    for t in 0..HISTORY {
        let (_, token) = step(&mut original, t)?;
        original.accept(token)?;
    }
    let (_, token) = step(&mut original, HISTORY)?;
    let mut clone = original.try_clone()?;
    clone.accept(token)?;
    Ok(())
}

/// Runs the probe for `name` in a child process under valgrind memcheck; `exe` is the
/// `repro-clone` binary (whose `--memcheck-probe` mode is the child).
pub fn memcheck(exe: &Path, name: &str) -> Memcheck {
    let out = Command::new("valgrind")
        .args(["--tool=memcheck", "--error-exitcode=99", "--quiet"])
        .arg(exe)
        .args(["--memcheck-probe", name])
        .env(PROBE_ENV, "1")
        .output();
    let out = match out {
        Ok(o) => o,
        Err(_) => return Memcheck::NotRun("valgrind not found; `make deps` installs it".into()),
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    memcheck_outcome(&stderr, out.status.code())
}

/// Reads valgrind's report: the first error and the frame it happened in.
fn memcheck_outcome(stderr: &str, code: Option<i32>) -> Memcheck {
    let body = |l: &str| l.split_once("== ").map(|(_, b)| b.trim().to_string());
    let lines: Vec<String> = stderr.lines().filter_map(body).collect();
    let first_error = lines.iter().position(|l| {
        l.starts_with("Invalid ")
            || l.starts_with("Use of uninitialised")
            || l.starts_with("Conditional jump")
            || l.contains("uninitialised byte")
    });
    let signal = lines
        .iter()
        .find(|l| l.starts_with("Process terminating with default action of signal"))
        .map(|l| {
            l.trim_start_matches("Process terminating with default action of ")
                .to_string()
        });
    let ended = match (&signal, code) {
        (Some(s), _) => format!("killed by {s}"),
        (None, Some(c)) => format!("exit {c}"),
        (None, None) => "killed by a signal".to_string(),
    };
    match first_error {
        Some(i) => {
            let frame = lines[i + 1..]
                .iter()
                .find(|l| l.starts_with("at ") || l.starts_with("by "))
                .and_then(|l| l.split_once(": ").map(|(_, f)| f.to_string()))
                .unwrap_or_else(|| "an unknown frame".to_string());
            Memcheck::Error {
                what: format!(
                    "{} in {}",
                    lines[i],
                    frame.split('(').next().unwrap_or(&frame).trim()
                ),
                ended,
            }
        }
        None if code == Some(0) => Memcheck::Clean,
        None => Memcheck::Failed { ended },
    }
}

/// One stateful sampler's row.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplerRow {
    pub sampler: &'static str,
    pub equivalence: Equivalence,
    pub accept_before_apply: Memcheck,
}

impl SamplerRow {
    pub fn verdict_name(&self) -> String {
        format!("{FAMILY}-{}", self.sampler)
    }

    pub fn evidence(&self) -> String {
        let mut e = format!(
            "{}; accept on the clone before any apply: {}",
            self.equivalence.summary(),
            self.accept_before_apply.summary()
        );
        if let Some(note) = source_note(self) {
            e += &format!(" [source: {note}]");
        }
        e
    }

    fn data(&self) -> RowData<'_> {
        let differs = match &self.equivalence {
            Equivalence::Equivalent => None,
            Equivalence::Differs {
                detail,
                draw_only,
                like_fresh,
                ..
            } => Some(Difference {
                detail,
                draw_only: *draw_only,
                like_fresh_sampler: *like_fresh,
            }),
        };
        RowData {
            sampler: self.sampler,
            first_differing_step: self.equivalence.first_step(),
            differs,
            accept_before_apply: &self.accept_before_apply,
        }
    }
}

/// A row's JSON after its verdict keys.
#[derive(Serialize)]
struct RowData<'a> {
    sampler: &'static str,
    first_differing_step: Option<usize>,
    #[serde(flatten)]
    differs: Option<Difference<'a>>,
    accept_before_apply: &'a Memcheck,
}

#[derive(Serialize)]
struct Difference<'a> {
    detail: &'a str,
    draw_only: bool,
    like_fresh_sampler: bool,
}

/// How the stateful rows were run.
#[derive(Serialize)]
struct Protocol {
    vocabulary: i32,
    history_steps: usize,
    continuation_steps: usize,
    seed: u32,
}

/// What llama.cpp's source says the clone leaves out, for the measured pattern it explains.
/// Each note is shown only when the run shows the pattern, so a fixed build shows none.
fn source_note(row: &SamplerRow) -> Option<&'static str> {
    let (draw_only, like_fresh) = match &row.equivalence {
        Equivalence::Differs {
            draw_only,
            like_fresh,
            ..
        } => (*draw_only, *like_fresh),
        Equivalence::Equivalent => return None,
    };
    let memcheck_error = matches!(row.accept_before_apply, Memcheck::Error { .. });
    match row.sampler {
        "adaptive_p" if draw_only && memcheck_error => Some(
            "llama_sampler_adaptive_p_clone builds a new sampler from the seed (a fresh RNG) and copies the moving average and pending_token_idx but not original_probs, the cache accept indexes with pending_token_idx",
        ),
        "mirostat" if like_fresh => Some(
            "llama_sampler_mirostat_clone in this release writes mu and the RNG into the original's context instead of the clone's, so the clone keeps its initial mu and RNG",
        ),
        "penalties" => Some(
            "the penalties clone copies the ring of recent tokens but not token_count (see clone-drops-token-count)",
        ),
        _ => None,
    }
}

/// The clone-incomplete family on the linked build.
pub struct Audit {
    pub build: BuildInfo,
    pub rows: Vec<SamplerRow>,
    /// The planted clones through the same comparison: (forgetful, complete).
    pub planted: (Equivalence, Equivalence),
    /// The planted memcheck controls: (reads past end, complete clone); `None` without valgrind.
    pub planted_memcheck: Option<(Memcheck, Memcheck)>,
}

/// Runs every row and control; `exe` is the `repro-clone` binary the memcheck probe starts.
pub fn run(exe: &Path) -> Result<Audit> {
    let [forgetful, complete] = planted();
    let planted_eq = (check(&forgetful)?, check(&complete)?);
    let have_valgrind = Command::new("valgrind").arg("--version").output().is_ok();
    let probe = |name: &str| {
        if have_valgrind {
            memcheck(exe, name)
        } else {
            Memcheck::NotRun("valgrind not found; `make deps` installs it".into())
        }
    };
    let planted_memcheck =
        have_valgrind.then(|| (probe("planted-reads-past-end"), probe(complete.name)));
    let rows = subjects()
        .iter()
        .map(|s| {
            Ok(SamplerRow {
                sampler: s.name,
                equivalence: check(s)?,
                accept_before_apply: probe(s.name),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Audit {
        build: BuildInfo::current(),
        rows,
        planted: planted_eq,
        planted_memcheck,
    })
}

impl Audit {
    pub fn controls(&self) -> Vec<Control> {
        let (forgetful, complete) = &self.planted;
        let mut c = vec![
            Control::positive(
                "planted clone that forgets its counts",
                forgetful.differs(),
                forgetful.summary(),
            ),
            Control::negative(
                "planted clone that copies its counts",
                !complete.differs(),
                complete.summary(),
            ),
        ];
        if let Some((past_end, clean)) = &self.planted_memcheck {
            c.push(Control::positive(
                "memcheck probe on a planted accept that reads past a heap buffer",
                matches!(past_end, Memcheck::Error { .. }),
                past_end.summary(),
            ));
            c.push(Control::negative(
                "memcheck probe on the planted complete clone",
                *clean == Memcheck::Clean,
                clean.summary(),
            ));
        }
        c
    }

    pub fn report(&self) -> Report {
        let present: Vec<&str> = self
            .rows
            .iter()
            .filter(|r| r.equivalence.differs())
            .map(|r| r.sampler)
            .collect();
        let evidence = format!(
            "{} stateful samplers cloned after {HISTORY} steps and continued {CONTINUE}: {} differ ({}); the rest are bit-identical at every step",
            self.rows.len(),
            present.len(),
            if present.is_empty() { "none".to_string() } else { present.join(", ") }
        );
        let mut r = Report::new(
            self.build.report_subject(crate::FINDING, FAMILY),
            Verdict::found(!present.is_empty()),
            evidence,
            self.controls(),
        );
        for row in &self.rows {
            let mut evidence = row.evidence();
            // A chain's members that differ on their own explain the chain's row.
            if let Some(members) = row
                .sampler
                .strip_prefix("chain(")
                .and_then(|m| m.strip_suffix(')'))
            {
                let own: Vec<&str> = members.split(',').filter(|m| present.contains(m)).collect();
                if row.equivalence.differs() && !own.is_empty() {
                    evidence += &format!(
                        " [the chain holds {}, whose own clone differs]",
                        own.join(", ")
                    );
                }
            }
            r.add_row(
                row.verdict_name(),
                Verdict::found(row.equivalence.differs()),
                evidence,
                row.data(),
            );
        }
        let protocol = Protocol {
            vocabulary: VOCAB,
            history_steps: HISTORY,
            continuation_steps: CONTINUE,
            seed: SEED,
        };
        r.with_body(BTreeMap::from([("protocol", protocol)]))
            .with_text(self.text())
    }

    fn text(&self) -> String {
        let out = format!(
            "clone-then-continue: {HISTORY} steps of history on pseudo-random logits over {VOCAB} ids, clone, then {CONTINUE} steps of identical input to both\n"
        );
        let mut table = Table::new().left("  ", 38).left(" ", 0);
        for r in &self.rows {
            let step = r.equivalence.first_step();
            table.row([
                r.sampler.to_string(),
                step.map_or("equivalent".to_string(), |s| format!("differs at step {s}")),
            ]);
        }
        out + &table.render()
    }

    /// Writes `clone-stateful.<build>.{json,txt}`.
    pub fn write(&self, dir: &Path) -> Result<()> {
        self.report().write(dir, "clone-stateful")?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_valgrinds_first_error_and_frame() {
        let stderr = "==1== Invalid read of size 4\n==1==    at 0x4A1B2C: llama_sampler_adaptive_p_accept (in /x/repro-clone)\n==1==    by 0x4A0000: llama_sampler_accept (in /x/repro-clone)\n==1== Process terminating with default action of signal 11 (SIGSEGV)\n";
        assert_eq!(
            memcheck_outcome(stderr, None),
            Memcheck::Error {
                what: "Invalid read of size 4 in llama_sampler_adaptive_p_accept".into(),
                ended: "killed by signal 11 (SIGSEGV)".into(),
            }
        );
        assert_eq!(memcheck_outcome("", Some(0)), Memcheck::Clean);
        // A probe that fails without a memcheck error is not a memcheck finding.
        assert!(matches!(
            memcheck_outcome("", Some(1)),
            Memcheck::Failed { .. }
        ));
    }
}
