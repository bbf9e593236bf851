//! The run API's request and response bodies (runner `agent` container <-> operator).
//!
//! The operator serves exactly these under `/v1/runs/{namespace}/{name}/...`; the runner's
//! `ControlPlane` for pods sends them. Locally, `herd-runner run` uses the same types in-process.
//! Every report carries the pod's `attempt` and an increasing `seq`, so the API drops stale writes.

use serde::{Deserialize, Serialize};

use crate::agent::AgentSpec;
use crate::report::{Artifact, Clarification, SandboxReport, StopReason, Todo, Usage};
use crate::run::{Response, RunSpec};

/// Most bytes of a `result` or `clarification` body (413 past it).
pub const MAX_LARGE_BODY: usize = 2 * 1024 * 1024;
/// Most bytes of any other body (413 past it).
pub const MAX_BODY: usize = 64 * 1024;

/// `GET /v1/runs/{ns}/{name}/config`: everything the runner needs, from the Run's snapshot.
///
/// The runner turns it into the same run plan `herd-runner run` makes from the manifests, so
/// a Run in a pod and the same manifests on a laptop run the same configuration.
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RunConfig {
    /// The Run's attempt this pod serves (1 for the first pod).
    pub attempt: u32,
    /// The Agent spec as snapshotted at admission: defaults applied, the operator's default
    /// model filled in, `soulFrom` inlined into `soul`, `model.scriptFrom` dropped (its text is
    /// in `script`); for a child, the parent's narrowed by the request.
    pub agent: AgentSpec,
    /// The Agent's name.
    pub agent_name: String,
    /// The text of `model.scriptFrom`, for the `scripted` provider.
    pub script: Option<String>,
    /// The Run spec (task, plan mode, thinking, model override; `subagentType` on a child).
    pub run: RunSpec,
    /// Nesting depth: 0 for a top-level Run, 1 for its children, and so on.
    pub depth: u32,
    /// Seconds left before the Run's deadline, queue time and earlier attempts deducted (time
    /// spent waiting for a person does not count).
    pub seconds_left: u64,
    /// How long a question waits for its answer in the Pod before the Pod posts its checkpoint
    /// and ends (the Run is `Suspended`); absent: it waits in the Pod.
    pub suspend_after_seconds: Option<u64>,
    /// Model calls still allowed (a child never gets more than its parent has left).
    pub max_model_calls: u32,
    /// Tokens still allowed, when the Run has a budget.
    pub token_budget: Option<u64>,
    /// The checkpoint to resume from, when an earlier attempt asked a question (gzip, base64).
    pub checkpoint_gzip_base64: Option<String>,
    /// Answers given so far, by question id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub responses: Vec<Answer>,
}

/// `POST /v1/runs/{ns}/{name}/progress`: title, todos and usage (coalesced by the API).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ProgressReport {
    pub attempt: u32,
    pub seq: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub todos: Vec<Todo>,
    #[serde(default)]
    pub usage: Usage,
    /// The attempt's model call times and tool call outcomes, for the operator's metrics.
    #[serde(default, skip_serializing_if = "CallStats::is_empty")]
    pub calls: CallStats,
}

/// Most model calls in [`CallStats::model_calls`].
pub const MAX_TIMED_CALLS: usize = 64;
/// Most entries in [`CallStats::tool_calls`].
pub const MAX_TOOL_COUNTS: usize = 64;

/// What an attempt's calls did, for metrics. The operator counts each model call once, by its
/// number, and each tool count by how far it grew, so a report sent again or skipped over
/// counts nothing twice.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct CallStats {
    /// The attempt's latest answered model calls (at most [`MAX_TIMED_CALLS`]), oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub model_calls: Vec<TimedCall>,
    /// The attempt's tool calls so far by tool and outcome (at most [`MAX_TOOL_COUNTS`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCount>,
}

impl CallStats {
    /// Whether there is nothing to count.
    pub fn is_empty(&self) -> bool {
        self.model_calls.is_empty() && self.tool_calls.is_empty()
    }
}

/// One answered model call.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TimedCall {
    /// The call's number in the attempt, from 1.
    pub n: u64,
    /// How long it took, request to last byte, in milliseconds.
    pub millis: u64,
}

/// How many tool calls of one tool ended one way.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ToolCount {
    /// A built-in tool's name, or `mcp` for any MCP server's tool.
    pub tool: String,
    /// `ok` or `error`.
    pub outcome: String,
    /// Calls so far in the attempt.
    pub count: u64,
}

