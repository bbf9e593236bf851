//! The `scripted` model: replays a YAML script, for tests and offline demos.
//!
//! A script is a list of rules. For each call the first rule whose `match` fits and which has
//! uses left (`times`) answers with its `respond`; when none fits the call fails with a
//! [`ModelErrorKind::NoScriptMatch`] error describing the call, so a script that drifted from
//! the agent fails loudly instead of looping.
//!
//! ```yaml
//! rules:
//!   # Titles, summaries and memory updates are separate calls with their own purpose.
//!   - match: {purpose: title}
//!     respond: {content: "Trip to Lisbon"}
//!   # `call` is the 1-based number of this main call in the thread (assistant messages + 1).
//!   - match: {role: lead, call: 1}
//!     respond:
//!       reasoning: "Plan first."
//!       content: "Let me plan this."
//!       toolCalls:
//!         - name: write_todos
//!           arguments: {todos: [{content: "Book flights", status: in_progress}]}
//!   # A rule with `times` is used at most that many times: here, fail once to test retries.
//!   - match: {role: lead, call: 2}
//!     times: 1
//!     respond:
//!       error: {kind: rateLimited, status: 429, message: "slow down", retryAfterSeconds: 1}
//!   - match:
//!       role: subagent
//!       subagentType: general-purpose
//!       lastMessage: {role: user, regex: "(?i)flights?"}
//!     respond: {content: "Flights booked.", usage: {inputTokens: 120, outputTokens: 4}}
//!   - match: {lastMessage: {role: tool, contains: "Flights booked"}}
//!     respond: {content: "All done.", finishReason: stop}
//! ```
//!
//! `match` keys (all optional, all must hold): `role` (`lead`|`subagent`), `subagentType`,
//! `purpose` (`main`|`title`|`summary`|`memory`), `attempt` (the Run's attempt), `call` (for
//! `main` calls the number of assistant messages in the thread + 1; for the other purposes
//! the number of calls of that purpose so far, counted per role and subagent type),
//! `lastMessage` {`role` (`system`|`user`|`assistant`|`tool`), `contains`, `regex`} on the
//! request's last message, hidden reminders included; `anyMessage` (same keys) on any message
//! of the request — e.g. to check that injected memory reached the model.
//!
//! `respond` keys: `content`, `reasoning`, `toolCalls` [{`name`, `arguments`: any YAML value,
//! or a string sent as-is — handy for testing malformed arguments}], `finishReason` (`stop`,
//! `length`, `tool_calls`... default `tool_calls` when there are tool calls, else `stop`),
//! `usage` {`inputTokens`, `outputTokens` (estimated as characters / 4 when absent),
//! `cachedInputTokens` (the part of the input read from a cache; absent: 0)}, or
//! `error` {`kind` (`rateLimited`, `server`, `connection`, `timeout`, `auth`, `quota`,
//! `contextOverflow`, `badRequest`, `invalidResponse`), `status`, `message`,
//! `retryAfterSeconds`} instead of an answer.
//!
//! Tool call ids are `call_<assistant messages>_<index>` (bumped past any id already in the
//! thread, so they stay unique after summarization). One model serves parallel subagents:
//! the state (`times` uses, per-purpose counts) sits behind a lock.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use herd_crds::report::Usage;
use herd_sandbox::truncation::truncate_chars;
use regex::Regex;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::error::{ModelError, ModelErrorKind};
use super::{AgentRole, CallContext, ChatModel, DeltaSink, ModelRequest, Purpose, StreamDelta};
use crate::thread::{AssistantMessage, FinishReason, Message, ToolCall};

/// How much of the last message a no-match error quotes.
const QUOTE_CHARS: usize = 200;

/// A script that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    #[error("cannot read the model script {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the model script is not valid YAML: {0}")]
    Yaml(String),
    /// A field is wrong; `path` is like `rules[2].respond.toolCalls[0].name`.
    #[error("invalid model script at `{path}`: {message}")]
    Invalid { path: String, message: String },
}

fn invalid(path: &str, message: impl Into<String>) -> ScriptError {
    ScriptError::Invalid {
        path: path.to_owned(),
        message: message.into(),
    }
}

/// The role of the message `lastMessage.role` looks at.
#[derive(Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum MessageRole {
    System,
    User,
    Assistant,
    Tool,
}

impl MessageRole {
    fn of(message: &Message) -> MessageRole {
        match message {
            Message::System(_) => MessageRole::System,
            Message::User(_) => MessageRole::User,
            Message::Assistant(_) => MessageRole::Assistant,
            Message::Tool(_) => MessageRole::Tool,
        }
    }
}

#[derive(Debug, Default)]
struct MessageMatcher {
    role: Option<MessageRole>,
    contains: Option<String>,
    regex: Option<Regex>,
}

