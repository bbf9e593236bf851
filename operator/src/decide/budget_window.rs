//! Where a Budget's window starts and ends. A `period` window follows the previous one back to
//! back (from the first window the operator started); a `calendar` window is a day, week (from
//! Monday) or month of wall-clock time in its zone, so across a daylight-saving change a day
//! lasts 23 or 25 hours and a month as long as it is.

use std::time::Duration;

use herd_crds::budget::{BudgetWindow, Calendar, parse_period};
use jiff::civil::Date;
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan, Zoned};

/// A Budget's window, read from its spec.
#[derive(Clone, Debug, PartialEq)]
pub enum Window {
    /// Windows of a fixed length, back to back.
    Period(Duration),
    /// Calendar days, weeks or months in a zone.
    Calendar(Calendar, TimeZone),
}

/// Why a window cannot be read (the schema refuses most of these; an old object may not).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WindowError {
    /// Neither or both of `period` and `calendar`, or a period out of shape or range.
    #[error("{0}")]
    Invalid(String),
    /// `timeZone` names no known zone.
    #[error("time zone {0:?} is unknown: use an IANA name such as Europe/Berlin or UTC")]
    UnknownTimeZone(String),
}

/// One window: `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// Its first instant.
    pub start: Timestamp,
    /// The first instant of the next window.
    pub end: Timestamp,
}

impl Span {
    /// Whether `at` falls in this window.
    pub fn contains(&self, at: Timestamp) -> bool {
        self.start <= at && at < self.end
    }
}

impl Window {
    /// Reads the window of a Budget's spec.
    pub fn of(spec: &BudgetWindow) -> Result<Window, WindowError> {
        match (&spec.period, spec.calendar) {
            (Some(period), None) => parse_period(period).map(Window::Period).ok_or_else(|| {
                WindowError::Invalid(format!(
                    "period {period:?} is not a number and one unit of s, m, h or d from 10s to 366d"
                ))
            }),
            (None, Some(calendar)) => {
                let zone = match spec.time_zone.as_deref() {
                    None => TimeZone::UTC,
                    Some(name) => TimeZone::get(name)
                        .map_err(|_| WindowError::UnknownTimeZone(name.to_owned()))?,
                };
                Ok(Window::Calendar(calendar, zone))
            }
            _ => Err(WindowError::Invalid(
                "set exactly one of period and calendar".to_owned(),
            )),
        }
    }

    /// The window holding `now`. A period window continues from `previous` (the start of the
    /// last window counted) in steps of its length; without one, or with a clock behind it,
    /// a new sequence starts at `now`.
    pub fn current(&self, previous: Option<Timestamp>, now: Timestamp) -> Span {
        match self {
            Window::Period(length) => period_span(*length, previous, now),
            Window::Calendar(calendar, zone) => calendar_span(*calendar, zone, now),
        }
    }
}

fn period_span(length: Duration, previous: Option<Timestamp>, now: Timestamp) -> Span {
    let length_ns = i128::try_from(length.as_nanos())
        .unwrap_or(i128::MAX)
        .max(1);
    let start = match previous {
        Some(anchor) if anchor <= now => {
            let since = now.as_nanosecond() - anchor.as_nanosecond();
            let steps = since / length_ns;
            Timestamp::from_nanosecond(anchor.as_nanosecond() + steps * length_ns).unwrap_or(now)
        }
        _ => now,
    };
    let end = Timestamp::from_nanosecond(start.as_nanosecond().saturating_add(length_ns))
        .unwrap_or(Timestamp::MAX);
    Span { start, end }
}

