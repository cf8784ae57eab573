//! The one description of a llama.cpp sampler stage as the suite audits it (F2's chains, F6's
//! probes, F7's draws, every penalty or truncation a repro builds): plain data, its `--stage`
//! text form and its properties. The suite's own stages are [`SuiteStage`], beside it.
//!
//! Only here are a stage's parameters listed, and only in [`table::STAGES`] its name, syntax,
//! example and bounds. The oracle evaluates a [`Stage`] ([`crate::truncation`], and
//! [`crate::draw`] for `dist`); `subject::SamplerSpec::Stage` turns it into llama.cpp's
//! sampler; command lines parse it through the table and print it back with `Display`, so
//! every printed chain can be pasted into a command line.

pub mod parse;
pub mod table;

pub use parse::{
    bias, fields, keep_suffix, number, require, signed, split_name, token_id, unit, ParseError,
    Parsed,
};
pub use table::{StageInfo, STAGES};

use crate::penalty::PenaltyParams;
use crate::window::WindowLen;
use crate::TokenId;
use std::fmt;
use std::str::FromStr;

/// Windows and `min_keep` values above this are refused: nothing the audits do needs more,
/// and llama.cpp would allocate for them up front.
pub const MAX_WINDOW: i32 = 1 << 20;

/// Largest |logit| and |bias| a parsed stage or chain accepts: far beyond any model's logits,
/// and small enough that no chain of accepted stages overflows f32.
pub const LOGIT_LIMIT: f32 = 1e4;

/// Smallest positive temperature accepted: with logits within [`LOGIT_LIMIT`] no chain
/// overflows f32.
pub const MIN_TEMP: f32 = 1e-3;

/// A llama.cpp sampler with its parameters, one variant per `llama_sampler_init_*` the suite
/// audits. Each variant names its C call; `subject::SamplerSpec` makes that call.
#[derive(Debug, Clone, PartialEq)]
pub enum Stage {
    /// `llama_sampler_init_top_k(k)`: the `k` top entries (`k <= 0` keeps every entry).
    TopK { k: i32 },
    /// `llama_sampler_init_top_p(p, min_keep)`: the shortest top prefix whose probability
    /// mass reaches `p`, with at least `min_keep` entries.
    TopP { p: f32, min_keep: usize },
    /// `llama_sampler_init_min_p(p, min_keep)`: every entry whose probability is at least `p`
    /// times the top one's, topped up to `min_keep`.
    MinP { p: f32, min_keep: usize },
    /// `llama_sampler_init_typical(p, min_keep)`: locally typical sampling, mass `p`.
    Typical { p: f32, min_keep: usize },
    /// `llama_sampler_init_temp(t)`: divides every logit by `t` (`t <= 0`: keeps the top one).
    Temp { t: f32 },
    /// `llama_sampler_init_temp_ext(t, delta, exponent)`: a temperature in `t +- delta`
    /// chosen from the normalized entropy raised to `exponent`.
    TempExt { t: f32, delta: f32, exponent: f32 },
    /// `llama_sampler_init_xtc(probability, threshold, min_keep, seed)`, only the
    /// deterministic settings: `probability` is 0 (never fires) or >= 1 (always).
    Xtc {
        probability: f32,
        threshold: f32,
        min_keep: usize,
    },
    /// `llama_sampler_init_top_n_sigma(n)`: entries more than `n` standard deviations below
    /// the top logit become `-inf`.
    TopNSigma { n: f32 },
    /// `llama_sampler_init_logit_bias(n_vocab, n_logit_bias, logit_bias)`: adds each bias to
    /// its id.
    LogitBias { biases: Vec<(TokenId, f32)> },
    /// `llama_sampler_init_penalties(n_vocab, last_n, repeat, freq, present)` (b4524 to
    /// b10200: no `n_vocab`). Counts come from the ids accepted before the stage runs (the
    /// history the oracle is given beside the stage, never part of its parameters).
    Penalties {
        last_n: WindowLen,
        params: PenaltyParams,
    },
    /// `llama_sampler_init_greedy()`: selects the top entry.
    Greedy,
    /// `llama_sampler_init_dist(seed)`: draws one entry from the softmax of the array, with
    /// an RNG seeded by `seed`; the last stage of a real chain. The oracle of its draw is a
    /// distribution ([`crate::draw`]), not a set.
    Dist { seed: u32 },
}

/// A stage the suite adds to llama.cpp's chains; not a llama.cpp sampler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SuiteStage {
    /// `ledger::sorted_guard` (the F2 fix): clears a `sorted` flag the array does not honour;
    /// the multiset is unchanged.
    SortedGuard,
}

