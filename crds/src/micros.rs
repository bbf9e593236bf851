//! Money as integer millionths of a currency's unit ("micros"), and the decimal strings
//! (`"2.50"`) prices and amounts are written in: exact, never floating point.

/// Micros in one unit of a currency.
pub const MICROS_PER_UNIT: u64 = 1_000_000;
/// Most integer digits of a price or amount.
const MAX_INTEGER_DIGITS: usize = 9;
/// Most decimals of a price or amount (a micro).
const MAX_DECIMALS: usize = 6;

/// A decimal amount (`"2.5"`, `"0.000150"`, `"12"`) in micros; `None` when it is not one: no
/// sign, no exponent, at most nine integer digits and six decimals (the CRD's pattern).
pub fn parse_micros(text: &str) -> Option<u64> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |part: &str| part.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty()
        || whole.len() > MAX_INTEGER_DIGITS
        || !digits(whole)
        || fraction.len() > MAX_DECIMALS
        || !digits(fraction)
        || (text.contains('.') && fraction.is_empty())
    {
        return None;
    }
    let whole: u64 = whole.parse().ok()?;
    let padded = format!("{fraction:0<6}");
    let fraction: u64 = padded.parse().ok()?;
    whole.checked_mul(MICROS_PER_UNIT)?.checked_add(fraction)
}

/// Micros as a decimal with six places: `4210` → `0.004210`.
pub fn format_micros(micros: u64) -> String {
    format!(
        "{}.{:06}",
        micros / MICROS_PER_UNIT,
        micros % MICROS_PER_UNIT
    )
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn decimals_parse_to_micros_and_back() {
        assert_eq!(parse_micros("2.50"), Some(2_500_000));
        assert_eq!(parse_micros("0.000150"), Some(150));
        assert_eq!(parse_micros("12"), Some(12_000_000));
        assert_eq!(parse_micros("999999999.999999"), Some(999_999_999_999_999));
        for bad in [
            "",
            ".5",
            "5.",
            "-1",
            "1e3",
            "1.0000001",
            "1234567890",
            "1,5",
            " 1",
        ] {
            assert_eq!(parse_micros(bad), None, "{bad:?}");
        }
        assert_eq!(format_micros(4210), "0.004210");
        assert_eq!(format_micros(12_500_000), "12.500000");
    }

    proptest! {
        #[test]
        fn amounts_read_back_as_written(micros in 0u64..1_000_000_000_000_000) {
            prop_assert_eq!(parse_micros(&format_micros(micros)), Some(micros));
        }
    }
}
