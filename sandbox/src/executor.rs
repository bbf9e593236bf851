//! The `ToolExecutor` seam: in-process for `herd-runner run`, a unix socket in a pod.

use async_trait::async_trait;
use herd_crds::report::SandboxLayer;

use super::protocol::StdioCommand;
use super::protocol::{SandboxRequest, SandboxResponse};
use super::stdio::{StdioError, StdioPipe};

/// The executor itself failed (socket gone, sandbox crashed) — not a tool error.
#[derive(Debug, thiserror::Error)]
#[error("sandbox unavailable: {0}")]
pub struct ExecutorError(pub String);

/// Runs sandbox requests somewhere.
#[async_trait]
pub trait ToolExecutor: Send + Sync {
    async fn execute(&self, request: SandboxRequest) -> Result<SandboxResponse, ExecutorError>;

    /// The layers of isolation around the tools, as the sandbox told them; none from an
    /// executor that cannot say (in-process: none hold).
    fn sandbox_layers(&self) -> Vec<SandboxLayer> {
        Vec::new()
    }

    /// Starts a stdio program (an MCP server) in the sandbox and connects to its standard
    /// input and output; it stops when the pipe is dropped. Executors that cannot say so.
    async fn open_stdio(&self, command: StdioCommand) -> Result<StdioPipe, StdioError> {
        Err(StdioError(format!(
            "this sandbox cannot start {}",
            command.program()
        )))
    }

    /// The last lines a program from [`ToolExecutor::open_stdio`] wrote to its standard error
    /// (its pipe's `stderr` handle); none when the sandbox cannot say.
    async fn stdio_stderr(&self, handle: u64) -> Vec<String> {
        match self.execute(SandboxRequest::StdioStderr { handle }).await {
            Ok(SandboxResponse::StdioStderr { lines }) => lines,
            _ => Vec::new(),
        }
    }
}
