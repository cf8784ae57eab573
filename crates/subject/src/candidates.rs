//! The candidate array a sampler works on, with every field of `llama_token_data_array`
//! kept in view.

use crate::compat::{llama_token_data, llama_token_data_array};
use anyhow::{bail, Context, Result};
use oracle::TokenId;
use std::collections::HashSet;

/// One entry of the array as the caller sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    pub id: TokenId,
    pub logit: f32,
    pub p: f32,
}

/// An owned `llama_token_data_array`.
///
/// `entries` is the array's `data[0..size]`: a truncating sampler shortens it. `sorted` and
/// `selected` are exactly what the last sampler left, including a stale `sorted == true`;
/// nothing here recomputes or repairs them, because that flag is part of what is audited.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidates {
    pub entries: Vec<Candidate>,
    pub sorted: bool,
    /// Index into `entries` chosen by a selecting sampler, or -1.
    pub selected: i64,
}

impl Candidates {
    /// Ids and logits in the given order, `sorted = false`, nothing selected.
    pub fn new(items: impl IntoIterator<Item = (TokenId, f32)>) -> Candidates {
        Candidates {
            entries: items
                .into_iter()
                .map(|(id, logit)| Candidate { id, logit, p: 0.0 })
                .collect(),
            sorted: false,
            selected: -1,
        }
    }

    /// Ids, logits and probabilities in the given order, `sorted = false`, nothing selected.
    pub fn with_probs(items: impl IntoIterator<Item = (TokenId, f32, f32)>) -> Candidates {
        Candidates {
            entries: items
                .into_iter()
                .map(|(id, logit, p)| Candidate { id, logit, p })
                .collect(),
            sorted: false,
            selected: -1,
        }
    }

