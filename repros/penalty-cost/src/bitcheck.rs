//! The outputs of `upstream/llama.cpp/penalties-full-pass/bitcheck.c` on the stock and the
//! patched build, compared line by line. Each line is one array after the penalties stage:
//! `<class> <case> <sorted flag, size and every entry's id and logit bits>`. The class is
//! `exact` (the patch must leave these bytes as stock does) or `own-index-repeat` (every
//! windowed id sits at its own index and one of them appears at another index too: the
//! patch's id-order shortcut adjusts only the entry at the id's own index, so these may
//! differ). Both outputs must list the same cases in the same order.

use anyhow::{bail, ensure, Result};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

/// The class whose arrays must come out the same.
pub const EXACT: &str = "exact";
/// The class where the patch's shortcut may leave a repeated windowed id unpenalized.
pub const OWN_INDEX_REPEAT: &str = "own-index-repeat";

/// The source the outputs come from, relative to the repository.
pub const SOURCE: &str = "upstream/llama.cpp/penalties-full-pass/bitcheck.c";

/// Arrays of one class, and how many of them the two builds left the same.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    pub arrays: usize,
    pub identical: usize,
}

/// The comparison.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Bitcheck {
    pub finding: &'static str,
    pub source: &'static str,
    pub stock_output: String,
    pub patched_output: String,
    pub arrays: usize,
    /// Arrays per family (a case's name up to its first `/`).
    pub families: BTreeMap<String, usize>,
    pub exact: Tally,
    pub own_index_repeat: Tally,
    pub classes: Classes,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Classes {
    pub exact: &'static str,
    #[serde(rename = "own-index-repeat")]
    pub own_index_repeat: &'static str,
}

pub const CLASSES: Classes = Classes {
    exact: "every other array: the patched build must leave the same bytes as the stock one",
    own_index_repeat: "every id of the penalty window sits at its own index (data[id].id == id) and one of them appears at another index too: the patched shortcut adjusts only the entry at the id's own index",
};

/// Splits a line into its class, its case and the rest.
fn fields(line: &str) -> Result<(&str, &str, &str)> {
    let mut it = line.splitn(3, ' ');
    let (Some(class), Some(case), Some(rest)) = (it.next(), it.next(), it.next()) else {
        bail!("not a bitcheck line: '{line}'");
    };
    ensure!(
        class == EXACT || class == OWN_INDEX_REPEAT,
        "unknown class '{class}' in '{case}'"
    );
    Ok((class, case, rest))
}

/// What [`compare`] counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    pub exact: Tally,
    pub own_index_repeat: Tally,
    pub families: BTreeMap<String, usize>,
}

/// Compares the two outputs; an `exact` array that differs is an error naming its case.
pub fn compare(stock: &str, patched: &str) -> Result<Counts> {
    let (a, b): (Vec<&str>, Vec<&str>) = (stock.lines().collect(), patched.lines().collect());
    ensure!(
        a.len() == b.len(),
        "the outputs hold {} and {} arrays: not the same cases",
        a.len(),
        b.len()
    );
    ensure!(!a.is_empty(), "the outputs hold no arrays");
    let mut c = Counts::default();
    for (x, y) in a.iter().zip(&b) {
        let ((cx, kx, rx), (cy, ky, ry)) = (fields(x)?, fields(y)?);
        ensure!(
            (cx, kx) == (cy, ky),
            "case '{cx} {kx}' of the stock output is '{cy} {ky}' in the patched one: not the same cases"
        );
        let same = rx == ry;
        let tally = if cx == EXACT {
            ensure!(
                same,
                "array {kx} (class {EXACT}) differs between the builds:\n  stock:   {rx}\n  patched: {ry}"
            );
            &mut c.exact
        } else {
            &mut c.own_index_repeat
        };
        tally.arrays += 1;
        tally.identical += usize::from(same);
        let family = kx.split('/').next().unwrap_or(kx);
        *c.families.entry(family.to_string()).or_default() += 1;
    }
    Ok(c)
}

