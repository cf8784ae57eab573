//! The exhaustive accept-sequence sweep (F1 c), clone equivalence at every prefix (F1 d) and
//! the reset audit, all judged against the from-scratch window histogram.
//!
//! For each case (alphabet size `a`, window `n`, length `L`) every one of the `a^L` sequences
//! over ids `0..a` is replayed from a reset ledger. After the reset and after every accept the
//! ledger's counts for all `a` ids are compared with `oracle::window::histogram` of the prefix.
//! With clone checks on, the ledger is also cloned before every accept, and every live clone
//! is fed the same remaining tokens and compared at every step.

use crate::counts::Counts;
use anyhow::Result;
use oracle::window::{dense_histogram, WindowLen};
use oracle::TokenId;
use serde::ser::SerializeMap as _;
use serde::{Serialize, Serializer};

/// One slice of the domain: all sequences of `len` ids drawn from `0..alphabet`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SweepSlice {
    pub alphabet: usize,
    pub last_n: WindowLen,
    pub len: usize,
}

impl SweepSlice {
    pub fn sequences(&self) -> u64 {
        (self.alphabet as u64).pow(self.len as u32)
    }

    pub fn label(&self) -> String {
        format!("a={} n={} L={}", self.alphabet, self.last_n.0, self.len)
    }
}

/// A slice as the audit's JSON lists its domain: its shape and its number of sequences.
impl Serialize for SweepSlice {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(4))?;
        m.serialize_entry("alphabet", &self.alphabet)?;
        m.serialize_entry("last_n", &self.last_n.0)?;
        m.serialize_entry("len", &self.len)?;
        m.serialize_entry("sequences", &self.sequences())?;
        m.end()
    }
}

/// Windows the published audit used.
pub const WINDOWS: [usize; 5] = [1, 2, 3, 4, 8];

/// The size of the sweep's domain: alphabets `2..=max_alphabet`, and for each the longest
/// length `L` with `a^L <= 2^bits` (at least `n + 1`, so every window is filled and evicted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SweepBudget {
    pub bits: u32,
    pub max_alphabet: usize,
}

impl SweepBudget {
    /// The audit's domain, at least the published sweep's size: alphabets 2 to 5, `2^17`.
    pub const AUDIT: SweepBudget = SweepBudget {
        bits: 17,
        max_alphabet: 5,
    };

    /// The longest length `L` with `alphabet^L <= 2^bits`.
    fn len(&self, alphabet: usize) -> usize {
        let fits = |len: u32| (alphabet as u64).pow(len) <= 1 << self.bits;
        (1..).take_while(|&len| fits(len)).count()
    }
}

/// The domain of `budget`: windows {1,2,3,4,8} for each alphabet, each at the longer of the
/// budget length and `n + 1` (short windows are filled and evicted many times: at the audit's
/// budget a=2 runs 17 accepts through every window).
pub fn domain(budget: SweepBudget) -> Vec<SweepSlice> {
    let mut cases = Vec::new();
    for alphabet in 2..=budget.max_alphabet {
        for n in WINDOWS {
            cases.push(SweepSlice {
                alphabet,
                last_n: WindowLen(n),
                len: budget.len(alphabet).max(n + 1),
            });
        }
    }
    cases
}

/// A smaller domain with the same windows, used by the controls.
pub fn control_domain() -> Vec<SweepSlice> {
    WINDOWS
        .iter()
        .map(|&n| SweepSlice {
            alphabet: 3,
            last_n: WindowLen(n),
            len: n + 4,
        })
        .collect()
}

/// The first step at which a ledger disagreed with the oracle.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Mismatch {
    #[serde(serialize_with = "case_label")]
    pub case: SweepSlice,
    pub sequence: Vec<i32>,
    /// For clone mismatches, the number of accepts before the clone was taken.
    pub cloned_at: Option<usize>,
    /// Accepts done before the readout (0 = right after reset).
    pub step: usize,
    #[serde(rename = "ledger_counts")]
    pub got: Vec<i64>,
    #[serde(rename = "oracle_counts")]
    pub want: Vec<i64>,
}

fn case_label<S: Serializer>(case: &SweepSlice, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&case.label())
}

impl Mismatch {
    pub fn describe(&self) -> String {
        let clone = match self.cloned_at {
            Some(k) => format!(", clone taken after {k} accepts"),
            None => String::new(),
        };
        format!(
            "{} sequence {:?}{clone}, after {} accepts: ledger {:?}, oracle {:?}",
            self.case.label(),
            self.sequence,
            self.step,
            self.got,
            self.want
        )
    }
}

