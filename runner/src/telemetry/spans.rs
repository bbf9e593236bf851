//! The spans of the agent loop. Each is a child of the current OpenTelemetry context: the loop
//! runs an agent's turns inside its `invoke_agent` span's context, and each tool call inside
//! its `execute_tool` span's, so a subagent's spans nest under the `task` call that started it.

use std::sync::OnceLock;
use std::time::Instant;

use herd_crds::report::{StopReason, Usage};
use opentelemetry::global::BoxedTracer;
use opentelemetry::trace::{SpanKind, SpanRef, Status, TraceContextExt as _, Tracer as _};
use opentelemetry::{Array, Context, KeyValue, StringValue, Value};

use super::content::{truncated, truncated_json};
use super::{Telemetry, names};
use crate::model::{AgentRole, CallContext, ModelError, ModelRequest, Purpose};
use crate::thread::{AssistantMessage, FinishReason, ToolCall, ToolStatus};

/// An agent's `invoke_agent` span; its context is the parent of the agent's model and tool
/// call spans.
pub struct AgentSpan {
    cx: Context,
}

/// A `chat` span: one model call.
pub struct ModelCallSpan {
    cx: Context,
    capture_content: bool,
    started: Instant,
    first_chunk: OnceLock<f64>,
}

/// An `execute_tool` span: one tool call.
pub struct ToolCallSpan {
    cx: Context,
    capture_content: bool,
}

impl Telemetry {
    /// Starts `invoke_agent {agent}` under the current context.
    pub fn agent_span(&self, agent: &str, call: &CallContext) -> AgentSpan {
        let mut attributes = vec![
            KeyValue::new(names::OPERATION_NAME, "invoke_agent"),
            KeyValue::new(names::AGENT_NAME, agent.to_owned()),
            KeyValue::new(names::AGENT_ROLE, role_name(call.role)),
            KeyValue::new(names::RUN_ATTEMPT, i64::from(call.attempt)),
        ];
        if let Some(kind) = &call.subagent_type {
            attributes.push(KeyValue::new(names::SUBAGENT_TYPE, kind.clone()));
        }
        AgentSpan {
            cx: start(
                &self.tracer,
                format!("invoke_agent {agent}"),
                SpanKind::Internal,
                attributes,
            ),
        }
    }

    /// Starts `chat {model}` under the current context for `request`, sent to `model` of
    /// `provider`.
    pub fn model_call_span(
        &self,
        provider: &str,
        model: &str,
        request: &ModelRequest,
    ) -> ModelCallSpan {
        let mut attributes = vec![
            KeyValue::new(names::OPERATION_NAME, "chat"),
            KeyValue::new(names::PROVIDER_NAME, provider.to_owned()),
            KeyValue::new(names::REQUEST_MODEL, model.to_owned()),
            KeyValue::new(names::PURPOSE, purpose_name(request.context.purpose)),
        ];
        if let Some(max_tokens) = request.options.max_tokens {
            attributes.push(KeyValue::new(
                names::REQUEST_MAX_TOKENS,
                i64::from(max_tokens),
            ));
        }
        if let Some(temperature) = request.options.temperature {
            attributes.push(KeyValue::new(names::REQUEST_TEMPERATURE, temperature));
        }
        let content = || {
            [
                KeyValue::new(names::SYSTEM_INSTRUCTIONS, truncated(&request.system)),
                KeyValue::new(names::INPUT_MESSAGES, truncated_json(&request.messages)),
            ]
        };
        ModelCallSpan {
            cx: self.start_with_content(
                format!("chat {model}"),
                SpanKind::Client,
                attributes,
                content,
            ),
            capture_content: self.capture_content,
            started: Instant::now(),
            first_chunk: OnceLock::new(),
        }
    }

    /// Starts `execute_tool {tool}` under the current context for `call`.
    pub fn tool_call_span(&self, call: &ToolCall) -> ToolCallSpan {
        let attributes = vec![
            KeyValue::new(names::OPERATION_NAME, "execute_tool"),
            KeyValue::new(names::TOOL_NAME, call.name.clone()),
            KeyValue::new(names::TOOL_CALL_ID, call.id.clone()),
            KeyValue::new(names::TOOL_TYPE, "function"),
        ];
        ToolCallSpan {
            cx: self.start_with_content(
                format!("execute_tool {}", call.name),
                SpanKind::Internal,
                attributes,
                || {
                    [KeyValue::new(
                        names::TOOL_CALL_ARGUMENTS,
                        truncated(&call.arguments),
                    )]
                },
            ),
            capture_content: self.capture_content,
        }
    }

