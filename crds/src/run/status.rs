//! A Run's status, in two parts with one writer each: `report` (the run API, for the runner)
//! and everything else (the controller).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::phase::RunPhase;
use crate::condition::Condition;
use crate::report::{Artifact, Clarification, SandboxReport, StopReason, Todo, Usage};

/// Most characters of `status.report.result.text` (16 KiB); the full answer is in ConfigMap
/// `<run>-result`.
pub const MAX_RESULT_TEXT: usize = 16_384;

/// What became of a Run.
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunStatus {
    /// The runner's report (title, todos, usage, question, result), written only through the run
    /// API (field manager `herd-runapi`), always as a whole.
    pub report: Option<RunReport>,
    /// The `metadata.generation` the controller's part describes.
    pub observed_generation: Option<i64>,
    /// `Succeeded` (Unknown while the Run goes, with reasons `Queued`, `PodPending`, `Running`,
    /// `WaitingForInput`, `Suspended`, `AgentNotFound`, `AgentNotReady`; True; or False with `Failed`,
    /// `TimedOut`, `InputTimedOut`, `Cancelled`, `PodFailed`, `OOMKilled`, `Evicted`,
    /// `ModelError`, `ResultTooLarge`, `CheckpointTooLarge`, `InvalidSpec`, `SnapshotLost`) and
    /// `InputRequired`. A Pod that will not start by itself gives its reason, Unknown at once
    /// and False (or a retry) after the operator's pod start timeout: `Unschedulable`,
    /// `ImagePullBackOff`, `ErrImagePull`, `InvalidImageName`, `ErrImageNeverPull`,
    /// `ImageInspectError`, `CreateContainerConfigError`, `CreateContainerError`,
    /// `RunContainerError`, `CrashLoopBackOff`, `PreCreateHookError`, `PreStartHookError`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
    /// A one-word summary of the conditions, for display only: `Pending`, `Queued`, `Running`,
    /// `InputRequired`, `Suspended`, `Succeeded`, `Failed` or `Cancelled`.
    #[serde(default)]
    #[schemars(schema_with = "crate::schema::optional_enum::<RunPhase>")]
    pub phase: Option<RunPhase>,
    /// The current attempt's pod, `<run>-<attempt>`.
    #[schemars(length(max = 253))]
    pub pod_name: Option<String>,
    /// The current attempt, 1 for the first pod; more after infrastructure failures and after
    /// each resumption from `Suspended`.
    pub attempt: Option<u32>,
    /// How many attempts resumed a suspended wait; they are no retries (`retries` does not
    /// count them).
    pub resumptions: Option<u32>,
    /// Seconds the Run spent waiting for a person in waits that have ended. They do not count
    /// against `timeout`: the working time is the time since `startTime` less these and the
    /// current wait.
    pub waited_seconds: Option<u64>,
    /// When the current wait for a person began (the `InputRequired=True` transition);
    /// `inputTimeout` counts from here and `timeout` stands still. Absent while the agent works.
    pub waiting_since: Option<Time>,
    /// When the Run was first admitted; `timeout` counts from here, less the time waited.
    pub start_time: Option<Time>,
    /// When the Run finished.
    pub completion_time: Option<Time>,
    /// The child Runs this Run delegated to, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 50))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["name".into()]))]
    pub children: Vec<ChildRef>,
    /// How many children are in each state.
    pub child_counts: Option<ChildCounts>,
    /// Name of the ConfigMap holding the Agent spec and skill digests snapshotted at admission.
    #[schemars(length(max = 253))]
    pub snapshot: Option<String>,
}

/// The runner's report of a Run. A write with a lower `attempt`, or the same attempt and a lower
/// `seq`, is rejected, so a delayed progress write never erases a result or a question.
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new(crate::rules::REPORT_NOT_STALE).message(crate::rules::REPORT_NOT_STALE_MESSAGE))]
pub struct RunReport {
    /// The attempt (pod) that wrote this report.
    pub attempt: u32,
    /// Increases with every report of one attempt.
    pub seq: u64,
    /// A short title of the conversation, written by the agent.
    #[schemars(length(max = 256))]
    pub title: Option<String>,
    /// The agent's plan (plan mode).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 100))]
    #[x_kube(merge_strategy = ListMerge::Atomic)]
    pub todos: Vec<Todo>,
    /// Tokens and calls used so far.
    #[serde(default)]
    #[schemars(extend("default" = {}))]
    pub usage: Usage,
    /// The open question, while the Run waits for an answer in `spec.responses`.
    pub clarification: Option<Clarification>,
    /// The tool calls waiting for a person's decision in `spec.responses` (`kubectl herd
    /// approve` / `deny`), all of one turn.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    #[x_kube(merge_strategy = ListMerge::Atomic)]
    pub approvals: Vec<crate::approval::ApprovalRequest>,
    /// The final answer, once there is one.
    pub result: Option<RunResult>,
    /// Why the agent loop stopped, once it did.
    #[serde(default)]
    #[schemars(schema_with = "crate::schema::optional_enum::<StopReason>")]
    pub stop_reason: Option<StopReason>,
    /// The layers of isolation around the tools (Landlock, seccomp, capabilities...), as
    /// the attempt's `sandbox` container told them when it started; kept for the attempt
    /// once reported.
    pub sandbox: Option<SandboxReport>,
}

/// The final answer of a Run.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunResult {
    /// The answer, cut to 16 KiB; the whole answer is in ConfigMap `<run>-result`.
    #[schemars(length(max = 16384))]
    pub text: String,
    /// Whether `text` was cut.
    #[serde(default)]
    pub truncated: bool,
    /// Files the agent presented, stored in ConfigMap `<run>-result`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 100))]
    #[x_kube(merge_strategy = ListMerge::Atomic)]
    pub artifacts: Vec<Artifact>,
}

/// A child Run of this Run.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChildRef {
    /// Name of the child Run.
    #[schemars(length(max = 63))]
    pub name: String,
    /// The child's phase.
    pub state: RunPhase,
}

/// Numbers of child Runs by state.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChildCounts {
    /// Waiting for a slot under `maxConcurrent` or a wider cap.
    #[serde(default)]
    pub queued: u32,
    /// Admitted and not finished.
    #[serde(default)]
    pub active: u32,
    /// Finished with an answer.
    #[serde(default)]
    pub succeeded: u32,
    /// Failed, timed out or cancelled.
    #[serde(default)]
    pub failed: u32,
}
