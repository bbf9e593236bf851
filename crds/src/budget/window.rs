//! A Budget's window as written in its spec. The arithmetic (where a window starts and ends,
//! in a time zone, across daylight-saving changes) is the operator's
//! (`decide::budget_window`); this checks the spec's shape.

use std::ops::RangeInclusive;
use std::time::Duration;

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Shortest and longest `period`, in seconds: 10 seconds to 366 days.
pub const PERIOD_RANGE_SECONDS: RangeInclusive<u64> = 10..=366 * 86_400;

/// The window usage is counted over: exactly one of `period` and `calendar`.
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new(crate::rules::BUDGET_WINDOW_ONE).message(crate::rules::BUDGET_WINDOW_ONE_MESSAGE))]
pub struct BudgetWindow {
    /// A fixed period, `<number><unit>` with unit `s`, `m`, `h` or `d` (e.g. `24h`, `7d`,
    /// `30d`), 10s to 366d: windows follow each other from the Budget's first window, which
    /// starts when the operator first sees the Budget.
    #[schemars(length(min = 2, max = 8))]
    #[x_kube(validation = Rule::new(crate::rules::BUDGET_PERIOD).message(crate::rules::expression(crate::rules::BUDGET_PERIOD_MESSAGE)))]
    pub period: Option<String>,
    /// A calendar window: `Day` (from midnight), `Week` (from Monday midnight) or `Month`
    /// (from the first, midnight), in `timeZone`.
    pub calendar: Option<Calendar>,
    /// The IANA time zone of a `calendar` window, e.g. `Europe/Berlin`. Absent: UTC. A window
    /// across a daylight-saving change is 23 or 25 hours long; a zone the operator does not
    /// know makes the Budget `Ready=False` (reason `UnknownTimeZone`).
    #[schemars(length(min = 1, max = 64))]
    #[x_kube(validation = Rule::new(crate::rules::TIME_ZONE).message(crate::rules::expression(crate::rules::TIME_ZONE_MESSAGE)))]
    pub time_zone: Option<String>,
}

/// A calendar window.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum Calendar {
    /// A day, from midnight to midnight.
    Day,
    /// A week, from Monday midnight.
    Week,
    /// A month, from the first day's midnight.
    Month,
}

/// The length of a `period` such as `24h`, `7d` or `90s`, when it has that shape and lies in
/// [`PERIOD_RANGE_SECONDS`].
pub fn parse_period(period: &str) -> Option<Duration> {
    let unit = period.chars().last()?;
    let number: u64 = period.get(..period.len() - unit.len_utf8())?.parse().ok()?;
    if period.starts_with('+') {
        return None;
    }
    let factor = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86_400,
        _ => return None,
    };
    let seconds = number.checked_mul(factor)?;
    PERIOD_RANGE_SECONDS
        .contains(&seconds)
        .then(|| Duration::from_secs(seconds))
}

impl BudgetWindow {
    /// The window in a few words, for `status.window`: `24h`, `Day Europe/Berlin`.
    pub fn describe(&self) -> String {
        match (&self.period, self.calendar) {
            (Some(period), _) => period.clone(),
            (None, Some(calendar)) => {
                format!(
                    "{calendar:?} {}",
                    self.time_zone.as_deref().unwrap_or("UTC")
                )
            }
            (None, None) => String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn periods_have_a_number_and_a_unit_within_range() {
        assert_eq!(parse_period("24h"), Some(Duration::from_secs(86_400)));
        assert_eq!(parse_period("7d"), Some(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse_period("30d"), Some(Duration::from_secs(30 * 86_400)));
        assert_eq!(parse_period("90s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_period("15m"), Some(Duration::from_secs(900)));
        assert_eq!(
            parse_period("366d"),
            Some(Duration::from_secs(366 * 86_400))
        );
        for bad in [
            "", "h", "9s", "367d", "1w", "1.5h", "-1h", "+1h", "1h30m", "24", "d1",
        ] {
            assert_eq!(parse_period(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_window_describes_itself() {
        let period = BudgetWindow {
            period: Some("24h".into()),
            ..BudgetWindow::default()
        };
        assert_eq!(period.describe(), "24h");
        let calendar = BudgetWindow {
            calendar: Some(Calendar::Month),
            time_zone: Some("Europe/Berlin".into()),
            ..BudgetWindow::default()
        };
        assert_eq!(calendar.describe(), "Month Europe/Berlin");
        let utc = BudgetWindow {
            calendar: Some(Calendar::Week),
            ..BudgetWindow::default()
        };
        assert_eq!(utc.describe(), "Week UTC");
    }

    proptest! {
        /// Any text: a period parses only in the CEL pattern's shape and range, never panics.
        #[test]
        fn any_text_parses_only_in_shape(text in "\\PC{0,10}") {
            if let Some(length) = parse_period(&text) {
                let pattern = regex::Regex::new(crate::rules::BUDGET_PERIOD_PATTERN).unwrap();
                prop_assert!(pattern.is_match(&text), "{text}");
                prop_assert!(PERIOD_RANGE_SECONDS.contains(&length.as_secs()));
            }
        }
    }
}
