//! OpenTelemetry traces of a run, following the GenAI semantic conventions: one
//! `invoke_agent {agent}` span per agent, one `chat {model}` span per model call, one
//! `execute_tool {tool}` span per tool call, one `sandbox {op}` span per round trip to the
//! sandbox ([`TracedExecutor`]), and the chain's decisions as span events. Spans go
//! to an OTLP/HTTP endpoint when the standard `OTEL_*` variables name one (see [`export`]); the
//! trace continues the one in `TRACEPARENT` (see [`propagation`]).

mod content;
pub mod export;
mod export_failures;
pub mod names;
pub mod propagation;
mod spans;
mod traced_executor;

pub use spans::{AgentSpan, ModelCallSpan, ToolCallSpan, record_decision};
pub use traced_executor::TracedExecutor;

use std::sync::Arc;

use opentelemetry::global::{self, BoxedTracer};

/// The name of the runner's tracer (the instrumentation scope of its spans).
pub const TRACER_NAME: &str = "herd-runner";

/// Where an agent's spans go and what they may record; cheap to clone, shared by the lead and
/// its in-process subagents.
#[derive(Clone)]
pub struct Telemetry {
    tracer: Arc<BoxedTracer>,
    /// The Agent's `observability.captureContent`: prompts, answers and tool text on spans.
    capture_content: bool,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry")
            .field("capture_content", &self.capture_content)
            .finish_non_exhaustive()
    }
}

impl Telemetry {
    /// The process's tracer (a no-op one unless [`export::init_from_env`] installed an
    /// exporter).
    pub fn global(capture_content: bool) -> Self {
        Telemetry {
            tracer: Arc::new(global::tracer(TRACER_NAME)),
            capture_content,
        }
    }

    /// Spans through `tracer` (tests use the SDK's in-memory exporter).
    pub fn with_tracer(tracer: BoxedTracer, capture_content: bool) -> Self {
        Telemetry {
            tracer: Arc::new(tracer),
            capture_content,
        }
    }
}

impl Default for Telemetry {
    fn default() -> Self {
        Telemetry::global(false)
    }
}
