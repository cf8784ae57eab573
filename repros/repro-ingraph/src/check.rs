//! The checks a row's verdict is made of, named once for the comparison and the planted
//! stages that each target one.

use serde::Serialize;

/// The four checks a row's verdict is made of (see `compare::Outcome::verdict`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Check {
    /// The graph kept another set than the oracle's.
    Survivors,
    /// A survivor's logit is further from the CPU's than the case allows.
    Values,
    /// A greedy choice differs from the oracle's, a draw is no survivor, or no token was chosen
    /// by a chain that chooses.
    Choice,
    /// The graph's probabilities are off the oracle's softmax.
    Probs,
}
