//! UsageAndProgress (DeerFlow's `TokenUsageMiddleware`, plus progress reports;
//! wrap_model_call, after_model, after_agent): logs every model call's usage and reports the
//! run's progress (title, todos, usage) to the control plane.
//!
//! Usage comes from the provider. When a provider reports none (some streaming endpoints,
//! DeerFlow #1602), it is estimated at four characters per token from the request and the
//! answer, and the answer's `meta.extra.usage_estimated` says so. The estimate is set on the
//! answer inside `wrap_model_call`, so the loop adds it to `state.usage` like reported usage
//! and the budget and summarization see it.
//!
//! Each report also carries the attempt's call statistics for the operator's metrics: how long
//! the latest answered model calls took (numbered, so each counts once) and how many tool
//! calls of each tool ended well or in an error (MCP tools as one `mcp`).
//!
//! Progress reports are coalesced: at most one per second (the operator writes Run status no
//! faster), the latest state wins, and whatever is still unsent when the run ends goes out in
//! `after_agent`. `seq` increases across processes too (it starts from the clock), so the
//! run API never takes a resumed pod's report for a stale one.
//!
//! Chain position (DeerFlow #21): after Todo, before Title. `after_model` runs in reverse chain
//! order, so Title has set the title by the time this reports it, and the guards (budget,
//! loop, subagent limit, terminal response) have already edited the answer. Its
//! `wrap_model_call` is inside LLMErrorHandling, so only the attempt that answered is logged.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use herd_crds::report::{Todo, Usage};
use herd_crds::wire::{
    CallStats, MAX_TIMED_CALLS, MAX_TOOL_COUNTS, ProgressReport, TimedCall, ToolCount,
};
use tokio::time::Instant;

use crate::agent::{Flow, Middleware, ModelCall, ModelNext, ModelResult, ToolNext, ToolRequest};
use crate::control::ControlPlane;
use crate::mcp::names::SEPARATOR as MCP_SEPARATOR;
use crate::model::ModelRequest;
use crate::thread::{AssistantMessage, Message, ThreadState, ToolStatus};
use crate::tools::ToolOutput;

/// Shortest time between two progress reports.
pub const REPORT_INTERVAL: Duration = Duration::from_secs(1);
/// Characters per token for estimates (the usual rule of thumb for English text and code).
pub const CHARS_PER_TOKEN: u64 = 4;

/// Where progress goes.
struct Progress {
    control: Arc<dyn ControlPlane>,
    attempt: u32,
}

/// What was last reported, and what still waits.
#[derive(Default)]
struct Reporting {
    last_sent_at: Option<Instant>,
    last_seq: u64,
    last_sent: Option<(Option<String>, Vec<Todo>, Usage)>,
    unsent: Option<(Option<String>, Vec<Todo>, Usage)>,
}

/// The attempt's calls, for [`CallStats`].
#[derive(Default)]
struct CallLog {
    answered: u64,
    recent: VecDeque<TimedCall>,
    tools: BTreeMap<(String, &'static str), u64>,
}

impl CallLog {
    fn stats(&self) -> CallStats {
        CallStats {
            model_calls: self.recent.iter().copied().collect(),
            tool_calls: self
                .tools
                .iter()
                .map(|((tool, outcome), count)| ToolCount {
                    tool: tool.clone(),
                    outcome: (*outcome).to_owned(),
                    count: *count,
                })
                .collect(),
        }
    }
}

/// The tool's label in metrics: a built-in tool's name, `mcp` for an MCP server's tool.
fn tool_label(name: &str) -> String {
    if name.contains(MCP_SEPARATOR) {
        "mcp".to_owned()
    } else {
        name.chars().take(64).collect()
    }
}

/// Logs each model call's usage and reports the lead's progress, at most once a second.
pub struct UsageAndProgress {
    agent: String,
    progress: Option<Progress>,
    reporting: Mutex<Reporting>,
    calls: Mutex<CallLog>,
}

impl UsageAndProgress {
    /// Logs usage for `agent` and reports progress for the Run's `attempt` to `control`.
    pub fn new(agent: impl Into<String>, control: Arc<dyn ControlPlane>, attempt: u32) -> Self {
        UsageAndProgress {
            agent: agent.into(),
            progress: Some(Progress { control, attempt }),
            reporting: Mutex::new(Reporting::default()),
            calls: Mutex::default(),
        }
    }

    /// Logs usage only (for subagents, whose progress is their parent's business).
    pub fn log_only(agent: impl Into<String>) -> Self {
        UsageAndProgress {
            agent: agent.into(),
            progress: None,
            reporting: Mutex::new(Reporting::default()),
            calls: Mutex::default(),
        }
    }

    fn calls(&self) -> MutexGuard<'_, CallLog> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes an answered model call that took `took`.
    fn note_model_call(&self, took: Duration) {
        let mut calls = self.calls();
        calls.answered += 1;
        let n = calls.answered;
        calls.recent.push_back(TimedCall {
            n,
            millis: u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
        });
        while calls.recent.len() > MAX_TIMED_CALLS {
            calls.recent.pop_front();
        }
    }

