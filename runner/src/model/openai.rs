//! OpenAI-compatible Chat Completions client (OpenAI, vLLM, Ollama, llama.cpp, LiteLLM,
//! DeepSeek...), streaming.
//!
//! Choices that keep it working across servers:
//! - The token limit goes out as `max_tokens`, which every compatible server accepts; only for
//!   `api.openai.com` is it `max_completion_tokens`, because OpenAI's reasoning models refuse
//!   `max_tokens`.
//! - `tool_choice` and `parallel_tool_calls` are never sent: each server's default is "auto",
//!   and vLLM refuses an explicit `auto` unless started with `--enable-auto-tool-choice`.
//! - `reasoning_effort` is sent only when set; reasoning text comes back as
//!   `reasoning_content` (DeepSeek, vLLM, llama.cpp) or `reasoning` (Ollama, OpenRouter) and is
//!   never sent back (DeepSeek refuses it in input).
//! - An assistant turn that only calls tools is sent with `content: null`; one without tool
//!   calls always carries a string (some servers refuse null there).
//! - A server that ignores `stream: true` and answers with one JSON object is read as well.

use std::collections::{BTreeMap, HashMap};

use async_trait::async_trait;
use herd_crds::report::Usage;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::endpoint::{Endpoint, EndpointClient};
use super::error::{ModelError, ModelErrorKind};
use super::http::{join_url, transport_error};
use super::http_error::{ErrorDetail, error_from_stream};
use super::ids::random_id;
use super::{
    CallOptions, DeltaSink, HttpModelConfig, ModelRequest, StreamDelta, note_response_model,
};
use crate::thread::{AssistantMessage, FinishReason, Message, ToolCall};

/// A Chat Completions endpoint (`<base_url>/chat/completions`).
pub struct OpenAiModel {
    endpoint: Endpoint,
    defaults: CallOptions,
    /// Whether the token limit is sent as `max_completion_tokens` (OpenAI itself).
    max_completion_tokens: bool,
}

impl OpenAiModel {
    /// A client for `config`; fails only when the HTTP client cannot be set up.
    pub fn new(config: HttpModelConfig) -> Result<Self, ModelError> {
        let max_completion_tokens = reqwest::Url::parse(&config.base_url)
            .ok()
            .and_then(|url| {
                url.host_str()
                    .map(|h| h.eq_ignore_ascii_case("api.openai.com"))
            })
            .unwrap_or(false);
        let url = join_url(&config.base_url, "chat/completions");
        Ok(OpenAiModel {
            endpoint: Endpoint::new(config, url)?,
            defaults: CallOptions::default(),
            max_completion_tokens,
        })
    }

    /// Sampling settings used when a request leaves them unset (the model's configuration).
    pub fn with_defaults(mut self, defaults: CallOptions) -> Self {
        self.defaults = defaults;
        self
    }
}

