//! What a Schedule's reconcile does, CronJob's way: which slot gets a Run now, which Runs to
//! cancel (`Replace`) or delete (history limits), and the status that follows.
//!
//! - The Run of a slot is named `<schedule>-<slot in Unix seconds>`, so creating it twice (a
//!   restart between the create and the status write, two leaders for a moment) is refused as
//!   `AlreadyExists`: one Run per slot.
//! - The slots since the last one run (or since the Schedule's creation), and no older than
//!   `startingDeadlineSeconds`, are due; only the latest is run, and more than
//!   [`TOO_MANY_MISSED`] of them is worth a warning.
//! - `Forbid` leaves a due slot for later while a Run goes (it runs when that Run ends, if
//!   still within the deadline); `Replace` cancels the going Runs and creates the new one.
//! - A Run the API server refuses uses up its slot and makes the Schedule `Ready=False` until
//!   a Run is created or the spec changes: one attempt per slot, never a hot loop.

use std::time::Duration;

use herd_crds::condition::{Condition, ConditionStatus, find_condition};
use herd_crds::reason::{condition_type, schedule as reason};
use herd_crds::schedule::{ActiveRun, ConcurrencyPolicy, MAX_ACTIVE, ScheduleSpec, ScheduleStatus};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::conditions::{merge, stalled};
use super::schedule_timetable::{Timetable, TimetableError};

/// Missed slots past which a warning Event is published (CronJob's number).
pub const TOO_MANY_MISSED: u32 = 100;

/// The name of the Run of `schedule`'s slot at `slot`.
pub fn run_name(schedule: &str, slot: Timestamp) -> String {
    format!("{schedule}-{}", slot.as_second())
}

/// What became of one of the Schedule's Runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Not finished (`Succeeded` absent or `Unknown`).
    Going,
    /// `Succeeded=True`.
    Succeeded,
    /// `Succeeded=False`.
    Failed,
}

/// One Run the Schedule owns, as the decision needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleRun {
    /// The Run's name.
    pub name: String,
    /// The slot it was created for; `None` for a manual trigger.
    pub slot: Option<Timestamp>,
    /// Where it is.
    pub outcome: Outcome,
    /// `spec.cancel` is set.
    pub cancelled: bool,
    /// When it finished (else when it was created), to order the history.
    pub finished_or_created: Timestamp,
}

/// Everything the decision reads.
#[derive(Debug, Clone)]
pub struct ScheduleFacts<'a> {
    /// The Schedule's name.
    pub name: &'a str,
    /// Its spec.
    pub spec: &'a ScheduleSpec,
    /// Its `metadata.generation`.
    pub generation: Option<i64>,
    /// Its `metadata.creationTimestamp`.
    pub created: Timestamp,
    /// Its status before this reconcile.
    pub previous: &'a ScheduleStatus,
    /// The Runs it owns.
    pub runs: &'a [ScheduleRun],
    /// The reconcile's clock.
    pub now: Timestamp,
}

/// What the reconcile does.
#[derive(Debug, Clone, PartialEq)]
pub struct SchedulePlan {
    /// The slot to create a Run for now, with its name.
    pub create: Option<(Timestamp, String)>,
    /// Going Runs to cancel before creating (`Replace`).
    pub cancel: Vec<String>,
    /// Finished Runs past the history limits, oldest first.
    pub delete: Vec<String>,
    /// A due slot left for later because a Run goes and the policy is `Forbid`.
    pub forbidden: Option<Timestamp>,
    /// How many slots were missed, when more than [`TOO_MANY_MISSED`].
    pub too_many_missed: Option<u32>,
    /// Set `spec.suspend` once the Run is created (a one-shot `at`; not when it is refused,
    /// so the refusal stays reported).
    pub suspend_after_create: bool,
    /// The status to write when the create (if any) succeeds.
    pub status: ScheduleStatus,
    /// When to reconcile again, should nothing change before.
    pub requeue: Option<Duration>,
}

