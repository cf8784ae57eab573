//! `sorted-guard`: makes a stale `sorted` flag harmless.

use anyhow::Result;
use std::ffi::CStr;
use subject::{ArrayView, CustomSampler, Sampler};

/// The guard has no state: one pass over the array per apply.
#[derive(Debug, Clone, Copy)]
struct Guard;

impl CustomSampler for Guard {
    fn name(&self) -> &'static CStr {
        c"sorted-guard"
    }

    /// One pass: if the array claims to be sorted but is not, clear the claim.
    fn apply(&mut self, view: &mut ArrayView<'_>) {
        if !view.sorted() || view.len() < 2 {
            return;
        }
        // "Not >=" rather than "<": a NaN breaks the order too.
        #[allow(clippy::neg_cmp_op_on_partial_ord)]
        let broken = view
            .entries()
            .windows(2)
            .any(|w| !(w[0].logit >= w[1].logit));
        if broken {
            view.set_sorted(false);
        }
    }

    fn clone_sampler(&self) -> Box<dyn CustomSampler> {
        Box::new(*self)
    }
}

/// A new guard stage.
pub fn sorted_guard() -> Result<Sampler> {
    Sampler::custom(Guard)
}