impl MessageMatcher {
    fn matches(&self, message: &Message) -> bool {
        let text = message.text();
        self.role
            .is_none_or(|role| role == MessageRole::of(message))
            && self.contains.as_deref().is_none_or(|c| text.contains(c))
            && self.regex.as_ref().is_none_or(|r| r.is_match(text))
    }
}

#[derive(Debug, Default)]
struct Matcher {
    role: Option<AgentRole>,
    subagent_type: Option<String>,
    purpose: Option<Purpose>,
    attempt: Option<u32>,
    call: Option<u32>,
    last_message: Option<MessageMatcher>,
    any_message: Option<MessageMatcher>,
}

impl Matcher {
    fn matches(&self, context: &CallContext, call: u32, messages: &[Message]) -> bool {
        wants(&self.role, context.role)
            && wants(&self.purpose, context.purpose)
            && wants(&self.attempt, context.attempt)
            && wants(&self.call, call)
            && self
                .subagent_type
                .as_deref()
                .is_none_or(|want| context.subagent_type.as_deref() == Some(want))
            && self
                .last_message
                .as_ref()
                .is_none_or(|want| messages.last().is_some_and(|m| want.matches(m)))
            && self
                .any_message
                .as_ref()
                .is_none_or(|want| messages.iter().any(|m| want.matches(m)))
    }
}

/// Whether an optional matcher field accepts `have` (an absent field accepts anything).
fn wants<T: PartialEq>(want: &Option<T>, have: T) -> bool {
    want.as_ref().is_none_or(|w| *w == have)
}

#[derive(Deserialize, Debug, Default, Clone, Copy)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct UsageSpec {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cached_input_tokens: Option<u64>,
}

#[derive(Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ErrorSpec {
    kind: ModelErrorKind,
    status: Option<u16>,
    message: Option<String>,
    retry_after_seconds: Option<f64>,
}

#[derive(Debug, Default)]
struct Response {
    content: String,
    reasoning: Option<String>,
    /// Name and raw arguments text.
    tool_calls: Vec<(String, String)>,
    finish_reason: Option<FinishReason>,
    usage: Option<UsageSpec>,
    error: Option<ErrorSpec>,
}

impl ErrorSpec {
    /// The error rule `index` answers with.
    fn error(&self, index: usize) -> ModelError {
        ModelError {
            kind: self.kind,
            status: self.status,
            retry_after: self
                .retry_after_seconds
                .and_then(|s| Duration::try_from_secs_f64(s).ok()),
            message: self
                .message
                .clone()
                .unwrap_or_else(|| format!("scripted error from rules[{index}]")),
        }
    }
}

impl Response {
    /// The usage of this answer to `request` with `tool_calls`: what the rule gives, the rest
    /// estimated from the characters in and out.
    fn usage(&self, request: &ModelRequest, tool_calls: &[ToolCall]) -> Usage {
        let output_chars = self.content.chars().count()
            + self.reasoning.as_deref().map_or(0, |r| r.chars().count())
            + tool_calls
                .iter()
                .map(|c| c.name.len() + c.arguments.chars().count())
                .sum::<usize>();
        let given = self.usage.unwrap_or_default();
        Usage {
            input_tokens: given
                .input_tokens
                .unwrap_or_else(|| estimate_tokens(input_chars(request))),
            output_tokens: given
                .output_tokens
                .unwrap_or_else(|| estimate_tokens(output_chars)),
            cached_input_tokens: given.cached_input_tokens.unwrap_or(0),
            ..Usage::default()
        }
    }
}

#[derive(Debug)]
struct Rule {
    matcher: Matcher,
    respond: Response,
    times: Option<u32>,
}

/// Counters shared by every call to one model.
#[derive(Debug, Default)]
struct State {
    /// Uses of each rule.
    uses: Vec<u32>,
    /// Calls per (role, subagent type, purpose), for the non-main `call` matcher.
    purpose_calls: HashMap<(AgentRole, Option<String>, Purpose), u32>,
}

/// A model that answers from a script. See the module docs for the format.
#[derive(Debug)]
pub struct ScriptedModel {
    name: String,
    rules: Vec<Rule>,
    state: Mutex<State>,
}

