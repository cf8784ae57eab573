//! The clone-incomplete family on the linked build: one row per stateful sampler, the planted
//! controls through the same comparison and probe, and the report.

use super::equivalence::{check, Duplicate, Equivalence};
use super::memcheck::{memcheck, Memcheck};
use super::samplers::{planted, subjects};
use super::{CONTINUE, FAMILY, HISTORY, SEED, VOCAB};
use anyhow::Result;
use report::{Control, ControlKind, Report, Table, Verdict};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use subject::offered;
use subject::{BuildInfo, NotOffered};

/// One stateful sampler's row.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplerRow {
    pub sampler: &'static str,
    /// The clone comparison, or what the build lacks to make the sampler.
    pub equivalence: Result<Equivalence, NotOffered>,
    pub accept_before_apply: Memcheck,
}

impl SamplerRow {
    pub fn verdict_name(&self) -> String {
        format!("{FAMILY}-{}", self.sampler)
    }

    /// Whether the sampler was measured and its clone differs.
    pub fn differs(&self) -> bool {
        self.equivalence.as_ref().is_ok_and(Equivalence::differs)
    }

    pub fn evidence(&self) -> String {
        let equivalence = match &self.equivalence {
            Ok(e) => e,
            Err(why) => return why.to_string(),
        };
        let mut e = format!(
            "{}; accept on the clone before any apply: {}",
            equivalence.summary(),
            self.accept_before_apply.summary()
        );
        if let Some(note) = source_note(self) {
            e += &format!(" [source: {note}]");
        }
        e
    }

    fn verdict(&self) -> Verdict {
        match &self.equivalence {
            Ok(e) => Verdict::found(e.differs()),
            Err(_) => Verdict::NotOffered,
        }
    }
}

/// A row's JSON after its verdict keys: what was measured, or what the build lacks.
#[derive(Serialize)]
#[serde(untagged)]
enum RowJson<'a> {
    Measured(RowData<'a>),
    NotOffered {
        sampler: &'static str,
        not_offered: String,
    },
}

#[derive(Serialize)]
struct RowData<'a> {
    sampler: &'static str,
    first_differing_step: Option<usize>,
    /// Nothing for an equivalent clone; what differs for one that does not.
    #[serde(flatten)]
    equivalence: &'a Equivalence,
    accept_before_apply: &'a Memcheck,
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
        Ok(Equivalence::Differs {
            draw_only,
            like_fresh,
            ..
        }) => (*draw_only, *like_fresh),
        Ok(Equivalence::Equivalent) | Err(_) => return None,
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
    /// The planted clones through the same comparison: (forgetful, complete); or why not,
    /// when the build cannot plug in a sampler written in Rust.
    pub planted: Result<(Equivalence, Equivalence), NotOffered>,
    /// The planted memcheck controls: (reads past end, complete clone); `None` without valgrind.
    pub planted_memcheck: Option<Result<(Memcheck, Memcheck), NotOffered>>,
}

const FORGETFUL: &str = "planted clone that forgets its counts";
const COMPLETE: &str = "planted clone that copies its counts";
const PAST_END: &str = "memcheck probe on a planted accept that reads past a heap buffer";
const CLEAN: &str = "memcheck probe on the planted complete clone";

