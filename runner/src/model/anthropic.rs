//! Anthropic Messages API client (`POST /v1/messages`), streaming.
//!
//! Mapping from the provider-neutral thread:
//! - The system prompt goes top-level as the first `system` block, marked cacheable (it and
//!   the tools are the stable prefix); system messages inside the thread follow as further
//!   `system` blocks, because the Messages API has no system role.
//! - Tool results are `tool_result` blocks in a user turn (`is_error` for failures); turns of
//!   the same role are merged, and in a user turn the tool results come first, as the API
//!   requires.
//! - Thinking: with `thinking` asked, the request carries `thinking: {type: enabled,
//!   budget_tokens}` (the budget from `reasoning_effort`: low 2048, medium 8192, high 24576)
//!   and no `temperature` (the API refuses one with thinking). A thinking block's text and
//!   signature come back in `reasoning` / `reasoning_signature` and are sent back on later
//!   turns, which tool use with thinking requires. Only the first thinking block of a turn
//!   is kept: a signature covers exactly one block.
//! - `max_tokens` is required by the API: 4096 when unset (budget + 4096 with thinking), and
//!   always above the thinking budget.

use std::collections::BTreeMap;

use async_trait::async_trait;
use herd_crds::report::Usage;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::endpoint::{Endpoint, EndpointClient};
use super::error::{ModelError, ModelErrorKind};
use super::http::join_url;
use super::http_error::{ErrorDetail, error_from_stream};
use super::ids::random_id;
use super::{
    CallOptions, DeltaSink, HttpModelConfig, ModelRequest, StreamDelta, note_response_model,
};
use crate::thread::{AssistantMessage, FinishReason, Message, ToolCall, ToolStatus, UserMessage};

/// The API version this client speaks.
const API_VERSION: &str = "2023-06-01";
/// `max_tokens` when the model configuration sets none.
const DEFAULT_MAX_TOKENS: u32 = 4096;
/// The smallest thinking budget the API accepts.
const MIN_THINKING_BUDGET: u32 = 1024;

/// An Anthropic Messages endpoint.
pub struct AnthropicModel {
    endpoint: Endpoint,
    defaults: CallOptions,
}

impl AnthropicModel {
    /// A client for `config` (`base_url` like `https://api.anthropic.com`; a trailing `/v1`
    /// is accepted too). Fails only when the HTTP client cannot be set up.
    pub fn new(config: HttpModelConfig) -> Result<Self, ModelError> {
        let base = config.base_url.trim_end_matches('/');
        let url = if base.ends_with("/v1") {
            join_url(base, "messages")
        } else {
            join_url(base, "v1/messages")
        };
        Ok(AnthropicModel {
            endpoint: Endpoint::new(config, url)?,
            defaults: CallOptions::default(),
        })
    }

    /// Sampling settings used when a request leaves them unset (the model's configuration).
    pub fn with_defaults(mut self, defaults: CallOptions) -> Self {
        self.defaults = defaults;
        self
    }
}

#[async_trait]
impl EndpointClient for AnthropicModel {
    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    fn provider(&self) -> &'static str {
        "anthropic"
    }

    fn request_body(&self, request: &ModelRequest) -> Value {
        let options = request.options.or_defaults(&self.defaults);
        let (max_tokens, budget) = token_limits(&options);
        let mut body = Map::new();
        body.insert("model".into(), json!(self.endpoint.config.model));
        body.insert("max_tokens".into(), json!(max_tokens));
        let (system, messages) = wire_messages(&request.system, &request.messages);
        if !system.is_empty() {
            body.insert("system".into(), Value::Array(system));
        }
        body.insert("messages".into(), Value::Array(messages));
        if !request.tools.is_empty() {
            let tools = request
                .tools
                .iter()
                .map(|tool| {
                    json!({
                        "name": tool.name,
                        "description": tool.description,
                        "input_schema": tool.parameters,
                    })
                })
                .collect();
            body.insert("tools".into(), Value::Array(tools));
        }
        match budget {
            Some(budget) => {
                body.insert(
                    "thinking".into(),
                    json!({"type": "enabled", "budget_tokens": budget}),
                );
            }
            None => {
                if let Some(temperature) = options.temperature {
                    body.insert("temperature".into(), json!(temperature));
                }
            }
        }
        body.insert("stream".into(), json!(true));
        Value::Object(body)
    }

    fn headers(&self) -> HeaderMap {
        let mut headers = self
            .endpoint
            .stream_headers(HeaderName::from_static("x-api-key"), str::to_owned);
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(API_VERSION),
        );
        headers
    }

    async fn read_answer(
        &self,
        response: reqwest::Response,
        on_delta: DeltaSink<'_>,
    ) -> Result<AssistantMessage, ModelError> {
        let endpoint = &self.endpoint;
        let server = &endpoint.server;
        let mut answer = Answer::default();
        let apply = |event: StreamEvent| answer.apply(event, server, on_delta);
        endpoint
            .read_events(
                response,
                "an event that is not a message event",
                None,
                apply,
            )
            .await?;
        answer.finish(server)
    }
}

