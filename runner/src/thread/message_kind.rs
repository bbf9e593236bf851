//! What added a framework message to the thread (`meta.kind`): the middlewares find their own
//! messages again by it, and displays hide them.

use serde::{Deserialize, Serialize};

/// The framework part that added a message.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum MessageKind {
    /// The date reminder (DynamicContext).
    DynamicContext,
    /// Remembered facts (DynamicContext).
    Memory,
    /// The list of uploaded files (Uploads).
    Uploads,
    /// An image `view_image` loaded.
    ViewImage,
    /// A synthetic result for a call that never got one (DanglingToolCall).
    DanglingToolCall,
    /// The todo list, after it scrolled out of view (Todo).
    TodoReminder,
    /// The per-request nudge to finish the todos (Todo).
    TodoCompletionReminder,
    /// Delegations and skill reads kept across summaries (DurableContext).
    DurableContext,
    /// Why the run stopped before starting (Sandbox).
    SandboxUnavailable,
    /// A `/skill` command's instructions (SkillActivation).
    SlashSkillActivation,
    /// The token budget is running out (TokenBudget).
    BudgetWarning,
    /// The answer must not end in a tool call (TerminalResponse).
    TerminalResponseReminder,
    /// The same tool calls again (LoopDetection).
    LoopWarning,
    /// The single message of a title call.
    TitleRequest,
    /// The single message of a summary call.
    SummaryRequest,
    /// The single message of a memory-update call.
    MemoryUpdate,
    /// A resumed run's files did not survive the pod it asked its question in.
    WorkspaceLost,
    /// A resumed run was interrupted by a signal before (its checkpoint says when).
    Interrupted,
    /// A kind this runner does not know (a checkpoint from another version).
    #[serde(other)]
    Other,
}

impl MessageKind {
    /// The name in checkpoints, e.g. `todo_reminder`.
    pub fn as_str(self) -> &'static str {
        match self {
            MessageKind::DynamicContext => "dynamic_context",
            MessageKind::Memory => "memory",
            MessageKind::Uploads => "uploads",
            MessageKind::ViewImage => "view_image",
            MessageKind::DanglingToolCall => "dangling_tool_call",
            MessageKind::TodoReminder => "todo_reminder",
            MessageKind::TodoCompletionReminder => "todo_completion_reminder",
            MessageKind::DurableContext => "durable_context",
            MessageKind::SandboxUnavailable => "sandbox_unavailable",
            MessageKind::SlashSkillActivation => "slash_skill_activation",
            MessageKind::BudgetWarning => "budget_warning",
            MessageKind::TerminalResponseReminder => "terminal_response_reminder",
            MessageKind::LoopWarning => "loop_warning",
            MessageKind::TitleRequest => "title_request",
            MessageKind::SummaryRequest => "summary_request",
            MessageKind::MemoryUpdate => "memory_update",
            MessageKind::WorkspaceLost => "workspace_lost",
            MessageKind::Interrupted => "interrupted",
            MessageKind::Other => "other",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoints_keep_the_names_and_unknown_kinds_still_load() {
        let all = [
            MessageKind::DynamicContext,
            MessageKind::Memory,
            MessageKind::Uploads,
            MessageKind::ViewImage,
            MessageKind::DanglingToolCall,
            MessageKind::TodoReminder,
            MessageKind::TodoCompletionReminder,
            MessageKind::DurableContext,
            MessageKind::SandboxUnavailable,
            MessageKind::SlashSkillActivation,
            MessageKind::BudgetWarning,
            MessageKind::TerminalResponseReminder,
            MessageKind::LoopWarning,
            MessageKind::TitleRequest,
            MessageKind::SummaryRequest,
            MessageKind::MemoryUpdate,
            MessageKind::WorkspaceLost,
            MessageKind::Interrupted,
            MessageKind::Other,
        ];
        for kind in all {
            let json = serde_json::to_value(kind).unwrap();
            assert_eq!(json, kind.as_str(), "{kind:?}");
            assert_eq!(serde_json::from_value::<MessageKind>(json).unwrap(), kind);
        }
        let unknown: MessageKind = serde_json::from_str("\"from_the_future\"").unwrap();
        assert_eq!(unknown, MessageKind::Other);
    }
}
