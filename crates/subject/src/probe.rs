//! A candidate array validated once and applied many times.
//!
//! Exhaustive audits apply a sampler to the same ids tens of millions of times. Building and
//! re-validating a [`Candidates`] each time would dominate the run, so this keeps one checked
//! template and one reusable buffer. The buffer is refilled from the template before every
//! call, so each apply sees exactly the validated input.

use crate::candidates::{id_ordered, lend, lend_first, Candidate, Candidates};
use crate::compat as sys;
use crate::sampler::Sampler;
use anyhow::{bail, Context, Result};

pub struct ProbeArray {
    template: Vec<sys::llama_token_data>,
    buf: Vec<sys::llama_token_data>,
    max_id: i32,
    size: usize,
}

impl ProbeArray {
    /// Checks `candidates` once (the same rules as [`Sampler::apply`]).
    pub fn new(candidates: &Candidates) -> Result<ProbeArray> {
        candidates.validate(None)?;
        let template: Vec<sys::llama_token_data> =
            candidates.entries.iter().map(Candidate::raw).collect();
        let max_id = template.iter().map(|d| d.id).max().unwrap_or(0);
        Ok(ProbeArray {
            buf: template.clone(),
            size: template.len(),
            template,
            max_id,
        })
    }

    /// Applies `sampler` to a fresh copy of the template; the result is read with
    /// [`ProbeArray::logit`]. `sorted` always starts false and `selected` at -1.
    pub fn run(&mut self, sampler: &mut Sampler) -> Result<()> {
        if let Some(n) = sampler.n_vocab() {
            if self.max_id >= n {
                bail!(
                    "probe id {} is outside the sampler's vocabulary of {n}",
                    self.max_id
                );
            }
        }
        self.buf.copy_from_slice(&self.template);
        // SAFETY: `lend` hands C a header over `buf`, which lives for the whole call.
        let left = lend(&mut self.buf, -1, false, |arr| unsafe {
            sampler.apply_raw(arr)
        })
        .filter(|l| l.offset == 0)
        .context("the sampler replaced or grew the probe array")?;
        self.size = left.size;
        Ok(())
    }

    /// Entries left after the last run.
    pub fn len(&self) -> usize {
        self.size
    }

    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// The `i`-th entry after the last run: id and logit.
    pub fn entry(&self, i: usize) -> (i32, f32) {
        let d = &self.buf[..self.size][i];
        (d.id, d.logit)
    }
}

/// A reusable candidate array filled from a logits row (ids `0..n` in order), the way an
/// inference loop hands each step's logits to its sampler chain, or in another order of the
/// same ids ([`LogitsArray::load_in`]), the way a reordering stage leaves it. Filling
/// allocates nothing after the first step, so timing it separates the array's cost from the
/// samplers'.
#[derive(Default)]
pub struct LogitsArray {
    buf: Vec<sys::llama_token_data>,
    size: usize,
    selected: i64,
    sorted: bool,
}

impl LogitsArray {
    pub fn new() -> LogitsArray {
        LogitsArray::default()
    }

    /// Refills the array from `logits` (checked: non-empty, no NaN or +inf).
    pub fn load(&mut self, logits: &[f32]) -> Result<()> {
        let row = id_ordered(logits, None)?;
        self.refill(row);
        Ok(())
    }

    /// Refills the array from `logits` with its entries in `order`: entry `k` holds the id
    /// `order[k]` and that id's logit. `order` must cover the row exactly (same length).
    pub fn load_in(&mut self, logits: &[f32], order: &IdOrder) -> Result<()> {
        // The same checks as `load` (the id-ordered row itself is not used).
        let _checked = id_ordered(logits, None)?;
        if order.0.len() != logits.len() {
            bail!(
                "an order of {} ids for a logits row of {}",
                order.0.len(),
                logits.len()
            );
        }
        self.refill(order.0.iter().map(|&id| sys::llama_token_data {
            id,
            logit: logits[id as usize],
            p: 0.0,
        }));
        Ok(())
    }

    /// The array holds `entries`, nothing selected, `sorted` false.
    fn refill(&mut self, entries: impl Iterator<Item = sys::llama_token_data>) {
        self.buf.clear();
        self.buf.extend(entries);
        self.size = self.buf.len();
        self.selected = -1;
        self.sorted = false;
    }

