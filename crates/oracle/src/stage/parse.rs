//! Reading `--stage` text: the number, id and field readers every command line shares, and
//! one reader per llama.cpp stage (the `ARGS` of `NAME=ARGS`), each named by its row of
//! [`super::table::STAGES`].

use super::{Stage, LOGIT_LIMIT, MAX_WINDOW, MIN_TEMP};
use crate::penalty::PenaltyParams;
use crate::window::WindowLen;
use crate::TokenId;
use std::fmt;

/// A parse error: one line saying what is wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct ParseError(pub String);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ParseError {}

pub type Parsed<T> = Result<T, ParseError>;

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

/// An integer of type `T`, or "`name`: 'text' is not `kind`".
fn int<T: std::str::FromStr>(name: &str, text: &str, kind: &str) -> Parsed<T> {
    (text.trim().parse()).map_err(|_| ParseError(format!("{name}: '{text}' is not {kind}")))
}

fn count(name: &str, text: &str) -> Parsed<usize> {
    int(name, text, "a non-negative integer")
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
    let ok = (min..=max).contains(&parts.len()) && !args.is_empty();
    require(ok, || {
        let n = match min == max {
            true => min.to_string(),
            false => format!("{min} to {max}"),
        };
        format!("stage '{stage}' takes {n} value(s) separated by ':', got '{args}'")
    })?;
    Ok(parts)
}

