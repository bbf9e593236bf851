//! The `Run` resource: one task given to an Agent, and what became of it.

mod phase;
mod status;
mod validate;

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::refs::ConfigMapRef;

pub use phase::{RunPhase, phase_of};
pub use status::{ChildCounts, ChildRef, MAX_RESULT_TEXT, RunReport, RunResult, RunStatus};

/// Most characters of `task` (32 KiB).
pub const MAX_TASK: usize = 32_768;
/// Most characters of one answer in `responses` (16 KiB).
pub const MAX_ANSWER: usize = 16_384;
/// Most entries of `responses`.
pub const MAX_RESPONSES: usize = 32;
/// Most entries of `inputs`.
pub const MAX_INPUTS: usize = 16;

/// Annotation holding the W3C `traceparent` of the Run's trace: set by the operator when it
/// first reconciles the Run (a child Run created through the run API gets its parent's span),
/// passed to the Run's pods as `TRACEPARENT`, so the operator's, the runner's and every child's
/// spans form one trace.
pub const TRACEPARENT_ANNOTATION: &str = "herd.dev/traceparent";

/// A task for an Agent. Everything but `responses` and `cancel` is fixed once created.
#[serde_with::skip_serializing_none]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[kube(
    group = "herd.dev",
    version = "v1alpha1",
    kind = "Run",
    namespaced,
    status = "RunStatus",
    shortname = "hrun",
    category = "herd",
    derive = "PartialEq",
    doc = "A task given to an Agent, run in its own pod; the answer, questions and progress appear in the status.",
    validation = Rule::new(crate::rules::NAME_63).message(crate::rules::NAME_63_MESSAGE),
    selectable = ".spec.agentRef.name",
    selectable = ".spec.parentRef.name",
    printcolumn(name = "Agent", type_ = "string", json_path = ".spec.agentRef.name"),
    printcolumn(name = "Succeeded", type_ = "string", json_path = ".status.conditions[?(@.type==\"Succeeded\")].status"),
    printcolumn(name = "Reason", type_ = "string", json_path = ".status.conditions[?(@.type==\"Succeeded\")].reason"),
    printcolumn(name = "Title", type_ = "string", json_path = ".status.report.title"),
    printcolumn(name = "StartTime", type_ = "date", json_path = ".status.startTime"),
    printcolumn(name = "CompletionTime", type_ = "date", json_path = ".status.completionTime"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    printcolumn(name = "Parent", type_ = "string", json_path = ".spec.parentRef.name", priority = 1)
)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new(crate::rules::RUN_SPEC_IMMUTABLE).message(crate::rules::RUN_SPEC_IMMUTABLE_MESSAGE),
    validation = Rule::new(crate::rules::PARENT_WITH_TYPE).message(crate::rules::PARENT_WITH_TYPE_MESSAGE)
)]
#[allow(clippy::duplicated_attributes)]
pub struct RunSpec {
    /// The Agent that does the task (same namespace). A Run whose Agent does not exist yet
    /// waits with reason `AgentNotFound`.
    pub agent_ref: AgentRef,
    /// The task, as the user would type it (at most 32 KiB).
    #[schemars(length(min = 1, max = 32768))]
    pub task: String,
    /// ConfigMaps whose keys become files under `/mnt/user-data/uploads/`, for the agent to read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    #[x_kube(merge_strategy = ListMerge::Atomic)]
    pub inputs: Vec<RunInput>,
    /// Overrides of the Agent's model settings for this Run.
    pub model: Option<ModelOverride>,
    /// Plan mode: the agent keeps a todo list shown in the status. Absent: the Agent's
    /// `runDefaults.planMode`.
    pub plan_mode: Option<bool>,
    /// Let the model think before answering. Absent: the Agent's `runDefaults.thinking`.
    pub thinking: Option<bool>,
    /// Time limit from the Run's start, queue time and retries included, 1s to 168h, e.g.
    /// `1h`. Absent: the Agent's `runDefaults.timeout`.
    #[schemars(length(max = 32))]
    #[x_kube(
        validation = Rule::new(crate::rules::DURATION).message(crate::rules::DURATION_MESSAGE),
        validation = Rule::new(crate::rules::DURATION_UP_TO_168H).message(crate::rules::expression(crate::rules::DURATION_UP_TO_168H_MESSAGE))
    )]
    pub timeout: Option<String>,
    /// How long a question may wait for an answer, 1s to 720h, e.g. `2h`. Absent: the Agent's
    /// `runDefaults.inputTimeout`.
    #[schemars(length(max = 32))]
    #[x_kube(
        validation = Rule::new(crate::rules::DURATION).message(crate::rules::DURATION_MESSAGE),
        validation = Rule::new(crate::rules::DURATION_UP_TO_720H).message(crate::rules::expression(crate::rules::DURATION_UP_TO_720H_MESSAGE))
    )]
    pub input_timeout: Option<String>,
    /// Tool calls that need a person's yes before they run, in addition to the Agent's
    /// `approval` (a Run can add rules, never remove them); `timeout` and `onTimeout` replace
    /// the Agent's where set.
    pub approval: Option<crate::approval::ApprovalSpec>,
    /// The Run that delegated this one (set by the operator on child Runs, with
    /// `subagentType`).
    pub parent_ref: Option<ParentRef>,
    /// The subagent type of a child Run: `general-purpose` or `bash` (set with `parentRef`).
    #[schemars(length(min = 1, max = 64))]
    pub subagent_type: Option<String>,
    /// Answers to the agent's questions and decisions on its tool calls: append `{id,
    /// answer}` with the id from `status.report.clarification.id`, or `{id, decision:
    /// approve|deny, reason}` with an id from `status.report.approvals[].id`, e.g. with a JSON
    /// patch adding to `/spec/responses/-` (a merge patch replaces the whole list). Responses
    /// cannot be changed or removed; whoever may patch the Run may answer and approve.
    #[serde(default)]
    #[schemars(length(max = 32))]
    #[x_kube(
        merge_strategy = ListMerge::Map(vec!["id".into()]),
        validation = Rule::new(crate::rules::RESPONSES_APPEND_ONLY).message(crate::rules::RESPONSES_APPEND_ONLY_MESSAGE)
    )]
    pub responses: Vec<Response>,
    /// Set to true to stop the Run: its pod is deleted and its children cancelled. Cannot be
    /// undone. Default false.
    #[serde(default)]
    #[x_kube(validation = Rule::new(crate::rules::CANCEL_STAYS).message(crate::rules::CANCEL_STAYS_MESSAGE))]
    pub cancel: bool,
    /// Seconds after which the finished Run is deleted, with what it owns (its Pods, the
    /// Failed ones of earlier attempts included). Absent: the Agent's
    /// `runDefaults.ttlSecondsAfterFinished`.
    #[schemars(range(min = 0))]
    pub ttl_seconds_after_finished: Option<u32>,
}

