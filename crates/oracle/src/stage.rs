//! The one description of a deterministic sampler stage (F2's chains, and every penalty or
//! truncation a repro builds): plain data, its `--stage` text form, and its properties.
//!
//! Serves F2 first: every chain the audit runs is a list of these. It also describes the
//! stages F1's `clone-incomplete` check builds, F3's penalties and greedy chain, and F5's
//! greedy stage.
//!
//! This is the only place a stage's parameters are listed. The oracle evaluates a [`Stage`]
//! ([`crate::truncation`]); the subject crate converts the same value once into llama.cpp's
//! sampler (`subject::SamplerSpec::Stage`); the command lines parse it with
//! [`Stage::from_str`](std::str::FromStr) and print it back with `Display`, so every printed
//! chain can be pasted into a command line.
//!
//! Syntax (ids are positions in the logits the stage is applied to):
//! `top_k=K`, `top_p=P[:MIN_KEEP]`, `min_p=P[:MIN_KEEP]`, `typical=P[:MIN_KEEP]`, `temp=T`,
//! `temp_ext=T:DELTA:EXPONENT`, `xtc=PROBABILITY:THRESHOLD[:MIN_KEEP]` (probability 0 or 1),
//! `top_n_sigma=N`, `logit_bias=ID:BIAS[/ID:BIAS...]`, `penalties=LAST_N:REPEAT[:FREQ[:PRESENT]]`,
//! `greedy`, `sorted_guard`. `MIN_KEEP` defaults to 1.

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

/// A deterministic llama.cpp stage with its parameters.
#[derive(Debug, Clone, PartialEq)]
pub enum Stage {
    TopK {
        k: i32,
    },
    TopP {
        p: f32,
        min_keep: usize,
    },
    MinP {
        p: f32,
        min_keep: usize,
    },
    Typical {
        p: f32,
        min_keep: usize,
    },
    Temp {
        t: f32,
    },
    TempExt {
        t: f32,
        delta: f32,
        exponent: f32,
    },
    /// Only the deterministic settings: `probability` is 0 (never fires) or >= 1 (always).
    Xtc {
        probability: f32,
        threshold: f32,
        min_keep: usize,
    },
    TopNSigma {
        n: f32,
    },
    LogitBias {
        biases: Vec<(TokenId, f32)>,
    },
    /// Counts come from the ids accepted before the stage runs (the history the oracle is
    /// given beside the stage, never part of its parameters).
    Penalties {
        last_n: WindowLen,
        params: PenaltyParams,
    },
    Greedy,
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

/// Every name [`Stage::from_str`] accepts, in the order of the enum.
pub const NAMES: &[&str] = &[
    "top_k",
    "top_p",
    "min_p",
    "typical",
    "temp",
    "temp_ext",
    "xtc",
    "top_n_sigma",
    "logit_bias",
    "penalties",
    "greedy",
    "sorted_guard",
];

/// Built-in llama.cpp samplers that are not a [`Stage`], and why the oracle does not compose
/// them.
pub const NOT_COMPOSED: &[(&str, &str)] = &[
    ("dist", "it draws from an RNG"),
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
    /// The stage's name in `--stage` syntax.
    pub fn name(&self) -> &'static str {
        match self {
            Stage::TopK { .. } => "top_k",
            Stage::TopP { .. } => "top_p",
            Stage::MinP { .. } => "min_p",
            Stage::Typical { .. } => "typical",
            Stage::Temp { .. } => "temp",
            Stage::TempExt { .. } => "temp_ext",
            Stage::Xtc { .. } => "xtc",
            Stage::TopNSigma { .. } => "top_n_sigma",
            Stage::LogitBias { .. } => "logit_bias",
            Stage::Penalties { .. } => "penalties",
            Stage::Greedy => "greedy",
            Stage::SortedGuard => "sorted_guard",
        }
    }