/// The part a stage plays in a chain, for grouping minimized chains by shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Cuts a prefix of the array it trusts to be sorted (the last stage of a chain).
    Truncator,
    /// Sorts the array (a prefix reader that is not last, or temp_ext's entropy pass).
    Sorter,
    /// Changes logits without re-sorting, so a `sorted` flag it leaves may be stale.
    Injector,
    /// Changes logits and clears the flag.
    Resetter,
    /// Changes every logit in an order-preserving way.
    Monotone,
    /// Picks the token (greedy, dist).
    Selector,
    Guard,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Truncator => "truncator",
            Role::Sorter => "sorter",
            Role::Injector => "injector",
            Role::Resetter => "resetter",
            Role::Monotone => "monotone",
            Role::Selector => "selector",
            Role::Guard => "guard",
        }
    }
}

/// What a stage reads besides the array it is applied to.
enum Reads<'a> {
    /// The ids accepted before it (penalties).
    History,
    /// The ids its parameters name, with their biases (logit_bias).
    Ids(&'a [(TokenId, f32)]),
    Nothing,
}

/// Built-in llama.cpp samplers that are not a [`Stage`], and why the oracle does not compose
/// them.
pub const NOT_COMPOSED: &[(&str, &str)] = &[
    ("mirostat", "it draws from an RNG"),
    ("mirostat_v2", "it draws from an RNG"),
    ("adaptive_p", "it draws from an RNG"),
    (
        "dry",
        "its repeat-length rule is not modelled by the oracle",
    ),
    ("grammar", "it needs a model's vocabulary"),
    ("infill", "it needs a model's vocabulary"),
];

impl Stage {
    /// One exhaustive match, so a new variant states each: its row of [`STAGES`]; whether
    /// llama.cpp's implementation reads the array's `sorted` flag (the prefix readers, the
    /// stages that sort through llama.cpp's softmax, which skips the sort when the flag says
    /// sorted, and dist, whose softmax then takes `data[0]` as the maximum); what it reads
    /// besides the array.
    fn traits(&self) -> (&'static StageInfo, bool, Reads<'_>) {
        use Reads::Nothing;
        match self {
            Stage::TopK { .. } => (&table::TOP_K, true, Nothing),
            Stage::TopP { .. } => (&table::TOP_P, true, Nothing),
            Stage::MinP { .. } => (&table::MIN_P, true, Nothing),
            Stage::Typical { .. } => (&table::TYPICAL, true, Nothing),
            Stage::Temp { .. } => (&table::TEMP, false, Nothing),
            Stage::TempExt { delta, .. } => (&table::TEMP_EXT, *delta > 0.0, Nothing),
            Stage::Xtc { .. } => (&table::XTC, true, Nothing),
            Stage::TopNSigma { .. } => (&table::TOP_N_SIGMA, false, Nothing),
            Stage::LogitBias { biases } => (&table::LOGIT_BIAS, false, Reads::Ids(biases)),
            Stage::Penalties { .. } => (&table::PENALTIES, false, Reads::History),
            Stage::Greedy => (&table::GREEDY, false, Nothing),
            Stage::Dist { .. } => (&table::DIST, true, Nothing),
        }
    }

    /// The stage's row of [`STAGES`].
    pub fn info(&self) -> &'static StageInfo {
        self.traits().0
    }

    /// The stage's name in `--stage` syntax.
    pub fn name(&self) -> &'static str {
        self.info().name
    }

    /// Whether llama.cpp's implementation reads the array's `sorted` flag.
    pub fn reads_sorted_flag(&self) -> bool {
        self.traits().1
    }

    /// The part this stage plays in a chain; `last` says whether it ends the chain.
    pub fn role(&self, last: bool) -> Role {
        match self {
            Stage::TopK { .. } | Stage::TopP { .. } | Stage::MinP { .. } | Stage::Xtc { .. } => {
                if last {
                    Role::Truncator
                } else {
                    Role::Sorter
                }
            }
            Stage::TempExt { delta, .. } if *delta > 0.0 => Role::Sorter,
            Stage::LogitBias { .. } => Role::Injector,
            Stage::Penalties { .. } | Stage::Typical { .. } => Role::Resetter,
            Stage::Temp { .. } | Stage::TempExt { .. } | Stage::TopNSigma { .. } => Role::Monotone,
            Stage::Greedy | Stage::Dist { .. } => Role::Selector,
        }
    }

    /// Whether the stage counts the ids accepted before it (and so reads a history).
    pub fn reads_history(&self) -> bool {
        matches!(self.traits().2, Reads::History)
    }

    /// Whether the stage draws from an RNG (so its oracle is a distribution, not a set).
    pub fn draws(&self) -> bool {
        matches!(self, Stage::Dist { .. })
    }

    /// The token ids the stage's parameters name (logit_bias's ids).
    pub fn named_ids(&self) -> Vec<TokenId> {
        match self.traits().2 {
            Reads::Ids(biases) => biases.iter().map(|(id, _)| *id).collect(),
            Reads::History | Reads::Nothing => Vec::new(),
        }
    }

    /// Checks the ids this stage names against the number of logits.
    pub fn check_ids(&self, n_logits: usize) -> Result<(), String> {
        for id in self.named_ids() {
            if id.0 as usize >= n_logits {
                return Err(format!(
                    "{}: id {id} is out of range (--logits has {n_logits} entries, ids 0..{})",
                    self.name(),
                    n_logits - 1
                ));
            }
        }
        Ok(())
    }
}

