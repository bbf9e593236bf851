//! A Schedule's slots: its cron expression, `@every` period or `at` time, read in its time zone.
//!
//! Cron expressions are five fields (Vixie cron: a day matches when its day of month *or* its
//! day of week does, unless one is `*`) or a macro, evaluated by `croner` on the zone's wall
//! clock. Across a DST change a wall-clock time that does not exist (spring forward) runs at
//! the first instant after the gap, and one that happens twice (fall back) runs once, at its
//! first occurrence. `@every D` slots are the multiples of `D` since the Unix epoch, so every
//! replica and every restart agrees on them.

use std::str::FromStr;
use std::time::Duration;

use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use herd_crds::duration::parse_duration;
use herd_crds::schedule::ScheduleSpec;
use jiff::Timestamp;
use jiff::tz::TimeZone;

/// The shortest `@every` period.
pub const MIN_EVERY: Duration = Duration::from_secs(1);

/// When a Schedule's slots are.
#[derive(Debug, Clone)]
pub struct Timetable {
    slots: Slots,
    zone: TimeZone,
}

#[derive(Debug, Clone)]
enum Slots {
    Cron(Box<Cron>),
    Every(u64),
    At(Timestamp),
}

/// Why a Schedule's timetable cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimetableError {
    /// `schedule` is not a cron expression, macro or `@every` period.
    #[error("schedule {schedule:?} is invalid: {reason}")]
    InvalidSchedule {
        /// The expression.
        schedule: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `timeZone` names no known zone.
    #[error("time zone {0:?} is unknown: use an IANA name such as Europe/Berlin or UTC")]
    UnknownTimeZone(String),
    /// Neither `schedule` nor `at` is set (the schema refuses this; an old object may not).
    #[error("set exactly one of schedule and at")]
    NoSlots,
}

impl Timetable {
    /// Reads the timetable of `spec`.
    pub fn of(spec: &ScheduleSpec) -> Result<Timetable, TimetableError> {
        let zone = match spec.time_zone.as_deref() {
            None => TimeZone::UTC,
            Some(name) => {
                TimeZone::get(name).map_err(|_| TimetableError::UnknownTimeZone(name.to_owned()))?
            }
        };
        let slots = match (&spec.schedule, &spec.at) {
            (Some(schedule), None) => parse_slots(schedule)?,
            (None, Some(at)) => Slots::At(at.0),
            _ => return Err(TimetableError::NoSlots),
        };
        Ok(Timetable { slots, zone })
    }

    /// Whether this is a one-shot `at` timetable.
    pub fn is_one_shot(&self) -> bool {
        matches!(self.slots, Slots::At(_))
    }

    /// The first slot strictly after `after`, or `None` when there is none.
    pub fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        match &self.slots {
            Slots::Cron(cron) => {
                let zoned = after.to_zoned(self.zone.clone());
                cron.find_next_occurrence(&zoned, false)
                    .ok()
                    .map(|z| z.timestamp())
            }
            Slots::Every(period) => {
                let period = i64::try_from(*period).ok()?;
                let second = after.as_second();
                let next = second
                    .div_euclid(period)
                    .checked_add(1)?
                    .checked_mul(period)?;
                Timestamp::from_second(next).ok()
            }
            Slots::At(at) => (*at > after).then_some(*at),
        }
    }

    /// The last slot at or before `until`, or `None` when there is none.
    pub fn latest_until(&self, until: Timestamp) -> Option<Timestamp> {
        match &self.slots {
            Slots::Cron(cron) => {
                let zoned = until.to_zoned(self.zone.clone());
                cron.find_previous_occurrence(&zoned, true)
                    .ok()
                    .map(|z| z.timestamp())
            }
            Slots::Every(period) => {
                let period = i64::try_from(*period).ok()?;
                let second = until.as_second();
                let latest = second.div_euclid(period).checked_mul(period)?;
                Timestamp::from_second(latest).ok()
            }
            Slots::At(at) => (*at <= until).then_some(*at),
        }
    }

    /// How many slots lie in `(after, until]`, counting no further than `limit`.
    pub fn count_between(&self, after: Timestamp, until: Timestamp, limit: u32) -> u32 {
        if let Slots::Every(period) = &self.slots {
            let Ok(period) = i64::try_from(*period) else {
                return 0;
            };
            let count = until.as_second().div_euclid(period) - after.as_second().div_euclid(period);
            return u32::try_from(count.max(0)).unwrap_or(u32::MAX).min(limit);
        }
        let mut count = 0;
        let mut cursor = after;
        while count < limit {
            match self.next_after(cursor) {
                Some(slot) if slot <= until => {
                    count += 1;
                    cursor = slot;
                }
                _ => break,
            }
        }
        count
    }
}