    /// Notes a tool call of `tool` that ended with `status`.
    fn note_tool_call(&self, tool: &str, status: ToolStatus) {
        let outcome = match status {
            ToolStatus::Success => "ok",
            ToolStatus::Error => "error",
        };
        let mut calls = self.calls();
        let key = (tool_label(tool), outcome);
        if calls.tools.contains_key(&key) || calls.tools.len() < MAX_TOOL_COUNTS {
            *calls.tools.entry(key).or_insert(0) += 1;
        }
    }

    fn reporting(&self) -> MutexGuard<'_, Reporting> {
        self.reporting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The report to send now, if one is due; otherwise the snapshot waits as `unsent`.
    fn due(
        &self,
        snapshot: (Option<String>, Vec<Todo>, Usage),
        force: bool,
    ) -> Option<ProgressReport> {
        let progress = self.progress.as_ref()?;
        let mut reporting = self.reporting();
        if reporting.last_sent.as_ref() == Some(&snapshot) {
            reporting.unsent = None;
            return None;
        }
        let now = Instant::now();
        let waited_enough = reporting
            .last_sent_at
            .is_none_or(|at| now.duration_since(at) >= REPORT_INTERVAL);
        if !force && !waited_enough {
            reporting.unsent = Some(snapshot);
            return None;
        }
        let seq = reporting.last_seq.saturating_add(1).max(clock_millis());
        reporting.last_seq = seq;
        reporting.last_sent_at = Some(now);
        reporting.unsent = None;
        reporting.last_sent = Some(snapshot.clone());
        let (title, todos, usage) = snapshot;
        Some(ProgressReport {
            attempt: progress.attempt,
            seq,
            title,
            todos,
            usage,
            calls: self.calls().stats(),
        })
    }

    async fn send(&self, report: ProgressReport) {
        let Some(progress) = &self.progress else {
            return;
        };
        if let Err(error) = progress.control.report_progress(report).await {
            // Progress is best effort: the final result carries the same data.
            tracing::warn!(agent = %self.agent, %error, "could not report progress");
        }
    }
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
fn clock_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

fn chars(text: &str) -> u64 {
    text.chars().count() as u64
}

fn message_chars(message: &Message) -> u64 {
    let calls = message.as_assistant().map_or(0, |assistant| {
        assistant
            .tool_calls
            .iter()
            .map(|call| chars(&call.name) + chars(&call.arguments))
            .sum()
    });
    chars(message.text()) + calls
}

/// Characters the model reads: system prompt, messages and tool schemas.
fn input_chars(request: &ModelRequest) -> u64 {
    let tools: u64 = request
        .tools
        .iter()
        .map(|tool| chars(&tool.name) + chars(&tool.description) + json_chars(&tool.parameters))
        .sum();
    chars(&request.system) + request.messages.iter().map(message_chars).sum::<u64>() + tools
}

/// About the length of `value` as compact JSON, without serializing it (this runs on every
/// model call).
fn json_chars(value: &serde_json::Value) -> u64 {
    use serde_json::Value;
    match value {
        Value::Null | Value::Bool(_) | Value::Number(_) => 4,
        Value::String(text) => chars(text) + 2,
        Value::Array(items) => 2 + items.iter().map(|item| json_chars(item) + 1).sum::<u64>(),
        Value::Object(fields) => {
            2 + fields
                .iter()
                .map(|(key, item)| chars(key) + 4 + json_chars(item))
                .sum::<u64>()
        }
    }
}

/// The estimate from the request's size (counted before it was handed on) and the answer.
fn estimate_from_input(input: u64, answer: &AssistantMessage) -> Usage {
    let output = chars(&answer.content)
        + answer.reasoning.as_deref().map_or(0, chars)
        + answer
            .tool_calls
            .iter()
            .map(|call| chars(&call.name) + chars(&call.arguments))
            .sum::<u64>();
    Usage {
        input_tokens: input.div_ceil(CHARS_PER_TOKEN),
        output_tokens: output.div_ceil(CHARS_PER_TOKEN),
        ..Usage::default()
    }
}

#[async_trait]
impl Middleware for UsageAndProgress {
    fn name(&self) -> &'static str {
        "UsageAndProgress"
    }

    async fn wrap_model_call(&self, call: ModelCall<'_>, next: ModelNext<'_>) -> ModelResult {
        // Counted now rather than cloning the request: the estimate is only needed when the
        // provider reports no usage, and a clone of a long thread costs far more than a count.
        let input = input_chars(&call.request);
        let call_number = call.state.usage.model_calls.saturating_add(1);
        let started = Instant::now();
        let mut answer = next.run(call).await?;
        self.note_model_call(started.elapsed());
        let estimated = answer.usage.is_none();
        if estimated {
            answer.usage = Some(estimate_from_input(input, &answer));
            answer
                .meta
                .extra
                .insert("usage_estimated".into(), serde_json::Value::Bool(true));
        }
        let usage = answer.usage.clone().unwrap_or_default();
        tracing::info!(
            agent = %self.agent,
            call = call_number,
            input_tokens = usage.input_tokens,
            output_tokens = usage.output_tokens,
            estimated,
            "model call usage"
        );
        Ok(answer)
    }