fn calendar_span(calendar: Calendar, zone: &TimeZone, now: Timestamp) -> Span {
    let today = now.to_zoned(zone.clone()).date();
    let first = match calendar {
        Calendar::Day => today,
        Calendar::Week => today
            .checked_sub(i64::from(today.weekday().to_monday_zero_offset()).days())
            .unwrap_or(today),
        Calendar::Month => today.first_of_month(),
    };
    let next = match calendar {
        Calendar::Day => first.checked_add(1.day()),
        Calendar::Week => first.checked_add(1.week()),
        Calendar::Month => first.checked_add(1.month()),
    }
    .unwrap_or(first);
    let start = midnight(first, zone).unwrap_or(now);
    let end = midnight(next, zone).unwrap_or(Timestamp::MAX);
    Span { start, end }
}

/// The first instant of `date` in `zone` (later than midnight where a change skips it).
fn midnight(date: Date, zone: &TimeZone) -> Option<Timestamp> {
    date.to_zoned(zone.clone())
        .and_then(|z: Zoned| z.start_of_day())
        .ok()
        .map(|z| z.timestamp())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn calendar(calendar: Calendar, zone: &str) -> Window {
        Window::Calendar(calendar, TimeZone::get(zone).unwrap())
    }

    fn hours(span: Span) -> f64 {
        span.end.duration_since(span.start).as_secs_f64() / 3600.0
    }

    #[test]
    fn reads_periods_and_calendars_and_refuses_the_rest() {
        let spec = |period: Option<&str>, calendar: Option<Calendar>, zone: Option<&str>| {
            Window::of(&BudgetWindow {
                period: period.map(str::to_owned),
                calendar,
                time_zone: zone.map(str::to_owned),
            })
        };
        assert_eq!(
            spec(Some("24h"), None, None),
            Ok(Window::Period(Duration::from_secs(86_400)))
        );
        assert_eq!(
            spec(None, Some(Calendar::Day), None),
            Ok(Window::Calendar(Calendar::Day, TimeZone::UTC))
        );
        assert!(matches!(
            spec(None, Some(Calendar::Day), Some("Mars/Olympus")),
            Err(WindowError::UnknownTimeZone(_))
        ));
        assert!(matches!(
            spec(None, None, None),
            Err(WindowError::Invalid(_))
        ));
        assert!(matches!(
            spec(Some("1h"), Some(Calendar::Day), None),
            Err(WindowError::Invalid(_))
        ));
        assert!(matches!(
            spec(Some("5s"), None, None),
            Err(WindowError::Invalid(_))
        ));
    }

    #[test]
    fn periods_follow_each_other_from_the_first_window() {
        let day = Window::Period(Duration::from_secs(86_400));
        let first = day.current(None, at("2026-03-01T10:30:00Z"));
        assert_eq!(first.start, at("2026-03-01T10:30:00Z"));
        assert_eq!(first.end, at("2026-03-02T10:30:00Z"));
        let same = day.current(Some(first.start), at("2026-03-02T10:29:59Z"));
        assert_eq!(same, first);
        let later = day.current(Some(first.start), at("2026-03-05T11:00:00Z"));
        assert_eq!(
            later.start,
            at("2026-03-05T10:30:00Z"),
            "missed windows skipped"
        );
        let behind = day.current(Some(first.start), at("2026-02-28T00:00:00Z"));
        assert_eq!(
            behind.start,
            at("2026-02-28T00:00:00Z"),
            "a clock behind starts anew"
        );
    }

    #[test]
    fn calendar_days_in_berlin_last_23_and_25_hours_across_daylight_saving() {
        let day = calendar(Calendar::Day, "Europe/Berlin");
        let spring = day.current(None, at("2026-03-29T12:00:00Z"));
        assert_eq!(spring.start, at("2026-03-28T23:00:00Z"));
        assert_eq!(spring.end, at("2026-03-29T22:00:00Z"));
        assert_eq!(hours(spring), 23.0);
        let autumn = day.current(None, at("2026-10-25T12:00:00Z"));
        assert_eq!(hours(autumn), 25.0);
        let ordinary = day.current(None, at("2026-06-01T21:59:59Z"));
        assert_eq!(ordinary.start, at("2026-05-31T22:00:00Z"));
        let next = day.current(None, at("2026-06-01T22:00:00Z"));
        assert_eq!(
            next.start, ordinary.end,
            "the next day starts where one ends"
        );
    }

    #[test]
    fn a_zone_that_skips_midnight_starts_its_day_at_the_first_instant() {
        // Santiago moved clocks from 00:00 to 01:00 on 2026-09-06.
        let day = calendar(Calendar::Day, "America/Santiago");
        let span = day.current(None, at("2026-09-06T12:00:00Z"));
        let local = span
            .start
            .to_zoned(TimeZone::get("America/Santiago").unwrap());
        assert_eq!((local.hour(), local.minute()), (1, 0));
        assert_eq!(hours(span), 23.0);
    }

    #[test]
    fn weeks_start_on_monday_and_months_on_the_first() {
        let week = calendar(Calendar::Week, "UTC");
        // 2026-03-04 is a Wednesday.
        let span = week.current(None, at("2026-03-04T08:00:00Z"));
        assert_eq!(span.start, at("2026-03-02T00:00:00Z"));
        assert_eq!(span.end, at("2026-03-09T00:00:00Z"));
        let month = calendar(Calendar::Month, "America/New_York");
        let february = month.current(None, at("2026-02-14T12:00:00Z"));
        assert_eq!(february.start, at("2026-02-01T05:00:00Z"));
        assert_eq!(february.end, at("2026-03-01T05:00:00Z"));
        let march = month.current(None, at("2026-03-20T12:00:00Z"));
        assert_eq!(march.start, february.end);
        assert_eq!(march.end, at("2026-04-01T04:00:00Z"), "EDT from March 8");
        let leap = calendar(Calendar::Month, "UTC").current(None, at("2028-02-29T23:59:59Z"));
        assert_eq!(leap.end, at("2028-03-01T00:00:00Z"));
    }

    fn zones() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec![
            "UTC",
            "Europe/Berlin",
            "America/New_York",
            "America/Santiago",
            "Australia/Lord_Howe",
            "Asia/Kolkata",
            "Pacific/Apia",
        ])
    }

    fn calendars() -> impl Strategy<Value = Calendar> {
        prop::sample::select(vec![Calendar::Day, Calendar::Week, Calendar::Month])
    }

    proptest! {
        /// Any instant lies in its window; the next window starts where it ends; windows
        /// last what their calendar unit lasts, give or take a daylight-saving change.
        #[test]
        fn calendar_windows_tile_time(
            seconds in 0i64..4_102_444_800,
            zone in zones(),
            unit in calendars(),
        ) {
            let window = calendar(unit, zone);
            let now = Timestamp::from_second(seconds).unwrap();
            let span = window.current(None, now);
            prop_assert!(span.contains(now), "{span:?} {now}");
            let next = window.current(None, span.end);
            prop_assert_eq!(next.start, span.end);
            let length = hours(span);
            let (low, high) = match unit {
                Calendar::Day => (22.0, 26.0),
                Calendar::Week => (166.0, 170.0),
                Calendar::Month => (27.0 * 24.0, 32.0 * 24.0),
            };
            prop_assert!((low..=high).contains(&length), "{length} hours");
        }

        /// A period window holds `now`, lasts the period, and starts a whole number of
        /// periods after the previous window.
        #[test]
        fn period_windows_step_from_the_previous(
            anchor in 0i64..2_000_000_000,
            later in 0i64..100_000_000,
            length in 10u64..40_000_000,
        ) {
            let window = Window::Period(Duration::from_secs(length));
            let previous = Timestamp::from_second(anchor).unwrap();
            let now = Timestamp::from_second(anchor + later).unwrap();
            let span = window.current(Some(previous), now);
            prop_assert!(span.contains(now));
            prop_assert_eq!(span.end.duration_since(span.start).as_secs(), length as i64);
            let offset = span.start.as_second() - anchor;
            prop_assert_eq!(offset % length as i64, 0);
        }
    }
}
