//! A Run's `phase`: a one-word summary of its conditions, for display only.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::condition::{Condition, ConditionStatus, find_condition, is_condition_true};
use crate::reason::{condition_type, run};

/// Where a Run stands, derived from its conditions by [`phase_of`].
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum RunPhase {
    /// Not admitted yet (no conditions, or its Agent does not exist yet).
    Pending,
    /// Waiting for a free slot under a concurrency cap, or for a Budget's window to reset.
    Queued,
    /// Its pod is starting or the agent is working.
    Running,
    /// The agent asked a question and waits for an answer.
    InputRequired,
    /// The agent waits for an answer without a Pod: it outlasted `suspendAfter`, posted its
    /// checkpoint and ended; the answer resumes it in a new attempt.
    Suspended,
    /// Finished with an answer.
    Succeeded,
    /// Finished without an answer (failure, timeout, pod trouble).
    Failed,
    /// Stopped by `spec.cancel`.
    Cancelled,
}

impl RunPhase {
    /// Whether the Run has finished, one way or another.
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            RunPhase::Succeeded | RunPhase::Failed | RunPhase::Cancelled
        )
    }
}

/// The phase the conditions amount to. `Succeeded` decides; while it is `Unknown`, a
/// suspension, an open question (`InputRequired=True`) or its reason tells the rest.
pub fn phase_of(conditions: &[Condition]) -> RunPhase {
    let Some(succeeded) = find_condition(conditions, condition_type::SUCCEEDED) else {
        return RunPhase::Pending;
    };
    match succeeded.status {
        ConditionStatus::True => RunPhase::Succeeded,
        ConditionStatus::False if succeeded.reason == run::CANCELLED => RunPhase::Cancelled,
        ConditionStatus::False => RunPhase::Failed,
        ConditionStatus::Unknown if succeeded.reason == run::SUSPENDED => RunPhase::Suspended,
        ConditionStatus::Unknown => {
            if is_condition_true(conditions, condition_type::INPUT_REQUIRED)
                || succeeded.reason == run::WAITING_FOR_INPUT
            {
                RunPhase::InputRequired
            } else {
                match succeeded.reason.as_str() {
                    run::QUEUED | run::BUDGET_EXCEEDED => RunPhase::Queued,
                    run::AGENT_NOT_FOUND | run::AGENT_NOT_READY => RunPhase::Pending,
                    _ => RunPhase::Running,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn condition(type_: &str, status: ConditionStatus, reason: &str) -> Condition {
        Condition::new(
            type_,
            status,
            reason,
            "",
            None,
            Time(jiff::Timestamp::UNIX_EPOCH),
        )
    }

    fn succeeded(status: ConditionStatus, reason: &str) -> Condition {
        condition(condition_type::SUCCEEDED, status, reason)
    }

    #[test]
    fn no_conditions_is_pending() {
        assert_eq!(phase_of(&[]), RunPhase::Pending);
    }

    #[test]
    fn unknown_reasons_map_to_going_phases() {
        use ConditionStatus::Unknown;
        let cases = [
            (run::QUEUED, RunPhase::Queued),
            (run::BUDGET_EXCEEDED, RunPhase::Queued),
            (run::AGENT_NOT_FOUND, RunPhase::Pending),
            (run::AGENT_NOT_READY, RunPhase::Pending),
            (run::POD_PENDING, RunPhase::Running),
            (run::RUNNING, RunPhase::Running),
            (run::WAITING_FOR_INPUT, RunPhase::InputRequired),
            (run::SUSPENDED, RunPhase::Suspended),
        ];
        for (reason, phase) in cases {
            assert_eq!(phase_of(&[succeeded(Unknown, reason)]), phase, "{reason}");
        }
    }

    #[test]
    fn an_open_question_wins_while_going() {
        let conditions = [
            succeeded(ConditionStatus::Unknown, run::RUNNING),
            condition(
                condition_type::INPUT_REQUIRED,
                ConditionStatus::True,
                run::WAITING_FOR_INPUT,
            ),
        ];
        assert_eq!(phase_of(&conditions), RunPhase::InputRequired);
    }

    #[test]
    fn a_suspended_wait_is_suspended_not_input_required() {
        let conditions = [
            succeeded(ConditionStatus::Unknown, run::SUSPENDED),
            condition(
                condition_type::INPUT_REQUIRED,
                ConditionStatus::True,
                run::WAITING_FOR_INPUT,
            ),
        ];
        assert_eq!(phase_of(&conditions), RunPhase::Suspended);
        assert!(!RunPhase::Suspended.is_finished());
    }

    #[test]
    fn finished_phases() {
        assert_eq!(
            phase_of(&[succeeded(ConditionStatus::True, run::SUCCEEDED)]),
            RunPhase::Succeeded
        );
        assert_eq!(
            phase_of(&[succeeded(ConditionStatus::False, run::CANCELLED)]),
            RunPhase::Cancelled
        );
        for reason in [
            run::FAILED,
            run::TIMED_OUT,
            run::OOM_KILLED,
            run::INVALID_SPEC,
        ] {
            assert_eq!(
                phase_of(&[succeeded(ConditionStatus::False, reason)]),
                RunPhase::Failed
            );
        }
        let stale_question = [
            succeeded(ConditionStatus::False, run::INPUT_TIMED_OUT),
            condition(
                condition_type::INPUT_REQUIRED,
                ConditionStatus::True,
                run::WAITING_FOR_INPUT,
            ),
        ];
        assert_eq!(phase_of(&stale_question), RunPhase::Failed);
        assert!(RunPhase::Failed.is_finished());
        assert!(!RunPhase::InputRequired.is_finished());
    }
}
