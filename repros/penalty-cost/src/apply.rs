//! Per apply: each sample times exactly one `llama_sampler_apply` of one stage on a freshly
//! refilled array. The array is refilled before every apply, outside the timed region (the
//! refill is timed apart). In every round both layouts and all three stages take turns, the
//! starting layout and stage moving on by one each round, so machine noise reaches them alike.
//!
//! Before any timing, `ledger-penalties` (default mode) must leave every candidate exactly as
//! llama.cpp's stage does, in both layouts: the timings compare the same work or the run stops.

use crate::layout::{Layout, Workload};
use crate::penalty::Penalty;
use crate::stats::median;
use anyhow::{bail, Result};
use std::time::Instant;
use subject::{IdOrder, LogitsArray, Sampler};

#[derive(Debug, Clone, PartialEq)]
pub struct ApplyRow {
    pub vocab: usize,
    pub layout: Layout,
    /// Median ms per apply, in the order of [`Penalty::ALL`].
    pub ms: [f64; 3],
    /// Median ms of refilling the array (not part of `ms`).
    pub refill_ms: f64,
}

impl ApplyRow {
    pub fn ms_of(&self, stage: Penalty) -> f64 {
        self.ms[stage as usize]
    }

    /// llama.cpp's median over `stage`'s: how many times faster `stage` is.
    pub fn ratio(&self, stage: Penalty) -> f64 {
        self.ms_of(Penalty::Builtin) / self.ms_of(stage)
    }
}

/// The `k`-th of `len` items to run in round `r`: each round starts one further on.
pub fn turn(r: usize, k: usize, len: usize) -> usize {
    (r + k) % len
}

/// One row per layout (in the order of [`Layout::ALL`]) for a vocabulary of `n` ids, from
/// `rounds` interleaved rounds.
pub fn per_apply(n: usize, rounds: usize) -> Result<Vec<ApplyRow>> {
    let work = Workload::new(n);
    let orders = Layout::ALL
        .iter()
        .map(|l| IdOrder::new(&l.order(n)))
        .collect::<Result<Vec<_>>>()?;
    let mut stages = Penalty::ALL
        .iter()
        .map(|s| s.build(n as i32))
        .collect::<Result<Vec<_>>>()?;
    for s in stages.iter_mut() {
        for &t in &work.history {
            s.accept(t)?;
        }
    }
    let mut arr = LogitsArray::new();
    for (layout, order) in Layout::ALL.iter().zip(&orders) {
        check_same_work(&mut arr, &work.row, order, &mut stages, *layout)?;
    }
    let (nl, ns) = (Layout::ALL.len(), Penalty::ALL.len());
    // Sized up front (a cloned Vec keeps no capacity), so no push reallocates mid-run.
    let mut samples: Vec<Vec<Vec<f64>>> = (0..nl)
        .map(|_| (0..ns).map(|_| Vec::with_capacity(rounds)).collect())
        .collect();
    let mut refill: Vec<Vec<f64>> = (0..nl).map(|_| Vec::with_capacity(rounds * ns)).collect();
    let mut progress = cmdline::Progress::new(
        format!("F5 per apply, {n} candidates, rounds"),
        rounds as u64,
    );
    for r in 0..rounds {
        progress.inc(1);
        for j in 0..nl {
            let l = turn(r, j, nl);
            for k in 0..ns {
                let i = turn(r, k, ns);
                let t0 = Instant::now();
                arr.load_in(&work.row, &orders[l])?;
                let t1 = Instant::now();
                arr.apply(&mut stages[i])?;
                let t2 = Instant::now();
                samples[l][i].push((t2 - t1).as_secs_f64() * 1e3);
                refill[l].push((t1 - t0).as_secs_f64() * 1e3);
            }
        }
    }
    progress.finish();
    Ok(Layout::ALL
        .iter()
        .enumerate()
        .map(|(l, &layout)| ApplyRow {
            vocab: n,
            layout,
            ms: [0, 1, 2].map(|i| median(&samples[l][i])),
            refill_ms: median(&refill[l]),
        })
        .collect())
}

/// Applies every stage once (untimed, which also warms them up) and requires llama.cpp's and
/// ledger's default mode to agree on every id and every logit bit.
fn check_same_work(
    arr: &mut LogitsArray,
    row: &[f32],
    order: &IdOrder,
    stages: &mut [Sampler],
    layout: Layout,
) -> Result<()> {
    let mut outputs = Vec::new();
    for s in stages.iter_mut() {
        arr.load_in(row, order)?;
        arr.apply(s)?;
        let out: Vec<_> = (0..arr.len())
            .map(|i| (arr.id(i), arr.logit(i).map(f32::to_bits)))
            .collect();
        outputs.push(out);
    }
    let (b, l) = (Penalty::Builtin as usize, Penalty::Ledger as usize);
    if outputs[b] != outputs[l] {
        let at = outputs[b]
            .iter()
            .zip(&outputs[l])
            .position(|(x, y)| x != y)
            .unwrap_or(outputs[b].len().min(outputs[l].len()));
        bail!(
            "ledger-penalties and llama.cpp's penalties leave different arrays ({} layout, {} \
             candidates, first at entry {at}): the timings would compare different work",
            layout.key(),
            row.len()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_item_takes_every_turn_once_per_cycle() {
        for len in [2, 3] {
            for r in 0..len {
                let mut seen: Vec<usize> = (0..len).map(|k| turn(r, k, len)).collect();
                seen.sort();
                assert_eq!(seen, (0..len).collect::<Vec<_>>());
            }
            // Over `len` rounds each item runs first exactly once.
            let mut firsts: Vec<usize> = (0..len).map(|r| turn(r, 0, len)).collect();
            firsts.sort();
            assert_eq!(firsts, (0..len).collect::<Vec<_>>());
        }
    }

    #[test]
    fn a_small_run_gives_one_row_per_layout() {
        let rows = per_apply(2048, 3).unwrap();
        let layouts: Vec<Layout> = rows.iter().map(|r| r.layout).collect();
        assert_eq!(layouts, Layout::ALL);
        for r in &rows {
            assert_eq!(r.vocab, 2048);
            assert!(r.ms.iter().all(|m| m.is_finite() && *m >= 0.0), "{r:?}");
            assert!(r.refill_ms.is_finite());
        }
    }
}
