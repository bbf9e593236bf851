//! One MCP server tool as a `Tool`: called through the server's session, within the server's
//! timeout (the call is cancelled on the server when it runs out or the run stops); a failed
//! call is an error result for the model.

use std::time::Duration;

use async_trait::async_trait;
use rmcp::Peer;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RoleClient;
use serde_json::Value;

use super::result::to_output;
use crate::model::ToolSchema;
use crate::tools::{Tool, ToolContext, ToolGroup, ToolOutput};

/// A tool of an MCP server.
pub struct McpTool {
    /// `<server>__<tool>`.
    pub name: String,
    pub server: String,
    /// The server's own name of the tool.
    pub remote: String,
    pub schema: ToolSchema,
    pub peer: Peer<RoleClient>,
    pub timeout: Duration,
    /// The model accepts images.
    pub vision: bool,
}

#[async_trait]
impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    /// Not in any `toolGroups` entry: the Agent chose its servers and their tools.
    fn group(&self) -> Option<ToolGroup> {
        None
    }

    fn schema(&self) -> ToolSchema {
        self.schema.clone()
    }

    async fn call(&self, arguments: Value, _ctx: &ToolContext) -> ToolOutput {
        let arguments = match arguments {
            Value::Object(map) => map,
            Value::Null => serde_json::Map::new(),
            other => {
                return ToolOutput::error(format!(
                    "Error: the arguments of {} must be a JSON object, not {other}",
                    self.name
                ));
            }
        };
        let params = CallToolRequestParams::new(self.remote.clone()).with_arguments(arguments);
        let call = self.peer.call_tool(params);
        match tokio::time::timeout(self.timeout, call).await {
            Err(_) => ToolOutput::error(format!(
                "Error: {} did not answer within {}; the call was cancelled",
                self.name,
                humantime::format_duration(self.timeout)
            )),
            Ok(Err(error)) => ToolOutput::error(format!(
                "Error: the MCP server {} failed the call to {}: {error}",
                self.server, self.remote
            )),
            Ok(Ok(result)) => match serde_json::to_value(&result) {
                Ok(json) => to_output(&self.name, &json, self.vision),
                Err(error) => ToolOutput::error(format!(
                    "Error: the answer of {} could not be read: {error}",
                    self.name
                )),
            },
        }
    }
}
