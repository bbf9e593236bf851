//! Test doubles for the middleware tests: tools with fixed answers, a tool that forwards to
//! the sandbox, a real sandbox in a temporary directory, and ways to push one tool call
//! through one middleware or one model call through one hook.

use std::sync::Arc;

use async_trait::async_trait;
use herd_sandbox::testing::FakeExecutor;
use herd_sandbox::{
    InProcessExecutor, SandboxClient, SandboxHost, SandboxResponse, SandboxRoots, ToolExecutor,
};

use crate::agent::{Middleware, ModelCall, ModelNext, ToolNext, ToolRegistry, ToolRequest};
use crate::control::Budget;
use crate::model::{ChatModel, ModelRequest, StreamDelta, ToolSchema};
pub use crate::test_doubles::FixedTool;
use crate::test_doubles::RecordingControl;
use crate::thread::{ThreadState, ToolCall};
use crate::tools::{Tool, ToolContext, ToolGroup, ToolOutput};

/// A sandbox tool as the agent side sees it: forwards the call to the executor.
pub struct SandboxTool(pub &'static str);

#[async_trait]
impl Tool for SandboxTool {
    fn name(&self) -> &str {
        self.0
    }
    fn group(&self) -> Option<ToolGroup> {
        None
    }
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: self.0.into(),
            description: "sandbox".into(),
            parameters: serde_json::json!({"type": "object"}),
        }
    }
    async fn call(&self, arguments: serde_json::Value, ctx: &ToolContext) -> ToolOutput {
        ToolOutput::from_sandbox(self.0, ctx.executor.run_tool(self.0, arguments).await)
    }
}

/// A real sandbox over a temporary directory (kept alive by the returned guard).
pub fn local_sandbox() -> (tempfile::TempDir, Arc<dyn ToolExecutor>) {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let roots = SandboxRoots::under(&base);
    for root in [&roots.user_data, &roots.skills_public, &roots.skills_custom] {
        std::fs::create_dir_all(root).unwrap();
    }
    let sandbox = SandboxHost::new(&roots).unwrap();
    (dir, Arc::new(InProcessExecutor(Arc::new(sandbox))))
}

/// The context a tool call runs with.
pub fn tool_context(call_id: &str, executor: Arc<dyn ToolExecutor>) -> ToolContext {
    ToolContext {
        call_id: call_id.into(),
        executor,
        control: Arc::new(RecordingControl::default()),
        attempt: 1,
        budget: Budget {
            model_calls_left: 10,
            tokens_left: None,
            deadline: None,
        },
    }
}

/// Runs `call` through `middleware` and then `tools`, seeing `state`.
pub async fn run_call(
    middleware: Arc<dyn Middleware>,
    tools: Vec<Arc<dyn Tool>>,
    call: ToolCall,
    state: &ThreadState,
    executor: Arc<dyn ToolExecutor>,
) -> ToolOutput {
    let registry = ToolRegistry::new(tools, None, &[]);
    let chain = [middleware];
    let request = ToolRequest {
        ctx: tool_context(&call.id, executor),
        call,
        state,
    };
    ToolNext {
        rest: &chain,
        tools: &registry,
    }
    .run(request)
    .await
}

/// Runs one call of `name` with `arguments` through `middleware` to `tool`, on a fresh thread.
pub async fn run_tool(
    middleware: Arc<dyn Middleware>,
    tool: Arc<dyn Tool>,
    name: &str,
    arguments: serde_json::Value,
) -> ToolOutput {
    let state = ThreadState::new("t");
    let executor = Arc::new(FakeExecutor::answering(SandboxResponse::Done {
        path: None,
    }));
    run_call(
        middleware,
        vec![tool],
        call("c1", name, arguments),
        &state,
        executor,
    )
    .await
}

/// A tool call.
pub fn call(id: &str, name: &str, arguments: serde_json::Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: arguments.to_string(),
    }
}

/// A model call for `state` (its messages as the request) and a chain that ends straight at
/// `model`: for calling one model-call hook by hand.
pub fn direct_call<'a>(
    state: &'a ThreadState,
    model: &'a dyn ChatModel,
) -> (ModelCall<'a>, ModelNext<'a>) {
    fn ignore(_: StreamDelta) {}
    let request = ModelRequest {
        messages: state.messages.clone(),
        ..ModelRequest::default()
    };
    let next = ModelNext {
        rest: &[],
        model,
        on_delta: &ignore,
    };
    (ModelCall { state, request }, next)
}
