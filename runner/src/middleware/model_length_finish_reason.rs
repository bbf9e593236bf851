//! ModelLengthFinishReason (after_model): a final answer the provider cut at its output limit
//! ends the run as `StopReason::ModelLengthLimit`, so callers know it may be incomplete. The
//! text itself is kept as it is.
//!
//! Chain position (DeerFlow #34): after TerminalResponse, before SafetyFinishReason.
//! `after_model` runs in reverse chain order, so the safety guard settles its reason first
//! (a blocked answer is a safety stop, not a length stop), and TerminalResponse, which runs
//! next, leaves length-cut answers alone.

use async_trait::async_trait;
use herd_crds::report::StopReason;

use crate::agent::{Flow, Middleware};
use crate::thread::{FinishReason, ThreadState};

use super::shared::last_turn::{last_assistant, settle_stop_reason};

/// Ends the run as `ModelLengthLimit` when the final answer was cut at the model's output
/// limit; it has no settings.
#[derive(Default)]
pub struct ModelLengthFinishReason;

impl ModelLengthFinishReason {
    /// The guard (the same as `default()`).
    pub fn new() -> Self {
        ModelLengthFinishReason
    }
}

#[async_trait]
impl Middleware for ModelLengthFinishReason {
    fn name(&self) -> &'static str {
        "ModelLengthFinishReason"
    }

    async fn after_model(&self, state: &mut ThreadState) -> Flow {
        let capped = last_assistant(state).is_some_and(|message| {
            message.finish_reason == Some(FinishReason::Length)
                && message.tool_calls.is_empty()
                && !message.content.trim().is_empty()
        });
        if capped {
            tracing::warn!("the final answer was cut at the model's output limit");
            settle_stop_reason(state, StopReason::ModelLengthLimit);
        }
        Flow::Continue
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::test_doubles::{self, QueuedModel, calls, text};
    use crate::thread::{AssistantMessage, Message};

    fn cut(message: AssistantMessage) -> AssistantMessage {
        AssistantMessage {
            finish_reason: Some(FinishReason::Length),
            ..message
        }
    }

    #[tokio::test]
    async fn a_cut_final_answer_ends_as_length_limited_and_unchanged() {
        let model = QueuedModel::new(vec![cut(text("half an ans"))]);
        let (agent, env) =
            test_doubles::middleware_agent(model, Arc::new(ModelLengthFinishReason::new()));
        let outcome = agent.run(&mut ThreadState::new("t"), &env).await.unwrap();
        assert_eq!(outcome.stop_reason, StopReason::ModelLengthLimit);
        assert_eq!(outcome.answer, "half an ans");
    }

    #[tokio::test]
    async fn other_answers_are_not_length_limited() {
        let cases = [
            text("complete"),
            cut(text("  ")),
            cut(calls(&[("ls", json!({}))])),
        ];
        for answer in cases {
            let mut state = ThreadState::new("t");
            state.messages.push(Message::Assistant(answer.clone()));
            ModelLengthFinishReason::new().after_model(&mut state).await;
            assert_eq!(state.stop_reason, None, "{answer:?}");
        }
    }
}
