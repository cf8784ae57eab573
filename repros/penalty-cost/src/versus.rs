//! llama.cpp's penalties stage on two builds, timed turn by turn in one run: this process
//! (the stock build) and a worker child of the same program built against another llama.cpp
//! (the patched build, `b11429+fixes`). Two static llama.cpp libraries cannot share one
//! process, so the child times its own applies and reports them on a pipe; the rounds
//! alternate which side goes first, so machine noise reaches both alike.
//!
//! Before any timing, both sides apply the stage once to the same array and must leave the same
//! bits (a checksum over every id and logit): the ratio compares the same work or the run
//! stops. The worker's protocol is one line each way: `build` -> its tag, `sources` -> the
//! sha256 of its sampler sources, `apply <vocab> <layout>` -> `<ms> <checksum>`; and for the
//! end-to-end part ([`crate::overhead`]) `e2e <tokens> <threads>` -> `ready` (the model loaded),
//! then `generate <variant>` -> `<ms per token> <stop> <id,id,...>`.

use crate::e2e::{Decoder, Generation, Plan, Variant};
use crate::layout::{Layout, Workload};
use crate::penalty::builtin_penalties;
use crate::stats::{bootstrap_median, median, MedianCi};
use anyhow::{bail, ensure, Context, Result};
use harness::Stop;
use models::ModelChoice;
use oracle::stats::bootstrap;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;
use subject::{IdOrder, LogitsArray, Sampler, TokenId};

/// One side's stage for one vocabulary: the array's workload, both layouts' id orders, and
/// llama.cpp's penalties with the workload's history accepted.
struct Bench {
    work: Workload,
    orders: Vec<IdOrder>,
    stage: Sampler,
    arr: LogitsArray,
}

impl Bench {
    fn new(n: usize) -> Result<Bench> {
        let work = Workload::new(n);
        let orders = (Layout::ALL.iter())
            .map(|l| IdOrder::new(&l.order(n)))
            .collect::<Result<Vec<_>>>()?;
        let mut stage = builtin_penalties(n as i32)?;
        for &t in &work.history {
            stage.accept(t)?;
        }
        Ok(Bench {
            work,
            orders,
            stage,
            arr: LogitsArray::new(),
        })
    }

    /// One timed apply on a freshly loaded array (the load is not timed): ms and the
    /// checksum of what it left.
    fn apply(&mut self, layout: Layout) -> Result<(f64, u64)> {
        let l = Layout::ALL
            .iter()
            .position(|&x| x == layout)
            .expect("a layout of ALL");
        self.arr.load_in(&self.work.row, &self.orders[l])?;
        let t0 = Instant::now();
        self.arr.apply(&mut self.stage)?;
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        Ok((ms, checksum(&self.arr)))
    }
}

/// FNV-1a over every entry's id and logit bits, in array order.
fn checksum(arr: &LogitsArray) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for i in 0..arr.len() {
        let id = arr.id(i).map_or(-1, |t| t.0);
        let bits = arr.logit(i).map_or(0, f32::to_bits);
        for b in id.to_le_bytes().into_iter().chain(bits.to_le_bytes()) {
            h = (h ^ u64::from(b)).wrapping_mul(0x100000001b3);
        }
    }
    h
}

fn layout_of(key: &str) -> Result<Layout> {
    (Layout::ALL.into_iter())
        .find(|l| l.key() == key)
        .with_context(|| format!("unknown layout '{key}'"))
}

fn variant_of(key: &str) -> Result<Variant> {
    (Variant::ALL.into_iter())
        .find(|v| v.key() == key)
        .with_context(|| format!("unknown variant '{key}'"))
}

/// A generation as one line: `<ms per token> <stop> <id,id,...>`.
pub fn generation_line(g: &Generation) -> String {
    let ids: Vec<String> = g.tokens.iter().map(|t| t.0.to_string()).collect();
    format!("{} {} {}", g.ms_per_token, g.stop.as_str(), ids.join(","))
}

/// The inverse of [`generation_line`].
pub fn parse_generation(line: &str) -> Result<Generation> {
    let parts: Vec<&str> = line.split_whitespace().collect();
    let [ms, stop, ids] = parts[..] else {
        bail!("not a generation: '{line}'");
    };
    let stop = match stop {
        "eos" => Stop::Eos,
        "limit" => Stop::Limit,
        _ => bail!("not a stop: '{stop}'"),
    };
    let tokens = (ids.split(','))
        .map(|t| t.parse().map(TokenId))
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("not token ids: '{ids}'"))?;
    Ok(Generation {
        ms_per_token: ms.parse().with_context(|| format!("not ms: '{ms}'"))?,
        tokens,
        stop,
    })
}

