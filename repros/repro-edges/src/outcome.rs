//! What a sampler did with one input: the classes the judge assigns, and what each planted
//! control must be classed as.

use contain::Ended;

/// What a sampler did with one input.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Crashed(Ended),
    Fails,
    SelectsOutside,
    ReturnsNan,
    Disagrees,
    Tie,
    Behaves,
}

impl Outcome {
    /// The table's short code.
    pub(crate) fn code(&self) -> String {
        match self {
            Outcome::Crashed(Ended::Signal(s)) => contain::signal_name(*s)
                .trim_start_matches("SIG")
                .to_string(),
            Outcome::Crashed(Ended::TimedOut(_)) => "TIME".to_string(),
            Outcome::Crashed(Ended::Exited(_)) | Outcome::Fails => "FAIL".to_string(),
            Outcome::SelectsOutside => "OUT".to_string(),
            Outcome::ReturnsNan => "NaN".to_string(),
            Outcome::Disagrees => "DIFF".to_string(),
            Outcome::Tie => "tie".to_string(),
            Outcome::Behaves => "ok".to_string(),
        }
    }

    /// The report's words.
    pub fn words(&self) -> String {
        match self {
            Outcome::Crashed(e) => e.describe(),
            Outcome::Fails => "fails (the array's window is unreadable)".to_string(),
            Outcome::SelectsOutside => "selects outside the array it leaves".to_string(),
            Outcome::ReturnsNan => "returns NaN".to_string(),
            Outcome::Disagrees => "disagrees with the oracle".to_string(),
            Outcome::Tie => "differs where the oracle's answer is undecided".to_string(),
            Outcome::Behaves => "behaves".to_string(),
        }
    }

    /// Whether this outcome breaks the robustness rule.
    pub(crate) fn unrobust(&self) -> bool {
        matches!(
            self,
            Outcome::Crashed(_) | Outcome::Fails | Outcome::SelectsOutside | Outcome::ReturnsNan
        )
    }
}
