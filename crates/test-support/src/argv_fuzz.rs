//! Command-line fuzzing for the binaries' contract. From a list of a binary's real flags, a
//! seeded generator builds argument vectors (unknown and repeated flags, missing and empty
//! values, huge, tiny and non-finite numbers, unicode and invalid UTF-8, lists of thousands of
//! items, valid values mixed in). [`in_process`] hands every vector to the binary's `check`
//! through `cmdline::decide` and holds each decision to the contract's line rules
//! ([`decision_problem`]); `decide` itself makes any refusal one `error` line, so what this
//! finds is mostly a panic or a slow check. It tallies how the vectors ended ([`Tally`]). The
//! contract on the wire (exit codes, stdout, a closed pipe, a contained model load) is each
//! binary's `Doors` test, which runs every case as a process under a deadline and holds each
//! refusal and `--help` to [`Outcome::problem`].
//!
//! A failing vector is shrunk (arguments dropped while it still fails) and printed so it can
//! be run again by hand.

use cmdline::{Decision, Failure};
use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

/// One flag of a binary, as the generator uses it.
#[derive(Debug, Clone)]
pub struct Flag {
    /// `--last-n`; empty for a positional argument.
    pub name: &'static str,
    /// Valid values (the generator mixes them in and mutates them); empty for a switch.
    pub good: Vec<OsString>,
    /// Values that are valid but slow to check (a known model name makes the binary hash a
    /// 100-250 MB file): each vector uses one with probability 1/200 at most.
    pub rare: Vec<OsString>,
}

impl Flag {
    /// A flag without a value (`--json`).
    pub fn switch(name: &'static str) -> Flag {
        Flag::value(name, &[])
    }

    /// A flag that takes a value, with some valid values.
    pub fn value(name: &'static str, good: &[&str]) -> Flag {
        Flag {
            name,
            good: good.iter().map(OsString::from).collect(),
            rare: Vec::new(),
        }
    }

    /// A positional argument, with some valid values.
    pub fn positional(good: &[&str]) -> Flag {
        Flag::value("", good)
    }

    /// More valid values (paths made at run time, say).
    pub fn with_good(mut self, good: impl IntoIterator<Item = impl Into<OsString>>) -> Flag {
        self.good.extend(good.into_iter().map(Into::into));
        self
    }

    /// Valid values that are slow to check (see [`Flag::rare`]).
    pub fn with_rare(mut self, rare: &[&str]) -> Flag {
        self.rare.extend(rare.iter().map(OsString::from));
        self
    }

    /// `--results` (`cmdline::Output`'s folder): a relative, a missing and a writable one.
    pub fn results() -> Flag {
        let tmp = std::env::temp_dir().display().to_string();
        Flag::value("--results", &["results", "/no/such/dir"]).with_good([tmp])
    }

    fn is_switch(&self) -> bool {
        self.good.is_empty() && !self.name.is_empty()
    }
}

/// What to fuzz and how much.
pub struct Fuzz {
    /// The binary (`env!("CARGO_BIN_EXE_repro-x")`).
    pub bin: PathBuf,
    /// Its flags.
    pub flags: Vec<Flag>,
    /// Environment variables [`in_process`] sets in this process while it runs.
    pub env: Vec<(OsString, OsString)>,
    /// Vectors to generate and check.
    pub vectors: usize,
    pub seed: u64,
    /// A decision that took longer counts as a failure. It is measured when the decision
    /// returns, so a check that never returns hangs the test rather than failing it.
    pub timeout: Duration,
}

impl Fuzz {
    /// 10,000 vectors, 20 s each at most (a vector costs microseconds in process).
    pub fn new(bin: impl Into<PathBuf>, flags: Vec<Flag>, seed: u64) -> Fuzz {
        Fuzz {
            bin: bin.into(),
            flags,
            env: Vec::new(),
            vectors: 10_000,
            seed,
            timeout: Duration::from_secs(20),
        }
    }

    /// One more environment variable for every run.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Fuzz {
        self.env.push((key.into(), value.into()));
        self
    }

    fn name(&self) -> String {
        self.bin
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned()
    }
}

