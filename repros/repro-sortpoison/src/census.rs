//! The injector census: which built-in samplers can leave `sorted == true` on an array that
//! is no longer sorted, decided by running each one on a battery of really sorted arrays
//! flagged so: flag true and order broken on some input **keeps it stale** (that input is the
//! witness); else flag cleared on some input **resets the flag**; else **never reorders**. A
//! second pass hands each an unsorted array flagged `false` and records whether it sets the
//! flag, and whether the array it leaves is then really sorted.
//!
//! Controls, through the same `census_row`: planted injectors that keep the flag, clear it,
//! change nothing, or abort. Every row runs in its own child process ([`ROW_TASK`],
//! `crates/contain`) and comes back as JSON, so a sampler that aborts becomes a row classed
//! "crashes (contained)" and the census goes on. A sampler the build does not offer (the
//! planted injectors too, where Rust samplers cannot be plugged in) is a row classed
//! "not offered".

use crate::chain::really_sorted;
use crate::planted::Injector;
use crate::text::join;
use anyhow::{Context, Result};
use contain::{Ended, Task};
use oracle::rng::Rng;
use oracle::stage::Stage;
use oracle::TokenId;
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use subject::offered;
use subject::{Candidates, DryParams, Sampler, SamplerSpec, Vocab};

/// Ids in the battery are below this, so samplers that need a vocabulary size get this one.
const N_VOCAB: i32 = 64;

/// The grammar the census uses: the only text it allows is the letter `b`.
pub const GRAMMAR: &str = "root ::= \"b\"";

type BuildFn = dyn Fn(&Input) -> Result<Sampler>;
type HistoryFn = dyn Fn(&Input) -> Vec<TokenId>;

/// How to build one census subject. `history` is accepted before every apply.
pub struct CensusSampler {
    pub label: String,
    build: Box<BuildFn>,
    history: Box<HistoryFn>,
    /// Only runs on the vocabulary battery (grammar, infill).
    needs_vocab: bool,
}

/// One sorted input array: entries in descending logit order.
#[derive(Debug, Clone, PartialEq)]
pub struct Input {
    pub entries: Vec<(TokenId, f32)>,
}

impl Input {
    fn top(&self) -> TokenId {
        self.entries[0].0
    }
    fn second(&self) -> TokenId {
        self.entries[1.min(self.entries.len() - 1)].0
    }
    fn bottom(&self) -> TokenId {
        self.entries[self.entries.len() - 1].0
    }
    pub fn text(&self) -> String {
        join(self.entries.iter().map(|(id, l)| format!("{id}:{l}")), " ")
    }
}

/// A subject built the same way for every input, with no history.
fn custom(
    label: String,
    needs_vocab: bool,
    build: impl Fn() -> Result<Sampler> + 'static,
) -> CensusSampler {
    CensusSampler {
        label,
        build: Box::new(move |_| build()),
        history: Box::new(|_| Vec::new()),
        needs_vocab,
    }
}

fn spec(label: &str, f: impl Fn(&Input) -> SamplerSpec + 'static) -> CensusSampler {
    CensusSampler {
        build: Box::new(move |i| f(i).build()),
        ..custom(label.to_string(), false, || unreachable!())
    }
}

/// A deterministic stage in `--stage` syntax, with the census's vocabulary and seed 1 (xtc's
/// draw never decides at probability 1).
fn stage(label: &str, text: &'static str) -> CensusSampler {
    spec(label, move |_| {
        let stage: Stage = text.parse().expect("the census's stages parse");
        SamplerSpec::from(stage).with_vocab(N_VOCAB).with_seed(1)
    })
}

fn bias(id: TokenId, b: f32) -> SamplerSpec {
    let biases = vec![(id, b)];
    SamplerSpec::from(Stage::LogitBias { biases }).with_vocab(N_VOCAB)
}

impl CensusSampler {
    /// The same subject with `history` accepted before every apply.
    fn after(mut self, history: impl Fn(&Input) -> Vec<TokenId> + 'static) -> CensusSampler {
        self.history = Box::new(history);
        self
    }
}

