//! One probe: a sampler applied to one edge input, inside a supervised child.
//!
//! Parent side: [`run`] starts this binary as a child with the task [`TASK`] and the two
//! names, and returns what happened ([`Observed`]). Child side: [`child`] builds the sampler,
//! applies it with `Sampler::apply_unvalidated` and prints the array it left, floats as bit
//! patterns so NaN, `-inf` and every last bit survive the trip.

use crate::{inputs, samplers};
use anyhow::{bail, Context, Result};
use contain::{Ended, Task};
use std::ffi::OsString;
use std::time::Duration;
use subject::{RawEntry, RawResult};

pub const TASK: Task = Task {
    name: "edge-probe",
    handler: child,
};

#[derive(Debug, Clone, PartialEq)]
pub enum Observed {
    /// The child printed the array the sampler left.
    Returned(RawResult),
    /// The child was killed or ran past the deadline, with the last line it wrote (an
    /// assertion's message, with the source path cut to its file name).
    Crashed(Ended, String),
    /// The child ended without a result: its one line (the memory guard refused, say).
    Failed(String),
}

/// Runs `sampler` on `input` in a child, killed after `timeout`.
pub fn run(sampler: &str, input: &str, timeout: Duration) -> Result<Observed> {
    let cmd = TASK.command(&[OsString::from(sampler), OsString::from(input)])?;
    let out = contain::run(cmd, timeout)?;
    Ok(match out.ended {
        Ended::Exited(0) => Observed::Returned(
            decode(&String::from_utf8_lossy(&out.stdout))
                .with_context(|| format!("reading the probe of {sampler} on {input}"))?,
        ),
        Ended::Exited(_) => Observed::Failed(out.last_stderr_line().to_string()),
        crashed => Observed::Crashed(crashed, out.last_words()),
    })
}

/// The child: `<sampler> <input>`; prints the result, or one line and exit 3.
fn child(args: &[OsString]) -> i32 {
    contain::reply(child_result(args))
}

fn child_result(args: &[OsString]) -> Result<String> {
    let [sampler, input] = args else {
        bail!("the probe takes a sampler name and an input name");
    };
    let (sampler, input) = (sampler.to_string_lossy(), input.to_string_lossy());
    let config = samplers::by_name(&sampler).with_context(|| format!("no sampler '{sampler}'"))?;
    let input = inputs::all()
        .into_iter()
        .find(|i| i.name == input)
        .with_context(|| format!("no input '{input}'"))?;
    let mut s = config.build()?;
    let result = s.apply_unvalidated(&input.entries, false)?;
    Ok(encode(&result))
}

fn encode(r: &RawResult) -> String {
    let mut out = format!("selected {}\nsorted {}\n", r.selected, r.sorted as u8);
    for e in &r.entries {
        out.push_str(&format!(
            "{} {:08x} {:08x}\n",
            e.id,
            e.logit.to_bits(),
            e.p.to_bits()
        ));
    }
    out
}

fn decode(text: &str) -> Result<RawResult> {
    let mut lines = text.lines();
    let mut field = |key: &str| -> Result<String> {
        let line = lines.next().context("the probe's output is cut short")?;
        line.strip_prefix(key)
            .map(|v| v.trim().to_string())
            .with_context(|| format!("expected '{key}' in the probe's output, got '{line}'"))
    };
    let selected: i64 = field("selected")?.parse()?;
    let sorted = field("sorted")? == "1";
    let entries = lines
        .map(|l| {
            let parts: Vec<&str> = l.split(' ').collect();
            let [id, logit, p] = parts.as_slice() else {
                bail!("bad entry line '{l}'");
            };
            Ok(RawEntry {
                id: id.parse()?,
                logit: f32::from_bits(u32::from_str_radix(logit, 16)?),
                p: f32::from_bits(u32::from_str_radix(p, 16)?),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(RawResult {
        entries,
        selected,
        sorted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_encoding_keeps_every_bit() {
        let entry = |id, logit, p| RawEntry { id, logit, p };
        let r = RawResult {
            entries: vec![
                entry(3, f32::NAN, -0.0),
                entry(0, f32::NEG_INFINITY, f32::from_bits(1)),
            ],
            selected: -7,
            sorted: true,
        };
        let back = decode(&encode(&r)).unwrap();
        assert_eq!(back.selected, -7);
        assert!(back.sorted);
        for (a, b) in r.entries.iter().zip(&back.entries) {
            assert_eq!(a.id, b.id);
            assert_eq!(a.logit.to_bits(), b.logit.to_bits());
            assert_eq!(a.p.to_bits(), b.p.to_bits());
        }
    }
}