fn parse_slots(schedule: &str) -> Result<Slots, TimetableError> {
    let invalid = |reason: String| TimetableError::InvalidSchedule {
        schedule: schedule.to_owned(),
        reason,
    };
    let text = schedule.trim();
    if let Some(period) = text.strip_prefix("@every ") {
        let period = parse_duration(period.trim()).map_err(|e| invalid(e.to_string()))?;
        if period < MIN_EVERY || period.subsec_nanos() != 0 {
            return Err(invalid(
                "@every takes whole seconds, at least 1s".to_owned(),
            ));
        }
        return Ok(Slots::Every(period.as_secs()));
    }
    let text = if text.eq_ignore_ascii_case("@midnight") {
        "@daily"
    } else {
        text
    };
    if !text.starts_with('@') && text.split_whitespace().count() != 5 {
        return Err(invalid(
            "a cron expression has five fields: minute hour day-of-month month day-of-week"
                .to_owned(),
        ));
    }
    let parser = CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build();
    let cron = parser.parse(text).map_err(|e| invalid(e.to_string()))?;
    // A pattern that matches no day (`0 0 30 2 *`) parses; it must still have a slot.
    let probe = Timestamp::UNIX_EPOCH.to_zoned(TimeZone::UTC);
    cron.find_next_occurrence(&probe, false)
        .map_err(|_| invalid("it matches no date".to_owned()))?;
    Ok(Slots::Cron(Box::new(cron)))
}

impl FromStr for Timetable {
    type Err = TimetableError;

