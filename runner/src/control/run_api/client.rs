//! The HTTPS client of the operator's run API: the server verified against the CA bundle the
//! operator mounts (and nothing else), the projected token read again for every request (the
//! kubelet rotates it), failures worth repeating retried until the run's deadline. Long polls
//! get an HTTP timeout above the server's longest wait; a presented file comes back as bytes
//! with its path in a header.

use std::path::PathBuf;
use std::time::Duration;

use herd_crds::wire::{ApiError, FILE_PATH_HEADER};
use herd_sandbox::truncation::truncate_chars;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue, RETRY_AFTER};
use reqwest::{Method, StatusCode, Url};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::time::Instant;

use super::retry::{Backoff, Try, retrying};
use crate::control::ControlError;
use crate::model::http::error_chain;

/// Longest one attempt may take (the result is durable before its answer: two writes).
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);
/// What an attempt gets even when the deadline is closer (the first one is always made).
const LEAST_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest answer read (a `RunConfig` carries the Agent spec, its soul and script).
const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;
/// The longest wait a long poll asks for (the run API answers within it).
pub const LONGEST_WAIT: Duration = Duration::from_secs(55);
/// What a long poll's HTTP timeout adds to its wait: the server's answer, the network.
const LONG_POLL_MARGIN: Duration = Duration::from_secs(15);
/// How much of an error answer is read and quoted.
const MAX_ERROR_BYTES: usize = 64 * 1024;
const QUOTED_ERROR_CHARS: usize = 300;

/// Where the run API is and which Run this pod serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunApiTarget {
    /// `HERD_API_URL`, e.g. `https://herd-operator.herd-system.svc:8443`.
    pub api_url: String,
    /// `HERD_RUN_NAMESPACE`.
    pub namespace: String,
    /// `HERD_RUN_NAME`.
    pub name: String,
}

/// How long one attempt of a request may take.
#[derive(Clone, Copy, Debug)]
enum Timeout {
    /// [`ATTEMPT_TIMEOUT`], less when the deadline is closer (never below
    /// [`LEAST_ATTEMPT_TIMEOUT`]).
    UntilDeadline,
    /// This long, whatever the deadline (a long poll: the server holds the answer back).
    Fixed(Duration),
}

/// One request beyond its method and URL.
#[derive(Clone, Debug)]
struct Exchange {
    body: Option<Vec<u8>>,
    timeout: Timeout,
    /// Most bytes of a successful answer; a longer one fails.
    max_answer: usize,
}

/// A successful answer.
#[derive(Debug)]
struct Answer {
    body: Vec<u8>,
    headers: HeaderMap,
}

/// A presented file of a child Run, as the run API gave it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchedFile {
    /// The [`FILE_PATH_HEADER`] as sent (percent-encoded), if there was one readable as text.
    pub path: Option<String>,
    pub bytes: Vec<u8>,
}

/// Talks to `/v1/runs/{namespace}/{name}/` for one Run.
#[derive(Debug)]
pub struct RunApiClient {
    http: reqwest::Client,
    /// The Run's routes, ending in `/`.
    base: Url,
    token_file: PathBuf,
    backoff: Backoff,
}

impl RunApiClient {
    /// A client of `target` that trusts only the certificates of the PEM bundle `ca_pem` and
    /// authenticates with the token in `token_file`.
    pub fn new(
        target: &RunApiTarget,
        ca_pem: &[u8],
        token_file: PathBuf,
    ) -> Result<Self, ControlError> {
        let base = run_base(target)?;
        let roots = reqwest::Certificate::from_pem_bundle(ca_pem).map_err(|error| {
            ControlError::Io(format!(
                "the run API's CA bundle is not PEM: {}",
                error_chain(&error)
            ))
        })?;
        if roots.is_empty() {
            return Err(ControlError::Io(
                "the run API's CA bundle holds no certificate".into(),
            ));
        }
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            // Losing a race against another installer is fine: a provider is then in place.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let http = reqwest::Client::builder()
            .tls_certs_only(roots)
            .https_only(true)
            // In-cluster traffic: a proxy from the environment would only be in the way (and
            // the Run's NetworkPolicy opens the run API, not a proxy).
            .no_proxy()
            .connect_timeout(LEAST_ATTEMPT_TIMEOUT)
            .build()
            .map_err(|error| {
                ControlError::Io(format!(
                    "cannot set up the run API client: {}",
                    error_chain(&error)
                ))
            })?;
        Ok(RunApiClient {
            http,
            base,
            token_file,
            backoff: Backoff::RUN_API,
        })
    }

