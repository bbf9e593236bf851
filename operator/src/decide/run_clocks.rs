//! A Run's two clocks, kept in its status so an operator restart loses nothing: the working
//! clock, which `timeout` limits, runs from `startTime` except while the Run waits for a
//! person; the waiting clock runs from the `InputRequired=True` transition (`waitingSince`)
//! and `inputTimeout` limits each wait. Waits that ended add up in `waitedSeconds`.

use std::time::Duration;

use herd_crds::run::RunStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// Where the clocks of a Run stand after a reconcile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Clocks {
    /// `status.waitedSeconds`: the length of the waits that ended.
    pub waited_seconds: Option<u64>,
    /// `status.waitingSince`: the start of the current wait.
    pub waiting_since: Option<Time>,
}

/// The working time of a Run at `now`: the time since its start less every wait for a person,
/// the current one included (the clock stands still at its start). Zero before the start.
pub fn working_time(status: &RunStatus, now: &Time) -> Duration {
    let Some(start) = &status.start_time else {
        return Duration::ZERO;
    };
    let until = match &status.waiting_since {
        Some(since) if since.0 < now.0 => since,
        _ => now,
    };
    let waited = Duration::from_secs(status.waited_seconds.unwrap_or(0));
    elapsed(start, until).saturating_sub(waited)
}

/// The working time left before `timeout` at `now` (zero once it has passed).
pub fn working_time_left(status: &RunStatus, timeout: Duration, now: &Time) -> Duration {
    timeout.saturating_sub(working_time(status, now))
}

/// How long until `timeout` passes if nothing changes: `None` while the Run waits for a
/// person (its working clock stands still).
pub fn until_timeout(status: &RunStatus, timeout: Duration, now: &Time) -> Option<Duration> {
    status
        .waiting_since
        .is_none()
        .then(|| working_time_left(status, timeout, now))
}

/// The clocks after a reconcile that found the Run waiting since `waiting` (the
/// `InputRequired=True` transition it writes), or not waiting (`None`): a wait that began is
/// recorded, one that ended adds its length to the waited seconds. A wait that goes on keeps
/// its first start, even when another question took over between two reconciles.
pub fn next_clocks(previous: &RunStatus, waiting: Option<&Time>, now: &Time) -> Clocks {
    match (&previous.waiting_since, waiting) {
        (Some(since), Some(_)) => Clocks {
            waited_seconds: previous.waited_seconds,
            waiting_since: Some(since.clone()),
        },
        (None, Some(since)) => Clocks {
            waited_seconds: previous.waited_seconds,
            waiting_since: Some(since.clone()),
        },
        (Some(since), None) => Clocks {
            waited_seconds: Some(
                previous
                    .waited_seconds
                    .unwrap_or(0)
                    .saturating_add(elapsed(since, now).as_secs()),
            ),
            waiting_since: None,
        },
        (None, None) => Clocks {
            waited_seconds: previous.waited_seconds,
            waiting_since: None,
        },
    }
}

/// Time from `since` to `now`, zero when `now` is earlier.
pub fn elapsed(since: &Time, now: &Time) -> Duration {
    let span = now.0.duration_since(since.0);
    Duration::try_from(span).unwrap_or(Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Time {
        Time(jiff::Timestamp::from_second(seconds).unwrap())
    }

    const TIMEOUT: Duration = Duration::from_secs(1000);

    #[test]
    fn elapsed_never_goes_negative() {
        assert_eq!(elapsed(&at(10), &at(5)), Duration::ZERO);
        assert_eq!(elapsed(&at(5), &at(10)), Duration::from_secs(5));
    }

    fn started(second: i64) -> RunStatus {
        RunStatus {
            start_time: Some(at(second)),
            ..RunStatus::default()
        }
    }

    /// `status` with its clocks moved to what a reconcile at `now` finds.
    fn reconciled(mut status: RunStatus, waiting: Option<i64>, now: i64) -> RunStatus {
        let clocks = next_clocks(&status, waiting.map(at).as_ref(), &at(now));
        status.waited_seconds = clocks.waited_seconds;
        status.waiting_since = clocks.waiting_since;
        status
    }

    #[test]
    fn without_waits_the_working_clock_is_the_time_since_the_start() {
        let status = started(100);
        assert_eq!(working_time(&status, &at(400)), Duration::from_secs(300));
        assert_eq!(
            until_timeout(&status, TIMEOUT, &at(400)),
            Some(Duration::from_secs(700))
        );
        assert_eq!(
            working_time_left(&status, TIMEOUT, &at(5000)),
            Duration::ZERO
        );
        assert_eq!(
            working_time(&RunStatus::default(), &at(400)),
            Duration::ZERO,
            "not started"
        );
        assert_eq!(working_time(&status, &at(50)), Duration::ZERO, "clock skew");
    }

    #[test]
    fn a_wait_stops_the_working_clock_and_its_end_adds_it_to_the_waited_seconds() {
        // Started at 0, asked at 200, answered (seen) at 900.
        let waiting = reconciled(started(0), Some(200), 210);
        assert_eq!(waiting.waiting_since, Some(at(200)));
        assert_eq!(waiting.waited_seconds, None);
        for now in [210, 900, 99_999] {
            assert_eq!(
                working_time(&waiting, &at(now)),
                Duration::from_secs(200),
                "at {now}"
            );
            assert_eq!(until_timeout(&waiting, TIMEOUT, &at(now)), None);
        }
        let working = reconciled(waiting, None, 900);
        assert_eq!(working.waiting_since, None);
        assert_eq!(working.waited_seconds, Some(700));
        assert_eq!(working_time(&working, &at(1000)), Duration::from_secs(300));
        assert_eq!(
            until_timeout(&working, TIMEOUT, &at(1000)),
            Some(Duration::from_secs(700))
        );
    }

    #[test]
    fn several_waits_add_up() {
        // Waits 100..300 and 500..1500, then 1600..; working 100 + 200 + 100.
        let mut status = started(0);
        for (waiting, now) in [
            (Some(100), 101),
            (Some(100), 250),
            (None, 300),
            (None, 400),
            (Some(500), 500),
            (None, 1500),
            (Some(1600), 1600),
        ] {
            status = reconciled(status, waiting, now);
        }
        assert_eq!(status.waited_seconds, Some(1200));
        assert_eq!(status.waiting_since, Some(at(1600)));
        assert_eq!(working_time(&status, &at(50_000)), Duration::from_secs(400));
        let status = reconciled(status, None, 1700);
        assert_eq!(status.waited_seconds, Some(1300));
        assert_eq!(working_time(&status, &at(2000)), Duration::from_secs(700));
    }

    #[test]
    fn an_operator_restart_goes_on_from_the_status() {
        // The status is all a new operator reads: a wait recorded before the restart ends
        // after it with its whole length, and a reconcile in between changes nothing.
        let before = reconciled(started(0), Some(100), 100);
        let written = serde_json::to_value(&before).unwrap();
        let after: RunStatus = serde_json::from_value(written).unwrap();
        assert_eq!(after, before);
        let again = reconciled(after, Some(100), 5000);
        assert_eq!(again, before, "a wait that goes on changes nothing");
        let answered = reconciled(again, None, 7100);
        assert_eq!(answered.waited_seconds, Some(7000));
        assert_eq!(working_time(&answered, &at(7200)), Duration::from_secs(200));
    }

    #[test]
    fn a_wait_that_goes_on_keeps_its_first_start() {
        let first = reconciled(started(0), Some(100), 100);
        let taken_over = reconciled(first, Some(400), 450);
        assert_eq!(taken_over.waiting_since, Some(at(100)));
    }
}
