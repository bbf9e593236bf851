//! A Run a Budget holds: its `Succeeded` condition says so with reason `BudgetExceeded`,
//! `Unknown` while it waits for the window to reset (`onExceeded: Queue`, phase `Queued`),
//! `False` when the Budget refuses it.

use herd_crds::condition::{Condition, ConditionStatus, set_condition};
use herd_crds::reason::{condition_type, run as reason};
use herd_crds::run::{RunStatus, phase_of};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::budget_admission::Hold;

/// Marks `status` (the controller's decision for a Run whose Pod is not created) as held by
/// `hold`.
pub fn hold_run(status: &mut RunStatus, hold: &Hold, generation: Option<i64>, now: &Time) {
    let state = if hold.refuse {
        ConditionStatus::False
    } else {
        ConditionStatus::Unknown
    };
    set_condition(
        &mut status.conditions,
        Condition::new(
            condition_type::SUCCEEDED,
            state,
            reason::BUDGET_EXCEEDED,
            hold.message.clone(),
            generation,
            now.clone(),
        ),
    );
    if hold.refuse {
        status.completion_time = Some(now.clone());
    }
    status.phase = Some(phase_of(&status.conditions));
}

#[cfg(test)]
mod tests {
    use super::*;
    use herd_crds::condition::find_condition;
    use herd_crds::run::RunPhase;

    fn at(second: i64) -> Time {
        Time(jiff::Timestamp::from_second(second).unwrap())
    }

    fn queued() -> RunStatus {
        let mut status = RunStatus::default();
        set_condition(
            &mut status.conditions,
            Condition::new(
                condition_type::SUCCEEDED,
                ConditionStatus::Unknown,
                reason::QUEUED,
                "",
                Some(1),
                at(10),
            ),
        );
        status
    }

    fn hold(refuse: bool) -> Hold {
        Hold {
            budget: "daily".into(),
            refuse,
            resets: jiff::Timestamp::from_second(86_400).unwrap(),
            message: "Budget daily reached its limit".into(),
        }
    }

    #[test]
    fn a_queued_run_waits_with_the_budgets_reason_and_keeps_its_transition_time() {
        let mut status = queued();
        hold_run(&mut status, &hold(false), Some(1), &at(20));
        let succeeded = find_condition(&status.conditions, condition_type::SUCCEEDED).unwrap();
        assert_eq!(succeeded.status, ConditionStatus::Unknown);
        assert_eq!(succeeded.reason, reason::BUDGET_EXCEEDED);
        assert_eq!(succeeded.message, "Budget daily reached its limit");
        assert_eq!(succeeded.last_transition_time, at(10));
        assert_eq!(status.phase, Some(RunPhase::Queued));
        assert_eq!(status.completion_time, None);
    }

    #[test]
    fn a_refused_run_fails_now() {
        let mut status = queued();
        hold_run(&mut status, &hold(true), Some(1), &at(20));
        let succeeded = find_condition(&status.conditions, condition_type::SUCCEEDED).unwrap();
        assert_eq!(succeeded.status, ConditionStatus::False);
        assert_eq!(succeeded.reason, reason::BUDGET_EXCEEDED);
        assert_eq!(status.phase, Some(RunPhase::Failed));
        assert_eq!(status.completion_time, Some(at(20)));
    }
}