/// Runs every row and control; `exe` is the `repro-clone` binary the memcheck probe starts.
pub fn run(exe: &Path) -> Result<Audit> {
    let [forgetful, complete] = planted();
    let planted_eq = match (
        offered(check(&forgetful, Duplicate::Clone))?,
        offered(check(&complete, Duplicate::Clone))?,
    ) {
        (Ok(f), Ok(c)) => Ok((f, c)),
        (Err(why), _) | (_, Err(why)) => Err(why),
    };
    let have_valgrind = Command::new("valgrind").arg("--version").output().is_ok();
    let probe = |name: &str| {
        if have_valgrind {
            memcheck(exe, name)
        } else {
            Memcheck::no_valgrind()
        }
    };
    // The sampler that reads past the end is built by the same call as the planted clones
    // (`Sampler::custom`), so where that call is not offered its probe is not run either.
    let planted_memcheck = have_valgrind.then(|| match &planted_eq {
        Ok(_) => Ok((probe("planted-reads-past-end"), probe(complete.name))),
        Err(why) => Err(why.clone()),
    });
    let rows = subjects()
        .iter()
        .map(|s| {
            Ok(match offered(check(s, Duplicate::Clone))? {
                Ok(equivalence) => SamplerRow {
                    sampler: s.name,
                    equivalence: Ok(equivalence),
                    accept_before_apply: probe(s.name),
                },
                // The probe's child could not build it either.
                Err(why) => SamplerRow {
                    sampler: s.name,
                    accept_before_apply: Memcheck::NotRun {
                        why: why.to_string(),
                    },
                    equivalence: Err(why),
                },
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
        use ControlKind::{Negative, Positive};
        let mut c = match &self.planted {
            Ok((forgetful, complete)) => vec![
                Control::positive(FORGETFUL, forgetful.differs(), forgetful.summary()),
                Control::negative(COMPLETE, !complete.differs(), complete.summary()),
            ],
            Err(why) => vec![
                Control::not_run(Positive, FORGETFUL, why),
                Control::not_run(Negative, COMPLETE, why),
            ],
        };
        match &self.planted_memcheck {
            Some(Ok((past_end, clean))) => {
                c.extend(super::memcheck::controls(PAST_END, past_end, CLEAN, clean));
            }
            Some(Err(why)) => {
                c.push(Control::not_run(Positive, PAST_END, why));
                c.push(Control::not_run(Negative, CLEAN, why));
            }
            None => {}
        }
        c
    }

    pub fn report(&self) -> Report {
        let present: Vec<&str> = self
            .rows
            .iter()
            .filter(|r| r.differs())
            .map(|r| r.sampler)
            .collect();
        let not_offered: Vec<&str> = (self.rows.iter())
            .filter(|r| r.equivalence.is_err())
            .map(|r| r.sampler)
            .collect();
        let mut evidence = format!(
            "{} stateful samplers cloned after {HISTORY} steps and continued {CONTINUE}: {} differ ({}); the rest are bit-identical at every step",
            self.rows.len() - not_offered.len(),
            present.len(),
            if present.is_empty() { "none".to_string() } else { present.join(", ") }
        );
        if !not_offered.is_empty() {
            evidence += &format!(
                "; {} not offered by this build ({})",
                not_offered.len(),
                not_offered.join(", ")
            );
        }
        let mut r = Report::new(
            self.build.report_subject(&crate::FINDING, FAMILY),
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
                if row.differs() && !own.is_empty() {
                    evidence += &format!(
                        " [the chain holds {}, whose own clone differs]",
                        own.join(", ")
                    );
                }
            }
            let data = match &row.equivalence {
                Ok(equivalence) => RowJson::Measured(RowData {
                    sampler: row.sampler,
                    first_differing_step: equivalence.first_step(),
                    equivalence,
                    accept_before_apply: &row.accept_before_apply,
                }),
                Err(why) => RowJson::NotOffered {
                    sampler: row.sampler,
                    not_offered: why.to_string(),
                },
            };
            r.add_row(row.verdict_name(), row.verdict(), evidence, data);
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
            let outcome = match &r.equivalence {
                Ok(e) => (e.first_step())
                    .map_or("equivalent".to_string(), |s| format!("differs at step {s}")),
                Err(why) => format!("not offered ({why})"),
            };
            table.row([r.sampler.to_string(), outcome]);
        }
        out + &table.render()
    }

    /// Writes `clone-stateful.<build>.{json,txt}`.
    pub fn write(&self, dir: &Path) -> Result<()> {
        self.report().write(dir, "clone-stateful")?;
        Ok(())
    }
}
