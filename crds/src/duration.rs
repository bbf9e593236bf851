//! Durations as Herd's manifests write them: `90s`, `30m`, `1h30m`, `500ms`.
//!
//! The format is `^([0-9]{1,6}(ms|s|m|h))+$` (see [`crate::rules::DURATION_PATTERN`]), the
//! subset of Go's `time.ParseDuration` the CRDs accept; [`parse_duration_within`] adds the
//! CRDs' ranges (1s to [`MAX_TIMEOUT`] or [`MAX_INPUT_TIMEOUT`]).

use std::time::Duration;

/// Most digits of one group: 999999h still fits Go's `time.Duration`.
const MAX_GROUP_DIGITS: usize = 6;

/// Shortest `timeout`, `subagents.timeout`, `requestTimeout` and `inputTimeout`.
pub const MIN_DURATION: Duration = Duration::from_secs(1);
/// Longest `timeout`, `subagents.timeout` and `requestTimeout`: 168h, a week.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(168 * 3600);
/// Longest `inputTimeout`: 720h, 30 days.
pub const MAX_INPUT_TIMEOUT: Duration = Duration::from_secs(720 * 3600);

/// Why a duration string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// The text does not match `^([0-9]{1,6}(ms|s|m|h))+$`.
    #[error("{0:?} is not a duration: {msg}", msg = crate::rules::DURATION_MESSAGE)]
    Format(String),
    /// The value does not fit in a `Duration`.
    #[error("{0:?} is too long a duration")]
    Overflow(String),
    /// The value is outside the field's range; the text is the CRD rule's message.
    #[error("\"{text}\" must be between 1s and {max}h", max = .max.as_secs() / 3600)]
    OutOfRange {
        /// The duration as written.
        text: String,
        /// The field's longest duration (a whole number of hours).
        max: Duration,
    },
}

/// Parses a duration such as `1h30m` or `500ms`; groups add up (`1m1m` is two minutes).
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let format = || DurationError::Format(text.to_owned());
    let overflow = || DurationError::Overflow(text.to_owned());
    if text.is_empty() {
        return Err(format());
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > MAX_GROUP_DIGITS {
            return Err(format());
        }
        let (number, tail) = rest.split_at(digits);
        let value: u64 = number.parse().map_err(|_| overflow())?;
        let (unit_millis, tail) = if let Some(tail) = tail.strip_prefix("ms") {
            (1, tail)
        } else if let Some(tail) = tail.strip_prefix('s') {
            (1_000, tail)
        } else if let Some(tail) = tail.strip_prefix('m') {
            (60_000, tail)
        } else if let Some(tail) = tail.strip_prefix('h') {
            (3_600_000, tail)
        } else {
            return Err(format());
        };
        let millis = value.checked_mul(unit_millis).ok_or_else(overflow)?;
        total = total
            .checked_add(Duration::from_millis(millis))
            .ok_or_else(overflow)?;
        rest = tail;
    }
    Ok(total)
}

/// Parses a duration that must lie between [`MIN_DURATION`] and `max`, as the CRDs' range
/// rules require.
pub fn parse_duration_within(text: &str, max: Duration) -> Result<Duration, DurationError> {
    let out_of_range = || DurationError::OutOfRange {
        text: text.to_owned(),
        max,
    };
    match parse_duration(text) {
        Ok(value) if (MIN_DURATION..=max).contains(&value) => Ok(value),
        Ok(_) | Err(DurationError::Overflow(_)) => Err(out_of_range()),
        Err(other) => Err(other),
    }
}

/// Whether `text` matches the duration format (the same test the CRDs' CEL rule makes).
pub fn is_duration(text: &str) -> bool {
    !matches!(parse_duration(text), Err(DurationError::Format(_)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_each_unit_and_sums_groups() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_duration("24h"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("1m1m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
    }

    #[test]
    fn refuses_what_the_pattern_refuses() {
        for bad in [
            "", "30", "m", "1.5h", "1d", "-1s", "1h ", " 1h", "1H", "1us", "1hm",
        ] {
            assert!(
                matches!(parse_duration(bad), Err(DurationError::Format(_))),
                "{bad:?} should be refused"
            );
            assert!(!is_duration(bad));
        }
    }

    #[test]
    fn groups_have_at_most_six_digits() {
        assert_eq!(
            parse_duration("999999h"),
            Ok(Duration::from_secs(999_999 * 3600))
        );
        for bad in ["1000000s", "99999999999999999999999h", "1h0000000m"] {
            assert_eq!(
                parse_duration(bad),
                Err(DurationError::Format(bad.to_owned()))
            );
        }
    }

    #[test]
    fn ranges_match_the_crd_rules() {
        assert_eq!(
            parse_duration_within("1s", MAX_TIMEOUT),
            Ok(Duration::from_secs(1))
        );
        assert_eq!(parse_duration_within("168h", MAX_TIMEOUT), Ok(MAX_TIMEOUT));
        assert_eq!(
            parse_duration_within("720h", MAX_INPUT_TIMEOUT),
            Ok(MAX_INPUT_TIMEOUT)
        );
        for (bad, max) in [
            ("999ms", MAX_TIMEOUT),
            ("0s", MAX_TIMEOUT),
            ("168h1s", MAX_TIMEOUT),
            ("721h", MAX_INPUT_TIMEOUT),
        ] {
            let error = parse_duration_within(bad, max).unwrap_err();
            assert!(matches!(error, DurationError::OutOfRange { .. }), "{bad}");
        }
        assert_eq!(
            parse_duration_within("169h", MAX_TIMEOUT)
                .unwrap_err()
                .to_string(),
            crate::rules::quoted("169h", crate::rules::DURATION_UP_TO_168H_SUFFIX)
        );
        assert_eq!(
            parse_duration_within("721h", MAX_INPUT_TIMEOUT)
                .unwrap_err()
                .to_string(),
            crate::rules::quoted("721h", crate::rules::DURATION_UP_TO_720H_SUFFIX)
        );
        assert!(matches!(
            parse_duration_within("1d", MAX_TIMEOUT),
            Err(DurationError::Format(_))
        ));
    }

    proptest! {
        #[test]
        fn round_trips_generated_groups(groups in proptest::collection::vec((0u64..1_000_000, 0usize..4), 1..5)) {
            let units = [("ms", 1u64), ("s", 1_000), ("m", 60_000), ("h", 3_600_000)];
            let text: String = groups.iter().map(|(n, u)| format!("{n}{}", units[*u].0)).collect();
            let millis: u64 = groups.iter().map(|(n, u)| n * units[*u].1).sum();
            prop_assert_eq!(parse_duration(&text), Ok(Duration::from_millis(millis)));
        }

        #[test]
        fn never_panics(text in ".{0,24}") {
            let _ = parse_duration(&text);
        }
    }
}
