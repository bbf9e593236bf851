//! A Budget's status from its spec, its previous status and the Runs of its namespace: the
//! ledger stepped (docs/budgets.md), what is left, the conditions `Ready` and `Exceeded`, and
//! the Events a change calls for (a limit reached, a window reset).

use std::time::Duration;

use herd_crds::budget::{BudgetSpec, BudgetStatus, BudgetUsage};
use herd_crds::condition::{Condition, ConditionStatus, find_condition};
use herd_crds::reason::{budget as reason, condition_type};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::budget_ledger::{Ledger, RunUsage, Stepped, reached, remaining, tightest};
use super::budget_window::{Span, Window, WindowError};
use super::conditions::{merge, stalled};

/// How often a Budget is counted while nothing else wakes it: the ledger folds what its Runs
/// reported since (the Run watch does not wake Budgets, so thousands of progress writes cost
/// no reconcile each).
pub const REFRESH: Duration = Duration::from_secs(5);

/// An Event to publish about the Budget.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BudgetEvent {
    /// Warning (a limit reached) or Normal.
    pub warning: bool,
    /// Its reason.
    pub reason: &'static str,
    /// Its note.
    pub note: String,
}

/// What the Budget controller writes and says.
#[derive(Clone, Debug, PartialEq)]
pub struct BudgetDecision {
    /// The whole status.
    pub status: BudgetStatus,
    /// Events to publish.
    pub events: Vec<BudgetEvent>,
    /// When to count again.
    pub requeue: Duration,
}

/// The next status of a Budget of `generation` with `spec`, after `previous`, from `runs` (every
/// Run of its namespace, flagged whether selected), at `now`.
pub fn next_status<'a>(
    spec: &BudgetSpec,
    generation: Option<i64>,
    previous: &BudgetStatus,
    runs: impl IntoIterator<Item = RunUsage<'a>>,
    now: &Time,
) -> BudgetDecision {
    let window = match Window::of(&spec.window) {
        Ok(window) => window,
        Err(error) => return invalid(spec, generation, previous, &error, now),
    };
    let mut ledger = Ledger::from_status(previous);
    let span = window.current(ledger.window.map(|w| w.start), now.0);
    let before = ledger.used;
    let stepped = ledger.step(span, runs, now.0);
    let mut status = BudgetStatus {
        observed_generation: generation,
        window: Some(spec.window.describe()),
        ..BudgetStatus::default()
    };
    ledger.write_to(&mut status);
    status.remaining = remaining(&spec.limits, &status.used);
    status.reserved = ledger.reserved(None);
    if let Some((used, limit)) = tightest(&spec.limits, &status.used) {
        status.used_summary = Some(used);
        status.limit_summary = Some(limit);
    }
    let resets = span.end.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let exceeded = exceeded(spec, &status.used, &resets, generation, now);
    let ready = Condition::new(
        condition_type::READY,
        ConditionStatus::True,
        reason::COUNTING,
        format!(
            "counting {} going Runs; the window resets at {resets}",
            status.marks.len()
        ),
        generation,
        now.clone(),
    );
    let events = events(previous, &exceeded, &stepped, &span, &before);
    status.conditions = merge(&previous.conditions, vec![ready, exceeded]);
    let until_reset = Duration::try_from(span.end.duration_since(now.0)).unwrap_or_default();
    BudgetDecision {
        status,
        events,
        requeue: until_reset.min(REFRESH).max(Duration::from_millis(100)),
    }
}

/// `Exceeded`: true, naming each limit reached and what happens to new Runs until `resets`;
/// else false.
fn exceeded(
    spec: &BudgetSpec,
    used: &BudgetUsage,
    resets: &str,
    generation: Option<i64>,
    now: &Time,
) -> Condition {
    let limits = reached(&spec.limits, used);
    if limits.is_empty() {
        return Condition::new(
            condition_type::EXCEEDED,
            ConditionStatus::False,
            reason::WITHIN_LIMITS,
            "",
            generation,
            now.clone(),
        );
    }
    let names: Vec<String> = limits
        .iter()
        .map(|limit| {
            format!(
                "{} {} of {}",
                limit.name(),
                limit.amount(limit.in_usage(used), &spec.limits),
                limit.amount(limit.of(&spec.limits).unwrap_or_default(), &spec.limits)
            )
        })
        .collect();
    Condition::new(
        condition_type::EXCEEDED,
        ConditionStatus::True,
        reason::LIMIT_REACHED,
        format!(
            "{} used; new Runs {} until the window resets at {resets}",
            names.join(", "),
            match spec.on_exceeded {
                herd_crds::budget::OnExceeded::Queue => "wait",
                herd_crds::budget::OnExceeded::Refuse => "are refused",
            }
        ),
        generation,
        now.clone(),
    )
}

