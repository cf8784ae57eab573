//! The one table of stage names: each row's `--stage` syntax, an example, its bounds and the
//! C call behind it. Parsing, printing, `--help` texts and the tests' name lists all read it.

use super::parse::{self, Parsed};
use super::{Stage, SuiteStage};

/// How a row's text becomes a value.
#[derive(Debug, Clone, Copy)]
pub enum Parser {
    /// A llama.cpp sampler: reads the `ARGS` of `NAME=ARGS` (empty when bare).
    Llama(fn(&str) -> Parsed<Stage>),
    /// One of the suite's own stages; it takes no value.
    Suite(SuiteStage),
}

/// One row of [`STAGES`].
#[derive(Debug, Clone, Copy)]
pub struct StageInfo {
    /// The name in `--stage` syntax (and [`Stage::name`]).
    pub name: &'static str,
    /// The full syntax, as `--help` shows it.
    pub syntax: &'static str,
    /// A text that parses to this stage and prints back to itself.
    pub example: &'static str,
    /// What the parser refuses, in words.
    pub bounds: &'static str,
    /// The C function that builds it (`subject::SamplerSpec`), or where the suite's own
    /// stage lives.
    pub built_by: &'static str,
    pub parser: Parser,
}

// One row per stage; `Stage::info` names each llama.cpp stage's row in an exhaustive match,
// so a new variant cannot compile without one.

pub const TOP_K: StageInfo = StageInfo {
    name: "top_k",
    syntax: "top_k=K",
    example: "top_k=4",
    bounds: "K an integer, K <= 0 keeps every entry",
    built_by: "llama_sampler_init_top_k(k)",
    parser: Parser::Llama(parse::top_k),
};

pub const TOP_P: StageInfo = StageInfo {
    name: "top_p",
    syntax: "top_p=P[:MIN_KEEP]",
    example: "top_p=0.8",
    bounds: "P in [0, 1]",
    built_by: "llama_sampler_init_top_p(p, min_keep)",
    parser: Parser::Llama(parse::top_p),
};

pub const MIN_P: StageInfo = StageInfo {
    name: "min_p",
    syntax: "min_p=P[:MIN_KEEP]",
    example: "min_p=0.05:3",
    bounds: "P in [0, 1]",
    built_by: "llama_sampler_init_min_p(p, min_keep)",
    parser: Parser::Llama(parse::min_p),
};

pub const TYPICAL: StageInfo = StageInfo {
    name: "typical",
    syntax: "typical=P[:MIN_KEEP]",
    example: "typical=0.5",
    bounds: "P in [0, 1]",
    built_by: "llama_sampler_init_typical(p, min_keep)",
    parser: Parser::Llama(parse::typical),
};

pub const TEMP: StageInfo = StageInfo {
    name: "temp",
    syntax: "temp=T",
    example: "temp=0.5",
    bounds: "T <= 0 keeps the top entry, or T >= 0.001",
    built_by: "llama_sampler_init_temp(t)",
    parser: Parser::Llama(parse::temp),
};

pub const TEMP_EXT: StageInfo = StageInfo {
    name: "temp_ext",
    syntax: "temp_ext=T:DELTA:EXP",
    example: "temp_ext=1:0.5:1",
    bounds: "EXP in [0, 10]; T, and T - DELTA when DELTA > 0, <= 0 or >= 0.001",
    built_by: "llama_sampler_init_temp_ext(t, delta, exponent)",
    parser: Parser::Llama(parse::temp_ext),
};

pub const XTC: StageInfo = StageInfo {
    name: "xtc",
    syntax: "xtc=PROB:THRESHOLD[:MIN_KEEP]",
    example: "xtc=1:0.1",
    bounds:
        "PROB 0 or 1, other values draw from an RNG the oracle does not model; THRESHOLD in [0, 1]",
    built_by: "llama_sampler_init_xtc(probability, threshold, min_keep, seed)",
    parser: Parser::Llama(parse::xtc),
};

pub const TOP_N_SIGMA: StageInfo = StageInfo {
    name: "top_n_sigma",
    syntax: "top_n_sigma=N",
    example: "top_n_sigma=1.5",
    bounds: "N finite",
    built_by: "llama_sampler_init_top_n_sigma(n)",
    parser: Parser::Llama(parse::top_n_sigma),
};

pub const LOGIT_BIAS: StageInfo = StageInfo {
    name: "logit_bias",
    syntax: "logit_bias=ID:BIAS[/ID:BIAS]",
    example: "logit_bias=1:-2.5/4:+1",
    bounds: "each ID once, an id of --logits; |BIAS| <= 10000",
    built_by: "llama_sampler_init_logit_bias(n_vocab, n_logit_bias, logit_bias)",
    parser: Parser::Llama(parse::logit_bias),
};

pub const PENALTIES: StageInfo = StageInfo {
    name: "penalties",
    syntax: "penalties=LAST_N:REPEAT[:FREQ[:PRESENT]]",
    example: "penalties=64:1.3:0:0",
    bounds: "LAST_N in 0..=1048576; REPEAT > 0",
    built_by: "llama_sampler_init_penalties([n_vocab,] last_n, repeat, freq, present)",
    parser: Parser::Llama(parse::penalties),
};

pub const GREEDY: StageInfo = StageInfo {
    name: "greedy",
    syntax: "greedy",
    example: "greedy",
    bounds: "no value",
    built_by: "llama_sampler_init_greedy()",
    parser: Parser::Llama(parse::greedy),
};

pub const DIST: StageInfo = StageInfo {
    name: "dist",
    syntax: "dist=SEED",
    example: "dist=1",
    bounds: "SEED in 0..=4294967294, 4294967295 asks llama.cpp for a random seed; the last stage",
    built_by: "llama_sampler_init_dist(seed)",
    parser: Parser::Llama(parse::dist),
};

pub const SORTED_GUARD: StageInfo = StageInfo {
    name: "sorted_guard",
    syntax: "sorted_guard",
    example: "sorted_guard",
    bounds: "no value",
    built_by: "ledger::sorted_guard (the suite's fix, not a llama.cpp sampler)",
    parser: Parser::Suite(SuiteStage::SortedGuard),
};

/// Every stage the suite names, llama.cpp's in the order of [`Stage`], then the suite's own.
/// A test checks that every row above is listed here.
pub const STAGES: &[StageInfo] = &[
    TOP_K,
    TOP_P,
    MIN_P,
    TYPICAL,
    TEMP,
    TEMP_EXT,
    XTC,
    TOP_N_SIGMA,
    LOGIT_BIAS,
    PENALTIES,
    GREEDY,
    DIST,
    SORTED_GUARD,
];

/// The row named `name`.
pub fn row(name: &str) -> Option<&'static StageInfo> {
    STAGES.iter().find(|r| r.name == name)
}

/// Every name in the table, in its order.
pub fn names() -> Vec<&'static str> {
    STAGES.iter().map(|r| r.name).collect()
}

/// The syntax of every row, comma-separated (what `--help` lists), then the bounds every
/// `MIN_KEEP` and window shares.
pub fn help() -> String {
    let rows: Vec<String> = STAGES
        .iter()
        .map(|r| {
            if r.bounds == "no value" {
                r.syntax.to_string()
            } else {
                format!("{} ({})", r.syntax, r.bounds)
            }
        })
        .collect();
    format!(
        "{}; MIN_KEEP at most {} (default 1)",
        rows.join(", "),
        super::MAX_WINDOW
    )
}