/// Every built-in sampler in the public API, at parameters that give it a chance to reorder.
pub fn subjects(vocab: Option<&Arc<Vocab>>) -> Vec<CensusSampler> {
    let dry = |multiplier| DryParams {
        multiplier,
        base: 1.75,
        allowed_length: 2,
        last_n: 64,
        n_ctx_train: 4096,
    };
    // History "x y top x y": DRY penalizes `top`, the token that would extend the repeat.
    let dry_history = |i: &Input| {
        let (x, y) = (i.bottom(), i.second());
        vec![x, y, i.top(), x, y]
    };
    let repeat_history = |i: &Input| vec![i.top(), i.top(), i.second()];
    let mut out = vec![
        spec("logit_bias +8 on the lowest id", |i| bias(i.bottom(), 8.0)),
        spec("logit_bias -8 on the top id", |i| bias(i.top(), -8.0)),
        stage("penalties last_n=64 repeat=1.5", "penalties=64:1.5").after(repeat_history),
        stage("penalties last_n=64 freq=2 present=2", "penalties=64:1:2:2").after(repeat_history),
        spec("dry multiplier=0.8", move |_| SamplerSpec::Dry(dry(0.8))).after(dry_history),
        spec("dry multiplier=4", move |_| SamplerSpec::Dry(dry(4.0))).after(dry_history),
        stage("xtc probability=1 threshold=0.1", "xtc=1:0.1"),
        stage("xtc probability=1 threshold=0.02", "xtc=1:0.02"),
        stage("temp 0.5", "temp=0.5"),
        stage("temp 0", "temp=0"),
        stage("temp -1", "temp=-1"),
        stage("temp_ext 1 delta=0.5 exponent=1", "temp_ext=1:0.5:1"),
        stage("temp_ext 0.8 delta=0.8 exponent=2", "temp_ext=0.8:0.8:2"),
        stage("typical 0.5", "typical=0.5"),
        stage("typical 0.9", "typical=0.9"),
        stage("top_n_sigma 1", "top_n_sigma=1"),
        stage("top_n_sigma 0.5", "top_n_sigma=0.5"),
        stage("top_k 2", "top_k=2"),
        stage("top_p 0.8", "top_p=0.8"),
        stage("min_p 0.1", "min_p=0.1"),
        stage("greedy", "greedy"),
        spec("dist seed=1", |_| SamplerSpec::Dist { seed: 1 }),
        spec("mirostat tau=5 eta=0.1 m=32 seed=1", |_| {
            SamplerSpec::Mirostat {
                n_vocab: N_VOCAB,
                seed: 1,
                tau: 5.0,
                eta: 0.1,
                m: 32,
            }
        }),
        spec("mirostat_v2 tau=5 eta=0.1 seed=1", |_| {
            SamplerSpec::MirostatV2 {
                seed: 1,
                tau: 5.0,
                eta: 0.1,
            }
        }),
        spec("adaptive_p target=0.5 decay=0.9 seed=1", |_| {
            SamplerSpec::AdaptiveP {
                target: 0.5,
                decay: 0.9,
                seed: 1,
            }
        }),
    ];
    if let Some(v) = vocab {
        let (g, i) = (Arc::clone(v), Arc::clone(v));
        let grammar = move || Sampler::grammar(&g, GRAMMAR, "root");
        out.push(custom(format!("grammar {GRAMMAR}"), true, grammar));
        out.push(custom("infill".to_string(), true, move || {
            Sampler::infill(&i)
        }));
    }
    out
}

/// Sorted arrays with ids below [`N_VOCAB`]: hand-made ones, then seeded random ones whose ids
/// are shuffled so that id order and rank order differ.
pub fn battery() -> Vec<Input> {
    let make = |logits: &[f32], ids: &[i32]| {
        let ids = ids.iter().map(|&i| TokenId(i));
        Input {
            entries: ids.zip(logits.iter().copied()).collect(),
        }
    };
    let eight = [4.0, 3.0, 2.0, 1.0, 0.0, -1.0, -2.0, -3.0];
    let mut out = vec![
        make(&eight, &[0, 1, 2, 3, 4, 5, 6, 7]),
        make(&[2.0, 1.0], &[1, 0]),
        make(&[1.0, 0.5, 0.25, -0.5, -4.0], &[9, 3, 12, 0, 5]),
        make(&[10.0, 9.5, 9.0, 0.0, -10.0, -20.0], &[2, 7, 1, 8, 3, 4]),
    ];
    let mut rng = Rng::new(0x50472);
    for _ in 0..40 {
        let n = rng.range(2, 16) as usize;
        let mut grid: Vec<i64> = (-32..=32).collect();
        rng.shuffle(&mut grid);
        let mut logits: Vec<f32> = grid[..n].iter().map(|&q| q as f32 / 4.0).collect();
        logits.sort_by(|a, b| b.total_cmp(a));
        let mut ids: Vec<i32> = (0..N_VOCAB).collect();
        rng.shuffle(&mut ids);
        out.push(make(&logits, &ids[..n]));
    }
    out
}

