//! A `sandbox {op}` span around each request an executor sends: what a round trip to a pod's
//! `sandbox` container (or a local run's confined one) costs, under the tool call that made
//! it. The in-process sandbox has no round trip and is not wrapped.

use std::sync::Arc;

use async_trait::async_trait;
use herd_crds::report::SandboxLayer;
use herd_sandbox::{
    ExecutorError, SandboxRequest, SandboxResponse, StdioCommand, StdioError, StdioPipe,
    ToolExecutor,
};

use super::spans::sandbox_round_trip;

/// `inner`, with a span for each request.
#[derive(Debug)]
pub struct TracedExecutor<E: ?Sized> {
    inner: Arc<E>,
}

impl<E: ToolExecutor + ?Sized> TracedExecutor<E> {
    /// Traces the requests sent through `inner`.
    pub fn new(inner: Arc<E>) -> Self {
        TracedExecutor { inner }
    }
}

#[async_trait]
impl<E: ToolExecutor + ?Sized> ToolExecutor for TracedExecutor<E> {
    async fn execute(&self, request: SandboxRequest) -> Result<SandboxResponse, ExecutorError> {
        let span = sandbox_round_trip(request.op());
        let result = self.inner.execute(request).await;
        span.finish(result.as_ref().err().map(|error| error.0.as_str()));
        result
    }

    fn sandbox_layers(&self) -> Vec<SandboxLayer> {
        self.inner.sandbox_layers()
    }

    async fn open_stdio(&self, command: StdioCommand) -> Result<StdioPipe, StdioError> {
        self.inner.open_stdio(command).await
    }

    // `stdio_stderr` keeps its default: a request through `execute`, traced like the others.
}