/// `POST /v1/runs/{ns}/{name}/progress` as runners send it: a [`ProgressReport`] with, beside
/// its fields, the layers of isolation around the Run's tools as the `sandbox` container told
/// them. A run API that does not know `sandbox` reads the body as a plain `ProgressReport`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ProgressBody {
    /// The progress itself.
    #[serde(flatten)]
    pub report: ProgressReport,
    /// The sandbox's layers, once the runner has reached it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxReport>,
}

/// `POST /v1/runs/{ns}/{name}/children`: start a child Run for one `task` call (idempotent on
/// `toolCallId`).
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ChildRequest {
    pub attempt: u32,
    /// The `task` tool call's id; the child's name derives from it.
    pub tool_call_id: String,
    /// The short description the model gave.
    pub description: String,
    /// The full task for the subagent.
    pub prompt: String,
    /// `general-purpose` or `bash`.
    pub subagent_type: String,
    /// Model calls the parent has left; the child gets at most this many (and never more than
    /// the parent's snapshot allows).
    pub model_calls_left: Option<u32>,
    /// Tokens the parent has left, when it has a budget; the child's budget is at most this.
    pub tokens_left: Option<u64>,
    /// Seconds the parent has left; the child's deadline is at most this far away.
    pub seconds_left: Option<u64>,
}

/// How a child Run ended.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum ChildStatus {
    Completed,
    Failed,
    Cancelled,
    TimedOut,
}

/// `GET /v1/runs/{ns}/{name}/children/{toolCallId}?wait=...`: a child's outcome (long-polled).
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ChildOutcome {
    /// The child Run's name.
    pub name: String,
    /// `None` while the child is still going (the long poll ended without an outcome).
    pub status: Option<ChildStatus>,
    pub stop_reason: Option<StopReason>,
    /// The child's final answer (truncated like `status.report.result.text`).
    #[serde(default)]
    pub result: String,
    /// Why it failed, when it did.
    pub error: Option<String>,
    #[serde(default)]
    pub usage: Usage,
    /// Files the child presented, copied into the parent's `outputs/<child>/`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Artifact>,
}

/// `POST /v1/runs/{ns}/{name}/clarification`: the question and the checkpoint to resume from.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClarificationRequest {
    pub attempt: u32,
    pub seq: u64,
    pub clarification: Clarification,
    /// The serialized thread, gzip then base64 (stored in `<run>-checkpoint`).
    pub checkpoint_gzip_base64: String,
}

/// `POST /v1/runs/{ns}/{name}/checkpoint`: the thread of an attempt stopped by SIGTERM while it
/// worked (its Pod deleted, evicted or drained), so another attempt resumes from it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointReport {
    pub attempt: u32,
    /// The serialized thread, gzip then base64 (stored in `<run>-checkpoint`).
    pub checkpoint_gzip_base64: String,
}

/// An answer to a clarification question, or a decision on an approval request
/// (`spec.responses[]`).
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Answer {
    pub id: String,
    /// The answer to a question (empty with a decision).
    #[serde(default)]
    pub answer: String,
    /// The decision on an approval request.
    pub decision: Option<crate::approval::ApprovalDecision>,
    /// Why, with a decision.
    pub reason: Option<String>,
}

/// The exit code of a runner that could not post its result before its deadline and wrote a
/// [`FallbackReport`] to its termination log instead.
pub const FALLBACK_EXIT_CODE: u8 = 75;

/// What such a runner writes to its termination log (the kubelet keeps 4,096 bytes of it): the
/// operator reads it from the `agent` container's terminated state and ends the Run as the
/// stop reason says.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct FallbackReport {
    /// Why the run stopped.
    pub stop_reason: StopReason,
    /// The answer, or for a failure what failed.
    #[serde(default)]
    pub text: String,
}

impl From<&Response> for Answer {
    /// A Run's `spec.responses[]` entry as the run API hands it to the runner.
    fn from(response: &Response) -> Self {
        Answer {
            id: response.id.clone(),
            answer: response.answer.clone().unwrap_or_default(),
            decision: response.decision,
            reason: response.reason.clone(),
        }
    }
}

impl Answer {
    /// The answer `answer` to the question `id`.
    pub fn text(id: &str, answer: &str) -> Self {
        Answer {
            id: id.to_owned(),
            answer: answer.to_owned(),
            decision: None,
            reason: None,
        }
    }
}

/// `POST /v1/runs/{ns}/{name}/approval`: the tool calls of one turn that wait for a person's
/// decision, and the checkpoint to resume from.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalAsk {
    pub attempt: u32,
    pub seq: u64,
    pub approvals: Vec<crate::approval::ApprovalRequest>,
    /// The serialized thread, gzip then base64 (stored in `<run>-checkpoint`).
    pub checkpoint_gzip_base64: String,
}