/// The Events of a count: a new window (with what the last one used), a limit newly reached
/// (or reached again in a new window), Runs the ledger could not follow.
fn events(
    previous: &BudgetStatus,
    exceeded: &Condition,
    stepped: &Stepped,
    span: &Span,
    before: &BudgetUsage,
) -> Vec<BudgetEvent> {
    let mut events = Vec::new();
    if stepped.reset {
        events.push(BudgetEvent {
            warning: false,
            reason: reason::WINDOW_RESET,
            note: format!(
                "a new window started at {}; the last one used {}",
                span.start.strftime("%Y-%m-%dT%H:%M:%SZ"),
                describe(before)
            ),
        });
    }
    let was_exceeded = find_condition(&previous.conditions, condition_type::EXCEEDED)
        .is_some_and(|c| c.status == ConditionStatus::True);
    if exceeded.status == ConditionStatus::True && (!was_exceeded || stepped.reset) {
        events.push(BudgetEvent {
            warning: true,
            reason: reason::EXCEEDED,
            note: exceeded.message.clone(),
        });
    }
    if stepped.untracked > 0 {
        events.push(BudgetEvent {
            warning: true,
            reason: reason::UNTRACKED_RUNS,
            note: format!(
                "{} Runs went uncounted: the Budget follows {} going Runs at most",
                stepped.untracked,
                herd_crds::budget::MAX_MARKS
            ),
        });
    }
    events
}

fn describe(used: &BudgetUsage) -> String {
    format!(
        "{} tokens ({} input, {} output) and {} runs",
        used.tokens, used.input_tokens, used.output_tokens, used.runs
    )
}

