//! DanglingToolCall: every request is a transcript strict providers accept. Each tool call
//! is answered exactly once, its result right after the assistant message that made it;
//! results whose call is gone (summarized away) are dropped; missing, blank or duplicate
//! call ids are relabelled, consistently in the call and its result; blank tool names and
//! unparsable arguments are normalized. A call left without a result (an interrupted run,
//! a crash) gets a synthetic error result saying so.
//!
//! Per request only: the thread keeps what happened.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use async_trait::async_trait;
use herd_sandbox::truncation::truncate_chars;

use crate::agent::Middleware;
use crate::model::ModelRequest;
use crate::thread::{Message, MessageKind, MessageMeta, ThreadState, ToolMessage, ToolStatus};

/// The result given to a call that never got one.
pub const INTERRUPTED: &str = "[Tool call was interrupted and did not return a result.]";
/// Longest parser error quoted back to the model (#2894: a broken `write_file` payload can be
/// huge; echoing it would cost the context it failed to fill).
pub const MAX_ERROR_DETAIL_CHARS: usize = 500;
/// The name given to a call that had none.
pub const UNKNOWN_TOOL: &str = "unknown";
/// Prefix of relabelled call ids: `herd_synthetic_<message index>_<position>`.
pub const SYNTHETIC_ID_PREFIX: &str = "herd_synthetic";

/// Repairs the tool-call structure of every model request.
#[derive(Debug, Default)]
pub struct DanglingToolCall {
    /// Ids of calls whose arguments were already found to be a JSON object. Arguments of a
    /// stored call never change, so each is parsed once per run instead of on every request.
    valid_arguments: Mutex<HashSet<String>>,
}

impl DanglingToolCall {
    /// The middleware; it needs no settings.
    pub fn new() -> Self {
        DanglingToolCall::default()
    }

    /// Whether `messages` already satisfy strict providers, so `repair` would return them
    /// unchanged: every call has a non-blank unique id and a name, its arguments are an
    /// object, and its result follows in call order; no result stands alone.
    fn already_valid(&self, messages: &[Message]) -> bool {
        let Ok(mut valid_arguments) = self.valid_arguments.lock() else {
            return false;
        };
        let mut seen: HashSet<&str> = HashSet::new();
        let mut index = 0;
        while let Some(message) = messages.get(index) {
            match message {
                Message::Assistant(assistant) => {
                    for (offset, call) in assistant.tool_calls.iter().enumerate() {
                        let answered = matches!(
                            messages.get(index + 1 + offset),
                            Some(Message::Tool(result))
                                if result.tool_call_id == call.id && result.name == call.name
                        );
                        if !answered
                            || call.id.trim().is_empty()
                            || call.name.trim().is_empty()
                            || !seen.insert(call.id.as_str())
                        {
                            return false;
                        }
                        if !valid_arguments.contains(&call.id) {
                            if argument_error(&call.arguments).is_some() {
                                return false;
                            }
                            valid_arguments.insert(call.id.clone());
                        }
                    }
                    index += 1 + assistant.tool_calls.len();
                }
                Message::Tool(_) => return false,
                Message::System(_) | Message::User(_) => index += 1,
            }
        }
        true
    }
}

#[async_trait]
impl Middleware for DanglingToolCall {
    fn name(&self) -> &'static str {
        "DanglingToolCall"
    }

    fn rewrite_request(&self, _state: &ThreadState, request: &mut ModelRequest) {
        // Almost every request is already well formed; checking costs no allocation per
        // message, rebuilding the transcript costs several.
        if !self.already_valid(&request.messages) {
            request.messages = repair(std::mem::take(&mut request.messages));
        }
    }
}

/// One tool call of the transcript, while it is being repaired.
struct Slot {
    message: usize,
    original_id: String,
    result: Option<usize>,
}

