//! What an interval over prompts (or prompt/schema pairs) may be called. The reports'
//! intervals are the 2.5th and 97.5th percentiles of the bootstrap mean
//! (`oracle::stats::bootstrap_mean`); over a handful of values those percentiles are close to
//! the smallest and largest value (over two prompts they are the two values) and cover the
//! mean far less often than 95% of the time. So only an interval over at least
//! [`MIN_FOR_95`] values is called a 95% interval (PREREG F4, addendum 2026-12-03); a smaller
//! one is labelled by its count.

/// Values an interval needs before it is called a 95% interval: the A1 design's 16 prompts.
pub const MIN_FOR_95: usize = 16;

/// Whether an interval over `n` values is called a 95% interval.
pub fn is_95(n: usize) -> bool {
    n >= MIN_FOR_95
}

/// A table's column label, six characters either way: `95% CI`, or `n < 16`.
pub fn column(n: usize) -> &'static str {
    if is_95(n) {
        "95% CI"
    } else {
        "n < 16"
    }
}

/// What an interval over `n` `things` is, in words.
pub fn words(n: usize, things: &str) -> String {
    if is_95(n) {
        format!("95% percentile bootstrap intervals over {n} {things}")
    } else {
        format!(
            "2.5th to 97.5th percentiles of the bootstrap mean over {n} {things}, not a 95% interval (fewer than {MIN_FOR_95})"
        )
    }
}

/// The line under a table whose column says `n < 16`, or nothing.
pub fn footnote(n: usize, things: &str) -> Option<String> {
    (!is_95(n)).then(|| format!("  [n < 16]: {}\n", words(n, things)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fewer_than_sixteen_is_never_called_95_percent() {
        for n in 0..MIN_FOR_95 {
            assert_eq!(column(n), "n < 16");
            assert!(words(n, "prompts").contains("not a 95% interval"), "{n}");
            assert!(footnote(n, "prompts").is_some());
        }
        assert_eq!(column(16), "95% CI");
        assert_eq!(column(16).len(), column(2).len());
        assert_eq!(footnote(114, "pairs"), None);
        assert!(words(16, "prompts").starts_with("95% "));
    }
}