/// One kind of readout compared with the oracle: how many were made, how many disagreed, and
/// the first that did (in sequence order).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Readouts {
    pub checks: u64,
    pub mismatches: u64,
    pub first: Option<Mismatch>,
}

impl Readouts {
    /// Records one readout against the oracle; returns whether it disagreed. `example`
    /// describes it, and is only called for the first disagreement.
    fn record(&mut self, got: &[i64], want: &[i64], example: impl FnOnce() -> Mismatch) -> bool {
        self.checks += 1;
        let wrong = got != want;
        if wrong {
            self.mismatches += 1;
            if self.first.is_none() {
                self.first = Some(example());
            }
        }
        wrong
    }

    /// Adds `later` (readouts of sequences after this one's) into `self`.
    fn absorb(&mut self, later: Readouts) {
        self.checks += later.checks;
        self.mismatches += later.mismatches;
        if self.first.is_none() {
            self.first = later.first;
        }
    }
}

/// Totals for one run over some cases.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    pub sequences: u64,
    /// The main ledger read after every accept.
    pub accept: Readouts,
    /// The main ledger read right after every reset.
    pub reset: Readouts,
    pub clones: u64,
    /// Every clone read when taken and after every later accept.
    pub clone_reads: Readouts,
    /// Clones that disagreed at least once.
    pub divergent_clones: u64,
}

impl Stats {
    /// Adds `later` (which covers sequences after this one's) into `self`.
    fn absorb(&mut self, later: Stats) {
        self.sequences += later.sequences;
        self.accept.absorb(later.accept);
        self.reset.absorb(later.reset);
        self.clones += later.clones;
        self.clone_reads.absorb(later.clone_reads);
        self.divergent_clones += later.divergent_clones;
    }

    /// Joins an accept-only pass and a clone-only pass over the same sequences.
    pub fn join_passes(accept: Stats, clones: Stats) -> Stats {
        debug_assert_eq!(accept.sequences, clones.sequences);
        Stats {
            clones: clones.clones,
            clone_reads: clones.clone_reads,
            divergent_clones: clones.divergent_clones,
            ..accept
        }
    }
}

impl Serialize for Stats {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Written<'a> {
            sequences: u64,
            steps: u64,
            mismatches: u64,
            first_mismatch: &'a Option<Mismatch>,
            reset_checks: u64,
            reset_mismatches: u64,
            first_reset_mismatch: &'a Option<Mismatch>,
            clones: u64,
            clone_steps: u64,
            clone_step_mismatches: u64,
            divergent_clones: u64,
            first_clone_mismatch: &'a Option<Mismatch>,
        }
        Written {
            sequences: self.sequences,
            steps: self.accept.checks,
            mismatches: self.accept.mismatches,
            first_mismatch: &self.accept.first,
            reset_checks: self.reset.checks,
            reset_mismatches: self.reset.mismatches,
            first_reset_mismatch: &self.reset.first,
            clones: self.clones,
            clone_steps: self.clone_reads.checks,
            clone_step_mismatches: self.clone_reads.mismatches,
            divergent_clones: self.divergent_clones,
            first_clone_mismatch: &self.clone_reads.first,
        }
        .serialize(s)
    }
}

/// Which readouts a pass makes. The accept/reset readouts and the clone readouts are
/// independent, so an audit can time them as separate passes over the same sequences.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checks {
    All,
    /// Read the ledger after every reset and after every accept.
    Accept,
    /// Clone before every accept; read each clone at once and after every later accept.
    Clones,
}

impl Checks {
    fn accept(self) -> bool {
        self != Checks::Clones
    }

    fn clones(self) -> bool {
        self != Checks::Accept
    }
}

/// Writes the base-`a` digits of `index` (most significant first) into `seq`.
fn decode(mut index: u64, alphabet: usize, seq: &mut [TokenId]) {
    for slot in seq.iter_mut().rev() {
        *slot = TokenId((index % alphabet as u64) as i32);
        index /= alphabet as u64;
    }
}

/// Moves `seq` to the next sequence in lexicographic order.
fn increment(alphabet: usize, seq: &mut [TokenId]) {
    for slot in seq.iter_mut().rev() {
        slot.0 += 1;
        if (slot.0 as usize) < alphabet {
            return;
        }
        slot.0 = 0;
    }
}