/// `max_tokens` and, with thinking asked, the thinking budget (always below `max_tokens`).
fn token_limits(options: &CallOptions) -> (u32, Option<u32>) {
    if !options.thinking {
        return (options.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS), None);
    }
    let mut budget = match options.reasoning_effort.as_deref() {
        Some("low" | "minimal") => 2048,
        Some("high") => 24576,
        _ => 8192,
    };
    let mut max_tokens = options.max_tokens.unwrap_or(budget + DEFAULT_MAX_TOKENS);
    if max_tokens <= budget {
        budget = (max_tokens / 2).max(MIN_THINKING_BUDGET);
    }
    if max_tokens <= budget {
        max_tokens = budget * 2;
    }
    (max_tokens, Some(budget))
}

/// The `system` blocks and the `messages` of a request.
fn wire_messages(system: &str, messages: &[Message]) -> (Vec<Value>, Vec<Value>) {
    let mut system_blocks = Vec::new();
    if !system.is_empty() {
        system_blocks.push(json!({
            "type": "text", "text": system, "cache_control": {"type": "ephemeral"},
        }));
    }
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in messages {
        let (role, blocks) = match message {
            Message::System(m) => {
                if !m.content.is_empty() {
                    system_blocks.push(json!({"type": "text", "text": m.content}));
                }
                continue;
            }
            Message::User(m) => ("user", user_blocks(m)),
            Message::Assistant(m) => ("assistant", assistant_blocks(m)),
            Message::Tool(m) => {
                let mut block = json!({"type": "tool_result", "tool_use_id": m.tool_call_id});
                if !m.content.is_empty() {
                    block["content"] = json!(m.content);
                }
                if m.status == ToolStatus::Error {
                    block["is_error"] = json!(true);
                }
                ("user", vec![block])
            }
        };
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last_role, last_blocks)) if *last_role == role => last_blocks.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    let messages = turns
        .into_iter()
        .map(|(role, mut blocks)| {
            if role == "user" {
                // Stable: tool results keep their order, other blocks theirs.
                blocks.sort_by_key(|block| block["type"] != "tool_result");
            }
            json!({"role": role, "content": blocks})
        })
        .collect();
    (system_blocks, messages)
}

/// The content blocks of a user message: its images, then its text.
fn user_blocks(m: &UserMessage) -> Vec<Value> {
    let mut blocks: Vec<Value> = m
        .images
        .iter()
        .map(|image| {
            json!({"type": "image", "source": {
                "type": "base64", "media_type": image.mime_type,
                "data": image.data_base64,
            }})
        })
        .collect();
    // The API refuses empty text blocks.
    if !m.content.is_empty() {
        blocks.push(json!({"type": "text", "text": m.content}));
    }
    blocks
}

/// The content blocks of an answer: its signed thinking, its text, then its tool calls.
fn assistant_blocks(m: &AssistantMessage) -> Vec<Value> {
    let mut blocks = Vec::new();
    if let Some(signature) = &m.reasoning_signature {
        blocks.push(json!({
            "type": "thinking",
            "thinking": m.reasoning.as_deref().unwrap_or_default(),
            "signature": signature,
        }));
    }
    if !m.content.is_empty() {
        blocks.push(json!({"type": "text", "text": m.content}));
    }
    for call in &m.tool_calls {
        // `input` must be an object; arguments the model garbled go back empty
        // (the tool result already told the model what was wrong).
        let input = call
            .parse_arguments()
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({}));
        blocks.push(json!({
            "type": "tool_use", "id": call.id, "name": call.name, "input": input,
        }));
    }
    blocks
}

/// One event of the stream (the `type` field of its data).
#[derive(Deserialize, Debug)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StreamEvent {
    MessageStart {
        message: StartMessage,
    },
    ContentBlockStart {
        index: usize,
        content_block: BlockStart,
    },
    ContentBlockDelta {
        index: usize,
        delta: BlockDelta,
    },
    MessageDelta {
        #[serde(default)]
        delta: MessageDeltaBody,
        #[serde(default)]
        usage: Option<WireUsage>,
    },
    MessageStop,
    Error {
        error: Value,
    },
    /// `content_block_stop`, `ping` and event types added later.
    #[serde(other)]
    Other,
}

