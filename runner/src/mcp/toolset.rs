//! The MCP tools of one run: every server started at once at the run's start, each listing
//! its tools within its timeout. A server that fails is a warning and its tools are absent;
//! the run goes on with the others. Sessions end when the toolset is dropped.

use std::sync::Arc;

use futures::future::join_all;
use herd_sandbox::ToolExecutor;

use super::connect::{McpClient, connect};
use super::names::qualified;
use super::schema::capped;
use super::tool::McpTool;
use crate::plan::{McpPlan, McpServerPlan, McpTransport};
use crate::tools::Tool;

/// With `deferred` absent, deferral starts above this many tools (DeerFlow's threshold).
pub const DEFER_ABOVE: usize = 10;
/// Most tools taken from one server.
pub const MAX_TOOLS_PER_SERVER: usize = 128;

/// Whether the tools are deferred: as the Agent says, else when there are more than
/// [`DEFER_ABOVE`].
pub fn deferral(setting: Option<bool>, tools: usize) -> bool {
    setting.unwrap_or(tools > DEFER_ABOVE)
}

/// The started servers and their tools.
#[derive(Default)]
pub struct McpToolset {
    tools: Vec<Arc<dyn Tool>>,
    /// Kept for the run: dropping a client ends its session.
    _clients: Vec<McpClient>,
}

impl std::fmt::Debug for McpToolset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpToolset")
            .field("tools", &self.names().collect::<Vec<_>>())
            .finish()
    }
}

impl McpToolset {
    /// Starts every server of `plan`; `warn` hears about the ones that failed and what was
    /// left out, never with a header's value (a server's own words may repeat one).
    /// `vision`: the model accepts images.
    pub async fn start(
        plan: &McpPlan,
        executor: &dyn ToolExecutor,
        vision: bool,
        warn: &(dyn Fn(String) + Sync),
    ) -> Self {
        let secrets = header_values(plan);
        let warn = |message: String| warn(redacted(message, &secrets));
        let started = join_all(
            plan.servers
                .iter()
                .map(|server| start_server(server, executor)),
        )
        .await;
        let mut tools = Vec::new();
        let mut clients = Vec::new();
        for (server, result) in plan.servers.iter().zip(started) {
            match result {
                Ok((client, listed)) => {
                    let (kept, notes) = select(server, listed, &client, vision);
                    notes.into_iter().for_each(&warn);
                    tools.extend(kept.into_iter().map(|tool| tool as Arc<dyn Tool>));
                    clients.push(client);
                }
                Err(error) => warn(format!(
                    "MCP server {} did not start, so its tools are absent: {error}",
                    server.name
                )),
            }
        }
        McpToolset {
            tools,
            _clients: clients,
        }
    }

    /// A toolset of `tools`, for tests of what uses one.
    #[cfg(test)]
    pub(crate) fn of_tools(tools: Vec<Arc<dyn Tool>>) -> Self {
        McpToolset {
            tools,
            _clients: Vec::new(),
        }
    }