    /// Starts span `name` like [`start`], adding the `content` attributes (prompt text, tool
    /// arguments) only when the Agent opted in to capturing content.
    fn start_with_content<const N: usize>(
        &self,
        name: String,
        kind: SpanKind,
        mut attributes: Vec<KeyValue>,
        content: impl FnOnce() -> [KeyValue; N],
    ) -> Context {
        if self.capture_content {
            attributes.extend(content());
        }
        start(&self.tracer, name, kind, attributes)
    }
}

/// Starts span `name` of `kind` with `attributes` under the current context, and returns the
/// context it is current in.
fn start(tracer: &BoxedTracer, name: String, kind: SpanKind, attributes: Vec<KeyValue>) -> Context {
    let span = tracer
        .span_builder(name)
        .with_kind(kind)
        .with_attributes(attributes)
        .start(tracer);
    Context::current_with_span(span)
}

impl AgentSpan {
    /// The context the agent's calls run in.
    pub fn context(&self) -> Context {
        self.cx.clone()
    }

    /// Ends the span with how the agent stopped (`None`: the control plane failed) and what
    /// its thread used.
    pub fn finish(self, reason: Option<StopReason>, usage: &Usage, error: Option<&str>) {
        let span = self.cx.span();
        if let Some(reason) = reason {
            span.set_attribute(KeyValue::new(names::STOP_REASON, format!("{reason:?}")));
        }
        set_usage(&span, usage);
        if let Some(error) = error {
            span.set_status(Status::error(truncated(error)));
        }
        span.end();
    }
}

impl ModelCallSpan {
    /// The context the call runs in.
    pub fn context(&self) -> Context {
        self.cx.clone()
    }

    /// Notes the first streamed chunk (only the first counts).
    pub fn first_chunk(&self) {
        let _ = self
            .first_chunk
            .get_or_init(|| self.started.elapsed().as_secs_f64());
    }

    /// Ends the span with what the model answered, or why it failed.
    pub fn finish(self, result: &Result<AssistantMessage, ModelError>, model: &str) {
        let span = self.cx.span();
        if let Some(seconds) = self.first_chunk.get() {
            span.set_attribute(KeyValue::new(names::RESPONSE_TIME_TO_FIRST_CHUNK, *seconds));
        }
        match result {
            Ok(message) => {
                let answered_by = crate::model::response_model(message).unwrap_or(model);
                span.set_attribute(KeyValue::new(names::RESPONSE_MODEL, answered_by.to_owned()));
                if !message.id.is_empty() {
                    span.set_attribute(KeyValue::new(names::RESPONSE_ID, message.id.clone()));
                }
                if let Some(usage) = &message.usage {
                    set_usage(&span, usage);
                }
                if let Some(reason) = &message.finish_reason {
                    let reasons = vec![StringValue::from(finish_reason_name(reason))];
                    span.set_attribute(KeyValue::new(
                        names::RESPONSE_FINISH_REASONS,
                        Value::Array(Array::String(reasons)),
                    ));
                }
                if self.capture_content {
                    span.set_attribute(KeyValue::new(
                        names::OUTPUT_MESSAGES,
                        truncated_json(message),
                    ));
                }
            }
            Err(error) => {
                span.set_attribute(KeyValue::new(names::ERROR_TYPE, error_type(error)));
                span.set_status(Status::error(truncated(&error.message)));
            }
        }
        span.end();
    }
}

impl ToolCallSpan {
    /// The context the tool runs in.
    pub fn context(&self) -> Context {
        self.cx.clone()
    }

    /// Ends the span with the tool's outcome: its status and what it answered.
    pub fn finish(self, status: ToolStatus, content: &str) {
        let span = self.cx.span();
        let ok = status == ToolStatus::Success;
        span.set_attribute(KeyValue::new(
            names::TOOL_OUTCOME,
            if ok { "success" } else { "error" },
        ));
        if self.capture_content {
            span.set_attribute(KeyValue::new(names::TOOL_CALL_RESULT, truncated(content)));
        }
        if !ok {
            span.set_attribute(KeyValue::new(names::ERROR_TYPE, "tool_error"));
            span.set_status(Status::error("the tool call failed"));
        }
        span.end();
    }
}

/// A `sandbox {op}` span: one round trip to the sandbox, under the tool call that made it.
pub struct SandboxSpan {
    cx: Context,
}