    async fn wrap_tool_call(&self, request: ToolRequest<'_>, next: ToolNext<'_>) -> ToolOutput {
        let tool = request.call.name.clone();
        let output = next.run(request).await;
        self.note_tool_call(&tool, output.status);
        output
    }

    async fn after_model(&self, state: &mut ThreadState) -> Flow {
        let snapshot = (
            state.title.clone(),
            state.todos.clone(),
            state.usage_with_children(),
        );
        if let Some(report) = self.due(snapshot, false) {
            self.send(report).await;
        }
        Flow::Continue
    }

    async fn after_agent(&self, state: &mut ThreadState) {
        let unsent = self.reporting().unsent.is_some();
        if !unsent {
            return;
        }
        let snapshot = (
            state.title.clone(),
            state.todos.clone(),
            state.usage_with_children(),
        );
        if let Some(report) = self.due(snapshot, true) {
            self.send(report).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use herd_crds::report::TodoStatus;
    use serde_json::json;

    use super::*;
    use crate::test_doubles::{self, QueuedModel, RecordingControl, text};

    #[tokio::test]
    async fn missing_usage_is_estimated_and_marked() {
        let mut silent = text("12345678");
        silent.usage = None;
        let model = QueuedModel::new(vec![silent]);
        let (agent, env) =
            test_doubles::middleware_agent(model, Arc::new(UsageAndProgress::log_only("lead")));
        let mut state = ThreadState::new("abcd");
        agent.run(&mut state, &env).await.unwrap();
        let answer = state.last_assistant().unwrap();
        assert_eq!(answer.meta.extra.get("usage_estimated"), Some(&json!(true)));
        // "You are a test agent." (21) + "abcd" (4) = 25 chars → 7 tokens; 8 chars → 2.
        assert_eq!(state.usage.input_tokens, 7);
        assert_eq!(state.usage.output_tokens, 2);
    }

    #[tokio::test]
    async fn reported_usage_is_kept() {
        let model = QueuedModel::new(vec![text("hi")]);
        let (agent, env) =
            test_doubles::middleware_agent(model, Arc::new(UsageAndProgress::log_only("lead")));
        let mut state = ThreadState::new("t");
        agent.run(&mut state, &env).await.unwrap();
        assert_eq!(
            (state.usage.input_tokens, state.usage.output_tokens),
            (10, 5)
        );
        assert!(state.last_assistant().unwrap().meta.extra.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn progress_is_coalesced_to_one_report_per_second_and_flushed_at_the_end() {
        let log = Arc::new(RecordingControl::default());
        let middleware = UsageAndProgress::new("lead", log.clone(), 2);
        let mut state = ThreadState::new("t");
        for calls in 1..=3 {
            state.usage.model_calls = calls;
            middleware.after_model(&mut state).await;
        }
        assert_eq!(
            log.progress.lock().unwrap().len(),
            1,
            "the first goes out at once"
        );

        tokio::time::advance(REPORT_INTERVAL).await;
        state.title = Some("A title".into());
        state.todos = vec![Todo {
            content: "step".into(),
            status: TodoStatus::InProgress,
        }];
        state.usage.model_calls = 4;
        middleware.after_model(&mut state).await;
        state.usage.model_calls = 5;
        middleware.after_model(&mut state).await;
        middleware.after_agent(&mut state).await;
        middleware.after_agent(&mut state).await;

        let reports = log.progress.lock().unwrap().clone();
        let calls: Vec<u32> = reports.iter().map(|r| r.usage.model_calls).collect();
        assert_eq!(
            calls,
            [1, 4, 5],
            "latest state wins; the tail is flushed once"
        );
        assert!(reports.windows(2).all(|pair| pair[0].seq < pair[1].seq));
        assert!(
            reports[0].seq >= 1_600_000_000_000,
            "seq starts from the clock"
        );
        assert_eq!(reports[1].title.as_deref(), Some("A title"));
        assert_eq!(reports[1].todos.len(), 1);
        assert!(reports.iter().all(|r| r.attempt == 2));
    }

    #[tokio::test(start_paused = true)]
    async fn unchanged_progress_is_not_reported_again() {
        let log = Arc::new(RecordingControl::default());
        let middleware = UsageAndProgress::new("lead", log.clone(), 1);
        let mut state = ThreadState::new("t");
        middleware.after_model(&mut state).await;
        tokio::time::advance(REPORT_INTERVAL).await;
        middleware.after_model(&mut state).await;
        middleware.after_agent(&mut state).await;
        assert_eq!(log.progress.lock().unwrap().len(), 1);
    }
}
