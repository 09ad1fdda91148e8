//! A memory size as a user writes it: `4096` (bytes), `64MiB`, `2GiB`, `1.5GB`. Binary units (`KiB`,
//! `MiB`, `GiB`, `TiB`) are powers of 1024, decimal ones (`kB`, `MB`, `GB`, `TB`) powers of 1000; the
//! unit's case does not matter and a space may precede it. The Rust API takes plain bytes; this is
//! for command lines and configuration.

use std::fmt;
use std::str::FromStr;

/// A number of bytes, parsed from and displayed as a size with a unit (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteSize(pub u64);

/// Units, longest names first so that `KiB` is not read as `K`.
const UNITS: [(&str, u64); 10] = [
    ("kib", 1 << 10),
    ("mib", 1 << 20),
    ("gib", 1 << 30),
    ("tib", 1 << 40),
    ("kb", 1_000),
    ("mb", 1_000_000),
    ("gb", 1_000_000_000),
    ("tb", 1_000_000_000_000),
    ("b", 1),
    ("", 1),
];

/// Binary units for display, largest first.
const SHOWN: [(&str, u64); 4] = [("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];

impl FromStr for ByteSize {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bad = || format!("'{text}' is not a size (expected e.g. 4096, 64MiB, 2GiB or 1.5GB)");
        let t = text.trim();
        let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
        let (number, unit) = t.split_at(split);
        let unit = unit.trim_start().to_ascii_lowercase();
        let scale = UNITS
            .iter()
            .find(|(u, _)| *u == unit)
            .map(|&(_, s)| s)
            .ok_or_else(bad)?;
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
            return Err(bad());
        }
        // Exact arithmetic: whole * scale + fraction * scale / 10^digits, which must be whole bytes.
        let too_big = || format!("'{text}' is too large (at most {} bytes)", u64::MAX);
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| too_big())?
        };
        let fraction = fraction.trim_end_matches('0');
        let (numerator, denominator) = if fraction.is_empty() {
            (0u128, 1u128)
        } else if fraction.len() > 30 {
            return Err(format!("'{text}' is not a whole number of bytes"));
        } else {
            (
                fraction.parse::<u128>().map_err(|_| bad())?,
                10u128.pow(fraction.len() as u32),
            )
        };
        let fraction_bytes = numerator * u128::from(scale);
        if fraction_bytes % denominator != 0 {
            return Err(format!("'{text}' is not a whole number of bytes"));
        }
        let bytes = whole
            .checked_mul(u128::from(scale))
            .and_then(|b| b.checked_add(fraction_bytes / denominator))
            .filter(|&b| b <= u128::from(u64::MAX))
            .ok_or_else(too_big)?;
        Ok(ByteSize(bytes as u64))
    }
}

impl fmt::Display for ByteSize {
    /// The largest binary unit that divides the size exactly (`8GiB`), else plain bytes (`1500`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match SHOWN.iter().find(|&&(_, s)| self.0 != 0 && self.0.is_multiple_of(s)) {
            Some(&(unit, scale)) => write!(f, "{}{unit}", self.0 / scale),
            None => write!(f, "{}", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ByteSize;
    use proptest::prelude::*;

    fn parse(s: &str) -> Result<u64, String> {
        s.parse::<ByteSize>().map(|b| b.0)
    }

    #[test]
    fn units_binary_and_decimal() {
        assert_eq!(parse("4096"), Ok(4096));
        assert_eq!(parse("4096B"), Ok(4096));
        assert_eq!(parse("64MiB"), Ok(64 << 20));
        assert_eq!(parse("2GiB"), Ok(2 << 30));
        assert_eq!(parse("2 gib"), Ok(2 << 30));
        assert_eq!(parse("1.5GB"), Ok(1_500_000_000));
        assert_eq!(parse("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse("8kB"), Ok(8000));
        assert_eq!(parse("1TiB"), Ok(1 << 40));
        assert_eq!(parse(".5KiB"), Ok(512));
        assert_eq!(parse("18446744073709551615"), Ok(u64::MAX));
    }

    #[test]
    fn bad_sizes_say_why() {
        for bad in ["", "GiB", "-1", "1.2.3GiB", "12 apples", "1e9", "."] {
            assert!(parse(bad).unwrap_err().contains("is not a size"), "{bad}");
        }
        assert!(parse("0.5B").unwrap_err().contains("whole number of bytes"));
        assert!(parse("18446744073709551616").unwrap_err().contains("too large"));
        assert!(parse("16777216TiB").unwrap_err().contains("too large"));
    }

    #[test]
    fn display_picks_the_largest_exact_unit() {
        assert_eq!(ByteSize(8 << 30).to_string(), "8GiB");
        assert_eq!(ByteSize(1536 << 20).to_string(), "1536MiB");
        assert_eq!(ByteSize(1_500_000_000).to_string(), "1500000000");
        assert_eq!(ByteSize(0).to_string(), "0");
    }

    proptest! {
        #[test]
        fn display_round_trips(bytes in any::<u64>()) {
            prop_assert_eq!(ByteSize(bytes).to_string().parse::<ByteSize>(), Ok(ByteSize(bytes)));
        }

        #[test]
        fn a_whole_number_of_units_is_exact(n in 0u64..1 << 20, unit in 0usize..4) {
            let (name, scale) = [("KiB", 1u64 << 10), ("MiB", 1 << 20), ("MB", 1_000_000), ("GiB", 1 << 30)][unit];
            prop_assert_eq!(parse(&format!("{n}{name}")), Ok(n * scale));
        }
    }
}