/// A window the operator cannot read: `Ready=False` and `Stalled`, the ledger kept as it was.
fn invalid(
    spec: &BudgetSpec,
    generation: Option<i64>,
    previous: &BudgetStatus,
    error: &WindowError,
    now: &Time,
) -> BudgetDecision {
    let why = match error {
        WindowError::Invalid(_) => reason::INVALID_WINDOW,
        WindowError::UnknownTimeZone(_) => reason::UNKNOWN_TIME_ZONE,
    };
    let message = error.to_string();
    let ready = Condition::new(
        condition_type::READY,
        ConditionStatus::False,
        why,
        message.clone(),
        generation,
        now.clone(),
    );
    let mut status = previous.clone();
    status.observed_generation = generation;
    status.window = Some(spec.window.describe());
    status.conditions = merge(
        &previous.conditions,
        vec![ready, stalled(why, &message, generation, now)],
    );
    BudgetDecision {
        status,
        events: Vec::new(),
        requeue: Duration::from_secs(300),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::budget_ledger::Reported;
    use herd_crds::budget::{BudgetLimits, BudgetWindow, Calendar, OnExceeded};

    fn at(text: &str) -> Time {
        Time(text.parse().unwrap())
    }

    fn spec(tokens: u64) -> BudgetSpec {
        BudgetSpec {
            window: BudgetWindow {
                calendar: Some(Calendar::Day),
                time_zone: Some("Europe/Berlin".into()),
                ..BudgetWindow::default()
            },
            limits: BudgetLimits {
                tokens: Some(tokens),
                runs: Some(10),
                ..BudgetLimits::default()
            },
            selector: None,
            on_exceeded: OnExceeded::Queue,
        }
    }

    fn run(uid: &str, input: u64, seq: u64) -> RunUsage<'_> {
        RunUsage {
            uid,
            selected: true,
            started: true,
            finished_at: None,
            report: Some(Reported {
                attempt: 1,
                seq,
                input_tokens: input,
                output_tokens: 0,
                cost_micros: 0,
            }),
        }
    }

    fn condition<'a>(status: &'a BudgetStatus, type_: &str) -> &'a Condition {
        find_condition(&status.conditions, type_).unwrap()
    }

    #[test]
    fn counts_reaches_the_limit_once_and_resets_at_local_midnight() {
        let now = at("2026-03-28T10:00:00Z");
        let first = next_status(
            &spec(100),
            Some(1),
            &BudgetStatus::default(),
            [run("a", 40, 1)],
            &now,
        );
        let status = &first.status;
        assert_eq!(status.used.tokens, 40);
        assert_eq!(status.remaining.tokens, 60);
        assert_eq!(status.window_start, Some(at("2026-03-27T23:00:00Z")));
        assert_eq!(status.window_end, Some(at("2026-03-28T23:00:00Z")));
        assert_eq!(status.window.as_deref(), Some("Day Europe/Berlin"));
        assert_eq!(status.used_summary.as_deref(), Some("40 tokens"));
        assert_eq!(status.limit_summary.as_deref(), Some("100 tokens"));
        assert_eq!(
            condition(status, condition_type::EXCEEDED).status,
            ConditionStatus::False
        );
        assert_eq!(
            condition(status, condition_type::READY).reason,
            reason::COUNTING
        );
        assert!(first.events.is_empty());
        assert_eq!(first.requeue, REFRESH);

        let later = at("2026-03-28T11:00:00Z");
        let second = next_status(&spec(100), Some(1), status, [run("a", 120, 2)], &later);
        let exceeded = condition(&second.status, condition_type::EXCEEDED);
        assert_eq!(exceeded.status, ConditionStatus::True);
        assert_eq!(exceeded.reason, reason::LIMIT_REACHED);
        assert_eq!(
            exceeded.message,
            "tokens 120 tokens of 100 tokens used; new Runs wait until the window resets at 2026-03-28T23:00:00Z"
        );
        assert_eq!(second.status.remaining.tokens, 0);
        assert_eq!(second.events.len(), 1);
        assert!(second.events[0].warning);
        let again = next_status(
            &spec(100),
            Some(1),
            &second.status,
            [run("a", 130, 3)],
            &later,
        );
        assert!(again.events.is_empty(), "exceeded is said once");

        // The Berlin day ends at 23:00 UTC (CET): the next one starts from zero.
        let next_day = at("2026-03-28T23:00:01Z");
        let reset = next_status(
            &spec(100),
            Some(1),
            &again.status,
            [run("a", 150, 4)],
            &next_day,
        );
        assert_eq!(reset.status.used.tokens, 20);
        assert_eq!(
            reset.status.window_end,
            Some(at("2026-03-29T22:00:00Z")),
            "23 hours: DST"
        );
        assert_eq!(
            condition(&reset.status, condition_type::EXCEEDED).status,
            ConditionStatus::False
        );
        assert_eq!(reset.events.len(), 1);
        assert_eq!(reset.events[0].reason, reason::WINDOW_RESET);
        assert_eq!(
            reset.events[0].note,
            "a new window started at 2026-03-28T23:00:00Z; the last one used 130 tokens (130 input, 0 output) and 1 runs"
        );
    }

    #[test]
    fn the_requeue_comes_at_the_reset_when_it_is_sooner() {
        let now = at("2026-03-28T22:59:58Z");
        let decision = next_status(&spec(100), None, &BudgetStatus::default(), [], &now);
        assert_eq!(decision.requeue, Duration::from_secs(2));
    }

    #[test]
    fn an_unknown_zone_stalls_and_keeps_the_ledger() {
        let mut bad = spec(100);
        bad.window.time_zone = Some("Mars/Olympus".into());
        let previous = BudgetStatus {
            used: BudgetUsage {
                tokens: 7,
                ..BudgetUsage::default()
            },
            ..BudgetStatus::default()
        };
        let decision = next_status(&bad, Some(2), &previous, [], &at("2026-03-28T10:00:00Z"));
        let ready = condition(&decision.status, condition_type::READY);
        assert_eq!(
            (ready.status, ready.reason.as_str()),
            (ConditionStatus::False, reason::UNKNOWN_TIME_ZONE)
        );
        assert_eq!(
            condition(&decision.status, condition_type::STALLED).status,
            ConditionStatus::True
        );
        assert_eq!(decision.status.used.tokens, 7);
    }
}
