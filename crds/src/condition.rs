//! Status conditions in the KEP-1623 shape (`metav1.Condition`), and the helper that updates them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One aspect of an object's current state (the standard Kubernetes condition shape).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Which aspect this condition describes, e.g. `Ready` or `Succeeded`.
    #[serde(rename = "type")]
    #[schemars(
        length(min = 1, max = 316),
        regex(
            pattern = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
        )
    )]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: ConditionStatus,
    /// The `metadata.generation` the condition was computed from; older than the current
    /// generation means the condition may be out of date.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub observed_generation: Option<i64>,
    /// When `status` last changed (not when the condition was last written).
    pub last_transition_time: Time,
    /// A CamelCase word saying why the condition is in this state, for programs and columns.
    #[schemars(
        length(min = 1, max = 1024),
        regex(pattern = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
    )]
    pub reason: String,
    /// A sentence for people with details about the last transition; may be empty.
    #[serde(default)]
    #[schemars(length(max = 32768))]
    pub message: String,
}

/// The three values of a condition's `status`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// Not known yet, or still in progress (a Run's `Succeeded` while it runs).
    Unknown,
}

impl Condition {
    /// A condition whose `lastTransitionTime` is `now`; [`set_condition`] keeps the older time
    /// when the status did not change.
    pub fn new(
        type_: &str,
        status: ConditionStatus,
        reason: &str,
        message: impl Into<String>,
        observed_generation: Option<i64>,
        now: Time,
    ) -> Self {
        Condition {
            type_: type_.to_owned(),
            status,
            observed_generation,
            last_transition_time: now,
            reason: reason.to_owned(),
            message: message.into(),
        }
    }
}

/// Puts `condition` into `conditions`, replacing the one of the same type.
///
/// When the status is unchanged, the existing `lastTransitionTime` is kept: it records when the
/// status last changed, and rewriting it on every reconcile would make it useless (and cause
/// needless status writes). Returns whether anything other than that time changed.
pub fn set_condition(conditions: &mut Vec<Condition>, mut condition: Condition) -> bool {
    match conditions.iter_mut().find(|c| c.type_ == condition.type_) {
        Some(existing) => {
            if existing.status == condition.status {
                condition.last_transition_time = existing.last_transition_time.clone();
            }
            let changed = *existing != condition;
            *existing = condition;
            changed
        }
        None => {
            conditions.push(condition);
            true
        }
    }
}

/// The condition of the given type, if present.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// The condition of type `type_` as it was in `before` (absent the first time) and as it is in
/// `after`, when its status or reason differs between them: a change a person hears of (an
/// Event, a log line). `None` when it is unchanged, or absent from `after`.
pub fn changed_condition<'a>(
    before: &'a [Condition],
    after: &'a [Condition],
    type_: &str,
) -> Option<(Option<&'a Condition>, &'a Condition)> {
    let old = find_condition(before, type_);
    let new = find_condition(after, type_)?;
    let same = old.is_some_and(|old| old.status == new.status && old.reason == new.reason);
    (!same).then_some((old, new))
}

/// Whether the condition of the given type is present with status `True`.
pub fn is_condition_true(conditions: &[Condition], type_: &str) -> bool {
    find_condition(conditions, type_).is_some_and(|c| c.status == ConditionStatus::True)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Time {
        Time(jiff::Timestamp::from_second(seconds).unwrap())
    }

    fn ready(status: ConditionStatus, reason: &str, now: i64) -> Condition {
        Condition::new("Ready", status, reason, "", Some(1), at(now))
    }

    #[test]
    fn a_change_is_a_new_status_or_reason_not_a_new_message() {
        let pending = ready(ConditionStatus::False, "SkillNotFound", 10);
        let mut reworded = pending.clone();
        reworded.message = "another message".to_owned();
        let other_reason = ready(ConditionStatus::False, "SecretNotFound", 20);
        let done = ready(ConditionStatus::True, "Ready", 30);

        let first = changed_condition(&[], std::slice::from_ref(&pending), "Ready");
        assert_eq!(first, Some((None, &pending)), "the first time is a change");
        let unchanged = [pending.clone()];
        assert_eq!(
            changed_condition(&unchanged, std::slice::from_ref(&reworded), "Ready"),
            None
        );
        assert_eq!(
            changed_condition(&unchanged, std::slice::from_ref(&other_reason), "Ready"),
            Some((Some(&pending), &other_reason))
        );
        assert_eq!(
            changed_condition(&unchanged, std::slice::from_ref(&done), "Ready"),
            Some((Some(&pending), &done))
        );
        assert_eq!(changed_condition(&unchanged, &[], "Ready"), None, "gone");
        assert_eq!(
            changed_condition(&unchanged, &unchanged, "Stalled"),
            None,
            "another type"
        );
    }

    #[test]
    fn adds_a_missing_condition() {
        let mut conditions = vec![];
        assert!(set_condition(
            &mut conditions,
            ready(ConditionStatus::True, "Ready", 10)
        ));
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].last_transition_time, at(10));
    }

    #[test]
    fn keeps_transition_time_when_status_is_unchanged() {
        let mut conditions = vec![ready(ConditionStatus::False, "SkillNotFound", 10)];
        let changed = set_condition(
            &mut conditions,
            ready(ConditionStatus::False, "SecretNotFound", 20),
        );
        assert!(changed, "the reason changed");
        assert_eq!(conditions[0].last_transition_time, at(10));
        assert_eq!(conditions[0].reason, "SecretNotFound");
    }

    #[test]
    fn rewriting_the_same_condition_is_no_change() {
        let mut conditions = vec![ready(ConditionStatus::True, "Ready", 10)];
        assert!(!set_condition(
            &mut conditions,
            ready(ConditionStatus::True, "Ready", 30)
        ));
        assert_eq!(conditions[0].last_transition_time, at(10));
    }

    #[test]
    fn moves_transition_time_when_status_changes() {
        let mut conditions = vec![
            Condition::new(
                "Accepted",
                ConditionStatus::True,
                "Accepted",
                "",
                None,
                at(1),
            ),
            ready(ConditionStatus::False, "SkillNotFound", 10),
        ];
        assert!(set_condition(
            &mut conditions,
            ready(ConditionStatus::True, "Ready", 20)
        ));
        assert_eq!(conditions.len(), 2);
        let ready = find_condition(&conditions, "Ready").unwrap();
        assert_eq!(ready.last_transition_time, at(20));
        assert!(is_condition_true(&conditions, "Ready"));
        assert!(!is_condition_true(&conditions, "Missing"));
    }

    #[test]
    fn serializes_in_the_kubernetes_shape() {
        let json = serde_json::to_value(ready(ConditionStatus::Unknown, "Running", 0)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "type": "Ready",
                "status": "Unknown",
                "observedGeneration": 1,
                "lastTransitionTime": "1970-01-01T00:00:00Z",
                "reason": "Running",
                "message": "",
            })
        );
    }
}