/// Decides the reconcile of a Schedule: what its Runs show (counted), then, when its spec is
/// valid and it is neither finished nor suspended, the slot that is due, if one is.
pub fn plan(facts: &ScheduleFacts) -> SchedulePlan {
    let spec = facts.spec;
    let going: Vec<&ScheduleRun> = facts
        .runs
        .iter()
        .filter(|run| run.outcome == Outcome::Going)
        .collect();
    let mut plan = counted(facts, &going);
    let last_scheduled = plan.status.last_schedule_time.as_ref().map(|t| t.0);
    let timetable = match Timetable::of(spec) {
        Ok(timetable) => timetable,
        Err(error) => {
            plan.status.conditions = not_accepted(facts, &error);
            return plan;
        }
    };
    let one_shot_done = timetable.is_one_shot()
        && last_scheduled.is_some_and(|last| timetable.next_after(last).is_none());
    if one_shot_done {
        plan.status.conditions = match kept_rejection(facts) {
            Some((_, message)) => rejected_conditions(facts, &message),
            None => accepted(facts, reason::FINISHED, "the one Run at `at` was created"),
        };
        return plan;
    }
    if spec.suspend {
        plan.status.conditions = accepted(facts, reason::SUSPENDED, "suspended: no Run is created");
        return plan;
    }
    let earliest = earliest_slot(facts, &timetable, last_scheduled);
    let due = timetable
        .latest_until(facts.now)
        .filter(|slot| earliest.is_none_or(|earliest| *slot > earliest));
    let next = timetable.next_after(facts.now);
    plan.status.next_schedule_time = next.map(Time);
    plan.requeue = next.map(|next| until(facts.now, next));
    let mut ready = (
        reason::SCHEDULED,
        "Runs are created at their slots".to_owned(),
    );
    if let Some(slot) = due {
        let missed = earliest.map_or(1, |earliest| {
            timetable.count_between(earliest, facts.now, TOO_MANY_MISSED + 1)
        });
        if missed > TOO_MANY_MISSED {
            plan.too_many_missed = Some(missed);
        }
        take_slot(&mut plan, facts, &timetable, &going, slot);
    } else if let Some(kept) = kept_rejection(facts) {
        ready = kept;
    }
    plan.status.conditions = if ready.0 == reason::RUN_REJECTED {
        rejected_conditions(facts, &ready.1)
    } else {
        accepted(facts, ready.0, &ready.1)
    };
    plan
}

/// The plan before any slot is looked at: delete what is past history, and the status
/// counts what the Runs show (the going ones, the last slot, the last success).
fn counted(facts: &ScheduleFacts, going: &[&ScheduleRun]) -> SchedulePlan {
    let last_successful = latest(
        facts.previous.last_successful_time.as_ref().map(|t| t.0),
        facts
            .runs
            .iter()
            .filter(|run| run.outcome == Outcome::Succeeded)
            .map(|run| run.finished_or_created)
            .max(),
    );
    let last_scheduled = latest(
        facts.previous.last_schedule_time.as_ref().map(|t| t.0),
        facts.runs.iter().filter_map(|run| run.slot).max(),
    );
    SchedulePlan {
        create: None,
        cancel: Vec::new(),
        delete: over_history(facts.runs, facts.spec),
        forbidden: None,
        too_many_missed: None,
        suspend_after_create: false,
        status: ScheduleStatus {
            observed_generation: facts.generation,
            conditions: Vec::new(),
            last_schedule_time: last_scheduled.map(Time),
            last_successful_time: last_successful.map(Time),
            next_schedule_time: None,
            active: active_list(going.iter().map(|run| run.name.clone())),
            active_count: Some(count(going.len())),
        },
        requeue: None,
    }
}

/// The due `slot` under the concurrency policy: Forbid waits while a Run goes; Replace cancels
/// the going Runs; either way but Forbid's wait, the slot's Run is created and counted active.
fn take_slot(
    plan: &mut SchedulePlan,
    facts: &ScheduleFacts,
    timetable: &Timetable,
    going: &[&ScheduleRun],
    slot: Timestamp,
) {
    let policy = facts.spec.concurrency_policy;
    if policy == ConcurrencyPolicy::Forbid && !going.is_empty() {
        plan.forbidden = Some(slot);
        return;
    }
    if policy == ConcurrencyPolicy::Replace {
        plan.cancel = going
            .iter()
            .filter(|run| !run.cancelled)
            .map(|run| run.name.clone())
            .collect();
    }
    let name = run_name(facts.name, slot);
    plan.status.last_schedule_time = Some(Time(slot));
    if !going.iter().any(|run| run.name == name) {
        let names = going.iter().map(|run| run.name.clone());
        plan.status.active = active_list(names.chain([name.clone()]));
        plan.status.active_count = Some(count(going.len() + 1));
    }
    plan.suspend_after_create = timetable.is_one_shot();
    plan.create = Some((slot, name));
}