/// Starts `sandbox {op}` under the current context, with the process's tracer (the sandbox
/// client is shared by every agent of the run).
pub fn sandbox_round_trip(op: &'static str) -> SandboxSpan {
    let tracer = opentelemetry::global::tracer(super::TRACER_NAME);
    SandboxSpan {
        cx: start(
            &tracer,
            format!("sandbox {op}"),
            SpanKind::Client,
            vec![KeyValue::new(names::SANDBOX_OPERATION, op)],
        ),
    }
}

impl SandboxSpan {
    /// Ends the span; `error` says why the round trip failed.
    pub fn finish(self, error: Option<&str>) {
        let span = self.cx.span();
        if let Some(error) = error {
            span.set_attribute(KeyValue::new(names::ERROR_TYPE, "sandbox_unavailable"));
            span.set_status(Status::error(truncated(error)));
        }
        span.end();
    }
}

/// Adds a span event to the current span: a chain decision that changed the run (a retry, a
/// loop warning, a summary, a budget stop).
pub fn record_decision(name: &'static str, message: &str) {
    Context::current().span().add_event(
        name,
        vec![KeyValue::new(names::MESSAGE, truncated(message))],
    );
}

fn role_name(role: AgentRole) -> &'static str {
    match role {
        AgentRole::Lead => "lead",
        AgentRole::Subagent => "subagent",
    }
}

fn purpose_name(purpose: Purpose) -> &'static str {
    match purpose {
        Purpose::Main => "main",
        Purpose::Title => "title",
        Purpose::Summary => "summary",
        Purpose::Memory => "memory",
    }
}

/// The conventions' finish reason names (OpenAI's, which the others map to).
fn finish_reason_name(reason: &FinishReason) -> String {
    match reason {
        FinishReason::Stop => "stop".to_owned(),
        FinishReason::Length => "length".to_owned(),
        FinishReason::ToolCalls => "tool_calls".to_owned(),
        FinishReason::ContentFilter => "content_filter".to_owned(),
        FinishReason::Refusal => "refusal".to_owned(),
        FinishReason::Other(other) => other.clone(),
    }
}

/// The error's kind as the conventions' `error.type` (`rate_limited`, `timeout`...).
fn error_type(error: &ModelError) -> String {
    match serde_json::to_value(error.kind) {
        Ok(serde_json::Value::String(kind)) => kind,
        _ => format!("{:?}", error.kind),
    }
}

/// Sets the conventions' input and output token counts of `usage` on `span`.
fn set_usage(span: &SpanRef<'_>, usage: &Usage) {
    span.set_attribute(KeyValue::new(
        names::USAGE_INPUT_TOKENS,
        saturating_i64(usage.input_tokens),
    ));
    span.set_attribute(KeyValue::new(
        names::USAGE_OUTPUT_TOKENS,
        saturating_i64(usage.output_tokens),
    ));
}

