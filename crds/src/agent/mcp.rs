//! `spec.mcp` of an Agent: Model Context Protocol servers whose tools the agent gets, named
//! `<server>__<tool>`. HTTP servers are called from the `agent` container, which holds their
//! headers' secrets; stdio servers run in the sandbox, which holds none.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use crate::refs::SecretKeyRef;

/// Most servers of one Agent.
pub const MAX_SERVERS: usize = 16;

/// The MCP servers of an Agent.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpSpec {
    /// The servers, each name once (at most 16).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["name".into()]))]
    pub servers: Vec<McpServerSpec>,
    /// Deferred tools (DeerFlow's `tool_search`): the system prompt lists the servers' tools by
    /// name only, and the agent loads the schemas of those it needs with `tool_search`, which
    /// keeps the prompt small. Absent: on when the servers offer more than 10 tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deferred: Option<bool>,
}

/// One MCP server: streamable HTTP (`url`) or stdio (`command`).
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new(crate::rules::MCP_TRANSPORT).message(crate::rules::MCP_TRANSPORT_MESSAGE),
    validation = Rule::new(crate::rules::MCP_HTTP_ONLY).message(crate::rules::MCP_HTTP_ONLY_MESSAGE),
    validation = Rule::new(crate::rules::MCP_STDIO_ONLY).message(crate::rules::MCP_STDIO_ONLY_MESSAGE)
)]
#[allow(clippy::duplicated_attributes)]
pub struct McpServerSpec {
    /// The server's name, the prefix of its tools' names (`<name>__<tool>`): lowercase letters
    /// and digits in groups joined by single hyphens, at most 32 characters.
    #[schemars(length(min = 1, max = 32))]
    #[x_kube(validation = Rule::new(crate::rules::MCP_SERVER_NAME).message(crate::rules::expression(crate::rules::MCP_SERVER_NAME_MESSAGE)))]
    pub name: String,
    /// The endpoint of a streamable HTTP server, an http or https URL such as
    /// `https://mcp.example.com/mcp`. Exclusive with `command`.
    #[schemars(length(max = 2048))]
    #[x_kube(validation = Rule::new(crate::rules::HTTP_URL).message(crate::rules::expression(crate::rules::HTTP_URL_MESSAGE)))]
    pub url: Option<String>,
    /// HTTP headers sent with every request to the server, each value taken from a Secret key
    /// (the whole value, e.g. `Bearer <token>` for `Authorization`). HTTP servers only; at most
    /// 8.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["name".into()]))]
    pub headers: Vec<McpHeader>,
    /// The command of a stdio server, run in the sandbox (in a Run's `sandbox` container, which
    /// must contain it; locally in the confined sandbox, where your home is hidden), e.g.
    /// `[python3, -m, mcp_server_time]`. Exclusive with `url`; at most 32 items.
    #[schemars(length(min = 1, max = 32), inner(length(max = 4096)))]
    pub command: Option<Vec<String>>,
    /// Environment variables of a stdio server, as plain values: the sandbox holds no secret.
    /// At most 32.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["name".into()]))]
    pub env: Vec<McpEnvVar>,
    /// The server's tools the agent gets, by the server's own names (at most 128, each once).
    /// Absent: all of them.
    #[schemars(length(max = 128), inner(length(max = 128)))]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub tools: Option<Vec<String>>,
    /// CIDRs the HTTP server lives in (e.g. `10.30.0.0/16`), opened in the Run's
    /// NetworkPolicy (at most 16). Absent: the public internet (`0.0.0.0/0` and `::/0` minus
    /// private ranges).
    #[serde(rename = "egressCIDRs")]
    #[schemars(length(max = 16), inner(length(max = 64)))]
    #[x_kube(validation = Rule::new(crate::rules::CIDRS).message(crate::rules::expression(crate::rules::CIDRS_MESSAGE)))]
    pub egress_cidrs: Option<Vec<String>>,
    /// How long starting the server, or one of its tool calls, may take, 1s to 168h, e.g.
    /// `2m`. Absent: `60s`.
    #[schemars(length(max = 32))]
    #[x_kube(
        validation = Rule::new(crate::rules::DURATION).message(crate::rules::DURATION_MESSAGE),
        validation = Rule::new(crate::rules::DURATION_UP_TO_168H).message(crate::rules::expression(crate::rules::DURATION_UP_TO_168H_MESSAGE))
    )]
    pub timeout: Option<String>,
}

/// An HTTP header of an MCP server, its value from a Secret.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpHeader {
    /// The header's name, e.g. `Authorization` or `X-Api-Key`. Not one the MCP client sets
    /// itself or a hop-by-hop one (`Host`, `Content-Type`, `Accept`, `Connection`, any
    /// `Mcp-` header...), in any case.
    #[schemars(length(min = 1, max = 128))]
    #[x_kube(
        validation = Rule::new(crate::rules::HEADER_NAME).message(crate::rules::expression(crate::rules::HEADER_NAME_MESSAGE)),
        validation = Rule::new(crate::rules::MCP_HEADER_NOT_RESERVED).message(crate::rules::expression(crate::rules::MCP_HEADER_NOT_RESERVED_MESSAGE))
    )]
    pub name: String,
    /// The Secret key holding the header's value. The Secret must carry the label
    /// `herd.dev/model-credentials: "true"`, as model keys do.
    pub secret_key_ref: SecretKeyRef,
}

/// An environment variable of a stdio MCP server.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpEnvVar {
    /// The variable's name: letters, digits and `_`, not starting with a digit.
    #[schemars(length(min = 1, max = 128))]
    #[x_kube(validation = Rule::new(crate::rules::ENV_NAME).message(crate::rules::expression(crate::rules::ENV_NAME_MESSAGE)))]
    pub name: String,
    /// Its value (at most 4096 characters).
    #[serde(default)]
    #[schemars(length(max = 4096))]
    pub value: String,
}

/// The `agent` container's variable holding the value of header `header` of server `server`
/// (indexes into `spec.mcp.servers` and its `headers`): the operator sets it from the Secret,
/// the runner reads it.
pub fn header_env_var(server: usize, header: usize) -> String {
    format!("HERD_MCP_{server}_HEADER_{header}")
}
