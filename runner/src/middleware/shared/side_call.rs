//! One model call outside the agent loop (title, summary, memory update): a system text and
//! one hidden prompt, no tools, nothing streamed to the display.
//!
//! Each side call is bounded on its own, whatever the run's model settings: an output cap
//! (`max_tokens`) and a timeout, so a small local model that rambles cannot hold the run for
//! minutes. Observers see a `SideCall` event when it starts, so progress names what the run
//! waits for; a failure is the caller's warning, never the run's error.

use std::sync::Arc;
use std::time::Duration;

use opentelemetry::context::FutureExt as _;

use crate::agent::{AgentEvent, Observer, SideCallKind};
use crate::model::{
    CallContext, CallOptions, ChatModel, ModelError, ModelErrorKind, ModelRequest, StreamDelta,
};
use crate::telemetry::Telemetry;
use crate::thread::{AssistantMessage, Message, MessageKind};

/// Output cap of the title call: a title is at most six words.
pub const TITLE_MAX_TOKENS: u32 = 32;
/// Output cap of the memory and summary calls without a context window (and without the
/// Agent's `memory.maxTokens` / `summarization.maxTokens`).
pub const DEFAULT_MAX_TOKENS: u32 = 1024;
/// With a context window, the memory and summary calls may write this share of it (1/8):
/// the prompt half and the main answer's quarter stay untouched.
pub const WINDOW_DIVISOR: u32 = 8;
/// Time allowed to the title call: a few tokens after a short prompt.
pub const TITLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Time allowed to the memory and summary calls: a long prompt to read and up to
/// [`DEFAULT_MAX_TOKENS`] or so to write.
pub const LONG_TIMEOUT: Duration = Duration::from_secs(120);

/// The memory or summary call's output cap: the Agent's setting when there is one, else an
/// eighth of the context window (else [`DEFAULT_MAX_TOKENS`]), never above the model's own
/// `maxTokens` (a limit the Agent chose for every call) unless the Agent says so.
pub fn long_max_tokens(
    configured: Option<u32>,
    context_window: Option<u32>,
    model_max_tokens: Option<u32>,
) -> u32 {
    if let Some(configured) = configured {
        return configured.max(1);
    }
    let derived = context_window.map_or(DEFAULT_MAX_TOKENS, |window| {
        (window / WINDOW_DIVISOR).max(1)
    });
    model_max_tokens.map_or(derived, |limit| derived.min(limit.max(1)))
}

/// A bounded side call for one agent of the run.
#[derive(Clone)]
pub struct SideCall {
    kind: SideCallKind,
    agent: String,
    observer: Arc<dyn Observer>,
    max_tokens: u32,
    timeout: Duration,
}

impl SideCall {
    /// A `kind` call of `agent` (`lead`, or a subagent's name), reported to `observer`, with
    /// the kind's default cap and timeout.
    pub fn new(kind: SideCallKind, agent: impl Into<String>, observer: Arc<dyn Observer>) -> Self {
        let (max_tokens, timeout) = match kind {
            SideCallKind::Title => (TITLE_MAX_TOKENS, TITLE_TIMEOUT),
            SideCallKind::Memory | SideCallKind::Summary => (DEFAULT_MAX_TOKENS, LONG_TIMEOUT),
        };
        SideCall {
            kind,
            agent: agent.into(),
            observer,
            max_tokens,
            timeout,
        }
    }

    /// This call with another output cap (at least 1).
    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = max_tokens.max(1);
        self
    }

    /// This call with another timeout (tests that wait in real time).
    #[cfg(test)]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sends `prompt` (a hidden user message tagged `kind`) under `system` for `context`,
    /// capped at [`Self::max_tokens`]; a call still running after the timeout is dropped
    /// (which closes its connection) and answers a `Timeout` error.
    pub async fn send(
        &self,
        model: &dyn ChatModel,
        system: &str,
        kind: MessageKind,
        prompt: String,
        context: CallContext,
    ) -> Result<AssistantMessage, ModelError> {
        let request = ModelRequest {
            system: system.to_owned(),
            messages: vec![Message::hidden_user(
                format!("{}:request", kind.as_str()),
                kind,
                prompt,
            )],
            tools: Default::default(),
            options: CallOptions {
                max_tokens: Some(self.max_tokens),
                ..CallOptions::default()
            },
            context,
        };
        self.observer.on_event(AgentEvent::SideCall {
            agent: self.agent.clone(),
            call: self.kind,
        });
        // A `chat` span like the loop's calls, never with content: side calls carry the
        // thread's text (a summary's input, memory facts).
        let span =
            Telemetry::global(false).model_call_span(model.provider(), model.name(), &request);
        let call =
            tokio::time::timeout(self.timeout, model.complete(&request, &|_: StreamDelta| {}));
        let answer = match call.with_context(span.context()).await {
            Ok(answer) => answer,
            Err(_) => Err(ModelError::new(
                ModelErrorKind::Timeout,
                format!("no answer within {} s", self.timeout.as_secs_f64()),
            )),
        };
        span.finish(&answer, model.name());
        answer
    }

    /// Tells the user what went wrong (a warning event) and logs it; the run goes on.
    pub fn warn(&self, message: String) {
        tracing::warn!(call = self.kind.name(), %message, "side call failed");
        self.observer.on_event(AgentEvent::Warning {
            agent: self.agent.clone(),
            message,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_doubles::{QueuedModel, RecordingObserver, text};

    #[test]
    fn long_caps_follow_the_setting_then_the_window_then_the_model() {
        assert_eq!(long_max_tokens(None, None, None), DEFAULT_MAX_TOKENS);
        assert_eq!(long_max_tokens(None, Some(4096), None), 512);
        assert_eq!(long_max_tokens(None, Some(4096), Some(300)), 300);
        assert_eq!(
            long_max_tokens(None, None, Some(100_000)),
            DEFAULT_MAX_TOKENS
        );
        assert_eq!(long_max_tokens(Some(2000), Some(4096), Some(300)), 2000);
        assert_eq!(long_max_tokens(None, Some(4), None), 1);
    }

    #[tokio::test]
    async fn a_side_call_is_capped_and_announced() {
        let model = QueuedModel::new(vec![text("Hello")]);
        let observer = Arc::new(RecordingObserver::default());
        let call = SideCall::new(SideCallKind::Title, "lead", observer.clone());
        let answer = call
            .send(
                model.as_ref(),
                "",
                MessageKind::TitleRequest,
                "name it".into(),
                CallContext::default(),
            )
            .await
            .unwrap();
        assert_eq!(answer.content, "Hello");
        assert_eq!(
            model.requests()[0].options.max_tokens,
            Some(TITLE_MAX_TOKENS)
        );
        assert_eq!(
            observer.events(),
            vec![AgentEvent::SideCall {
                agent: "lead".into(),
                call: SideCallKind::Title
            }]
        );
    }
}