#[async_trait]
impl EndpointClient for OpenAiModel {
    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    fn provider(&self) -> &'static str {
        "openai"
    }

    fn request_body(&self, request: &ModelRequest) -> Value {
        let options = request.options.or_defaults(&self.defaults);
        let mut body = Map::new();
        body.insert("model".into(), json!(self.endpoint.config.model));
        body.insert(
            "messages".into(),
            Value::Array(wire_messages(&request.system, &request.messages)),
        );
        if !request.tools.is_empty() {
            let tools = request
                .tools
                .iter()
                .map(|tool| {
                    json!({"type": "function", "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    }})
                })
                .collect();
            body.insert("tools".into(), Value::Array(tools));
        }
        if let Some(max_tokens) = options.max_tokens {
            let key = if self.max_completion_tokens {
                "max_completion_tokens"
            } else {
                "max_tokens"
            };
            body.insert(key.into(), json!(max_tokens));
        }
        if let Some(temperature) = options.temperature {
            body.insert("temperature".into(), json!(temperature));
        }
        if let Some(effort) = &options.reasoning_effort {
            body.insert("reasoning_effort".into(), json!(effort));
        }
        body.insert("stream".into(), json!(true));
        body.insert("stream_options".into(), json!({"include_usage": true}));
        Value::Object(body)
    }

    fn headers(&self) -> HeaderMap {
        self.endpoint
            .stream_headers(AUTHORIZATION, |key| format!("Bearer {key}"))
    }

    async fn read_answer(
        &self,
        response: reqwest::Response,
        on_delta: DeltaSink<'_>,
    ) -> Result<AssistantMessage, ModelError> {
        let endpoint = &self.endpoint;
        let server = &endpoint.server;
        let is_json = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        let mut answer = Answer::default();
        if is_json {
            let text = response
                .text()
                .await
                .map_err(|e| transport_error(server, &e))?;
            let chunk: Chunk = serde_json::from_str(&text)
                .map_err(|e| endpoint.malformed(NOT_A_CHUNK, &e, &text))?;
            answer.apply(chunk, server, on_delta)?;
            answer.done = true;
        } else {
            let apply = |chunk: Chunk| answer.apply(chunk, server, on_delta).map(|()| false);
            let done = endpoint
                .read_events(response, NOT_A_CHUNK, Some("[DONE]"), apply)
                .await?;
            answer.done = done;
        }
        answer.finish(server)
    }
}

/// What a chunk that does not parse is, for its error.
const NOT_A_CHUNK: &str = "a chunk that is not a chat completion";

/// The thread as Chat Completions messages, the system prompt first.
fn wire_messages(system: &str, messages: &[Message]) -> Vec<Value> {
    let mut wire = Vec::with_capacity(messages.len() + 1);
    if !system.is_empty() {
        wire.push(json!({"role": "system", "content": system}));
    }
    for message in messages {
        wire.push(match message {
            Message::System(m) => json!({"role": "system", "content": m.content}),
            Message::User(m) if m.images.is_empty() => {
                json!({"role": "user", "content": m.content})
            }
            Message::User(m) => {
                let mut parts = Vec::with_capacity(m.images.len() + 1);
                if !m.content.is_empty() {
                    parts.push(json!({"type": "text", "text": m.content}));
                }
                for image in &m.images {
                    let url = format!("data:{};base64,{}", image.mime_type, image.data_base64);
                    parts.push(json!({"type": "image_url", "image_url": {"url": url}}));
                }
                json!({"role": "user", "content": parts})
            }
            Message::Assistant(m) if m.tool_calls.is_empty() => {
                json!({"role": "assistant", "content": m.content})
            }
            Message::Assistant(m) => {
                let content = if m.content.is_empty() {
                    Value::Null
                } else {
                    json!(m.content)
                };
                let calls: Vec<Value> = m
                    .tool_calls
                    .iter()
                    .map(|call| {
                        // Servers that render arguments into a chat template parse them as
                        // JSON; an empty string would fail there.
                        let arguments = if call.arguments.trim().is_empty() {
                            "{}"
                        } else {
                            call.arguments.as_str()
                        };
                        json!({"id": call.id, "type": "function", "function": {
                            "name": call.name, "arguments": arguments,
                        }})
                    })
                    .collect();
                json!({"role": "assistant", "content": content, "tool_calls": calls})
            }
            Message::Tool(m) => {
                json!({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content})
            }
        });
    }
    wire
}

/// One streamed chunk, or the whole non-streaming completion. Unknown fields (`timings`,
/// `system_fingerprint`, `logprobs`...) are ignored.
#[derive(Deserialize, Debug, Default)]
struct Chunk {
    #[serde(default)]
    id: Option<String>,
    /// The model that answered, as the server names it.
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    choices: Option<Vec<Choice>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize, Debug, Default)]
struct Choice {
    #[serde(default)]
    index: Option<u32>,
    #[serde(default)]
    delta: Option<Delta>,
    /// Present instead of `delta` in a non-streaming answer.
    #[serde(default)]
    message: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize, Debug, Default)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Deserialize, Debug, Default)]
struct ToolCallDelta {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Deserialize, Debug, Default)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Deserialize, Debug, Default, Clone)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    /// The part of `prompt_tokens` read from the prompt cache (`cached_tokens` within).
    #[serde(default)]
    prompt_tokens_details: Option<PromptTokensDetails>,
}

#[derive(Deserialize, Debug, Default, Clone)]
struct PromptTokensDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

impl WireUsage {
    /// The usage this reports: `prompt_tokens` includes the cached tokens.
    fn usage(&self) -> Usage {
        Usage {
            input_tokens: self.prompt_tokens,
            output_tokens: self.completion_tokens,
            cached_input_tokens: self
                .prompt_tokens_details
                .as_ref()
                .and_then(|details| details.cached_tokens)
                .unwrap_or(0),
            ..Usage::default()
        }
    }
}

/// A tool call being assembled from deltas.
#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// The answer assembled so far.
#[derive(Debug, Default)]
struct Answer {
    id: Option<String>,
    model: Option<String>,
    content: String,
    reasoning: String,
    refusal: String,
    calls: BTreeMap<usize, PartialCall>,
    /// The server's index of the last tool-call delta.
    last_wire_index: Option<usize>,
    /// Server index -> our index, for calls moved because their index was taken.
    remap: HashMap<usize, usize>,
    finish_reason: Option<String>,
    usage: Option<WireUsage>,
    /// `[DONE]` arrived (or the answer was one JSON object).
    done: bool,
}