    /// Whether llama.cpp's implementation reads the array's `sorted` flag: the prefix
    /// readers, and the stages that sort through llama.cpp's softmax (which skips the sort
    /// when the flag says sorted).
    pub fn reads_sorted_flag(&self) -> bool {
        match self {
            Stage::TopK { .. }
            | Stage::TopP { .. }
            | Stage::MinP { .. }
            | Stage::Typical { .. }
            | Stage::Xtc { .. } => true,
            Stage::TempExt { delta, .. } => *delta > 0.0,
            _ => false,
        }
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
            Stage::Greedy => Role::Selector,
            Stage::SortedGuard => Role::Guard,
        }
    }

    /// Whether the stage counts the ids accepted before it (and so reads a history).
    pub fn reads_history(&self) -> bool {
        matches!(self, Stage::Penalties { .. })
    }

    /// The token ids the stage's parameters name (logit_bias's ids).
    pub fn named_ids(&self) -> Vec<TokenId> {
        match self {
            Stage::LogitBias { biases } => biases.iter().map(|(id, _)| *id).collect(),
            _ => Vec::new(),
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

/// A parse error: one line saying what is wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct ParseError(pub String);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ParseError {}

type Parsed<T> = Result<T, ParseError>;

/// Fails with `text` unless `ok`.
pub fn require(ok: bool, text: impl FnOnce() -> String) -> Parsed<()> {
    if ok {
        Ok(())
    } else {
        Err(ParseError(text()))
    }
}

/// A finite number.
pub fn number(name: &str, text: &str) -> Parsed<f32> {
    let x: f32 = text
        .trim()
        .parse()
        .map_err(|_| ParseError(format!("{name}: '{text}' is not a number")))?;
    require(x.is_finite(), || format!("{name}: '{text}' is not finite"))?;
    Ok(x)
}

fn count(name: &str, text: &str) -> Parsed<usize> {
    text.trim()
        .parse()
        .map_err(|_| ParseError(format!("{name}: '{text}' is not a non-negative integer")))
}

/// A number in [0, 1].
pub fn unit(name: &str, x: f32) -> Parsed<f32> {
    require((0.0..=1.0).contains(&x), || {
        format!("{name} must be in [0, 1], got {x}")
    })?;
    Ok(x)
}

/// Splits `ARGS` on `:` and checks it has between `min` and `max` fields.
pub fn fields<'a>(stage: &str, args: &'a str, min: usize, max: usize) -> Parsed<Vec<&'a str>> {
    let parts: Vec<&str> = args.split(':').collect();
    require(
        (min..=max).contains(&parts.len()) && !args.is_empty(),
        || {
            format!(
                "stage '{stage}' takes {} value(s) separated by ':', got '{args}'",
                if min == max {
                    min.to_string()
                } else {
                    format!("{min} to {max}")
                }
            )
        },
    )?;
    Ok(parts)
}

/// A token id (>= 0) as a stage names it.
pub fn token_id(stage: &str, text: &str) -> Parsed<TokenId> {
    let id: i32 = text
        .trim()
        .parse()
        .map_err(|_| ParseError(format!("{stage}: '{text}' is not a token id")))?;
    require(id >= 0, || format!("{stage}: token id {id} is negative"))?;
    Ok(TokenId(id))
}

/// A logit bias within [`LOGIT_LIMIT`].
pub fn bias(stage: &str, text: &str) -> Parsed<f32> {
    let b = number(&format!("{stage} bias"), text)?;
    require(b.abs() <= LOGIT_LIMIT, || {
        format!("{stage}: bias {b} is outside +-{LOGIT_LIMIT}")
    })?;
    Ok(b)
}

fn p_and_keep(stage: &str, args: &str) -> Parsed<(f32, usize)> {
    let f = fields(stage, args, 1, 2)?;
    let p = unit(&format!("{stage} p"), number(stage, f[0])?)?;
    let min_keep = match f.get(1) {
        Some(k) => count(&format!("{stage} min_keep"), k)?,
        None => 1,
    };
    Ok((p, keep_at_most(stage, min_keep)?))
}

/// `min_keep` within [`MAX_WINDOW`] (llama.cpp would reserve room for it).
fn keep_at_most(stage: &str, min_keep: usize) -> Parsed<usize> {
    require(min_keep <= MAX_WINDOW as usize, || {
        format!("{stage} min_keep must be <= {MAX_WINDOW}")
    })?;
    Ok(min_keep)
}

/// Splits `NAME=ARGS` (or a bare `NAME`) into trimmed parts.
pub fn split_name(text: &str) -> (&str, &str) {
    match text.split_once('=') {
        Some((n, a)) => (n.trim(), a.trim()),
        None => (text.trim(), ""),
    }
}

impl FromStr for Stage {
    type Err = ParseError;

