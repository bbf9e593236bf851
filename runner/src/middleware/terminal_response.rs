//! TerminalResponse (before_agent, after_model, wrap_model_call): a turn that ran tools must
//! not end in silence.
//!
//! When the model's answer after tool results is empty (no text, no tool calls, not cut by
//! the length limit), the empty message is removed from the thread and the model is asked
//! once more (`Flow::JumpToModel`) with a reminder added to that request only. If the retry is
//! empty too, it becomes DeerFlow's fallback text, marked `error_fallback` in its meta, so the
//! run reports an explanation instead of an empty success.
//!
//! Chain position (DeerFlow #33): after the custom middlewares and TokenBudget, before
//! ModelLengthFinishReason and SafetyFinishReason. `after_model` runs in reverse chain order,
//! so the safety guard runs first (it backfills blocked answers, which are then not empty) and
//! the length guard's case is skipped here; the empty message is removed before LoopDetection,
//! SubagentLimit, Title and UsageAndProgress look at the thread, and those see a thread that ends in
//! tool results. Its `wrap_model_call` must be inside LLMErrorHandling so a retried request
//! keeps the reminder.

use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;

use crate::agent::{Flow, Middleware, ModelCall, ModelNext, ModelResult};
use crate::thread::{AssistantMessage, FinishReason, MessageKind, ThreadState};

use super::shared::last_turn::{last_assistant, last_assistant_mut, turn_used_tools};
use super::shared::reminders::PendingReminders;

/// Sent with the one retry.
pub const REMINDER: &str = "<system_reminder>\nYour previous response after the tool execution was empty. Review the tool results above and reply to the user now with your final answer. Do not leave the response empty.\n</system_reminder>";
/// What an answer that stayed empty becomes.
pub const FALLBACK: &str = "The model completed the tool run but returned no final response, including after one automatic retry. Please try again or use a different model.";

/// Asks the model once more when its answer after tool results is empty.
pub struct TerminalResponse {
    /// A retry was spent on the current empty streak.
    retried: Mutex<bool>,
    pending: PendingReminders,
}

impl Default for TerminalResponse {
    fn default() -> Self {
        TerminalResponse::new()
    }
}

impl TerminalResponse {
    /// The middleware; it has no settings.
    pub fn new() -> Self {
        TerminalResponse {
            retried: Mutex::new(false),
            pending: PendingReminders::new(MessageKind::TerminalResponseReminder, 1),
        }
    }

    fn retried(&self) -> MutexGuard<'_, bool> {
        self.retried.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// No visible text and nothing to call.
fn is_empty_answer(message: &AssistantMessage) -> bool {
    message.content.trim().is_empty() && message.tool_calls.is_empty()
}

#[async_trait]
impl Middleware for TerminalResponse {
    fn name(&self) -> &'static str {
        "TerminalResponse"
    }

    async fn before_agent(&self, _state: &mut ThreadState) -> Flow {
        *self.retried() = false;
        self.pending.clear();
        Flow::Continue
    }

    async fn after_model(&self, state: &mut ThreadState) -> Flow {
        let Some(message) = last_assistant(state) else {
            return Flow::Continue;
        };
        if !is_empty_answer(message) {
            *self.retried() = false;
            return Flow::Continue;
        }
        if message.finish_reason == Some(FinishReason::Length) || !turn_used_tools(state) {
            return Flow::Continue;
        }
        let mut retried = self.retried();
        if !*retried {
            *retried = true;
            tracing::warn!("empty answer after tool results: asking the model once more");
            // The empty message must not be sent again with the retry.
            state.messages.pop();
            self.pending.push(REMINDER.to_owned());
            return Flow::JumpToModel;
        }
        *retried = false;
        drop(retried);
        tracing::warn!("empty answer after a retry: using the fallback text");
        if let Some(message) = last_assistant_mut(state) {
            message.content = FALLBACK.to_owned();
            message
                .meta
                .extra
                .insert("error_fallback".into(), serde_json::Value::Bool(true));
            message.meta.extra.insert(
                "error_reason".into(),
                "the model returned an empty terminal response".into(),
            );
        }
        Flow::Continue
    }

    async fn wrap_model_call(&self, call: ModelCall<'_>, next: ModelNext<'_>) -> ModelResult {
        self.pending.deliver(call, next).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use herd_crds::report::StopReason;
    use serde_json::json;

    use super::*;
    use crate::test_doubles::{self, QueuedModel, RecordingControl, calls, text};
    use crate::thread::Message;
    use crate::tools::write_todos::WriteTodos;

    async fn run_with(answers: Vec<AssistantMessage>) -> (Arc<QueuedModel>, ThreadState, String) {
        let model = QueuedModel::new(answers);
        let (agent, env) = test_doubles::agent(
            model.clone(),
            vec![Arc::new(WriteTodos)],
            vec![Arc::new(TerminalResponse::new())],
            Arc::new(RecordingControl::default()),
        );
        let mut state = ThreadState::new("t");
        let outcome = agent.run(&mut state, &env).await.unwrap();
        assert_eq!(outcome.stop_reason, StopReason::Completed);
        (model, state, outcome.answer)
    }

    fn tool_turn() -> AssistantMessage {
        calls(&[("write_todos", json!({"todos": []}))])
    }

    #[tokio::test]
    async fn an_empty_answer_after_tools_is_retried_once_with_a_reminder() {
        let (model, state, answer) =
            run_with(vec![tool_turn(), text(""), text("here it is")]).await;
        assert_eq!(answer, "here it is");
        let requests = model.requests();
        assert_eq!(requests.len(), 3);
        let retry = &requests[2].messages;
        assert_eq!(retry.last().unwrap().text(), REMINDER);
        assert!(
            matches!(retry[retry.len() - 2], Message::Tool(_)),
            "the empty answer is not sent again"
        );
        let assistants = state
            .messages
            .iter()
            .filter(|m| m.as_assistant().is_some())
            .count();
        assert_eq!(
            assistants, 2,
            "the empty answer was dropped from the thread"
        );
        assert!(!state.messages.iter().any(|m| m.text() == REMINDER));
    }

    #[tokio::test]
    async fn an_answer_that_stays_empty_becomes_the_fallback() {
        let (model, state, answer) = run_with(vec![tool_turn(), text(" "), text("")]).await;
        assert_eq!(answer, FALLBACK);
        assert_eq!(model.requests().len(), 3);
        let last = state.last_assistant().unwrap();
        assert_eq!(last.meta.extra.get("error_fallback"), Some(&json!(true)));
    }

    #[tokio::test]
    async fn an_empty_answer_without_tools_is_not_retried() {
        let (model, _, answer) = run_with(vec![text("")]).await;
        assert_eq!(answer, "");
        assert_eq!(model.requests().len(), 1);
    }

    #[tokio::test]
    async fn a_length_cut_is_not_an_empty_answer() {
        let middleware = TerminalResponse::new();
        let mut state = ThreadState::new("t");
        let call = tool_turn();
        state.messages.push(Message::tool(
            &call.tool_calls[0],
            crate::thread::ToolStatus::Success,
            "ok",
        ));
        let mut cut = text("");
        cut.finish_reason = Some(FinishReason::Length);
        state.messages.push(Message::Assistant(cut));
        assert_eq!(middleware.after_model(&mut state).await, Flow::Continue);
        assert!(middleware.pending.is_empty());
    }
}