#[derive(Deserialize, Debug, Default)]
struct StartMessage {
    #[serde(default)]
    id: Option<String>,
    /// The model that answered.
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize, Debug)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BlockStart {
    Text {
        #[serde(default)]
        text: String,
    },
    /// `id` and `name` may be missing from a broken server's block: the call then gets an id
    /// here and an error result from the loop, instead of failing the answer.
    ToolUse {
        #[serde(default)]
        id: String,
        #[serde(default)]
        name: String,
        #[serde(default)]
        input: Option<Value>,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
        #[serde(default)]
        signature: Option<String>,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize, Debug)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BlockDelta {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    ThinkingDelta {
        thinking: String,
    },
    SignatureDelta {
        signature: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize, Debug, Default)]
struct MessageDeltaBody {
    #[serde(default)]
    stop_reason: Option<String>,
}

/// Token counts; `message_start` has them all, `message_delta` the cumulative output.
#[derive(Deserialize, Debug, Default, Clone, Copy)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
}

impl WireUsage {
    /// Fields present in `later` replace ours.
    fn update(&mut self, later: WireUsage) {
        self.input_tokens = later.input_tokens.or(self.input_tokens);
        self.output_tokens = later.output_tokens.or(self.output_tokens);
        self.cache_creation_input_tokens = later
            .cache_creation_input_tokens
            .or(self.cache_creation_input_tokens);
        self.cache_read_input_tokens = later
            .cache_read_input_tokens
            .or(self.cache_read_input_tokens);
    }
}

/// A content block being assembled.
#[derive(Debug)]
enum Block {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        json: String,
        start_input: Option<Value>,
    },
    Thinking {
        text: String,
        signature: String,
    },
    Ignored,
}

/// The answer assembled so far.
#[derive(Debug, Default)]
struct Answer {
    id: Option<String>,
    model: Option<String>,
    blocks: BTreeMap<usize, Block>,
    tool_count: usize,
    stop_reason: Option<String>,
    usage: Option<WireUsage>,
    stopped: bool,
}

impl Answer {
    /// Applies one event; `true` once the message is complete.
    fn apply(
        &mut self,
        event: StreamEvent,
        server: &str,
        on_delta: DeltaSink<'_>,
    ) -> Result<bool, ModelError> {
        match event {
            StreamEvent::MessageStart { message } => {
                self.id = message.id.filter(|id| !id.is_empty());
                self.model = message.model.filter(|model| !model.is_empty());
                if let Some(usage) = message.usage {
                    self.usage.get_or_insert_default().update(usage);
                }
            }
            StreamEvent::ContentBlockStart {
                index,
                content_block,
            } => self.start_block(index, content_block, on_delta),
            StreamEvent::ContentBlockDelta { index, delta } => {
                self.extend_block(index, delta, server, on_delta)?;
            }
            StreamEvent::Other => {}
            StreamEvent::MessageDelta { delta, usage } => {
                if delta.stop_reason.is_some() {
                    self.stop_reason = delta.stop_reason;
                }
                if let Some(usage) = usage {
                    self.usage.get_or_insert_default().update(usage);
                }
            }
            StreamEvent::MessageStop => {
                self.stopped = true;
                return Ok(true);
            }
            StreamEvent::Error { error } => {
                let detail = ErrorDetail::from_value(&error).unwrap_or_else(|| ErrorDetail {
                    message: error.to_string(),
                    ..ErrorDetail::default()
                });
                let hint = detail.kind.as_deref().map(kind_for_error_type);
                return Err(error_from_stream(server, &detail, hint));
            }
        }
        Ok(false)
    }

    /// Opens content block `index`, streaming any text it starts with.
    fn start_block(&mut self, index: usize, start: BlockStart, on_delta: DeltaSink<'_>) {
        let block = match start {
            BlockStart::Text { text } => {
                if !text.is_empty() {
                    on_delta(StreamDelta::Text(text.clone()));
                }
                Block::Text(text)
            }
            BlockStart::ToolUse { id, name, input } => {
                on_delta(StreamDelta::ToolCallStarted {
                    index: self.tool_count,
                    name: name.clone(),
                });
                self.tool_count += 1;
                Block::ToolUse {
                    id,
                    name,
                    json: String::new(),
                    start_input: input,
                }
            }
            BlockStart::Thinking {
                thinking,
                signature,
            } => {
                if !thinking.is_empty() {
                    on_delta(StreamDelta::Reasoning(thinking.clone()));
                }
                Block::Thinking {
                    text: thinking,
                    signature: signature.unwrap_or_default(),
                }
            }
            BlockStart::Other => Block::Ignored,
        };
        self.blocks.insert(index, block);
    }

