//! A model answer's tool calls, made fit to run and to send back before anything runs.
//!
//! - Ids: a model (or a proxy between it and us) may give two calls the same id. Results are
//!   paired with their call by id — in the thread, in checkpoints, in child Run names, and by
//!   the provider on the next request (Anthropic refuses a repeated `tool_use` id) — so a
//!   repeat gets a fresh id (`<id>_2`, `<id>_3`...) in the stored answer itself.
//! - Names: a call without one is not run; it gets an error result naming the tools there
//!   are, and is stored as [`NAMELESS`] so that the next request stays valid.
//! - Arguments larger than [`MAX_ARGUMENT_BYTES`] are not run either, and the stored answer
//!   keeps a short placeholder instead of them: the thread is resent on every later request.
//!   For the same reason, a call that ran and failed with arguments over
//!   [`KEEP_FAILED_ARGUMENT_BYTES`] (a tool refusing a too-large write, say) keeps only a
//!   placeholder once its error result is in: that result says what was wrong.

use std::collections::{HashMap, HashSet};

use serde_json::json;

use crate::thread::{AssistantMessage, Message};

use super::tool_registry::ToolRegistry;

/// The largest arguments of one tool call that are run. Far above what a model writes in one
/// answer (output limits are at most ~128k tokens, about 0.5 MB), and below the sandbox
/// socket's request limit.
pub const MAX_ARGUMENT_BYTES: usize = 1024 * 1024;

/// Arguments of a failed call larger than this are replaced by a placeholder after it ran.
pub const KEEP_FAILED_ARGUMENT_BYTES: usize = 64 * 1024;

/// The name a call without one is stored under.
pub const NAMELESS: &str = "unnamed_tool_call";

/// The error results of calls refused before running, by call id.
#[derive(Debug, Default, PartialEq)]
pub struct Refusals(HashMap<String, String>);

impl Refusals {
    /// The error result for the call `id`, if it was refused.
    pub fn get(&self, id: &str) -> Option<&str> {
        self.0.get(id).map(String::as_str)
    }
}

/// Gives `answer`'s calls ids unused in `earlier` and among themselves, and refuses (with a
/// placeholder left in `answer`) the calls that have no name or too large arguments.
pub fn prepare(
    answer: &mut AssistantMessage,
    earlier: &[Message],
    tools: &ToolRegistry,
) -> Refusals {
    let mut used: HashSet<String> = earlier
        .iter()
        .filter_map(Message::as_assistant)
        .flat_map(|message| message.tool_calls.iter().map(|call| call.id.clone()))
        .collect();
    // A fresh id must not take the id of a later call of this answer either.
    let mut reserved = used.clone();
    reserved.extend(answer.tool_calls.iter().map(|call| call.id.clone()));
    let mut refusals = HashMap::new();
    for call in &mut answer.tool_calls {
        if call.id.is_empty() || used.contains(&call.id) {
            let base = if call.id.is_empty() { "call" } else { &call.id };
            call.id = (2..)
                .map(|n| format!("{base}_{n}"))
                .find(|id| !reserved.contains(id))
                .unwrap_or_default();
            reserved.insert(call.id.clone());
        }
        used.insert(call.id.clone());
        if call.name.trim().is_empty() {
            call.name = NAMELESS.to_owned();
            let available: Vec<&str> = tools.names().collect();
            refusals.insert(
                call.id.clone(),
                format!(
                    "Error: this tool call has no tool name, so nothing was run. Call a tool \
                     by its name; the tools are: {}.",
                    available.join(", ")
                ),
            );
        } else if call.arguments.len() > MAX_ARGUMENT_BYTES {
            let size = call.arguments.len();
            call.arguments = placeholder(size);
            refusals.insert(
                call.id.clone(),
                format!(
                    "Error: the arguments of this {} call are {size} bytes, over the \
                     {MAX_ARGUMENT_BYTES}-byte limit, so nothing was run and they were \
                     dropped from the conversation. Send less at once (write large files in \
                     parts with append=true).",
                    call.name
                ),
            );
        }
    }
    Refusals(refusals)
}

/// Replaces the arguments of the calls `ids` in the latest answer holding them with a
/// placeholder.
pub fn forget_arguments(messages: &mut [Message], ids: &[String]) {
    if ids.is_empty() {
        return;
    }
    let answer = messages.iter_mut().rev().find_map(|message| match message {
        Message::Assistant(answer) if answer.tool_calls.iter().any(|c| ids.contains(&c.id)) => {
            Some(answer)
        }
        _ => None,
    });
    for call in answer.into_iter().flat_map(|a| a.tool_calls.iter_mut()) {
        if ids.contains(&call.id) {
            call.arguments = placeholder(call.arguments.len());
        }
    }
}