impl ScriptedModel {
    /// Parses a script (YAML text).
    pub fn from_yaml(text: &str) -> Result<Self, ScriptError> {
        let value: Value =
            serde_saphyr::from_str(text).map_err(|e| ScriptError::Yaml(e.to_string()))?;
        let top = object(&value, "", &["rules"])?;
        let rules = match top.get("rules") {
            Some(Value::Array(rules)) => rules,
            Some(_) => return Err(invalid("rules", "must be a list of rules")),
            None => return Err(invalid("rules", "is required")),
        };
        let rules = rules
            .iter()
            .enumerate()
            .map(|(i, rule)| parse_rule(rule, &format!("rules[{i}]")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ScriptedModel {
            name: "scripted".into(),
            state: Mutex::new(State {
                uses: vec![0; rules.len()],
                purpose_calls: HashMap::new(),
            }),
            rules,
        })
    }

    /// Reads and parses a script file.
    pub fn from_file(path: &Path) -> Result<Self, ScriptError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Read {
            path: path.to_owned(),
            source,
        })?;
        ScriptedModel::from_yaml(&text)
    }

    /// The name reported by [`ChatModel::name`] (default `scripted`).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Picks the rule for this call and counts its use.
    fn choose(&self, request: &ModelRequest, assistants: usize) -> Result<usize, ModelError> {
        let context = &request.context;
        let last = request.messages.last();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let call = match context.purpose {
            Purpose::Main => u32::try_from(assistants + 1).unwrap_or(u32::MAX),
            purpose => {
                let key = (context.role, context.subagent_type.clone(), purpose);
                let count = state.purpose_calls.entry(key).or_insert(0);
                *count = count.saturating_add(1);
                *count
            }
        };
        let mut used_up = Vec::new();
        for (index, rule) in self.rules.iter().enumerate() {
            if !rule.matcher.matches(context, call, &request.messages) {
                continue;
            }
            let uses = state.uses.get(index).copied().unwrap_or(0);
            if rule.times.is_some_and(|times| uses >= times) {
                used_up.push(format!("rules[{index}]"));
                continue;
            }
            if let Some(slot) = state.uses.get_mut(index) {
                *slot += 1;
            }
            return Ok(index);
        }
        Err(no_match(context, call, last, &used_up))
    }
}

fn no_match(
    context: &CallContext,
    call: u32,
    last: Option<&Message>,
    used_up: &[String],
) -> ModelError {
    let lower = |v: &dyn std::fmt::Debug| format!("{v:?}").to_lowercase();
    let mut message = format!(
        "scripted model: no rule matches this call (role: {}, subagentType: {}, purpose: {}, \
         attempt: {}, call: {call})",
        lower(&context.role),
        context.subagent_type.as_deref().unwrap_or("-"),
        lower(&context.purpose),
        context.attempt,
    );
    match last {
        Some(last) => {
            let text = last.text();
            let quote = truncate_chars(text, QUOTE_CHARS);
            message.push_str(&format!(
                "; last message ({}): {quote:?}",
                lower(&MessageRole::of(last))
            ));
        }
        None => message.push_str("; the thread is empty"),
    }
    if !used_up.is_empty() {
        message.push_str(&format!(
            "; {} matched but used up their `times`",
            used_up.join(", ")
        ));
    }
    message.push_str(". Add a rule for it to the script");
    ModelError::new(ModelErrorKind::NoScriptMatch, message)
}

/// `value` as a mapping whose keys are all in `allowed`.
fn object<'a>(
    value: &'a Value,
    path: &str,
    allowed: &[&str],
) -> Result<&'a Map<String, Value>, ScriptError> {
    let display = if path.is_empty() { "(top)" } else { path };
    let map = value
        .as_object()
        .ok_or_else(|| invalid(display, "must be a mapping"))?;
    if let Some(key) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(invalid(
            &join(path, key),
            format!("unknown field (expected one of: {})", allowed.join(", ")),
        ));
    }
    Ok(map)
}

