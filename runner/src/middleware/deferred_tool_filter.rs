//! DeferredToolFilter (DeerFlow's): a deferred tool's schema reaches the model only once it
//! is promoted (`tool_search`, McpRouting), and a call to one that is not is refused with
//! what to do instead.

use std::collections::BTreeSet;

use async_trait::async_trait;

use crate::agent::{Middleware, ToolNext, ToolRequest};
use crate::mcp::tool_search::TOOL_SEARCH;
use crate::model::ModelRequest;
use crate::thread::ThreadState;
use crate::tools::ToolOutput;

/// Keeps unpromoted deferred tools out of requests and refuses calls to them.
pub struct DeferredToolFilter {
    deferred: BTreeSet<String>,
}

impl DeferredToolFilter {
    /// `deferred`: the names whose schemas wait for promotion.
    pub fn new(deferred: impl IntoIterator<Item = String>) -> Self {
        DeferredToolFilter {
            deferred: deferred.into_iter().collect(),
        }
    }

    fn hidden(&self, state: &ThreadState, name: &str) -> bool {
        self.deferred.contains(name) && !state.promoted_tools.contains(name)
    }
}

#[async_trait]
impl Middleware for DeferredToolFilter {
    fn name(&self) -> &'static str {
        "DeferredToolFilter"
    }

    fn rewrite_request(&self, state: &ThreadState, request: &mut ModelRequest) {
        if request
            .tools
            .iter()
            .any(|tool| self.hidden(state, &tool.name))
        {
            request.tools = request
                .tools
                .iter()
                .filter(|tool| !self.hidden(state, &tool.name))
                .cloned()
                .collect();
        }
    }

    async fn wrap_tool_call(&self, request: ToolRequest<'_>, next: ToolNext<'_>) -> ToolOutput {
        let name = &request.call.name;
        if self.hidden(request.state, name) {
            return ToolOutput::error(format!(
                "Error: {name} is a deferred tool whose schema is not loaded. Call \
                 {TOOL_SEARCH} with {{\"query\": \"select:{name}\"}} first, then call {name}."
            ));
        }
        next.run(request).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use herd_sandbox::SandboxResponse;
    use herd_sandbox::testing::FakeExecutor;
    use serde_json::json;

    use super::*;
    use crate::middleware::shared::test_doubles::{call, run_call};
    use crate::test_doubles::{self, FixedTool, QueuedModel, RecordingControl, calls, text};
    use crate::thread::{Message, ToolStatus};
    use crate::tools::Tool;

    fn tools() -> Vec<Arc<dyn Tool>> {
        vec![
            Arc::new(FixedTool::ok("time__now", "12:00")),
            Arc::new(FixedTool::ok("read_file", "text")),
        ]
    }

    #[tokio::test]
    async fn unpromoted_schemas_are_filtered_and_their_calls_refused() -> anyhow::Result<()> {
        let model = QueuedModel::new(vec![calls(&[("time__now", json!({}))]), text("done")]);
        let (agent, env) = test_doubles::agent(
            model.clone(),
            tools(),
            vec![Arc::new(DeferredToolFilter::new(["time__now".to_owned()]))],
            Arc::new(RecordingControl::default()),
        );
        let mut state = ThreadState::new("t");
        agent.run(&mut state, &env).await?;
        let first = &model.requests()[0];
        let offered: Vec<&str> = first.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(offered, ["read_file"]);
        let refused = state
            .messages
            .iter()
            .find_map(|m| match m {
                Message::Tool(t) => Some(t),
                _ => None,
            })
            .ok_or_else(|| anyhow::anyhow!("no tool result"))?;
        assert_eq!(refused.status, ToolStatus::Error);
        assert!(
            refused.content.contains("select:time__now"),
            "{}",
            refused.content
        );

        let mut promoted = ThreadState::new("t");
        promoted.promoted_tools.insert("time__now".into());
        let filter: Arc<dyn Middleware> =
            Arc::new(DeferredToolFilter::new(["time__now".to_owned()]));
        let executor = Arc::new(FakeExecutor::answering(SandboxResponse::Done {
            path: None,
        }));
        let output = run_call(
            filter,
            tools(),
            call("c2", "time__now", json!({})),
            &promoted,
            executor,
        )
        .await;
        assert_eq!(
            (output.status, output.content.as_str()),
            (ToolStatus::Success, "12:00")
        );
        Ok(())
    }
}
