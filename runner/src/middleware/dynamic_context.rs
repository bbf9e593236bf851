//! DynamicContext (DeerFlow's `DynamicContextMiddleware`, before_agent): the date and memory
//! reach the model as hidden messages, so the system prompt stays byte-identical and provider
//! prefix caches hit.
//!
//! - First turn: a `<system-reminder>` with the date and, when memory has content, a hidden
//!   `<memory>` message, both placed before the user's message and persisted once: a frozen
//!   prefix every later call reuses.
//! - Same date later (a resumed run): nothing.
//! - Midnight crossed: a date-only reminder before the current turn.
//!
//! Subagents get the date-only variant (DeerFlow's `SubagentDateContextMiddleware`).

use std::sync::Arc;

use async_trait::async_trait;

use super::shared::clock::{Clock, date_line};
use crate::agent::{Flow, Middleware};
use crate::control::ControlPlane;
use crate::memory::inject::{TokenCounter, format_memory_counted};
use crate::thread::{Message, MessageKind, ThreadState};

/// `meta.extra` flag on both: summarization keeps these messages.
pub const REMINDER_FLAG: &str = "dynamic_context_reminder";
/// `meta.extra` key holding the date a reminder announced (`YYYY-MM-DD`).
pub const REMINDER_DATE: &str = "reminder_date";

/// Where the memory comes from and how much of it fits.
pub struct MemorySource {
    pub control: Arc<dyn ControlPlane>,
    /// The Agent's `memory.injectionTokens`, clamped to the context window's share.
    pub injection_tokens: usize,
    /// How lines are counted against `injection_tokens`.
    pub count_tokens: TokenCounter,
}

/// Injects the date and memory as hidden messages.
pub struct DynamicContext {
    clock: Clock,
    memory: Option<MemorySource>,
    subagent: bool,
}

impl DynamicContext {
    /// The lead agent's variant; `memory` is `None` when the Agent's memory is off.
    pub fn new(clock: Clock, memory: Option<MemorySource>) -> Self {
        DynamicContext {
            clock,
            memory,
            subagent: false,
        }
    }

    /// The subagent variant: the date only, never memory.
    pub fn subagent(clock: Clock) -> Self {
        DynamicContext {
            clock,
            memory: None,
            subagent: true,
        }
    }

    async fn memory_text(&self) -> Option<String> {
        let source = self.memory.as_ref()?;
        match source.control.read_memory().await {
            Ok(document) => {
                format_memory_counted(&document, source.injection_tokens, source.count_tokens)
            }
            Err(error) => {
                tracing::warn!(%error, "memory not injected: reading it failed");
                None
            }
        }
    }
}

#[async_trait]
impl Middleware for DynamicContext {
    fn name(&self) -> &'static str {
        if self.subagent {
            "SubagentDateContext"
        } else {
            "DynamicContext"
        }
    }

    async fn before_agent(&self, state: &mut ThreadState) -> Flow {
        let Some(position) = turn_start(state) else {
            return Flow::Continue;
        };
        let now = (self.clock)();
        let date = now.date().to_string();
        let anchor = state.messages[position].id().to_owned();
        let mut injected = Vec::new();
        match last_reminder_date(state) {
            Some(last) if last == date => return Flow::Continue,
            Some(_) => injected.push(date_reminder(format!("{anchor}__date-{date}"), &now)),
            None => {
                injected.push(date_reminder(format!("{anchor}__date"), &now));
                if let Some(memory) = self.memory_text().await {
                    injected.push(flagged(Message::hidden_user(
                        format!("{anchor}__memory"),
                        MessageKind::Memory,
                        format!("<memory>\n{memory}\n</memory>"),
                    )));
                }
            }
        }
        state.messages.splice(position..position, injected);
        Flow::Continue
    }
}

/// Where the current turn starts: the newest visible user message, moved back over the
/// uploads list placed just before it, so date and memory come first in the frozen prefix.
fn turn_start(state: &ThreadState) -> Option<usize> {
    let mut position = state
        .messages
        .iter()
        .rposition(|message| matches!(message, Message::User(user) if !user.meta.hidden))?;
    while position > 0 {
        match &state.messages[position - 1] {
            Message::User(user) if user.meta.kind == Some(MessageKind::Uploads) => {
                position -= 1;
            }
            _ => break,
        }
    }
    Some(position)
}

/// Whether summarization must keep this message.
pub fn is_reminder(message: &Message) -> bool {
    message
        .meta()
        .extra
        .get(REMINDER_FLAG)
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false)
}

fn last_reminder_date(state: &ThreadState) -> Option<String> {
    state.messages.iter().rev().find_map(|message| {
        if !is_reminder(message) {
            return None;
        }
        message
            .meta()
            .extra
            .get(REMINDER_DATE)
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
    })
}

fn date_reminder(id: String, now: &jiff::Zoned) -> Message {
    let content = format!(
        "<system-reminder>\n<current_date>{}</current_date>\n</system-reminder>",
        date_line(now)
    );
    let mut message = flagged(Message::system(id, MessageKind::DynamicContext, content));
    if let Message::System(system) = &mut message {
        system
            .meta
            .extra
            .insert(REMINDER_DATE.to_owned(), now.date().to_string().into());
    }
    message
}