/// Sorted arrays over real vocabulary ids: the single letters a..h, a first.
pub fn vocab_battery(vocab: &Vocab) -> Result<Vec<Input>> {
    let mut entries = Vec::new();
    for (rank, l) in ["a", "b", "c", "d", "e", "f", "g", "h"].iter().enumerate() {
        let ids = vocab.tokenize(l)?;
        let msg = || format!("the letter {l} is not one token in this vocabulary");
        anyhow::ensure!(ids.len() == 1, msg());
        entries.push((ids[0], 3.0 - rank as f32));
    }
    let first_three = entries[..3].to_vec();
    Ok(vec![
        Input { entries },
        Input {
            entries: first_three,
        },
    ])
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Class {
    #[serde(rename = "keeps it stale")]
    KeepsStale,
    #[serde(rename = "resets the flag")]
    ResetsFlag,
    #[serde(rename = "never reorders")]
    NeverReorders,
    /// The row's child died (a signal or the deadline); [`CensusRow::crash`] says how.
    #[default]
    #[serde(rename = "crashes (contained)")]
    Crashed,
    /// The build does not offer the sampler; [`CensusRow::not_offered`] says what is missing.
    #[serde(rename = "not offered")]
    NotOffered,
}

impl Class {
    pub fn as_str(self) -> &'static str {
        match self {
            Class::KeepsStale => "keeps it stale",
            Class::ResetsFlag => "resets the flag",
            Class::NeverReorders => "never reorders",
            Class::Crashed => "crashes (contained)",
            Class::NotOffered => "not offered",
        }
    }
}

/// One sampler's row; its JSON is also how a row's child hands the row back.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CensusRow {
    pub sampler: String,
    pub llama_name: String,
    #[serde(rename = "on_sorted_input")]
    pub class: Class,
    pub inputs: usize,
    /// The input that shows the class, as [`Input::text`], and the array the sampler left
    /// (for "never reorders": none).
    pub witness_input: Option<String>,
    pub witness_after: Option<String>,
    /// On unsorted input flagged false: how many runs set the flag, and how many of those
    /// left an array that is not sorted.
    pub unsorted_input_sets_flag: usize,
    pub unsorted_input_sets_flag_on_unsorted_output: usize,
    /// How the row's child died, for [`Class::Crashed`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crash: Option<String>,
    /// What the build lacks, for [`Class::NotOffered`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_offered: Option<String>,
}

fn apply(
    subject: &CensusSampler,
    input: &Input,
    entries: &[(TokenId, f32)],
    flag: bool,
) -> Result<Candidates> {
    let mut s = (subject.build)(input).with_context(|| format!("building {}", subject.label))?;
    for id in (subject.history)(input) {
        s.accept(id)?;
    }
    let mut c = Candidates::new(entries.iter().copied());
    c.sorted = flag;
    s.apply(&mut c)
        .with_context(|| format!("applying {}", subject.label))?;
    Ok(c)
}

fn after_text(c: &Candidates) -> String {
    join(
        c.entries.iter().map(|e| format!("{}:{}", e.id, e.logit)),
        " ",
    )
}

