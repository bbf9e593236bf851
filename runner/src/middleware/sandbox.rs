//! Sandbox (DeerFlow's `SandboxMiddleware`, before_agent): the run starts only when the
//! sandbox answers; otherwise it ends at once with a clear message instead of failing on the
//! first tool call after a paid model call.
//!
//! DeerFlow acquires a sandbox per run (lazily, from a warm pool) and releases it in
//! `after_agent`, because its sandboxes outlive runs and are shared by a server. In Herd the
//! sandbox is the `sandbox` container of the run's own pod (locally, an in-process executor):
//! it is acquired when the pod starts and released when the pod ends, so there is nothing
//! to acquire or release per run, and no `after_agent` hook.

use std::sync::Arc;

use async_trait::async_trait;
use herd_crds::report::StopReason;
use herd_sandbox::{SandboxClient, ToolExecutor};

use crate::agent::{Flow, Middleware};
use crate::thread::{AssistantMessage, FinishReason, Message, MessageKind, ThreadState};

/// The stop reason of a run whose sandbox does not answer (the Run fails `PodFailed`).
pub const STOP_REASON: StopReason = StopReason::SandboxUnavailable;

/// Ends the run before the first model call when the sandbox does not answer.
pub struct SandboxMiddleware {
    executor: Arc<dyn ToolExecutor>,
}

impl SandboxMiddleware {
    /// Checks `executor` before each run.
    pub fn new(executor: Arc<dyn ToolExecutor>) -> Self {
        SandboxMiddleware { executor }
    }
}

#[async_trait]
impl Middleware for SandboxMiddleware {
    fn name(&self) -> &'static str {
        "Sandbox"
    }

    async fn before_agent(&self, state: &mut ThreadState) -> Flow {
        let problem = match self.executor.prepare().await {
            Ok(()) => return Flow::Continue,
            Err(error) => error.to_string(),
        };
        tracing::warn!(%problem, "the sandbox is unreachable; stopping the run");
        let text = format!(
            "The run stopped before starting: the sandbox that runs its tools is unavailable \
             ({problem}). Nothing was done; retry once the sandbox is up."
        );
        let mut message = AssistantMessage {
            id: format!("sandbox-unavailable-{}", state.messages.len()),
            content: text,
            finish_reason: Some(FinishReason::Stop),
            ..AssistantMessage::default()
        };
        message.meta.kind = Some(MessageKind::SandboxUnavailable);
        state.messages.push(Message::Assistant(message));
        Flow::End(STOP_REASON)
    }
}

#[cfg(test)]
mod tests {
    use herd_sandbox::SandboxResponse;
    use herd_sandbox::testing::FakeExecutor;

    use super::*;
    use crate::test_doubles::{self, QueuedModel, text};

    #[tokio::test]
    async fn a_reachable_sandbox_lets_the_run_go_on() {
        let middleware =
            SandboxMiddleware::new(Arc::new(FakeExecutor::answering(SandboxResponse::Done {
                path: None,
            })));
        let mut state = ThreadState::new("hi");
        assert_eq!(middleware.before_agent(&mut state).await, Flow::Continue);
        assert_eq!(state.messages.len(), 1);
    }

    #[tokio::test]
    async fn an_unreachable_sandbox_ends_the_run_clearly_without_a_model_call() {
        let model = QueuedModel::new(vec![text("never")]);
        let (agent, env) = test_doubles::middleware_agent(
            model.clone(),
            Arc::new(SandboxMiddleware::new(Arc::new(FakeExecutor::down(
                "connection refused",
            )))),
        );
        let mut state = ThreadState::new("hi");
        let outcome = agent.run(&mut state, &env).await.unwrap();
        assert_eq!(outcome.stop_reason, STOP_REASON);
        assert!(
            outcome.answer.contains("sandbox") && outcome.answer.contains("connection refused"),
            "{}",
            outcome.answer
        );
        assert!(model.requests().is_empty());
    }

    #[tokio::test]
    async fn a_refusing_sandbox_ends_the_run_too() {
        let middleware =
            SandboxMiddleware::new(Arc::new(FakeExecutor::answering(SandboxResponse::Error {
                message: "read-only file system".into(),
            })));
        let mut state = ThreadState::new("hi");
        assert_eq!(
            middleware.before_agent(&mut state).await,
            Flow::End(STOP_REASON)
        );
        assert!(state.messages[1].text().contains("read-only file system"));
    }

    #[tokio::test]
    async fn a_run_whose_sandbox_speaks_another_version_stops_as_sandbox_unavailable()
    -> anyhow::Result<()> {
        use herd_sandbox::testing::{ConnectEachTime, fake_sandbox, hello};
        use herd_sandbox::{PROTOCOL_VERSION, RUNNER_VERSION};

        let dir = tempfile::tempdir()?;
        let socket = dir.path().join("custom-image.sock");
        let server = tokio::spawn(fake_sandbox(
            tokio::net::UnixListener::bind(&socket)?,
            hello(PROTOCOL_VERSION + 1, "9.9.9"),
        ));
        let model = QueuedModel::new(vec![text("never")]);
        let (agent, env) = test_doubles::middleware_agent(
            model.clone(),
            Arc::new(SandboxMiddleware::new(Arc::new(ConnectEachTime(socket)))),
        );
        let mut state = crate::thread::ThreadState::new("hi");
        let outcome = agent.run(&mut state, &env).await?;
        assert_eq!(
            outcome.stop_reason,
            herd_crds::report::StopReason::SandboxUnavailable
        );
        for version in [
            format!("protocol {} (herd-runner 9.9.9)", PROTOCOL_VERSION + 1),
            format!("protocol {PROTOCOL_VERSION} (herd-runner {RUNNER_VERSION})"),
        ] {
            assert!(outcome.answer.contains(&version), "{}", outcome.answer);
        }
        assert!(model.requests().is_empty(), "no model call is spent");
        server.abort();
        let _ = server.await;
        Ok(())
    }
}