/// One worker's share: sequences `start..end` of `case`.
fn run_range<L: Counts>(
    case: SweepSlice,
    start: u64,
    end: u64,
    make: &(dyn Fn(&[TokenId], WindowLen) -> Result<L> + Sync),
    checks: Checks,
) -> Result<Stats> {
    let a = case.alphabet;
    let ids: Vec<TokenId> = (0..a as i32).map(TokenId).collect();
    let mut ledger = make(&ids, case.last_n)?;
    let mut stats = Stats::default();
    let mut seq = vec![TokenId(0); case.len];
    decode(start, a, &mut seq);
    let mut got = vec![0i64; a];
    // The oracle's counts for the prefix accepted so far (empty after a reset).
    let mut want = vec![0i64; a];
    let mut clones: Vec<(usize, L, bool)> = Vec::with_capacity(case.len);
    let example = |seq: &[TokenId], step, cloned_at, got: &[i64], want: &[i64]| Mismatch {
        case,
        sequence: seq.iter().map(|t| t.0).collect(),
        step,
        cloned_at,
        got: got.to_vec(),
        want: want.to_vec(),
    };
    for _ in start..end {
        stats.sequences += 1;
        ledger.reset()?;
        want.fill(0);
        if checks.accept() {
            ledger.read(&mut got)?;
            stats
                .reset
                .record(&got, &want, || example(&seq, 0, None, &got, &want));
        }
        clones.clear();
        for step in 0..case.len {
            if checks.clones() {
                let mut clone = ledger.fork()?;
                clone.read(&mut got)?;
                stats.clones += 1;
                let diverged = stats
                    .clone_reads
                    .record(&got, &want, || example(&seq, step, Some(step), &got, &want));
                stats.divergent_clones += u64::from(diverged);
                clones.push((step, clone, diverged));
            }
            ledger.accept(seq[step])?;
            dense_histogram(&seq[..=step], case.last_n, &mut want);
            if checks.accept() {
                ledger.read(&mut got)?;
                stats
                    .accept
                    .record(&got, &want, || example(&seq, step + 1, None, &got, &want));
            }
            for (cloned_at, clone, diverged) in clones.iter_mut() {
                clone.accept(seq[step])?;
                clone.read(&mut got)?;
                let wrong = stats.clone_reads.record(&got, &want, || {
                    example(&seq, step + 1, Some(*cloned_at), &got, &want)
                });
                if wrong && !*diverged {
                    *diverged = true;
                    stats.divergent_clones += 1;
                }
            }
        }
        increment(a, &mut seq);
    }
    Ok(stats)
}

/// Runs every case, splitting each case's sequences across `threads` workers in contiguous
/// index ranges. Totals and "first" examples do not depend on the thread count.
pub fn run<L: Counts>(
    cases: &[SweepSlice],
    make: &(dyn Fn(&[TokenId], WindowLen) -> Result<L> + Sync),
    checks: Checks,
    threads: usize,
) -> Result<Stats> {
    let threads = threads.max(1) as u64;
    let mut total = Stats::default();
    let all: u64 = cases.iter().map(SweepSlice::sequences).sum();
    let mut progress = cmdline::Progress::new("F1 clone sweep, sequences", all);
    for &case in cases {
        let n = case.sequences();
        let parts: Vec<Result<Stats>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let (start, end) = (n * t / threads, n * (t + 1) / threads);
                    scope.spawn(move || run_range(case, start, end, make, checks))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| anyhow::bail!("a sweep worker panicked"))
                })
                .collect()
        });
        for part in parts {
            total.absorb(part?);
        }
        progress.inc(n);
    }
    progress.finish();
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domain_meets_the_published_size() {
        let total: u64 = domain(SweepBudget::AUDIT)
            .iter()
            .map(SweepSlice::sequences)
            .sum();
        assert!(total >= 3_010_612, "{total}");
        for case in domain(SweepBudget::AUDIT) {
            assert!(case.len > case.last_n.0, "{case:?} never evicts");
        }
    }

    #[test]
    fn a_smaller_budget_keeps_every_window_and_evicts() {
        let small = domain(SweepBudget {
            bits: 12,
            max_alphabet: 3,
        });
        let labels: Vec<String> = small.iter().map(SweepSlice::label).collect();
        assert_eq!(
            labels,
            [
                "a=2 n=1 L=12",
                "a=2 n=2 L=12",
                "a=2 n=3 L=12",
                "a=2 n=4 L=12",
                "a=2 n=8 L=12",
                "a=3 n=1 L=7",
                "a=3 n=2 L=7",
                "a=3 n=3 L=7",
                "a=3 n=4 L=7",
                "a=3 n=8 L=9",
            ]
        );
    }

    #[test]
    fn decode_and_increment_agree() {
        let mut a = vec![TokenId(0); 4];
        let mut b = vec![TokenId(0); 4];
        for i in 0..81 {
            decode(i, 3, &mut a);
            assert_eq!(a, b);
            increment(3, &mut b);
        }
    }
}