    /// Waits as `backoff` says between attempts (tests shorten it).
    #[cfg(test)]
    pub(crate) fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// `GET <route>`, retried until `until`.
    pub async fn get<T: DeserializeOwned>(
        &self,
        route: &str,
        until: Instant,
    ) -> Result<T, ControlError> {
        let url = self.route(&[route], None)?;
        let answer = self
            .request(Method::GET, url, Exchange::json(None), until)
            .await?;
        parse(&format!("GET {route}"), &answer.body)
    }

    /// `GET <segments...>?wait=<wait>`: a long poll, each attempt given the time to wait and
    /// an answer after it; retried until `until`. The segments are percent-encoded (ids come
    /// from models and users).
    pub async fn long_poll<T: DeserializeOwned>(
        &self,
        segments: &[&str],
        wait: Duration,
        until: Instant,
    ) -> Result<T, ControlError> {
        let wait = wait.clamp(Duration::from_secs(1), LONGEST_WAIT);
        let url = self.route(segments, Some(("wait", wait.as_secs().to_string())))?;
        let exchange = Exchange {
            timeout: Timeout::Fixed(wait + LONG_POLL_MARGIN),
            ..Exchange::json(None)
        };
        let answer = self.request(Method::GET, url, exchange, until).await?;
        parse(&format!("GET {}", segments.join("/")), &answer.body)
    }

    /// `GET <segments...>`: raw bytes of at most `max_bytes` (more fails) and the file's path
    /// header, retried until `until`.
    pub async fn get_file(
        &self,
        segments: &[&str],
        max_bytes: usize,
        until: Instant,
    ) -> Result<FetchedFile, ControlError> {
        let url = self.route(segments, None)?;
        let exchange = Exchange {
            max_answer: max_bytes,
            ..Exchange::json(None)
        };
        let answer = self.request(Method::GET, url, exchange, until).await?;
        let path = answer
            .headers
            .get(FILE_PATH_HEADER)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        Ok(FetchedFile {
            path,
            bytes: answer.body,
        })
    }

    /// Waits until a long poll that started at `started` is at least the least poll period
    /// old: a run API (or a proxy) that answers at once must not make the runner spin.
    pub async fn pace_polls(&self, started: Instant) {
        tokio::time::sleep_until(started + self.backoff.first.saturating_mul(5)).await;
    }

    /// `POST <route>` with `body` as JSON, retried until `until`.
    pub async fn post<B: Serialize>(
        &self,
        route: &str,
        body: &B,
        until: Instant,
    ) -> Result<(), ControlError> {
        let json = serde_json::to_vec(body)
            .map_err(|error| ControlError::Io(format!("cannot encode POST {route}: {error}")))?;
        let url = self.route(&[route], None)?;
        self.request(Method::POST, url, Exchange::json(Some(json)), until)
            .await
            .map(drop)
    }

    /// The Run's route `segments`, each percent-encoded as one path segment, with `query`.
    /// An empty, `.` or `..` segment (an id no route can hold) is refused.
    fn route(&self, segments: &[&str], query: Option<(&str, String)>) -> Result<Url, ControlError> {
        for segment in segments {
            route_segment(segment)?;
        }
        let mut url = self.base.clone();
        url.path_segments_mut()
            .map_err(|()| ControlError::Io(format!("the run API URL {} has no path", self.base)))?
            .pop_if_empty()
            .extend(segments);
        if let Some((name, value)) = query {
            url.query_pairs_mut().append_pair(name, &value);
        }
        Ok(url)
    }

