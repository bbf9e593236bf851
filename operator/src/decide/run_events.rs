//! Which changes of a Run's `Succeeded` condition become an Event. Events are for a person:
//! why a Run waits (queued, held, its Agent missing, its Pod not starting), that it needs
//! them (a question, an approval), and how it ended. Routine progress (the Pod created, the
//! agent working) shows in the status and in the Pod's own Events; an Event for it would be
//! one more API write per Run for nobody.

use herd_crds::condition::{Condition, ConditionStatus};
use herd_crds::reason::run as reason;

/// `Succeeded` reasons that are routine progress, never an Event.
const ROUTINE: [&str; 2] = [reason::POD_PENDING, reason::RUNNING];

/// An Event to record on the Run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunEvent {
    /// A warning (`Succeeded=False`) or normal.
    pub warning: bool,
    /// The condition's reason.
    pub reason: String,
    /// The condition's message.
    pub message: String,
}

/// The Event for `Succeeded` going from `before` to `after`: one per change of status or
/// reason that is not routine progress.
pub fn succeeded_event(before: Option<&Condition>, after: &Condition) -> Option<RunEvent> {
    let unchanged =
        before.is_some_and(|old| old.status == after.status && old.reason == after.reason);
    let routine =
        after.status == ConditionStatus::Unknown && ROUTINE.contains(&after.reason.as_str());
    (!unchanged && !routine).then(|| RunEvent {
        warning: after.status == ConditionStatus::False,
        reason: after.reason.clone(),
        message: after.message.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use herd_crds::reason::condition_type;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn succeeded(status: ConditionStatus, why: &str) -> Condition {
        Condition {
            type_: condition_type::SUCCEEDED.to_owned(),
            status,
            observed_generation: None,
            last_transition_time: Time(jiff::Timestamp::UNIX_EPOCH),
            reason: why.to_owned(),
            message: format!("because {why}"),
        }
    }

    #[test]
    fn routine_progress_is_quiet_and_what_a_person_needs_is_told() {
        use ConditionStatus::{False, True, Unknown};
        let queued = succeeded(Unknown, reason::QUEUED);
        let cases = [
            (None, succeeded(Unknown, reason::QUEUED), Some(false)),
            (None, succeeded(Unknown, reason::POD_PENDING), None),
            (Some(&queued), succeeded(Unknown, reason::POD_PENDING), None),
            (Some(&queued), succeeded(Unknown, reason::RUNNING), None),
            (Some(&queued), succeeded(Unknown, reason::QUEUED), None),
            (
                Some(&queued),
                succeeded(Unknown, reason::WAITING_FOR_INPUT),
                Some(false),
            ),
            (
                Some(&queued),
                succeeded(Unknown, reason::BUDGET_EXCEEDED),
                Some(false),
            ),
            (
                Some(&queued),
                succeeded(Unknown, reason::IMAGE_PULL_BACK_OFF),
                Some(false),
            ),
            (
                Some(&queued),
                succeeded(True, reason::SUCCEEDED),
                Some(false),
            ),
            (Some(&queued), succeeded(False, reason::FAILED), Some(true)),
            (
                Some(&queued),
                succeeded(False, reason::POD_FAILED),
                Some(true),
            ),
        ];
        for (before, after, expected) in cases {
            let event = succeeded_event(before, &after);
            assert_eq!(
                event.as_ref().map(|e| e.warning),
                expected,
                "{:?} -> {}",
                before.map(|b| &b.reason),
                after.reason
            );
            if let Some(event) = event {
                assert_eq!(event.reason, after.reason);
                assert_eq!(event.message, after.message);
            }
        }
    }
}