/// What the vectors came to in process.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    pub vectors: usize,
    /// Help texts printed.
    pub printed: usize,
    /// Vectors that passed the checks (a config).
    pub ran: usize,
    /// Vectors refused, with the first 200 bytes of each line.
    pub stopped: Vec<String>,
}

impl Tally {
    /// Refusals whose line holds `text`.
    pub fn stopped_with(&self, text: &str) -> usize {
        self.stopped.iter().filter(|l| l.contains(text)).count()
    }
}

/// A seeded generator (splitmix64): the same seed gives the same vectors on every machine.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True with probability `per_mille` / 1000.
    fn chance(&mut self, per_mille: usize) -> bool {
        self.below(1000) < per_mille
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Numbers at and past the edges of every type a flag is parsed into.
pub const NASTY_NUMBERS: &[&str] = &[
    "1e39",
    "-1e-45",
    "1e-45",
    "18446744073709551616",
    "18446744073709551615",
    "-9223372036854775809",
    "9223372036854775807",
    "2147483647",
    "2147483648",
    "-2147483648",
    "-2147483649",
    "4294967296",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "infinity",
    "-0",
    "-0.0",
    "0",
    "1",
    "-1",
    "0.5",
    "1e-3",
    "1e4",
    "1e308",
    "3.4028235e38",
    "0x10",
    "1_000",
    "+5",
    "4096",
    "4097",
    "65536",
    "262143",
    "262144",
    "1048576",
    "1048577",
    "1000000",
    "1000001",
];

/// Text a flag value should never trip over.
const ODD_TEXT: &[&str] = &[
    "é",
    "日本語",
    "🦀",
    "\u{202e}4",
    "４",
    "٣",
    "1\u{a0}",
    "Ⅻ",
    "\u{feff}1",
    "a\nb",
    "1\r",
    "\t",
    " ",
    ",",
    ",,",
    " , ",
    ":",
    "=",
    "/",
    "-",
    "--",
    "--json",
    "-h",
    ".",
    "..",
    "/dev/null",
];

/// Bytes that are not UTF-8.
const NOT_UTF8: &[&[u8]] = &[
    b"\xff",
    b"1\x80",
    b"\xc3",
    b"top_k=\xff",
    b"\xed\xa0\x80",
    b"4,\xfe,5",
];

/// Flags no binary has.
const UNKNOWN_FLAGS: &[&str] = &[
    "--bogus",
    "--no-such-flag=1",
    "-x",
    "--JSON",
    "--last_n",
    "---json",
    "-",
    "--",
    "junk",
];

/// The single Linux limit on one argument is 128 KiB; long lists stay under it.
const MAX_ARG_BYTES: usize = 100_000;

/// One of `values`, as bytes.
fn one_of(g: &mut Gen, values: &[OsString]) -> Vec<u8> {
    g.pick(values).as_bytes().to_vec()
}

/// `good` with one run of digits replaced by a nasty number (`top_p=0.8:3` ->
/// `top_p=nan:3`), or unchanged when it has no digits.
fn mutate(g: &mut Gen, good: &[u8]) -> Vec<u8> {
    let mut runs = Vec::new();
    let mut i = 0;
    while i < good.len() {
        if good[i].is_ascii_digit() {
            let start = i;
            while i < good.len() && (good[i].is_ascii_digit() || good[i] == b'.') {
                i += 1;
            }
            runs.push((start, i));
        } else {
            i += 1;
        }
    }
    if runs.is_empty() {
        return good.to_vec();
    }
    let (a, b) = *g.pick(&runs);
    [&good[..a], g.pick(NASTY_NUMBERS).as_bytes(), &good[b..]].concat()
}

/// A comma list of hundreds or thousands of items drawn from the parts of `good` values and
/// nasty numbers.
fn long_list(g: &mut Gen, good: &[OsString]) -> Vec<u8> {
    let items = *g.pick(&[100usize, 1000, 3000, 5000, 20_000]);
    let parts: Vec<&[u8]> = good
        .iter()
        .flat_map(|v| v.as_bytes().split(|&b| b == b','))
        .collect();
    let mut out = Vec::new();
    for k in 0..items {
        let item = if !parts.is_empty() && g.chance(800) {
            *g.pick(&parts)
        } else {
            g.pick(NASTY_NUMBERS).as_bytes()
        };
        if out.len() + item.len() + 1 > MAX_ARG_BYTES {
            break;
        }
        if k > 0 {
            out.push(b',');
        }
        out.extend_from_slice(item);
    }
    out
}

/// A value for `flag`: mostly valid or nearly so, often hostile.
fn value(g: &mut Gen, flag: &Flag) -> OsString {
    if !flag.rare.is_empty() && g.chance(5) {
        return g.pick(&flag.rare).clone();
    }
    let good = &flag.good;
    let v: Vec<u8> = match g.below(100) {
        0..=34 => one_of(g, good),
        35..=49 => {
            let base = one_of(g, good);
            mutate(g, &base)
        }
        50..=63 => g.pick(NASTY_NUMBERS).as_bytes().to_vec(),
        64..=71 => long_list(g, good),
        72..=75 => Vec::new(),
        76..=85 => g.pick(ODD_TEXT).as_bytes().to_vec(),
        86..=90 => g.pick(NOT_UTF8).to_vec(),
        91..=95 => {
            // A valid value with odd text after or before it.
            let (v, odd) = (one_of(g, good), g.pick(ODD_TEXT).as_bytes());
            match g.chance(500) {
                true => [&v[..], odd].concat(),
                false => [odd, &v[..]].concat(),
            }
        }
        // Two valid values joined with a comma.
        _ => [one_of(g, good), b",".to_vec(), one_of(g, good)].concat(),
    };
    OsString::from_vec(v)
}

/// One argument vector (without the program name).
fn generate(g: &mut Gen, flags: &[Flag]) -> Vec<OsString> {
    let mut argv = Vec::new();
    // One vector in eight uses only valid values of real flags: those reach the end of the
    // checks (exit 0) or a refusal of a combination.
    let clean = g.chance(125);
    let n = *g.pick(&[0usize, 1, 1, 2, 2, 2, 3, 3, 4, 5, 6, 9]);
    for _ in 0..n {
        let roll = if clean { 0 } else { g.below(100) };
        match roll {
            0..=79 => {
                let flag = g.pick(flags);
                if flag.is_switch() {
                    argv.push(OsString::from(flag.name));
                    if !clean && g.chance(50) {
                        // A value given to a switch.
                        argv.push(value(g, &Flag::positional(&["1"])));
                    }
                    continue;
                }
                let v = if clean {
                    g.pick(&flag.good).clone()
                } else {
                    value(g, flag)
                };
                if flag.name.is_empty() {
                    argv.push(v);
                } else if clean || g.chance(850) {
                    argv.push(OsString::from(flag.name));
                    argv.push(v);
                } else if g.chance(500) {
                    let mut joined = OsString::from(format!("{}=", flag.name));
                    joined.push(v);
                    argv.push(joined);
                } else {
                    // The value left out: the flag is last, or takes the next argument.
                    argv.push(OsString::from(flag.name));
                }
            }
            80..=89 => argv.push(OsString::from(*g.pick(UNKNOWN_FLAGS))),
            90..=94 => argv.push(value(g, &Flag::positional(&["x"]))),
            95 => argv.push(OsString::from(*g.pick(&["--help", "-h"]))),
            _ => {
                // Repeat an argument already given.
                if let Some(a) = argv.last().cloned() {
                    argv.push(a);
                }
            }
        }
    }
    argv
}

/// A shell-like rendering of a failing command, with bytes that are not UTF-8 escaped.
pub fn render(bin: &Path, env: &[(OsString, OsString)], argv: &[OsString]) -> String {
    let quote = |s: &OsStr| -> String {
        match s.to_str() {
            Some(t)
                if !t.is_empty()
                    && t.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_=.,:/+".contains(c)) =>
            {
                t.to_string()
            }
            Some(t) if !t.contains(['\'', '\n', '\r', '\\']) && t.is_ascii() => format!("'{t}'"),
            _ => {
                let escaped = s.as_bytes().iter().map(|&b| match b {
                    b' '..=b'~' if b != b'\'' && b != b'\\' => (b as char).to_string(),
                    _ => format!("\\x{b:02x}"),
                });
                format!("$'{}'", escaped.collect::<String>())
            }
        }
    };
    let mut parts = vec!["SAMPLER_AUDIT_CHECK_ONLY=1".to_string()];
    for (k, v) in env {
        parts.push(format!("{}={}", k.to_string_lossy(), quote(v)));
    }
    parts.push(bin.display().to_string());
    parts.extend(argv.iter().map(|a| quote(a)));
    let line = parts.join(" ");
    if line.len() > 2000 {
        let cut: String = line.chars().take(2000).collect();
        format!("{cut}... ({} bytes in all)", line.len())
    } else {
        line
    }
}

/// How one run ended (no status: killed at the timeout).
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub status: Option<ExitStatus>,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Outcome {
    /// What breaks the contract, if anything: the rules of [`decision_problem`] for the line
    /// on stderr, and what only a process can break besides.
    pub fn problem(&self) -> Option<String> {
        let Some(status) = self.status else {
            return Some("no exit within the timeout (killed)".to_string());
        };
        let Some(code) = status.code() else {
            return Some(format!("ended by a signal ({status})"));
        };
        let err = &self.stderr;
        match code {
            0 if !err.is_empty() => Some(format!("exit 0 with stderr: {err}")),
            0 => None,
            2 if !self.stdout.is_empty() => Some("exit 2 with output on stdout".to_string()),
            _ => match err.strip_suffix('\n') {
                Some(line) => decision_problem(&Decision::<()>::Stop(code, line.to_string())),
                None => Some(format!(
                    "exit {code} with stderr not ending its line: {err:?}"
                )),
            },
        }
    }

    pub fn code(&self) -> Option<i32> {
        self.status.and_then(|s| s.code())
    }
}

/// Drops arguments (one, or a flag with its value) from a failing vector while it still
/// fails, then halves each comma list while it still fails, so that the printed vector is
/// short.
fn shrink(argv: &[OsString], fails: impl Fn(&[OsString]) -> bool) -> Vec<OsString> {
    let mut best = argv.to_vec();
    let mut progress = true;
    while progress {
        progress = false;
        for (i, width) in (0..best.len()).flat_map(|i| [(i, 1), (i, 2)]) {
            let mut cand = best.clone();
            cand.drain(i..(i + width).min(best.len()));
            if fails(&cand) {
                best = cand;
                progress = true;
                break;
            }
        }
    }
    for i in 0..best.len() {
        loop {
            let items: Vec<Vec<u8>> = best[i]
                .as_bytes()
                .split(|&b| b == b',')
                .map(<[u8]>::to_vec)
                .collect();
            if items.len() < 2 {
                break;
            }
            let (front, back) = items.split_at(items.len() / 2);
            let halves = [front.join(&b","[..]), back.join(&b","[..])];
            let cut = halves.into_iter().find_map(|half| {
                let mut cand = best.clone();
                cand[i] = OsString::from_vec(half);
                fails(&cand).then_some(cand)
            });
            match cut {
                Some(cand) => best = cand,
                None => break,
            }
        }
    }
    best
}

/// The panic that stops a fuzz on the first failing vector `whole` (number `i`): why, and the
/// vector shrunk while `judge` still finds a problem in it.
fn stop_on(
    fuzz: &Fuzz,
    (how, i, whole): (&str, usize, &[OsString]),
    problem: &str,
    judge: impl Fn(&[OsString]) -> Option<String>,
) -> ! {
    let small = shrink(whole, |cand| judge(cand).is_some());
    panic!(
        "argv fuzz of {} {how} (seed {:#x}), vector {i}: {problem}\n  shrunk: {}\n  shrunk run: {}\n  whole:  {}",
        fuzz.bin.display(),
        fuzz.seed,
        render(&fuzz.bin, &fuzz.env, &small),
        judge(&small).unwrap_or_else(|| "passes (flaky?)".to_string()),
        render(&fuzz.bin, &fuzz.env, whole),
    )
}

/// The argument vectors `fuzz` generates, in order.
pub fn vectors(fuzz: &Fuzz) -> Vec<Vec<OsString>> {
    let mut g = Gen(fuzz.seed);
    (0..fuzz.vectors)
        .map(|_| generate(&mut g, &fuzz.flags))
        .collect()
}

/// One line past the test harness's capture (a direct write to stderr), so `cargo test`
/// shows what a fuzz did.
fn tell(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// What breaks the contract in a line a process writes to stderr with its exit code, if
/// anything: the line is one line, starts with `error`, tells of no panic, and comes with exit
/// 1 or 2; a help text must not be empty. [`in_process`] applies it to every decision,
/// [`Outcome::problem`] to every refusal and `--help` a `Doors` test runs.
pub fn decision_problem<C>(d: &Decision<C>) -> Option<String> {
    match d {
        Decision::Print(text) if text.is_empty() => Some("printed an empty help text".to_string()),
        Decision::Print(_) | Decision::Run(_) => None,
        Decision::Stop(_, line) if line.contains("internal error") || line.contains("panicked") => {
            Some(format!("panicked: {line}"))
        }
        Decision::Stop(code, line) if line.contains('\n') => Some(format!(
            "exit {code} with {} lines on stderr: {line}",
            line.matches('\n').count() + 1
        )),
        Decision::Stop(code, line) if !line.starts_with("error") => {
            Some(format!("exit {code}, stderr not an error line: {line}"))
        }
        Decision::Stop(1 | 2, _) => None,
        Decision::Stop(code, line) => Some(format!(
            "exit {code} (a refusal exits 2, a failure 1): {line}"
        )),
    }
}

/// Runs `f` with `fuzz.env` set in this process, under [`crate::ENV`]'s write guard (none for
/// a fuzz without variables), and puts the old values back after it, a panic included.
fn with_env<R>(fuzz: &Fuzz, f: impl FnOnce() -> R) -> R {
    let _guard =
        (!fuzz.env.is_empty()).then(|| crate::ENV.write().unwrap_or_else(|e| e.into_inner()));
    let old: Vec<_> = fuzz
        .env
        .iter()
        .map(|(k, _)| (k, std::env::var_os(k)))
        .collect();
    for (k, v) in &fuzz.env {
        std::env::set_var(k, v);
    }
    let ended = catch_unwind(AssertUnwindSafe(f));
    for (k, was) in old {
        match was {
            Some(v) => std::env::set_var(k, v),
            None => std::env::remove_var(k),
        }
    }
    ended.unwrap_or_else(|p| std::panic::resume_unwind(p))
}

/// Hands every vector of `fuzz` to `check` in process, through `cmdline::decide` (clap's parse
/// of the binary's `A`, then `check`), with `fuzz.env` set; panics on the first vector whose
/// parse or check panics, whose decision breaks [`decision_problem`]'s rules or takes longer
/// than `fuzz.timeout`, printing it shrunk and whole, and tallies the decisions of the rest.
///
/// A check that would load a model in a contained child refuses in process instead: this
/// process serves no contained task (its main is the test harness), so
/// `contain::Task::command` refuses to start one, in one line; the child's load is checked by
/// process runs only (a binary's `Doors`).
pub fn in_process<A: clap::Parser, C>(
    fuzz: &Fuzz,
    check: impl Fn(A) -> Result<C, Failure>,
) -> Tally {
    let name = OsString::from(fuzz.name());
    let all = vectors(fuzz);
    let start = Instant::now();
    // The decision on `argv`, or what is wrong with taking it.
    let judged = |argv: &[OsString]| -> Result<Decision<C>, String> {
        let argv = std::iter::once(name.clone()).chain(argv.iter().cloned());
        let begun = Instant::now();
        let d = catch_unwind(AssertUnwindSafe(|| cmdline::decide(argv, &check))).map_err(|p| {
            let text = p.downcast_ref::<String>().map(String::as_str);
            let text = text.or_else(|| p.downcast_ref::<&str>().copied());
            format!("panicked in process: {}", text.unwrap_or_default())
        })?;
        let took = begun.elapsed();
        if took > fuzz.timeout {
            return Err(format!(
                "took {took:?} in process (over {:?})",
                fuzz.timeout
            ));
        }
        decision_problem(&d).map_or(Ok(d), Err)
    };
    let mut tally = Tally {
        vectors: all.len(),
        ..Tally::default()
    };
    with_env(fuzz, || {
        for (i, argv) in all.iter().enumerate() {
            match judged(argv) {
                Ok(Decision::Print(_)) => tally.printed += 1,
                Ok(Decision::Run(_)) => tally.ran += 1,
                Ok(Decision::Stop(_, line)) => {
                    let cut = line.char_indices().nth(200).map_or(line.len(), |(k, _)| k);
                    tally.stopped.push(line[..cut].to_string());
                }
                Err(p) => stop_on(fuzz, ("in process", i, argv), &p, |c| judged(c).err()),
            }
        }
    });
    tell(&format!(
        "argv fuzz {}: {} vectors in process (seed {:#x}) in {:.1} s: help x{}, checked x{}, refused x{}",
        fuzz.name(),
        tally.vectors,
        fuzz.seed,
        start.elapsed().as_secs_f64(),
        tally.printed,
        tally.ran,
        tally.stopped.len(),
    ));
    tally
}

/// [`in_process`] with the assertions every binary's fuzz makes: the vectors reached help,
/// refusals, one holding each of `reached` (for a binary that names a model, the model step:
/// `is not cached` in an empty cache, and `does not serve the contained task` for a path,
/// whose contained load cannot start a child in process), and (when `accepted`) a config.
pub fn assert_in_process<A: clap::Parser, C>(
    fuzz: &Fuzz,
    check: impl Fn(A) -> Result<C, Failure>,
    reached: &[&str],
    accepted: bool,
) -> Tally {
    let t = in_process(fuzz, check);
    assert!(t.printed > 0 && !t.stopped.is_empty(), "{t:?}");
    assert!(t.ran > 0 || !accepted, "{t:?}");
    for text in reached {
        assert!(t.stopped_with(text) > 0, "no refusal holds '{text}': {t:?}");
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags() -> Vec<Flag> {
        vec![
            Flag::switch("--json"),
            Flag::value("--last-n", &["4", "0"]),
            Flag::value("--stage", &["top_p=0.8:3"]).with_rare(&["smollm2"]),
        ]
    }

    #[test]
    fn the_same_seed_gives_the_same_vectors() {
        let f = Fuzz::new("x", flags(), 7);
        assert_eq!(vectors(&f), vectors(&f));
        let g = Fuzz::new("x", flags(), 8);
        assert_ne!(vectors(&f), vectors(&g));
    }

    #[test]
    fn vectors_hold_what_the_brief_asks_for() {
        let f = Fuzz::new("x", flags(), 1);
        let all: Vec<Vec<u8>> = vectors(&f)
            .iter()
            .flat_map(|v| v.iter().map(|a| a.as_bytes().to_vec()))
            .collect();
        let has = |needle: &[u8]| all.iter().any(|a| a == needle);
        for n in ["1e39", "-1e-45", "nan", "inf", "-inf", "-0", "--bogus", ""] {
            assert!(has(n.as_bytes()), "{n}");
        }
        assert!(all.iter().any(|a| std::str::from_utf8(a).is_err()));
        assert!(all
            .iter()
            .any(|a| a.iter().filter(|&&b| b == b',').count() >= 2000));
        assert!(all.iter().all(|a| a.len() <= MAX_ARG_BYTES + 64));
        // Known model names are rare.
        let rare = all.iter().filter(|a| a.as_slice() == b"smollm2").count();
        assert!(rare > 0 && rare * 100 <= f.vectors, "{rare}");
        // Repeated flags occur.
        assert!(vectors(&f).iter().any(|v| v
            .iter()
            .filter(|a| a.as_bytes() == b"--last-n")
            .count()
            >= 2));
    }

    #[test]
    fn mutation_replaces_one_number() {
        let mut g = Gen(3);
        for _ in 0..50 {
            let m = mutate(&mut g, b"top_p=0.8:3");
            assert!(m.starts_with(b"top_p="), "{}", String::from_utf8_lossy(&m));
        }
        assert_eq!(mutate(&mut g, b"greedy"), b"greedy");
    }

    /// The contract check on planted endings: each breach is named, each kept case passes.
    #[test]
    fn problem_names_every_breach_of_the_contract() {
        use std::os::unix::process::ExitStatusExt;
        let ending = |raw: i32, stdout: &str, stderr: &str| Outcome {
            status: Some(ExitStatus::from_raw(raw)),
            stdout: stdout.as_bytes().to_vec(),
            stderr: stderr.to_string(),
        };
        let exit = |code: i32| code << 8;
        for (o, why) in [
            (ending(11, "", ""), "signal"),
            (
                ending(exit(101), "", "error: internal error: x\n"),
                "panicked",
            ),
            (ending(exit(3), "", "error: x\n"), "a refusal exits 2"),
            (ending(exit(2), "", "error: x\nmore\n"), "2 lines"),
            (ending(exit(2), "", ""), "not ending its line"),
            (ending(exit(2), "", "error: x"), "not ending its line"),
            (ending(exit(2), "out", "error: x\n"), "stdout"),
            (ending(exit(1), "", "x\n"), "not an error line"),
            (ending(exit(0), "", "warning\n"), "exit 0 with stderr"),
        ] {
            let p = o.problem().unwrap_or_default();
            assert!(p.contains(why), "{o:?}: {p}");
        }
        for o in [
            ending(exit(0), "", ""),
            ending(exit(0), "help\n", ""),
            ending(exit(2), "", "error: x\n"),
            ending(exit(1), "", "error: y\n"),
        ] {
            assert_eq!(o.problem(), None, "{o:?}");
        }
        let hung = Outcome::default();
        assert!(hung.problem().unwrap().contains("timeout"));
    }

    /// A planted command line: the flags of [`flags`], and a check that panics on a value
    /// holding `nan` and refuses `--last-n 0` with a message of two lines.
    #[derive(clap::Parser)]
    struct Planted {
        #[arg(long)]
        json: bool,
        #[arg(long)]
        last_n: Option<String>,
        #[arg(long)]
        stage: Vec<String>,
    }

    fn planted_check(p: Planted) -> Result<usize, Failure> {
        let values = p.last_n.iter().chain(&p.stage);
        assert!(!values.clone().any(|v| v.contains("nan")), "planted panic");
        if p.last_n.as_deref() == Some("0") {
            return Err(Failure::BadInput(anyhow::anyhow!("first\nsecond")));
        }
        Ok(values.count() + usize::from(p.json))
    }

    /// The shrunk vector of a fuzz's panic message, as arguments.
    fn shrunk(text: &str) -> Vec<String> {
        let line = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("shrunk: "))
            .unwrap_or_else(|| panic!("no shrunk vector in: {text}"));
        line.split(' ').skip(2).map(str::to_string).collect()
    }

    fn caught<R: std::fmt::Debug>(f: impl FnOnce() -> R) -> String {
        let e = std::panic::catch_unwind(AssertUnwindSafe(f)).unwrap_err();
        e.downcast_ref::<String>().cloned().unwrap_or_default()
    }

    /// The control of [`in_process`]: a planted check that panics on `nan` stops the fuzz with
    /// the vector shrunk to the flag and its value. Without the panic, the tally counts help,
    /// configs and refusals (the planted two-line message is tallied as the one line `decide`
    /// makes of it).
    #[test]
    fn a_planted_panic_in_process_is_found_shrunk_and_printed() {
        let mut fuzz = Fuzz::new("planted", flags(), 5);
        fuzz.vectors = 2000;
        let text = caught(|| in_process(&fuzz, planted_check));
        let args = shrunk(&text);
        assert!(args.len() <= 2, "{text}");
        assert!(
            args.concat().contains("nan") && args.concat().len() < 30,
            "{text}"
        );
        assert!(
            text.contains("panicked in process: planted panic"),
            "{text}"
        );
        let t = in_process(&fuzz, |p: Planted| {
            if p.last_n.iter().chain(&p.stage).any(|v| v.contains("nan")) {
                return Err(Failure::BadInput(anyhow::anyhow!("refused\nnan")));
            }
            planted_check(p)
        });
        assert!(
            t.printed > 0 && t.ran > 0 && t.stopped_with("first second") > 0,
            "{t:?}"
        );
        assert!(t.stopped_with("refused nan") > 0, "{t:?}");
    }

    /// The rules [`in_process`] holds a decision to beside a panic: a refusal that tells of a
    /// panic, and a decision slower than the timeout, each stop the fuzz.
    #[test]
    fn in_process_stops_on_a_broken_rule_and_on_a_slow_check() {
        let mut fuzz = Fuzz::new("planted", flags(), 5);
        fuzz.vectors = 300;
        let told = caught(|| {
            in_process(&fuzz, |_: Planted| -> Result<(), Failure> {
                Err(Failure::BadInput(anyhow::anyhow!("a worker panicked")))
            })
        });
        assert!(
            told.contains("panicked: error: a worker panicked"),
            "{told}"
        );
        fuzz.timeout = Duration::ZERO;
        let slow = caught(|| in_process(&fuzz, |_: Planted| Ok(())));
        assert!(slow.contains("in process (over 0ns)"), "{slow}");
    }

    /// The control of [`decision_problem`], the rule [`Outcome::problem`] applies to a
    /// process's stderr line: each planted breach is named, each kept decision passes.
    #[test]
    fn decision_problem_names_every_breach_of_the_rule() {
        let stop = |code: i32, line: &str| Decision::<()>::Stop(code, line.to_string());
        for (bad, why) in [
            (stop(2, "error: one\ntwo"), "2 lines"),
            (stop(3, "error: x"), "exit 3 (a refusal exits 2"),
            (stop(0, "error: x"), "exit 0 (a refusal exits 2"),
            (stop(2, ""), "not an error line"),
            (stop(2, "error: internal error: x"), "panicked"),
            (Decision::Print(String::new()), "empty help"),
        ] {
            let p = decision_problem(&bad).unwrap_or_default();
            assert!(p.contains(why), "{bad:?}: {p}");
        }
        for good in [
            stop(2, "error: x"),
            stop(1, "error: y"),
            Decision::Print("help".to_string()),
            Decision::Run(()),
        ] {
            assert_eq!(decision_problem(&good), None, "{good:?}");
        }
    }

    /// The fuzz's variables are set in this process while `check` runs, and put back after.
    #[test]
    fn in_process_sets_the_fuzz_env_and_puts_it_back() {
        let key = "ARGV_FUZZ_PLANTED_VAR";
        let mut fuzz = Fuzz::new("planted", flags(), 7).env(key, "set");
        fuzz.vectors = 300;
        let seen = std::sync::Mutex::new(Vec::new());
        let t = in_process(&fuzz, |_: Planted| {
            seen.lock().unwrap().push(std::env::var(key).ok());
            Ok(())
        });
        let seen = seen.into_inner().unwrap();
        assert!(!seen.is_empty() && seen.len() == t.ran, "{t:?}");
        assert!(seen.iter().all(|v| v.as_deref() == Some("set")), "{seen:?}");
        assert_eq!(std::env::var_os(key), None);
    }

    #[test]
    fn a_failing_command_renders_so_a_shell_can_run_it() {
        let argv = [
            OsString::from("--stage"),
            OsString::from("top p"),
            OsString::from_vec(b"\xff".to_vec()),
        ];
        let r = render(Path::new("/bin/x"), &[], &argv);
        assert_eq!(
            r,
            "SAMPLER_AUDIT_CHECK_ONLY=1 /bin/x --stage 'top p' $'\\xff'"
        );
    }
}