    async fn request(
        &self,
        method: Method,
        url: Url,
        exchange: Exchange,
        until: Instant,
    ) -> Result<Answer, ControlError> {
        let what = format!("{method} {}", url.path());
        retrying(self.backoff, until, &what, || {
            self.attempt(method.clone(), url.clone(), exchange.clone(), until, &what)
        })
        .await
    }

    /// One attempt, with the token as it is now.
    async fn attempt(
        &self,
        method: Method,
        url: Url,
        exchange: Exchange,
        until: Instant,
        what: &str,
    ) -> Try<Answer> {
        let token = match self.bearer().await {
            Ok(token) => token,
            Err(error) => return Try::Fail(error),
        };
        let timeout = match exchange.timeout {
            Timeout::UntilDeadline => until
                .saturating_duration_since(Instant::now())
                .clamp(LEAST_ATTEMPT_TIMEOUT, ATTEMPT_TIMEOUT),
            Timeout::Fixed(timeout) => timeout,
        };
        let mut request = self
            .http
            .request(method, url)
            .header(AUTHORIZATION, token)
            .timeout(timeout);
        // The operator records it on a child Run, whose pod continues this trace.
        if let Some(traceparent) = crate::telemetry::propagation::current_traceparent() {
            request = request.header("traceparent", traceparent);
        }
        if let Some(body) = exchange.body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body);
        }
        let response = match request.send().await {
            Ok(response) => response,
            Err(error) => return transport(&error, what, self.base.as_str()),
        };
        let status = response.status();
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        if status.is_success() {
            let headers = response.headers().clone();
            let limit = exchange.max_answer;
            return match read_body(response, limit).await {
                Ok((body, true)) => Try::Done(Answer { body, headers }),
                Ok((_, false)) => Try::Fail(ControlError::Io(format!(
                    "{what}: the answer is over {limit} bytes"
                ))),
                Err(why) => Try::Again {
                    why: format!("{what}: reading the answer failed: {why}"),
                    retry_after: None,
                },
            };
        }
        // What arrived of an error answer is enough to quote it.
        let body = read_body(response, MAX_ERROR_BYTES)
            .await
            .map(|(bytes, _)| bytes)
            .unwrap_or_default();
        classify(what, status, retry_after, &body)
    }

    /// `Bearer <token>`, the token read from its file now.
    async fn bearer(&self) -> Result<HeaderValue, ControlError> {
        let text = tokio::fs::read_to_string(&self.token_file)
            .await
            .map_err(|error| {
                ControlError::Io(format!(
                    "cannot read the run API token {}: {error}",
                    self.token_file.display()
                ))
            })?;
        let token = text.trim();
        if token.is_empty() {
            return Err(ControlError::Io(format!(
                "the run API token {} is empty",
                self.token_file.display()
            )));
        }
        let mut value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
            ControlError::Io(format!(
                "the run API token {} is not a header value",
                self.token_file.display()
            ))
        })?;
        // Kept out of any debug output of the HTTP stack.
        value.set_sensitive(true);
        Ok(value)
    }
}

/// Refuses what cannot be one segment of a route (a `.` or `..` segment is dropped from a URL,
/// an empty one names another route).
pub fn route_segment(segment: &str) -> Result<&str, ControlError> {
    if matches!(segment, "" | "." | "..") {
        return Err(ControlError::Refused(format!(
            "{segment:?} cannot be an id in a run API route"
        )));
    }
    Ok(segment)
}

impl Exchange {
    /// A JSON request (with `body`, if any) with the usual timeout and answer limit.
    fn json(body: Option<Vec<u8>>) -> Self {
        Exchange {
            body,
            timeout: Timeout::UntilDeadline,
            max_answer: MAX_ANSWER_BYTES,
        }
    }
}