    /// The id of the entry at `i` after the last load or apply.
    pub fn id(&self, i: usize) -> Option<oracle::TokenId> {
        self.buf[..self.size].get(i).map(|d| oracle::TokenId(d.id))
    }

    /// Applies `sampler` to the loaded array (which it may shorten or reorder in place).
    pub fn apply(&mut self, sampler: &mut Sampler) -> Result<()> {
        if self.size == 0 {
            bail!("nothing loaded");
        }
        if let Some(n) = sampler.n_vocab() {
            // A negative bound admits no id (`n as usize` would wrap to a huge one).
            if usize::try_from(n).map_or(true, |n| self.size > n) {
                bail!(
                    "{} candidates for a sampler built for a vocabulary of {n}",
                    self.size
                );
            }
        }
        let (size, selected, sorted) = (self.size, self.selected, self.sorted);
        // SAFETY: `lend_first` hands C a header over `buf`, which lives for the whole call.
        let left = lend_first(&mut self.buf, size, selected, sorted, |arr| unsafe {
            sampler.apply_raw(arr)
        })
        .context("the sampler left the candidate pointer outside its buffer")?;
        self.buf.copy_within(left.window(), 0);
        self.size = left.size;
        self.selected = left.selected;
        self.sorted = left.sorted;
        Ok(())
    }

    /// The selected entry's id, if a sampler selected one.
    pub fn selected_id(&self) -> Option<oracle::TokenId> {
        usize::try_from(self.selected)
            .ok()
            .filter(|&i| i < self.size)
            .map(|i| oracle::TokenId(self.buf[i].id))
    }

    /// The logit of the entry at `i` after the last apply.
    pub fn logit(&self, i: usize) -> Option<f32> {
        self.buf[..self.size].get(i).map(|d| d.logit)
    }

    pub fn len(&self) -> usize {
        self.size
    }

    pub fn is_empty(&self) -> bool {
        self.size == 0
    }
}

/// A permutation of the ids `0..n`, checked once so that [`LogitsArray::load_in`] can refill
/// in that order many times without checking again: every id appears once, none is negative
/// or at least `n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdOrder(Vec<i32>);

impl IdOrder {
    pub fn new(ids: &[oracle::TokenId]) -> Result<IdOrder> {
        if ids.is_empty() {
            bail!("the order names no ids");
        }
        let n = ids.len();
        let mut seen = vec![false; n];
        for id in ids {
            match usize::try_from(id.0).ok().filter(|&i| i < n) {
                Some(i) if !seen[i] => seen[i] = true,
                Some(_) => bail!("id {id} appears twice in the order"),
                None => bail!("id {id} is outside 0..{n}"),
            }
        }
        Ok(IdOrder(ids.iter().map(|id| id.0).collect()))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oracle::token_ids as ids;
    use oracle::TokenId;

    #[test]
    fn an_order_must_be_a_permutation() {
        assert!(IdOrder::new(&ids(&[2, 0, 1])).is_ok());
        assert!(IdOrder::new(&[]).is_err());
        assert!(IdOrder::new(&ids(&[0, 0, 1])).is_err());
        assert!(IdOrder::new(&ids(&[0, 1, 3])).is_err());
        assert!(IdOrder::new(&ids(&[0, -1, 1])).is_err());
    }

    #[test]
    fn load_in_places_each_id_with_its_own_logit() {
        let row = [0.5, -1.0, 2.0];
        let mut arr = LogitsArray::new();
        arr.load_in(&row, &IdOrder::new(&ids(&[2, 0, 1])).unwrap())
            .unwrap();
        let got: Vec<_> = (0..3).map(|i| (arr.id(i), arr.logit(i))).collect();
        assert_eq!(
            got,
            [
                (Some(TokenId(2)), Some(2.0)),
                (Some(TokenId(0)), Some(0.5)),
                (Some(TokenId(1)), Some(-1.0)),
            ]
        );
        // The wrong length and bad logits are refused.
        let two = IdOrder::new(&ids(&[1, 0])).unwrap();
        assert!(arr.load_in(&row, &two).is_err());
        assert!(arr.load_in(&[0.0, f32::NAN], &two).is_err());
        // A plain load is id order again.
        arr.load(&row).unwrap();
        assert_eq!(arr.id(0), Some(TokenId(0)));
    }
}