    /// Ids `0..logits.len()` in id order (the layout llama.cpp builds from a logits row).
    pub fn from_logits(logits: &[f32]) -> Candidates {
        Candidates::new(
            logits
                .iter()
                .enumerate()
                .map(|(i, &l)| (TokenId(i as i32), l)),
        )
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The logit of `id`, if it is still in the array.
    pub fn logit_of(&self, id: TokenId) -> Option<f32> {
        self.entries.iter().find(|c| c.id == id).map(|c| c.logit)
    }

    /// The ids still in the array, ascending.
    pub fn ids_ascending(&self) -> Vec<TokenId> {
        let mut ids: Vec<TokenId> = self.entries.iter().map(|c| c.id).collect();
        ids.sort();
        ids
    }

    /// The selected entry's id, if a sampler selected one.
    pub fn selected_id(&self) -> Option<TokenId> {
        usize::try_from(self.selected)
            .ok()
            .and_then(|i| self.entries.get(i))
            .map(|c| c.id)
    }

    /// Rejects arrays that llama.cpp would abort on or compute garbage from: empty arrays
    /// (softmax asserts `size > 0`), NaN or +inf logits, negative or repeated ids, ids at or
    /// beyond the sampler's vocabulary, and a `selected` index outside the array.
    pub(crate) fn validate(&self, n_vocab: Option<i32>) -> Result<()> {
        if self.entries.is_empty() {
            bail!("the candidate array is empty (llama.cpp asserts size > 0)");
        }
        let mut seen = HashSet::with_capacity(self.entries.len());
        for c in &self.entries {
            if c.logit.is_nan() || c.logit == f32::INFINITY {
                bail!(
                    "candidate {} has logit {}; logits must be finite or -inf",
                    c.id,
                    c.logit
                );
            }
            if c.id.0 < 0 {
                bail!("candidate id {} is negative", c.id);
            }
            if let Some(n) = n_vocab {
                if c.id.0 >= n {
                    bail!(
                        "candidate id {} is outside the sampler's vocabulary of {n}",
                        c.id
                    );
                }
            }
            if !seen.insert(c.id) {
                bail!("candidate id {} appears twice", c.id);
            }
        }
        if self.selected < -1 || self.selected >= self.entries.len() as i64 {
            bail!("selected index {} is outside the array", self.selected);
        }
        Ok(())
    }

    /// Lends the entries to C through `apply` and copies back what C left in the header
    /// (see [`lend`]).
    pub(crate) fn with_raw(
        &mut self,
        apply: impl FnOnce(*mut llama_token_data_array),
    ) -> Result<()> {
        let mut data: Vec<llama_token_data> = self.entries.iter().map(Candidate::raw).collect();
        let left = lend(&mut data, self.selected, self.sorted, apply)
            .context("the sampler left the candidate pointer outside its buffer")?;
        self.entries = data[left.window()]
            .iter()
            .map(|d| Candidate {
                id: TokenId(d.id),
                logit: d.logit,
                p: d.p,
            })
            .collect();
        self.sorted = left.sorted;
        self.selected = left.selected;
        Ok(())
    }
}

impl Candidate {
    pub(crate) fn raw(&self) -> llama_token_data {
        llama_token_data {
            id: self.id.0,
            logit: self.logit,
            p: self.p,
        }
    }
}

/// The header C left after an apply: its window into the buffer that was lent, and the
/// `selected` and `sorted` fields exactly as left.
pub(crate) struct Left {
    pub offset: usize,
    pub size: usize,
    pub selected: i64,
    pub sorted: bool,
}

impl Left {
    pub fn window(&self) -> std::ops::Range<usize> {
        self.offset..self.offset + self.size
    }
}

/// Hands all of `buf` to `apply` as a `llama_token_data_array` with `selected` and `sorted`,
/// and returns the header C left when its window lies inside `buf`, on an entry boundary; a
/// window anywhere else is reported (`None`), not trusted. XTC drops the top candidates by
/// advancing `data` inside the same buffer, so the window may start past the first entry.
pub(crate) fn lend(
    buf: &mut [llama_token_data],
    selected: i64,
    sorted: bool,
    apply: impl FnOnce(*mut llama_token_data_array),
) -> Option<Left> {
    lend_first(buf, buf.len(), selected, sorted, apply)
}

/// [`lend`] of the first `size` entries of `buf` (`size` may be 0 with `buf` holding one
/// readable slot).
pub(crate) fn lend_first(
    buf: &mut [llama_token_data],
    size: usize,
    selected: i64,
    sorted: bool,
    apply: impl FnOnce(*mut llama_token_data_array),
) -> Option<Left> {
    let ptr = buf.as_mut_ptr();
    let mut raw = llama_token_data_array {
        data: ptr,
        size,
        selected,
        sorted,
    };
    apply(&mut raw);
    let entry = std::mem::size_of::<llama_token_data>();
    let bytes = (raw.data as usize).wrapping_sub(ptr as usize);
    let offset = bytes / entry;
    let inside = raw.data >= ptr
        && bytes.is_multiple_of(entry)
        && offset <= size
        && raw.size <= size - offset;
    inside.then_some(Left {
        offset,
        size: raw.size,
        selected: raw.selected,
        sorted: raw.sorted,
    })
}

/// A logits row laid out the way llama.cpp builds its array from one (ids `0..n` in order, `p`
/// zero), once the row has passed the checks an array of that layout needs: not empty, no more
/// entries than the sampler's vocabulary `n_vocab`, every logit finite or `-inf` (the ids are
/// distinct and in range by construction).
pub(crate) fn id_ordered(
    logits: &[f32],
    n_vocab: Option<i32>,
) -> Result<impl Iterator<Item = llama_token_data> + '_> {
    if logits.is_empty() {
        bail!("the candidate array is empty (llama.cpp asserts size > 0)");
    }
    if let Some(n) = n_vocab {
        // A negative bound admits no id (`n as usize` would wrap to a huge one).
        if usize::try_from(n).map_or(true, |n| logits.len() > n) {
            bail!(
                "{} logits for a sampler built for a vocabulary of {n}",
                logits.len()
            );
        }
    }
    if let Some(i) = logits
        .iter()
        .position(|l| l.is_nan() || *l == f32::INFINITY)
    {
        bail!("logit {i} is {}; logits must be finite or -inf", logits[i]);
    }
    Ok(logits
        .iter()
        .enumerate()
        .map(|(i, &logit)| llama_token_data {
            id: i as i32,
            logit,
            p: 0.0,
        }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_rejects_what_would_abort_or_mislead() {
        let logits = Candidates::from_logits;
        let ids = |ids: &[i32]| Candidates::new(ids.iter().map(|&i| (TokenId(i), 0.0)));
        let cases = [
            ("empty", Candidates::new([]), None, false),
            ("a NaN", logits(&[1.0, f32::NAN]), None, false),
            ("a +inf", logits(&[1.0, f32::INFINITY]), None, false),
            ("a -inf", logits(&[1.0, f32::NEG_INFINITY]), None, true),
            ("a negative id", ids(&[-1]), None, false),
            ("an id twice", ids(&[3, 3]), None, false),
            ("an id past the bound", logits(&[0.0; 4]), Some(3), false),
            ("ids below the bound", logits(&[0.0; 4]), Some(4), true),
        ];
        for (case, c, n_vocab, ok) in cases {
            assert_eq!(c.validate(n_vocab).is_ok(), ok, "{case}");
        }
    }

    #[test]
    fn an_id_ordered_row_is_checked_then_laid_out() {
        let err = |logits: &[f32], n| id_ordered(logits, n).err().map(|e| e.to_string());
        assert_eq!(
            err(&[], None).as_deref(),
            Some("the candidate array is empty (llama.cpp asserts size > 0)")
        );
        assert_eq!(
            err(&[0.0, f32::NAN, 1.0], Some(2)).as_deref(),
            Some("3 logits for a sampler built for a vocabulary of 2")
        );
        assert_eq!(
            err(&[0.5], Some(-1)).as_deref(),
            Some("1 logits for a sampler built for a vocabulary of -1")
        );
        assert_eq!(
            err(&[0.0, f32::INFINITY], None).as_deref(),
            Some("logit 1 is inf; logits must be finite or -inf")
        );
        let row: Vec<(i32, f32, f32)> = id_ordered(&[2.5, f32::NEG_INFINITY], Some(2))
            .unwrap()
            .map(|d| (d.id, d.logit, d.p))
            .collect();
        assert_eq!(row, [(0, 2.5, 0.0), (1, f32::NEG_INFINITY, 0.0)]);
    }
}