/// Deserializes `map[key]`, naming the field in the error.
fn field<T: DeserializeOwned>(
    map: &Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<Option<T>, ScriptError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => serde_json::from_value(value.clone())
            .map(Some)
            .map_err(|e| invalid(&join(path, key), e.to_string())),
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn parse_rule(value: &Value, path: &str) -> Result<Rule, ScriptError> {
    let map = object(value, path, &["match", "respond", "times"])?;
    let matcher = match map.get("match") {
        None | Some(Value::Null) => Matcher::default(),
        Some(value) => parse_matcher(value, &join(path, "match"))?,
    };
    let respond = match map.get("respond") {
        Some(value) => parse_response(value, &join(path, "respond"))?,
        None => return Err(invalid(&join(path, "respond"), "is required")),
    };
    let times = field::<u32>(map, "times", path)?;
    if times == Some(0) {
        return Err(invalid(&join(path, "times"), "must be at least 1"));
    }
    Ok(Rule {
        matcher,
        respond,
        times,
    })
}

fn parse_matcher(value: &Value, path: &str) -> Result<Matcher, ScriptError> {
    let map = object(
        value,
        path,
        &[
            "role",
            "subagentType",
            "purpose",
            "attempt",
            "call",
            "lastMessage",
            "anyMessage",
        ],
    )?;
    Ok(Matcher {
        last_message: parse_message_matcher(map, "lastMessage", path)?,
        any_message: parse_message_matcher(map, "anyMessage", path)?,
        role: field(map, "role", path)?,
        subagent_type: field(map, "subagentType", path)?,
        purpose: field(map, "purpose", path)?,
        attempt: field(map, "attempt", path)?,
        call: field(map, "call", path)?,
    })
}

fn parse_message_matcher(
    map: &Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<Option<MessageMatcher>, ScriptError> {
    let value = match map.get(key) {
        None | Some(Value::Null) => return Ok(None),
        Some(value) => value,
    };
    let path = join(path, key);
    let fields = object(value, &path, &["role", "contains", "regex"])?;
    let regex = field::<String>(fields, "regex", &path)?
        .map(|pattern| {
            Regex::new(&pattern).map_err(|e| invalid(&join(&path, "regex"), e.to_string()))
        })
        .transpose()?;
    Ok(Some(MessageMatcher {
        role: field(fields, "role", &path)?,
        contains: field(fields, "contains", &path)?,
        regex,
    }))
}

fn parse_response(value: &Value, path: &str) -> Result<Response, ScriptError> {
    let map = object(
        value,
        path,
        &[
            "content",
            "reasoning",
            "toolCalls",
            "finishReason",
            "usage",
            "error",
        ],
    )?;
    let mut tool_calls = Vec::new();
    match map.get("toolCalls") {
        None | Some(Value::Null) => {}
        Some(Value::Array(calls)) => {
            for (i, call) in calls.iter().enumerate() {
                let path = format!("{path}.toolCalls[{i}]");
                let call = object(call, &path, &["name", "arguments"])?;
                let name = field::<String>(call, "name", &path)?
                    .filter(|n| !n.is_empty())
                    .ok_or_else(|| invalid(&join(&path, "name"), "is required"))?;
                let arguments = match call.get("arguments") {
                    None | Some(Value::Null) => "{}".to_owned(),
                    Some(Value::String(raw)) => raw.clone(),
                    Some(other) => other.to_string(),
                };
                tool_calls.push((name, arguments));
            }
        }
        Some(_) => return Err(invalid(&join(path, "toolCalls"), "must be a list")),
    }
    let response = Response {
        content: field(map, "content", path)?.unwrap_or_default(),
        reasoning: field(map, "reasoning", path)?,
        tool_calls,
        finish_reason: field(map, "finishReason", path)?,
        usage: field(map, "usage", path)?,
        error: field(map, "error", path)?,
    };
    if response.error.is_some()
        && (!response.content.is_empty()
            || response.reasoning.is_some()
            || !response.tool_calls.is_empty())
    {
        return Err(invalid(
            &join(path, "error"),
            "an error response cannot also carry content, reasoning or toolCalls",
        ));
    }
    if let Some(secs) = response.error.as_ref().and_then(|e| e.retry_after_seconds)
        && Duration::try_from_secs_f64(secs).is_err()
    {
        return Err(invalid(
            &join(path, "error.retryAfterSeconds"),
            "must be a non-negative number of seconds",
        ));
    }
    Ok(response)
}

/// Tokens for `chars` characters, the usual rough rate of 4 characters a token.
fn estimate_tokens(chars: usize) -> u64 {
    u64::try_from(chars.div_ceil(4)).unwrap_or(u64::MAX)
}

fn input_chars(request: &ModelRequest) -> usize {
    let tools: usize = request
        .tools
        .iter()
        .map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len())
        .sum();
    let messages: usize = request
        .messages
        .iter()
        .map(|m| {
            m.text().chars().count()
                + m.as_assistant().map_or(0, |a| {
                    a.tool_calls
                        .iter()
                        .map(|c| c.name.len() + c.arguments.chars().count())
                        .sum()
                })
        })
        .sum();
    request.system.chars().count() + messages + tools
}

/// The smallest `n >= start` whose message and tool call ids are free in the thread.
fn free_slot(messages: &[Message], start: usize, calls: usize) -> usize {
    let mut taken: HashSet<&str> = messages.iter().map(Message::id).collect();
    for message in messages {
        if let Some(assistant) = message.as_assistant() {
            taken.extend(assistant.tool_calls.iter().map(|c| c.id.as_str()));
        }
    }
    (start..)
        .find(|n| {
            !taken.contains(format!("scripted_{n}").as_str())
                && (0..calls).all(|i| !taken.contains(format!("call_{n}_{i}").as_str()))
        })
        .unwrap_or(start)
}

/// Sends `text` as word-sized deltas, the way a real model streams.
fn stream_words(text: &str, delta: impl Fn(String) -> StreamDelta, on_delta: DeltaSink<'_>) {
    for word in text.split_inclusive(char::is_whitespace) {
        on_delta(delta(word.to_owned()));
    }
}

#[async_trait]
impl ChatModel for ScriptedModel {
    fn name(&self) -> &str {
        &self.name
    }

    fn provider(&self) -> &str {
        "herd.scripted"
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        on_delta: DeltaSink<'_>,
    ) -> Result<AssistantMessage, ModelError> {
        let assistants = request
            .messages
            .iter()
            .filter(|m| m.as_assistant().is_some())
            .count();
        let index = self.choose(request, assistants)?;
        let Some(rule) = self.rules.get(index) else {
            return Err(ModelError::new(
                ModelErrorKind::NoScriptMatch,
                format!("scripted model: rule {index} disappeared"),
            ));
        };
        let respond = &rule.respond;
        if let Some(spec) = &respond.error {
            return Err(spec.error(index));
        }
        let slot = free_slot(&request.messages, assistants, respond.tool_calls.len());
        if let Some(reasoning) = &respond.reasoning {
            stream_words(reasoning, StreamDelta::Reasoning, on_delta);
        }
        stream_words(&respond.content, StreamDelta::Text, on_delta);
        let tool_calls: Vec<ToolCall> = respond
            .tool_calls
            .iter()
            .enumerate()
            .map(|(i, (name, arguments))| {
                on_delta(StreamDelta::ToolCallStarted {
                    index: i,
                    name: name.clone(),
                });
                ToolCall {
                    id: format!("call_{slot}_{i}"),
                    name: name.clone(),
                    arguments: arguments.clone(),
                }
            })
            .collect();
        let usage = respond.usage(request, &tool_calls);
        let finish_reason = respond
            .finish_reason
            .clone()
            .unwrap_or(if tool_calls.is_empty() {
                FinishReason::Stop
            } else {
                FinishReason::ToolCalls
            });
        Ok(AssistantMessage {
            id: format!("scripted_{slot}"),
            content: respond.content.clone(),
            reasoning: respond.reasoning.clone(),
            tool_calls,
            finish_reason: Some(finish_reason),
            usage: Some(usage),
            ..AssistantMessage::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use pretty_assertions::assert_eq;

    use super::*;
    use crate::thread::{MessageKind, ToolStatus};

    fn model(yaml: &str) -> ScriptedModel {
        ScriptedModel::from_yaml(yaml).unwrap()
    }

    fn context(role: AgentRole, subagent_type: Option<&str>, purpose: Purpose) -> CallContext {
        CallContext {
            role,
            subagent_type: subagent_type.map(str::to_owned),
            purpose,
            attempt: 1,
        }
    }

    fn request(messages: Vec<Message>, context: CallContext) -> ModelRequest {
        ModelRequest {
            system: "You are Herd.".into(),
            messages,
            context,
            ..ModelRequest::default()
        }
    }

    fn lead(messages: Vec<Message>) -> ModelRequest {
        request(messages, context(AgentRole::Lead, None, Purpose::Main))
    }

    async fn ask(
        model: &ScriptedModel,
        request: &ModelRequest,
    ) -> Result<AssistantMessage, ModelError> {
        model.complete(request, &|_| {}).await
    }

    async fn content(model: &ScriptedModel, request: &ModelRequest) -> String {
        ask(model, request).await.unwrap().content
    }

    fn assistant(id: &str, calls: &[&str]) -> Message {
        Message::Assistant(AssistantMessage {
            id: id.into(),
            tool_calls: calls
                .iter()
                .map(|c| ToolCall {
                    id: (*c).into(),
                    name: "ls".into(),
                    arguments: "{}".into(),
                })
                .collect(),
            ..AssistantMessage::default()
        })
    }

    #[tokio::test]
    async fn the_documented_example_parses_and_plays() {
        let source = include_str!("scripted.rs");
        let yaml: String = source
            .lines()
            .skip_while(|l| *l != "//! ```yaml")
            .skip(1)
            .take_while(|l| *l != "//! ```")
            .map(|l| {
                format!(
                    "{}\n",
                    l.strip_prefix("//!")
                        .unwrap_or(l)
                        .strip_prefix(' ')
                        .unwrap_or("")
                )
            })
            .collect();
        assert!(yaml.contains("rules:"), "{yaml}");
        let model = model(&yaml);
        assert_eq!(model.rules.len(), 5);
        let first = ask(&model, &lead(vec![Message::user("u", "Plan a trip")]))
            .await
            .unwrap();
        assert_eq!(first.content, "Let me plan this.");
        assert_eq!(first.reasoning.as_deref(), Some("Plan first."));
        assert_eq!(first.tool_calls[0].name, "write_todos");
        assert_eq!(
            first.tool_calls[0].parse_arguments().unwrap(),
            serde_json::json!({"todos": [{"content": "Book flights", "status": "in_progress"}]})
        );
        let title = request(vec![], context(AgentRole::Lead, None, Purpose::Title));
        assert_eq!(content(&model, &title).await, "Trip to Lisbon");
    }

    #[tokio::test]
    async fn role_subagent_type_and_purpose_select_rules() {
        let model = model(
            r#"
rules:
  - match: {role: subagent, subagentType: bash}
    respond: {content: bash subagent}
  - match: {role: subagent}
    respond: {content: other subagent}
  - match: {purpose: summary}
    respond: {content: a summary}
  - match: {purpose: memory}
    respond: {content: "{}"}
  - respond: {content: lead}
"#,
        );
        let hi = || vec![Message::user("u", "hi")];
        let cases = [
            (
                context(AgentRole::Subagent, Some("bash"), Purpose::Main),
                "bash subagent",
            ),
            (
                context(AgentRole::Subagent, Some("general-purpose"), Purpose::Main),
                "other subagent",
            ),
            (
                context(AgentRole::Lead, None, Purpose::Summary),
                "a summary",
            ),
            (context(AgentRole::Lead, None, Purpose::Memory), "{}"),
            (context(AgentRole::Lead, None, Purpose::Main), "lead"),
            (context(AgentRole::Lead, None, Purpose::Title), "lead"),
        ];
        for (ctx, expected) in cases {
            assert_eq!(
                content(&model, &request(hi(), ctx.clone())).await,
                expected,
                "{ctx:?}"
            );
        }
    }

    #[tokio::test]
    async fn attempt_selects_rules() {
        let model = model(
            "rules:\n  - match: {attempt: 2}\n    respond: {content: second pod}\n  - respond: {content: first pod}\n",
        );
        let mut req = lead(vec![Message::user("u", "hi")]);
        assert_eq!(content(&model, &req).await, "first pod");
        req.context.attempt = 2;
        assert_eq!(content(&model, &req).await, "second pod");
    }

    #[tokio::test]
    async fn call_counts_assistant_messages_for_main_and_calls_for_other_purposes() {
        let model = model(
            r#"
rules:
  - match: {call: 1, purpose: main}
    respond: {content: one}
  - match: {call: 3, purpose: main}
    respond: {content: three}
  - match: {call: 1, purpose: summary}
    respond: {content: first summary}
  - match: {call: 2, purpose: summary}
    respond: {content: second summary}
"#,
        );
        assert_eq!(
            content(&model, &lead(vec![Message::user("u", "x")])).await,
            "one"
        );
        let thread = vec![
            Message::user("u", "x"),
            assistant("a1", &[]),
            Message::user("u2", "y"),
            assistant("a2", &[]),
            Message::user("u3", "z"),
        ];
        assert_eq!(content(&model, &lead(thread.clone())).await, "three");
        let summary = request(
            thread.clone(),
            context(AgentRole::Lead, None, Purpose::Summary),
        );
        assert_eq!(content(&model, &summary).await, "first summary");
        assert_eq!(content(&model, &summary).await, "second summary");
        // Counted per role and subagent type: a subagent's first summary is its call 1.
        let sub = request(
            thread,
            context(AgentRole::Subagent, Some("bash"), Purpose::Summary),
        );
        assert_eq!(content(&model, &sub).await, "first summary");
    }

    #[tokio::test]
    async fn any_message_matches_anywhere_in_the_request() {
        let model = model(
            r#"
rules:
  - match: {anyMessage: {role: user, contains: "<memory>"}}
    respond: {content: remembered}
  - match: {}
    respond: {content: fresh}
"#,
        );
        let with_memory = vec![
            Message::hidden_user("m", MessageKind::Memory, "<memory>likes tea</memory>"),
            Message::user("u", "hi"),
        ];
        assert_eq!(content(&model, &lead(with_memory)).await, "remembered");
        assert_eq!(
            content(&model, &lead(vec![Message::user("u", "hi")])).await,
            "fresh"
        );
    }

    #[tokio::test]
    async fn last_message_matches_role_substring_and_regex() {
        let model = model(
            r#"
rules:
  - match: {lastMessage: {role: tool, contains: "No such file"}}
    respond: {content: missing}
  - match: {lastMessage: {role: tool}}
    respond: {content: some tool}
  - match: {lastMessage: {regex: "(?i)^weather in \\w+\\?$"}}
    respond: {content: weather}
  - match: {lastMessage: {contains: hello}}
    respond: {content: greeting}
"#,
        );
        let call = ToolCall {
            id: "c".into(),
            name: "ls".into(),
            arguments: "{}".into(),
        };
        let tool = |text: &str| Message::tool(&call, ToolStatus::Error, text);
        assert_eq!(
            content(&model, &lead(vec![tool("Error: No such file")])).await,
            "missing"
        );
        assert_eq!(
            content(&model, &lead(vec![tool("fine")])).await,
            "some tool"
        );
        assert_eq!(
            content(&model, &lead(vec![Message::user("u", "Weather in Oslo?")])).await,
            "weather"
        );
        assert_eq!(
            content(&model, &lead(vec![Message::user("u", "oh hello")])).await,
            "greeting"
        );
        let error = ask(&model, &lead(vec![])).await.unwrap_err();
        assert_eq!(error.kind, ModelErrorKind::NoScriptMatch);
        assert!(
            error.message.contains("the thread is empty"),
            "{}",
            error.message
        );
    }

    #[tokio::test]
    async fn times_limits_a_rule_and_later_rules_take_over() {
        let model = model(
            r#"
rules:
  - times: 2
    respond:
      error: {kind: rateLimited, status: 429, message: slow down, retryAfterSeconds: 1.5}
  - times: 1
    respond: {content: finally}
"#,
        );
        let req = lead(vec![Message::user("u", "hi")]);
        for _ in 0..2 {
            let error = ask(&model, &req).await.unwrap_err();
            assert_eq!(
                error,
                ModelError {
                    kind: ModelErrorKind::RateLimited,
                    status: Some(429),
                    retry_after: Some(Duration::from_millis(1500)),
                    message: "slow down".into(),
                }
            );
        }
        assert_eq!(content(&model, &req).await, "finally");
        let error = ask(&model, &req).await.unwrap_err();
        assert_eq!(error.kind, ModelErrorKind::NoScriptMatch);
        assert!(
            error
                .message
                .contains("rules[0], rules[1] matched but used up their `times`"),
            "{}",
            error.message
        );
    }

    #[tokio::test]
    async fn no_match_names_the_call_and_quotes_the_last_message() {
        let model = model("rules:\n  - match: {purpose: title}\n    respond: {content: t}\n");
        let long = format!("{}TAIL", "x".repeat(300));
        let req = request(
            vec![Message::user("u", long)],
            CallContext {
                role: AgentRole::Subagent,
                subagent_type: Some("general-purpose".into()),
                purpose: Purpose::Main,
                attempt: 2,
            },
        );
        let error = ask(&model, &req).await.unwrap_err();
        assert_eq!(error.kind, ModelErrorKind::NoScriptMatch);
        assert!(!error.is_retriable());
        let expected = format!(
            "scripted model: no rule matches this call (role: subagent, subagentType: \
             general-purpose, purpose: main, attempt: 2, call: 1); last message (user): \"{}…\". \
             Add a rule for it to the script",
            "x".repeat(200)
        );
        assert_eq!(error.message, expected);
    }

    #[tokio::test]
    async fn answers_stream_and_carry_ids_usage_and_finish_reason() {
        let model = model(
            r#"
rules:
  - match: {call: 1}
    respond:
      content: "Two calls."
      toolCalls:
        - {name: ls, arguments: {path: /mnt/user-data}}
        - {name: bash, arguments: "{not json"}
        - {name: present_files}
  - respond: {content: done, finishReason: length, usage: {outputTokens: 99, cachedInputTokens: 4}}
"#,
        );
        let deltas = Mutex::new(Vec::new());
        let sink = |d: StreamDelta| deltas.lock().unwrap().push(d);
        let req = lead(vec![Message::user("u", "12345678")]);
        let first = model.complete(&req, &sink).await.unwrap();
        assert_eq!(
            deltas.into_inner().unwrap(),
            vec![
                StreamDelta::Text("Two ".into()),
                StreamDelta::Text("calls.".into()),
                StreamDelta::ToolCallStarted {
                    index: 0,
                    name: "ls".into()
                },
                StreamDelta::ToolCallStarted {
                    index: 1,
                    name: "bash".into()
                },
                StreamDelta::ToolCallStarted {
                    index: 2,
                    name: "present_files".into()
                },
            ]
        );
        let ids: Vec<_> = first.tool_calls.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, vec!["call_0_0", "call_0_1", "call_0_2"]);
        assert_eq!(
            first.tool_calls[0].arguments,
            r#"{"path":"/mnt/user-data"}"#
        );
        assert_eq!(first.tool_calls[1].arguments, "{not json");
        assert_eq!(first.tool_calls[2].arguments, "{}");
        assert_eq!(first.finish_reason, Some(FinishReason::ToolCalls));
        assert_eq!(first.id, "scripted_0");
        // "You are Herd." (13) + "12345678" (8) = 21 chars -> 6 tokens.
        let usage = first.usage.clone().unwrap();
        assert_eq!(usage.input_tokens, 6);
        assert_eq!(
            usage.output_tokens,
            estimate_tokens(10 + 2 + 25 + 4 + 9 + 13 + 2)
        );

        let mut thread = req.messages.clone();
        thread.push(Message::Assistant(first));
        let second = ask(&model, &lead(thread)).await.unwrap();
        assert_eq!(second.finish_reason, Some(FinishReason::Length));
        let usage = second.usage.unwrap();
        assert_eq!((usage.output_tokens, usage.cached_input_tokens), (99, 4));
        assert_eq!(second.id, "scripted_1");
    }

    #[tokio::test]
    async fn ids_skip_past_ids_already_in_the_thread() {
        let model = model("rules:\n  - respond: {toolCalls: [{name: ls}]}\n");
        // After summarization one assistant message is left, but `call_1_0` is taken.
        let thread = vec![assistant("a", &["call_1_0"]), Message::user("u", "go on")];
        let answer = ask(&model, &lead(thread)).await.unwrap();
        assert_eq!(answer.tool_calls[0].id, "call_2_0");
        assert_eq!(answer.id, "scripted_2");
    }

    #[tokio::test]
    async fn parallel_callers_share_the_times_budget() {
        let model = Arc::new(model(
            "rules:\n  - times: 5\n    respond: {content: ok}\n  - respond: {content: late}\n",
        ));
        let tasks: Vec<_> = (0..20)
            .map(|_| {
                let model = Arc::clone(&model);
                tokio::spawn(async move {
                    let req = lead(vec![Message::user("u", "hi")]);
                    model.complete(&req, &|_| {}).await.unwrap().content
                })
            })
            .collect();
        let mut ok = 0;
        for task in tasks {
            if task.await.unwrap() == "ok" {
                ok += 1;
            }
        }
        assert_eq!(ok, 5);
    }

    #[test]
    fn invalid_scripts_name_the_rule_and_field() {
        let error = |yaml: &str| ScriptedModel::from_yaml(yaml).unwrap_err().to_string();
        let cases = [
            (
                "rules:\n  - respond: {content: a}\n  - mach: {}\n    respond: {}\n",
                "`rules[1].mach`: unknown field",
            ),
            (
                "rules:\n  - match: {role: boss}\n    respond: {}\n",
                "`rules[0].match.role`: unknown variant `boss`",
            ),
            (
                "rules:\n  - match: {call: first}\n    respond: {}\n",
                "`rules[0].match.call`: invalid type",
            ),
            (
                "rules:\n  - match: {lastMessage: {regex: \"(\"}}\n    respond: {}\n",
                "`rules[0].match.lastMessage.regex`",
            ),
            (
                "rules:\n  - match: {lastMessage: {text: a}}\n    respond: {}\n",
                "`rules[0].match.lastMessage.text`: unknown field",
            ),
            ("rules:\n  - match: {}\n", "`rules[0].respond`: is required"),
            (
                "rules:\n  - times: 0\n    respond: {}\n",
                "`rules[0].times`: must be at least 1",
            ),
            (
                "rules:\n  - respond: {toolCalls: [{arguments: {}}]}\n",
                "`rules[0].respond.toolCalls[0].name`: is required",
            ),
            (
                "rules:\n  - respond: {toolCalls: {name: x}}\n",
                "`rules[0].respond.toolCalls`: must be a list",
            ),
            (
                "rules:\n  - respond: {usage: {tokens: 3}}\n",
                "`rules[0].respond.usage`: unknown field `tokens`",
            ),
            (
                "rules:\n  - respond: {error: {kind: sad}}\n",
                "`rules[0].respond.error`: unknown variant `sad`",
            ),
            (
                "rules:\n  - respond: {content: x, error: {kind: server}}\n",
                "`rules[0].respond.error`: an error response cannot",
            ),
            (
                "rules:\n  - respond: {error: {kind: server, retryAfterSeconds: -1}}\n",
                "`rules[0].respond.error.retryAfterSeconds`",
            ),
            ("rules: {}\n", "`rules`: must be a list"),
            ("rulez: []\n", "`rulez`: unknown field"),
            ("- respond: {}\n", "`(top)`: must be a mapping"),
            ("rules: [\n", "not valid YAML"),
        ];
        for (yaml, expected) in cases {
            let message = error(yaml);
            assert!(message.contains(expected), "{yaml:?}: {message}");
        }
    }

    #[test]
    fn scripts_load_from_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("script.yaml");
        std::fs::write(&path, "rules:\n  - respond: {content: hi}\n").unwrap();
        assert_eq!(ScriptedModel::from_file(&path).unwrap().rules.len(), 1);
        let missing = ScriptedModel::from_file(&dir.path().join("nope.yaml")).unwrap_err();
        assert!(matches!(missing, ScriptError::Read { .. }));
        assert!(missing.to_string().contains("nope.yaml"));
        let named = ScriptedModel::from_yaml("rules: []\n")
            .unwrap()
            .with_name("demo");
        assert_eq!(named.name(), "demo");
    }
}