/// Token counts as OpenTelemetry's integer type.
fn saturating_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use opentelemetry::context::FutureExt as _;
    use opentelemetry::global::BoxedTracer;
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
    use serde_json::json;

    use super::*;
    use crate::test_doubles::{self, QueuedModel, RecordingControl, calls, text};
    use crate::tools::write_todos::WriteTodos;

    /// Runs a two-turn thread (a `write_todos` call, then an answer) and returns its spans.
    async fn traced(capture_content: bool) -> Vec<SpanData> {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let tracer = BoxedTracer::new(Box::new(provider.tracer("test")));
        // The answer names the dated model the provider says answered (an alias was asked).
        let mut answer = text("the answer");
        answer.meta.extra.insert(
            crate::model::RESPONSE_MODEL.to_owned(),
            json!("queued-2026-01-01"),
        );
        let model = QueuedModel::new(vec![
            calls(&[("write_todos", json!({"todos": []}))]),
            answer,
        ]);
        let (mut agent, env) = test_doubles::agent(
            model,
            vec![Arc::new(WriteTodos)],
            vec![],
            Arc::new(RecordingControl::default()),
        );
        agent.options.max_tokens = Some(256);
        agent.telemetry = Telemetry::with_tracer(tracer, capture_content);
        let mut state = crate::thread::ThreadState::new("a secret plan");
        agent
            .run(&mut state, &env)
            .with_context(Context::new())
            .await
            .unwrap();
        exporter.get_finished_spans().unwrap()
    }

    fn attributes(span: &SpanData) -> BTreeMap<String, String> {
        span.attributes
            .iter()
            .map(|kv| (kv.key.to_string(), kv.value.to_string()))
            .collect()
    }

    fn pinned(span: &SpanData) -> BTreeMap<String, String> {
        let mut pinned = attributes(span);
        pinned.remove(names::RESPONSE_TIME_TO_FIRST_CHUNK);
        pinned
    }

    #[tokio::test]
    async fn each_span_has_its_genai_name_attributes_and_parent() {
        let spans = traced(false).await;
        let names_seen: Vec<&str> = spans.iter().map(|span| span.name.as_ref()).collect();
        assert_eq!(
            names_seen,
            [
                "chat queued",
                "execute_tool write_todos",
                "chat queued",
                "invoke_agent lead"
            ]
        );
        let agent = &spans[3];
        assert_eq!(
            pinned(agent),
            BTreeMap::from([
                ("gen_ai.agent.name".into(), "lead".into()),
                ("gen_ai.operation.name".into(), "invoke_agent".into()),
                ("gen_ai.usage.input_tokens".into(), "10".into()),
                ("gen_ai.usage.output_tokens".into(), "5".into()),
                ("herd.agent.role".into(), "lead".into()),
                ("herd.run.attempt".into(), "0".into()),
                ("herd.stop_reason".into(), "Completed".into()),
            ])
        );
        // The answer's call: the queued model reports usage but no finish reason or id.
        assert_eq!(
            pinned(&spans[2]),
            BTreeMap::from([
                ("gen_ai.operation.name".into(), "chat".into()),
                ("gen_ai.provider.name".into(), "unknown".into()),
                ("gen_ai.request.max_tokens".into(), "256".into()),
                ("gen_ai.request.model".into(), "queued".into()),
                ("gen_ai.response.model".into(), "queued-2026-01-01".into()),
                ("gen_ai.usage.input_tokens".into(), "10".into()),
                ("gen_ai.usage.output_tokens".into(), "5".into()),
                ("herd.purpose".into(), "main".into()),
            ])
        );
        let tool = &spans[1];
        assert_eq!(
            pinned(tool),
            BTreeMap::from([
                ("gen_ai.operation.name".into(), "execute_tool".into()),
                (
                    "gen_ai.tool.call.id".into(),
                    tool.attributes
                        .iter()
                        .find(|kv| kv.key.as_str() == names::TOOL_CALL_ID)
                        .unwrap()
                        .value
                        .to_string()
                ),
                ("gen_ai.tool.name".into(), "write_todos".into()),
                ("gen_ai.tool.type".into(), "function".into()),
                ("herd.tool.outcome".into(), "success".into()),
            ])
        );
        for span in &spans[..3] {
            assert_eq!(span.parent_span_id, agent.span_context.span_id());
            assert_eq!(span.span_context.trace_id(), agent.span_context.trace_id());
        }
    }

    #[tokio::test]
    async fn a_chain_decision_is_an_event_of_the_span_it_happens_in() {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let telemetry =
            Telemetry::with_tracer(BoxedTracer::new(Box::new(provider.tracer("t"))), false);
        let span = telemetry.agent_span("lead", &CallContext::default());
        async { record_decision(names::EVENT_MODEL_RETRY, "429: retrying in 2 s") }
            .with_context(span.context())
            .await;
        span.finish(Some(StopReason::Completed), &Usage::default(), None);
        let spans = exporter.get_finished_spans().unwrap();
        let events: Vec<(String, String)> = spans[0]
            .events
            .iter()
            .map(|event| {
                (
                    event.name.to_string(),
                    event.attributes[0].value.to_string(),
                )
            })
            .collect();
        assert_eq!(
            events,
            [(
                "herd.model_retry".to_owned(),
                "429: retrying in 2 s".to_owned()
            )]
        );
    }

    #[tokio::test]
    async fn content_is_recorded_only_when_the_agent_opts_in() {
        let off = traced(false).await;
        for span in &off {
            let text = format!("{:?}", span.attributes);
            assert!(!text.contains("a secret plan"), "{text}");
            assert!(!text.contains("the answer"), "{text}");
        }
        let on = traced(true).await;
        let chat = attributes(&on[2]);
        assert!(chat[names::INPUT_MESSAGES].contains("a secret plan"));
        assert!(chat[names::OUTPUT_MESSAGES].contains("the answer"));
        assert!(attributes(&on[1]).contains_key(names::TOOL_CALL_ARGUMENTS));
    }
}
