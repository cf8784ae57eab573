//! Penalty arithmetic, and reading a window count back out of a penalized logit (F1's
//! `CountProbe`; `llama_penalized` is also F2's `penalties` stage).
//!
//! llama.cpp's penalties stage never exposes its per-id counts. But with `repeat = 1` and no
//! presence term it moves a candidate's logit by exactly `count * freq`; with the logit `L`
//! and `freq` powers of two that subtraction is exact in f32, so `(L - logit') / freq`
//! recovers the private count bit for bit through the public API.

/// The three knobs of llama.cpp's penalties stage.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PenaltyParams {
    /// Multiplicative repetition factor, sign-branched (1 = off).
    pub repeat: f32,
    /// Subtracted once per occurrence in the window (0 = off).
    pub freq: f32,
    /// Subtracted once if the id occurs at all (0 = off).
    pub present: f32,
}

/// llama.cpp's per-candidate penalty for an id whose entry in the count map is `count`.
///
/// llama.cpp only touches ids that have an entry in its map, and it erases an entry when
/// the count falls to 0, so in every state it can reach by accepting tokens "has an entry"
/// means `count != 0`. A negative count is not reachable that way; it is modelled because a
/// broken clone produces one, and the formula then boosts the id. The multiply branch is
/// taken for `logit <= 0`, exactly as in llama.cpp, and the arithmetic stays in f32.
pub fn llama_penalized(logit: f32, count: i64, p: PenaltyParams) -> f32 {
    if count == 0 {
        return logit;
    }
    let scaled = if logit <= 0.0 {
        logit * p.repeat
    } else {
        logit / p.repeat
    };
    let present = if count > 0 { 1.0f32 } else { 0.0f32 };
    scaled - (count as f32 * p.freq + present * p.present)
}

/// Why a logit could not be read back as a count.
#[derive(Debug, Clone, PartialEq)]
pub enum ReadoutError {
    /// `(L - logit') / freq` is not an integer: something other than a count moved the logit.
    NotAnInteger { logit: f32 },
    /// The recovered count lies outside the range where the arithmetic is exact.
    OutOfRange { count: f64 },
}

impl std::fmt::Display for ReadoutError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadoutError::NotAnInteger { logit } => write!(
                f,
                "logit {logit} is not the probe logit minus a whole number of freq steps"
            ),
            ReadoutError::OutOfRange { count } => {
                write!(f, "count {count} is outside the exact range of the probe")
            }
        }
    }
}

impl std::error::Error for ReadoutError {}

/// A probe that turns a penalized logit back into the private window count.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CountProbe {
    /// The logit every candidate enters with. A power of two.
    pub base_logit: f32,
    /// The frequency penalty. A power of two.
    pub freq: f32,
}

impl CountProbe {
    /// `L = 1024`, `F = 0.5`: a fractional step, so a readout that only works for F = 1
    /// would be caught, and exact for every |count| up to [`CountProbe::max_exact_count`].
    pub const STANDARD: CountProbe = CountProbe {
        base_logit: 1024.0,
        freq: 0.5,
    };

    /// The penalty parameters that make the subject compute `L - count * F`.
    pub fn params(&self) -> PenaltyParams {
        PenaltyParams {
            repeat: 1.0,
            freq: self.freq,
            present: 0.0,
        }
    }

    /// The largest |count| for which `L - count * F` is exact in f32.
    ///
    /// Every value involved is a multiple of F and at most `L + |count| * F` in size, so
    /// it is exact while that sum stays below `2^24 * F`. Half of that bound is used.
    pub fn max_exact_count(&self) -> i64 {
        let limit = (f64::from(self.freq) * f64::from(1u32 << 23) - f64::from(self.base_logit))
            / f64::from(self.freq);
        limit.max(0.0) as i64
    }

    /// The logit the subject should produce for a candidate whose count is `count`.
    pub fn logit_for(&self, count: i64) -> f32 {
        llama_penalized(self.base_logit, count, self.params())
    }

    /// The count a penalized logit encodes, checked to be exact.
    pub fn count_from(&self, logit: f32) -> Result<i64, ReadoutError> {
        let raw = (f64::from(self.base_logit) - f64::from(logit)) / f64::from(self.freq);
        if !raw.is_finite() || raw.fract() != 0.0 {
            return Err(ReadoutError::NotAnInteger { logit });
        }
        if raw.abs() > self.max_exact_count() as f64 {
            return Err(ReadoutError::OutOfRange { count: raw });
        }
        let count = raw as i64;
        // The forward formula must give back the very same bits, or the readout is not exact.
        if self.logit_for(count).to_bits() != logit.to_bits() {
            return Err(ReadoutError::NotAnInteger { logit });
        }
        Ok(count)
    }

    /// Checks the probe on its own: every count in `-range..=range` goes through the forward
    /// formula and comes back unchanged. Returns the first count that does not.
    pub fn self_check(&self, range: i64) -> Result<(), i64> {
        match (-range..=range).find(|&c| self.count_from(self.logit_for(c)) != Ok(c)) {
            Some(count) => Err(count),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OFF: PenaltyParams = PenaltyParams {
        repeat: 1.0,
        freq: 0.0,
        present: 0.0,
    };

    #[test]
    fn the_sign_branch_then_frequency_and_presence() {
        let p = PenaltyParams {
            repeat: 2.0,
            freq: 0.5,
            present: 0.25,
        };
        let repeat_only = PenaltyParams { repeat: 2.0, ..OFF };
        for (logit, count, params, want) in [
            (4.0, 1, repeat_only, 2.0),
            (-4.0, 1, repeat_only, -8.0),
            // llama.cpp sends an exact zero down the multiply branch; the result is still 0.
            (0.0, 1, repeat_only, 0.0),
            (8.0, 3, p, 4.0 - 1.5 - 0.25),
            // An id with no entry is untouched.
            (8.0, 0, p, 8.0),
            // A negative count (a corrupted ledger) subtracts a negative amount: a boost.
            (8.0, -1, p, 4.0 + 0.5),
        ] {
            assert_eq!(
                llama_penalized(logit, count, params),
                want,
                "{logit} x{count}"
            );
        }
    }

    #[test]
    fn standard_probe_round_trips_every_count_it_claims() {
        let probe = CountProbe::STANDARD;
        assert!(probe.max_exact_count() >= 1 << 20);
        assert_eq!(probe.self_check(4096), Ok(()));
        assert_eq!(probe.logit_for(2), 1023.0);
        assert_eq!(probe.logit_for(-1), 1024.5);
    }

    #[test]
    fn probe_rejects_logits_no_count_explains() {
        let probe = CountProbe::STANDARD;
        assert!(matches!(
            probe.count_from(1023.75),
            Err(ReadoutError::NotAnInteger { .. })
        ));
        assert!(probe.count_from(f32::NAN).is_err());
        assert!(matches!(
            probe.count_from(-1.0e12),
            Err(ReadoutError::OutOfRange { .. })
        ));
    }

    #[test]
    fn a_probe_that_is_not_exact_fails_its_self_check() {
        // F = 0.1 is not a power of two: 1024 - 3 * 0.1 does not invert exactly.
        let bad = CountProbe {
            base_logit: 1024.0,
            freq: 0.1,
        };
        assert!(bad.self_check(16).is_err());
    }
}
