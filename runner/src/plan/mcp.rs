//! The MCP part of a run plan: each server of the Agent's `spec.mcp`, its transport with the
//! header values the shell read (never printed), its tool allow-list and timeout.

use std::collections::BTreeMap;
use std::time::Duration;

use herd_crds::agent::McpSpec;
use herd_crds::duration::parse_duration;

use super::PlanError;

/// A server's `timeout` when the Agent sets none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The Agent's MCP servers, as the run uses them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct McpPlan {
    pub servers: Vec<McpServerPlan>,
    /// `spec.mcp.deferred`; `None` decides by the number of tools (`mcp::deferral`).
    pub deferred: Option<bool>,
}

/// One server.
#[derive(Clone, Debug, PartialEq)]
pub struct McpServerPlan {
    pub name: String,
    pub transport: McpTransport,
    /// The tools the agent gets, by the server's names; `None` = all.
    pub tools: Option<Vec<String>>,
    /// For starting the server and for each call.
    pub timeout: Duration,
}

/// How the server is reached.
#[derive(Clone, Debug, PartialEq)]
pub enum McpTransport {
    /// Streamable HTTP, from the agent side, with these headers.
    Http {
        url: String,
        headers: Vec<HeaderValue>,
    },
    /// A program started in the sandbox.
    Stdio {
        command: Vec<String>,
        env: Vec<(String, String)>,
    },
}

/// A header and its value (from a Secret).
#[derive(Clone, PartialEq, Eq)]
pub struct HeaderValue {
    pub name: String,
    pub value: String,
}

/// Values are secrets: never printed.
impl std::fmt::Debug for HeaderValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeaderValue")
            .field("name", &self.name)
            .field("value", &"<redacted>")
            .finish()
    }
}

/// The plan of `spec.mcp`, with `headers[(i, j)]` the value of header `j` of server `i`.
pub fn plan_mcp(
    spec: Option<&McpSpec>,
    headers: &BTreeMap<(usize, usize), String>,
) -> Result<McpPlan, PlanError> {
    let Some(spec) = spec else {
        return Ok(McpPlan::default());
    };
    let mut servers = Vec::with_capacity(spec.servers.len());
    for (i, server) in spec.servers.iter().enumerate() {
        let field = format!("spec.mcp.servers[{i}]");
        let transport = match (&server.url, &server.command) {
            (Some(url), None) => {
                let mut values = Vec::with_capacity(server.headers.len());
                for (j, header) in server.headers.iter().enumerate() {
                    // The API server's rule already refuses these; an Agent read from an older
                    // CRD or a hand-made config gets the same words.
                    if herd_crds::formats::is_reserved_header(&header.name) {
                        return Err(PlanError(format!(
                            "{field}.headers[{j}].name: {}",
                            herd_crds::rules::quoted(
                                &header.name,
                                herd_crds::rules::MCP_HEADER_NOT_RESERVED_SUFFIX
                            )
                        )));
                    }
                    let value = headers.get(&(i, j)).ok_or_else(|| {
                        PlanError(format!(
                            "{field}.headers[{j}]: no value for header {} (Secret {} key {})",
                            header.name, header.secret_key_ref.name, header.secret_key_ref.key
                        ))
                    })?;
                    values.push(HeaderValue {
                        name: header.name.clone(),
                        value: value.clone(),
                    });
                }
                McpTransport::Http {
                    url: url.clone(),
                    headers: values,
                }
            }
            (None, Some(command)) if !command.is_empty() => McpTransport::Stdio {
                command: command.clone(),
                env: server
                    .env
                    .iter()
                    .map(|var| (var.name.clone(), var.value.clone()))
                    .collect(),
            },
            _ => {
                return Err(PlanError(format!(
                    "{field}: {}",
                    herd_crds::rules::MCP_TRANSPORT_MESSAGE
                )));
            }
        };
        let timeout = server
            .timeout
            .as_deref()
            .map(parse_duration)
            .transpose()
            .map_err(|error| PlanError(format!("{field}.timeout: {error}")))?
            .unwrap_or(DEFAULT_TIMEOUT);
        servers.push(McpServerPlan {
            name: server.name.clone(),
            transport,
            tools: server.tools.clone(),
            timeout,
        });
    }
    Ok(McpPlan {
        servers,
        deferred: spec.deferred,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> McpSpec {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn servers_map_with_their_header_values_and_defaults() {
        let spec = spec(
            "servers:\n\
             - {name: docs, url: 'http://d/mcp', timeout: 5s, tools: [search],\n   \
                headers: [{name: X-Api-Key, secretKeyRef: {name: k, key: v}}]}\n\
             - {name: time, command: [python3, -m, t], env: [{name: TZ, value: UTC}]}\n\
             deferred: true",
        );
        let values = BTreeMap::from([((0, 0), "s3cret".to_owned())]);
        let plan = plan_mcp(Some(&spec), &values).unwrap();
        assert_eq!(plan.deferred, Some(true));
        assert_eq!(
            plan.servers[0],
            McpServerPlan {
                name: "docs".into(),
                transport: McpTransport::Http {
                    url: "http://d/mcp".into(),
                    headers: vec![HeaderValue {
                        name: "X-Api-Key".into(),
                        value: "s3cret".into()
                    }],
                },
                tools: Some(vec!["search".into()]),
                timeout: Duration::from_secs(5),
            }
        );
        assert_eq!(plan.servers[1].timeout, DEFAULT_TIMEOUT);
        assert_eq!(
            plan.servers[1].transport,
            McpTransport::Stdio {
                command: vec!["python3".into(), "-m".into(), "t".into()],
                env: vec![("TZ".into(), "UTC".into())],
            }
        );
        assert!(!format!("{plan:?}").contains("s3cret"));
        assert_eq!(
            plan_mcp(None, &BTreeMap::new()).unwrap(),
            McpPlan::default()
        );
    }

    #[test]
    fn a_missing_header_value_and_a_bad_timeout_name_the_field() {
        let spec = spec(
            "servers:\n- {name: docs, url: 'http://d/mcp', \
             headers: [{name: A, secretKeyRef: {name: k, key: v}}]}",
        );
        let error = plan_mcp(Some(&spec), &BTreeMap::new()).unwrap_err();
        assert_eq!(
            error.0,
            "spec.mcp.servers[0].headers[0]: no value for header A (Secret k key v)"
        );
        let reserved = self::spec(
            "servers:\n- {name: docs, url: 'http://d/mcp', \
             headers: [{name: CONTENT-length, secretKeyRef: {name: k, key: v}}]}",
        );
        let values = BTreeMap::from([((0, 0), "s3cret".to_owned())]);
        let error = plan_mcp(Some(&reserved), &values).unwrap_err();
        assert!(
            error.0.starts_with(
                "spec.mcp.servers[0].headers[0].name: \"CONTENT-length\" cannot be set"
            ),
            "{error}"
        );
        let slow = self::spec("servers:\n- {name: t, command: [t], timeout: soon}");
        let error = plan_mcp(Some(&slow), &BTreeMap::new()).unwrap_err();
        assert!(
            error.0.starts_with("spec.mcp.servers[0].timeout:"),
            "{error}"
        );
    }
}