/// `GET /v1/runs/{ns}/{name}/answers/{id}?wait=...`: the answer, once given (long-polled).
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AnswerPoll {
    pub answer: Option<Answer>,
    /// Seconds left before the Run's deadline when the poll ended: the runner re-bases its own
    /// deadline on it (the time a question waits counts against `inputTimeout`, not `timeout`).
    pub seconds_left: Option<u64>,
}

/// The path parameters of `GET /v1/runs/{ns}/{name}/children/{toolCallId}/files/{n}`: one file
/// a child presented. The answer is the file's bytes as they are ([`FILE_CONTENT_TYPE`],
/// `Content-Length` its size), its virtual path in the [`FILE_PATH_HEADER`] header.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ChildFileRef {
    /// The `task` call that started the child.
    pub tool_call_id: String,
    /// The file's index in the child's [`ChildOutcome::artifacts`], from 0.
    pub n: usize,
}

/// The media type of a presented file's bytes.
pub const FILE_CONTENT_TYPE: &str = "application/octet-stream";
/// The header naming a presented file's virtual path (under `/mnt/user-data/outputs/`),
/// percent-encoded as a URL path is.
pub const FILE_PATH_HEADER: &str = "herd-file-path";

/// A file the agent presented, with its bytes.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PresentedFile {
    /// Virtual path under `/mnt/user-data/outputs/`.
    pub path: String,
    /// Base64 of the content (binary allowed).
    pub data_base64: String,
}

/// `POST /v1/runs/{ns}/{name}/result`: the final answer and presented files.
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResultReport {
    pub attempt: u32,
    pub seq: u64,
    pub stop_reason: StopReason,
    /// The full final answer (the API truncates what goes into status).
    pub text: String,
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub todos: Vec<Todo>,
    #[serde(default)]
    pub usage: Usage,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<PresentedFile>,
    /// Why the run failed, when `stop_reason` is a failure.
    pub error: Option<String>,
}

/// Categories of memory facts (DeerFlow's core set).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum FactCategory {
    Preference,
    Correction,
    Context,
    Goal,
    Behavior,
    Identity,
    Constraint,
    Decision,
    Other,
}

/// One remembered fact.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Fact {
    pub id: String,
    pub content: String,
    pub category: FactCategory,
    /// 0..=1.
    pub confidence: f64,
    /// The Run (or local thread) the fact came from.
    pub source: String,
    pub created_at: String,
    pub updated_at: String,
    #[serde(default)]
    pub confirmation_count: u32,
}

/// Summaries of who the user is and what they work on.
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct MemoryContext {
    pub work: Option<String>,
    pub personal: Option<String>,
    pub top_of_mind: Option<String>,
    pub history: Option<String>,
}

/// The memory document of an agent (or of one user of it, with `scope: user`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct MemoryDocument {
    #[serde(default)]
    pub revision: u64,
    #[serde(default)]
    pub context: MemoryContext,
    #[serde(default)]
    pub facts: Vec<Fact>,
}

/// One change to memory; applied by the store with compare-and-swap so concurrent runs
/// lose nothing.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "op", rename_all = "camelCase")]
pub enum MemoryOperation {
    /// A new fact (dropped below confidence 0.7).
    Add {
        content: String,
        category: FactCategory,
        confidence: f64,
    },
    /// A fact was confirmed again.
    Reinforce { id: String },
    /// A fact is wrong or stale.
    Remove { id: String },
    /// Replaces one of the context summaries.
    SetContext { field: ContextField, text: String },
}

/// Which context summary a `SetContext` operation replaces.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum ContextField {
    Work,
    Personal,
    TopOfMind,
    History,
}

/// `POST /v1/runs/{ns}/{name}/memory`: operations to apply.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MemoryUpdate {
    pub attempt: u32,
    pub operations: Vec<MemoryOperation>,
}

/// The answer of `POST /v1/runs/{ns}/{name}/result` once the result is durable (its ConfigMap
/// and `status.report` written).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ResultAccepted {
    /// The stop reason stored: the runner's, or `resultTooLarge` when the answer and files did
    /// not fit the result ConfigMap (the Run fails so).
    pub stop_reason: StopReason,
}

/// An error body of the run API.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ApiError {
    /// Machine-readable reason, one of [`api_error`]'s names.
    pub reason: String,
    pub message: String,
}

