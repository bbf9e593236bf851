//! The `Schedule` resource: Runs created on a timetable, with CronJob's guarantees.

mod status;
mod template;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use status::{ActiveRun, MAX_ACTIVE, ScheduleStatus};
pub use template::{RunTemplate, RunTemplateMetadata};

/// Default of `successfulRunsHistoryLimit`.
pub const DEFAULT_SUCCESSFUL_HISTORY: u32 = 3;
/// Default of `failedRunsHistoryLimit`.
pub const DEFAULT_FAILED_HISTORY: u32 = 1;

fn default_successful_history() -> u32 {
    DEFAULT_SUCCESSFUL_HISTORY
}

fn default_failed_history() -> u32 {
    DEFAULT_FAILED_HISTORY
}

/// When to create Runs, and what each one is.
#[serde_with::skip_serializing_none]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[kube(
    group = "herd.dev",
    version = "v1alpha1",
    kind = "Schedule",
    namespaced,
    status = "ScheduleStatus",
    shortname = "hsched",
    category = "herd",
    derive = "PartialEq",
    doc = "Creates Runs on a timetable (a cron expression in a time zone) or once at a given time, as a CronJob creates Jobs: one Run per slot, named after the slot, owned by the Schedule.",
    validation = Rule::new(crate::rules::NAME_52).message(crate::rules::NAME_52_MESSAGE),
    printcolumn(name = "Schedule", type_ = "string", json_path = ".spec.schedule"),
    printcolumn(name = "TimeZone", type_ = "string", json_path = ".spec.timeZone"),
    printcolumn(name = "Suspend", type_ = "boolean", json_path = ".spec.suspend"),
    printcolumn(name = "Active", type_ = "integer", json_path = ".status.activeCount"),
    printcolumn(name = "Last", type_ = "date", json_path = ".status.lastScheduleTime"),
    printcolumn(name = "Next", type_ = "string", json_path = ".status.nextScheduleTime"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status", priority = 1),
    printcolumn(name = "At", type_ = "string", json_path = ".spec.at", priority = 1)
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new(crate::rules::SCHEDULE_OR_AT).message(crate::rules::SCHEDULE_OR_AT_MESSAGE))]
#[allow(clippy::duplicated_attributes)]
pub struct ScheduleSpec {
    /// When to create Runs: five cron fields (minute, hour, day of month, month, day of week,
    /// e.g. `0 9 * * 1-5`), a macro (`@yearly`, `@monthly`, `@weekly`, `@daily`, `@hourly`),
    /// or `@every <duration>` (e.g. `@every 15m`, counted from the Unix epoch). Set this or
    /// `at`.
    #[schemars(length(min = 1, max = 128))]
    #[x_kube(validation = Rule::new(crate::rules::CRON_SHAPE).message(crate::rules::expression(crate::rules::CRON_SHAPE_MESSAGE)))]
    pub schedule: Option<String>,
    /// One time to create a single Run, RFC 3339 (e.g. `2026-03-01T09:00:00+01:00`); the
    /// Schedule suspends itself once that Run is created. Set this or `schedule`.
    #[schemars(extend("maxLength" = 64))]
    pub at: Option<Time>,
    /// The IANA time zone `schedule` is read in, e.g. `Europe/Berlin`. Absent: UTC.
    #[schemars(length(min = 1, max = 64))]
    #[x_kube(validation = Rule::new(crate::rules::TIME_ZONE).message(crate::rules::expression(crate::rules::TIME_ZONE_MESSAGE)))]
    pub time_zone: Option<String>,
    /// The Run created for each slot.
    pub run_template: RunTemplate,
    /// What to do when a slot comes while an earlier Run is still going: `Allow` starts
    /// another, `Forbid` skips the slot, `Replace` cancels the earlier Run and starts a new
    /// one. Default `Allow`.
    #[serde(default)]
    pub concurrency_policy: ConcurrencyPolicy,
    /// Seconds after a slot within which its Run may still be created (after an operator
    /// outage, or a `Forbid` wait); a slot missed by more is skipped. Absent: no limit.
    #[schemars(range(min = 0))]
    pub starting_deadline_seconds: Option<u32>,
    /// Set to true to create no more Runs; Runs already created go on. Default false.
    #[serde(default)]
    pub suspend: bool,
    /// How many finished successful Runs to keep (the oldest are deleted), 0 to 100. Default 3.
    #[serde(default = "default_successful_history")]
    #[x_kube(validation = Rule::new(crate::rules::HISTORY_LIMIT).message(crate::rules::HISTORY_LIMIT_MESSAGE))]
    pub successful_runs_history_limit: u32,
    /// How many finished failed Runs to keep (the oldest are deleted), 0 to 100. Default 1.
    #[serde(default = "default_failed_history")]
    #[x_kube(validation = Rule::new(crate::rules::HISTORY_LIMIT).message(crate::rules::HISTORY_LIMIT_MESSAGE))]
    pub failed_runs_history_limit: u32,
}

/// What to do with a slot while an earlier Run is still going.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum ConcurrencyPolicy {
    /// Start the new Run beside the earlier ones.
    #[default]
    Allow,
    /// Skip the slot (it is retried while within `startingDeadlineSeconds`).
    Forbid,
    /// Cancel the earlier Runs and start the new one.
    Replace,
}
