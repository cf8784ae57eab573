//! Plumbing the model-based repros share: a resolved model with its chat format, and a greedy
//! decoding loop whose choice at each step is the caller's.
//!
//! Every generation starts from a cleared context: the prompt is decoded as one batch, then
//! one token per batch. Two generations therefore see bit-identical logits for as long as
//! their tokens agree, which is what lets the repros compare trajectories token by token.

pub mod engines;
pub mod fork;

use anyhow::{ensure, Context as _, Result};
use models::ModelChoice;
use oracle::TokenId;
use std::sync::Arc;
use subject::{Attention, Context, Message, Model, Weights};

/// Loads a file the user named (not one of the sha256-checked models) in a contained child
/// ([`subject::preflight`]): a file that makes llama.cpp abort is refused in one line. Checked
/// once per process, so a command line's check and its run ask for one child load.
pub fn preflight(choice: &ModelChoice, weights: Weights) -> Result<()> {
    if choice.known.is_none() {
        subject::preflight(&choice.path, weights)?;
    }
    Ok(())
}

/// A model loaded once, with what its chat format needs.
pub struct LoadedModel {
    pub choice: ModelChoice,
    pub model: Arc<Model>,
}

impl LoadedModel {
    pub fn load(choice: ModelChoice) -> Result<LoadedModel> {
        LoadedModel::load_with(choice, Weights::Repacked)
    }

    /// [`LoadedModel::load`] with a chosen weight layout ([`Weights::AsStored`] for
    /// [`fork`], whose batched rows are compared with lone ones), after [`preflight`].
    pub fn load_with(choice: ModelChoice, weights: Weights) -> Result<LoadedModel> {
        preflight(&choice, weights)?;
        let model = Model::load_with(&choice.path, weights)?;
        Ok(LoadedModel { choice, model })
    }

    /// The prompt through the model's chat template: its default system turn (if it has
    /// one), the user turn, the assistant turn opened; tokenized with the model's BOS rule
    /// and control tokens parsed.
    pub fn chat_ids(&self, user: &str) -> Result<Vec<TokenId>> {
        let mut messages = Vec::new();
        if let Some(system) = self.choice.default_system() {
            messages.push(Message {
                role: "system".into(),
                content: system.into(),
            });
        }
        messages.push(Message {
            role: "user".into(),
            content: user.into(),
        });
        let text = self
            .model
            .chat_prompt(&messages, self.choice.template_fallback())
            .with_context(|| format!("applying the chat template of {}", self.choice.label))?;
        self.model.tokenize(&text, true, true)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    Eos,
    Limit,
}

impl Stop {
    pub fn as_str(self) -> &'static str {
        match self {
            Stop::Eos => "eos",
            Stop::Limit => "limit",
        }
    }
}

/// llama.cpp's greedy rule over a row of logits: the oracle's [`oracle::argmax`].
pub use oracle::argmax;

/// The first index where two token sequences differ, or `None` if they are equal.
pub fn divergence(a: &[TokenId], b: &[TokenId]) -> Option<usize> {
    let common = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    (common < a.len().max(b.len())).then_some(common)
}

/// A context over one model and one prompt.
pub struct Session {
    pub model: Arc<Model>,
    pub prompt: Vec<TokenId>,
    ctx: Context,
}

impl Session {
    /// Room for the prompt and `max_new` generated tokens.
    pub fn new(
        model: &Arc<Model>,
        prompt: Vec<TokenId>,
        max_new: usize,
        threads: i32,
    ) -> Result<Session> {
        Session::with_attention(model, prompt, max_new, Attention::Auto, threads)
    }

    /// [`Session::new`] with a chosen attention kernel ([`Attention::Plain`] to be compared
    /// with the forked runs of [`fork`], whose contexts use it).
    pub fn with_attention(
        model: &Arc<Model>,
        prompt: Vec<TokenId>,
        max_new: usize,
        attention: Attention,
        threads: i32,
    ) -> Result<Session> {
        ensure!(!prompt.is_empty(), "the prompt has no tokens");
        let n_ctx = (prompt.len() + max_new + 8) as u32;
        let ctx = Context::with_attention(model, n_ctx, attention, threads)?;
        Ok(Session {
            model: Arc::clone(model),
            prompt,
            ctx,
        })
    }

    /// Clears the context and decodes the prompt.
    fn restart(&mut self) -> Result<()> {
        self.ctx.clear();
        self.ctx.decode(&self.prompt).context("decoding the prompt")
    }

    /// The raw logits after `prompt ++ generated`, decoded afresh.
    pub fn logits_after(&mut self, generated: &[TokenId]) -> Result<Vec<f32>> {
        self.restart()?;
        for &t in generated {
            self.ctx.decode(&[t])?;
        }
        self.ctx.logits()
    }

    /// Generates up to `max_new` tokens; `choose(raw_logits, generated_so_far)` picks each.
    /// Stops after an end-of-generation token (which is kept) or at the limit.
    pub fn generate(
        &mut self,
        max_new: usize,
        mut choose: impl FnMut(&[f32], &[TokenId]) -> Result<TokenId>,
    ) -> Result<(Vec<TokenId>, Stop)> {
        self.restart()?;
        let mut tokens = Vec::new();
        while tokens.len() < max_new {
            let raw = self.ctx.logits()?;
            let next = choose(&raw, &tokens)?;
            tokens.push(next);
            if self.model.is_eog(next) {
                return Ok((tokens, Stop::Eos));
            }
            if tokens.len() < max_new {
                self.ctx.decode(&[next])?;
            }
        }
        Ok((tokens, Stop::Limit))
    }
}