/// The JSON answer to `what`.
fn parse<T: DeserializeOwned>(what: &str, body: &[u8]) -> Result<T, ControlError> {
    serde_json::from_slice(body).map_err(|error| {
        ControlError::Io(format!(
            "the run API's answer to {what} is not what this runner reads: {error}"
        ))
    })
}

/// `<api_url>/v1/runs/<namespace>/<name>/`, each part a path segment of its own.
fn run_base(target: &RunApiTarget) -> Result<Url, ControlError> {
    let mut url = Url::parse(&target.api_url).map_err(|error| {
        ControlError::Io(format!(
            "HERD_API_URL '{}' is not a URL: {error}",
            target.api_url
        ))
    })?;
    if url.scheme() != "https" {
        return Err(ControlError::Io(format!(
            "HERD_API_URL '{}' is not https: the token is never sent in the clear",
            target.api_url
        )));
    }
    {
        let mut segments = url.path_segments_mut().map_err(|()| {
            ControlError::Io(format!(
                "HERD_API_URL '{}' cannot have a path",
                target.api_url
            ))
        })?;
        segments
            .pop_if_empty()
            .extend(["v1", "runs", &target.namespace, &target.name, ""]);
    }
    Ok(url)
}

/// A failure below HTTP. A certificate that does not verify is a setup error and is not
/// retried; anything else (refused, reset, DNS, timeouts) may pass.
fn transport<T>(error: &reqwest::Error, what: &str, server: &str) -> Try<T> {
    let detail = error_chain(error);
    if is_tls_failure(error) {
        return Try::Fail(ControlError::Unavailable(format!(
            "{what}: the run API at {server} is not trusted by HERD_CA_FILE: {detail}"
        )));
    }
    Try::Again {
        why: format!("cannot reach the run API at {server}: {detail}"),
        retry_after: None,
    }
}

/// Whether the run API's certificate does not verify against `HERD_CA_FILE` behind `error`:
/// that will not change by trying again. Other TLS failures will (an operator starting up
/// refuses handshakes until it has read its certificate; a connection cut mid-handshake).
/// An `io::Error` hides the error it wraps from `source()`, so it is opened by hand.
fn is_tls_failure(error: &reqwest::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = cause {
        if let Some(tls) = current.downcast_ref::<rustls::Error>() {
            return matches!(
                tls,
                rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented
            );
        }
        cause = match current.downcast_ref::<std::io::Error>() {
            Some(io) => io
                .get_ref()
                .map(|inner| inner as &(dyn std::error::Error + 'static)),
            None => current.source(),
        };
    }
    false
}

/// What an answer other than 2xx means: 409 stops the run, 429 and 502-504 are worth another
/// attempt, anything else is refused as it is.
fn classify<T>(
    what: &str,
    status: StatusCode,
    retry_after: Option<Duration>,
    body: &[u8],
) -> Try<T> {
    let said = match serde_json::from_slice::<ApiError>(body) {
        Ok(error) => format!("{}: {}", error.reason, error.message),
        Err(_) => {
            let text = String::from_utf8_lossy(body);
            let text = text.trim();
            if text.is_empty() {
                "no message".to_owned()
            } else {
                truncate_chars(text, QUOTED_ERROR_CHARS)
            }
        }
    };
    let why = format!("{what}: {status}: {said}");
    match status.as_u16() {
        409 => Try::Fail(ControlError::StaleAttempt(why)),
        429 | 502 | 503 | 504 => Try::Again { why, retry_after },
        _ if status.is_server_error() => Try::Fail(ControlError::Unavailable(why)),
        _ => Try::Fail(ControlError::Refused(why)),
    }
}

/// The body, up to `limit` bytes, and whether that was all of it.
async fn read_body(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<(Vec<u8>, bool), String> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|error| error_chain(&error))?
    {
        if body.len() + chunk.len() > limit {
            body.extend_from_slice(&chunk[..limit - body.len()]);
            return Ok((body, false));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, true))
}