pub fn census_row(subject: &CensusSampler, inputs: &[Input]) -> Result<CensusRow> {
    let mut stale = None;
    let mut reset = None;
    let (mut sets_flag, mut sets_flag_falsely) = (0, 0);
    let mut name = String::new();
    for input in inputs {
        let out = apply(subject, input, &input.entries, true)?;
        if out.sorted && !really_sorted(&out) && stale.is_none() {
            stale = Some((input.text(), after_text(&out)));
        }
        if !out.sorted && reset.is_none() {
            reset = Some((input.text(), after_text(&out)));
        }
        // The same entries, rotated by one so the array is out of order, flagged false.
        let mut rotated = input.entries.clone();
        rotated.rotate_left(1);
        let out = apply(subject, input, &rotated, false)?;
        if out.sorted {
            sets_flag += 1;
            sets_flag_falsely += usize::from(!really_sorted(&out));
        }
        if name.is_empty() {
            name = (subject.build)(input)?.name();
        }
    }
    let (class, witness) = match (stale, reset) {
        (Some(w), _) => (Class::KeepsStale, Some(w)),
        (None, Some(w)) => (Class::ResetsFlag, Some(w)),
        (None, None) => (Class::NeverReorders, None),
    };
    let (witness_input, witness_after) = witness.unzip();
    Ok(CensusRow {
        sampler: subject.label.clone(),
        llama_name: name,
        class,
        inputs: inputs.len(),
        witness_input,
        witness_after,
        unsorted_input_sets_flag: sets_flag,
        unsorted_input_sets_flag_on_unsorted_output: sets_flag_falsely,
        crash: None,
        not_offered: None,
    })
}

/// A planted injector's row and the class it must be given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlantedRow {
    #[serde(flatten)]
    pub row: CensusRow,
    pub must_be: Class,
}

/// The census; `--census --json` prints it, and its JSON reads back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Census {
    pub rows: Vec<CensusRow>,
    /// The planted injectors through the same rows.
    #[serde(rename = "planted_controls")]
    pub planted: Vec<PlantedRow>,
    /// Why grammar and infill are missing, if they are.
    pub vocab_note: Option<String>,
}

/// Every census entry in order: the built-in samplers (grammar and infill when there is a
/// vocabulary), then the planted injectors with the class each must get.
fn entries(vocab: Option<&Arc<Vocab>>) -> Vec<(CensusSampler, Option<Class>)> {
    let mut out: Vec<(CensusSampler, Option<Class>)> =
        subjects(vocab).into_iter().map(|s| (s, None)).collect();
    for (injector, want) in [
        (Injector::KeepsFlag, Class::KeepsStale),
        (Injector::ClearsFlag, Class::ResetsFlag),
        (Injector::Identity, Class::NeverReorders),
        (Injector::Aborts, Class::Crashed),
    ] {
        let label = subject::CustomSampler::name(&injector).to_string_lossy();
        let s = custom(label.into_owned(), false, move || Sampler::custom(injector));
        out.push((s, Some(want)));
    }
    out
}

/// The contained task that computes one census row: `<index> <vocabulary path or ->`.
pub const ROW_TASK: Task = Task {
    name: "census-row",
    handler: row_child,
};

/// How long one row may take (a row is a few hundred applies and, for grammar and infill,
/// loading a vocabulary).
const ROW_TIMEOUT: Duration = Duration::from_secs(120);

fn row_child(args: &[OsString]) -> i32 {
    contain::reply((|| -> Result<String> {
        let [index, vocab] = args else {
            anyhow::bail!("the census row task takes an index and a vocabulary path or -");
        };
        let index: usize = index.to_string_lossy().parse()?;
        let vocab = match vocab.to_str() {
            Some("-") => None,
            _ => Some(Vocab::load(Path::new(vocab))?),
        };
        let all = entries(vocab.as_ref());
        let (subject, _) = all.get(index).context("no census entry with that index")?;
        let inputs = match (&vocab, subject.needs_vocab) {
            (Some(v), true) => vocab_battery(v)?,
            _ => battery(),
        };
        let row = match offered(census_row(subject, &inputs))? {
            Ok(row) => row,
            Err(why) => CensusRow {
                sampler: subject.label.clone(),
                class: Class::NotOffered,
                not_offered: Some(why.to_string()),
                ..CensusRow::default()
            },
        };
        Ok(serde_json::to_string(&row)? + "\n")
    })())
}

/// One row in a child: its row, or a [`Class::Crashed`] row saying how the child died.
fn contained_row(index: usize, subject: &CensusSampler, vocab: Option<&Path>) -> Result<CensusRow> {
    let vocab_arg = vocab.map_or(OsString::from("-"), |p| p.as_os_str().to_owned());
    let cmd = ROW_TASK.command(&[OsString::from(index.to_string()), vocab_arg])?;
    let out = contain::run(cmd, ROW_TIMEOUT)?;
    match out.ended {
        Ended::Exited(0) => serde_json::from_slice(&out.stdout)
            .with_context(|| format!("reading the census row of {}", subject.label)),
        Ended::Exited(_) => anyhow::bail!(
            "the census row of {} failed: {}",
            subject.label,
            out.last_stderr_line()
        ),
        died => Ok(CensusRow {
            sampler: subject.label.clone(),
            class: Class::Crashed,
            crash: Some(died.describe()),
            ..CensusRow::default()
        }),
    }
}