/// The status after the API server refused the planned Run: its slot is used up, the Run is
/// not active, and `Ready=False` carries the server's message.
pub fn refused(facts: &ScheduleFacts, plan: &SchedulePlan, message: &str) -> ScheduleStatus {
    let mut status = plan.status.clone();
    if let Some((_, name)) = &plan.create {
        status.active.retain(|run| &run.name != name);
        status.active_count = status.active_count.map(|n| n.saturating_sub(1));
    }
    status.conditions = rejected_conditions(facts, &format!("the Run was refused: {message}"));
    status
}

/// The previous `RunRejected`, kept while no new Run is due and the spec is the same.
fn kept_rejection(facts: &ScheduleFacts) -> Option<(&'static str, String)> {
    let ready = find_condition(&facts.previous.conditions, condition_type::READY)?;
    let same_spec = facts.previous.observed_generation == facts.generation;
    (same_spec && ready.reason == reason::RUN_REJECTED)
        .then(|| (reason::RUN_REJECTED, ready.message.clone()))
}

/// The slot after which slots are due: the last one run (or the Schedule's creation, except
/// for a one-shot `at`, which runs even when set in the past), but not older than
/// `startingDeadlineSeconds`.
fn earliest_slot(
    facts: &ScheduleFacts,
    timetable: &Timetable,
    last_scheduled: Option<Timestamp>,
) -> Option<Timestamp> {
    let since = match last_scheduled {
        Some(last) => Some(last),
        None if timetable.is_one_shot() => None,
        None => Some(facts.created),
    };
    let deadline = facts.spec.starting_deadline_seconds.and_then(|seconds| {
        facts
            .now
            .checked_sub(SignedDuration::from_secs(i64::from(seconds)))
            .ok()
            // A slot exactly `startingDeadlineSeconds` old may still start.
            .and_then(|t| t.checked_sub(SignedDuration::from_nanos(1)).ok())
    });
    latest(since, deadline)
}

/// Finished Runs past the history limits, oldest first; manual ones count too.
fn over_history(runs: &[ScheduleRun], spec: &ScheduleSpec) -> Vec<String> {
    let mut delete = Vec::new();
    for (outcome, limit) in [
        (Outcome::Succeeded, spec.successful_runs_history_limit),
        (Outcome::Failed, spec.failed_runs_history_limit),
    ] {
        let mut finished: Vec<&ScheduleRun> =
            runs.iter().filter(|run| run.outcome == outcome).collect();
        finished.sort_by(|a, b| {
            (a.finished_or_created, &a.name).cmp(&(b.finished_or_created, &b.name))
        });
        let keep = usize::try_from(limit).unwrap_or(usize::MAX);
        let excess = finished.len().saturating_sub(keep);
        delete.extend(
            finished
                .into_iter()
                .take(excess)
                .map(|run| run.name.clone()),
        );
    }
    delete
}

