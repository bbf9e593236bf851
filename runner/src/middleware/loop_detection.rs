//! LoopDetection (before_agent, after_model, wrap_model_call, after_agent): stops an agent
//! that keeps making the same tool calls.
//!
//! Two layers, as DeerFlow's: (1) each answer's tool calls are hashed (order-independent, on
//! the arguments that matter) and counted in a sliding window: a warning at 3 repeats, a hard
//! stop at 5; (2) calls per tool name are counted over the recent calls: a warning at 30, a
//! hard stop at 50 (catches reading 40 different files in a row). A warning is queued and
//! delivered with the next request only (see `reminders`); a hard stop strips the answer's
//! tool calls, appends a note and settles `StopReason::LoopDetected`.
//!
//! State is per run: the chain is built for each run and `before_agent` clears it anyway, so
//! nothing leaks between runs (DeerFlow bug #5344).
//!
//! Chain position: before SubagentLimit, TokenBudget and TerminalResponse. `after_model` runs
//! in reverse chain order, so SafetyFinishReason and TokenBudget act first (a safety stop
//! strips the calls, and this middleware then sees none and counts nothing), and SubagentLimit
//! trims excess `task` calls before they are counted here (DeerFlow counts first, so 50 `task`
//! calls in one answer hit the per-tool hard limit although at most `maxConcurrent` would
//! run). Its `wrap_model_call` must be inside LLMErrorHandling so a retried request still
//! carries the warning.

use crate::telemetry::{names, record_decision};
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use herd_crds::report::StopReason;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::agent::{Flow, Middleware, ModelCall, ModelNext, ModelResult};
use crate::thread::{MessageKind, ThreadState, ToolCall};

use super::shared::last_turn::{
    last_assistant, last_assistant_mut, settle_stop_reason, strip_tool_calls,
};
use super::shared::reminders::PendingReminders;

/// Answers whose tool-call hashes are remembered (DeerFlow's `window_size`).
pub const WINDOW: usize = 20;
/// Identical tool-call sets in the window that trigger a warning (`warn_threshold`).
pub const WARN_THRESHOLD: usize = 3;
/// Identical tool-call sets in the window that force a stop (`hard_limit`).
pub const HARD_LIMIT: usize = 5;
/// Calls of one tool that trigger a warning (`tool_freq_warn`).
pub const TOOL_FREQ_WARN: usize = 30;
/// Calls of one tool that force a stop (`tool_freq_hard_limit`).
pub const TOOL_FREQ_HARD_LIMIT: usize = 50;
/// Most warnings waiting for the next request (`_MAX_PENDING_WARNINGS_PER_RUN`).
pub const MAX_PENDING_WARNINGS: usize = 4;
/// `read_file` calls whose line ranges fall in the same bucket count as the same call.
const READ_BUCKET_LINES: i64 = 200;
/// Arguments that identify what a call is about; the rest (descriptions...) is noise.
const SALIENT_FIELDS: [&str; 7] = ["path", "url", "query", "command", "pattern", "glob", "cmd"];

/// Delivered with the next request when the same calls repeat.
pub const WARNING: &str = "[LOOP DETECTED] You are repeating the same tool calls. Stop calling tools and produce your final answer now. If you cannot complete the task, summarize what you accomplished so far.";
/// Appended to the answer whose tool calls were stripped.
pub const HARD_STOP: &str = "[FORCED STOP] Repeated tool calls exceeded the safety limit. Producing final answer with results collected so far.";

fn tool_warning(name: &str, count: usize) -> String {
    format!(
        "[LOOP DETECTED] You have called {name} {count} times without producing a final answer. Stop calling tools and produce your final answer now. If you cannot complete the task, summarize what you accomplished so far."
    )
}

fn tool_hard_stop(name: &str, count: usize) -> String {
    format!(
        "[FORCED STOP] Tool {name} called {count} times, exceeding the per-tool safety limit. Producing final answer with results collected so far."
    )
}