/// Reads and compares the two files.
pub fn run(stock: &Path, patched: &Path) -> Result<Bitcheck> {
    let read = |p: &Path| {
        std::fs::read_to_string(p).map_err(|e| anyhow::anyhow!("reading {}: {e}", p.display()))
    };
    let c = compare(&read(stock)?, &read(patched)?)?;
    Ok(Bitcheck {
        finding: crate::FINDING,
        source: SOURCE,
        stock_output: stock.display().to_string(),
        patched_output: patched.display().to_string(),
        arrays: c.exact.arrays + c.own_index_repeat.arrays,
        families: c.families,
        exact: c.exact,
        own_index_repeat: c.own_index_repeat,
        classes: CLASSES,
    })
}

/// One paragraph whose first sentence says where the builds may differ.
pub fn text(b: &Bitcheck) -> String {
    let r = b.own_index_repeat;
    format!(
        "bitcheck ({}): the patched penalties stage leaves every bit as the stock one does except on arrays that hold a windowed id at its own index and again at another index ({} such arrays, {} of them differ); the other {} arrays are identical bit for bit ({} against {})\n",
        b.source,
        r.arrays,
        r.arrays - r.identical,
        b.exact.identical,
        b.stock_output,
        b.patched_output
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const STOCK: &str = "exact id-order/1/0 sorted=0 size=2 0:3f800000 1:40000000\n\
                         own-index-repeat repeat-id-order/1/0 sorted=0 size=2 0:3f000000 0:3f000000\n\
                         own-index-repeat repeat-id-order/2/0 sorted=0 size=1 0:3f000000\n";

    #[test]
    fn same_outputs_are_tallied_by_class() {
        let c = compare(STOCK, STOCK).unwrap();
        assert_eq!(
            c.exact,
            Tally {
                arrays: 1,
                identical: 1
            }
        );
        assert_eq!(
            c.own_index_repeat,
            Tally {
                arrays: 2,
                identical: 2
            }
        );
        let families: Vec<(&str, usize)> =
            c.families.iter().map(|(k, n)| (k.as_str(), *n)).collect();
        assert_eq!(families, [("id-order", 1), ("repeat-id-order", 2)]);
    }

    #[test]
    fn a_differing_repeat_array_is_counted_and_a_differing_exact_one_refused() {
        let patched = STOCK.replacen("0:3f000000 0:3f000000", "0:3f000000 0:3f800000", 1);
        let c = compare(STOCK, &patched).unwrap();
        let (e, r) = (c.exact, c.own_index_repeat);
        assert_eq!((e.identical, r.identical, r.arrays), (1, 1, 2));
        let patched = STOCK.replacen("1:40000000", "1:40000001", 1);
        let err = compare(STOCK, &patched).unwrap_err().to_string();
        assert!(err.contains("id-order/1/0"), "{err}");
    }

    #[test]
    fn outputs_of_other_cases_are_refused() {
        let fewer: String = STOCK.lines().take(2).map(|l| format!("{l}\n")).collect();
        assert!(compare(STOCK, &fewer).is_err());
        let renamed = STOCK.replacen("id-order/1/0", "id-order/9/0", 1);
        assert!(compare(STOCK, &renamed).is_err());
        let reclassed = STOCK.replacen("exact", "own-index-repeat", 1);
        assert!(compare(STOCK, &reclassed).is_err());
        assert!(compare("odd 1 2\n", "odd 1 2\n").is_err());
        assert!(compare("", "").is_err());
    }

    #[test]
    fn the_text_opens_with_the_exception() {
        let b = Bitcheck {
            finding: "F5",
            source: SOURCE,
            stock_output: "s".into(),
            patched_output: "p".into(),
            arrays: 10,
            families: BTreeMap::new(),
            exact: Tally {
                arrays: 7,
                identical: 7,
            },
            own_index_repeat: Tally {
                arrays: 3,
                identical: 1,
            },
            classes: CLASSES,
        };
        let t = text(&b);
        let first = t.split(';').next().unwrap();
        assert!(
            first.contains("except on arrays that hold a windowed id at its own index"),
            "{t}"
        );
        assert!(first.contains("3 such arrays, 2 of them differ"), "{t}");
    }
}
