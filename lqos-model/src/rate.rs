//! Exact link and plan rates.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A rate in bits per second, held as an exact integer.
///
/// LibreQoS writes rates as (possibly fractional) Mbps: `0.5`, `2.5`,
/// `100.5`, `0.0028`. One Mbps is 1,000,000 bit/s, so any decimal with at most
/// six fractional digits is an exact integer number of bit/s and round-trips
/// through [`Rate::from_mbps_str`] and [`Rate::to_mbps_string`] unchanged.
///
/// ```
/// use lqos_model::Rate;
/// let r: Rate = "2.5".parse().unwrap();
/// assert_eq!(r.bps(), 2_500_000);
/// assert_eq!(r.to_mbps_string(), "2.5");
/// assert_eq!(Rate::from_mbps(100).bps(), 100_000_000);
/// ```
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Rate(u64);

/// Why a Mbps string is not a valid [`Rate`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RateError {
    /// The text is empty.
    #[error("empty rate")]
    Empty,
    /// The text is negative.
    #[error("negative rate {0:?}")]
    Negative(String),
    /// The text is not a decimal number.
    #[error("rate {0:?} is not a number")]
    NotANumber(String),
    /// More than six fractional digits (finer than 1 bit/s).
    #[error("rate {0:?} has more than 6 decimal places (finer than 1 bit/s)")]
    TooPrecise(String),
    /// Does not fit in 64 bits of bit/s.
    #[error("rate {0:?} Mbps is too large")]
    TooLarge(String),
}

/// The bit/s of a short plain decimal (`100`, `2.5`, `.5`: digits, at
/// most one `.`, at most 6 decimals, at most 12 bytes, so it cannot
/// overflow); `None` for anything else, which [`Rate::from_mbps_str`] then
/// reads the long way (same value wherever both accept).
#[inline]
fn plain_mbps(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 12 {
        return None;
    }
    let (mut int, mut frac, mut frac_len) = (0u64, 0u64, 0u32);
    let (mut dot, mut digits) = (false, 0);
    for &c in b {
        match c {
            b'0'..=b'9' if dot => {
                if frac_len == 6 {
                    return None;
                }
                frac = frac * 10 + u64::from(c - b'0');
                frac_len += 1;
                digits += 1;
            }
            b'0'..=b'9' => {
                int = int * 10 + u64::from(c - b'0');
                digits += 1;
            }
            b'.' if !dot => dot = true,
            _ => return None,
        }
    }
    (digits > 0).then(|| int * 1_000_000 + frac * 10u64.pow(6 - frac_len))
}

impl Rate {
    /// Rates above this (400 Gbit/s) are treated as typing mistakes.
    pub const MAX_PLAUSIBLE: Rate = Rate::from_bps(400_000_000_000);

    /// Zero bit/s.
    pub const ZERO: Rate = Rate(0);

    /// A rate of `bps` bits per second.
    pub const fn from_bps(bps: u64) -> Rate {
        Rate(bps)
    }

    /// A rate of whole `mbps` megabits per second (saturating).
    pub const fn from_mbps(mbps: u64) -> Rate {
        Rate(mbps.saturating_mul(1_000_000))
    }

    /// Bits per second.
    pub const fn bps(self) -> u64 {
        self.0
    }

    /// Bytes per second, rounded down (what the kernel's ratespec holds).
    pub const fn bytes_per_sec(self) -> u64 {
        self.0 / 8
    }

    /// Whole megabits per second, rounded down.
    pub const fn mbps_floor(self) -> u64 {
        self.0 / 1_000_000
    }

