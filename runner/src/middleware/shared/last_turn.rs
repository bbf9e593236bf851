//! Editing the model's newest answer from `after_model`: the guards (loop, budget, subagent
//! limit, safety, terminal response) share these so they strip and annotate alike.

use herd_crds::report::StopReason;

use crate::thread::{AssistantMessage, FinishReason, Message, ThreadState};

/// The assistant message the model just produced, if it is still the thread's last message
/// (an earlier `after_model` hook may have removed it).
pub fn last_assistant(state: &ThreadState) -> Option<&AssistantMessage> {
    state.messages.last().and_then(Message::as_assistant)
}

/// Mutable access to the model's newest answer, under the same condition as
/// [`last_assistant`].
pub fn last_assistant_mut(state: &mut ThreadState) -> Option<&mut AssistantMessage> {
    match state.messages.last_mut() {
        Some(Message::Assistant(message)) => Some(message),
        _ => None,
    }
}

/// Appends a framework note to the answer's text, after a blank line.
pub fn append_note(message: &mut AssistantMessage, note: &str) {
    if message.content.trim().is_empty() {
        message.content = note.to_owned();
    } else {
        message.content.push_str("\n\n");
        message.content.push_str(note);
    }
}

/// Removes every tool call so the loop ends on this answer, and appends `note`. A
/// `tool_calls` finish reason becomes `stop`, as the message no longer calls anything.
/// Returns how many calls were removed.
pub fn strip_tool_calls(message: &mut AssistantMessage, note: &str) -> usize {
    let removed = message.tool_calls.len();
    message.tool_calls.clear();
    if message.finish_reason == Some(FinishReason::ToolCalls) {
        message.finish_reason = Some(FinishReason::Stop);
    }
    append_note(message, note);
    removed
}

/// Records why the run stops unless a guard that ran earlier in this `after_model` pass
/// already did: the first guard to act explains the stop.
pub fn settle_stop_reason(state: &mut ThreadState, reason: StopReason) {
    state.stop_reason.get_or_insert(reason);
}

/// Whether the run's visible turn (everything after the latest user message that is not
/// hidden framework context) has executed at least one tool.
pub fn turn_used_tools(state: &ThreadState) -> bool {
    let start = state
        .messages
        .iter()
        .rposition(|message| matches!(message, Message::User(user) if !user.meta.hidden))
        .map_or(0, |index| index + 1);
    state.messages[start..]
        .iter()
        .any(|message| matches!(message, Message::Tool(_)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_doubles::{calls, text};
    use crate::thread::MessageKind;

    #[test]
    fn stripping_clears_calls_and_notes_why() {
        let mut message = calls(&[("bash", serde_json::json!({"command": "ls"}))]);
        message.finish_reason = Some(FinishReason::ToolCalls);
        assert_eq!(strip_tool_calls(&mut message, "[STOP]"), 1);
        assert!(message.tool_calls.is_empty());
        assert_eq!(message.content, "[STOP]");
        assert_eq!(message.finish_reason, Some(FinishReason::Stop));
    }

    #[test]
    fn notes_follow_existing_text_after_a_blank_line() {
        let mut message = text("partial answer");
        append_note(&mut message, "[NOTE]");
        assert_eq!(message.content, "partial answer\n\n[NOTE]");
    }

    #[test]
    fn the_first_stop_reason_wins() {
        let mut state = ThreadState::new("t");
        settle_stop_reason(&mut state, StopReason::SafetyStop);
        settle_stop_reason(&mut state, StopReason::LoopDetected);
        assert_eq!(state.stop_reason, Some(StopReason::SafetyStop));
    }

    #[test]
    fn only_a_trailing_assistant_message_counts() {
        let mut state = ThreadState::new("t");
        assert!(last_assistant_mut(&mut state).is_none());
        state.messages.push(Message::Assistant(text("a")));
        assert_eq!(
            last_assistant(&state).map(|m| m.content.as_str()),
            Some("a")
        );
    }

    #[test]
    fn tools_count_only_after_the_latest_visible_user_message() {
        let call = calls(&[("ls", serde_json::json!({}))]);
        let mut state = ThreadState::new("first");
        state.messages.push(Message::Assistant(call.clone()));
        state.messages.push(Message::tool(
            &call.tool_calls[0],
            crate::thread::ToolStatus::Success,
            "x",
        ));
        assert!(turn_used_tools(&state));
        state.messages.push(Message::hidden_user(
            "r",
            MessageKind::LoopWarning,
            "hidden",
        ));
        assert!(
            turn_used_tools(&state),
            "hidden context does not start a turn"
        );
        state.messages.push(Message::user("u2", "second"));
        assert!(!turn_used_tools(&state));
    }
}
