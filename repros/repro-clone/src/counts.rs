//! Things that keep a penalty window's counts: the real llama.cpp sampler, read through the
//! public API, and small planted Rust ledgers used only as controls for the detectors.

use anyhow::{bail, Context, Result};
use ledger::{PenaltyConfig, SamplerKind};
use oracle::penalty::CountProbe;
use oracle::window::WindowLen;
use oracle::TokenId;
use std::collections::{HashMap, VecDeque};
use subject::{Candidates, ProbeArray, Sampler};

/// Per-id counts over a fixed list of ids, as some sampler keeps them.
pub trait Counts: Sized {
    fn reset(&mut self) -> Result<()>;
    fn accept(&mut self, id: TokenId) -> Result<()>;
    /// Writes the count of `ids()[i]` to `out[i]`.
    fn read(&mut self, out: &mut [i64]) -> Result<()>;
    /// The sampler's own clone operation (the thing the clone audits test).
    fn fork(&self) -> Result<Self>;
}

/// A penalties stage (llama.cpp's own, or `ledger::ledger_penalties` through the same public
/// API, as `kind` says) configured as a count probe for `last_n` and read through `apply`.
pub fn probe_sampler(
    kind: SamplerKind,
    n_vocab: i32,
    last_n: WindowLen,
    cp: CountProbe,
) -> Result<Sampler> {
    kind.build(PenaltyConfig {
        n_vocab,
        last_n,
        params: cp.params(),
        mode: ledger::Mode::Default,
    })
}

pub struct PenaltiesCounts {
    sampler: Sampler,
    probe: ProbeArray,
    ids: Vec<TokenId>,
    cp: CountProbe,
}

impl PenaltiesCounts {
    /// A fresh sampler whose counts for `ids` are readable. The vocabulary given to llama.cpp
    /// is one past the largest id.
    pub fn new(
        ids: &[TokenId],
        last_n: WindowLen,
        cp: CountProbe,
        kind: SamplerKind,
    ) -> Result<PenaltiesCounts> {
        let n_vocab = ids.iter().map(|t| t.0).max().context("no ids to read")? + 1;
        let sampler = probe_sampler(kind, n_vocab, last_n, cp)?;
        Self::with_sampler(sampler, ids, cp)
    }

    fn with_sampler(sampler: Sampler, ids: &[TokenId], cp: CountProbe) -> Result<PenaltiesCounts> {
        let probe = ProbeArray::new(&Candidates::new(ids.iter().map(|&id| (id, cp.base_logit))))?;
        Ok(PenaltiesCounts {
            sampler,
            probe,
            ids: ids.to_vec(),
            cp,
        })
    }
}

impl Counts for PenaltiesCounts {
    fn reset(&mut self) -> Result<()> {
        self.sampler.reset();
        Ok(())
    }

    fn accept(&mut self, id: TokenId) -> Result<()> {
        self.sampler.accept(id)
    }

    fn read(&mut self, out: &mut [i64]) -> Result<()> {
        self.probe.run(&mut self.sampler)?;
        if self.probe.len() != self.ids.len() {
            bail!("penalties changed the number of candidates");
        }
        for (i, slot) in out.iter_mut().enumerate() {
            let (id, logit) = self.probe.entry(i);
            if id != self.ids[i].0 {
                bail!("penalties reordered the candidates");
            }
            *slot = self
                .cp
                .count_from(logit)
                .with_context(|| format!("reading the count of id {id}"))?;
        }
        Ok(())
    }

    fn fork(&self) -> Result<Self> {
        Self::with_sampler(self.sampler.try_clone()?, &self.ids, self.cp)
    }
}

/// A deliberate defect planted in a [`PlantedCounts`], so each detector can be shown to fire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Defect {
    /// None: the planted ledger must pass every check (negative control for the detectors).
    None,
    /// Evicts one accept too late: the window is `last_n + 1` long.
    OffByOneWindow,
    /// Clone copies the ring but not the counts (the published llama.cpp defect).
    CloneDropsCounts,
}

/// An incremental ledger written the way llama.cpp writes it (count up, then evict the oldest
/// and erase it at zero), with an optional planted defect.
#[derive(Debug, Clone)]
pub struct PlantedCounts {
    ids: Vec<TokenId>,
    last_n: usize,
    ring: VecDeque<TokenId>,
    counts: HashMap<TokenId, i64>,
    defect: Defect,
}

impl PlantedCounts {
    pub fn new(ids: &[TokenId], last_n: WindowLen, defect: Defect) -> PlantedCounts {
        PlantedCounts {
            ids: ids.to_vec(),
            last_n: last_n.0,
            ring: VecDeque::new(),
            counts: HashMap::new(),
            defect,
        }
    }
}

impl Counts for PlantedCounts {
    fn reset(&mut self) -> Result<()> {
        self.ring.clear();
        self.counts.clear();
        Ok(())
    }

    fn accept(&mut self, id: TokenId) -> Result<()> {
        if self.last_n == 0 {
            return Ok(());
        }
        let capacity = match self.defect {
            Defect::OffByOneWindow => self.last_n + 1,
            _ => self.last_n,
        };
        *self.counts.entry(id).or_insert(0) += 1;
        if self.ring.len() >= capacity {
            let old = self.ring.pop_front().expect("ring is full");
            let c = self.counts.entry(old).or_insert(0);
            *c -= 1;
            if *c == 0 {
                self.counts.remove(&old);
            }
        }
        self.ring.push_back(id);
        Ok(())
    }

    fn read(&mut self, out: &mut [i64]) -> Result<()> {
        for (slot, id) in out.iter_mut().zip(&self.ids) {
            *slot = self.counts.get(id).copied().unwrap_or(0);
        }
        Ok(())
    }

    fn fork(&self) -> Result<Self> {
        let mut copy = self.clone();
        if self.defect == Defect::CloneDropsCounts {
            copy.counts.clear();
        }
        Ok(copy)
    }
}