/// The census, every row in its own child. `vocab_model` is the GGUF file whose vocabulary
/// grammar and infill need; when it cannot be loaded those two rows are left out, with a note.
pub fn run(vocab_model: &Path) -> Result<Census> {
    let (vocab, vocab_note) = match Vocab::load(vocab_model) {
        Ok(v) => (Some(v), None),
        Err(e) => (
            None,
            Some(format!(
                "grammar and infill not run: no vocabulary at {} ({e:#}; run `make models`)",
                vocab_model.display()
            )),
        ),
    };
    let path = vocab.as_ref().map(|_| vocab_model);
    let mut rows = Vec::new();
    let mut planted = Vec::new();
    for (index, (subject, want)) in entries(vocab.as_ref()).iter().enumerate() {
        let row = contained_row(index, subject, path)?;
        match want {
            None => rows.push(row),
            Some(w) => planted.push(PlantedRow { row, must_be: *w }),
        }
    }
    Ok(Census {
        rows,
        planted,
        vocab_note,
    })
}

impl Census {
    fn planted_as(&self, want: Class) -> impl Iterator<Item = &PlantedRow> {
        self.planted.iter().filter(move |p| p.must_be == want)
    }

    /// Each planted injector was classed as it must be.
    pub fn planted_ok(&self, want: Class) -> bool {
        let mut planted = self.planted_as(want).peekable();
        planted.peek().is_some() && planted.all(|p| p.row.class == want)
    }

    /// Why a planted injector that must be classed `want` did not run, if one did not.
    pub fn planted_not_run(&self, want: Class) -> Option<&str> {
        self.planted_as(want)
            .find_map(|p| p.row.not_offered.as_deref())
    }

    pub fn planted_text(&self, want: Class) -> String {
        let text = |p: &PlantedRow| {
            format!(
                "{} classed '{}' (must be '{}')",
                p.row.sampler,
                p.row.class.as_str(),
                want.as_str()
            )
        };
        join(self.planted_as(want).map(text), "; ")
    }

    pub fn to_text(&self) -> String {
        let mut out = String::from(
            "injector census: each sampler on really sorted arrays flagged sorted = true; last column: runs on\nunsorted arrays flagged false that left the flag set (and how many of those left an unsorted array)\n  sampler                                   llama.cpp name               on sorted input   sets flag on unsorted input\n",
        );
        for r in self.rows.iter().chain(self.planted.iter().map(|p| &p.row)) {
            if let Some(how) = &r.crash {
                out.push_str(&format!(
                    "  {:<41} {:<28} {} ({how}; the census went on)\n",
                    r.sampler,
                    "-",
                    r.class.as_str()
                ));
                continue;
            }
            if let Some(why) = &r.not_offered {
                out.push_str(&format!(
                    "  {:<41} {:<28} {} ({why})\n",
                    r.sampler,
                    "-",
                    r.class.as_str()
                ));
                continue;
            }
            out.push_str(&format!(
                "  {:<41} {:<28} {:<17} {} of {}{}\n",
                r.sampler,
                r.llama_name,
                r.class.as_str(),
                r.unsorted_input_sets_flag,
                r.inputs,
                if r.unsorted_input_sets_flag_on_unsorted_output > 0 {
                    let n = r.unsorted_input_sets_flag_on_unsorted_output;
                    format!(" ({n} with an unsorted result)")
                } else {
                    String::new()
                }
            ));
        }
        for r in self.rows.iter().filter(|r| r.class == Class::KeepsStale) {
            let (Some(input), Some(after)) = (&r.witness_input, &r.witness_after) else {
                unreachable!("a stale class has a witness")
            };
            out.push_str(&format!(
                "  witness, {}: [{input}] -> [{after}], flag still true\n",
                r.sampler
            ));
        }
        if let Some(n) = &self.vocab_note {
            out.push_str(&format!("  note: {n}\n"));
        }
        out
    }
}
