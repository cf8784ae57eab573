//! A candidate array validated once and applied many times.
//!
//! Exhaustive audits apply a sampler to the same ids tens of millions of times. Building and
//! re-validating a [`Candidates`] each time would dominate the run, so this keeps one checked
//! template and one reusable buffer. The buffer is refilled from the template before every
//! call, so each apply sees exactly the validated input.

use crate::candidates::Candidates;
use crate::sampler::Sampler;
use anyhow::{bail, Result};
use llama_cpp_sys_2 as sys;

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
        let template: Vec<sys::llama_token_data> = candidates
            .entries
            .iter()
            .map(|c| sys::llama_token_data {
                id: c.id.0,
                logit: c.logit,
                p: c.p,
            })
            .collect();
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
        let ptr = self.buf.as_mut_ptr();
        let mut raw = sys::llama_token_data_array {
            data: ptr,
            size: self.buf.len(),
            selected: -1,
            sorted: false,
        };
        // SAFETY: the header points at `buf`, which lives for the whole call.
        unsafe { sampler.apply_raw(&mut raw) };
        if raw.data != ptr || raw.size > self.buf.len() {
            bail!("the sampler replaced or grew the probe array");
        }
        self.size = raw.size;
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
