//! Building a status's condition list: transition times kept across writes, and the kstatus
//! conditions (`Reconciling`, `Stalled`) present only while they are `True`.

use herd_crds::condition::{Condition, ConditionStatus, find_condition};
use herd_crds::reason::{condition_type, kstatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// `desired` in its order, each keeping the previous `lastTransitionTime` when its status did
/// not change; conditions left out of `desired` are dropped.
pub fn merge(previous: &[Condition], desired: Vec<Condition>) -> Vec<Condition> {
    desired
        .into_iter()
        .map(|mut condition| {
            if let Some(old) = find_condition(previous, &condition.type_)
                && old.status == condition.status
            {
                condition.last_transition_time = old.last_transition_time.clone();
            }
            condition
        })
        .collect()
}

/// The conditions to write when a reconcile of `generation` starts: the previous ones plus
/// `Reconciling=True`, or `None` when that generation was already observed (or is already
/// marked), so an unchanged object costs no write.
pub fn begin_reconcile(
    previous: &[Condition],
    observed_generation: Option<i64>,
    generation: Option<i64>,
    now: &Time,
) -> Option<Vec<Condition>> {
    if observed_generation == generation {
        return None;
    }
    let marked = find_condition(previous, condition_type::RECONCILING)
        .is_some_and(|c| c.status == ConditionStatus::True && c.observed_generation == generation);
    if marked {
        return None;
    }
    let mut conditions: Vec<Condition> = previous
        .iter()
        .filter(|c| c.type_ != condition_type::RECONCILING)
        .cloned()
        .collect();
    conditions.push(Condition::new(
        condition_type::RECONCILING,
        ConditionStatus::True,
        kstatus::PROGRESSING,
        format!("processing generation {}", generation.unwrap_or_default()),
        generation,
        now.clone(),
    ));
    Some(conditions)
}

/// `Stalled=True` with the failing condition's reason and message.
pub fn stalled(reason: &str, message: &str, generation: Option<i64>, now: &Time) -> Condition {
    Condition::new(
        condition_type::STALLED,
        ConditionStatus::True,
        reason,
        message,
        generation,
        now.clone(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Time {
        Time(jiff::Timestamp::from_second(seconds).unwrap())
    }

    fn ready(status: ConditionStatus, now: i64) -> Condition {
        Condition::new("Ready", status, "R", "", Some(1), at(now))
    }

    #[test]
    fn merge_keeps_times_of_unchanged_statuses_and_drops_the_rest() {
        let previous = vec![
            ready(ConditionStatus::True, 1),
            stalled("SkillNotFound", "m", Some(1), &at(1)),
        ];
        let merged = merge(&previous, vec![ready(ConditionStatus::True, 9)]);
        assert_eq!(merged, vec![ready(ConditionStatus::True, 1)]);
        let merged = merge(&previous, vec![ready(ConditionStatus::False, 9)]);
        assert_eq!(merged[0].last_transition_time, at(9));
    }

    #[test]
    fn begin_reconcile_marks_a_new_generation_once() {
        let previous = vec![ready(ConditionStatus::True, 1)];
        assert_eq!(begin_reconcile(&previous, Some(2), Some(2), &at(5)), None);
        let marked = begin_reconcile(&previous, Some(1), Some(2), &at(5)).unwrap();
        assert_eq!(marked.len(), 2);
        assert_eq!(marked[0], previous[0]);
        let reconciling = find_condition(&marked, condition_type::RECONCILING).unwrap();
        assert_eq!(reconciling.status, ConditionStatus::True);
        assert_eq!(reconciling.reason, kstatus::PROGRESSING);
        assert_eq!(reconciling.observed_generation, Some(2));
        assert_eq!(begin_reconcile(&marked, Some(1), Some(2), &at(6)), None);
        let again = begin_reconcile(&marked, Some(1), Some(3), &at(7)).unwrap();
        assert_eq!(again.len(), 2, "the old mark is replaced, not repeated");
        assert_eq!(
            begin_reconcile(&[], None, Some(1), &at(0)).map(|c| c.len()),
            Some(1)
        );
    }
}
