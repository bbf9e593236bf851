//! ThreadData (DeerFlow's `ThreadDataMiddleware`, before_agent): the thread's folders exist
//! before anything touches them, and the user's newest message says which run brought it.
//!
//! DeerFlow computes per-thread host paths here; in Herd the sandbox owns the paths (one
//! sandbox per run), so this only asks it to create `workspace/`, `uploads/` and `outputs/`.

use std::sync::Arc;

use async_trait::async_trait;
use herd_sandbox::{SandboxClient, ToolExecutor};

use super::shared::clock::Clock;
use crate::agent::{Flow, Middleware};
use crate::thread::{Message, ThreadState};

/// `meta.extra` key: the Run attempt that first saw the message.
pub const RUN_ATTEMPT_KEY: &str = "run_attempt";
/// `meta.extra` key: when the message entered the thread (RFC 3339).
pub const TIMESTAMP_KEY: &str = "timestamp";

/// Prepares the thread's folders and tags the newest user message.
pub struct ThreadData {
    executor: Arc<dyn ToolExecutor>,
    attempt: u32,
    clock: Clock,
}

impl ThreadData {
    /// `attempt` is the Run's attempt (1 for the first pod); `clock` stamps the message.
    pub fn new(executor: Arc<dyn ToolExecutor>, attempt: u32, clock: Clock) -> Self {
        ThreadData {
            executor,
            attempt,
            clock,
        }
    }
}

#[async_trait]
impl Middleware for ThreadData {
    fn name(&self) -> &'static str {
        "ThreadData"
    }

    async fn before_agent(&self, state: &mut ThreadState) -> Flow {
        // An unreachable sandbox is reported by the Sandbox middleware, which owns that
        // decision; here a failure only means the folders could not be made yet.
        if let Err(error) = self.executor.prepare().await {
            tracing::warn!(%error, "could not prepare the thread's folders");
        }
        tag_last_user_message(state, self.attempt, &(self.clock)());
        Flow::Continue
    }
}

/// Stamps the newest visible user message with the attempt and time, once: a resumed run
/// keeps the stamp of the run the message arrived with.
fn tag_last_user_message(state: &mut ThreadState, attempt: u32, now: &jiff::Zoned) {
    let last_user = state
        .messages
        .iter_mut()
        .rev()
        .find_map(|message| match message {
            Message::User(user) if !user.meta.hidden => Some(user),
            _ => None,
        });
    let Some(user) = last_user else {
        return;
    };
    let extra = &mut user.meta.extra;
    if extra.contains_key(TIMESTAMP_KEY) {
        return;
    }
    extra.insert(RUN_ATTEMPT_KEY.to_owned(), attempt.into());
    extra.insert(TIMESTAMP_KEY.to_owned(), now.timestamp().to_string().into());
}

#[cfg(test)]
mod tests {
    use herd_sandbox::testing::FakeExecutor;
    use herd_sandbox::{SandboxRequest, SandboxResponse};

    use super::*;
    use crate::middleware::shared::clock::fixed;
    use crate::thread::MessageKind;

    #[tokio::test]
    async fn prepares_folders_and_tags_the_newest_user_message_once() {
        let executor = Arc::new(FakeExecutor::answering(SandboxResponse::Done {
            path: None,
        }));
        let clock = fixed("2026-03-01T09:00:00+00:00[UTC]");
        let middleware = ThreadData::new(executor.clone(), 2, clock);
        let mut state = ThreadState::new("first");
        state.messages.push(Message::user("user-1", "second"));
        state
            .messages
            .push(Message::hidden_user("h", MessageKind::Uploads, "hidden"));
        assert_eq!(middleware.before_agent(&mut state).await, Flow::Continue);
        assert_eq!(executor.requests(), vec![SandboxRequest::Prepare]);
        let tagged = &state.messages[1].meta().extra;
        assert_eq!(tagged[RUN_ATTEMPT_KEY], 2);
        assert_eq!(tagged[TIMESTAMP_KEY], "2026-03-01T09:00:00Z");
        assert!(state.messages[0].meta().extra.is_empty());
        assert!(state.messages[2].meta().extra.is_empty());

        let later = ThreadData::new(executor, 3, fixed("2026-03-02T09:00:00+00:00[UTC]"));
        later.before_agent(&mut state).await;
        assert_eq!(state.messages[1].meta().extra[RUN_ATTEMPT_KEY], 2);
    }

    #[tokio::test]
    async fn an_unreachable_sandbox_is_left_to_the_sandbox_middleware() {
        let middleware = ThreadData::new(
            Arc::new(FakeExecutor::down("socket closed")),
            1,
            fixed("2026-03-01T09:00:00+00:00[UTC]"),
        );
        let mut state = ThreadState::new("hi");
        assert_eq!(middleware.before_agent(&mut state).await, Flow::Continue);
        assert_eq!(state.messages[0].meta().extra[RUN_ATTEMPT_KEY], 1);
    }
}