    /// Parses one `--stage` value.
    fn from_str(text: &str) -> Parsed<Stage> {
        let (name, args) = split_name(text);
        if let Some((_, why)) = NOT_COMPOSED.iter().find(|(n, _)| *n == name) {
            return Err(ParseError(format!(
                "stage '{name}' is a llama.cpp sampler the oracle does not compose: {why}"
            )));
        }
        require(NAMES.contains(&name), || {
            format!("unknown stage '{name}' (known: {})", NAMES.join(", "))
        })?;
        if name == "greedy" || name == "sorted_guard" {
            require(args.is_empty(), || format!("stage '{name}' takes no value"))?;
            return Ok(if name == "greedy" {
                Stage::Greedy
            } else {
                Stage::SortedGuard
            });
        }
        require(!args.is_empty(), || {
            format!("stage '{name}' needs a value: {name}=...")
        })?;
        Ok(match name {
            "top_k" => Stage::TopK {
                k: args
                    .parse()
                    .map_err(|_| ParseError(format!("top_k: '{args}' is not an integer")))?,
            },
            "top_p" => {
                let (p, min_keep) = p_and_keep(name, args)?;
                Stage::TopP { p, min_keep }
            }
            "min_p" => {
                let (p, min_keep) = p_and_keep(name, args)?;
                Stage::MinP { p, min_keep }
            }
            "typical" => {
                let (p, min_keep) = p_and_keep(name, args)?;
                Stage::Typical { p, min_keep }
            }
            "temp" => {
                let t = number("temp", args)?;
                require(t <= 0.0 || t >= MIN_TEMP, || {
                    format!("temp must be <= 0 (keep the top token) or >= {MIN_TEMP}, got {t}")
                })?;
                Stage::Temp { t }
            }
            "temp_ext" => parse_temp_ext(name, args)?,
            "xtc" => {
                let f = fields(name, args, 2, 3)?;
                let probability = number("xtc probability", f[0])?;
                require(probability == 0.0 || probability == 1.0, || {
                    format!("xtc probability must be 0 or 1, got {probability} (other values draw from an RNG the oracle does not model)")
                })?;
                Stage::Xtc {
                    probability,
                    threshold: unit("xtc threshold", number("xtc threshold", f[1])?)?,
                    min_keep: match f.get(2) {
                        Some(k) => keep_at_most("xtc", count("xtc min_keep", k)?)?,
                        None => 1,
                    },
                }
            }
            "top_n_sigma" => Stage::TopNSigma {
                n: number("top_n_sigma", args)?,
            },
            "logit_bias" => {
                let mut biases: Vec<(TokenId, f32)> = Vec::new();
                for pair in args.split('/') {
                    let (id, b) = pair.split_once(':').ok_or_else(|| {
                        ParseError(format!("logit_bias: '{pair}' is not ID:BIAS"))
                    })?;
                    let id = token_id("logit_bias", id)?;
                    require(!biases.iter().any(|(t, _)| *t == id), || {
                        format!(
                            "logit_bias: id {id} appears twice in one stage; give one bias per id"
                        )
                    })?;
                    biases.push((id, bias("logit_bias", b)?));
                }
                Stage::LogitBias { biases }
            }
            "penalties" => parse_penalties(name, args)?,
            _ => unreachable!("every name in NAMES is handled"),
        })
    }
}

fn parse_temp_ext(name: &str, args: &str) -> Parsed<Stage> {
    let f = fields(name, args, 3, 3)?;
    let t = number("temp_ext temperature", f[0])?;
    let delta = number("temp_ext delta", f[1])?;
    let exponent = number("temp_ext exponent", f[2])?;
    require((0.0..=10.0).contains(&exponent), || {
        format!("temp_ext exponent must be in [0, 10], got {exponent}")
    })?;
    // The dynamic temperature ranges down to t - delta (clamped at 0, which keeps the top
    // token); a tiny positive value would overflow f32.
    require(
        delta <= 0.0 || t - delta <= 0.0 || t - delta >= MIN_TEMP,
        || {
            format!(
                "temp_ext t - delta must be <= 0 or >= {MIN_TEMP}, got {}",
                t - delta
            )
        },
    )?;
    require(delta > 0.0 || t <= 0.0 || t >= MIN_TEMP, || {
        format!("temp_ext temperature must be <= 0 or >= {MIN_TEMP}, got {t}")
    })?;
    Ok(Stage::TempExt { t, delta, exponent })
}