/// A token id (>= 0) as a stage names it.
pub fn token_id(stage: &str, text: &str) -> Parsed<TokenId> {
    let id: i32 = int(stage, text, "a token id")?;
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

/// Splits `NAME=ARGS` (or a bare `NAME`) into trimmed parts.
pub fn split_name(text: &str) -> (&str, &str) {
    match text.split_once('=') {
        Some((n, a)) => (n.trim(), a.trim()),
        None => (text.trim(), ""),
    }
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

/// Refuses a value for a stage that takes none, and a missing one for a stage that needs it.
pub fn bare(name: &str, args: &str) -> Parsed<()> {
    require(args.is_empty(), || format!("stage '{name}' takes no value"))
}

fn needs_value(name: &str, args: &str) -> Parsed<()> {
    require(!args.is_empty(), || {
        format!("stage '{name}' needs a value: {name}=...")
    })
}

/// `min_keep` within [`MAX_WINDOW`] (llama.cpp would reserve room for it).
fn keep_at_most(stage: &str, min_keep: usize) -> Parsed<usize> {
    require(min_keep <= MAX_WINDOW as usize, || {
        format!("{stage} min_keep must be <= {MAX_WINDOW}")
    })?;
    Ok(min_keep)
}

fn p_and_keep(stage: &str, args: &str) -> Parsed<(f32, usize)> {
    needs_value(stage, args)?;
    let f = fields(stage, args, 1, 2)?;
    let p = unit(&format!("{stage} p"), number(stage, f[0])?)?;
    let min_keep = match f.get(1) {
        Some(k) => count(&format!("{stage} min_keep"), k)?,
        None => 1,
    };
    Ok((p, keep_at_most(stage, min_keep)?))
}

pub(super) fn top_k(args: &str) -> Parsed<Stage> {
    needs_value("top_k", args)?;
    Ok(Stage::TopK {
        k: int("top_k", args, "an integer")?,
    })
}

pub(super) fn top_p(args: &str) -> Parsed<Stage> {
    let (p, min_keep) = p_and_keep("top_p", args)?;
    Ok(Stage::TopP { p, min_keep })
}

pub(super) fn min_p(args: &str) -> Parsed<Stage> {
    let (p, min_keep) = p_and_keep("min_p", args)?;
    Ok(Stage::MinP { p, min_keep })
}

pub(super) fn typical(args: &str) -> Parsed<Stage> {
    let (p, min_keep) = p_and_keep("typical", args)?;
    Ok(Stage::Typical { p, min_keep })
}

pub(super) fn temp(args: &str) -> Parsed<Stage> {
    needs_value("temp", args)?;
    let t = number("temp", args)?;
    require(t <= 0.0 || t >= MIN_TEMP, || {
        format!("temp must be <= 0 (keep the top token) or >= {MIN_TEMP}, got {t}")
    })?;
    Ok(Stage::Temp { t })
}

pub(super) fn temp_ext(args: &str) -> Parsed<Stage> {
    let name = "temp_ext";
    needs_value(name, args)?;
    let f = fields(name, args, 3, 3)?;
    let t = number("temp_ext temperature", f[0])?;
    let delta = number("temp_ext delta", f[1])?;
    let exponent = number("temp_ext exponent", f[2])?;
    require((0.0..=10.0).contains(&exponent), || {
        format!("temp_ext exponent must be in [0, 10], got {exponent}")
    })?;
    // The dynamic temperature ranges down to t - delta (clamped at 0, which keeps the top
    // token); a tiny positive value would overflow f32.
    let low = t - delta;
    require(delta <= 0.0 || low <= 0.0 || low >= MIN_TEMP, || {
        format!("temp_ext t - delta must be <= 0 or >= {MIN_TEMP}, got {low}")
    })?;
    require(delta > 0.0 || t <= 0.0 || t >= MIN_TEMP, || {
        format!("temp_ext temperature must be <= 0 or >= {MIN_TEMP}, got {t}")
    })?;
    Ok(Stage::TempExt { t, delta, exponent })
}

pub(super) fn xtc(args: &str) -> Parsed<Stage> {
    needs_value("xtc", args)?;
    let f = fields("xtc", args, 2, 3)?;
    let probability = number("xtc probability", f[0])?;
    require(probability == 0.0 || probability == 1.0, || {
        format!("xtc probability must be 0 or 1, got {probability} (other values draw from an RNG the oracle does not model)")
    })?;
    Ok(Stage::Xtc {
        probability,
        threshold: unit("xtc threshold", number("xtc threshold", f[1])?)?,
        min_keep: match f.get(2) {
            Some(k) => keep_at_most("xtc", count("xtc min_keep", k)?)?,
            None => 1,
        },
    })
}

pub(super) fn top_n_sigma(args: &str) -> Parsed<Stage> {
    needs_value("top_n_sigma", args)?;
    Ok(Stage::TopNSigma {
        n: number("top_n_sigma", args)?,
    })
}

pub(super) fn logit_bias(args: &str) -> Parsed<Stage> {
    needs_value("logit_bias", args)?;
    let mut biases: Vec<(TokenId, f32)> = Vec::new();
    for pair in args.split('/') {
        let (id, b) = pair
            .split_once(':')
            .ok_or_else(|| ParseError(format!("logit_bias: '{pair}' is not ID:BIAS")))?;
        let id = token_id("logit_bias", id)?;
        require(!biases.iter().any(|(t, _)| *t == id), || {
            format!("logit_bias: id {id} appears twice in one stage; give one bias per id")
        })?;
        biases.push((id, bias("logit_bias", b)?));
    }
    Ok(Stage::LogitBias { biases })
}

pub(super) fn penalties(args: &str) -> Parsed<Stage> {
    let name = "penalties";
    needs_value(name, args)?;
    let f = fields(name, args, 2, 4)?;
    let last_n: i32 = int("penalties last_n", f[0], "an integer")?;
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

pub(super) fn greedy(args: &str) -> Parsed<Stage> {
    bare("greedy", args)?;
    Ok(Stage::Greedy)
}

/// llama.cpp's `LLAMA_DEFAULT_SEED`: `llama_sampler_init_dist` replaces it with a random seed.
pub const RANDOM_SEED: u32 = u32::MAX;

pub(super) fn dist(args: &str) -> Parsed<Stage> {
    needs_value("dist", args)?;
    let seed: u32 = int("dist", args, &format!("a seed in 0..={}", RANDOM_SEED - 1))?;
    require(seed != RANDOM_SEED, || {
        format!("dist seed {RANDOM_SEED} asks llama.cpp for a random seed; give a fixed one")
    })?;
    Ok(Stage::Dist { seed })
}
