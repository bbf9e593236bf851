//! Chat models behind one streaming trait: OpenAI-compatible, Anthropic and scripted.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::thread::{AssistantMessage, Message};

pub(crate) mod anthropic;
mod endpoint;
pub(crate) mod error;
pub(crate) mod http;
mod http_error;
mod ids;
pub mod openai;
mod priced;
pub(crate) mod resolve;
pub mod scripted;
mod sse;
#[cfg(test)]
mod test_support;

pub use error::{ModelError, ModelErrorKind};
pub use priced::record_call;
pub use sse::MAX_EVENT_BYTES;

/// The annotation (`meta.extra`) of an answer naming the model the provider says answered, when
/// it said (`model` of an OpenAI chunk, of Anthropic's `message_start`): the configured name
/// may be an alias of it.
pub const RESPONSE_MODEL: &str = "response_model";

/// The model the provider says answered `message`, if it said.
pub fn response_model(message: &AssistantMessage) -> Option<&str> {
    message
        .meta
        .extra
        .get(RESPONSE_MODEL)
        .and_then(serde_json::Value::as_str)
}

/// Notes on `message` that the provider says `model` answered (nothing for a blank name).
fn note_response_model(message: &mut AssistantMessage, model: Option<String>) {
    if let Some(model) = model.filter(|m| !m.trim().is_empty()) {
        let model: String = model.chars().take(256).collect();
        message
            .meta
            .extra
            .insert(RESPONSE_MODEL.to_owned(), serde_json::Value::String(model));
    }
}

/// Who is calling the model.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[serde(rename_all = "lowercase")]
pub enum AgentRole {
    #[default]
    Lead,
    Subagent,
}

/// What a model call is for.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[serde(rename_all = "lowercase")]
pub enum Purpose {
    /// A step of the agent loop.
    #[default]
    Main,
    /// Generating the thread title.
    Title,
    /// Summarizing compacted messages.
    Summary,
    /// Extracting memory updates after a run.
    Memory,
}

/// Who asks and why; the scripted model matches on it, real providers ignore it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallContext {
    pub role: AgentRole,
    /// The subagent type (`general-purpose`, `bash`) when `role` is `Subagent`.
    pub subagent_type: Option<String>,
    pub purpose: Purpose,
    /// The Run's attempt (1 for the first pod).
    pub attempt: u32,
}

/// A tool as the model sees it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ToolSchema {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: serde_json::Value,
}

/// Sampling options of one call.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CallOptions {
    pub temperature: Option<f64>,
    pub max_tokens: Option<u32>,
    /// Ask for extended thinking / reasoning (only when the model supports it).
    pub thinking: bool,
    /// `low`, `medium` or `high`, for models that take it.
    pub reasoning_effort: Option<String>,
}

impl CallOptions {
    /// These options, with every unset field taken from `defaults` (the model's configured
    /// settings). `thinking` is per call and never defaulted.
    pub fn or_defaults(&self, defaults: &CallOptions) -> CallOptions {
        CallOptions {
            temperature: self.temperature.or(defaults.temperature),
            max_tokens: self.max_tokens.or(defaults.max_tokens),
            thinking: self.thinking,
            reasoning_effort: self
                .reasoning_effort
                .clone()
                .or_else(|| defaults.reasoning_effort.clone()),
        }
    }
}

/// One model request: the system prompt, the thread and the tools.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ModelRequest {
    pub system: String,
    pub messages: Vec<Message>,
    /// Shared with the tool registry: the schemas are the same on every call, so a request
    /// holds them without a deep copy. A middleware narrowing them builds a new list.
    pub tools: Arc<[ToolSchema]>,
    pub options: CallOptions,
    pub context: CallContext,
}

/// A piece of a streaming answer, for live progress displays.
#[derive(Clone, Debug, PartialEq)]
pub enum StreamDelta {
    Text(String),
    Reasoning(String),
    /// A tool call started (its name is known).
    ToolCallStarted {
        index: usize,
        name: String,
    },
}

/// Receives deltas while a response streams in.
pub type DeltaSink<'a> = &'a (dyn Fn(StreamDelta) + Send + Sync);

/// A chat model.
#[async_trait]
pub trait ChatModel: Send + Sync {
    /// The model's name, for logs and reports.
    fn name(&self) -> &str;

    /// The provider as the GenAI conventions name it on spans (`gen_ai.provider.name`).
    fn provider(&self) -> &str {
        "unknown"
    }

    /// What this model's tokens cost, when the Agent's model has `pricing`.
    fn pricing(&self) -> Option<&herd_crds::agent::ModelPricing> {
        None
    }

    /// Sends the request, streams the answer into `on_delta`, and returns the whole message
    /// (tool calls assembled, finish reason and usage set when the provider reports them).
    async fn complete(
        &self,
        request: &ModelRequest,
        on_delta: DeltaSink<'_>,
    ) -> Result<AssistantMessage, ModelError>;
}

/// Settings shared by the HTTP model clients.
#[derive(Clone, Debug, PartialEq)]
pub struct HttpModelConfig {
    /// Model name sent to the provider.
    pub model: String,
    /// Base URL, e.g. `https://api.openai.com/v1` or `http://localhost:8080/v1`.
    pub base_url: String,
    /// API key, if the server needs one.
    pub api_key: Option<String>,
    /// Time allowed for the whole request, streaming included.
    pub request_timeout: Duration,
    /// Longest silence allowed between two stream chunks.
    pub stream_chunk_timeout: Duration,
}