    /// True for a zero rate.
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }

    /// Parses a decimal Mbps value as LibreQoS writes it (`"2.5"`, `"100"`,
    /// `"0.0028"`, `"1e3"` is rejected). Surrounding whitespace is ignored.
    pub fn from_mbps_str(text: &str) -> Result<Rate, RateError> {
        match plain_mbps(text.as_bytes()) {
            Some(bps) => Ok(Rate(bps)),
            None => Rate::from_mbps_str_general(text),
        }
    }

    /// [`Rate::from_mbps_str`] for any text (signs, whitespace, long
    /// values) with its error messages.
    fn from_mbps_str_general(text: &str) -> Result<Rate, RateError> {
        let s = text.trim();
        if s.is_empty() {
            return Err(RateError::Empty);
        }
        if s.starts_with('-') {
            return Err(RateError::Negative(s.to_string()));
        }
        let s2 = s.strip_prefix('+').unwrap_or(s);
        let (int_part, frac_part) = match s2.split_once('.') {
            Some((i, f)) => (i, f),
            None => (s2, ""),
        };
        let digits_ok = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
        if (int_part.is_empty() && frac_part.is_empty())
            || !digits_ok(int_part)
            || !digits_ok(frac_part)
        {
            return Err(RateError::NotANumber(s.to_string()));
        }
        let frac_trim = frac_part.trim_end_matches('0');
        if frac_trim.len() > 6 {
            return Err(RateError::TooPrecise(s.to_string()));
        }
        let too_large = || RateError::TooLarge(s.to_string());
        let int_digits = int_part.trim_start_matches('0');
        let int: u64 = if int_digits.is_empty() {
            0
        } else {
            int_digits.parse().map_err(|_| too_large())?
        };
        let mut frac: u64 = 0;
        for (i, b) in frac_trim.bytes().enumerate() {
            frac += u64::from(b - b'0') * 10u64.pow(5 - i as u32);
        }
        int.checked_mul(1_000_000)
            .and_then(|v| v.checked_add(frac))
            .map(Rate)
            .ok_or_else(too_large)
    }

    /// The rate as a decimal Mbps string with no trailing zeros
    /// (`2500000` bit/s → `"2.5"`), the inverse of [`Rate::from_mbps_str`].
    pub fn to_mbps_string(self) -> String {
        let int = self.0 / 1_000_000;
        let frac = self.0 % 1_000_000;
        if frac == 0 {
            int.to_string()
        } else {
            let f = format!("{frac:06}");
            format!("{int}.{}", f.trim_end_matches('0'))
        }
    }

    /// The smaller of two rates.
    pub fn min(self, other: Rate) -> Rate {
        Rate(self.0.min(other.0))
    }

    /// Saturating subtraction.
    pub fn saturating_sub(self, other: Rate) -> Rate {
        Rate(self.0.saturating_sub(other.0))
    }
}

impl fmt::Display for Rate {
    /// Formats as Mbps, e.g. `2.5`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_mbps_string())
    }
}

impl FromStr for Rate {
    type Err = RateError;
    /// Parses decimal Mbps, see [`Rate::from_mbps_str`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Rate::from_mbps_str(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractional_mbps_round_trip_exactly() {
        for s in [
            "0.5", "2.5", "100.5", "0.0028", "1", "10000", "0.000001", "155",
        ] {
            let r = Rate::from_mbps_str(s).unwrap();
            assert_eq!(r.to_mbps_string(), s);
        }
        assert_eq!(Rate::from_mbps_str("0.0028").unwrap().bps(), 2800);
        assert_eq!(
            Rate::from_mbps_str("1.250").unwrap().to_mbps_string(),
            "1.25"
        );
        assert_eq!(Rate::from_mbps_str(" 7 ").unwrap().bps(), 7_000_000);
        assert_eq!(Rate::from_mbps_str(".5").unwrap().bps(), 500_000);
    }

    proptest::proptest! {
        #[test]
        fn plain_fast_path_agrees_with_the_general_reader(
            text in proptest::string::string_regex("[0-9.+ -]{0,14}").unwrap()
        ) {
            if let Some(bps) = plain_mbps(text.as_bytes()) {
                proptest::prop_assert_eq!(Rate::from_mbps_str_general(&text), Ok(Rate(bps)));
            }
            // Plain digit strings always take the fast path.
            if !text.is_empty() && text.len() <= 12 && text.bytes().all(|b| b.is_ascii_digit()) {
                proptest::prop_assert!(plain_mbps(text.as_bytes()).is_some());
            }
        }
    }

    #[test]
    fn bad_rates_are_named() {
        assert_eq!(Rate::from_mbps_str(""), Err(RateError::Empty));
        assert_eq!(
            Rate::from_mbps_str("-1"),
            Err(RateError::Negative("-1".into()))
        );
        assert_eq!(
            Rate::from_mbps_str("fast"),
            Err(RateError::NotANumber("fast".into()))
        );
        assert_eq!(
            Rate::from_mbps_str("1e3"),
            Err(RateError::NotANumber("1e3".into()))
        );
        assert_eq!(
            Rate::from_mbps_str("."),
            Err(RateError::NotANumber(".".into()))
        );
        assert_eq!(
            Rate::from_mbps_str("0.0000001"),
            Err(RateError::TooPrecise("0.0000001".into()))
        );
        assert!(matches!(
            Rate::from_mbps_str("99999999999999999999"),
            Err(RateError::TooLarge(_))
        ));
        assert_eq!(
            RateError::NotANumber("x".into()).to_string(),
            "rate \"x\" is not a number"
        );
    }
}
