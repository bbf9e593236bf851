//! The `ToolExecutor` seam: in-process for `herd-runner run`, a unix socket in a pod.

use async_trait::async_trait;

use super::protocol::{SandboxRequest, SandboxResponse};

/// The executor itself failed (socket gone, sandbox crashed) — not a tool error.
#[derive(Debug, thiserror::Error)]
#[error("sandbox unavailable: {0}")]
pub struct ExecutorError(pub String);

/// Runs sandbox requests somewhere.
#[async_trait]
pub trait ToolExecutor: Send + Sync {
    async fn execute(&self, request: SandboxRequest) -> Result<SandboxResponse, ExecutorError>;
}
