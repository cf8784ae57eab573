//! The penalty stages under test and their parameters, built through `ledger::PenaltyConfig`
//! (llama.cpp's own stage is its `builtin()`).

use anyhow::Result;
use ledger::{ledger_penalties, Mode, PenaltyConfig};
use oracle::window::WindowLen;
use subject::Sampler;

/// `penalty_last_n`: the window of recent tokens every stage penalizes.
pub const WINDOW: usize = 64;
/// `penalty_repeat`; `freq` and `present` stay 0.
pub const THETA: f32 = 1.1;

/// One penalties stage, with the bench's parameters. [`Penalty::ALL`] lists the stages in
/// declaration order, so `stage as usize` is a stage's index in it.
#[derive(Debug, Clone, Copy)]
pub enum Penalty {
    /// llama.cpp's penalties.
    Builtin,
    /// `ledger-penalties`, default mode (llama.cpp's arithmetic bit for bit).
    Ledger,
    /// `ledger-penalties`, normalized mode (one log-sum-exp pass over the array as well).
    LedgerNormalized,
}

impl Penalty {
    pub const ALL: [Penalty; 3] = [Penalty::Builtin, Penalty::Ledger, Penalty::LedgerNormalized];

    /// The name in tables and plots.
    pub fn label(self) -> &'static str {
        match self {
            Penalty::Builtin => "llama.cpp penalties",
            Penalty::Ledger => "ledger-penalties",
            Penalty::LedgerNormalized => "ledger-penalties, normalized",
        }
    }

    /// A fresh sampler for a vocabulary of `n_vocab` ids, nothing accepted yet.
    pub fn build(self, n_vocab: i32) -> Result<Sampler> {
        match self {
            Penalty::Builtin => builtin_penalties(n_vocab),
            Penalty::Ledger => ledger_penalties(ledger_config(n_vocab, Mode::Default)),
            Penalty::LedgerNormalized => ledger_penalties(ledger_config(n_vocab, Mode::Normalized)),
        }
    }
}

/// llama.cpp's penalties with the bench's window and theta.
pub fn builtin_penalties(n_vocab: i32) -> Result<Sampler> {
    ledger_config(n_vocab, Mode::Default).builtin().build()
}

/// The bench's knobs for a penalties stage in `mode` (llama.cpp's ignores the mode).
fn ledger_config(n_vocab: i32, mode: Mode) -> PenaltyConfig {
    PenaltyConfig::repeat_only(n_vocab, WindowLen(WINDOW), THETA, mode)
}

#[cfg(test)]
mod tests {
    use super::*;
    use subject::{IdOrder, LogitsArray, TokenId};

    /// What the timings compare must be the same work: on an array in id order and on a
    /// shuffled one, `ledger-penalties` (default mode) leaves every logit exactly where
    /// llama.cpp's penalties leave it.
    #[test]
    fn builtin_and_ledger_agree_in_both_layouts() {
        let n = 1000;
        let row: Vec<f32> = (0..n).map(|i| (i % 37) as f32 / 3.0 - 6.0).collect();
        let history = [3, 3, 999, 0, 512, 17, 17, 17];
        let mut ids: Vec<TokenId> = (0..n as i32).map(TokenId).collect();
        oracle::rng::Rng::new(7).shuffle(&mut ids);
        for order in [(0..n as i32).map(TokenId).collect(), ids] {
            let order = IdOrder::new(&order).unwrap();
            let mut out = Vec::new();
            for stage in [Penalty::Builtin, Penalty::Ledger] {
                let mut s = stage.build(n as i32).unwrap();
                for &t in &history {
                    s.accept(TokenId(t)).unwrap();
                }
                let mut arr = LogitsArray::new();
                arr.load_in(&row, &order).unwrap();
                arr.apply(&mut s).unwrap();
                let got: Vec<_> = (0..n)
                    .map(|i| (arr.id(i).unwrap(), arr.logit(i).unwrap().to_bits()))
                    .collect();
                out.push(got);
            }
            assert_eq!(out[0], out[1]);
            // And the penalty did something: id 3's logit moved.
            let k = out[0].iter().position(|(id, _)| *id == TokenId(3)).unwrap();
            assert_ne!(f32::from_bits(out[0][k].1), row[3]);
        }
    }
}
