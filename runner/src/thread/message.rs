//! Conversation messages, in a provider-neutral shape that checkpoints and resumes exactly.

use std::sync::Arc;

use herd_crds::report::Usage;
use serde::{Deserialize, Serialize};

use super::message_kind::MessageKind;

/// One message of a thread.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum Message {
    /// Instructions from the framework (the system prompt lives outside the thread).
    System(SystemMessage),
    /// Text from the user, or hidden context the framework adds on the user's side.
    User(UserMessage),
    /// A model turn: text, reasoning and tool calls.
    Assistant(AssistantMessage),
    /// The result of one tool call.
    Tool(ToolMessage),
}

/// Framework bookkeeping on a message; never sent to a model.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct MessageMeta {
    /// Hidden from progress displays (reminders, injected context).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hidden: bool,
    /// What added the message; `None` for the user's and the model's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<MessageKind>,
    /// Further annotations (read marks, subagent status...).
    #[serde(default, skip_serializing_if = "Extra::is_empty")]
    pub extra: Extra,
}

/// A message's annotations, shared between copies of the message: every model request is
/// built from a copy of the thread, and copying each message's annotation map was a large
/// part of the loop's cost per call. Changing one copy's annotations copies that map only.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(transparent)]
pub struct Extra(Arc<serde_json::Map<String, serde_json::Value>>);

impl Extra {
    /// Whether there are no annotations.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Sets `key`, returning the value it replaced.
    pub fn insert(&mut self, key: String, value: serde_json::Value) -> Option<serde_json::Value> {
        Arc::make_mut(&mut self.0).insert(key, value)
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<serde_json::Value> {
        if !self.0.contains_key(key) {
            return None;
        }
        Arc::make_mut(&mut self.0).remove(key)
    }
}

impl std::ops::Deref for Extra {
    type Target = serde_json::Map<String, serde_json::Value>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl From<serde_json::Map<String, serde_json::Value>> for Extra {
    fn from(map: serde_json::Map<String, serde_json::Value>) -> Self {
        Extra(Arc::new(map))
    }
}

/// A system message inside the thread (date reminders and the like).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct SystemMessage {
    pub id: String,
    pub content: String,
    #[serde(default)]
    pub meta: MessageMeta,
}

/// An image attached to a user message (base64, with its MIME type).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ImagePart {
    pub mime_type: String,
    pub data_base64: String,
}

/// A user message.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct UserMessage {
    pub id: String,
    pub content: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ImagePart>,
    #[serde(default)]
    pub meta: MessageMeta,
}

/// One tool call requested by the model.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as the model sent them: JSON text, possibly invalid.
    pub arguments: String,
}

impl ToolCall {
    /// Parses the arguments; an empty string counts as `{}`.
    pub fn parse_arguments(&self) -> Result<serde_json::Value, serde_json::Error> {
        if self.arguments.trim().is_empty() {
            return Ok(serde_json::Value::Object(serde_json::Map::new()));
        }
        serde_json::from_str(&self.arguments)
    }
}

/// Why the model stopped generating, normalized across providers.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    Stop,
    Length,
    ToolCalls,
    ContentFilter,
    Refusal,
    Other(String),
}

/// A model turn.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct AssistantMessage {
    pub id: String,
    pub content: String,
    /// Reasoning text (`reasoning_content`, Anthropic thinking), kept for display only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// Opaque provider data that must be sent back verbatim (Anthropic thinking signatures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_signature: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<FinishReason>,
    /// Provider-reported usage of the call that produced this message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    #[serde(default)]
    pub meta: MessageMeta,
}

/// Whether a tool call succeeded.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    #[default]
    Success,
    Error,
}

/// The result of one tool call.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ToolMessage {
    pub id: String,
    pub tool_call_id: String,
    pub name: String,
    pub content: String,
    #[serde(default)]
    pub status: ToolStatus,
    #[serde(default)]
    pub meta: MessageMeta,
}

impl Message {
    /// The message's id.
    pub fn id(&self) -> &str {
        match self {
            Message::System(m) => &m.id,
            Message::User(m) => &m.id,
            Message::Assistant(m) => &m.id,
            Message::Tool(m) => &m.id,
        }
    }

    /// The message's bookkeeping.
    pub fn meta(&self) -> &MessageMeta {
        match self {
            Message::System(m) => &m.meta,
            Message::User(m) => &m.meta,
            Message::Assistant(m) => &m.meta,
            Message::Tool(m) => &m.meta,
        }
    }

    /// The message's text content.
    pub fn text(&self) -> &str {
        match self {
            Message::System(m) => &m.content,
            Message::User(m) => &m.content,
            Message::Assistant(m) => &m.content,
            Message::Tool(m) => &m.content,
        }
    }

    /// A visible user message.
    pub fn user(id: impl Into<String>, content: impl Into<String>) -> Self {
        Message::User(UserMessage {
            id: id.into(),
            content: content.into(),
            images: Vec::new(),
            meta: MessageMeta::default(),
        })
    }

    /// A user-side message hidden from displays, tagged with what added it.
    pub fn hidden_user(
        id: impl Into<String>,
        kind: MessageKind,
        content: impl Into<String>,
    ) -> Self {
        Message::User(UserMessage {
            id: id.into(),
            content: content.into(),
            images: Vec::new(),
            meta: MessageMeta {
                hidden: true,
                kind: Some(kind),
                extra: Extra::default(),
            },
        })
    }

    /// A system message tagged with what added it.
    pub fn system(id: impl Into<String>, kind: MessageKind, content: impl Into<String>) -> Self {
        Message::System(SystemMessage {
            id: id.into(),
            content: content.into(),
            meta: MessageMeta {
                hidden: true,
                kind: Some(kind),
                extra: Extra::default(),
            },
        })
    }

    /// A tool result.
    pub fn tool(call: &ToolCall, status: ToolStatus, content: impl Into<String>) -> Self {
        Message::Tool(ToolMessage {
            id: format!("tool:{}", call.id),
            tool_call_id: call.id.clone(),
            name: call.name.clone(),
            content: content.into(),
            status,
            meta: MessageMeta::default(),
        })
    }

    /// The assistant message, if this is one.
    pub fn as_assistant(&self) -> Option<&AssistantMessage> {
        match self {
            Message::Assistant(m) => Some(m),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_through_json() {
        let messages = vec![
            Message::user("u1", "hello"),
            Message::Assistant(AssistantMessage {
                id: "a1".into(),
                content: String::new(),
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "ls".into(),
                    arguments: "{\"path\":\"/mnt/user-data\"}".into(),
                }],
                finish_reason: Some(FinishReason::ToolCalls),
                ..Default::default()
            }),
            Message::tool(
                &ToolCall {
                    id: "c1".into(),
                    name: "ls".into(),
                    arguments: String::new(),
                },
                ToolStatus::Error,
                "boom",
            ),
            Message::system("s1", MessageKind::DynamicContext, "<system-reminder/>"),
        ];
        let json = serde_json::to_string(&messages).unwrap();
        let back: Vec<Message> = serde_json::from_str(&json).unwrap();
        assert_eq!(messages, back);
    }

    #[test]
    fn empty_arguments_parse_as_an_empty_object() {
        let call = ToolCall {
            id: "c".into(),
            name: "ls".into(),
            arguments: " ".into(),
        };
        assert_eq!(call.parse_arguments().unwrap(), serde_json::json!({}));
        let bad = ToolCall {
            arguments: "{oops".into(),
            ..call
        };
        assert!(bad.parse_arguments().is_err());
    }
}