/// The Agent a Run uses.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentRef {
    /// Name of the Agent (a DNS-1123 subdomain of at most 63 characters).
    #[schemars(length(min = 1, max = 63))]
    #[x_kube(validation = Rule::new(crate::rules::AGENT_REF_NAME).message(crate::rules::expression(crate::rules::AGENT_REF_NAME_MESSAGE)))]
    pub name: String,
}

/// A ConfigMap given to the agent as files.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunInput {
    /// The ConfigMap; each key of `data` and `binaryData` becomes one file.
    pub config_map_ref: ConfigMapRef,
    /// Folder under `uploads/` for the files, relative (no leading `/`, no `..` segment), e.g.
    /// `reports`. Absent: `uploads/` itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    #[x_kube(validation = Rule::new(crate::rules::RELATIVE_PATH).message(crate::rules::expression(crate::rules::RELATIVE_PATH_MESSAGE)))]
    pub path: Option<String>,
}

/// What a Run may change about its Agent's model.
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelOverride {
    /// Another model name at the same provider and endpoint.
    #[schemars(length(min = 1, max = 256))]
    pub name: Option<String>,
    /// Sampling temperature, 0 to 2.
    #[schemars(range(min = 0.0, max = 2.0))]
    pub temperature: Option<f64>,
    /// Most tokens one answer may have.
    #[schemars(range(min = 1))]
    pub max_tokens: Option<u32>,
}

/// The parent of a child Run.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ParentRef {
    /// Name of the parent Run.
    #[schemars(length(min = 1, max = 63))]
    pub name: String,
    /// The parent's `task` tool call this Run answers.
    #[schemars(length(min = 1, max = 128))]
    pub tool_call_id: String,
}

/// An answer to one of the agent's questions, or a decision on one of its tool calls.
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new(crate::rules::RESPONSE_IMMUTABLE).message(crate::rules::RESPONSE_IMMUTABLE_MESSAGE),
    validation = Rule::new(crate::approval::RESPONSE_KIND_RULE).message(crate::approval::RESPONSE_KIND_MESSAGE)
)]
#[allow(clippy::duplicated_attributes)]
pub struct Response {
    /// The question's id, from `status.report.clarification.id`, or the approval request's,
    /// from `status.report.approvals[].id`.
    #[schemars(length(min = 1, max = 64))]
    pub id: String,
    /// The answer to a question, as text (at most 16 KiB). Exclusive with `decision`.
    #[schemars(length(max = 16384))]
    pub answer: Option<String>,
    /// The decision on a tool call: `approve` runs it as the model sent it, `deny` tells the
    /// model `denied by a person: <reason>`. Exclusive with `answer`.
    #[serde(default)]
    #[schemars(schema_with = "crate::schema::optional_enum::<crate::approval::ApprovalDecision>")]
    pub decision: Option<crate::approval::ApprovalDecision>,
    /// Why, with a decision (the model reads it after a denial; at most 1024 characters).
    #[schemars(length(max = 1024))]
    pub reason: Option<String>,
}

impl Response {
    /// An answer to the question `id`.
    pub fn answer(id: &str, answer: &str) -> Self {
        Response {
            id: id.to_owned(),
            answer: Some(answer.to_owned()),
            decision: None,
            reason: None,
        }
    }

    /// A decision on the approval request `id`.
    pub fn decision(
        id: &str,
        decision: crate::approval::ApprovalDecision,
        reason: Option<&str>,
    ) -> Self {
        Response {
            id: id.to_owned(),
            answer: None,
            decision: Some(decision),
            reason: reason.map(str::to_owned),
        }
    }
}
