//! The clone-incomplete family on the linked build: one row per stateful sampler, the planted
//! controls through the same comparison and probe, and the report.

use super::equivalence::{check, Equivalence};
use super::memcheck::{memcheck, Memcheck};
use super::samplers::{planted, subjects};
use super::{CONTINUE, FAMILY, HISTORY, SEED, VOCAB};
use anyhow::Result;
use report::{Control, Report, Table, Verdict};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use subject::BuildInfo;

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
        RowData {
            sampler: self.sampler,
            first_differing_step: self.equivalence.first_step(),
            equivalence: &self.equivalence,
            accept_before_apply: &self.accept_before_apply,
        }
    }
}

/// A row's JSON after its verdict keys.
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
            Memcheck::no_valgrind()
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
