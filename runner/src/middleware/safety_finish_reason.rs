//! SafetyFinishReason (after_model): an answer the provider's safety system stopped
//! (OpenAI-compatible `content_filter`, Anthropic `refusal`, Gemini `SAFETY`, `BLOCKLIST`,
//! `PROHIBITED_CONTENT`, `SPII`, `RECITATION`) ends the run as `StopReason::SafetyStop`.
//! Its tool calls are stripped (a half-generated call must not run, DeerFlow #3028), a blank
//! answer gets an explanation (#4393), and `meta.extra.safety_termination` records what
//! happened.
//!
//! Chain position (DeerFlow #35): last before Clarification. `after_model` runs in reverse
//! chain order, so this sees the answer first: the guards after it (length, terminal
//! response, budget, loop, subagent limit) then see an answer without calls that is not empty,
//! and its stop reason is the one the run reports.

use async_trait::async_trait;
use herd_crds::report::StopReason;
use serde_json::json;

use crate::agent::{Flow, Middleware};
use crate::thread::{FinishReason, ThreadState};

use super::shared::last_turn::{append_note, last_assistant_mut, settle_stop_reason};

/// Provider finish reasons, besides `content_filter` and `refusal`, that mean a safety stop
/// (Gemini's; compared without case).
const SAFETY_FINISH_REASONS: [&str; 5] = [
    "safety",
    "blocklist",
    "prohibited_content",
    "spii",
    "recitation",
];

/// The answer given when the provider stopped before any text.
pub const EXPLANATION: &str = "The model provider's safety system stopped this response before it was complete, so no answer can be given. Rephrase the request or try a different model.";
/// Appended when calls were removed from an answer that had text.
const STRIPPED_NOTE: &str = "[SAFETY STOP] The model provider's safety system stopped this response; its tool calls were not run.";

/// Ends the run as `SafetyStop` when the provider's safety system cut the answer; it has no
/// settings.
#[derive(Default)]
pub struct SafetyFinishReason;

impl SafetyFinishReason {
    /// The guard (the same as `default()`).
    pub fn new() -> Self {
        SafetyFinishReason
    }
}

/// The detector that matched, if the finish reason is a safety stop.
fn detector(reason: &FinishReason) -> Option<String> {
    match reason {
        FinishReason::ContentFilter => Some("content_filter".into()),
        FinishReason::Refusal => Some("refusal".into()),
        FinishReason::Other(other) => {
            let lowered = other.to_ascii_lowercase();
            SAFETY_FINISH_REASONS
                .contains(&lowered.as_str())
                .then_some(lowered)
        }
        FinishReason::Stop | FinishReason::Length | FinishReason::ToolCalls => None,
    }
}