/// Thresholds (DeerFlow's `loop_detection` config).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoopSettings {
    pub window: usize,
    pub warn_threshold: usize,
    pub hard_limit: usize,
    pub tool_freq_warn: usize,
    pub tool_freq_hard_limit: usize,
    /// Per-tool `(warn, hard_limit)` replacing the two above for that tool.
    pub tool_freq_overrides: BTreeMap<String, (usize, usize)>,
}

impl Default for LoopSettings {
    fn default() -> Self {
        LoopSettings {
            window: WINDOW,
            warn_threshold: WARN_THRESHOLD,
            hard_limit: HARD_LIMIT,
            tool_freq_warn: TOOL_FREQ_WARN,
            tool_freq_hard_limit: TOOL_FREQ_HARD_LIMIT,
            tool_freq_overrides: BTreeMap::new(),
        }
    }
}

impl LoopSettings {
    fn tool_limits(&self, name: &str) -> (usize, usize) {
        self.tool_freq_overrides
            .get(name)
            .copied()
            .unwrap_or((self.tool_freq_warn, self.tool_freq_hard_limit))
    }

    /// Recent tool calls kept for the frequency layer: enough to ever reach a hard limit.
    fn tool_window(&self) -> usize {
        self.tool_freq_overrides
            .values()
            .map(|(_, hard)| *hard)
            .chain([self.tool_freq_hard_limit, self.window])
            .max()
            .unwrap_or(TOOL_FREQ_HARD_LIMIT)
    }
}

#[derive(Default)]
struct Tracker {
    hashes: VecDeque<String>,
    warned_hashes: HashSet<String>,
    tools: VecDeque<String>,
    warned_tools: HashSet<String>,
}

/// What one answer's calls amount to.
enum Verdict {
    Fine,
    Warn(Vec<String>),
    Stop(String),
}

/// Warns an agent that repeats its tool calls, then stops it.
pub struct LoopDetection {
    settings: LoopSettings,
    tracker: Mutex<Tracker>,
    pending: PendingReminders,
}

impl LoopDetection {
    /// Detection with `settings` (use `LoopSettings::default()` for DeerFlow's).
    pub fn new(settings: LoopSettings) -> Self {
        LoopDetection {
            settings,
            tracker: Mutex::new(Tracker::default()),
            pending: PendingReminders::new(MessageKind::LoopWarning, MAX_PENDING_WARNINGS),
        }
    }

    fn tracker(&self) -> MutexGuard<'_, Tracker> {
        self.tracker.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn judge(&self, calls: &[ToolCall]) -> Verdict {
        let settings = &self.settings;
        let hash = hash_calls(calls);
        let mut tracker = self.tracker();
        tracker.hashes.push_back(hash.clone());
        while tracker.hashes.len() > settings.window.max(1) {
            tracker.hashes.pop_front();
        }
        let Tracker {
            hashes,
            warned_hashes,
            tools,
            warned_tools,
        } = &mut *tracker;
        // A hash that left the window may warn again if it comes back.
        warned_hashes.retain(|warned| hashes.contains(warned));
        let repeats = hashes.iter().filter(|seen| **seen == hash).count();
        if repeats >= settings.hard_limit {
            tracing::error!(hash, repeats, "loop detected: forcing a stop");
            record_decision(
                names::EVENT_LOOP_STOP,
                &format!("{repeats} identical turns"),
            );
            return Verdict::Stop(HARD_STOP.to_owned());
        }
        let mut warnings = Vec::new();
        if repeats >= settings.warn_threshold && warned_hashes.insert(hash.clone()) {
            tracing::warn!(hash, repeats, "loop detected: warning the model");
            record_decision(
                names::EVENT_LOOP_WARNING,
                &format!("{repeats} identical turns"),
            );
            warnings.push(WARNING.to_owned());
        }
        let tool_window = settings.tool_window();
        for call in calls {
            if call.name.is_empty() {
                continue;
            }
            tools.push_back(call.name.clone());
            while tools.len() > tool_window {
                tools.pop_front();
            }
            let count = tools.iter().filter(|name| **name == call.name).count();
            let (warn, hard) = settings.tool_limits(&call.name);
            if count >= hard {
                tracing::error!(tool = %call.name, count, "tool frequency limit: forcing a stop");
                record_decision(
                    names::EVENT_LOOP_STOP,
                    &format!("{} called {count} times", call.name),
                );
                return Verdict::Stop(tool_hard_stop(&call.name, count));
            }
            if count >= warn && warned_tools.insert(call.name.clone()) {
                tracing::warn!(tool = %call.name, count, "tool frequency: warning the model");
                record_decision(
                    names::EVENT_LOOP_WARNING,
                    &format!("{} called {count} times", call.name),
                );
                warnings.push(tool_warning(&call.name, count));
            }
        }
        if warnings.is_empty() {
            Verdict::Fine
        } else {
            Verdict::Warn(warnings)
        }
    }

