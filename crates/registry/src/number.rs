//! A finding's number: `F1`, `F2`, ... `F10`, ordered as numbers, not as strings.

use std::fmt;

/// The number of a finding; `Display` writes `F<n>`. Ordered numerically, so `F10` comes
/// after `F9` wherever findings are listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FindingNumber(pub u16);

impl FindingNumber {
    /// `F<n>` with `n` a positive decimal number without leading zeros; anything else is
    /// `None`.
    pub fn parse(text: &str) -> Option<FindingNumber> {
        let digits = text.strip_prefix('F')?;
        let canonical = !digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit())
            && !digits.starts_with('0');
        if !canonical {
            return None;
        }
        digits.parse().ok().map(FindingNumber)
    }
}

impl fmt::Display for FindingNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "F{}", self.0)
    }
}

/// Compares two finding ids as [`FindingNumber`]s where both parse, else as text (a
/// parsed id before an unparsed one).
pub fn compare_ids(a: &str, b: &str) -> std::cmp::Ordering {
    match (FindingNumber::parse(a), FindingNumber::parse(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ten_comes_after_nine_and_text_after_numbers() {
        let mut ids = vec!["F10", "F2", "x", "F9", "F1"];
        ids.sort_by(|a, b| compare_ids(a, b));
        assert_eq!(ids, ["F1", "F2", "F9", "F10", "x"]);
    }

    #[test]
    fn only_the_canonical_form_parses() {
        assert_eq!(FindingNumber::parse("F10"), Some(FindingNumber(10)));
        for bad in ["F", "F01", "f1", "F1a", "1", "F-1", "F0"] {
            assert_eq!(FindingNumber::parse(bad), None, "{bad}");
        }
        assert_eq!(FindingNumber(12).to_string(), "F12");
    }
}