fn active_list(names: impl Iterator<Item = String>) -> Vec<ActiveRun> {
    let mut names: Vec<String> = names.collect();
    names.sort();
    names
        .into_iter()
        .take(MAX_ACTIVE)
        .map(|name| ActiveRun { name })
        .collect()
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn latest(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Timestamp> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// The wait until `then`, at least a second (a slot is never missed by waking a moment early:
/// the reconcile then finds it not yet due and waits again).
fn until(now: Timestamp, then: Timestamp) -> Duration {
    let wait = then.duration_since(now).max(SignedDuration::ZERO);
    Duration::try_from(wait)
        .unwrap_or(Duration::ZERO)
        .max(Duration::from_secs(1))
}

fn condition(
    facts: &ScheduleFacts,
    type_: &str,
    status: ConditionStatus,
    reason: &str,
    message: &str,
) -> Condition {
    Condition::new(
        type_,
        status,
        reason,
        message,
        facts.generation,
        Time(facts.now),
    )
}

fn accepted(facts: &ScheduleFacts, ready_reason: &str, message: &str) -> Vec<Condition> {
    merge(
        &facts.previous.conditions,
        accepted_and_ready(facts, ConditionStatus::True, ready_reason, message),
    )
}

/// A valid timetable whose last Run the API server refused: Ready=False and Stalled.
fn rejected_conditions(facts: &ScheduleFacts, message: &str) -> Vec<Condition> {
    let mut conditions =
        accepted_and_ready(facts, ConditionStatus::False, reason::RUN_REJECTED, message);
    conditions.push(stalled(
        reason::RUN_REJECTED,
        message,
        facts.generation,
        &Time(facts.now),
    ));
    merge(&facts.previous.conditions, conditions)
}

/// `Accepted=True` for a valid timetable and `Ready` as given.
fn accepted_and_ready(
    facts: &ScheduleFacts,
    ready: ConditionStatus,
    ready_reason: &str,
    message: &str,
) -> Vec<Condition> {
    vec![
        condition(
            facts,
            condition_type::ACCEPTED,
            ConditionStatus::True,
            reason::ACCEPTED,
            "the timetable is valid",
        ),
        condition(facts, condition_type::READY, ready, ready_reason, message),
    ]
}

fn not_accepted(facts: &ScheduleFacts, error: &TimetableError) -> Vec<Condition> {
    let why = match error {
        TimetableError::UnknownTimeZone(_) => reason::UNKNOWN_TIME_ZONE,
        TimetableError::InvalidSchedule { .. } | TimetableError::NoSlots => {
            reason::INVALID_SCHEDULE
        }
    };
    let message = error.to_string();
    let now = Time(facts.now);
    merge(
        &facts.previous.conditions,
        vec![
            condition(
                facts,
                condition_type::ACCEPTED,
                ConditionStatus::False,
                why,
                &message,
            ),
            condition(
                facts,
                condition_type::READY,
                ConditionStatus::False,
                reason::NOT_ACCEPTED,
                &message,
            ),
            stalled(why, &message, facts.generation, &now),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn spec(extra: serde_json::Value) -> ScheduleSpec {
        let mut value = serde_json::json!({
            "schedule": "*/10 * * * *",
            "runTemplate": {"spec": {"agentRef": {"name": "researcher"}, "task": "brief"}},
        });
        if let (Some(base), Some(extra)) = (value.as_object_mut(), extra.as_object()) {
            for (key, field) in extra {
                if field.is_null() {
                    base.remove(key);
                } else {
                    base.insert(key.clone(), field.clone());
                }
            }
        }
        serde_json::from_value(value).unwrap()
    }

    /// A fake clock and the Schedule's state, driven slot by slot.
    struct World {
        spec: ScheduleSpec,
        generation: i64,
        created: Timestamp,
        status: ScheduleStatus,
        runs: Vec<ScheduleRun>,
        now: Timestamp,
    }

    impl World {
        fn new(spec: ScheduleSpec, created: &str) -> World {
            World {
                spec,
                generation: 1,
                created: at(created),
                status: ScheduleStatus::default(),
                runs: Vec::new(),
                now: at(created),
            }
        }

        fn facts(&self) -> ScheduleFacts<'_> {
            ScheduleFacts {
                name: "brief",
                spec: &self.spec,
                generation: Some(self.generation),
                created: self.created,
                previous: &self.status,
                runs: &self.runs,
                now: self.now,
            }
        }

        fn plan(&self) -> SchedulePlan {
            plan(&self.facts())
        }

        /// The status the controller writes when the API server refuses the planned Run for
        /// `why`.
        fn refused_run(&self, why: &str) -> ScheduleStatus {
            refused(&self.facts(), &self.plan(), why)
        }

        /// Reconciles at `now` as the controller does, the API server accepting every write.
        fn reconcile_at(&mut self, now: &str) -> SchedulePlan {
            self.now = at(now);
            let plan = self.plan();
            for name in &plan.cancel {
                if let Some(run) = self.runs.iter_mut().find(|run| &run.name == name) {
                    run.cancelled = true;
                }
            }
            self.runs.retain(|run| !plan.delete.contains(&run.name));
            if let Some((slot, name)) = &plan.create
                && !self.runs.iter().any(|run| &run.name == name)
            {
                self.runs.push(ScheduleRun {
                    name: name.clone(),
                    slot: Some(*slot),
                    outcome: Outcome::Going,
                    cancelled: false,
                    finished_or_created: self.now,
                });
            }
            if plan.suspend_after_create {
                self.spec.suspend = true;
                self.generation += 1;
            }
            self.status = plan.status.clone();
            plan
        }

        fn finish(&mut self, name: &str, outcome: Outcome, when: &str) {
            let run = self.runs.iter_mut().find(|run| run.name == name).unwrap();
            run.outcome = outcome;
            run.finished_or_created = at(when);
        }

        fn names(&self) -> Vec<&str> {
            self.runs.iter().map(|run| run.name.as_str()).collect()
        }

        fn ready(&self) -> (ConditionStatus, String) {
            let ready = find_condition(&self.status.conditions, condition_type::READY).unwrap();
            (ready.status, ready.reason.clone())
        }
    }

    fn created(plan: &SchedulePlan) -> Option<String> {
        plan.create.as_ref().map(|(_, name)| name.clone())
    }

    fn name_at(slot: &str) -> String {
        run_name("brief", at(slot))
    }

    #[test]
    fn one_run_per_slot_at_its_time() {
        let mut w = World::new(spec(serde_json::json!({})), "2026-01-01T00:03:00Z");
        let plan = w.reconcile_at("2026-01-01T00:03:00Z");
        assert_eq!(created(&plan), None);
        assert_eq!(plan.requeue, Some(Duration::from_secs(420)));
        assert_eq!(
            plan.status.next_schedule_time,
            Some(Time(at("2026-01-01T00:10:00Z")))
        );
        assert_eq!(
            w.ready(),
            (ConditionStatus::True, reason::SCHEDULED.to_owned())
        );
        // Woken a moment early: nothing yet.
        assert_eq!(created(&w.reconcile_at("2026-01-01T00:09:59.9Z")), None);
        let plan = w.reconcile_at("2026-01-01T00:10:00.2Z");
        assert_eq!(created(&plan), Some(name_at("2026-01-01T00:10:00Z")));
        assert_eq!(plan.status.active_count, Some(1));
        assert_eq!(
            plan.status.last_schedule_time,
            Some(Time(at("2026-01-01T00:10:00Z")))
        );
        // Reconciled again in the same slot (a Run event): nothing more.
        assert_eq!(created(&w.reconcile_at("2026-01-01T00:10:03Z")), None);
        assert_eq!(
            created(&w.reconcile_at("2026-01-01T00:20:00Z")),
            Some(name_at("2026-01-01T00:20:00Z"))
        );
        assert_eq!(w.runs.len(), 2);
    }

    #[test]
    fn the_run_name_is_the_schedule_and_the_slot() {
        assert_eq!(
            run_name("brief", at("2026-01-05T08:00:00Z")),
            "brief-1767600000"
        );
    }

    #[test]
    fn a_lost_status_write_does_not_run_a_slot_twice() {
        // The Run of 00:10 was created, then the operator died before writing the status.
        let mut w = World::new(spec(serde_json::json!({})), "2026-01-01T00:03:00Z");
        w.reconcile_at("2026-01-01T00:10:00Z");
        w.status = ScheduleStatus::default();
        assert_eq!(created(&w.reconcile_at("2026-01-01T00:12:00Z")), None);
        assert_eq!(
            w.status.last_schedule_time,
            Some(Time(at("2026-01-01T00:10:00Z")))
        );
        // And a second leader deciding from the old state names the same Run.
        let mut other = World::new(spec(serde_json::json!({})), "2026-01-01T00:03:00Z");
        assert_eq!(
            created(&other.reconcile_at("2026-01-01T00:12:00Z")),
            Some(name_at("2026-01-01T00:10:00Z"))
        );
    }

    #[test]
    fn after_downtime_only_the_latest_missed_slot_runs() {
        let mut w = World::new(spec(serde_json::json!({})), "2026-01-01T00:00:00Z");
        let plan = w.reconcile_at("2026-01-01T01:05:00Z");
        assert_eq!(created(&plan), Some(name_at("2026-01-01T01:00:00Z")));
        assert_eq!(plan.too_many_missed, None);
        assert_eq!(w.runs.len(), 1);
    }

    #[test]
    fn more_than_a_hundred_missed_slots_warn() {
        let mut w = World::new(spec(serde_json::json!({})), "2026-01-01T00:00:00Z");
        // 100 slots in 1000 minutes: not yet too many.
        let plan = w.reconcile_at("2026-01-01T16:40:00Z");
        assert_eq!(plan.too_many_missed, None);
        let mut w = World::new(spec(serde_json::json!({})), "2026-01-01T00:00:00Z");
        let plan = w.reconcile_at("2026-01-02T00:00:00Z");
        assert_eq!(plan.too_many_missed, Some(101));
        assert_eq!(created(&plan), Some(name_at("2026-01-02T00:00:00Z")));
    }

    #[test]
    fn the_starting_deadline_skips_slots_missed_by_more() {
        let mut w = World::new(
            spec(serde_json::json!({"startingDeadlineSeconds": 60})),
            "2026-01-01T00:00:00Z",
        );
        // 00:10 is 90 s old: skipped; the next slot still comes.
        let plan = w.reconcile_at("2026-01-01T00:11:30Z");
        assert_eq!(created(&plan), None);
        assert_eq!(
            plan.status.next_schedule_time,
            Some(Time(at("2026-01-01T00:20:00Z")))
        );
        // Exactly 60 s old: still started.
        let plan = w.reconcile_at("2026-01-01T00:21:00Z");
        assert_eq!(created(&plan), Some(name_at("2026-01-01T00:20:00Z")));
        // A deadline also bounds the missed count: no warning after a long outage.
        let plan = w.reconcile_at("2026-01-09T00:00:30Z");
        assert_eq!(plan.too_many_missed, None);
        assert_eq!(created(&plan), Some(name_at("2026-01-09T00:00:00Z")));
    }

    #[test]
    fn allow_runs_side_by_side() {
        let mut w = World::new(spec(serde_json::json!({})), "2026-01-01T00:00:00Z");
        w.reconcile_at("2026-01-01T00:10:00Z");
        let plan = w.reconcile_at("2026-01-01T00:20:00Z");
        assert_eq!(created(&plan), Some(name_at("2026-01-01T00:20:00Z")));
        assert!(plan.cancel.is_empty());
        assert_eq!(plan.status.active_count, Some(2));
        assert_eq!(
            plan.status.active,
            [
                ActiveRun {
                    name: name_at("2026-01-01T00:10:00Z")
                },
                ActiveRun {
                    name: name_at("2026-01-01T00:20:00Z")
                },
            ]
        );
    }

    #[test]
    fn forbid_skips_while_a_run_goes_and_runs_the_slot_after() {
        let mut w = World::new(
            spec(serde_json::json!({"concurrencyPolicy": "Forbid"})),
            "2026-01-01T00:00:00Z",
        );
        w.reconcile_at("2026-01-01T00:10:00Z");
        let plan = w.reconcile_at("2026-01-01T00:20:00Z");
        assert_eq!(created(&plan), None);
        assert_eq!(plan.forbidden, Some(at("2026-01-01T00:20:00Z")));
        assert_eq!(
            plan.status.last_schedule_time,
            Some(Time(at("2026-01-01T00:10:00Z")))
        );
        // The Run ends: the waiting slot runs (no deadline).
        w.finish(
            &name_at("2026-01-01T00:10:00Z"),
            Outcome::Succeeded,
            "2026-01-01T00:23:00Z",
        );
        let plan = w.reconcile_at("2026-01-01T00:23:00Z");
        assert_eq!(created(&plan), Some(name_at("2026-01-01T00:20:00Z")));
        assert_eq!(
            plan.status.last_successful_time,
            Some(Time(at("2026-01-01T00:23:00Z")))
        );
    }

    #[test]
    fn forbid_with_a_deadline_drops_the_slot_that_waited_too_long() {
        let mut w = World::new(
            spec(
                serde_json::json!({"concurrencyPolicy": "Forbid", "startingDeadlineSeconds": 120}),
            ),
            "2026-01-01T00:00:00Z",
        );
        w.reconcile_at("2026-01-01T00:10:00Z");
        assert_eq!(created(&w.reconcile_at("2026-01-01T00:20:00Z")), None);
        w.finish(
            &name_at("2026-01-01T00:10:00Z"),
            Outcome::Failed,
            "2026-01-01T00:25:00Z",
        );
        assert_eq!(created(&w.reconcile_at("2026-01-01T00:25:00Z")), None);
        assert_eq!(
            created(&w.reconcile_at("2026-01-01T00:30:00Z")),
            Some(name_at("2026-01-01T00:30:00Z"))
        );
    }

    #[test]
    fn replace_cancels_the_going_runs_once() {
        let mut w = World::new(
            spec(serde_json::json!({"concurrencyPolicy": "Replace"})),
            "2026-01-01T00:00:00Z",
        );
        w.reconcile_at("2026-01-01T00:10:00Z");
        let plan = w.reconcile_at("2026-01-01T00:20:00Z");
        assert_eq!(plan.cancel, [name_at("2026-01-01T00:10:00Z")]);
        assert_eq!(created(&plan), Some(name_at("2026-01-01T00:20:00Z")));
        // The cancelled Run is still ending at the next slot: not cancelled twice.
        let plan = w.reconcile_at("2026-01-01T00:30:00Z");
        assert_eq!(plan.cancel, [name_at("2026-01-01T00:20:00Z")]);
    }

    #[test]
    fn history_keeps_the_newest_finished_runs() {
        let mut w = World::new(
            spec(serde_json::json!({"schedule": "@every 1m"})),
            "2026-01-01T00:00:00Z",
        );
        for minute in 1..=6 {
            let slot = format!("2026-01-01T00:{minute:02}:00Z");
            w.reconcile_at(&slot);
            let outcome = if minute == 3 || minute == 5 {
                Outcome::Failed
            } else {
                Outcome::Succeeded
            };
            w.finish(
                &name_at(&slot),
                outcome,
                &format!("2026-01-01T00:{minute:02}:30Z"),
            );
        }
        // The failed 00:03 went when 00:05 failed; the succeeded 00:01 goes now.
        let plan = w.reconcile_at("2026-01-01T00:06:40Z");
        assert_eq!(plan.delete, [name_at("2026-01-01T00:01:00Z")]);
        assert_eq!(
            w.names(),
            [
                name_at("2026-01-01T00:02:00Z"),
                name_at("2026-01-01T00:04:00Z"),
                name_at("2026-01-01T00:05:00Z"),
                name_at("2026-01-01T00:06:00Z"),
            ]
        );
        assert_eq!(plan.status.active_count, Some(0));
        // Limits of 0 keep nothing finished, and never a going Run.
        w.spec.successful_runs_history_limit = 0;
        w.spec.failed_runs_history_limit = 0;
        w.reconcile_at("2026-01-01T00:07:00Z");
        assert_eq!(w.names(), [name_at("2026-01-01T00:07:00Z")]);
    }

    #[test]
    fn suspend_creates_nothing_and_has_no_next_slot() {
        let mut w = World::new(
            spec(serde_json::json!({"suspend": true})),
            "2026-01-01T00:00:00Z",
        );
        let plan = w.reconcile_at("2026-01-01T00:30:00Z");
        assert_eq!(created(&plan), None);
        assert_eq!(plan.status.next_schedule_time, None);
        assert_eq!(plan.requeue, None);
        assert_eq!(
            w.ready(),
            (ConditionStatus::True, reason::SUSPENDED.to_owned())
        );
        // Resumed: the latest missed slot runs, as with CronJob.
        w.spec.suspend = false;
        w.generation += 1;
        assert_eq!(
            created(&w.reconcile_at("2026-01-01T00:35:00Z")),
            Some(name_at("2026-01-01T00:30:00Z"))
        );
    }

    #[test]
    fn a_one_shot_runs_once_then_suspends() {
        let mut w = World::new(
            spec(serde_json::json!({"schedule": null, "at": "2026-01-01T09:00:00Z"})),
            "2026-01-01T08:00:00Z",
        );
        let plan = w.reconcile_at("2026-01-01T08:00:00Z");
        assert_eq!(plan.requeue, Some(Duration::from_secs(3600)));
        let plan = w.reconcile_at("2026-01-01T09:00:01Z");
        assert_eq!(created(&plan), Some(name_at("2026-01-01T09:00:00Z")));
        assert!(plan.suspend_after_create);
        let plan = w.reconcile_at("2026-01-01T09:00:02Z");
        assert_eq!(created(&plan), None);
        assert_eq!(plan.status.next_schedule_time, None);
        assert_eq!(
            w.ready(),
            (ConditionStatus::True, reason::FINISHED.to_owned())
        );
        // An `at` already past when the Schedule is created still runs, within the deadline.
        let mut late = World::new(
            spec(serde_json::json!({"schedule": null, "at": "2026-01-01T09:00:00Z"})),
            "2026-01-01T10:00:00Z",
        );
        assert!(late.reconcile_at("2026-01-01T10:00:00Z").create.is_some());
        let mut too_late = World::new(
            spec(
                serde_json::json!({"schedule": null, "at": "2026-01-01T09:00:00Z", "startingDeadlineSeconds": 600}),
            ),
            "2026-01-01T10:00:00Z",
        );
        assert!(
            too_late
                .reconcile_at("2026-01-01T10:00:00Z")
                .create
                .is_none()
        );
    }

    #[test]
    fn a_refused_one_shot_stays_reported() {
        let mut w = World::new(
            spec(serde_json::json!({"schedule": null, "at": "2026-01-01T09:00:00Z"})),
            "2026-01-01T08:00:00Z",
        );
        w.now = at("2026-01-01T09:00:00Z");
        w.status = w.refused_run("exceeded quota");
        let again = w.reconcile_at("2026-01-01T09:00:05Z");
        assert_eq!(again.create, None);
        assert_eq!(
            w.ready(),
            (ConditionStatus::False, reason::RUN_REJECTED.to_owned())
        );
    }

    #[test]
    fn a_slot_in_another_time_zone_across_dst() {
        let mut w = World::new(
            spec(serde_json::json!({"schedule": "0 9 * * *", "timeZone": "Europe/Berlin"})),
            "2026-03-28T00:00:00Z",
        );
        assert_eq!(
            w.reconcile_at("2026-03-28T00:00:00Z")
                .status
                .next_schedule_time,
            Some(Time(at("2026-03-28T08:00:00Z")))
        );
        assert!(w.reconcile_at("2026-03-28T08:00:00Z").create.is_some());
        // After the change to summer time 09:00 is 07:00 UTC.
        let plan = w.reconcile_at("2026-03-28T08:00:01Z");
        assert_eq!(
            plan.status.next_schedule_time,
            Some(Time(at("2026-03-29T07:00:00Z")))
        );
        assert_eq!(
            created(&w.reconcile_at("2026-03-29T07:00:00Z")),
            Some(name_at("2026-03-29T07:00:00Z"))
        );
    }

    #[test]
    fn bad_timetables_are_not_accepted_and_stall() {
        for (extra, why) in [
            (
                serde_json::json!({"schedule": "61 * * * *"}),
                reason::INVALID_SCHEDULE,
            ),
            (
                serde_json::json!({"timeZone": "Europe/Atlantis"}),
                reason::UNKNOWN_TIME_ZONE,
            ),
        ] {
            let mut w = World::new(spec(extra), "2026-01-01T00:00:00Z");
            let plan = w.reconcile_at("2026-01-01T01:00:00Z");
            assert_eq!(plan.create, None);
            assert_eq!(plan.requeue, None);
            let accepted =
                find_condition(&plan.status.conditions, condition_type::ACCEPTED).unwrap();
            assert_eq!(
                (accepted.status, accepted.reason.as_str()),
                (ConditionStatus::False, why)
            );
            let stalled = find_condition(&plan.status.conditions, condition_type::STALLED).unwrap();
            assert_eq!(stalled.reason, why);
            assert_eq!(w.ready().0, ConditionStatus::False);
        }
    }

    #[test]
    fn a_refused_run_uses_its_slot_and_stays_reported_until_the_next() {
        let mut w = World::new(spec(serde_json::json!({})), "2026-01-01T00:00:00Z");
        w.now = at("2026-01-01T00:10:00Z");
        let status = w.refused_run("exceeded quota");
        assert_eq!(status.active, []);
        assert_eq!(status.active_count, Some(0));
        assert_eq!(
            status.last_schedule_time,
            Some(Time(at("2026-01-01T00:10:00Z")))
        );
        w.status = status;
        assert_eq!(
            w.ready(),
            (ConditionStatus::False, reason::RUN_REJECTED.to_owned())
        );
        // Reconciled again (its own status write): no new attempt, the report stays.
        let again = w.reconcile_at("2026-01-01T00:10:01Z");
        assert_eq!(again.create, None);
        assert_eq!(
            w.ready(),
            (ConditionStatus::False, reason::RUN_REJECTED.to_owned())
        );
        assert!(
            find_condition(&w.status.conditions, condition_type::READY)
                .unwrap()
                .message
                .contains("exceeded quota")
        );
        // The next slot's Run is created: Ready again.
        assert!(w.reconcile_at("2026-01-01T00:20:00Z").create.is_some());
        assert_eq!(
            w.ready(),
            (ConditionStatus::True, reason::SCHEDULED.to_owned())
        );
        assert!(find_condition(&w.status.conditions, condition_type::STALLED).is_none());
    }

    #[test]
    fn manual_runs_count_as_active_and_in_history() {
        let mut w = World::new(
            spec(serde_json::json!({"concurrencyPolicy": "Forbid"})),
            "2026-01-01T00:00:00Z",
        );
        w.runs.push(ScheduleRun {
            name: "brief-manual-x7k2p".to_owned(),
            slot: None,
            outcome: Outcome::Going,
            cancelled: false,
            finished_or_created: at("2026-01-01T00:05:00Z"),
        });
        let plan = w.reconcile_at("2026-01-01T00:10:00Z");
        assert_eq!(plan.forbidden, Some(at("2026-01-01T00:10:00Z")));
        assert_eq!(plan.status.last_schedule_time, None);
    }
}