/// What stands in the thread for `size` bytes of dropped arguments: a JSON object, as
/// providers require.
fn placeholder(size: usize) -> String {
    json!({"omitted": format!("{size} bytes of arguments, dropped: too large to resend")})
        .to_string()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::thread::ToolCall;

    fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    fn answer(calls: Vec<ToolCall>) -> AssistantMessage {
        AssistantMessage {
            id: "a".into(),
            tool_calls: calls,
            ..AssistantMessage::default()
        }
    }

    fn ids(answer: &AssistantMessage) -> Vec<&str> {
        answer.tool_calls.iter().map(|c| c.id.as_str()).collect()
    }

    #[test]
    fn repeated_ids_get_fresh_ones_in_the_answer_itself() {
        let mut first = answer(vec![
            call("c", "bash", "{}"),
            call("c", "bash", "{}"),
            call("c_2", "bash", "{}"),
            call("", "bash", "{}"),
        ]);
        let refusals = prepare(&mut first, &[], &ToolRegistry::default());
        assert_eq!(ids(&first), vec!["c", "c_3", "c_2", "call_2"]);
        assert_eq!(refusals, Refusals::default());

        // Ids of earlier turns are taken too.
        let earlier = vec![Message::user("u", "hi"), Message::Assistant(first)];
        let mut second = answer(vec![call("c", "bash", "{}"), call("d", "bash", "{}")]);
        prepare(&mut second, &earlier, &ToolRegistry::default());
        assert_eq!(ids(&second), vec!["c_4", "d"]);
    }

    #[test]
    fn a_nameless_call_is_refused_and_stored_under_a_name() {
        let mut message = answer(vec![call("a", "", "{}"), call("b", "bash", "{}")]);
        let refusals = prepare(&mut message, &[], &ToolRegistry::default());
        assert_eq!(message.tool_calls[0].name, NAMELESS);
        let error = refusals.get("a").unwrap();
        assert!(error.contains("no tool name"), "{error}");
        assert_eq!(refusals.get("b"), None);
    }

    #[test]
    fn oversized_arguments_are_refused_and_replaced_by_a_placeholder() {
        let big = format!("{{\"content\": \"{}\"}}", "x".repeat(MAX_ARGUMENT_BYTES));
        let fits = format!(
            "{{\"content\": \"{}\"}}",
            "x".repeat(MAX_ARGUMENT_BYTES - 20)
        );
        let mut message = answer(vec![
            call("a", "write_file", &big),
            call("b", "write_file", &fits),
        ]);
        let refusals = prepare(&mut message, &[], &ToolRegistry::default());
        let placeholder = &message.tool_calls[0].arguments;
        assert!(placeholder.len() < 100, "{placeholder}");
        let parsed: serde_json::Value = serde_json::from_str(placeholder).unwrap();
        assert!(parsed.is_object(), "providers need an object: {parsed}");
        let error = refusals.get("a").unwrap();
        assert!(error.contains("over the 1048576-byte limit"), "{error}");
        assert_eq!(message.tool_calls[1].arguments, fits);
        assert_eq!(refusals.get("b"), None);
    }

    #[test]
    fn forgotten_arguments_become_a_placeholder_in_the_latest_answer_only() {
        let calls = || {
            vec![
                call("a", "write_file", "{\"content\": \"long\"}"),
                call("b", "ls", "{}"),
            ]
        };
        let mut messages = vec![
            Message::Assistant(answer(calls())),
            Message::user("u", "again"),
            Message::Assistant(answer(calls())),
        ];
        forget_arguments(&mut messages, &["a".to_owned()]);
        let arguments = |i: usize| -> Vec<String> {
            messages[i]
                .as_assistant()
                .unwrap()
                .tool_calls
                .iter()
                .map(|c| c.arguments.clone())
                .collect()
        };
        assert_eq!(arguments(0), vec!["{\"content\": \"long\"}", "{}"]);
        assert!(
            arguments(2)[0].contains("bytes of arguments, dropped"),
            "{:?}",
            arguments(2)
        );
        assert_eq!(arguments(2)[1], "{}");
    }

    proptest! {
        /// Whatever ids a model sends, the calls end up with distinct, non-empty ids that no
        /// earlier call has, and ids that were already unique are kept.
        #[test]
        fn ids_end_up_distinct(
            earlier_ids in proptest::collection::vec("[ab_2]{0,3}", 0..4),
            ids_sent in proptest::collection::vec("[ab_2]{0,3}", 0..6),
        ) {
            let earlier = vec![Message::Assistant(answer(
                earlier_ids.iter().map(|id| call(id, "bash", "{}")).collect(),
            ))];
            let mut message = answer(ids_sent.iter().map(|id| call(id, "bash", "{}")).collect());
            prepare(&mut message, &earlier, &ToolRegistry::default());
            let mut seen: HashSet<&str> = earlier_ids.iter().map(String::as_str).collect();
            for (sent, call) in ids_sent.iter().zip(&message.tool_calls) {
                prop_assert!(!call.id.is_empty());
                prop_assert!(seen.insert(&call.id), "{} repeats", call.id);
                let unique = !sent.is_empty()
                    && !earlier_ids.contains(sent)
                    && ids_sent.iter().filter(|s| *s == sent).count() == 1;
                if unique {
                    prop_assert_eq!(&call.id, sent);
                }
            }
        }
    }
}