    fn reset(&self) {
        *self.tracker() = Tracker::default();
        self.pending.clear();
    }
}

#[async_trait]
impl Middleware for LoopDetection {
    fn name(&self) -> &'static str {
        "LoopDetection"
    }

    async fn before_agent(&self, _state: &mut ThreadState) -> Flow {
        self.reset();
        Flow::Continue
    }

    async fn after_model(&self, state: &mut ThreadState) -> Flow {
        let verdict = match last_assistant(state) {
            Some(message) if !message.tool_calls.is_empty() => self.judge(&message.tool_calls),
            _ => return Flow::Continue,
        };
        match verdict {
            Verdict::Fine => {}
            Verdict::Warn(warnings) => {
                for warning in warnings {
                    self.pending.push(warning);
                }
            }
            Verdict::Stop(note) => {
                if let Some(message) = last_assistant_mut(state) {
                    strip_tool_calls(message, &note);
                }
                settle_stop_reason(state, StopReason::LoopDetected);
            }
        }
        Flow::Continue
    }

    async fn wrap_model_call(&self, call: ModelCall<'_>, next: ModelNext<'_>) -> ModelResult {
        self.pending.deliver(call, next).await
    }

    async fn after_agent(&self, _state: &mut ThreadState) {
        // A warning the run did not get to deliver must not reach a later one.
        self.pending.clear();
    }
}

/// The first 12 hex digits of a SHA-256 over the sorted `name:stable_key` of each call, so
/// the same set of calls in any order hashes the same.
pub fn hash_calls(calls: &[ToolCall]) -> String {
    let mut keys: Vec<String> = calls
        .iter()
        .map(|call| format!("{}:{}", call.name, stable_key(&call.name, &call.arguments)))
        .collect();
    keys.sort();
    let digest = Sha256::digest(keys.join("\n").as_bytes());
    let mut hash = hex::encode(digest);
    hash.truncate(12);
    hash
}

/// What identifies a call: `read_file` by path and 200-line bucket; `write_file` and
/// `str_replace` by all their arguments (the same path is legitimately edited with new
/// content); anything else by its salient fields, or all arguments when it has none.
fn stable_key(name: &str, arguments: &str) -> String {
    let parsed = if arguments.trim().is_empty() {
        Ok(Value::Object(serde_json::Map::new()))
    } else {
        serde_json::from_str::<Value>(arguments)
    };
    let args = match parsed {
        Ok(Value::Object(args)) => args,
        Ok(other) => return canonical(&other),
        Err(_) => return arguments.to_owned(),
    };
    match name {
        "read_file" => {
            let path = args.get("path").and_then(Value::as_str).unwrap_or_default();
            let start = args.get("start_line").and_then(line_number).unwrap_or(1);
            let end = args.get("end_line").and_then(line_number).unwrap_or(start);
            let (low, high) = (start.min(end).max(1), start.max(end).max(1));
            format!(
                "{path}:{}-{}",
                (low - 1) / READ_BUCKET_LINES,
                (high - 1) / READ_BUCKET_LINES
            )
        }
        "write_file" | "str_replace" => canonical(&Value::Object(args)),
        _ => {
            let salient: serde_json::Map<String, Value> = SALIENT_FIELDS
                .iter()
                .filter_map(|field| {
                    args.get(*field)
                        .filter(|value| !value.is_null())
                        .map(|value| ((*field).to_owned(), value.clone()))
                })
                .collect();
            if salient.is_empty() {
                canonical(&Value::Object(args))
            } else {
                canonical(&Value::Object(salient))
            }
        }
    }
}

