//! Reminders queued in `after_model` and delivered with the next model request only.
//!
//! `after_model` runs before the turn's tools: a message added to the thread there would sit
//! between the assistant's tool calls and their results, which strict providers reject. So
//! guards queue their warning here and `wrap_model_call` appends it to the next request, after
//! every tool result, without persisting it (DeerFlow's deferred-warning pattern).

use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::agent::{ModelCall, ModelNext, ModelResult};
use crate::thread::{Message, MessageKind};

/// A bounded queue of reminder texts for the next model request.
pub struct PendingReminders {
    /// The hidden message's `meta.kind`.
    kind: MessageKind,
    /// Most reminders kept; the oldest are dropped first.
    cap: usize,
    queue: Mutex<Vec<String>>,
}

impl PendingReminders {
    /// An empty queue whose messages are tagged `kind`, holding at most `cap` texts.
    pub fn new(kind: MessageKind, cap: usize) -> Self {
        PendingReminders {
            kind,
            cap: cap.max(1),
            queue: Mutex::new(Vec::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<String>> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `text` for the next request (once, however often it is pushed).
    pub fn push(&self, text: String) {
        let mut queue = self.lock();
        if !queue.contains(&text) {
            queue.push(text);
        }
        if queue.len() > self.cap {
            let excess = queue.len() - self.cap;
            queue.drain(..excess);
        }
    }

    /// Drops everything queued (a new run starts clean).
    pub fn clear(&self) {
        self.lock().clear();
    }

    /// How many reminders wait for the next request.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether nothing is queued.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Sends `request` on with the queued reminders appended as one hidden user message.
    /// When the call fails they are queued again: LLMErrorHandling sits outside and retries
    /// through this same hook, and the retry must still carry them.
    pub async fn deliver(&self, mut call: ModelCall<'_>, next: ModelNext<'_>) -> ModelResult {
        let taken = std::mem::take(&mut *self.lock());
        if taken.is_empty() {
            return next.run(call).await;
        }
        let id = format!(
            "{}:{}",
            self.kind.as_str(),
            call.state.usage.model_calls.saturating_add(1)
        );
        call.request
            .messages
            .push(Message::hidden_user(id, self.kind, taken.join("\n\n")));
        let result = next.run(call).await;
        if result.is_err() {
            let mut queue = self.lock();
            let newer = std::mem::take(&mut *queue);
            *queue = taken;
            drop(queue);
            for text in newer {
                self.push(text);
            }
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::middleware::shared::test_doubles::direct_call;
    use crate::model::{ChatModel, ModelError, ModelErrorKind};
    use crate::test_doubles::{QueuedModel, text};
    use crate::thread::{MessageKind, ThreadState};

    async fn send(reminders: &PendingReminders, model: &dyn ChatModel) -> bool {
        let state = ThreadState::new("t");
        let (call, next) = direct_call(&state, model);
        reminders.deliver(call, next).await.is_ok()
    }

    #[tokio::test]
    async fn reminders_go_out_once_and_survive_a_failed_call() {
        let model = QueuedModel {
            answers: Mutex::new(
                [
                    Err(ModelError::new(ModelErrorKind::Server, "503")),
                    Ok(text("a")),
                    Ok(text("b")),
                ]
                .into_iter()
                .collect(),
            ),
            requests: Mutex::new(Vec::new()),
        };
        let reminders = PendingReminders::new(MessageKind::BudgetWarning, 4);
        reminders.push("first".into());
        assert!(!send(&reminders, &model).await);
        assert_eq!(reminders.len(), 1, "requeued for the retry");
        reminders.push("second".into());
        assert!(send(&reminders, &model).await);
        assert!(send(&reminders, &model).await);
        let requests = model.requests();
        let last_texts: Vec<&str> = requests
            .iter()
            .map(|request| request.messages.last().map_or("", |m| m.text()))
            .collect();
        assert_eq!(last_texts, ["first", "first\n\nsecond", "t"]);
        let reminder = requests[1].messages.last().unwrap();
        assert_eq!(reminder.meta().kind, Some(MessageKind::BudgetWarning));
        assert!(reminder.meta().hidden);
    }

    #[test]
    fn the_queue_is_deduplicated_and_capped() {
        let reminders = PendingReminders::new(MessageKind::BudgetWarning, 2);
        reminders.push("a".into());
        reminders.push("a".into());
        assert_eq!(reminders.len(), 1);
        reminders.push("b".into());
        reminders.push("c".into());
        assert_eq!(*reminders.lock(), vec!["b".to_string(), "c".to_string()]);
        reminders.clear();
        assert!(reminders.is_empty());
    }
}
