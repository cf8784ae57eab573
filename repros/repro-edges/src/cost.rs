//! What containment costs: the same probe (`top_k` on the plain input) run in this process
//! and in a supervised child, timed alternately in one run, so the ratio is measured under the
//! same machine load. A benchmark (`repro-edges --supervisor-cost N`), never a test.

use crate::{inputs, probe, samplers};
use anyhow::{Context, Result};
use serde::Serialize;
use std::time::{Duration, Instant};

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

/// Times `rounds` probes each way, alternating; returns the report text and its JSON.
pub fn measure(rounds: usize, timeout: Duration) -> Result<(String, serde_json::Value)> {
    let config = samplers::by_name("top_k").context("top_k is a probed sampler")?;
    let input = inputs::all()
        .into_iter()
        .find(|i| i.name == "plain")
        .context("plain is an input")?;
    let (mut inside, mut contained) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let t = Instant::now();
        let mut s = config.build()?;
        std::hint::black_box(s.apply_unvalidated(&input.entries, false)?);
        inside.push(t.elapsed());
        let t = Instant::now();
        std::hint::black_box(probe::run(config.name, input.name, timeout)?);
        contained.push(t.elapsed());
    }
    let (a, b) = (median(inside), median(contained));
    let ratio = b.as_secs_f64() / a.as_secs_f64().max(1e-9);
    let text = format!(
        "supervisor cost, {rounds} alternating rounds of top_k=2 on the plain input:\n  in process     median {:>10.1} us\n  in a child     median {:>10.1} us\n  ratio          {ratio:.0}x (the child's start, its output's trip through a pipe, and the poll)\n",
        a.as_secs_f64() * 1e6,
        b.as_secs_f64() * 1e6
    );
    #[derive(Serialize)]
    struct Cost {
        rounds: usize,
        in_process_median_us: f64,
        contained_median_us: f64,
        ratio: f64,
    }
    let value = serde_json::to_value(Cost {
        rounds,
        in_process_median_us: a.as_secs_f64() * 1e6,
        contained_median_us: b.as_secs_f64() * 1e6,
        ratio,
    })?;
    Ok((text, value))
}
