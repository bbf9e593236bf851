//! The executor of `herd-runner run`: the sandbox lives in the same process.

use std::sync::Arc;

use async_trait::async_trait;

use super::executor::{ExecutorError, ToolExecutor};
use super::host::SandboxHost;
use super::protocol::StdioCommand;
use super::protocol::{SandboxRequest, SandboxResponse};
use super::stdio::{StdioError, StdioPipe};

/// Runs requests on a `SandboxHost` in this process; it never fails as an executor.
#[derive(Clone, Debug)]
pub struct InProcessExecutor(pub Arc<SandboxHost>);

#[async_trait]
impl ToolExecutor for InProcessExecutor {
    async fn execute(&self, request: SandboxRequest) -> Result<SandboxResponse, ExecutorError> {
        Ok(self.0.handle(request).await)
    }

    async fn open_stdio(&self, command: StdioCommand) -> Result<StdioPipe, StdioError> {
        Ok(self.0.spawn_stdio(&command)?.into_pipe())
    }
}