/// A line number given as a number or a numeric string.
fn line_number(value: &Value) -> Option<i64> {
    match value {
        Value::Number(number) => number
            .as_i64()
            .or_else(|| number.as_f64().map(|float| float as i64)),
        Value::String(text) => text.trim().parse().ok(),
        _ => None,
    }
}

/// JSON text with object keys sorted at every level, whatever the map's own order.
fn canonical(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let sorted: BTreeMap<&String, String> = map
                .iter()
                .map(|(key, value)| (key, canonical(value)))
                .collect();
            let fields: Vec<String> = sorted
                .into_iter()
                .map(|(key, value)| format!("{}:{value}", Value::String(key.clone())))
                .collect();
            format!("{{{}}}", fields.join(","))
        }
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(canonical).collect();
            format!("[{}]", items.join(","))
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::test_doubles::{self, QueuedModel, RecordingControl, calls, text};
    use crate::thread::Message;
    use crate::tools::write_todos::WriteTodos;

    fn call(name: &str, arguments: Value) -> ToolCall {
        ToolCall {
            id: format!("id-{name}"),
            name: name.into(),
            arguments: arguments.to_string(),
        }
    }

    fn key(name: &str, arguments: Value) -> String {
        stable_key(name, &arguments.to_string())
    }

    #[test]
    fn hashes_ignore_call_order_and_noise() {
        let a = call("bash", json!({"command": "ls", "description": "list"}));
        let b = call("web_search", json!({"query": "rust"}));
        let a_again = call(
            "bash",
            json!({"description": "look again", "command": "ls"}),
        );
        assert_eq!(
            hash_calls(&[a.clone(), b.clone()]),
            hash_calls(&[b, a_again])
        );
        assert_eq!(hash_calls(std::slice::from_ref(&a)).len(), 12);
        let other = call("bash", json!({"command": "ls -la"}));
        assert_ne!(hash_calls(&[a]), hash_calls(&[other]));
    }

    #[test]
    fn reads_in_the_same_200_line_bucket_are_the_same_call() {
        let first = key(
            "read_file",
            json!({"path": "/a", "start_line": 1, "end_line": 50}),
        );
        let second = key(
            "read_file",
            json!({"path": "/a", "start_line": "120", "end_line": 200}),
        );
        let next_bucket = key("read_file", json!({"path": "/a", "start_line": 201}));
        assert_eq!(first, second);
        assert_ne!(first, next_bucket);
        assert_eq!(key("read_file", json!({"path": "/a"})), "/a:0-0");
    }

    #[test]
    fn writes_are_keyed_by_their_content() {
        let one = key("write_file", json!({"path": "/o", "content": "v1"}));
        let two = key("write_file", json!({"path": "/o", "content": "v2"}));
        assert_ne!(one, two);
    }

    #[test]
    fn odd_arguments_still_get_a_key() {
        assert_eq!(stable_key("bash", "{not json"), "{not json");
        assert_eq!(stable_key("bash", ""), "{}");
        assert_eq!(stable_key("bash", "[1, 2]"), "[1,2]");
        assert_eq!(
            key("custom", json!({"b": {"z": 1, "a": 2}, "a": 0})),
            r#"{"a":0,"b":{"a":2,"z":1}}"#
        );
    }

    #[tokio::test]
    async fn repeated_calls_warn_at_three_and_stop_at_five_through_the_loop() {
        let repeat = || calls(&[("write_todos", json!({"todos": []}))]);
        let model = QueuedModel::new(vec![
            repeat(),
            repeat(),
            repeat(),
            repeat(),
            repeat(),
            text("unreached"),
        ]);
        let (agent, env) = test_doubles::agent(
            model.clone(),
            vec![Arc::new(WriteTodos)],
            vec![Arc::new(LoopDetection::new(LoopSettings::default()))],
            Arc::new(RecordingControl::default()),
        );
        let mut state = ThreadState::new("plan");
        let outcome = agent.run(&mut state, &env).await.unwrap();
        assert_eq!(outcome.stop_reason, StopReason::LoopDetected);
        assert!(
            outcome.answer.starts_with("[FORCED STOP]"),
            "{}",
            outcome.answer
        );

        let requests = model.requests();
        assert_eq!(requests.len(), 5);
        let warned: Vec<bool> = requests
            .iter()
            .map(|request| {
                request
                    .messages
                    .iter()
                    .any(|message| message.text().starts_with("[LOOP DETECTED]"))
            })
            .collect();
        assert_eq!(
            warned,
            [false, false, false, true, false],
            "warned once, after the third"
        );
        // The warning comes after the third call's result, never between a call and it.
        let fourth = &requests[3].messages;
        assert!(matches!(fourth[fourth.len() - 2], Message::Tool(_)));
        assert!(fourth[fourth.len() - 1].meta().hidden);

        let last = state.last_assistant().unwrap();
        assert!(
            last.tool_calls.is_empty(),
            "the fifth repeat's calls were stripped"
        );
        assert!(
            !state
                .messages
                .iter()
                .any(|m| m.text().starts_with("[LOOP DETECTED]")),
            "warnings are never persisted"
        );
    }

    #[tokio::test]
    async fn one_tool_called_too_often_warns_then_stops() {
        let settings = LoopSettings {
            tool_freq_overrides: BTreeMap::from([("bash".to_string(), (2, 3))]),
            ..LoopSettings::default()
        };
        let detection = LoopDetection::new(settings);
        let mut state = ThreadState::new("t");
        let mut stops = Vec::new();
        for index in 0..3 {
            let answer = calls(&[("bash", json!({"command": format!("cmd {index}")}))]);
            state.messages.push(Message::Assistant(answer));
            detection.after_model(&mut state).await;
            stops.push(state.stop_reason);
            if index == 1 {
                assert_eq!(detection.pending.len(), 1);
            }
        }
        assert_eq!(stops, [None, None, Some(StopReason::LoopDetected)]);
        let last = state.last_assistant().unwrap();
        assert!(
            last.content.contains("Tool bash called 3 times"),
            "{}",
            last.content
        );
    }

    #[tokio::test]
    async fn a_new_run_starts_with_a_clean_slate() {
        let detection = LoopDetection::new(LoopSettings::default());
        let mut state = ThreadState::new("t");
        for _ in 0..WARN_THRESHOLD {
            state
                .messages
                .push(Message::Assistant(calls(&[("ls", json!({"path": "/"}))])));
            detection.after_model(&mut state).await;
        }
        assert_eq!(detection.pending.len(), 1);
        detection.before_agent(&mut state).await;
        assert!(detection.pending.is_empty());
        for _ in 0..HARD_LIMIT - 1 {
            state
                .messages
                .push(Message::Assistant(calls(&[("ls", json!({"path": "/"}))])));
            detection.after_model(&mut state).await;
        }
        assert_eq!(state.stop_reason, None, "earlier repeats were forgotten");
    }

    #[tokio::test]
    async fn answers_without_calls_are_not_counted() {
        let detection = LoopDetection::new(LoopSettings::default());
        let mut state = ThreadState::new("t");
        for _ in 0..10 {
            state.messages.push(Message::Assistant(text("same")));
            detection.after_model(&mut state).await;
        }
        assert!(detection.tracker().hashes.is_empty());
        assert_eq!(state.stop_reason, None);
    }
}