    /// The tools, in the servers' order.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.tools.clone()
    }

    /// Their names.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().map(|tool| tool.name())
    }

    /// Their schemas, as the model would get them.
    pub fn schemas(&self) -> Vec<crate::model::ToolSchema> {
        self.tools.iter().map(|tool| tool.schema()).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

/// Every header value of the plan's HTTP servers.
fn header_values(plan: &McpPlan) -> Vec<&str> {
    plan.servers
        .iter()
        .flat_map(|server| match &server.transport {
            McpTransport::Http { headers, .. } => {
                headers.iter().map(|h| h.value.as_str()).collect()
            }
            McpTransport::Stdio { .. } => Vec::new(),
        })
        .filter(|value| !value.is_empty())
        .collect()
}

/// `message` with every one of `secrets` replaced.
fn redacted(mut message: String, secrets: &[&str]) -> String {
    for secret in secrets {
        if message.contains(secret) {
            message = message.replace(secret, "[REDACTED]");
        }
    }
    message
}

async fn start_server(
    server: &McpServerPlan,
    executor: &dyn ToolExecutor,
) -> Result<(McpClient, Vec<rmcp::model::Tool>), String> {
    let client = connect(server, executor).await?;
    let listing = tokio::time::timeout(server.timeout, client.peer().list_all_tools());
    match listing.await {
        Ok(Ok(tools)) => Ok((client, tools)),
        Ok(Err(error)) => Err(format!("listing its tools failed: {error}")),
        Err(_) => Err(format!(
            "it did not list its tools within {}",
            humantime::format_duration(server.timeout)
        )),
    }
}

/// The server's tools the agent gets: the allow-list applied, names made unique and capped;
/// notes say what was left out.
fn select(
    server: &McpServerPlan,
    listed: Vec<rmcp::model::Tool>,
    client: &McpClient,
    vision: bool,
) -> (Vec<Arc<McpTool>>, Vec<String>) {
    let mut notes = Vec::new();
    if let Some(allowed) = &server.tools {
        for missing in allowed
            .iter()
            .filter(|name| !listed.iter().any(|t| t.name == **name))
        {
            notes.push(format!(
                "MCP server {} offers no tool {missing} (spec.mcp.servers[].tools)",
                server.name
            ));
        }
    }
    let mut kept: Vec<Arc<McpTool>> = Vec::new();
    for tool in listed {
        let remote = tool.name.to_string();
        if server
            .tools
            .as_ref()
            .is_some_and(|allowed| !allowed.contains(&remote))
        {
            continue;
        }
        let name = qualified(&server.name, &remote);
        if kept.iter().any(|existing| existing.name == name) {
            notes.push(format!(
                "MCP server {}: tool {remote} is left out, its name reads as another's ({name})",
                server.name
            ));
            continue;
        }
        if kept.len() == MAX_TOOLS_PER_SERVER {
            notes.push(format!(
                "MCP server {} offers more than {MAX_TOOLS_PER_SERVER} tools; the rest are left \
                 out (list the ones you need in spec.mcp.servers[].tools)",
                server.name
            ));
            break;
        }
        let input = serde_json::Value::Object((*tool.input_schema).clone());
        let (schema, warning) = capped(&name, tool.description.as_deref().unwrap_or(""), input);
        notes.extend(warning.map(|w| format!("MCP server {}: {w}", server.name)));
        kept.push(Arc::new(McpTool {
            name,
            server: server.name.clone(),
            remote,
            schema,
            peer: client.peer().clone(),
            timeout: server.timeout,
            vision,
        }));
    }
    (kept, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_never_carry_a_header_value() {
        use crate::plan::mcp::HeaderValue;
        let server = |name: &str, transport| McpServerPlan {
            name: name.into(),
            transport,
            tools: None,
            timeout: std::time::Duration::from_secs(1),
        };
        let plan = McpPlan {
            servers: vec![
                server(
                    "docs",
                    McpTransport::Http {
                        url: "http://d/mcp".into(),
                        headers: vec![
                            HeaderValue {
                                name: "A".into(),
                                value: "tok-123".into(),
                            },
                            HeaderValue {
                                name: "B".into(),
                                value: String::new(),
                            },
                        ],
                    },
                ),
                server(
                    "time",
                    McpTransport::Stdio {
                        command: vec!["t".into()],
                        env: vec![],
                    },
                ),
            ],
            deferred: None,
        };
        let secrets = header_values(&plan);
        assert_eq!(secrets, vec!["tok-123"]);
        assert_eq!(
            redacted("stderr: using tok-123 (tok-123)".into(), &secrets),
            "stderr: using [REDACTED] ([REDACTED])"
        );
    }

    #[test]
    fn deferral_follows_the_setting_else_the_count() {
        assert!(!deferral(None, DEFER_ABOVE));
        assert!(deferral(None, DEFER_ABOVE + 1));
        assert!(deferral(Some(true), 1));
        assert!(!deferral(Some(false), 100));
    }
}
