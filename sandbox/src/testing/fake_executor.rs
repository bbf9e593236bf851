//! The fake of [`ToolExecutor`]: every request answered by a closure, and recorded.

use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;
use herd_crds::report::SandboxLayer;

use crate::executor::{ExecutorError, ToolExecutor};
use crate::protocol::{SandboxRequest, SandboxResponse};

/// How a [`FakeExecutor`] answers.
type Answer = Box<dyn Fn(&SandboxRequest) -> Result<SandboxResponse, ExecutorError> + Send + Sync>;

/// A [`ToolExecutor`] that answers from a closure and records every request.
pub struct FakeExecutor {
    answer: Answer,
    requests: Mutex<Vec<SandboxRequest>>,
    /// What it says of its layers of isolation.
    layers: Vec<SandboxLayer>,
}

impl std::fmt::Debug for FakeExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeExecutor")
            .field("requests", &self.requests)
            .finish_non_exhaustive()
    }
}

impl FakeExecutor {
    /// Answers each request with what `answer` returns for it.
    pub fn new(
        answer: impl Fn(&SandboxRequest) -> Result<SandboxResponse, ExecutorError>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        FakeExecutor {
            answer: Box::new(answer),
            requests: Mutex::new(Vec::new()),
            layers: Vec::new(),
        }
    }

    /// Tells `layers` as its layers of isolation.
    pub fn with_layers(mut self, layers: Vec<SandboxLayer>) -> Self {
        self.layers = layers;
        self
    }

    /// Answers every request with `response`.
    pub fn answering(response: SandboxResponse) -> Self {
        Self::new(move |_| Ok(response.clone()))
    }

    /// Cannot reach its sandbox: every request fails with `reason`.
    pub fn down(reason: impl Into<String>) -> Self {
        let reason = reason.into();
        Self::new(move |_| Err(ExecutorError(reason.clone())))
    }

    /// The requests so far, in order.
    pub fn requests(&self) -> Vec<SandboxRequest> {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[async_trait]
impl ToolExecutor for FakeExecutor {
    async fn execute(&self, request: SandboxRequest) -> Result<SandboxResponse, ExecutorError> {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(request.clone());
        (self.answer)(&request)
    }

    fn sandbox_layers(&self) -> Vec<SandboxLayer> {
        self.layers.clone()
    }
}