    /// A timetable in UTC from a `schedule` expression (tests and the CLI's checks).
    fn from_str(schedule: &str) -> Result<Self, Self::Err> {
        Ok(Timetable {
            slots: parse_slots(schedule)?,
            zone: TimeZone::UTC,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn in_zone(schedule: &str, zone: &str) -> Timetable {
        Timetable {
            slots: parse_slots(schedule).unwrap(),
            zone: TimeZone::get(zone).unwrap(),
        }
    }

    fn slots_from(timetable: &Timetable, from: &str, n: usize) -> Vec<String> {
        let mut cursor = at(from);
        let mut out = Vec::new();
        for _ in 0..n {
            cursor = timetable.next_after(cursor).unwrap();
            out.push(cursor.to_string());
        }
        out
    }

    #[test]
    fn weekday_mornings_in_utc() {
        let t: Timetable = "0 9 * * 1-5".parse().unwrap();
        // 2026-01-02 is a Friday.
        assert_eq!(
            slots_from(&t, "2026-01-02T09:00:00Z", 3),
            [
                "2026-01-05T09:00:00Z",
                "2026-01-06T09:00:00Z",
                "2026-01-07T09:00:00Z"
            ]
        );
    }

    #[test]
    fn macros() {
        for (macro_, next) in [
            ("@hourly", "2026-01-02T10:00:00Z"),
            ("@daily", "2026-01-03T00:00:00Z"),
            ("@midnight", "2026-01-03T00:00:00Z"),
            ("@weekly", "2026-01-04T00:00:00Z"),
            ("@monthly", "2026-02-01T00:00:00Z"),
            ("@yearly", "2027-01-01T00:00:00Z"),
            ("@annually", "2027-01-01T00:00:00Z"),
        ] {
            let t: Timetable = macro_.parse().unwrap();
            assert_eq!(
                slots_from(&t, "2026-01-02T09:30:00Z", 1),
                [next],
                "{macro_}"
            );
        }
    }

    #[test]
    fn every_counts_from_the_epoch() {
        let t: Timetable = "@every 15m".parse().unwrap();
        assert_eq!(
            slots_from(&t, "2026-01-02T09:07:12Z", 2),
            ["2026-01-02T09:15:00Z", "2026-01-02T09:30:00Z"]
        );
        assert_eq!(
            t.latest_until(at("2026-01-02T09:15:00Z")),
            Some(at("2026-01-02T09:15:00Z"))
        );
        let t: Timetable = "@every 5s".parse().unwrap();
        assert_eq!(
            slots_from(&t, "2026-01-02T09:00:01Z", 1),
            ["2026-01-02T09:00:05Z"]
        );
    }

    #[test]
    fn a_time_zone_moves_the_slots() {
        let t = in_zone("0 9 * * *", "Europe/Berlin");
        // Winter: UTC+1; summer: UTC+2.
        assert_eq!(
            slots_from(&t, "2026-01-10T00:00:00Z", 1),
            ["2026-01-10T08:00:00Z"]
        );
        assert_eq!(
            slots_from(&t, "2026-07-10T00:00:00Z", 1),
            ["2026-07-10T07:00:00Z"]
        );
    }

    #[test]
    fn nine_o_clock_stays_nine_o_clock_across_dst() {
        // Europe/Berlin springs forward on 2026-03-29 and falls back on 2026-10-25.
        let t = in_zone("0 9 * * *", "Europe/Berlin");
        assert_eq!(
            slots_from(&t, "2026-03-28T00:00:00Z", 2),
            ["2026-03-28T08:00:00Z", "2026-03-29T07:00:00Z"]
        );
        assert_eq!(
            slots_from(&t, "2026-10-24T00:00:00Z", 2),
            ["2026-10-24T07:00:00Z", "2026-10-25T08:00:00Z"]
        );
    }

    #[test]
    fn a_slot_in_the_spring_gap_runs_once_after_it() {
        // 02:30 does not exist on 2026-03-29 in Berlin (02:00 becomes 03:00).
        let t = in_zone("30 2 * * *", "Europe/Berlin");
        let slots = slots_from(&t, "2026-03-28T12:00:00Z", 2);
        assert_eq!(slots.len(), 2);
        let day_of_change = at(&slots[0]);
        assert!(day_of_change >= at("2026-03-29T01:00:00Z"), "{slots:?}");
        assert!(day_of_change < at("2026-03-29T02:00:00Z"), "{slots:?}");
        assert_eq!(slots[1], "2026-03-30T00:30:00Z");
    }

    #[test]
    fn a_slot_in_the_autumn_overlap_runs_once() {
        // 02:30 happens twice on 2026-10-25 in Berlin (03:00 becomes 02:00 again).
        let t = in_zone("30 2 * * *", "Europe/Berlin");
        assert_eq!(
            slots_from(&t, "2026-10-24T12:00:00Z", 2),
            ["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"]
        );
    }

    #[test]
    fn at_is_one_slot() {
        let spec: ScheduleSpec = serde_json::from_value(serde_json::json!({
            "at": "2026-03-01T09:00:00+01:00",
            "runTemplate": {"spec": {"agentRef": {"name": "a"}, "task": "t"}},
        }))
        .unwrap();
        let t = Timetable::of(&spec).unwrap();
        assert!(t.is_one_shot());
        let slot = at("2026-03-01T08:00:00Z");
        assert_eq!(t.next_after(at("2026-02-01T00:00:00Z")), Some(slot));
        assert_eq!(t.next_after(slot), None);
        assert_eq!(t.latest_until(slot), Some(slot));
        assert_eq!(t.latest_until(at("2026-02-01T00:00:00Z")), None);
    }

    #[test]
    fn bad_expressions_and_zones_say_why() {
        for bad in [
            "",
            "* * * *",
            "* * * * * *",
            "61 * * * *",
            "* 24 * * *",
            "0 0 30 2 *",
            "@every 0s",
            "@every 500ms",
            "@every soon",
            "@fortnightly",
            "a b c d e",
        ] {
            let error = bad.parse::<Timetable>().unwrap_err();
            assert!(
                matches!(error, TimetableError::InvalidSchedule { .. }),
                "{bad}: {error}"
            );
        }
        let spec: ScheduleSpec = serde_json::from_value(serde_json::json!({
            "schedule": "@hourly",
            "timeZone": "Mars/Olympus_Mons",
            "runTemplate": {"spec": {"agentRef": {"name": "a"}, "task": "t"}},
        }))
        .unwrap();
        assert_eq!(
            Timetable::of(&spec).unwrap_err(),
            TimetableError::UnknownTimeZone("Mars/Olympus_Mons".to_owned())
        );
    }

    #[test]
    fn the_bundled_tz_database_knows_the_zones() {
        // The operator image may have no /usr/share/zoneinfo.
        let bundled = jiff::tz::TimeZoneDatabase::bundled();
        for zone in ["Europe/Berlin", "America/New_York", "Asia/Kolkata", "UTC"] {
            assert!(bundled.get(zone).is_ok(), "{zone}");
        }
    }

    #[test]
    fn counts_slots_up_to_a_limit() {
        let t: Timetable = "@every 1m".parse().unwrap();
        let from = at("2026-01-01T00:00:00Z");
        assert_eq!(t.count_between(from, at("2026-01-01T00:10:00Z"), 1000), 10);
        assert_eq!(t.count_between(from, at("2026-01-02T00:00:00Z"), 101), 101);
        let t: Timetable = "*/10 * * * *".parse().unwrap();
        assert_eq!(t.count_between(from, at("2026-01-01T01:00:00Z"), 1000), 6);
        assert_eq!(t.count_between(from, at("2026-01-02T00:00:00Z"), 101), 101);
        assert_eq!(t.count_between(from, from, 101), 0);
    }

    fn field(max: u32) -> impl Strategy<Value = String> {
        prop_oneof![
            Just("*".to_owned()),
            (0..max).prop_map(|n| n.to_string()),
            (1..max.max(2)).prop_map(|n| format!("*/{n}")),
            (0..max, 0..max).prop_map(|(a, b)| format!("{}-{}", a.min(b), a.max(b))),
            (0..max, 0..max).prop_map(|(a, b)| format!("{a},{b}")),
        ]
    }

    fn cron() -> impl Strategy<Value = String> {
        (field(60), field(24), field(28), field(12), field(7)).prop_map(|(m, h, dom, mon, dow)| {
            let dom = dom.replace('0', "1");
            let mon = if mon == "0" {
                "1".to_owned()
            } else {
                mon.replace("0-", "1-")
            };
            format!("{m} {h} {dom} {mon} {dow}")
        })
    }

    fn zone() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec![
            "UTC",
            "Europe/Berlin",
            "America/New_York",
            "Australia/Lord_Howe",
            "Asia/Kathmandu",
        ])
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        #[test]
        fn parsing_never_panics(text in ".{0,64}") {
            let _ = text.parse::<Timetable>();
        }

        #[test]
        fn the_next_slot_is_the_first_after(
            expression in cron(),
            zone in zone(),
            second in 0i64..4_000_000_000,
        ) {
            let Ok(slots) = parse_slots(&expression) else { return Ok(()) };
            let t = Timetable { slots, zone: TimeZone::get(zone).unwrap() };
            let from = Timestamp::from_second(second).unwrap();
            if let Some(next) = t.next_after(from) {
                prop_assert!(next > from);
                prop_assert_eq!(next.subsec_nanosecond(), 0);
                prop_assert_eq!(next.as_second() % 60, 0);
                // Nothing in between: the latest slot before `next` is at or before `from`.
                let before = t.latest_until(next - jiff::SignedDuration::from_secs(1));
                prop_assert!(before.is_none_or(|b| b <= from), "{:?} {:?} {:?}", from, before, next);
                prop_assert_eq!(t.latest_until(next), Some(next));
            }
        }

        #[test]
        fn every_slots_are_multiples_of_the_period(
            period in 1u64..100_000,
            second in 0i64..4_000_000_000,
        ) {
            let t: Timetable = format!("@every {period}s").parse().unwrap();
            let from = Timestamp::from_second(second).unwrap();
            let next = t.next_after(from).unwrap();
            let latest = t.latest_until(from).unwrap();
            prop_assert_eq!(next.as_second() % period as i64, 0);
            prop_assert_eq!(latest.as_second() % period as i64, 0);
            prop_assert!(latest <= from && from < next);
            prop_assert_eq!(next.as_second() - latest.as_second(), period as i64);
            prop_assert_eq!(t.count_between(latest, next, u32::MAX), 1);
        }
    }
}