impl Answer {
    fn apply(
        &mut self,
        chunk: Chunk,
        server: &str,
        on_delta: DeltaSink<'_>,
    ) -> Result<(), ModelError> {
        if let Some(error) = &chunk.error {
            let detail = ErrorDetail::from_value(error).unwrap_or_else(|| ErrorDetail {
                message: error.to_string(),
                ..ErrorDetail::default()
            });
            return Err(error_from_stream(server, &detail, None));
        }
        if self.id.is_none() {
            self.id = chunk.id.filter(|id| !id.is_empty());
        }
        if self.model.is_none() {
            self.model = chunk.model.filter(|model| !model.is_empty());
        }
        // Usage comes in a last chunk without choices (`include_usage`), or on every chunk
        // with some servers; the last one seen is the total.
        if chunk.usage.is_some() {
            self.usage = chunk.usage;
        }
        // Only the first choice is read: requests never ask for `n > 1`.
        for choice in chunk.choices.into_iter().flatten() {
            if choice.index.unwrap_or(0) != 0 {
                continue;
            }
            let whole_message = choice.message.is_some();
            if let Some(delta) = choice.delta.or(choice.message) {
                self.apply_delta(delta, whole_message, on_delta);
            }
            if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
                self.finish_reason = Some(reason);
            }
        }
        Ok(())
    }

    fn apply_delta(&mut self, delta: Delta, whole_message: bool, on_delta: DeltaSink<'_>) {
        // Servers that send both fields send the same text twice.
        if let Some(text) = delta
            .reasoning_content
            .or(delta.reasoning)
            .filter(|t| !t.is_empty())
        {
            self.reasoning.push_str(&text);
            on_delta(StreamDelta::Reasoning(text));
        }
        if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
            self.content.push_str(&text);
            on_delta(StreamDelta::Text(text));
        }
        if let Some(text) = delta.refusal.filter(|t| !t.is_empty()) {
            self.refusal.push_str(&text);
        }
        for (position, call) in delta.tool_calls.into_iter().flatten().enumerate() {
            let id = call.id.filter(|id| !id.is_empty());
            // The index the server gave; a whole message lists its calls in order, and a
            // stream without indexes continues the call it was on.
            let wire_index = call.index.unwrap_or(if whole_message {
                position
            } else {
                self.last_wire_index.unwrap_or(0)
            });
            self.last_wire_index = Some(wire_index);
            let mut index = self.remap.get(&wire_index).copied().unwrap_or(wire_index);
            // A different id at a taken index is a new call: servers without indexes, and
            // proxies that number every parallel call 0, send exactly that.
            if let Some(id) = &id
                && self
                    .calls
                    .get(&index)
                    .is_some_and(|c| !c.id.is_empty() && &c.id != id)
            {
                index = self.calls.keys().next_back().map_or(0, |k| k + 1);
                self.remap.insert(wire_index, index);
            }
            let entry = self.calls.entry(index).or_default();
            if entry.id.is_empty()
                && let Some(id) = id
            {
                entry.id = id;
            }
            let function = call.function.unwrap_or_default();
            if entry.name.is_empty()
                && let Some(name) = function.name.filter(|n| !n.is_empty())
            {
                entry.name = name.clone();
                on_delta(StreamDelta::ToolCallStarted { index, name });
            }
            if let Some(arguments) = function.arguments {
                entry.arguments.push_str(&arguments);
            }
        }
    }

    fn finish(self, server: &str) -> Result<AssistantMessage, ModelError> {
        // Text without an end may be half an answer: the connection broke, so try again.
        if !self.done && self.finish_reason.is_none() {
            return Err(ModelError::new(
                ModelErrorKind::Connection,
                format!(
                    "the stream from {server} ended before the answer was complete (no \
                     finish_reason and no [DONE])"
                ),
            ));
        }
        let mut tool_calls = Vec::with_capacity(self.calls.len());
        // A call without a name is kept: the loop answers it with an error result, so the
        // model can correct itself.
        for call in self.calls.into_values() {
            tool_calls.push(ToolCall {
                id: if call.id.is_empty() {
                    random_id("call_")
                } else {
                    call.id
                },
                name: call.name,
                arguments: call.arguments,
            });
        }
        let mut content = self.content;
        let mut finish_reason = self.finish_reason.as_deref().map(finish_reason);
        if !self.refusal.is_empty() {
            if content.is_empty() {
                content = self.refusal;
            }
            finish_reason = Some(FinishReason::Refusal);
        }
        let mut message = AssistantMessage {
            id: self.id.unwrap_or_else(|| random_id("msg_")),
            content,
            reasoning: Some(self.reasoning).filter(|r| !r.is_empty()),
            tool_calls,
            finish_reason,
            usage: self.usage.as_ref().map(WireUsage::usage),
            ..AssistantMessage::default()
        };
        note_response_model(&mut message, self.model);
        Ok(message)
    }
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "stop" | "end_turn" => FinishReason::Stop,
        "length" => FinishReason::Length,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "content_filter" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use pretty_assertions::assert_eq;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use wiremock::matchers::{header, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;
    use crate::model::ToolSchema;
    use crate::model::test_support::{http_config, run, sse};
    use crate::thread::{ImagePart, MessageKind, ToolStatus, UserMessage};

    const PLAIN_REQUEST: &str =
        include_str!("../../tests/fixtures/openai-chat/llama-server/plain-stream-request.json");
    const PLAIN_STREAM: &str =
        include_str!("../../tests/fixtures/openai-chat/llama-server/plain-stream.sse");
    const PLAIN_JSON: &str =
        include_str!("../../tests/fixtures/openai-chat/llama-server/plain.json");
    const TOOLS_REQUEST: &str =
        include_str!("../../tests/fixtures/openai-chat/llama-server/tools-request.json");
    const TOOLS_STREAM: &str =
        include_str!("../../tests/fixtures/openai-chat/llama-server/tools-stream.sse");
    const TOOLS_JSON: &str =
        include_str!("../../tests/fixtures/openai-chat/llama-server/tools.json");

    fn config(base_url: &str) -> HttpModelConfig {
        http_config("smollm2", base_url, None)
    }

    fn model(base_url: &str) -> OpenAiModel {
        OpenAiModel::new(config(base_url)).unwrap()
    }

    fn plain_request() -> ModelRequest {
        ModelRequest {
            system: "You are a concise assistant.".into(),
            messages: vec![Message::user("u1", "Name three primary colors.")],
            options: CallOptions {
                temperature: Some(0.0),
                max_tokens: Some(64),
                ..CallOptions::default()
            },
            ..ModelRequest::default()
        }
    }

    fn assistant_calls(id: &str, content: &str, calls: &[(&str, &str)]) -> Message {
        Message::Assistant(AssistantMessage {
            id: id.into(),
            content: content.into(),
            tool_calls: calls
                .iter()
                .map(|(id, args)| ToolCall {
                    id: (*id).into(),
                    name: "get_weather".into(),
                    arguments: (*args).into(),
                })
                .collect(),
            ..AssistantMessage::default()
        })
    }

    fn tools_request() -> ModelRequest {
        ModelRequest {
            system: "You are a weather bot. Always answer weather questions by calling the \
                     get_weather tool."
                .into(),
            messages: vec![
                Message::user("u1", "What is the weather in London?"),
                assistant_calls("a1", "", &[("call_0", "{\"city\": \"London\"}")]),
                Message::user("u2", "What is the weather in Berlin?"),
                assistant_calls("a2", "", &[("call_1", "{\"city\": \"Berlin\"}")]),
                Message::user("u3", "What is the weather in Paris?"),
            ],
            tools: vec![ToolSchema {
                name: "get_weather".into(),
                description: "Get the current weather for a city".into(),
                parameters: json!({"type": "object", "properties": {"city": {"type": "string"}},
                    "required": ["city"]}),
            }]
            .into(),
            options: CallOptions {
                temperature: Some(0.0),
                max_tokens: Some(64),
                ..CallOptions::default()
            },
            ..ModelRequest::default()
        }
    }

    /// Removes `key` from both objects and checks the two values are the same number.
    fn take_number(ours: &mut Value, theirs: &mut Value, key: &str) {
        let a = ours.as_object_mut().unwrap().remove(key).unwrap();
        let b = theirs.as_object_mut().unwrap().remove(key).unwrap();
        assert_eq!(a.as_f64(), b.as_f64(), "{key}");
    }

    #[test]
    fn the_plain_request_matches_the_captured_one() {
        let mut ours = model("http://h/v1").request_body(&plain_request());
        let mut captured: Value = serde_json::from_str(PLAIN_REQUEST).unwrap();
        take_number(&mut ours, &mut captured, "temperature");
        assert_eq!(ours, captured);
    }

    #[test]
    fn the_tools_request_matches_the_captured_one_with_null_content() {
        let mut ours = model("http://h/v1").request_body(&tools_request());
        let mut captured: Value = serde_json::from_str(TOOLS_REQUEST).unwrap();
        take_number(&mut ours, &mut captured, "temperature");
        // The capture sent `""` (what llama.cpp echoes); OpenAI's documented form for a turn
        // that only calls tools is `null`, which every server accepts.
        for message in captured["messages"].as_array_mut().unwrap() {
            if message.get("tool_calls").is_some() {
                message["content"] = Value::Null;
            }
        }
        // Not sent on purpose (see the module docs); streaming is always on.
        let captured = captured.as_object_mut().unwrap();
        captured.remove("tool_choice");
        captured.insert("stream".into(), json!(true));
        captured.insert("stream_options".into(), json!({"include_usage": true}));
        assert_eq!(ours, Value::Object(captured.clone()));
    }

    #[test]
    fn assistant_content_is_null_only_when_the_turn_just_calls_tools() {
        let messages = wire_messages(
            "",
            &[
                assistant_calls("a", "", &[("c1", "")]),
                assistant_calls("b", "thinking aloud", &[("c2", "{}")]),
                assistant_calls("c", "", &[]),
            ],
        );
        assert_eq!(messages[0]["content"], Value::Null);
        assert_eq!(messages[0]["tool_calls"][0]["function"]["arguments"], "{}");
        assert_eq!(messages[1]["content"], "thinking aloud");
        assert_eq!(messages[2]["content"], "");
        assert!(messages[2].get("tool_calls").is_none());
        assert_eq!(messages.len(), 3, "an empty system prompt is not sent");
    }

    #[test]
    fn tool_results_images_and_thread_system_messages_are_mapped() {
        let call = ToolCall {
            id: "c1".into(),
            name: "ls".into(),
            arguments: "{}".into(),
        };
        let messages = wire_messages(
            "prompt",
            &[
                Message::User(UserMessage {
                    id: "u".into(),
                    content: "what is this?".into(),
                    images: vec![ImagePart {
                        mime_type: "image/png".into(),
                        data_base64: "iVBORw0K".into(),
                    }],
                    meta: Default::default(),
                }),
                Message::tool(&call, ToolStatus::Error, "no such dir"),
                Message::system("s", MessageKind::DynamicContext, "<system-reminder/>"),
            ],
        );
        assert_eq!(messages[0], json!({"role": "system", "content": "prompt"}));
        assert_eq!(
            messages[1],
            json!({"role": "user", "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0K"}},
            ]})
        );
        assert_eq!(
            messages[2],
            json!({"role": "tool", "tool_call_id": "c1", "content": "no such dir"})
        );
        assert_eq!(
            messages[3],
            json!({"role": "system", "content": "<system-reminder/>"})
        );
    }

    #[test]
    fn options_fall_back_to_the_model_defaults_and_effort_is_sent_only_when_set() {
        let defaults = CallOptions {
            temperature: Some(0.7),
            max_tokens: Some(100),
            reasoning_effort: Some("low".into()),
            thinking: false,
        };
        let bare = model("http://h/v1");
        let body = bare.request_body(&ModelRequest::default());
        assert!(body.get("reasoning_effort").is_none());
        assert!(body.get("temperature").is_none());
        assert!(body.get("max_tokens").is_none());
        assert!(body.get("tools").is_none());

        let with_defaults = model("http://h/v1").with_defaults(defaults);
        let body = with_defaults.request_body(&ModelRequest::default());
        assert_eq!(body["reasoning_effort"], "low");
        assert_eq!(body["temperature"], 0.7);
        assert_eq!(body["max_tokens"], 100);
        let mut request = ModelRequest::default();
        request.options.temperature = Some(0.1);
        request.options.reasoning_effort = Some("high".into());
        let body = with_defaults.request_body(&request);
        assert_eq!(body["temperature"], 0.1);
        assert_eq!(body["reasoning_effort"], "high");
    }

    #[test]
    fn openai_itself_gets_max_completion_tokens() {
        let mut request = ModelRequest::default();
        request.options.max_tokens = Some(50);
        let body = model("https://api.openai.com/v1").request_body(&request);
        assert_eq!(body["max_completion_tokens"], 50);
        assert!(body.get("max_tokens").is_none());
        let body = model("http://localhost:8080/v1").request_body(&request);
        assert_eq!(body["max_tokens"], 50);
    }

    /// A server answering every chat completion with `response`.
    async fn server(response: ResponseTemplate) -> MockServer {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(response)
            .mount(&server)
            .await;
        server
    }

    async fn answer(response: ResponseTemplate) -> Result<AssistantMessage, ModelError> {
        let server = server(response).await;
        run(&model(&format!("{}/v1", server.uri())), &plain_request())
            .await
            .0
    }

    /// An SSE stream of `chunks` (JSON values as `data:` events).
    fn stream_of(chunks: &[Value], done: bool) -> String {
        let mut body: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
        if done {
            body.push_str("data: [DONE]\n\n");
        }
        body
    }

    fn delta_chunk(delta: Value, finish: Option<&str>) -> Value {
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    }

    #[tokio::test]
    async fn replays_the_captured_plain_stream() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .and(header("authorization", "Bearer sk-test"))
            .respond_with(sse(PLAIN_STREAM))
            .expect(1)
            .mount(&server)
            .await;
        let mut config = config(&format!("{}/v1/", server.uri()));
        config.api_key = Some("sk-test".into());
        let (result, deltas) = run(&OpenAiModel::new(config).unwrap(), &plain_request()).await;
        let message = result.unwrap();
        assert_eq!(
            message.content,
            "The primary colors are: red, blue, and yellow."
        );
        assert_eq!(message.id, "chatcmpl-xge5r0q7RDeeB4RNUlcTdiMeUyBRDpRQ");
        assert_eq!(message.finish_reason, Some(FinishReason::Stop));
        assert!(message.tool_calls.is_empty());
        assert_eq!(message.reasoning, None);
        assert_eq!(
            crate::model::response_model(&message),
            Some("smollm2"),
            "the model llama-server names in its chunks"
        );
        let usage = message.usage.clone().unwrap();
        assert_eq!((usage.input_tokens, usage.output_tokens), (25, 13));
        let streamed: String = deltas
            .iter()
            .map(|d| match d {
                StreamDelta::Text(t) => t.as_str(),
                other => panic!("unexpected delta {other:?}"),
            })
            .collect();
        assert_eq!(streamed, message.content);
        assert_eq!(deltas.len(), 12);

        let sent: Value = server.received_requests().await.unwrap()[0]
            .body_json()
            .unwrap();
        let mut captured: Value = serde_json::from_str(PLAIN_REQUEST).unwrap();
        let mut sent = sent;
        take_number(&mut sent, &mut captured, "temperature");
        assert_eq!(sent, captured);
    }

    #[tokio::test]
    async fn replays_the_captured_tool_call_stream() {
        let server = server(sse(TOOLS_STREAM)).await;
        let (result, deltas) = run(&model(&format!("{}/v1", server.uri())), &tools_request()).await;
        let message = result.unwrap();
        assert_eq!(
            message.tool_calls,
            vec![ToolCall {
                id: "RgXEKhoItkoNYkZpVODgTFwsxolTPN8g".into(),
                name: "get_weather".into(),
                arguments: "{\"city\": \"Paris\"}".into(),
            }]
        );
        assert_eq!(message.content, "");
        assert_eq!(message.finish_reason, Some(FinishReason::ToolCalls));
        let usage = message.usage.unwrap();
        assert_eq!((usage.input_tokens, usage.output_tokens), (302, 31));
        assert_eq!(
            deltas,
            vec![StreamDelta::ToolCallStarted {
                index: 0,
                name: "get_weather".into()
            }]
        );
    }

    #[tokio::test]
    async fn reads_the_captured_non_streaming_answers() {
        let json_response = |body: &str| {
            ResponseTemplate::new(200).set_body_raw(body.to_owned(), "application/json")
        };
        let message = answer(json_response(PLAIN_JSON)).await.unwrap();
        assert_eq!(
            message.content,
            "The primary colors are: red, blue, and yellow."
        );
        assert_eq!(message.finish_reason, Some(FinishReason::Stop));
        assert_eq!(message.usage.unwrap().input_tokens, 25);

        let message = answer(json_response(TOOLS_JSON)).await.unwrap();
        assert_eq!(message.tool_calls.len(), 1);
        assert_eq!(message.tool_calls[0].id, "qY78q42whwtE8Cyn5bVe89syi3wR7Gdv");
        assert_eq!(message.tool_calls[0].arguments, "{\"city\": \"Paris\"}");
        assert_eq!(message.finish_reason, Some(FinishReason::ToolCalls));
    }

    #[tokio::test]
    async fn assembles_two_parallel_calls_interleaved_across_many_chunks() {
        let call = |index: usize, id: Option<&str>, name: Option<&str>, args: &str| {
            let mut function = json!({"arguments": args});
            if let Some(name) = name {
                function["name"] = json!(name);
            }
            let mut call = json!({"index": index, "function": function});
            if let Some(id) = id {
                call["id"] = json!(id);
                call["type"] = json!("function");
            }
            delta_chunk(json!({"tool_calls": [call]}), None)
        };
        let chunks = vec![
            delta_chunk(json!({"role": "assistant", "content": null}), None),
            call(0, Some("call_a"), Some("read_file"), ""),
            call(0, None, None, "{\"pa"),
            call(1, Some("call_b"), Some("ls"), "{"),
            call(0, None, None, "th\": \"/mnt/"),
            call(1, None, None, "\"path\""),
            call(0, None, None, "user-data/a.txt\"}"),
            call(1, None, None, ": \"/tmp\"}"),
            delta_chunk(json!({}), Some("tool_calls")),
        ];
        let message = answer(sse(stream_of(&chunks, true))).await.unwrap();
        assert_eq!(
            message.tool_calls,
            vec![
                ToolCall {
                    id: "call_a".into(),
                    name: "read_file".into(),
                    arguments: "{\"path\": \"/mnt/user-data/a.txt\"}".into(),
                },
                ToolCall {
                    id: "call_b".into(),
                    name: "ls".into(),
                    arguments: "{\"path\": \"/tmp\"}".into(),
                },
            ]
        );
        assert_eq!(message.usage, None, "no usage chunk, no usage");
    }

    #[tokio::test]
    async fn calls_without_index_or_id_are_still_assembled() {
        let chunks = vec![
            delta_chunk(
                json!({"tool_calls": [{"id": "x1", "function": {"name": "ls", "arguments": "{"}}]}),
                None,
            ),
            delta_chunk(
                json!({"tool_calls": [{"function": {"arguments": "}"}}]}),
                None,
            ),
            delta_chunk(
                json!({"tool_calls": [{"id": "x2", "function": {"name": "bash", "arguments": "{}"}}]}),
                None,
            ),
            delta_chunk(
                json!({"tool_calls": [{"index": 2, "function": {"name": "glob"}}]}),
                Some("tool_calls"),
            ),
        ];
        let message = answer(sse(stream_of(&chunks, true))).await.unwrap();
        let calls: Vec<_> = message
            .tool_calls
            .iter()
            .map(|c| (c.name.as_str(), c.arguments.as_str()))
            .collect();
        assert_eq!(calls, vec![("ls", "{}"), ("bash", "{}"), ("glob", "")]);
        assert_eq!(message.tool_calls[0].id, "x1");
        assert!(
            message.tool_calls[2].id.starts_with("call_"),
            "a missing id is generated"
        );
    }

    #[tokio::test]
    async fn parallel_calls_all_numbered_zero_stay_apart() {
        let whole = |id: &str, name: &str, args: &str| {
            json!({"tool_calls": [{"index": 0, "id": id, "type": "function",
                "function": {"name": name, "arguments": args}}]})
        };
        let chunks = vec![
            delta_chunk(whole("a", "ls", "{\"path\":"), None),
            delta_chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"/\"}"}}]}),
                None,
            ),
            delta_chunk(whole("b", "glob", "{}"), None),
            delta_chunk(
                json!({"tool_calls": [{"index": 1, "id": "c", "function": {"name": "bash", "arguments": "{}"}}]}),
                None,
            ),
            delta_chunk(whole("d", "grep", "{}"), Some("tool_calls")),
        ];
        let server = server(sse(stream_of(&chunks, true))).await;
        let (result, deltas) = run(&model(&format!("{}/v1", server.uri())), &plain_request()).await;
        let calls: Vec<_> = result
            .unwrap()
            .tool_calls
            .into_iter()
            .map(|c| (c.id, c.name, c.arguments))
            .collect();
        let expected = [
            ("a", "ls", "{\"path\":\"/\"}"),
            ("b", "glob", "{}"),
            ("c", "bash", "{}"),
            ("d", "grep", "{}"),
        ];
        let expected: Vec<_> = expected
            .iter()
            .map(|(i, n, a)| ((*i).to_owned(), (*n).to_owned(), (*a).to_owned()))
            .collect();
        assert_eq!(calls, expected);
        assert_eq!(deltas.len(), 4);
    }

    #[tokio::test]
    async fn null_and_empty_content_add_nothing() {
        let chunks = vec![
            delta_chunk(json!({"role": "assistant", "content": null}), None),
            delta_chunk(json!({"content": ""}), None),
            delta_chunk(json!({"content": "Hi"}), None),
            json!({"choices": null, "id": "x"}),
            delta_chunk(json!({"content": null}), Some("stop")),
        ];
        let server = server(sse(stream_of(&chunks, true))).await;
        let (result, deltas) = run(&model(&format!("{}/v1", server.uri())), &plain_request()).await;
        assert_eq!(result.unwrap().content, "Hi");
        assert_eq!(deltas, vec![StreamDelta::Text("Hi".into())]);
    }

    #[tokio::test]
    async fn reasoning_deltas_become_the_reasoning_text() {
        let chunks = vec![
            delta_chunk(json!({"reasoning_content": "Let me "}), None),
            delta_chunk(
                json!({"reasoning_content": "think.", "reasoning": "think."}),
                None,
            ),
            delta_chunk(json!({"reasoning": " Done."}), None),
            delta_chunk(json!({"content": "42"}), Some("stop")),
            json!({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 7}}),
        ];
        let server = server(sse(stream_of(&chunks, true))).await;
        let (result, deltas) = run(&model(&format!("{}/v1", server.uri())), &plain_request()).await;
        let message = result.unwrap();
        assert_eq!(message.reasoning.as_deref(), Some("Let me think. Done."));
        assert_eq!(message.content, "42");
        assert_eq!(message.usage.unwrap().output_tokens, 7);
        assert_eq!(deltas[0], StreamDelta::Reasoning("Let me ".into()));
        assert_eq!(deltas[3], StreamDelta::Text("42".into()));
    }

    #[test]
    fn cached_prompt_tokens_are_the_cached_part_of_the_input() {
        let chunk: Chunk = serde_json::from_value(json!({"choices": [], "usage": {
            "prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
            "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0}}}))
        .unwrap();
        let usage = chunk.usage.unwrap().usage();
        assert_eq!(
            (
                usage.input_tokens,
                usage.cached_input_tokens,
                usage.output_tokens
            ),
            (2006, 1920, 300)
        );
        // Servers without the details (llama.cpp, older vLLM), or with a null count.
        for usage in [
            json!({"prompt_tokens": 5, "completion_tokens": 7}),
            json!({"prompt_tokens": 5, "completion_tokens": 7, "prompt_tokens_details": null}),
            json!({"prompt_tokens": 5, "completion_tokens": 7,
                   "prompt_tokens_details": {"cached_tokens": null}}),
        ] {
            let wire: WireUsage = serde_json::from_value(usage).unwrap();
            assert_eq!(wire.usage().cached_input_tokens, 0);
            assert_eq!(wire.usage().input_tokens, 5);
        }
    }

    #[tokio::test]
    async fn finish_reasons_are_normalised() {
        for (wire, expected) in [
            ("length", FinishReason::Length),
            ("content_filter", FinishReason::ContentFilter),
            ("eos", FinishReason::Other("eos".into())),
        ] {
            let chunks = vec![delta_chunk(json!({"content": "x"}), Some(wire))];
            let message = answer(sse(stream_of(&chunks, false))).await.unwrap();
            assert_eq!(message.finish_reason, Some(expected), "{wire}");
        }
        let chunks = vec![delta_chunk(
            json!({"refusal": "I can't help with that."}),
            Some("stop"),
        )];
        let message = answer(sse(stream_of(&chunks, true))).await.unwrap();
        assert_eq!(message.finish_reason, Some(FinishReason::Refusal));
        assert_eq!(message.content, "I can't help with that.");
    }

    #[tokio::test]
    async fn rate_limits_keep_status_retry_after_and_message() {
        let error = answer(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "3")
                .set_body_raw(
                    r#"{"error":{"code":"rate_limit_exceeded","message":"Rate limit reached for requests","type":"requests"}}"#,
                    "application/json",
                ),
        )
        .await
        .unwrap_err();
        assert_eq!(error.kind, ModelErrorKind::RateLimited);
        assert_eq!(error.status, Some(429));
        assert_eq!(error.retry_after, Some(Duration::from_secs(3)));
        assert!(
            error.message.contains("Rate limit reached for requests"),
            "{}",
            error.message
        );
        assert!(error.is_retriable());
    }

    #[tokio::test]
    async fn http_errors_are_typed() {
        let body = |code: &str, message: &str| {
            format!(r#"{{"error":{{"code":"{code}","message":"{message}","type":"x"}}}}"#)
        };
        let cases = [
            (401, body("invalid_api_key", "Incorrect API key provided"), ModelErrorKind::Auth),
            (500, body("500", "The server had an error"), ModelErrorKind::Server),
            (
                400,
                r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":4096}}"#.to_owned(),
                ModelErrorKind::ContextOverflow,
            ),
            (400, body("invalid_value", "temperature too high"), ModelErrorKind::BadRequest),
        ];
        for (status, body, kind) in cases {
            let error = answer(
                ResponseTemplate::new(status).set_body_raw(body.clone(), "application/json"),
            )
            .await
            .unwrap_err();
            assert_eq!(error.kind, kind, "{body}");
            assert_eq!(error.status, Some(status));
            assert_eq!(error.retry_after, None);
        }
        let error = answer(ResponseTemplate::new(401).set_body_string("nope"))
            .await
            .unwrap_err();
        assert!(
            error.message.contains("apiKeySecretRef"),
            "{}",
            error.message
        );
        assert!(error.message.contains("nope"), "{}", error.message);
    }

    #[tokio::test]
    async fn an_error_inside_the_stream_is_typed() {
        let body = "data: {\"error\":{\"message\":\"This model's maximum context length is 2048 \
                    tokens\",\"type\":\"BadRequestError\",\"code\":400}}\n\n";
        let error = answer(sse(body)).await.unwrap_err();
        assert_eq!(error.kind, ModelErrorKind::ContextOverflow);
        let body = "data: {\"error\":{\"message\":\"overloaded\",\"code\":503}}\n\n";
        let error = answer(sse(body)).await.unwrap_err();
        assert_eq!(error.kind, ModelErrorKind::Server);
        assert_eq!(error.status, Some(503));
    }

    #[tokio::test]
    async fn a_stream_without_finish_reason_or_done_is_a_broken_stream() {
        let nothing = vec![delta_chunk(
            json!({"role": "assistant", "content": null}),
            None,
        )];
        let half_call = vec![delta_chunk(
            json!({"content": "Reading.", "tool_calls": [{"index": 0, "id": "c", "function": {"name": "ls", "arguments": "{\"pa"}}]}),
            None,
        )];
        let half_text = vec![delta_chunk(json!({"content": "Half an ans"}), None)];
        for chunks in [nothing, half_call, half_text] {
            let error = answer(sse(stream_of(&chunks, false))).await.unwrap_err();
            assert_eq!(error.kind, ModelErrorKind::Connection);
            assert!(error.is_retriable());
            assert!(error.message.contains("ended before"), "{}", error.message);
        }

        // Either end marker is enough.
        let done_only = vec![delta_chunk(json!({"content": "All done."}), None)];
        let message = answer(sse(stream_of(&done_only, true))).await.unwrap();
        assert_eq!(message.content, "All done.");
        let reason_only = vec![delta_chunk(json!({"content": "All done."}), Some("stop"))];
        let message = answer(sse(stream_of(&reason_only, false))).await.unwrap();
        assert_eq!(message.finish_reason, Some(FinishReason::Stop));
    }

    #[tokio::test]
    async fn a_call_without_a_name_is_kept_for_the_loop_to_answer() {
        let chunks = vec![delta_chunk(
            json!({"tool_calls": [{"index": 0, "id": "c1", "function": {"arguments": "{}"}}]}),
            Some("tool_calls"),
        )];
        let message = answer(sse(stream_of(&chunks, true))).await.unwrap();
        assert_eq!(message.tool_calls.len(), 1);
        assert_eq!(message.tool_calls[0].name, "");
        assert_eq!(message.tool_calls[0].id, "c1");
    }

    #[tokio::test]
    async fn an_event_over_the_cap_is_refused() {
        let big = "x".repeat(crate::model::MAX_EVENT_BYTES);
        let chunks = vec![delta_chunk(json!({"content": big}), Some("stop"))];
        let error = answer(sse(stream_of(&chunks, true))).await.unwrap_err();
        assert_eq!(error.kind, ModelErrorKind::InvalidResponse);
        assert!(
            error
                .message
                .ends_with("sent a stream event larger than 8 MiB"),
            "{}",
            error.message
        );
    }

    #[tokio::test]
    async fn garbage_chunks_are_invalid_responses() {
        let error = answer(sse("data: {not json\n\n")).await.unwrap_err();
        assert_eq!(error.kind, ModelErrorKind::InvalidResponse);
        assert!(error.message.contains("{not json"), "{}", error.message);
    }

    #[tokio::test]
    async fn a_silent_stream_hits_the_chunk_timeout() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 65536];
            let _ = socket.read(&mut buf).await.unwrap();
            let chunk = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n";
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                        transfer-encoding: chunked\r\n\r\n";
            let body = format!("{head}{:x}\r\n{chunk}\r\n", chunk.len());
            socket.write_all(body.as_bytes()).await.unwrap();
            tokio::time::sleep(Duration::from_secs(30)).await;
        });
        let mut config = config(&format!("http://{addr}/v1"));
        config.stream_chunk_timeout = Duration::from_millis(300);
        let (result, deltas) = run(&OpenAiModel::new(config).unwrap(), &plain_request()).await;
        let error = result.unwrap_err();
        assert_eq!(error.kind, ModelErrorKind::Timeout);
        assert!(error.message.contains("sent nothing"), "{}", error.message);
        assert_eq!(deltas, vec![StreamDelta::Text("Hel".into())]);
        server.abort();
    }

    #[tokio::test]
    async fn the_request_timeout_bounds_the_whole_call() {
        let mut config = config("http://unused/v1");
        let server = server(sse(PLAIN_STREAM).set_delay(Duration::from_secs(30))).await;
        config.base_url = format!("{}/v1", server.uri());
        config.request_timeout = Duration::from_millis(200);
        let (result, _) = run(&OpenAiModel::new(config).unwrap(), &plain_request()).await;
        assert_eq!(result.unwrap_err().kind, ModelErrorKind::Timeout);
    }
}
