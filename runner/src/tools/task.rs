//! `task`: delegates a self-contained piece of work to a subagent (a child Run in a cluster).

use async_trait::async_trait;
use herd_crds::report::StopReason;
use herd_crds::wire::{ChildOutcome, ChildRequest, ChildStatus};
use herd_sandbox::truncation::head_tail;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{ToolContext, ToolOutput, TypedTool};
use crate::thread::state::{Delegation, DelegationStatus};

/// The built-in subagent types.
#[derive(Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SubagentType {
    /// Research, analysis and multi-step work with all the parent's tools but `task`.
    #[serde(rename = "general-purpose")]
    GeneralPurpose,
    /// Command-line work: bash and file tools only.
    #[serde(rename = "bash")]
    Bash,
}

impl SubagentType {
    /// The type a child Run's `subagentType` or a `task` request names.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "general-purpose" => Some(SubagentType::GeneralPurpose),
            "bash" => Some(SubagentType::Bash),
            _ => None,
        }
    }

    /// The name used in manifests and child Runs.
    pub fn as_str(self) -> &'static str {
        match self {
            SubagentType::GeneralPurpose => "general-purpose",
            SubagentType::Bash => "bash",
        }
    }
}

/// Arguments of `task`.
#[derive(Deserialize, JsonSchema)]
pub struct TaskArgs {
    /// A 3-5 word label for the task.
    pub description: String,
    /// Goal, context and expected output: the subagent sees nothing else.
    pub prompt: String,
    /// Which subagent to use.
    pub subagent_type: SubagentType,
}

/// The `task` tool.
pub struct Task;

/// Longest excerpt of a result kept in the delegation ledger.
const BRIEF_CHARS: usize = 2000;

/// Formats a child's outcome for the model, as DeerFlow's `task` does.
pub fn render_outcome(outcome: &ChildOutcome) -> String {
    match outcome.status {
        Some(ChildStatus::Completed) => {
            let capped = match outcome.stop_reason {
                Some(StopReason::TokenBudgetExceeded) => Some("token budget"),
                Some(StopReason::ModelCallLimit) => Some("turn budget"),
                Some(StopReason::LoopDetected) => Some("repeated tool-call loop"),
                _ => None,
            };
            match capped {
                Some(cap) => format!("Task Succeeded (capped: {cap}). Result: {}", outcome.result),
                None => format!("Task Succeeded. Result: {}", outcome.result),
            }
        }
        Some(ChildStatus::TimedOut) => format!(
            "Task timed out. {}Partial result: {}",
            error_sentence(outcome),
            outcome.result
        ),
        Some(ChildStatus::Cancelled) => "Task was cancelled.".to_owned(),
        Some(ChildStatus::Failed) | None => {
            format!("Task failed. {}", error_sentence(outcome))
        }
    }
}

fn error_sentence(outcome: &ChildOutcome) -> String {
    outcome
        .error
        .as_deref()
        .map(|e| format!("Error: {e}. "))
        .unwrap_or_default()
}

/// A child without a status (the wait ended before it did) counts as failed here.
fn delegation_status(status: Option<ChildStatus>) -> DelegationStatus {
    status.map_or(DelegationStatus::Failed, DelegationStatus::from)
}

/// Head and tail of a long text.
pub fn brief(text: &str, max_chars: usize) -> String {
    head_tail(text, max_chars * 2 / 3, max_chars / 3)
}

#[async_trait]
impl TypedTool for Task {
    const NAME: &'static str = "task";
    // When to delegate is in the system prompt's `<subagent_system>`.
    const DESCRIPTION: &'static str = "Run a subagent on a sub-task and return its result.";
    type Args = TaskArgs;

    async fn run(&self, args: TaskArgs, ctx: &ToolContext) -> ToolOutput {
        let request = ChildRequest {
            attempt: ctx.attempt,
            tool_call_id: ctx.call_id.clone(),
            description: args.description.clone(),
            prompt: args.prompt,
            subagent_type: args.subagent_type.as_str().to_owned(),
            model_calls_left: None,
            tokens_left: None,
            seconds_left: None,
        };
        let mut child_usage = None;
        let (content, status, ok) = match ctx.control.run_child(request, ctx.budget).await {
            Ok(outcome) => {
                let ok = outcome.status == Some(ChildStatus::Completed);
                child_usage = Some(outcome.usage.totals_with_children());
                (
                    render_outcome(&outcome),
                    delegation_status(outcome.status),
                    ok,
                )
            }
            Err(error) => (
                format!("Task failed. Error: {error}."),
                DelegationStatus::Failed,
                false,
            ),
        };
        let mut output = if ok {
            ToolOutput::ok(content.clone())
        } else {
            ToolOutput::error(content.clone())
        };
        output.effect.child_usage = child_usage;
        output.effect.delegation = Some(Delegation {
            id: ctx.call_id.clone(),
            description: args.description,
            subagent_type: args.subagent_type.as_str().to_owned(),
            status,
            result_brief: Some(brief(&content, BRIEF_CHARS)),
        });
        output
            .meta
            .insert("subagent_status".into(), serde_json::json!(status));
        output
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herd_crds::report::Usage;

    fn outcome(status: Option<ChildStatus>, stop: Option<StopReason>) -> ChildOutcome {
        ChildOutcome {
            name: "child".into(),
            status,
            stop_reason: stop,
            result: "42".into(),
            error: Some("boom".into()),
            usage: Usage::default(),
            artifacts: vec![],
        }
    }

    #[test]
    fn renders_each_outcome() {
        assert_eq!(
            render_outcome(&outcome(
                Some(ChildStatus::Completed),
                Some(StopReason::Completed)
            )),
            "Task Succeeded. Result: 42"
        );
        assert_eq!(
            render_outcome(&outcome(
                Some(ChildStatus::Completed),
                Some(StopReason::LoopDetected)
            )),
            "Task Succeeded (capped: repeated tool-call loop). Result: 42"
        );
        assert_eq!(
            render_outcome(&outcome(Some(ChildStatus::Failed), None)),
            "Task failed. Error: boom. "
        );
        assert!(render_outcome(&outcome(Some(ChildStatus::TimedOut), None)).contains("timed out"));
    }

    #[test]
    fn brief_keeps_head_and_tail() {
        let text = "a".repeat(100) + &"z".repeat(100);
        let short = brief(&text, 30);
        assert_eq!(
            short,
            format!(
                "{}\n[… 170 characters omitted …]\n{}",
                "a".repeat(20),
                "z".repeat(10)
            )
        );
        assert_eq!(brief("short", 30), "short");
    }
}
