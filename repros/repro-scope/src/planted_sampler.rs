//! The planted controls of the verdict's path: two repetition-penalty samplers written here in
//! Rust, each placed where llama.cpp's penalties sampler goes in a `llama:N` scope (a chain of
//! the sampler then llama.cpp's greedy, the prompt accepted into it, every chosen token
//! accepted after it), so that the rule judging llama.cpp's sampler against `all` judges them
//! through the same chain, the same acceptance of tokens and the same readout:
//!
//! - [`WholeSequence`] penalizes every distinct id accepted so far, prompt included, as
//!   transformers' penalty does: the rule must read it `absent` (negative control). A path
//!   that lost the prompt, skipped an accept or read another entry than greedy's would make
//!   it part from `all` and fail it;
//! - [`Window`] penalizes the distinct ids of the last [`PLANTED_WINDOW`] accepted tokens: once
//!   the window slides past a token that still decides a choice it must part from `all`, so
//!   the rule must read it `present` (positive control).
//!
//! Both apply `z > 0 ? z / theta : z * theta` in f32, once per distinct id, from the
//! definition; they share no code with llama.cpp, the oracle or the ledger.

use oracle::TokenId;
use std::collections::{BTreeSet, VecDeque};
use std::ffi::CStr;
use subject::{ArrayView, CustomSampler};

/// The window of the planted windowed sampler: short, so that on any prompt of a few dozen
/// tokens the system turn leaves it within the first steps (on the published prompt the
/// oracle's last-16 scope parts from `all` at step 16), and fixed, not the `N` of the
/// `llama:N` under audit: a planted sampler with llama.cpp's own window would part from `all`
/// exactly when llama.cpp's does, so its control could never pass where the verdict is
/// `absent`.
pub const PLANTED_WINDOW: usize = 16;

/// The sign-branched penalty on one logit.
fn penalize(z: f32, theta: f32) -> f32 {
    if z > 0.0 {
        z / theta
    } else {
        z * theta
    }
}

/// Every distinct id accepted so far.
#[derive(Debug, Clone)]
pub struct WholeSequence {
    theta: f32,
    seen: Vec<bool>,
}

impl WholeSequence {
    pub fn new(n_vocab: usize, theta: f32) -> WholeSequence {
        WholeSequence {
            theta,
            seen: vec![false; n_vocab],
        }
    }
}

impl CustomSampler for WholeSequence {
    fn name(&self) -> &'static CStr {
        c"planted-penalties-whole-sequence"
    }

    fn apply(&mut self, view: &mut ArrayView<'_>) {
        for i in 0..view.len() {
            if self.seen.get(view.id(i).0 as usize) == Some(&true) {
                view.set_logit(i, penalize(view.logit(i), self.theta));
            }
        }
        view.set_sorted(false);
    }

    fn accept(&mut self, id: TokenId) {
        if let Some(s) = self.seen.get_mut(id.0 as usize) {
            *s = true;
        }
    }

    fn reset(&mut self) {
        self.seen.fill(false);
    }

    fn clone_sampler(&self) -> Box<dyn CustomSampler> {
        Box::new(self.clone())
    }
}

/// The distinct ids among the last `window` tokens accepted.
#[derive(Debug, Clone)]
pub struct Window {
    theta: f32,
    window: usize,
    last: VecDeque<TokenId>,
}

impl Window {
    pub fn new(window: usize, theta: f32) -> Window {
        Window {
            theta,
            window,
            last: VecDeque::with_capacity(window + 1),
        }
    }
}

impl CustomSampler for Window {
    fn name(&self) -> &'static CStr {
        c"planted-penalties-window"
    }

    fn apply(&mut self, view: &mut ArrayView<'_>) {
        let ids: BTreeSet<TokenId> = self.last.iter().copied().collect();
        for i in 0..view.len() {
            if ids.contains(&view.id(i)) {
                view.set_logit(i, penalize(view.logit(i), self.theta));
            }
        }
        view.set_sorted(false);
    }

    fn accept(&mut self, id: TokenId) {
        self.last.push_back(id);
        if self.last.len() > self.window {
            self.last.pop_front();
        }
    }

    fn reset(&mut self) {
        self.last.clear();
    }

    fn clone_sampler(&self) -> Box<dyn CustomSampler> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use subject::Sampler;

    fn ids(v: &[i32]) -> Vec<TokenId> {
        v.iter().copied().map(TokenId).collect()
    }

    /// `raw` through `s` after accepting `history`, in id order.
    fn through(s: impl CustomSampler, history: &[TokenId], raw: &[f32]) -> Vec<f32> {
        let mut s = Sampler::custom(s).unwrap();
        for &t in history {
            s.accept(t).unwrap();
        }
        s.apply_in_id_order(raw).unwrap()
    }

    /// Values worked by hand through a real llama.cpp sampler: the whole-sequence sampler
    /// penalizes every id ever accepted once, the window only those of its last tokens.
    #[test]
    fn each_planted_sampler_penalizes_its_own_ids() {
        let raw = [2.6f32, -2.0, 1.3, 1.0, 0.0];
        let history = ids(&[0, 1, 0, 2, 3, 3]);
        let whole = through(WholeSequence::new(5, 1.3), &history, &raw);
        assert_eq!(
            whole,
            vec![2.6 / 1.3, -2.0 * 1.3, 1.3 / 1.3, 1.0 / 1.3, 0.0]
        );
        // The last two tokens are 3 and 3: only id 3.
        let window = through(Window::new(2, 1.3), &history, &raw);
        assert_eq!(window, vec![2.6, -2.0, 1.3, 1.0 / 1.3, 0.0]);
        // A window of three reaches back to id 2.
        let window = through(Window::new(3, 1.3), &history, &raw);
        assert_eq!(window, vec![2.6, -2.0, 1.3 / 1.3, 1.0 / 1.3, 0.0]);
    }
}