impl SuiteStage {
    /// The stage's row of [`STAGES`].
    pub fn info(&self) -> &'static StageInfo {
        match self {
            SuiteStage::SortedGuard => &table::SORTED_GUARD,
        }
    }

    pub fn name(&self) -> &'static str {
        self.info().name
    }

    pub fn role(&self) -> Role {
        match self {
            SuiteStage::SortedGuard => Role::Guard,
        }
    }
}

/// The row for `name`, or a one-line error that lists every name (and says why a llama.cpp
/// sampler the oracle does not compose is not one).
pub fn lookup(name: &str) -> Parsed<&'static StageInfo> {
    if let Some((_, why)) = NOT_COMPOSED.iter().find(|(n, _)| *n == name) {
        return Err(ParseError(format!(
            "stage '{name}' is a llama.cpp sampler the oracle does not compose: {why}"
        )));
    }
    table::row(name).ok_or_else(|| {
        ParseError(format!(
            "unknown stage '{name}' (known: {})",
            table::names().join(", ")
        ))
    })
}

impl FromStr for Stage {
    type Err = ParseError;

    /// Parses one `--stage` value naming a llama.cpp sampler.
    fn from_str(text: &str) -> Parsed<Stage> {
        let (name, args) = split_name(text);
        match lookup(name)?.parser {
            table::Parser::Llama(parse) => parse(args),
            table::Parser::Suite(s) => Err(ParseError(format!(
                "stage '{}' is the suite's own stage, not a llama.cpp sampler",
                s.name()
            ))),
        }
    }
}

impl FromStr for SuiteStage {
    type Err = ParseError;

    /// Parses one `--stage` value naming one of the suite's own stages.
    fn from_str(text: &str) -> Parsed<SuiteStage> {
        let (name, args) = split_name(text);
        match lookup(name)?.parser {
            table::Parser::Suite(s) => {
                parse::bare(name, args)?;
                Ok(s)
            }
            table::Parser::Llama(_) => Err(ParseError(format!(
                "stage '{name}' is a llama.cpp sampler, not one of the suite's own stages"
            ))),
        }
    }
}

/// `--stage` syntax: what [`Stage::from_str`] reads back to the same value.
impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stage::TopK { k } => write!(f, "top_k={k}"),
            Stage::TopP { p, min_keep } => write!(f, "top_p={p}{}", keep_suffix(*min_keep)),
            Stage::MinP { p, min_keep } => write!(f, "min_p={p}{}", keep_suffix(*min_keep)),
            Stage::Typical { p, min_keep } => write!(f, "typical={p}{}", keep_suffix(*min_keep)),
            Stage::Temp { t } => write!(f, "temp={t}"),
            Stage::TempExt { t, delta, exponent } => write!(f, "temp_ext={t}:{delta}:{exponent}"),
            Stage::Xtc {
                probability,
                threshold,
                min_keep,
            } => write!(f, "xtc={probability}:{threshold}{}", keep_suffix(*min_keep)),
            Stage::TopNSigma { n } => write!(f, "top_n_sigma={n}"),
            Stage::LogitBias { biases } => {
                let parts: Vec<String> = biases
                    .iter()
                    .map(|(id, b)| format!("{id}:{}", signed(*b)))
                    .collect();
                write!(f, "logit_bias={}", parts.join("/"))
            }
            Stage::Penalties { last_n, params } => write!(
                f,
                "penalties={}:{}:{}:{}",
                last_n.0, params.repeat, params.freq, params.present
            ),
            Stage::Greedy => write!(f, "greedy"),
            Stage::Dist { seed } => write!(f, "dist={seed}"),
        }
    }
}