/// The repaired transcript (see the module docs for what changes).
pub fn repair(messages: Vec<Message>) -> Vec<Message> {
    let mut slots: Vec<Slot> = Vec::new();
    let mut by_id: HashMap<&str, Vec<usize>> = HashMap::new();
    for (index, message) in messages.iter().enumerate() {
        if let Message::Assistant(assistant) = message {
            for call in &assistant.tool_calls {
                by_id.entry(call.id.as_str()).or_default().push(slots.len());
                slots.push(Slot {
                    message: index,
                    original_id: call.id.clone(),
                    result: None,
                });
            }
        }
    }
    pair_results(&messages, &mut slots, &by_id);

    let final_ids = final_ids(&slots);
    let mut results: Vec<Option<ToolMessage>> = vec![None; slots.len()];
    let mut result_of: HashMap<usize, usize> = HashMap::new();
    for (slot_index, slot) in slots.iter().enumerate() {
        if let Some(tool_index) = slot.result {
            result_of.insert(tool_index, slot_index);
        }
    }

    let mut pending: Vec<Option<Message>> = messages.into_iter().map(Some).collect();
    for (tool_index, slot_index) in &result_of {
        if let Some(Message::Tool(tool)) = pending[*tool_index].take() {
            results[*slot_index] = Some(tool);
        }
    }

    let mut repaired = Vec::with_capacity(pending.len() + slots.len());
    let mut next_slot = 0;
    for message in pending.into_iter().flatten() {
        match message {
            // Paired results were taken out above; what is left has no call.
            Message::Tool(orphan) => {
                tracing::debug!(id = %orphan.tool_call_id, "dropping a tool result without its call");
            }
            Message::Assistant(mut assistant) => {
                let mut answers = Vec::with_capacity(assistant.tool_calls.len());
                for call in &mut assistant.tool_calls {
                    let slot = next_slot;
                    next_slot += 1;
                    let id = final_ids[slot].clone();
                    if call.name.trim().is_empty() {
                        call.name = UNKNOWN_TOOL.to_owned();
                    }
                    let parse_error = argument_error(&call.arguments);
                    if parse_error.is_some() {
                        // Chat templates parse the arguments back; keep them an object.
                        call.arguments = "{}".to_owned();
                    }
                    let answer = match results[slot].take() {
                        Some(mut result) => {
                            result.tool_call_id = id.clone();
                            result.name = call.name.clone();
                            result
                        }
                        None => synthetic(&id, &call.name, parse_error.as_deref()),
                    };
                    call.id = id;
                    answers.push(Message::Tool(answer));
                }
                repaired.push(Message::Assistant(assistant));
                repaired.extend(answers);
            }
            other => repaired.push(other),
        }
    }
    repaired
}

/// Pairs each result with a call of its id: the nearest unanswered one before it, else the
/// first unanswered one after it (results that ran ahead of their call). A second result for
/// the same call stays unpaired and is dropped.
fn pair_results(messages: &[Message], slots: &mut [Slot], by_id: &HashMap<&str, Vec<usize>>) {
    for (index, message) in messages.iter().enumerate() {
        let Message::Tool(tool) = message else {
            continue;
        };
        let Some(candidates) = by_id.get(tool.tool_call_id.as_str()) else {
            continue;
        };
        let before = candidates
            .iter()
            .rev()
            .find(|&&slot| slots[slot].message < index && slots[slot].result.is_none());
        let chosen = before.or_else(|| {
            candidates
                .iter()
                .find(|&&slot| slots[slot].message > index && slots[slot].result.is_none())
        });
        if let Some(&slot) = chosen {
            slots[slot].result = Some(index);
        }
    }
}