fn flagged(mut message: Message) -> Message {
    let meta = match &mut message {
        Message::System(m) => &mut m.meta,
        Message::User(m) => &mut m.meta,
        Message::Assistant(m) => &mut m.meta,
        Message::Tool(m) => &mut m.meta,
    };
    meta.extra.insert(REMINDER_FLAG.to_owned(), true.into());
    message
}

#[cfg(test)]
mod tests {
    use herd_crds::wire::{Fact, FactCategory, MemoryDocument};

    use super::*;
    use crate::middleware::shared::clock::fixed;
    use crate::test_doubles::RecordingControl;
    use crate::thread::AssistantMessage;

    fn control_with_memory() -> Arc<RecordingControl> {
        let control = RecordingControl::default();
        *control.memory.lock().unwrap() = MemoryDocument {
            facts: vec![Fact {
                id: "fact-1".into(),
                content: "Prefers <terse> answers".into(),
                category: FactCategory::Preference,
                confidence: 0.9,
                source: "run-0".into(),
                created_at: "2026-01-01T00:00:00Z".into(),
                updated_at: "2026-01-01T00:00:00Z".into(),
                confirmation_count: 0,
            }],
            ..MemoryDocument::default()
        };
        Arc::new(control)
    }

    fn lead(time: &str, control: Arc<RecordingControl>) -> DynamicContext {
        DynamicContext::new(
            fixed(time),
            Some(MemorySource {
                control,
                injection_tokens: 2000,
                count_tokens: crate::prompt::estimate_tokens,
            }),
        )
    }

    const DAY_ONE: &str = "2026-03-01T23:59:00+00:00[UTC]";
    const DAY_TWO: &str = "2026-03-02T00:01:00+00:00[UTC]";

    #[tokio::test]
    async fn the_first_turn_gets_date_and_memory_before_the_user_message() {
        let mut state = ThreadState::new("hello");
        state.messages.insert(
            0,
            Message::hidden_user("up", MessageKind::Uploads, "<current_uploads/>"),
        );
        lead(DAY_ONE, control_with_memory())
            .before_agent(&mut state)
            .await;
        let kinds: Vec<_> = state.messages.iter().map(|m| m.meta().kind).collect();
        assert_eq!(
            kinds,
            vec![
                Some(MessageKind::DynamicContext),
                Some(MessageKind::Memory),
                Some(MessageKind::Uploads),
                None
            ]
        );
        assert!(matches!(state.messages[0], Message::System(_)));
        assert_eq!(
            state.messages[0].text(),
            "<system-reminder>\n<current_date>2026-03-01, Sunday</current_date>\n</system-reminder>"
        );
        assert_eq!(
            state.messages[1].text(),
            "<memory>\nFacts:\n- [preference | 0.90] Prefers &lt;terse&gt; answers\n</memory>"
        );
        assert!(state.messages[1].meta().hidden);
        assert!(is_reminder(&state.messages[0]) && is_reminder(&state.messages[1]));
        assert_eq!(state.messages[0].id(), "up__date");
    }

    #[tokio::test]
    async fn the_same_date_later_adds_nothing() {
        let mut state = ThreadState::new("hello");
        let middleware = lead(DAY_ONE, control_with_memory());
        middleware.before_agent(&mut state).await;
        let frozen = state.messages.clone();
        state
            .messages
            .push(Message::Assistant(AssistantMessage::default()));
        state.messages.push(Message::user("answer-1", "PDF"));
        middleware.before_agent(&mut state).await;
        assert_eq!(state.messages[..frozen.len()], frozen[..]);
        assert_eq!(state.messages.len(), frozen.len() + 2);
    }

    #[tokio::test]
    async fn crossing_midnight_adds_a_date_only_reminder_before_the_current_turn() {
        let control = control_with_memory();
        let mut state = ThreadState::new("hello");
        lead(DAY_ONE, control.clone())
            .before_agent(&mut state)
            .await;
        state
            .messages
            .push(Message::Assistant(AssistantMessage::default()));
        state.messages.push(Message::user("answer-1", "PDF"));
        lead(DAY_TWO, control).before_agent(&mut state).await;
        let n = state.messages.len();
        assert_eq!(state.messages[n - 1].text(), "PDF");
        assert_eq!(
            state.messages[n - 2].text(),
            "<system-reminder>\n<current_date>2026-03-02, Monday</current_date>\n</system-reminder>"
        );
        assert_eq!(state.messages[n - 2].id(), "answer-1__date-2026-03-02");
        let memories = state
            .messages
            .iter()
            .filter(|m| m.meta().kind == Some(MessageKind::Memory))
            .count();
        assert_eq!(memories, 1, "memory stays in the frozen prefix only");
    }

    #[tokio::test]
    async fn empty_memory_injects_the_date_only() {
        let mut state = ThreadState::new("hello");
        lead(DAY_ONE, Arc::new(RecordingControl::default()))
            .before_agent(&mut state)
            .await;
        assert_eq!(state.messages.len(), 2);
    }

    #[tokio::test]
    async fn the_subagent_variant_injects_the_date_only() {
        let middleware = DynamicContext::subagent(fixed(DAY_ONE));
        assert_eq!(middleware.name(), "SubagentDateContext");
        let mut state = ThreadState::new("task");
        middleware.before_agent(&mut state).await;
        assert_eq!(state.messages.len(), 2);
        assert_eq!(
            state.messages[0].meta().kind,
            Some(MessageKind::DynamicContext)
        );
    }
}