    /// Adds `delta` to content block `index`; a delta the block does not take is an error.
    fn extend_block(
        &mut self,
        index: usize,
        delta: BlockDelta,
        server: &str,
        on_delta: DeltaSink<'_>,
    ) -> Result<(), ModelError> {
        match (self.blocks.get_mut(&index), delta) {
            (Some(Block::Text(text)), BlockDelta::TextDelta { text: more }) => {
                text.push_str(&more);
                on_delta(StreamDelta::Text(more));
            }
            (Some(Block::ToolUse { json, .. }), BlockDelta::InputJsonDelta { partial_json }) => {
                json.push_str(&partial_json);
            }
            (Some(Block::Thinking { text, .. }), BlockDelta::ThinkingDelta { thinking }) => {
                text.push_str(&thinking);
                on_delta(StreamDelta::Reasoning(thinking));
            }
            (
                Some(Block::Thinking { signature, .. }),
                BlockDelta::SignatureDelta { signature: more },
            ) => {
                signature.push_str(&more);
            }
            (_, BlockDelta::Other) | (Some(Block::Ignored), _) => {}
            (_, delta) => {
                return Err(ModelError::new(
                    ModelErrorKind::InvalidResponse,
                    format!(
                        "{server} sent {delta:?} for content block {index}, which does not take it"
                    ),
                ));
            }
        }
        Ok(())
    }

    fn finish(self, server: &str) -> Result<AssistantMessage, ModelError> {
        // Without `message_stop` the answer may be cut short (even after its `stop_reason`,
        // the usage may be missing): the connection broke, so try again.
        if !self.stopped {
            return Err(ModelError::new(
                ModelErrorKind::Connection,
                format!(
                    "the stream from {server} ended before the answer was complete (no \
                     message_stop)"
                ),
            ));
        }
        let mut message = AssistantMessage {
            id: self.id.unwrap_or_else(|| random_id("msg_")),
            ..AssistantMessage::default()
        };
        for block in self.blocks.into_values() {
            match block {
                Block::Text(text) => message.content.push_str(&text),
                Block::ToolUse {
                    id,
                    name,
                    json,
                    start_input,
                } => {
                    let arguments = if !json.is_empty() {
                        json
                    } else {
                        start_input
                            .filter(|v| v.as_object().is_some_and(|o| !o.is_empty()))
                            .map_or_else(|| "{}".to_owned(), |v| v.to_string())
                    };
                    message.tool_calls.push(ToolCall {
                        id: if id.is_empty() {
                            random_id("toolu_")
                        } else {
                            id
                        },
                        name,
                        arguments,
                    });
                }
                Block::Thinking { text, signature } => {
                    if message.reasoning.is_none() {
                        message.reasoning = Some(text);
                        message.reasoning_signature = Some(signature).filter(|s| !s.is_empty());
                    }
                }
                Block::Ignored => {}
            }
        }
        message.finish_reason = self.stop_reason.as_deref().map(finish_reason);
        // Anthropic's `input_tokens` leaves out the tokens written to and read from the cache;
        // ours counts every prompt token, the cached ones among them.
        message.usage = self.usage.map(|u| Usage {
            input_tokens: u
                .input_tokens
                .unwrap_or(0)
                .saturating_add(u.cache_creation_input_tokens.unwrap_or(0))
                .saturating_add(u.cache_read_input_tokens.unwrap_or(0)),
            output_tokens: u.output_tokens.unwrap_or(0),
            cached_input_tokens: u.cache_read_input_tokens.unwrap_or(0),
            ..Usage::default()
        });
        note_response_model(&mut message, self.model);
        Ok(message)
    }
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "tool_use" => FinishReason::ToolCalls,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "refusal" => FinishReason::Refusal,
        other => FinishReason::Other(other.to_owned()),
    }
}