fn parse_penalties(name: &str, args: &str) -> Parsed<Stage> {
    let f = fields(name, args, 2, 4)?;
    let last_n: i32 = f[0]
        .trim()
        .parse()
        .map_err(|_| ParseError(format!("penalties last_n: '{}' is not an integer", f[0])))?;
    require((0..=MAX_WINDOW).contains(&last_n), || {
        format!("penalties last_n must be in 0..={MAX_WINDOW}, got {last_n}")
    })?;
    let repeat = number("penalties repeat", f[1])?;
    require(repeat > 0.0, || {
        format!("penalties repeat must be > 0, got {repeat}")
    })?;
    Ok(Stage::Penalties {
        last_n: WindowLen(last_n as usize),
        params: PenaltyParams {
            repeat,
            freq: f.get(2).map_or(Ok(0.0), |x| number("penalties freq", x))?,
            present: f
                .get(3)
                .map_or(Ok(0.0), |x| number("penalties present", x))?,
        },
    })
}

/// `:MIN_KEEP`, left out when it is the default 1.
pub fn keep_suffix(min_keep: usize) -> String {
    if min_keep == 1 {
        String::new()
    } else {
        format!(":{min_keep}")
    }
}

/// A bias with its sign always written (`+6`, `-2.5`).
pub fn signed(b: f32) -> String {
    if b >= 0.0 {
        format!("+{b}")
    } else {
        b.to_string()
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
            Stage::SortedGuard => write!(f, "sorted_guard"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stage_prints_what_it_parses_from() {
        for text in [
            "top_k=4",
            "logit_bias=3:+6",
            "top_p=0.8",
            "top_p=0.8:2",
            "logit_bias=1:-2.5/4:+1",
            "xtc=1:0.1",
            "temp_ext=1:0.5:1",
            "penalties=64:1.3:0:0",
            "greedy",
            "sorted_guard",
            "min_p=0.05:3",
            "typical=0.5",
            "temp=0.5",
            "top_n_sigma=1.5",
        ] {
            let s: Stage = text.parse().unwrap();
            assert_eq!(s.to_string(), text);
            assert_eq!(s.to_string().parse::<Stage>().unwrap(), s);
            assert_eq!(s.name(), super::split_name(text).0);
        }
    }

    #[test]
    fn every_name_parses_to_a_stage_of_that_name() {
        let example = |name: &str| match name {
            "greedy" | "sorted_guard" => name.to_string(),
            "temp_ext" => "temp_ext=1:0:1".into(),
            "xtc" => "xtc=1:0.1".into(),
            "logit_bias" => "logit_bias=0:+1".into(),
            "penalties" => "penalties=8:1.1".into(),
            _ => format!("{name}=0.5"),
        };
        for name in NAMES {
            let text = example(name);
            let text = if *name == "top_k" {
                "top_k=2".into()
            } else {
                text
            };
            assert_eq!(text.parse::<Stage>().unwrap().name(), *name);
        }
    }

    #[test]
    fn refuses_bad_stages_with_a_reason() {
        for bad in [
            "top_p=1.5",
            "frobnicate=1",
            "top_k",
            "top_k=x",
            "min_p=-0.1",
            "xtc=0.5:0.1",
            "logit_bias=3",
            "logit_bias=3:+1/3:+2",
            "logit_bias=-1:+1",
            "logit_bias=1:+20000",
            "top_p=nan",
            "penalties=-1:1.1",
            "penalties=64:0",
            "penalties=2000000:1.1",
            "dist=1",
            "greedy=1",
            "temp=1e-5",
            "temp_ext=1:0.5:-1",
            "xtc=1:0.1:2000000",
        ] {
            let e = bad.parse::<Stage>().unwrap_err();
            assert!(!e.0.contains('\n'), "{bad}: one line");
        }
        let bias: Stage = "logit_bias=8:+1".parse().unwrap();
        assert!(bias.check_ids(8).is_err());
        assert!(bias.check_ids(9).is_ok());
    }

    #[test]
    fn properties_follow_the_definitions() {
        let top_p: Stage = "top_p=0.9".parse().unwrap();
        assert!(top_p.reads_sorted_flag());
        assert_eq!(top_p.role(true), Role::Truncator);
        assert_eq!(top_p.role(false), Role::Sorter);
        let bias: Stage = "logit_bias=1:+1".parse().unwrap();
        assert!(!bias.reads_sorted_flag());
        assert_eq!(bias.role(true), Role::Injector);
        let flat: Stage = "temp_ext=1:0:1".parse().unwrap();
        let dynamic: Stage = "temp_ext=1:0.5:1".parse().unwrap();
        assert!(!flat.reads_sorted_flag() && dynamic.reads_sorted_flag());
        assert_eq!(flat.role(false), Role::Monotone);
        assert_eq!(dynamic.role(false), Role::Sorter);
        assert!("penalties=4:1.1".parse::<Stage>().unwrap().reads_history());
        assert!(!top_p.reads_history());
    }
}
