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

/// Declares each row as a named constant (which `Stage::info` names in an exhaustive match,
/// so a new variant cannot compile without its row) and lists every row, in order, in
/// [`STAGES`].
macro_rules! rows {
    ($($konst:ident: $name:literal, $syntax:literal, $example:literal, $bounds:literal,
        $built_by:literal, $parser:expr;)*) => {
        $(pub const $konst: StageInfo = StageInfo {
            name: $name,
            syntax: $syntax,
            example: $example,
            bounds: $bounds,
            built_by: $built_by,
            parser: $parser,
        };)*

        /// Every stage the suite names, llama.cpp's in the order of [`Stage`], then the
        /// suite's own.
        pub const STAGES: &[StageInfo] = &[$($konst),*];
    };
}

// One row per stage: CONSTANT: name, syntax, example, bounds, C call, parser.
rows! {
    TOP_K: "top_k", "top_k=K", "top_k=4",
        "K an integer, K <= 0 keeps every entry", "llama_sampler_init_top_k(k)",
        Parser::Llama(parse::top_k);
    TOP_P: "top_p", "top_p=P[:MIN_KEEP]", "top_p=0.8",
        "P in [0, 1]", "llama_sampler_init_top_p(p, min_keep)", Parser::Llama(parse::top_p);
    MIN_P: "min_p", "min_p=P[:MIN_KEEP]", "min_p=0.05:3",
        "P in [0, 1]", "llama_sampler_init_min_p(p, min_keep)", Parser::Llama(parse::min_p);
    TYPICAL: "typical", "typical=P[:MIN_KEEP]", "typical=0.5",
        "P in [0, 1]", "llama_sampler_init_typical(p, min_keep)", Parser::Llama(parse::typical);
    TEMP: "temp", "temp=T", "temp=0.5",
        "T <= 0 keeps the top entry, or T >= 0.001", "llama_sampler_init_temp(t)",
        Parser::Llama(parse::temp);
    TEMP_EXT: "temp_ext", "temp_ext=T:DELTA:EXP", "temp_ext=1:0.5:1",
        "EXP in [0, 10]; T, and T - DELTA when DELTA > 0, <= 0 or >= 0.001",
        "llama_sampler_init_temp_ext(t, delta, exponent)", Parser::Llama(parse::temp_ext);
    XTC: "xtc", "xtc=PROB:THRESHOLD[:MIN_KEEP]", "xtc=1:0.1",
        "PROB 0 or 1, other values draw from an RNG the oracle does not model; THRESHOLD in [0, 1]",
        "llama_sampler_init_xtc(probability, threshold, min_keep, seed)", Parser::Llama(parse::xtc);
    TOP_N_SIGMA: "top_n_sigma", "top_n_sigma=N", "top_n_sigma=1.5",
        "N finite", "llama_sampler_init_top_n_sigma(n)", Parser::Llama(parse::top_n_sigma);
    LOGIT_BIAS: "logit_bias", "logit_bias=ID:BIAS[/ID:BIAS]", "logit_bias=1:-2.5/4:+1",
        "each ID once, an id of --logits; |BIAS| <= 10000",
        "llama_sampler_init_logit_bias(n_vocab, n_logit_bias, logit_bias)",
        Parser::Llama(parse::logit_bias);
    PENALTIES: "penalties", "penalties=LAST_N:REPEAT[:FREQ[:PRESENT]]", "penalties=64:1.3:0:0",
        "LAST_N in 0..=1048576; REPEAT > 0",
        "llama_sampler_init_penalties([n_vocab,] last_n, repeat, freq, present)",
        Parser::Llama(parse::penalties);
    GREEDY: "greedy", "greedy", "greedy",
        "no value", "llama_sampler_init_greedy()", Parser::Llama(parse::greedy);
    DIST: "dist", "dist=SEED", "dist=1",
        "SEED in 0..=4294967294, 4294967295 asks llama.cpp for a random seed; the last stage",
        "llama_sampler_init_dist(seed)", Parser::Llama(parse::dist);
    SORTED_GUARD: "sorted_guard", "sorted_guard", "sorted_guard",
        "no value", "ledger::sorted_guard (the suite's fix, not a llama.cpp sampler)",
        Parser::Suite(SuiteStage::SortedGuard);
}

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