/// The worker: answers the parent's requests on stdin until it closes. `model` is what the end
/// to end part decodes.
pub fn serve(model: &ModelChoice) -> Result<()> {
    let mut benches: BTreeMap<usize, Bench> = BTreeMap::new();
    let mut decoder: Option<Decoder> = None;
    let stdout = std::io::stdout();
    for line in std::io::stdin().lock().lines() {
        let line = line.context("reading the parent's request")?;
        let parts: Vec<&str> = line.split_whitespace().collect();
        let answer = match parts[..] {
            ["build"] => subject::BuildInfo::current().tag().to_string(),
            ["sources"] => subject::BuildInfo::current().sources_sha256,
            ["apply", n, layout] => {
                let n: usize = n.parse().context("worker: vocabulary size")?;
                let bench = match benches.entry(n) {
                    std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                    std::collections::btree_map::Entry::Vacant(e) => e.insert(Bench::new(n)?),
                };
                let (ms, sum) = bench.apply(layout_of(layout)?)?;
                format!("{ms} {sum}")
            }
            ["e2e", tokens, threads] => {
                let plan = Plan {
                    rounds: 0,
                    tokens: tokens.parse().context("worker: tokens")?,
                    threads: threads.parse().context("worker: threads")?,
                };
                decoder = Some(Decoder::new(model.clone(), &plan)?);
                "ready".to_string()
            }
            ["generate", variant] => {
                let d = decoder.as_mut().context("worker: generate before e2e")?;
                generation_line(&d.generate(variant_of(variant)?)?)
            }
            _ => bail!("worker: bad request '{line}'"),
        };
        let mut out = stdout.lock();
        writeln!(out, "{answer}")?;
        out.flush()?;
    }
    Ok(())
}

/// The child worker, killed when dropped.
pub struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// The build the worker links, and the sha256 of its sampler sources.
    pub build: String,
    pub sources: String,
}

