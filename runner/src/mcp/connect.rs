//! Connecting to one server with the official SDK (`rmcp`): streamable HTTP from this process
//! with the planned headers, or stdio to a program the sandbox starts.

use std::collections::HashMap;

use herd_sandbox::{StdioCommand, ToolExecutor};
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::ServiceExt;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

use crate::plan::mcp::HeaderValue as PlannedHeader;
use crate::plan::{McpServerPlan, McpTransport};

/// A connected server; dropping it closes the session (and stops a stdio program).
pub type McpClient = RunningService<RoleClient, ClientConfig>;

/// How this client introduces itself.
fn client_config() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("herd-runner", env!("CARGO_PKG_VERSION")),
    )
}

/// Connects to `server` and completes the MCP handshake within its timeout.
pub async fn connect(
    server: &McpServerPlan,
    executor: &dyn ToolExecutor,
) -> Result<McpClient, String> {
    match &server.transport {
        McpTransport::Http { url, headers } => {
            let connecting = async {
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(header_map(headers)?);
                let transport = StreamableHttpClientTransport::with_client(http_client()?, config);
                client_config()
                    .serve(transport)
                    .await
                    .map_err(|error| describe(&error.to_string(), url))
            };
            tokio::time::timeout(server.timeout, connecting)
                .await
                .map_err(|_| too_slow(server))?
        }
        McpTransport::Stdio { command, env } => connect_stdio(server, command, env, executor).await,
    }
}

/// Starts a stdio server in the sandbox and completes the handshake; when that fails, the
/// program's last lines on standard error follow the reason.
async fn connect_stdio(
    server: &McpServerPlan,
    command: &[String],
    env: &[(String, String)],
    executor: &dyn ToolExecutor,
) -> Result<McpClient, String> {
    let deadline = tokio::time::Instant::now() + server.timeout;
    let opening = executor.open_stdio(StdioCommand {
        label: server.name.clone(),
        argv: command.to_vec(),
        env: env.to_vec(),
    });
    let pipe = tokio::time::timeout_at(deadline, opening)
        .await
        .map_err(|_| too_slow(server))?
        .map_err(|error| {
            format!(
                "{error} (the command must exist in the sandbox: in a cluster, in the sandbox \
                 image; locally, outside the home folders, which the confined sandbox hides)"
            )
        })?;
    let stderr = pipe.stderr;
    let handshake = client_config().serve((pipe.reader, pipe.writer));
    let failure = match tokio::time::timeout_at(deadline, handshake).await {
        Ok(Ok(client)) => return Ok(client),
        Ok(Err(error)) => format!(
            "{} started but did not complete the MCP handshake: {error}",
            command.first().map(String::as_str).unwrap_or_default()
        ),
        Err(_) => too_slow(server),
    };
    Err(with_stderr(failure, &executor.stdio_stderr(stderr).await))
}

/// A server that did not start within its timeout.
fn too_slow(server: &McpServerPlan) -> String {
    format!(
        "it did not start within {} (spec.mcp.servers[].timeout)",
        humantime::format_duration(server.timeout)
    )
}

/// `failure`, followed by the program's last lines on standard error when it wrote any.
fn with_stderr(failure: String, lines: &[String]) -> String {
    if lines.is_empty() {
        return failure;
    }
    let quoted: String = lines.iter().map(|line| format!("\n  {line}")).collect();
    format!("{failure}; its standard error ended with:{quoted}")
}

/// The planned headers as the transport sends them; a value never appears in an error.
fn header_map(headers: &[PlannedHeader]) -> Result<HashMap<HeaderName, HeaderValue>, String> {
    headers
        .iter()
        .map(|header| {
            let name = HeaderName::from_bytes(header.name.as_bytes())
                .map_err(|_| format!("{} is not a valid header name", header.name))?;
            let mut value = HeaderValue::from_str(&header.value).map_err(|_| {
                format!(
                    "the value of header {} is not valid in an HTTP header (a line break or \
                     control character in the Secret?)",
                    header.name
                )
            })?;
            value.set_sensitive(true);
            Ok((name, value))
        })
        .collect()
}

/// The HTTP client (reqwest without a built-in TLS provider: ring is installed when missing,
/// as for the model clients).
fn http_client() -> Result<reqwest::Client, String> {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    reqwest::Client::builder()
        .connect_timeout(std::time::Duration::from_secs(30))
        .build()
        .map_err(|error| format!("cannot set up the HTTP client: {error}"))
}

/// An HTTP server's refusal in words a user acts on: a 401 or 403 means the headers.
fn describe(error: &str, url: &str) -> String {
    // The SDK's message names its transport's types first; what the server said follows.
    let error = error
        .find("unexpected server response: ")
        .map_or(error, |at| &error[at..]);
    let lower = error.to_ascii_lowercase();
    if lower.contains("401") || lower.contains("403") || lower.contains("auth") {
        format!(
            "{url} refused the credentials (check the headers' Secrets, \
             spec.mcp.servers[].headers): {error}"
        )
    } else {
        format!("{url}: {error}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_credential_names_the_headers_and_what_the_server_said() {
        let sdk = "Send message error Transport [rmcp::transport::worker::WorkerTransport<X>] \
                   error: unexpected server response: HTTP 401 Unauthorized: {\"error\": \"no\"}, \
                   when send initialize request";
        let message = describe(sdk, "http://d/mcp");
        assert!(
            message.starts_with("http://d/mcp refused the credentials"),
            "{message}"
        );
        assert!(message.contains("HTTP 401 Unauthorized"), "{message}");
        assert!(!message.contains("WorkerTransport"), "{message}");
        assert_eq!(
            describe("connection refused", "http://d/mcp"),
            "http://d/mcp: connection refused"
        );
    }

    #[test]
    fn the_programs_last_words_follow_the_failure() {
        assert_eq!(with_stderr("it exited".into(), &[]), "it exited");
        assert_eq!(
            with_stderr(
                "it exited".into(),
                &["Traceback".into(), "Error: bad zone".into()]
            ),
            "it exited; its standard error ended with:\n  Traceback\n  Error: bad zone"
        );
    }

    #[test]
    fn header_values_are_checked_without_being_shown() {
        let bad = [PlannedHeader {
            name: "X-Key".into(),
            value: "line\nbreak-s3cret".into(),
        }];
        let error = header_map(&bad).unwrap_err();
        assert!(
            error.contains("X-Key") && !error.contains("s3cret"),
            "{error}"
        );
        let good = [PlannedHeader {
            name: "X-Key".into(),
            value: "s3cret".into(),
        }];
        let map = header_map(&good).unwrap();
        assert!(map.values().all(HeaderValue::is_sensitive));
    }
}
