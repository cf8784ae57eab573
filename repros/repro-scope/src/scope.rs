//! A `--scopes` entry: `all`, `N`, `gen:N` or `llama:N`; and the planted scopes the controls
//! use (never parsed from the command line).

use anyhow::{bail, ensure, Result};
use oracle::scope::Scope;
use oracle::TokenId;

/// A scope written to test the divergence detector, not to model any stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PlantedScope {
    /// Every id `all` penalizes except one that decides a choice: must be flagged there.
    DropOne(TokenId),
    /// Every id `all` penalizes except one that never reaches the chosen logit: the penalized
    /// logits differ from `all`'s, the choices never do, so it must never be flagged.
    DropQuiet(TokenId),
}

/// A penalties sampler of ours in llama.cpp's penalties slot (`crate::planted_sampler`): the
/// chain of a `llama:N` scope with our sampler in place of llama.cpp's, judged by the rule that
/// judges `llama:N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PlantedSampler {
    /// Every distinct id accepted so far, prompt included: must not part from `all`.
    WholeSequence,
    /// The distinct ids of the last N accepted tokens: must part from `all`.
    Window(usize),
}

/// One penalty scope as the command line names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScopeSpec {
    /// Computed by the oracle.
    Oracle(Scope),
    /// llama.cpp's own penalties sampler with `penalty_last_n = N`, the prompt accepted into
    /// it (as llama-server does), followed by its greedy sampler.
    Llama(usize),
    /// A control (see [`PlantedScope`]).
    Planted(PlantedScope),
    /// A control of the verdict's path (see [`PlantedSampler`]).
    PlantedSampler(PlantedSampler),
}

impl ScopeSpec {
    pub fn parse(text: &str) -> Result<ScopeSpec> {
        let t = text.trim();
        let number = |s: &str| -> Result<usize> {
            let n = s.parse::<usize>().map_err(|_| {
                anyhow::anyhow!("scope '{t}': '{s}' is not a non-negative window length")
            })?;
            ensure!(
                n <= subject::MAX_WINDOW as usize,
                "scope '{t}': a window must be <= {}",
                subject::MAX_WINDOW
            );
            Ok(n)
        };
        Ok(if t == "all" {
            ScopeSpec::Oracle(Scope::All)
        } else if let Some(n) = t.strip_prefix("gen:") {
            ScopeSpec::Oracle(Scope::Generated(number(n)?))
        } else if let Some(n) = t.strip_prefix("llama:") {
            ScopeSpec::Llama(number(n)?)
        } else if t.chars().all(|c| c.is_ascii_digit()) && !t.is_empty() {
            ScopeSpec::Oracle(Scope::Last(number(t)?))
        } else {
            bail!("unknown scope '{t}' (use all, N, gen:N or llama:N)")
        })
    }

    pub fn is_all(&self) -> bool {
        *self == ScopeSpec::Oracle(Scope::All)
    }
}

/// A scope is written as its text (`all`, `64`, `gen:64`, ...).
impl serde::Serialize for ScopeSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl std::fmt::Display for ScopeSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScopeSpec::Oracle(Scope::All) => write!(f, "all"),
            ScopeSpec::Oracle(Scope::Last(n)) => write!(f, "{n}"),
            ScopeSpec::Oracle(Scope::Generated(n)) => write!(f, "gen:{n}"),
            ScopeSpec::Llama(n) => write!(f, "llama:{n}"),
            ScopeSpec::Planted(PlantedScope::DropOne(id)) => write!(f, "planted:all-without-{id}"),
            ScopeSpec::Planted(PlantedScope::DropQuiet(id)) => {
                write!(f, "planted:all-without-quiet-{id}")
            }
            ScopeSpec::PlantedSampler(PlantedSampler::WholeSequence) => {
                write!(f, "planted-penalties:all")
            }
            ScopeSpec::PlantedSampler(PlantedSampler::Window(n)) => {
                write!(f, "planted-penalties:{n}")
            }
        }
    }
}

/// Most scopes one `--scopes` list names: each is a greedy decode of its own.
pub const MAX_SCOPES: usize = 16;

/// Parses `all,64,gen:64,llama:64`; `all` is always included (it is the reference) and
/// duplicates are refused, and so are lists of more than [`MAX_SCOPES`] entries.
pub fn parse_list(text: &str) -> Result<Vec<ScopeSpec>> {
    let n = text.split(',').count();
    ensure!(
        n <= MAX_SCOPES,
        "{n} scopes; at most {MAX_SCOPES} (each is a greedy decode)"
    );
    let mut out = vec![ScopeSpec::Oracle(Scope::All)];
    for part in text.split(',') {
        let s = ScopeSpec::parse(part)?;
        if s.is_all() {
            continue;
        }
        ensure!(!out.contains(&s), "scope '{s}' is listed twice");
        out.push(s);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_back() {
        for t in ["all", "64", "gen:64", "llama:64", "0", "100000"] {
            assert_eq!(ScopeSpec::parse(t).unwrap().to_string(), t);
        }
        for bad in [
            "",
            "-1",
            "gen:",
            "llama:x",
            "last:4",
            "64.5",
            "llama:99999999",
            "99999999",
            "gen:1048577",
        ] {
            assert!(ScopeSpec::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_list("64,all,128").unwrap().len(), 3);
        assert!(parse_list("64,64").is_err());
        let sixteen: Vec<String> = (1..=16).map(|n| n.to_string()).collect();
        assert_eq!(parse_list(&sixteen.join(",")).unwrap().len(), 17);
        let seventeen: Vec<String> = (1..=17).map(|n| n.to_string()).collect();
        assert!(parse_list(&seventeen.join(",")).is_err());
    }
}