/// Each call's id in the repaired transcript: its own when non-blank and not taken by an
/// earlier call, else a synthetic one that is unique too.
fn final_ids(slots: &[Slot]) -> Vec<String> {
    let mut used: HashSet<String> = HashSet::with_capacity(slots.len());
    let mut ids = Vec::with_capacity(slots.len());
    let mut position = 0;
    let mut current_message = usize::MAX;
    for slot in slots {
        if slot.message != current_message {
            current_message = slot.message;
            position = 0;
        }
        let id = if !slot.original_id.trim().is_empty() && !used.contains(&slot.original_id) {
            slot.original_id.clone()
        } else {
            let base = format!("{SYNTHETIC_ID_PREFIX}_{}_{position}", slot.message);
            let mut candidate = base.clone();
            let mut suffix = 1;
            while used.contains(&candidate) {
                candidate = format!("{base}_{suffix}");
                suffix += 1;
            }
            candidate
        };
        used.insert(id.clone());
        ids.push(id);
        position += 1;
    }
    ids
}

/// Why the arguments cannot be sent back as they are, if they cannot.
fn argument_error(arguments: &str) -> Option<String> {
    if arguments.trim().is_empty() {
        return None;
    }
    match serde_json::from_str::<serde_json::Value>(arguments) {
        Ok(serde_json::Value::Object(_)) => None,
        Ok(_) => Some("the arguments are not a JSON object".to_owned()),
        Err(error) => Some(error.to_string()),
    }
}