impl Worker {
    /// Starts `bin --worker` and asks which build it links; refuses this process's own build.
    pub fn start(bin: &Path) -> Result<Worker> {
        let mut child = Command::new(bin)
            .arg("--worker")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let stdin = child.stdin.take().context("the worker's stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("the worker's stdout")?);
        let mut w = Worker {
            child,
            stdin,
            stdout,
            build: String::new(),
            sources: String::new(),
        };
        w.build = w.ask("build")?;
        w.sources = w.ask("sources")?;
        let stock = subject::BuildInfo::current().tag().to_string();
        ensure!(
            stock != w.build,
            "{} links the same build as this one ({stock}); give the patched build's penalty-cost",
            bin.display()
        );
        Ok(w)
    }

    /// One request, one answer line (trimmed, never empty).
    fn ask(&mut self, request: &str) -> Result<String> {
        writeln!(self.stdin, "{request}")?;
        self.stdin.flush()?;
        let mut line = String::new();
        self.stdout.read_line(&mut line)?;
        ensure!(
            !line.trim().is_empty(),
            "the worker stopped answering (asked '{request}')"
        );
        Ok(line.trim().to_string())
    }

    fn apply(&mut self, n: usize, layout: Layout) -> Result<(f64, u64)> {
        let line = self.ask(&format!("apply {n} {}", layout.key()))?;
        let mut it = line.split_whitespace();
        let (Some(ms), Some(sum)) = (it.next(), it.next()) else {
            bail!("the worker answered '{line}' to apply");
        };
        Ok((ms.parse()?, sum.parse()?))
    }

    /// Has the worker load the end-to-end model for `plan`.
    pub fn load_e2e(&mut self, plan: &Plan) -> Result<()> {
        let line = self.ask(&format!("e2e {} {}", plan.tokens, plan.threads))?;
        ensure!(line == "ready", "the worker answered '{line}' to e2e");
        Ok(())
    }

    /// One generation of `v` in the worker.
    pub fn generate(&mut self, v: Variant) -> Result<Generation> {
        parse_generation(&self.ask(&format!("generate {}", v.key()))?)
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One vocabulary and layout: both sides' medians and the stock-over-patched ratio.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub vocab: usize,
    pub layout: &'static str,
    pub stock_ms: Ci,
    pub patched_ms: Ci,
    /// Stock median over patched median, with the 95% bootstrap interval of that ratio
    /// (rounds resampled in pairs).
    pub ratio: Ci,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Ci {
    pub median: f64,
    pub lo: f64,
    pub hi: f64,
}

impl From<MedianCi> for Ci {
    fn from(m: MedianCi) -> Ci {
        Ci {
            median: m.median,
            lo: m.lo,
            hi: m.hi,
        }
    }
}

/// The comparison: the two builds and the rows.
#[derive(Debug, Clone, Serialize)]
pub struct Versus {
    pub finding: &'static str,
    pub stock: String,
    pub patched: String,
    /// The sha256 of the patched build's sampler sources (which version of the patch ran).
    pub patched_sources_sha256: String,
    pub rounds: usize,
    pub window: usize,
    pub theta: f32,
    pub layouts: BTreeMap<&'static str, &'static str>,
    /// What was checked before the timing.
    pub same_bits: &'static str,
    pub rows: Vec<Row>,
}

/// Said in `same_bits`.
pub const SAME_BITS: &str = "before the timing of each row, both builds applied the stage to that row's array (no repeated ids) and left the same ids and logit bits";

/// `rounds` alternating turns per vocabulary and layout against `worker`.
pub fn compare(worker: &mut Worker, vocabs: &[usize], rounds: usize) -> Result<Versus> {
    let stock = subject::BuildInfo::current().tag().to_string();
    let patched = worker.build.clone();
    let mut rows = Vec::new();
    for &n in vocabs {
        let mut own = Bench::new(n)?;
        for layout in Layout::ALL {
            // The same work first (this also warms both up).
            let (_, mine) = own.apply(layout)?;
            let (_, theirs) = worker.apply(n, layout)?;
            ensure!(
                mine == theirs,
                "the two builds' penalties leave different arrays ({} layout, {n} candidates): the timings would compare different work",
                layout.key()
            );
            let mut pairs = Vec::with_capacity(rounds);
            for r in 0..rounds {
                let (s, p) = if r % 2 == 0 {
                    let s = own.apply(layout)?.0;
                    (s, worker.apply(n, layout)?.0)
                } else {
                    let p = worker.apply(n, layout)?.0;
                    (own.apply(layout)?.0, p)
                };
                pairs.push((s, p));
            }
            let stock: Vec<f64> = pairs.iter().map(|p| p.0).collect();
            let patched: Vec<f64> = pairs.iter().map(|p| p.1).collect();
            // The ratio's interval: rounds resampled as (stock, patched) pairs, the statistic
            // the ratio of the two medians (pairs encoded as indices to resample together).
            let idx: Vec<f64> = (0..pairs.len()).map(|i| i as f64).collect();
            let (ratio, lo, hi) = bootstrap(&idx, |sample: &mut [f64]| {
                let s: Vec<f64> = sample.iter().map(|&i| pairs[i as usize].0).collect();
                let p: Vec<f64> = sample.iter().map(|&i| pairs[i as usize].1).collect();
                median(&s) / median(&p)
            });
            rows.push(Row {
                vocab: n,
                layout: layout.key(),
                stock_ms: bootstrap_median(&stock).into(),
                patched_ms: bootstrap_median(&patched).into(),
                ratio: Ci {
                    median: ratio,
                    lo,
                    hi,
                },
            });
        }
    }
    Ok(Versus {
        finding: crate::FINDING,
        stock,
        patched,
        patched_sources_sha256: worker.sources.clone(),
        rounds,
        window: crate::penalty::WINDOW,
        theta: crate::penalty::THETA,
        layouts: Layout::ALL
            .iter()
            .map(|l| (l.key(), l.describe()))
            .collect(),
        same_bits: SAME_BITS,
        rows,
    })
}

/// The comparison as text, one line per row.
pub fn text(v: &Versus) -> String {
    let (stock, patched, rounds, rows) = (&v.stock, &v.patched, v.rounds, &v.rows);
    let mut out = format!(
        "llama.cpp's penalties stage per apply, {stock} against {patched}, {rounds} alternating rounds per row (median ms per apply, 95% bootstrap interval; {}):\n",
        v.same_bits
    );
    for r in rows {
        out += &format!(
            "  {:>7} candidates, {:<9} {stock} {:.4} [{:.4}, {:.4}]  {patched} {:.4} [{:.4}, {:.4}]  stock/patched {:.1}x [{:.1}, {:.1}]\n",
            r.vocab,
            r.layout,
            r.stock_ms.median,
            r.stock_ms.lo,
            r.stock_ms.hi,
            r.patched_ms.median,
            r.patched_ms.lo,
            r.patched_ms.hi,
            r.ratio.median,
            r.ratio.lo,
            r.ratio.hi
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generation_crosses_the_pipe_unchanged() {
        let g = Generation {
            ms_per_token: 36.123456789,
            tokens: vec![TokenId(5), TokenId(262_143), TokenId(0)],
            stop: Stop::Eos,
        };
        let line = generation_line(&g);
        assert_eq!(line, "36.123456789 eos 5,262143,0");
        assert_eq!(parse_generation(&line).unwrap(), g);
        for bad in [
            "",
            "1.0 eos",
            "x eos 1",
            "1.0 done 1",
            "1.0 limit 1,,2",
            "1 limit 1 2",
        ] {
            assert!(parse_generation(bad).is_err(), "{bad}");
        }
    }
}