/// The reasons of [`ApiError`], by HTTP status.
pub mod api_error {
    /// 400: a body that does not parse or breaks a limit of its fields.
    pub const BAD_REQUEST: &str = "BadRequest";
    /// 401: no token, or one the API server does not accept for the audience `herd.dev`.
    pub const UNAUTHORIZED: &str = "Unauthorized";
    /// 403: the token's Pod is not the Run's in the path.
    pub const FORBIDDEN: &str = "Forbidden";
    /// 404: no such Run (it was deleted), or no such route.
    pub const NOT_FOUND: &str = "NotFound";
    /// 409: the Pod serves an older attempt than the Run's; the runner stops at once.
    pub const STALE_ATTEMPT: &str = "StaleAttempt";
    /// 413: the body is over its route's limit.
    pub const TOO_LARGE: &str = "TooLarge";
    /// 429: over the Run's request rate; `Retry-After` says when to try again.
    pub const RATE_LIMITED: &str = "RateLimited";
    /// 500: the request cannot succeed as things stand.
    pub const INTERNAL: &str = "Internal";
    /// 503: the API server (or the run API) is not available now; retry.
    pub const UNAVAILABLE: &str = "Unavailable";
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::SandboxLayer;

    #[test]
    fn a_progress_body_is_a_progress_report_with_the_sandbox_beside_it() {
        let body = ProgressBody {
            report: ProgressReport {
                attempt: 2,
                seq: 7,
                title: Some("t".into()),
                ..ProgressReport::default()
            },
            sandbox: Some(SandboxReport {
                layers: vec![SandboxLayer::new("landlock", true, "ABI 6")],
            }),
        };
        let json = serde_json::to_value(&body).unwrap();
        assert_eq!(json["seq"], 7);
        assert_eq!(json["sandbox"]["layers"][0]["name"], "landlock");
        // What an operator that does not know the sandbox reads, and the way back.
        let plain: ProgressReport = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(plain, body.report);
        assert_eq!(serde_json::from_value::<ProgressBody>(json).unwrap(), body);
        let old = serde_json::to_value(&body.report).unwrap();
        assert_eq!(
            serde_json::from_value::<ProgressBody>(old).unwrap().sandbox,
            None
        );
    }

    #[test]
    fn memory_operations_are_tagged_by_op() {
        let op = MemoryOperation::Add {
            content: "Prefers Rust".into(),
            category: FactCategory::Preference,
            confidence: 0.9,
        };
        let json = serde_json::to_value(&op).unwrap();
        assert_eq!(json["op"], "add");
        assert_eq!(serde_json::from_value::<MemoryOperation>(json).unwrap(), op);
    }

    #[test]
    fn a_child_request_without_claims_reads_and_writes_none() {
        let json = serde_json::json!({"attempt": 1, "toolCallId": "call_1", "description": "d",
            "prompt": "p", "subagentType": "bash"});
        let request: ChildRequest = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(
            (
                request.model_calls_left,
                request.tokens_left,
                request.seconds_left
            ),
            (None, None, None)
        );
        assert_eq!(serde_json::to_value(&request).unwrap(), json);
        let claimed = ChildRequest {
            model_calls_left: Some(7),
            tokens_left: Some(1000),
            seconds_left: Some(60),
            ..request
        };
        let out = serde_json::to_value(&claimed).unwrap();
        assert_eq!(
            (
                &out["modelCallsLeft"],
                &out["tokensLeft"],
                &out["secondsLeft"]
            ),
            (
                &serde_json::json!(7),
                &serde_json::json!(1000),
                &serde_json::json!(60)
            )
        );
    }

    #[test]
    fn an_answer_poll_carries_the_time_left_and_reads_without_it() {
        let poll: AnswerPoll = serde_json::from_value(serde_json::json!({"future": 1})).unwrap();
        assert_eq!(
            poll,
            AnswerPoll {
                answer: None,
                seconds_left: None
            },
            "unknown fields are accepted"
        );
        let left = AnswerPoll {
            answer: None,
            seconds_left: Some(42),
        };
        assert_eq!(
            serde_json::to_value(&left).unwrap(),
            serde_json::json!({"secondsLeft": 42})
        );
    }

    #[test]
    fn a_child_file_ref_reads_the_route_parameters() {
        let file: ChildFileRef =
            serde_json::from_value(serde_json::json!({"toolCallId": "call_1", "n": 2})).unwrap();
        assert_eq!(
            file,
            ChildFileRef {
                tool_call_id: "call_1".into(),
                n: 2
            }
        );
    }

    #[test]
    fn result_report_uses_camel_case() {
        let report = ResultReport {
            attempt: 1,
            seq: 3,
            stop_reason: StopReason::Completed,
            text: "done".into(),
            title: None,
            todos: vec![],
            usage: Usage::default(),
            files: vec![],
            error: None,
        };
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["stopReason"], "completed");
        assert!(json.get("files").is_none());
    }
}
