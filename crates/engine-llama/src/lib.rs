//! llama.cpp behind the engine seam (`engine::Engine`), through the safe wrapper of
//! `subject`: the penalties sampler, the greedy sampler, a chain ending in `dist`, and a
//! decoding context.
//!
//! A sibling of `engine-candle`: it depends on the seam, the oracle's types and `subject`,
//! never on a repro or on `harness`, so the registry (`harness::engines`) can hold both.

use anyhow::{ensure, Context as _, Result};
use engine::{Call, Engine, EngineInfo, EngineName, Logits, Sampling};
use oracle::penalty::PenaltyParams;
use oracle::stage::Stage;
use oracle::window::WindowLen;
use oracle::TokenId;
use std::path::Path;
use std::sync::Arc;
use subject::{Attention, BuildInfo, Candidates, Context, Model, Sampler, SamplerSpec, Weights};

/// The llama.cpp build this binary links.
pub struct Llama;

/// The chain [`Llama::draw`] runs: the configuration's stages then the draw
/// ([`Sampling::with_draw`], the list the oracle composes), each through `subject`'s one
/// conversion of a stage into a C call.
pub fn draw_chain(sampling: &Sampling, seed: u32) -> Result<Sampler> {
    let samplers = sampling
        .with_draw(seed)
        .into_iter()
        .map(|s| SamplerSpec::from(s).build())
        .collect::<Result<Vec<_>>>()?;
    Sampler::chain(samplers)
}

/// llama.cpp's dist takes a `uint32_t` seed.
pub fn seed32(seed: u64) -> Result<u32> {
    u32::try_from(seed).with_context(|| format!("seed {seed} does not fit llama.cpp's uint32_t"))
}

impl Engine for Llama {
    fn info(&self) -> EngineInfo {
        let b = BuildInfo::current();
        EngineInfo {
            name: EngineName::Llama,
            tag: b.tag().to_string(),
            detail: b.describe(),
            sources: subject::SOURCES.0,
        }
    }

    fn repeat_penalty(&self, logits: &[f32], theta: f32, context: &[TokenId]) -> Result<Vec<f32>> {
        let n_vocab = i32::try_from(logits.len()).context("vocabulary too large")?;
        let window = i32::try_from(context.len().max(1)).context("context too long")?;
        let params = PenaltyParams {
            repeat: theta,
            freq: 0.0,
            present: 0.0,
        };
        // A window as long as the context holds all of it: llama.cpp then counts each id of
        // the context, which is what every other engine is asked for.
        let mut s = SamplerSpec::penalties(n_vocab, WindowLen(window as usize), params).build()?;
        for &t in context {
            s.accept(t)?;
        }
        s.apply_in_id_order(logits)
    }

    fn greedy(&self, logits: &[f32]) -> Result<TokenId> {
        let mut s = SamplerSpec::from(Stage::Greedy).build()?;
        let mut c = Candidates::from_logits(logits);
        s.apply(&mut c)?;
        c.selected_id()
            .context("llama.cpp's greedy selected nothing")
    }

    fn supports(&self, sampling: &Sampling) -> Result<()> {
        // The chain builder is the one judge of what llama.cpp runs: every stage it can turn
        // into a C call, with parameters `subject` checks before the call.
        draw_chain(sampling, 0).map(|_| ())
    }

    fn draw(
        &self,
        logits: &[f32],
        s: &Sampling,
        seed: u64,
        n: usize,
        watch: &[TokenId],
    ) -> Result<Vec<Call>> {
        ensure!(!logits.is_empty(), "no logits to draw from");
        let mut chain = draw_chain(s, seed32(seed)?)?;
        (0..n)
            .map(|_| {
                let mut c = Candidates::from_logits(logits);
                chain.apply(&mut c)?;
                // The array dist drew from is what the truncating stages left: its entries.
                let mut kept: Vec<TokenId> = (c.entries.iter())
                    .map(|e| e.id)
                    .filter(|id| watch.contains(id))
                    .collect();
                kept.sort();
                Ok(Call {
                    drawn: c.selected_id().context("dist selected nothing")?,
                    kept: Some(kept),
                })
            })
            .collect()
    }