fn synthetic(id: &str, name: &str, parse_error: Option<&str>) -> ToolMessage {
    let content = match parse_error {
        None => INTERRUPTED.to_owned(),
        Some(error) => {
            let detail = truncate_chars(error, MAX_ERROR_DETAIL_CHARS);
            if name == "write_file" {
                format!(
                    "[write_file did not run: its arguments were not valid JSON ({detail}), so \
                     nothing was written. This happens with very large content, especially \
                     with unescaped quotes, backslashes or code fences. Do not resend the same \
                     payload: write the file in parts of a few hundred lines, the first with \
                     append=false and the rest with append=true.]"
                )
            } else {
                format!(
                    "[Tool call could not be executed because its arguments were invalid: {detail}]"
                )
            }
        }
    };
    ToolMessage {
        id: format!("tool:{id}"),
        tool_call_id: id.to_owned(),
        name: name.to_owned(),
        content,
        status: ToolStatus::Error,
        meta: MessageMeta {
            hidden: true,
            kind: Some(MessageKind::DanglingToolCall),
            extra: Default::default(),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use proptest::prelude::*;

    use super::*;
    use crate::test_doubles::{self, QueuedModel, text};
    use crate::thread::{AssistantMessage, ToolCall};

    fn assistant(id: &str, calls: &[(&str, &str, &str)]) -> Message {
        Message::Assistant(AssistantMessage {
            id: id.into(),
            tool_calls: calls
                .iter()
                .map(|(id, name, arguments)| ToolCall {
                    id: (*id).into(),
                    name: (*name).into(),
                    arguments: (*arguments).into(),
                })
                .collect(),
            ..AssistantMessage::default()
        })
    }

    fn result(call_id: &str, content: &str) -> Message {
        Message::tool(
            &ToolCall {
                id: call_id.into(),
                name: "ls".into(),
                arguments: String::new(),
            },
            ToolStatus::Success,
            content,
        )
    }

    fn shape(messages: &[Message]) -> Vec<String> {
        messages
            .iter()
            .map(|m| match m {
                Message::Assistant(a) => format!(
                    "A[{}]",
                    a.tool_calls
                        .iter()
                        .map(|c| c.id.as_str())
                        .collect::<Vec<_>>()
                        .join(",")
                ),
                Message::Tool(t) => format!("T:{}:{}", t.tool_call_id, t.content),
                Message::User(u) => format!("U:{}", u.content),
                Message::System(s) => format!("S:{}", s.content),
            })
            .collect()
    }

    #[test]
    fn a_valid_transcript_is_unchanged() {
        let messages = vec![
            Message::user("u", "go"),
            assistant(
                "a1",
                &[("c1", "ls", "{}"), ("c2", "ls", "{\"path\":\"/mnt\"}")],
            ),
            result("c1", "r1"),
            result("c2", "r2"),
            assistant("a2", &[]),
        ];
        assert_eq!(repair(messages.clone()), messages);
    }

    #[test]
    fn dangling_calls_get_an_interrupted_result_right_after_their_message() {
        let messages = vec![
            Message::user("u", "go"),
            assistant("a1", &[("c1", "ls", "{}"), ("c2", "ls", "{}")]),
            result("c1", "r1"),
            Message::user("u2", "next"),
        ];
        let repaired = repair(messages);
        assert_eq!(
            shape(&repaired),
            vec![
                "U:go".to_string(),
                "A[c1,c2]".into(),
                "T:c1:r1".into(),
                format!("T:c2:{INTERRUPTED}"),
                "U:next".into(),
            ]
        );
        let Message::Tool(synthetic) = &repaired[3] else {
            panic!("expected a tool message");
        };
        assert_eq!(synthetic.status, ToolStatus::Error);
        assert_eq!(synthetic.name, "ls");
    }

    #[test]
    fn results_are_regrouped_after_their_call_and_orphans_dropped() {
        let messages = vec![
            result("c2", "early"),
            Message::user("u", "go"),
            assistant("a1", &[("c1", "view_image", "{}"), ("c2", "ls", "{}")]),
            result("c1", "r1"),
            Message::hidden_user("v", MessageKind::ViewImage, "image"),
            result("gone", "orphan"),
        ];
        assert_eq!(
            shape(&repair(messages)),
            vec!["U:go", "A[c1,c2]", "T:c1:r1", "T:c2:early", "U:image"]
        );
    }

    #[test]
    fn blank_and_duplicate_ids_are_relabelled_in_call_and_result() {
        let messages = vec![
            assistant("a0", &[("", "ls", "{}"), ("dup", "ls", "{}")]),
            result("", "blank"),
            result("dup", "first"),
            assistant("a1", &[("dup", "ls", "{}")]),
            result("dup", "second"),
        ];
        assert_eq!(
            shape(&repair(messages)),
            vec![
                "A[herd_synthetic_0_0,dup]",
                "T:herd_synthetic_0_0:blank",
                "T:dup:first",
                "A[herd_synthetic_3_0]",
                "T:herd_synthetic_3_0:second",
            ]
        );
    }

    #[test]
    fn a_second_result_for_one_call_is_dropped() {
        let messages = vec![
            assistant("a", &[("c", "ls", "{}")]),
            result("c", "one"),
            result("c", "two"),
        ];
        assert_eq!(shape(&repair(messages)), vec!["A[c]", "T:c:one"]);
    }

    #[test]
    fn blank_names_and_broken_arguments_are_normalized() {
        let messages = vec![assistant(
            "a",
            &[
                ("c1", " ", "{}"),
                ("c2", "write_file", "{\"content\": \"unterminated"),
                ("c3", "ls", "[1]"),
            ],
        )];
        let repaired = repair(messages);
        let Message::Assistant(message) = &repaired[0] else {
            panic!("expected the assistant message");
        };
        assert_eq!(message.tool_calls[0].name, UNKNOWN_TOOL);
        assert_eq!(message.tool_calls[1].arguments, "{}");
        assert_eq!(message.tool_calls[2].arguments, "{}");
        assert_eq!(repaired[1].text(), INTERRUPTED);
        let write = repaired[2].text();
        assert!(write.starts_with("[write_file did not run"));
        assert!(write.contains("EOF while parsing"));
        assert!(write.contains("append=true"));
        assert_eq!(
            repaired[3].text(),
            "[Tool call could not be executed because its arguments were invalid: the arguments \
             are not a JSON object]"
        );
    }

    #[test]
    fn parser_errors_are_capped() {
        let huge = format!("{{\"a\": {}", "[".repeat(5_000));
        let error = argument_error(&huge).unwrap();
        let message = synthetic("c", "ls", Some(&error));
        assert!(message.content.chars().count() <= MAX_ERROR_DETAIL_CHARS + 100);
    }

    #[tokio::test]
    async fn the_model_sees_the_repair_and_the_thread_does_not() {
        let model = QueuedModel::new(vec![text("ok")]);
        let (agent, env) =
            test_doubles::middleware_agent(model.clone(), Arc::new(DanglingToolCall::new()));
        let mut state = ThreadState::new("go");
        state.messages.push(assistant("a", &[("c", "ls", "{}")]));
        state.messages.push(Message::user("u2", "resumed"));
        agent.run(&mut state, &env).await.unwrap();
        let sent = &model.requests()[0].messages;
        assert_eq!(
            shape(sent),
            vec![
                "U:go".to_string(),
                "A[c]".into(),
                format!("T:c:{INTERRUPTED}"),
                "U:resumed".into()
            ]
        );
        assert_eq!(state.messages.len(), 4, "user, assistant, user, answer");
    }

    /// What strict providers require of a transcript.
    fn assert_strict(messages: &[Message]) {
        let mut ids = HashSet::new();
        let mut index = 0;
        while index < messages.len() {
            match &messages[index] {
                Message::Assistant(assistant) => {
                    let calls = &assistant.tool_calls;
                    let block = &messages[index + 1..index + 1 + calls.len()];
                    for (call, answer) in calls.iter().zip(block) {
                        assert!(!call.id.trim().is_empty());
                        assert!(!call.name.trim().is_empty());
                        assert!(ids.insert(call.id.clone()), "duplicate id {}", call.id);
                        assert!(argument_error(&call.arguments).is_none());
                        let Message::Tool(tool) = answer else {
                            panic!("call {} is not followed by its result", call.id);
                        };
                        assert_eq!(tool.tool_call_id, call.id);
                    }
                    index += 1 + calls.len();
                }
                Message::Tool(tool) => panic!("orphan result {}", tool.tool_call_id),
                _ => index += 1,
            }
        }
    }

    fn arb_id() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(String::new()),
            Just(" ".to_string()),
            "[abc]".prop_map(String::from),
            Just("herd_synthetic_1_0".to_string()),
        ]
    }

    fn arb_message() -> impl Strategy<Value = Message> {
        let call = (
            arb_id(),
            prop_oneof![Just(""), Just("ls"), Just("write_file")],
            prop_oneof![Just(""), Just("{}"), Just("{bad"), Just("[]")],
        )
            .prop_map(|(id, name, arguments)| ToolCall {
                id,
                name: name.into(),
                arguments: arguments.into(),
            });
        prop_oneof![
            Just(Message::user("u", "hi")),
            Just(Message::system("s", MessageKind::DynamicContext, "today")),
            prop::collection::vec(call, 0..4).prop_map(|tool_calls| {
                Message::Assistant(AssistantMessage {
                    id: "a".into(),
                    tool_calls,
                    ..AssistantMessage::default()
                })
            }),
            arb_id().prop_map(|id| result(&id, "r")),
        ]
    }

    proptest! {
        #[test]
        fn any_transcript_is_repaired_into_a_strict_one(
            messages in prop::collection::vec(arb_message(), 0..14)
        ) {
            let repaired = repair(messages.clone());
            assert_strict(&repaired);
            // Nothing but tool results disappears, and repairing twice changes nothing.
            let kept = |list: &[Message]| list.iter().filter(|m| !matches!(m, Message::Tool(_))).count();
            prop_assert_eq!(kept(&messages), kept(&repaired));
            prop_assert_eq!(repair(repaired.clone()), repaired.clone());
            // The fast path agrees with the repair: what it accepts, repair leaves alone,
            // and a repaired transcript is always accepted.
            let middleware = DanglingToolCall::new();
            if middleware.already_valid(&messages) {
                prop_assert_eq!(repair(messages.clone()), messages.clone());
            }
            prop_assert!(DanglingToolCall::new().already_valid(&repaired));
        }
    }
}
