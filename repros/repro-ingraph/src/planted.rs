//! The planted controls: a `min_p` written here that runs in the graph, once exact and once
//! ignoring `min_keep` in the graph (as llama.cpp's own `min_p` and `top_p` graph ops do).
//! Both keep `min_keep` on the CPU, so only the graph path can be wrong, and both go through
//! the same context, comparison and oracle as llama.cpp's stages.

use oracle::stage::Stage;
use std::ffi::CStr;
use subject::{ArrayView, CustomSampler, GraphOps, Sampler};

/// A `min_p(p, min_keep)` that masks (sets dropped logits to `-inf`) on both paths.
#[derive(Debug, Clone, Copy)]
pub struct PlantedMinP {
    pub p: f32,
    pub min_keep: usize,
    /// Whether the graph path keeps the `min_keep` top entries too.
    pub graph_keeps_min_keep: bool,
    placed: bool,
}

impl PlantedMinP {
    pub fn new(p: f32, min_keep: usize, graph_keeps_min_keep: bool) -> PlantedMinP {
        PlantedMinP {
            p,
            min_keep,
            graph_keeps_min_keep,
            placed: false,
        }
    }

    /// The oracle stage this sampler must agree with.
    pub fn stage(&self) -> Stage {
        Stage::MinP {
            p: self.p,
            min_keep: self.min_keep,
        }
    }

    pub fn name(&self) -> &'static str {
        if self.graph_keeps_min_keep {
            "planted-min_p-exact"
        } else {
            "planted-min_p-ignores-min_keep"
        }
    }

    pub fn build(self) -> anyhow::Result<Sampler> {
        Sampler::custom(self)
    }
}

impl CustomSampler for PlantedMinP {
    fn name(&self) -> &'static CStr {
        // A `+` once placed in the graph, as llama.cpp names its own stages there.
        match (self.placed, self.graph_keeps_min_keep) {
            (false, true) => c"planted-min_p-exact",
            (true, true) => c"+planted-min_p-exact",
            (false, false) => c"planted-min_p-ignores-min_keep",
            (true, false) => c"+planted-min_p-ignores-min_keep",
        }
    }

    /// llama.cpp's CPU rule: keep `logit >= max + ln p`, topped up to the `min_keep` top
    /// entries; the rest become `-inf`.
    fn apply(&mut self, view: &mut ArrayView<'_>) {
        let n = view.len();
        if n == 0 {
            return;
        }
        let max = (0..n)
            .map(|i| view.logit(i))
            .fold(f32::NEG_INFINITY, f32::max);
        let threshold = max + self.p.ln();
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| view.logit(b).total_cmp(&view.logit(a)));
        for (rank, &i) in order.iter().enumerate() {
            if rank >= self.min_keep && view.logit(i) < threshold {
                view.set_logit(i, f32::NEG_INFINITY);
            }
        }
    }

    fn clone_sampler(&self) -> Box<dyn CustomSampler> {
        Box::new(*self)
    }

    fn in_graph(&self) -> bool {
        true
    }

    fn placed_in_graph(&mut self) {
        self.placed = true;
    }

    /// The same rule as ggml ops: `threshold = max + ln p`, lowered to the `min_keep`-th
    /// largest logit when keeping `min_keep`; entries below it get `log 0 = -inf` added.
    fn graph_apply(&mut self, g: &GraphOps) {
        let l = g.logits();
        let max = g.gather(l, g.argmax(l));
        let mut threshold = g.scale_bias(max, 1.0, self.p.ln());
        let k = (self.min_keep as i64).min(g.len(l));
        if self.graph_keeps_min_keep && k > 0 {
            let top = g.gather(l, g.top_k(l, k as i32));
            let kth = g.gather(top, g.head(g.argsort_ascending(top), 1));
            // min(threshold, kth) = threshold - max(threshold - kth, 0)
            threshold = g.sub(threshold, g.relu(g.sub(threshold, kth)));
        }
        // 1 where l >= threshold: 1 - step(threshold - l).
        let below = g.step(g.scale_bias(g.sub(l, threshold), -1.0, 0.0));
        let keep = g.scale_bias(below, -1.0, 1.0);
        let masked = g.add(l, g.log(keep));
        g.set_logits(masked);
    }
}