    fn load(&self, path: &Path, threads: usize, room: usize) -> Result<Box<dyn Logits>> {
        let model = Model::load_with(path, Weights::Repacked)?;
        Ok(Box::new(LlamaLogits::new(model, threads, room)?))
    }
}

/// A llama.cpp context used through the seam: the prompt in one batch, then each generated
/// token alone, in a context of `prompt + room + 8` tokens: the path and the size
/// `harness::Session::new(model, prompt, room, threads)` and `Session::generate` use, so the
/// bits are the same as theirs.
pub struct LlamaLogits {
    pub model: Arc<Model>,
    threads: i32,
    room: usize,
    ctx: Option<Context>,
    capacity: usize,
    fed_prompt: Vec<TokenId>,
    fed_generated: Vec<TokenId>,
    last: Vec<f32>,
}

impl LlamaLogits {
    /// `room`: the most tokens ever generated after a prompt.
    pub fn new(model: Arc<Model>, threads: usize, room: usize) -> Result<LlamaLogits> {
        Ok(LlamaLogits {
            model,
            threads: i32::try_from(threads).context("--threads")?,
            room,
            ctx: None,
            capacity: 0,
            fed_prompt: Vec::new(),
            fed_generated: Vec::new(),
            last: Vec::new(),
        })
    }
}

impl Logits for LlamaLogits {
    fn describe(&self) -> String {
        self.model.describe()
    }

    fn n_vocab(&self) -> usize {
        self.model.n_vocab() as usize
    }

    fn logits_after(&mut self, prompt: &[TokenId], generated: &[TokenId]) -> Result<Vec<f32>> {
        ensure!(!prompt.is_empty(), "the prompt has no tokens");
        let same_prompt = self.fed_prompt == prompt;
        if same_prompt && generated == self.fed_generated.as_slice() && self.ctx.is_some() {
            return Ok(self.last.clone());
        }
        let extends_by_one = same_prompt
            && generated.len() == self.fed_generated.len() + 1
            && generated.starts_with(&self.fed_generated);
        ensure!(
            generated.len() <= self.room,
            "{} generated tokens; this context has room for {}",
            generated.len(),
            self.room
        );
        let capacity = prompt.len() + self.room + 8;
        if !extends_by_one || capacity != self.capacity {
            if self.ctx.is_none() || capacity != self.capacity {
                self.capacity = capacity;
                self.ctx = Some(Context::with_attention(
                    &self.model,
                    self.capacity as u32,
                    Attention::Auto,
                    self.threads,
                )?);
            }
            let ctx = self.ctx.as_mut().expect("made above");
            ctx.clear();
            ctx.decode(prompt).context("decoding the prompt")?;
            self.fed_prompt = prompt.to_vec();
            self.fed_generated.clear();
        }
        let ctx = self.ctx.as_mut().expect("made above");
        for &t in &generated[self.fed_generated.len()..] {
            ctx.decode(&[t])?;
            self.fed_generated.push(t);
        }
        self.last = ctx.logits()?;
        Ok(self.last.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// llama.cpp's chain through the adapter: top_k=2 on [3, 2, 1, 0] draws only ids 0 and
    /// 1, the same seed draws the same ids, and llama.cpp's greedy breaks a tie to the lower id.
    #[test]
    fn the_adapter_runs_llama_cpp_chains() {
        let s = Sampling::parse("top_k=2").unwrap();
        Llama.supports(&s).unwrap();
        let watch = [TokenId(1), TokenId(2)];
        let calls = Llama
            .draw(&[3.0, 2.0, 1.0, 0.0], &s, 1, 2000, &watch)
            .unwrap();
        let draws: Vec<TokenId> = calls.iter().map(|c| c.drawn).collect();
        assert!(draws.contains(&TokenId(0)) && draws.contains(&TokenId(1)));
        assert!(draws.iter().all(|t| t.0 < 2));
        // Every call shows what top_k left of the watched ids: id 1, never id 2.
        assert!(calls.iter().all(|c| c.kept == Some(vec![TokenId(1)])));
        assert_eq!(
            calls,
            Llama
                .draw(&[3.0, 2.0, 1.0, 0.0], &s, 1, 2000, &watch)
                .unwrap()
        );
        assert!(seed32(1 << 32).is_err());
        assert_eq!(Llama.greedy(&[1.0, 3.0, 3.0]).unwrap().0, 1);
    }
}
