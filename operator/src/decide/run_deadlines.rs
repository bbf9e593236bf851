//! When a Run must be looked at again: its next deadline (timeout on the working clock, which
//! stands still while the Run waits for a person; input timeout from the `InputRequired`
//! transition; TTL after completion), never later than
//! [`MAX_REQUEUE`], so a missed watch event costs at most that.

use std::time::Duration;

use herd_crds::condition::{ConditionStatus, find_condition};
use herd_crds::reason::condition_type;
use herd_crds::run::RunStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::run_clocks::{elapsed, until_timeout};

/// Longest wait between two reconciles of one Run.
pub const MAX_REQUEUE: Duration = Duration::from_secs(600);

/// The limits that apply to a Run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Working time from `startTime`, waits for a person left out (or from creation while not
    /// accepted).
    pub timeout: Duration,
    /// From the `InputRequired=True` transition.
    pub input_timeout: Duration,
    /// After `completionTime`, when set.
    pub ttl_after_finished: Option<Duration>,
}

/// The wait until the next deadline of a Run created at `created` (zero when one has passed).
pub fn next_requeue(status: &RunStatus, created: &Time, limits: Limits, now: &Time) -> Duration {
    let left = |since: &Time, limit: Duration| limit.saturating_sub(elapsed(since, now));
    if let Some(done) = &status.completion_time {
        return limits
            .ttl_after_finished
            .map_or(MAX_REQUEUE, |ttl| left(done, ttl).min(MAX_REQUEUE));
    }
    let mut wait = match &status.start_time {
        Some(_) => until_timeout(status, limits.timeout, now).unwrap_or(MAX_REQUEUE),
        None => left(created, limits.timeout),
    }
    .min(MAX_REQUEUE);
    if let Some(asked) = find_condition(&status.conditions, condition_type::INPUT_REQUIRED)
        .filter(|c| c.status == ConditionStatus::True)
    {
        wait = wait.min(left(&asked.last_transition_time, limits.input_timeout));
    }
    wait
}

/// Whether a finished Run's TTL has passed.
pub fn ttl_expired(status: &RunStatus, ttl: Option<Duration>, now: &Time) -> bool {
    match (&status.completion_time, ttl) {
        (Some(done), Some(ttl)) => elapsed(done, now) >= ttl,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herd_crds::condition::Condition;
    use herd_crds::reason::run as reason;

    fn at(seconds: i64) -> Time {
        Time(jiff::Timestamp::from_second(seconds).unwrap())
    }

    const LIMITS: Limits = Limits {
        timeout: Duration::from_secs(1800),
        input_timeout: Duration::from_secs(300),
        ttl_after_finished: Some(Duration::from_secs(60)),
    };

    fn started(at_second: i64) -> RunStatus {
        RunStatus {
            start_time: Some(at(at_second)),
            ..RunStatus::default()
        }
    }

    /// How long until a Run created at 0 with `LIMITS` and `status` is looked at again, at `now`.
    fn requeue_at(status: &RunStatus, now: i64) -> Duration {
        next_requeue(status, &at(0), LIMITS, &at(now))
    }

    /// Opens a question in `status`, asked at `asked`.
    fn ask(status: &mut RunStatus, asked: i64) {
        status.conditions.push(Condition::new(
            condition_type::INPUT_REQUIRED,
            ConditionStatus::True,
            reason::WAITING_FOR_INPUT,
            "?",
            None,
            at(asked),
        ));
    }

    #[test]
    fn the_timeout_counts_from_the_start_capped_at_ten_minutes() {
        assert_eq!(requeue_at(&started(100), 1500), Duration::from_secs(400));
        assert_eq!(requeue_at(&started(100), 200), MAX_REQUEUE);
        assert_eq!(requeue_at(&started(100), 5000), Duration::ZERO);
        assert_eq!(
            requeue_at(&RunStatus::default(), 1700),
            Duration::from_secs(100),
            "not accepted: from creation"
        );
    }

    #[test]
    fn an_open_question_counts_from_its_transition() {
        let mut status = started(0);
        ask(&mut status, 1000);
        assert_eq!(requeue_at(&status, 1100), Duration::from_secs(200));
        status.conditions[0].status = ConditionStatus::False;
        assert_eq!(requeue_at(&status, 1100), Duration::from_secs(600));
    }

    #[test]
    fn a_wait_stops_the_timeout_and_earlier_waits_push_it_back() {
        // Started at 0, waited 1000 s before, waiting again since 1500: only the input
        // timeout (300 s from the transition) is ahead.
        let mut status = started(0);
        status.waited_seconds = Some(1000);
        status.waiting_since = Some(at(1500));
        ask(&mut status, 1500);
        assert_eq!(requeue_at(&status, 1600), Duration::from_secs(200));
        // Answered: working 2500 - 1000 - 1000 = 500 s at 2500, so 1300 s are left.
        status.waited_seconds = Some(2000);
        status.waiting_since = None;
        status.conditions[0].status = ConditionStatus::False;
        assert_eq!(requeue_at(&status, 2500), MAX_REQUEUE);
        assert_eq!(requeue_at(&status, 3500), Duration::from_secs(300));
    }

    #[test]
    fn a_finished_run_waits_for_its_ttl() {
        let mut status = started(0);
        status.completion_time = Some(at(500));
        assert_eq!(requeue_at(&status, 520), Duration::from_secs(40));
        assert!(!ttl_expired(&status, LIMITS.ttl_after_finished, &at(559)));
        assert!(ttl_expired(&status, LIMITS.ttl_after_finished, &at(560)));
        assert!(!ttl_expired(&status, None, &at(99_999)));
        let keep = Limits {
            ttl_after_finished: None,
            ..LIMITS
        };
        assert_eq!(next_requeue(&status, &at(0), keep, &at(520)), MAX_REQUEUE);
    }
}
