//! llama.cpp's penalties stage on two builds, timed turn by turn in one run: this process
//! (the stock build) and a worker child of the same program built against another llama.cpp
//! (the patched build, `b11429+fixes`). Two static llama.cpp libraries cannot share one
//! process, so the child times its own applies and reports them on a pipe; the rounds
//! alternate which side goes first, so machine noise reaches both alike.
//!
//! Before any timing, both sides apply the stage once to the same array and must leave the same
//! bits (a checksum over every id and logit): the ratio compares the same work or the run
//! stops. The worker's protocol is one line each way:
//! `apply <vocab> <layout>` -> `<ms> <checksum>`.

use crate::layout::{Layout, Workload};
use crate::penalty::builtin_penalties;
use crate::stats::{bootstrap_median, median, MedianCi};
use anyhow::{bail, ensure, Context, Result};
use oracle::stats::bootstrap;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;
use subject::{IdOrder, LogitsArray, Sampler};

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

/// The worker: answers `apply <vocab> <layout>` lines on stdin until it closes.
pub fn serve() -> Result<()> {
    let mut benches: BTreeMap<usize, Bench> = BTreeMap::new();
    let stdout = std::io::stdout();
    for line in std::io::stdin().lock().lines() {
        let line = line.context("reading the parent's request")?;
        if line == "build" {
            let mut out = stdout.lock();
            writeln!(out, "{}", subject::BuildInfo::current().tag())?;
            out.flush()?;
            continue;
        }
        let parts: Vec<&str> = line.split_whitespace().collect();
        let [_, n, layout] = parts[..] else {
            bail!("worker: bad request '{line}'");
        };
        let n: usize = n.parse().context("worker: vocabulary size")?;
        let bench = match benches.entry(n) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => e.insert(Bench::new(n)?),
        };
        let (ms, sum) = bench.apply(layout_of(layout)?)?;
        let mut out = stdout.lock();
        writeln!(out, "{ms} {sum}")?;
        out.flush()?;
    }
    Ok(())
}

/// The child worker, killed when dropped.
struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Worker {
    fn start(bin: &Path) -> Result<Worker> {
        let mut child = Command::new(bin)
            .arg("--worker")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let stdin = child.stdin.take().context("the worker's stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("the worker's stdout")?);
        Ok(Worker {
            child,
            stdin,
            stdout,
        })
    }

    /// The build the worker links.
    fn build(&mut self) -> Result<String> {
        writeln!(self.stdin, "build")?;
        self.stdin.flush()?;
        let mut line = String::new();
        self.stdout.read_line(&mut line)?;
        ensure!(!line.trim().is_empty(), "the worker did not name its build");
        Ok(line.trim().to_string())
    }

    fn apply(&mut self, n: usize, layout: Layout) -> Result<(f64, u64)> {
        writeln!(self.stdin, "apply {n} {}", layout.key())?;
        self.stdin.flush()?;
        let mut line = String::new();
        self.stdout.read_line(&mut line)?;
        let mut it = line.split_whitespace();
        let (Some(ms), Some(sum)) = (it.next(), it.next()) else {
            bail!("the worker stopped answering (it said '{}')", line.trim());
        };
        Ok((ms.parse()?, sum.parse()?))
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
    pub rounds: usize,
    pub window: usize,
    pub theta: f32,
    pub rows: Vec<Row>,
}

/// `rounds` alternating turns per vocabulary and layout against the worker `bin`.
pub fn compare(bin: &Path, vocabs: &[usize], rounds: usize) -> Result<Versus> {
    let mut worker = Worker::start(bin)?;
    let patched = worker.build()?;
    let stock = subject::BuildInfo::current().tag().to_string();
    ensure!(
        stock != patched,
        "{} links the same build as this one ({stock}); give the patched build's penalty-cost",
        bin.display()
    );
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
        rounds,
        window: crate::penalty::WINDOW,
        theta: crate::penalty::THETA,
        rows,
    })
}

/// The comparison as text, one line per row.
pub fn text(v: &Versus) -> String {
    let (stock, patched, rounds, rows) = (&v.stock, &v.patched, v.rounds, &v.rows);
    let mut out = format!(
        "llama.cpp's penalties stage, {stock} against {patched}, {rounds} alternating rounds per row (median ms per apply, 95% bootstrap interval):\n"
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