impl fmt::Display for SuiteStage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row: its example parses to a stage of that name (llama.cpp's as a [`Stage`],
    /// the suite's as a [`SuiteStage`], never the other way round) and prints back to itself.
    #[test]
    fn every_row_parses_its_example_and_prints_it_back() {
        for row in STAGES {
            match row.parser {
                table::Parser::Llama(_) => {
                    let s: Stage = row.example.parse().unwrap();
                    assert_eq!(s.name(), row.name);
                    assert_eq!(s.info().name, row.name);
                    assert_eq!(s.to_string(), row.example);
                    assert_eq!(s.to_string().parse::<Stage>().unwrap(), s);
                    assert!(row.example.parse::<SuiteStage>().is_err(), "{}", row.name);
                }
                table::Parser::Suite(want) => {
                    let s: SuiteStage = row.example.parse().unwrap();
                    assert_eq!(s, want);
                    assert_eq!(s.info().name, row.name);
                    assert_eq!(s.to_string(), row.example);
                    assert!(row.example.parse::<Stage>().is_err(), "{}", row.name);
                }
            }
            assert!(row.syntax.starts_with(row.name), "{}", row.name);
        }
        // Every row of table.rs goes through `rows!`, which lists it in STAGES (a row written
        // outside it could not be parsed by any command line).
        let rows_outside = include_str!("stage/table.rs")
            .matches(": StageInfo = ")
            .count()
            - 1;
        assert_eq!(rows_outside, 0, "a row of table.rs is not written in rows!");
        let names = table::names();
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "a name appears twice in STAGES");
        for (name, _) in NOT_COMPOSED {
            assert!(!names.contains(name), "{name} is both composed and not");
        }
    }

    #[test]
    fn more_stages_print_what_they_parse_from() {
        let texts = "logit_bias=3:+6 top_p=0.8:2 penalties=64:1.3:0:0 min_p=0.05 dist=0 \
                     dist=4294967294 top_k=-1";
        for text in texts.split_whitespace() {
            let s: Stage = text.parse().unwrap();
            assert_eq!(s.to_string(), text);
            assert_eq!(s.name(), split_name(text).0);
        }
    }

    #[test]
    fn help_lists_every_row() {
        let help = table::help();
        for row in STAGES {
            assert!(help.contains(row.syntax), "{}", row.name);
        }
        assert!(!help.contains('\n'));
    }

    #[test]
    fn refuses_bad_stages_with_a_reason() {
        let bad = "top_p=1.5 frobnicate=1 top_k top_k=x min_p=-0.1 xtc=0.5:0.1 logit_bias=3 \
                   logit_bias=3:+1/3:+2 logit_bias=-1:+1 logit_bias=1:+20000 top_p=nan \
                   penalties=-1:1.1 penalties=64:0 penalties=2000000:1.1 mirostat=1 greedy=1 \
                   temp=1e-5 temp_ext=1:0.5:-1 xtc=1:0.1:2000000 dist dist=-1 dist=4294967295 \
                   dist=1.5 sorted_guard";
        for bad in bad.split_whitespace() {
            let e = bad.parse::<Stage>().unwrap_err();
            assert!(!e.0.contains('\n'), "{bad}: one line");
        }
        assert!("sorted_guard=1".parse::<SuiteStage>().is_err());
        assert!("top_k=1".parse::<SuiteStage>().is_err());
        let bias: Stage = "logit_bias=8:+1".parse().unwrap();
        assert!(bias.check_ids(8).is_err());
        assert!(bias.check_ids(9).is_ok());
    }

    #[test]
    fn properties_follow_the_definitions() {
        use Role::*;
        // (stage, reads the sorted flag, role when last, role otherwise, reads history, draws)
        for (text, sorted, last, inner, history, draws) in [
            ("top_p=0.9", true, Truncator, Sorter, false, false),
            ("logit_bias=1:+1", false, Injector, Injector, false, false),
            ("temp_ext=1:0:1", false, Monotone, Monotone, false, false),
            ("temp_ext=1:0.5:1", true, Sorter, Sorter, false, false),
            ("penalties=4:1.1", false, Resetter, Resetter, true, false),
            ("dist=1", true, Selector, Selector, false, true),
        ] {
            let s: Stage = text.parse().unwrap();
            let got = (s.reads_sorted_flag(), s.role(true), s.role(false));
            assert_eq!(got, (sorted, last, inner), "{text}");
            assert_eq!((s.reads_history(), s.draws()), (history, draws), "{text}");
        }
        assert_eq!(SuiteStage::SortedGuard.role(), Role::Guard);
    }
}
