//! What the operator observed about a Schedule.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::condition::Condition;

/// Most Runs listed in `status.active`; `activeCount` still counts them all.
pub const MAX_ACTIVE: usize = 32;

/// A Schedule's slots and Runs.
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleStatus {
    /// The `metadata.generation` this status describes.
    pub observed_generation: Option<i64>,
    /// `Accepted` (reasons `InvalidSchedule`, `UnknownTimeZone`) and `Ready` (reasons
    /// `Scheduled`, `Suspended`, `Finished`, `RunRejected`, `NotAccepted`), with kstatus'
    /// `Reconciling` and `Stalled`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
    /// The slot of the latest Run created on the timetable.
    pub last_schedule_time: Option<Time>,
    /// When the latest successful Run of this Schedule finished.
    pub last_successful_time: Option<Time>,
    /// The next slot, absent while suspended or when no slot is left.
    pub next_schedule_time: Option<Time>,
    /// The Runs of this Schedule that have not finished (at most 32 listed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[x_kube(merge_strategy = ListMerge::Atomic)]
    pub active: Vec<ActiveRun>,
    /// How many Runs of this Schedule have not finished.
    pub active_count: Option<u32>,
}

/// A Run of the Schedule that has not finished.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActiveRun {
    /// The Run's name.
    #[schemars(length(min = 1, max = 63))]
    pub name: String,
}