#[async_trait]
impl Middleware for SafetyFinishReason {
    fn name(&self) -> &'static str {
        "SafetyFinishReason"
    }

    async fn after_model(&self, state: &mut ThreadState) -> Flow {
        let Some(message) = last_assistant_mut(state) else {
            return Flow::Continue;
        };
        let Some(matched) = message.finish_reason.as_ref().and_then(detector) else {
            return Flow::Continue;
        };
        let stripped = std::mem::take(&mut message.tool_calls);
        let blank = message.content.trim().is_empty();
        if blank {
            message.content = EXPLANATION.to_owned();
        } else if !stripped.is_empty() {
            append_note(message, STRIPPED_NOTE);
        }
        let names: Vec<&str> = stripped.iter().map(|call| call.name.as_str()).collect();
        message.meta.extra.insert(
            "safety_termination".into(),
            json!({
                "detector": matched,
                "strippedToolCalls": names,
                "contentBackfilled": blank,
            }),
        );
        tracing::warn!(detector = %matched, stripped = stripped.len(), "the provider stopped the answer for safety");
        settle_stop_reason(state, StopReason::SafetyStop);
        Flow::Continue
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::test_doubles::{self, QueuedModel, RecordingControl, calls, text};
    use crate::thread::{AssistantMessage, Message};

    fn stopped(message: AssistantMessage, reason: FinishReason) -> AssistantMessage {
        AssistantMessage {
            finish_reason: Some(reason),
            ..message
        }
    }

    #[tokio::test]
    async fn a_filtered_answer_with_calls_is_stripped_explained_and_stops_the_run() {
        let model = QueuedModel::new(vec![
            stopped(
                calls(&[("bash", json!({"command": "rm -rf /"}))]),
                FinishReason::ContentFilter,
            ),
            text("unreached"),
        ]);
        let (agent, env) =
            test_doubles::middleware_agent(model.clone(), Arc::new(SafetyFinishReason::new()));
        let mut state = ThreadState::new("t");
        let outcome = agent.run(&mut state, &env).await.unwrap();
        assert_eq!(outcome.stop_reason, StopReason::SafetyStop);
        assert_eq!(outcome.answer, EXPLANATION);
        assert_eq!(model.requests().len(), 1);
        let last = state.last_assistant().unwrap();
        assert!(last.tool_calls.is_empty());
        assert_eq!(
            last.meta.extra["safety_termination"],
            json!({"detector": "content_filter", "strippedToolCalls": ["bash"], "contentBackfilled": true})
        );
    }

    #[tokio::test]
    async fn a_refusal_with_text_keeps_the_text() {
        let mut state = ThreadState::new("t");
        state.messages.push(Message::Assistant(stopped(
            text("I can't help with that."),
            FinishReason::Refusal,
        )));
        SafetyFinishReason::new().after_model(&mut state).await;
        assert_eq!(state.stop_reason, Some(StopReason::SafetyStop));
        assert_eq!(
            state.last_assistant().unwrap().content,
            "I can't help with that."
        );
    }

    #[tokio::test]
    async fn gemini_reasons_count_and_ordinary_ones_do_not() {
        for (reason, expected) in [
            (
                FinishReason::Other("SAFETY".into()),
                Some(StopReason::SafetyStop),
            ),
            (
                FinishReason::Other("RECITATION".into()),
                Some(StopReason::SafetyStop),
            ),
            (FinishReason::Other("MALFORMED_FUNCTION_CALL".into()), None),
            (FinishReason::Stop, None),
            (FinishReason::Length, None),
        ] {
            let mut state = ThreadState::new("t");
            state
                .messages
                .push(Message::Assistant(stopped(text("x"), reason.clone())));
            SafetyFinishReason::new().after_model(&mut state).await;
            assert_eq!(state.stop_reason, expected, "{reason:?}");
        }
    }

    #[tokio::test]
    async fn in_chain_order_the_safety_stop_wins_over_the_later_guards() {
        use crate::agent::Middleware;
        use crate::middleware::loop_detection::{LoopDetection, LoopSettings};
        use crate::middleware::subagent_limit::SubagentLimit;
        use crate::middleware::token_budget::TokenBudget;

        let tasks: Vec<(&str, serde_json::Value)> = (0..5)
            .map(|i| ("task", json!({"description": format!("job {i}")})))
            .collect();
        let mut blocked = stopped(calls(&tasks), FinishReason::ContentFilter);
        blocked.usage = text("").usage;
        let model = QueuedModel::new(vec![blocked]);
        // DeerFlow's relative order: SubagentLimit, LoopDetection, TokenBudget, Safety.
        let chain: Vec<Arc<dyn Middleware>> = vec![
            Arc::new(SubagentLimit::new(3, 6)),
            Arc::new(LoopDetection::new(LoopSettings::default())),
            Arc::new(TokenBudget::new(1)),
            Arc::new(SafetyFinishReason::new()),
        ];
        let (agent, env) =
            test_doubles::agent(model, vec![], chain, Arc::new(RecordingControl::default()));
        let outcome = agent.run(&mut ThreadState::new("t"), &env).await.unwrap();
        assert_eq!(outcome.stop_reason, StopReason::SafetyStop);
        assert_eq!(
            outcome.answer, EXPLANATION,
            "no budget or subagent note was added"
        );
    }
}