/// The kind of an error event, from its documented `error.type`.
fn kind_for_error_type(kind: &str) -> ModelErrorKind {
    match kind {
        "rate_limit_error" => ModelErrorKind::RateLimited,
        "authentication_error" | "permission_error" => ModelErrorKind::Auth,
        "billing_error" => ModelErrorKind::Quota,
        "invalid_request_error" | "not_found_error" | "request_too_large" => {
            ModelErrorKind::BadRequest
        }
        "timeout_error" => ModelErrorKind::Timeout,
        // `overloaded_error`, `api_error` and anything new: the server's side.
        _ => ModelErrorKind::Server,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use pretty_assertions::assert_eq;
    use wiremock::matchers::{header, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;
    use crate::model::ToolSchema;
    use crate::model::test_support::{http_config, run, sse};
    use crate::thread::{ImagePart, MessageKind, UserMessage};

    fn config(base_url: &str) -> HttpModelConfig {
        http_config("claude-sonnet-4-5", base_url, Some("sk-ant-test"))
    }

    fn model(base_url: &str) -> AnthropicModel {
        AnthropicModel::new(config(base_url)).unwrap()
    }

    fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    fn request(messages: Vec<Message>) -> ModelRequest {
        ModelRequest {
            system: "You are Herd.".into(),
            messages,
            tools: vec![ToolSchema {
                name: "get_weather".into(),
                description: "Get the current weather in a given location".into(),
                parameters: json!({"type": "object", "properties": {"location": {"type": "string"}},
                    "required": ["location"]}),
            }]
            .into(),
            ..ModelRequest::default()
        }
    }

    /// The SSE text of `events` (`event:` named after each data's `type`).
    fn stream_of(events: &[Value]) -> String {
        events
            .iter()
            .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
            .collect()
    }

    fn message_start(input_tokens: u64) -> Value {
        json!({"type": "message_start", "message": {"id": "msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY",
            "type": "message", "role": "assistant", "content": [], "model": "claude-sonnet-4-5",
            "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": input_tokens, "output_tokens": 1}}})
    }

    fn message_end(stop_reason: &str, output_tokens: u64) -> [Value; 2] {
        [
            json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                "usage": {"output_tokens": output_tokens}}),
            json!({"type": "message_stop"}),
        ]
    }

    /// The documented basic streaming example ("Hello!").
    fn hello_stream() -> String {
        let mut events = vec![
            message_start(25),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "ping"}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello"}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "!"}}),
            json!({"type": "content_block_stop", "index": 0}),
        ];
        events.extend(message_end("end_turn", 15));
        stream_of(&events)
    }

    /// The documented tool-use streaming example.
    fn tool_use_events() -> Vec<Value> {
        let json_delta = |part: &str| {
            json!({"type": "content_block_delta", "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": part}})
        };
        let mut events = vec![
            message_start(472),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta",
                "text": "Okay, let's check the weather for San Francisco, CA:"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use",
                "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "name": "get_weather", "input": {}}}),
            json_delta(""),
            json_delta("{\"location\":"),
            json_delta(" \"San"),
            json_delta(" Francisc"),
            json_delta("o, CA\"}"),
            json!({"type": "content_block_stop", "index": 1}),
        ];
        events.extend(message_end("tool_use", 89));
        events
    }

    /// The documented extended-thinking streaming example.
    fn thinking_stream() -> String {
        let mut events = vec![
            message_start(40),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta",
                "thinking": "Let me solve this step by step:\n\n1. First break down 27 * 453"}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta",
                "thinking": "\n2. 453 = 400 + 50 + 3"}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta",
                "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "27 * 453 = 12,231"}}),
            json!({"type": "content_block_stop", "index": 1}),
        ];
        events.extend(message_end("end_turn", 120));
        stream_of(&events)
    }

    async fn server(response: ResponseTemplate) -> MockServer {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/messages"))
            .and(header("x-api-key", "sk-ant-test"))
            .and(header("anthropic-version", "2023-06-01"))
            .respond_with(response)
            .mount(&server)
            .await;
        server
    }

    async fn answer(response: ResponseTemplate) -> Result<AssistantMessage, ModelError> {
        let server = server(response).await;
        let request = request(vec![Message::user("u", "Hi")]);
        run(&model(&server.uri()), &request).await.0
    }

    #[test]
    fn the_request_has_top_level_system_tools_and_merged_turns() {
        let assistant = Message::Assistant(AssistantMessage {
            id: "a1".into(),
            content: "Checking both.".into(),
            reasoning: Some("Two cities.".into()),
            reasoning_signature: Some("sig-1".into()),
            tool_calls: vec![
                call("toolu_1", "get_weather", "{\"location\": \"Paris\"}"),
                call("toolu_2", "get_weather", "{oops"),
            ],
            ..AssistantMessage::default()
        });
        let messages = vec![
            Message::user("u1", "Weather in Paris and Rome?"),
            Message::system(
                "s1",
                MessageKind::DynamicContext,
                "<system-reminder>2025-01-01</system-reminder>",
            ),
            Message::hidden_user("u2", MessageKind::Memory, "<memory>likes rain</memory>"),
            assistant,
            Message::tool(
                &call("toolu_1", "get_weather", ""),
                ToolStatus::Success,
                "Sunny",
            ),
            Message::hidden_user("u3", MessageKind::TodoReminder, "remember the todos"),
            Message::tool(
                &call("toolu_2", "get_weather", ""),
                ToolStatus::Error,
                "bad arguments",
            ),
        ];
        let mut request = request(messages);
        request.options.temperature = Some(0.2);
        let body = model("https://api.anthropic.com").request_body(&request);
        assert_eq!(
            body,
            json!({
                "model": "claude-sonnet-4-5",
                "max_tokens": 4096,
                "temperature": 0.2,
                "stream": true,
                "system": [
                    {"type": "text", "text": "You are Herd.", "cache_control": {"type": "ephemeral"}},
                    {"type": "text", "text": "<system-reminder>2025-01-01</system-reminder>"},
                ],
                "tools": [{"name": "get_weather",
                    "description": "Get the current weather in a given location",
                    "input_schema": {"type": "object", "properties": {"location": {"type": "string"}},
                        "required": ["location"]}}],
                "messages": [
                    {"role": "user", "content": [
                        {"type": "text", "text": "Weather in Paris and Rome?"},
                        {"type": "text", "text": "<memory>likes rain</memory>"},
                    ]},
                    {"role": "assistant", "content": [
                        {"type": "thinking", "thinking": "Two cities.", "signature": "sig-1"},
                        {"type": "text", "text": "Checking both."},
                        {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                            "input": {"location": "Paris"}},
                        {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {}},
                    ]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Sunny"},
                        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "bad arguments",
                            "is_error": true},
                        {"type": "text", "text": "remember the todos"},
                    ]},
                ],
            })
        );
    }

    #[test]
    fn images_go_before_text_and_empty_turns_are_dropped() {
        let (_, messages) = wire_messages(
            "",
            &[
                Message::User(UserMessage {
                    id: "u".into(),
                    content: "What is this?".into(),
                    images: vec![ImagePart {
                        mime_type: "image/jpeg".into(),
                        data_base64: "/9j/4AAQ".into(),
                    }],
                    meta: Default::default(),
                }),
                Message::Assistant(AssistantMessage::default()),
                Message::user("u2", ""),
            ],
        );
        assert_eq!(
            messages,
            vec![json!({"role": "user", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/4AAQ"}},
                {"type": "text", "text": "What is this?"},
            ]})]
        );
    }

    #[test]
    fn thinking_sets_a_budget_below_max_tokens_and_drops_temperature() {
        let mut request = request(vec![Message::user("u", "Hi")]);
        request.options = CallOptions {
            temperature: Some(0.5),
            thinking: true,
            ..CallOptions::default()
        };
        let body = model("https://api.anthropic.com").request_body(&request);
        assert_eq!(
            body["thinking"],
            json!({"type": "enabled", "budget_tokens": 8192})
        );
        assert_eq!(body["max_tokens"], 8192 + 4096);
        assert!(body.get("temperature").is_none());

        let limits = |max_tokens: Option<u32>, effort: Option<&str>| {
            token_limits(&CallOptions {
                max_tokens,
                thinking: true,
                reasoning_effort: effort.map(str::to_owned),
                ..CallOptions::default()
            })
        };
        assert_eq!(limits(None, Some("low")), (2048 + 4096, Some(2048)));
        assert_eq!(limits(Some(32000), Some("high")), (32000, Some(24576)));
        assert_eq!(limits(Some(6000), None), (6000, Some(3000)));
        assert_eq!(limits(Some(1000), None), (2048, Some(1024)));
        assert_eq!(
            token_limits(&CallOptions {
                max_tokens: Some(300),
                ..CallOptions::default()
            }),
            (300, None)
        );
    }

    #[test]
    fn a_base_url_with_v1_is_accepted() {
        assert_eq!(
            model("https://api.anthropic.com").endpoint.url,
            "https://api.anthropic.com/v1/messages"
        );
        assert_eq!(
            model("http://proxy/v1/").endpoint.url,
            "http://proxy/v1/messages"
        );
    }

    #[tokio::test]
    async fn streams_the_documented_text_example() {
        let server = server(sse(hello_stream())).await;
        let (result, deltas) = run(
            &model(&server.uri()),
            &request(vec![Message::user("u", "Hi")]),
        )
        .await;
        let message = result.unwrap();
        assert_eq!(message.content, "Hello!");
        assert_eq!(message.id, "msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY");
        assert_eq!(message.finish_reason, Some(FinishReason::Stop));
        assert_eq!(
            crate::model::response_model(&message),
            Some("claude-sonnet-4-5")
        );
        let usage = message.usage.clone().unwrap();
        assert_eq!((usage.input_tokens, usage.output_tokens), (25, 15));
        assert_eq!(
            deltas,
            vec![
                StreamDelta::Text("Hello".into()),
                StreamDelta::Text("!".into())
            ]
        );
        let sent: Value = server.received_requests().await.unwrap()[0]
            .body_json()
            .unwrap();
        assert_eq!(sent["stream"], true);
        assert_eq!(
            sent["messages"],
            json!([{"role": "user", "content": [{"type": "text", "text": "Hi"}]}])
        );
    }

    #[tokio::test]
    async fn streams_the_documented_tool_use_example() {
        let server = server(sse(stream_of(&tool_use_events()))).await;
        let (result, deltas) = run(
            &model(&server.uri()),
            &request(vec![Message::user("u", "Weather?")]),
        )
        .await;
        let message = result.unwrap();
        assert_eq!(
            message.content,
            "Okay, let's check the weather for San Francisco, CA:"
        );
        assert_eq!(
            message.tool_calls,
            vec![call(
                "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
                "get_weather",
                "{\"location\": \"San Francisco, CA\"}"
            )]
        );
        assert_eq!(message.finish_reason, Some(FinishReason::ToolCalls));
        assert!(deltas.contains(&StreamDelta::ToolCallStarted {
            index: 0,
            name: "get_weather".into()
        }));
    }

    #[tokio::test]
    async fn streams_thinking_with_its_signature_and_sends_it_back() {
        let server = server(sse(thinking_stream())).await;
        let mut first = request(vec![Message::user("u", "What is 27 * 453?")]);
        first.options.thinking = true;
        let model = model(&server.uri());
        let (result, deltas) = run(&model, &first).await;
        let message = result.unwrap();
        assert_eq!(
            message.reasoning.as_deref(),
            Some(
                "Let me solve this step by step:\n\n1. First break down 27 * 453\n2. 453 = 400 + 50 + 3"
            )
        );
        assert_eq!(
            message.reasoning_signature.as_deref(),
            Some("EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds")
        );
        assert_eq!(message.content, "27 * 453 = 12,231");
        assert!(matches!(deltas[0], StreamDelta::Reasoning(_)));

        let mut second = first.clone();
        second.messages.push(Message::Assistant(message.clone()));
        second.messages.push(Message::user("u2", "And 28 * 453?"));
        let body = model.request_body(&second);
        assert_eq!(
            body["messages"][1]["content"][0],
            json!({"type": "thinking", "thinking": message.reasoning.unwrap(),
                "signature": message.reasoning_signature.unwrap()})
        );
        let sent: Value = server.received_requests().await.unwrap()[0]
            .body_json()
            .unwrap();
        assert_eq!(sent["thinking"]["type"], "enabled");
    }

    #[tokio::test]
    async fn stop_reasons_are_normalised_and_cache_tokens_count_as_input() {
        for (wire, expected) in [
            ("max_tokens", FinishReason::Length),
            ("refusal", FinishReason::Refusal),
            ("stop_sequence", FinishReason::Stop),
            ("pause_turn", FinishReason::Other("pause_turn".into())),
        ] {
            let mut events = vec![
                json!({"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": 3,
                    "cache_creation_input_tokens": 10, "cache_read_input_tokens": 100, "output_tokens": 1}}}),
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "Par"}}),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "tial"}}),
            ];
            events.extend(message_end(wire, 9));
            let message = answer(sse(stream_of(&events))).await.unwrap();
            assert_eq!(message.finish_reason, Some(expected), "{wire}");
            assert_eq!(message.content, "Partial");
            let usage = message.usage.unwrap();
            assert_eq!(
                (
                    usage.input_tokens,
                    usage.cached_input_tokens,
                    usage.output_tokens
                ),
                (113, 100, 9),
                "the cache reads are the cached part of the input"
            );
        }
    }

    #[tokio::test]
    async fn http_errors_are_typed() {
        let body = |kind: &str, message: &str| {
            format!(r#"{{"type":"error","error":{{"type":"{kind}","message":"{message}"}}}}"#)
        };
        let cases = [
            (
                529,
                body("overloaded_error", "Overloaded"),
                ModelErrorKind::Server,
            ),
            (
                401,
                body("authentication_error", "invalid x-api-key"),
                ModelErrorKind::Auth,
            ),
            (
                400,
                body(
                    "invalid_request_error",
                    "prompt is too long: 208310 tokens > 200000 maximum",
                ),
                ModelErrorKind::ContextOverflow,
            ),
            (
                500,
                body("api_error", "Internal server error"),
                ModelErrorKind::Server,
            ),
            (
                400,
                body("invalid_request_error", "messages: field required"),
                ModelErrorKind::BadRequest,
            ),
        ];
        for (status, body, kind) in cases {
            let error = answer(
                ResponseTemplate::new(status).set_body_raw(body.clone(), "application/json"),
            )
            .await
            .unwrap_err();
            assert_eq!(error.kind, kind, "{body}");
            assert_eq!(error.status, Some(status));
        }
        let error = answer(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "12")
                .set_body_raw(
                    body(
                        "rate_limit_error",
                        "Number of request tokens has exceeded your per-minute rate limit",
                    ),
                    "application/json",
                ),
        )
        .await
        .unwrap_err();
        assert_eq!(error.kind, ModelErrorKind::RateLimited);
        assert_eq!(error.retry_after, Some(Duration::from_secs(12)));
        assert!(
            error.message.contains("per-minute rate limit"),
            "{}",
            error.message
        );
    }

    #[tokio::test]
    async fn error_events_in_the_stream_are_typed() {
        for (kind, expected) in [
            ("overloaded_error", ModelErrorKind::Server),
            ("rate_limit_error", ModelErrorKind::RateLimited),
            ("billing_error", ModelErrorKind::Quota),
        ] {
            let events = vec![
                message_start(5),
                json!({"type": "error", "error": {"type": kind, "message": "stop"}}),
            ];
            let error = answer(sse(stream_of(&events))).await.unwrap_err();
            assert_eq!(error.kind, expected, "{kind}");
            assert!(error.message.contains("stop"));
        }
    }

    #[tokio::test]
    async fn a_stream_without_message_stop_is_a_broken_stream() {
        // Cut after the last arguments fragment, before the block and the message end.
        let events = tool_use_events();
        let cut_in_tool_use = stream_of(&events[..events.len() - 3]);
        let error = answer(sse(cut_in_tool_use)).await.unwrap_err();
        assert_eq!(error.kind, ModelErrorKind::Connection);
        assert!(error.is_retriable());
        assert!(error.message.contains("ended before"), "{}", error.message);

        let error = answer(sse(stream_of(&[message_start(5)])))
            .await
            .unwrap_err();
        assert_eq!(error.kind, ModelErrorKind::Connection);

        // Half an answer is not an answer, even with its stop reason.
        let text = |stop: bool| {
            let mut events = vec![
                message_start(5),
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Half an ans"}}),
            ];
            if stop {
                events.push(json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}}));
            }
            stream_of(&events)
        };
        for stop in [false, true] {
            let error = answer(sse(text(stop))).await.unwrap_err();
            assert_eq!(
                error.kind,
                ModelErrorKind::Connection,
                "stop_reason: {stop}"
            );
        }
    }

    #[tokio::test]
    async fn a_tool_use_without_name_or_id_is_kept_for_the_loop_to_answer() {
        let mut events = vec![
            message_start(5),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "input": {}}}),
            json!({"type": "content_block_stop", "index": 0}),
        ];
        events.extend(message_end("tool_use", 3));
        let message = answer(sse(stream_of(&events))).await.unwrap();
        assert_eq!(message.tool_calls.len(), 1);
        assert_eq!(message.tool_calls[0].name, "");
        assert!(message.tool_calls[0].id.starts_with("toolu_"));
        assert_eq!(message.tool_calls[0].arguments, "{}");
    }

    #[tokio::test]
    async fn a_delta_for_the_wrong_block_is_an_invalid_response() {
        let events = vec![
            message_start(5),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{"}}),
        ];
        let error = answer(sse(stream_of(&events))).await.unwrap_err();
        assert_eq!(error.kind, ModelErrorKind::InvalidResponse);
    }
}
