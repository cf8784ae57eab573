//! Text helpers every layer of the audit prints with.

use std::fmt::Display;

/// Every item printed, separated by `sep`.
pub fn join<T: Display>(items: impl IntoIterator<Item = T>, sep: &str) -> String {
    let texts: Vec<String> = items.into_iter().map(|x| x.to_string()).collect();
    texts.join(sep)
}
