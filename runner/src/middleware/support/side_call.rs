//! One model call outside the agent loop (title, summary, memory update): a system text and
//! one hidden prompt, no tools, nothing streamed to the display.

use crate::model::{CallContext, CallOptions, ChatModel, ModelError, ModelRequest, StreamDelta};
use crate::thread::{AssistantMessage, Message, MessageKind};

/// Sends `prompt` (a hidden user message tagged `kind`) under `system` for `context`.
pub async fn side_call(
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
        options: CallOptions::default(),
        context,
    };
    model.complete(&request, &|_: StreamDelta| {}).await
}
