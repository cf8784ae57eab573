//! The duplicate-then-continue comparison: an original and its duplicate (a clone, or a state
//! copy onto another sampler of the same recipe) fed the same input must give bit-identical
//! output; for a duplicate that differs, whether only the draw differs and whether it behaves
//! like a freshly built sampler.

use super::inputs::{step, with_history, with_other_history};
use super::samplers::SamplerRecipe;
use super::{CONTINUE, HISTORY};
use anyhow::Result;
use serde::Serialize;
use subject::{Candidates, Sampler};

/// How the second sampler of a comparison is made from the first, after its history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Duplicate {
    /// `llama_sampler_clone`.
    Clone,
    /// `llama_sampler_copy` onto a sampler of the same recipe that has not run.
    CopyOntoFresh,
    /// `llama_sampler_copy` onto a sampler of the same recipe that ran a history of its own.
    CopyOntoUsed,
}

/// `original`'s duplicate, made as `how` says.
pub fn duplicate(original: &Sampler, recipe: &SamplerRecipe, how: Duplicate) -> Result<Sampler> {
    let mut dst = match how {
        Duplicate::Clone => return original.try_clone(),
        Duplicate::CopyOntoFresh => recipe.build()?,
        Duplicate::CopyOntoUsed => with_other_history(recipe.build()?)?,
    };
    dst.copy_from(original)?;
    Ok(dst)
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

/// How a clone compared with its original (in a row's JSON: its fields after the step).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Equivalence {
    Equivalent,
    Differs {
        /// First continuation step whose outputs differ.
        #[serde(skip)]
        step: usize,
        detail: String,
        /// At that step only the selected id differs.
        draw_only: bool,
        /// Over every continuation step the clone behaves like a freshly built sampler.
        #[serde(rename = "like_fresh_sampler")]
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

    /// What the comparison of a clone with its original shows, in one line.
    pub fn summary(&self) -> String {
        self.describe("clone", "the original")
    }

    /// What the comparison shows, in one line, naming the two samplers compared (`copy`,
    /// `the original`); `detail` names them as the original and the clone.
    pub fn describe(&self, duplicate: &str, reference: &str) -> String {
        match self {
            Equivalence::Equivalent => {
                format!("{duplicate} equals {reference} for all {CONTINUE} continuation steps")
            }
            Equivalence::Differs {
                step,
                detail,
                draw_only,
                like_fresh,
            } => {
                let mut s = format!("{duplicate} differs at continuation step {step} ({detail})");
                if *draw_only {
                    s += "; there every candidate's logit and p are bit-identical and only the draw differs, so the RNG state was not copied";
                }
                if *like_fresh {
                    s += &format!("; for all {CONTINUE} steps the {duplicate} behaves exactly like a freshly built sampler, so none of its state was copied");
                }
                s
            }
        }
    }
}

/// Runs the duplicate-then-continue check on one subject: the original after its history
/// against its duplicate.
pub fn check(subject: &SamplerRecipe, how: Duplicate) -> Result<Equivalence> {
    let original = with_history(subject.build()?)?;
    let clone = duplicate(&original, subject, how)?;
    continue_both(subject, original, clone)
}

/// Whether a copy depends on what its destination held: a copy onto a fresh sampler against
/// a copy of the same original onto a sampler that ran a history of its own. Any difference
/// is the destination's old state leaking into the copy, whether or not the copy is
/// complete.
pub fn check_leak(subject: &SamplerRecipe) -> Result<Equivalence> {
    let original = with_history(subject.build()?)?;
    let onto_fresh = duplicate(&original, subject, Duplicate::CopyOntoFresh)?;
    let onto_used = duplicate(&original, subject, Duplicate::CopyOntoUsed)?;
    continue_both(subject, onto_fresh, onto_used)
}

/// Whether [`check_leak`] can see a leak on `subject` at all: a sampler after the other
/// history must behave differently from the original, or a copy that kept the destination's
/// state would be indistinguishable from a complete one.
pub fn leak_visible(subject: &SamplerRecipe) -> Result<bool> {
    let original = with_history(subject.build()?)?;
    let used = with_other_history(subject.build()?)?;
    Ok(continue_both(subject, original, used)?.differs())
}

/// A copy between two recipes, unchecked: `src` after its history copied onto a fresh `dst`,
/// then both continued. For pairs llama.cpp may refuse by aborting, so it runs only in a
/// contained child.
/// `before` and `after` run just around the copy call (a child marks it on stderr, so an
/// abort can be placed inside the call or outside it).
pub fn check_across(
    src: &SamplerRecipe,
    dst: &SamplerRecipe,
    before: impl FnOnce(),
    after: impl FnOnce(),
) -> Result<Equivalence> {
    let original = with_history(src.build()?)?;
    let mut copy = dst.build()?;
    before();
    copy.copy_unchecked(&original)?;
    after();
    continue_both(dst, original, copy)
}

/// `CONTINUE` steps of identical input to `original` and `clone` (the tokens `original`
/// chooses), compared step by step; where they differ, whether `clone` behaves like a fresh
/// sampler of `subject`'s recipe.
fn continue_both(
    subject: &SamplerRecipe,
    mut original: Sampler,
    mut clone: Sampler,
) -> Result<Equivalence> {
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
