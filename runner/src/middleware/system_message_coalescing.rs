//! SystemMessageCoalescing: the request carries exactly one system message, at the start.
//! vLLM, SGLang, Qwen's templates and Anthropic reject or mangle system messages in the middle
//! of a conversation (DeerFlow #3707), and a thread can hold some (date reminders). Their text
//! joins the system prompt, in order.
//!
//! Per request only: the thread keeps its messages where they were.

use async_trait::async_trait;

use crate::agent::Middleware;
use crate::model::ModelRequest;
use crate::thread::{Message, ThreadState};

/// Between the system prompt and each merged message.
pub const SEPARATOR: &str = "\n\n";

/// Merges every system message of a request into its system prompt.
#[derive(Debug, Default)]
pub struct SystemMessageCoalescing;

impl SystemMessageCoalescing {
    /// The middleware; it needs no settings.
    pub fn new() -> Self {
        SystemMessageCoalescing
    }
}

/// Moves the text of `request`'s system messages into its system prompt.
pub fn coalesce(request: &mut ModelRequest) {
    if !request
        .messages
        .iter()
        .any(|m| matches!(m, Message::System(_)))
    {
        return;
    }
    let messages = std::mem::take(&mut request.messages);
    for message in messages {
        match message {
            Message::System(system) => {
                if system.content.trim().is_empty() {
                    continue;
                }
                if !request.system.is_empty() {
                    request.system.push_str(SEPARATOR);
                }
                request.system.push_str(&system.content);
            }
            other => request.messages.push(other),
        }
    }
}

#[async_trait]
impl Middleware for SystemMessageCoalescing {
    fn name(&self) -> &'static str {
        "SystemMessageCoalescing"
    }

    fn rewrite_request(&self, _state: &ThreadState, request: &mut ModelRequest) {
        coalesce(request);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::test_doubles::{self, QueuedModel, text};
    use crate::thread::MessageKind;

    #[test]
    fn system_messages_join_the_prompt_in_order() {
        let mut request = ModelRequest {
            system: "You are Herd.".into(),
            messages: vec![
                Message::system(
                    "s1",
                    MessageKind::DynamicContext,
                    "<system-reminder>Monday</system-reminder>",
                ),
                Message::user("u1", "hi"),
                Message::system("s2", MessageKind::DynamicContext, "  "),
                Message::system(
                    "s3",
                    MessageKind::DynamicContext,
                    "<system-reminder>Tuesday</system-reminder>",
                ),
                Message::user("u2", "again"),
            ],
            ..ModelRequest::default()
        };
        coalesce(&mut request);
        assert_eq!(
            request.system,
            "You are Herd.\n\n<system-reminder>Monday</system-reminder>\n\n\
             <system-reminder>Tuesday</system-reminder>"
        );
        let ids: Vec<&str> = request.messages.iter().map(Message::id).collect();
        assert_eq!(ids, vec!["u1", "u2"]);
    }

    #[test]
    fn an_empty_prompt_takes_the_first_message_as_is() {
        let mut request = ModelRequest {
            messages: vec![
                Message::system("s", MessageKind::DynamicContext, "only"),
                Message::user("u", "x"),
            ],
            ..ModelRequest::default()
        };
        coalesce(&mut request);
        assert_eq!(request.system, "only");
    }

    #[tokio::test]
    async fn the_model_sees_no_system_message_and_the_thread_keeps_it() {
        let model = QueuedModel::new(vec![text("ok")]);
        let (agent, env) =
            test_doubles::middleware_agent(model.clone(), Arc::new(SystemMessageCoalescing::new()));
        let mut state = ThreadState::new("hi");
        state.messages.insert(
            0,
            Message::system("s", MessageKind::DynamicContext, "Today is Monday."),
        );
        agent.run(&mut state, &env).await.unwrap();
        let request = &model.requests()[0];
        assert_eq!(request.system, "You are a test agent.\n\nToday is Monday.");
        assert!(
            request
                .messages
                .iter()
                .all(|m| !matches!(m, Message::System(_)))
        );
        assert!(matches!(state.messages[0], Message::System(_)));
    }
}
