//! HTTP plumbing shared by the provider clients: the client, a POST whose failures become
//! typed errors, and the deadline over a whole call.

use std::future::Future;
use std::time::Duration;

use reqwest::header::HeaderMap;

use super::HttpModelConfig;
use super::error::{ModelError, ModelErrorKind};
use super::http_error::error_from_status;

/// Longest wait for a TCP/TLS connection; the request timeout bounds it further.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Largest error body read before giving up on the rest (error bodies are small; a proxy's
/// HTML page need not be read whole).
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Builds the HTTP client of one model.
///
/// reqwest is compiled without a TLS crypto provider; the process normally installs ring at
/// start, but a client built before that (tests, embedders) would panic inside reqwest, so
/// ring is installed here when nothing is.
pub(crate) fn build_client(config: &HttpModelConfig) -> Result<reqwest::Client, ModelError> {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race against another installer is fine: a provider is then in place.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT.min(config.request_timeout))
        .build()
        .map_err(|e| {
            ModelError::new(
                ModelErrorKind::Connection,
                format!("cannot set up the HTTP client: {}", error_chain(&e)),
            )
        })
}

/// What to call the server in messages: `the model server at <base URL>`.
pub(crate) fn server_label(config: &HttpModelConfig) -> String {
    format!("the model server at {}", config.base_url)
}

/// `base` joined with `path`, without doubling the slash.
pub(crate) fn join_url(base: &str, path: &str) -> String {
    format!(
        "{}/{}",
        base.trim_end_matches('/'),
        path.trim_start_matches('/')
    )
}

/// POSTs `body` as JSON and returns the response when it is a 2xx; any other status becomes
/// a typed error carrying the status, `Retry-After` and the server's message.
pub(crate) async fn post_json(
    client: &reqwest::Client,
    url: &str,
    headers: HeaderMap,
    body: &serde_json::Value,
    server: &str,
    chunk_timeout: Duration,
) -> Result<reqwest::Response, ModelError> {
    let response = client
        .post(url)
        .headers(headers)
        .json(body)
        .send()
        .await
        .map_err(|e| transport_error(server, &e))?;
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let headers = response.headers().clone();
    let body = read_error_body(response, chunk_timeout).await;
    Err(error_from_status(server, status.as_u16(), &headers, &body))
}

async fn read_error_body(mut response: reqwest::Response, chunk_timeout: Duration) -> String {
    let mut body = Vec::new();
    while body.len() < MAX_ERROR_BODY {
        match tokio::time::timeout(chunk_timeout, response.chunk()).await {
            Ok(Ok(Some(chunk))) => body.extend_from_slice(&chunk),
            // The status already says what failed; a body cut short still helps.
            Ok(Ok(None)) | Ok(Err(_)) | Err(_) => break,
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}

/// The error for a failure below HTTP: refused connections, resets, DNS, TLS, timeouts.
pub(crate) fn transport_error(server: &str, error: &reqwest::Error) -> ModelError {
    // `server` names the endpoint already; reqwest's "for url (...)" would say it again.
    let mut detail = error_chain(error);
    if let Some(url) = error.url() {
        detail = detail.replace(&format!(" for url ({url})"), "");
    }
    if error.is_timeout() {
        ModelError::new(
            ModelErrorKind::Timeout,
            format!("{server} did not answer in time: {detail}"),
        )
    } else if error.is_connect() {
        ModelError::new(
            ModelErrorKind::Connection,
            format!("cannot reach {server}: {detail}"),
        )
    } else {
        ModelError::new(
            ModelErrorKind::Connection,
            format!("the connection to {server} failed: {detail}"),
        )
    }
}

/// An error and its sources on one line (reqwest's own message hides the cause, e.g.
/// "Connection refused").
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// Runs `call` under the model's request timeout (`model.requestTimeout`).
pub(crate) async fn with_deadline<T>(
    timeout: Duration,
    server: &str,
    call: impl Future<Output = Result<T, ModelError>>,
) -> Result<T, ModelError> {
    tokio::time::timeout(timeout, call)
        .await
        .unwrap_or_else(|_| {
            Err(ModelError::new(
                ModelErrorKind::Timeout,
                format!(
                    "{server} did not finish answering within {} (the model's requestTimeout)",
                    humantime::format_duration(timeout)
                ),
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_refused_connection_names_the_endpoint_once() {
        // A port nothing listens on: bind one, then let it go.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{port}/v1/chat/completions");
        let _ = rustls::crypto::ring::default_provider().install_default();
        let error = reqwest::Client::new().post(&url).send().await.unwrap_err();
        let server = format!("the model server at http://127.0.0.1:{port}/v1");
        let message = transport_error(&server, &error).message;
        assert_eq!(
            message.matches(&format!("127.0.0.1:{port}")).count(),
            1,
            "{message}"
        );
        assert!(
            message.starts_with("cannot reach the model server"),
            "{message}"
        );
        assert!(message.contains("refused"), "{message}");
    }

    #[test]
    fn urls_join_with_one_slash() {
        assert_eq!(
            join_url("http://h/v1/", "/chat/completions"),
            "http://h/v1/chat/completions"
        );
        assert_eq!(
            join_url("http://h/v1", "chat/completions"),
            "http://h/v1/chat/completions"
        );
    }

    #[tokio::test]
    async fn an_unreachable_server_is_a_connection_error_naming_it() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let config = HttpModelConfig {
            model: "m".into(),
            base_url: format!("http://{addr}"),
            api_key: None,
            request_timeout: Duration::from_secs(5),
            stream_chunk_timeout: Duration::from_secs(5),
        };
        let client = build_client(&config).unwrap();
        let server = server_label(&config);
        let error = post_json(
            &client,
            &join_url(&config.base_url, "x"),
            HeaderMap::new(),
            &serde_json::json!({}),
            &server,
            config.stream_chunk_timeout,
        )
        .await
        .unwrap_err();
        assert_eq!(error.kind, ModelErrorKind::Connection);
        assert!(
            error.message.contains(&addr.to_string()),
            "{}",
            error.message
        );
    }

    #[tokio::test]
    async fn the_deadline_turns_a_slow_call_into_a_timeout() {
        let error = with_deadline(Duration::from_millis(10), "srv", async {
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok::<(), ModelError>(())
        })
        .await
        .unwrap_err();
        assert_eq!(error.kind, ModelErrorKind::Timeout);
        assert!(error.message.contains("requestTimeout"));
    }
}
