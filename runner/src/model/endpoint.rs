//! What the provider clients share: one endpoint's HTTP client and URL, the POST, the loop
//! over a streamed answer's events, and the deadline over a whole call.

use async_trait::async_trait;
use herd_sandbox::truncation::take_chars;
use reqwest::header::{ACCEPT, HeaderMap, HeaderName, HeaderValue};
use serde::de::DeserializeOwned;

use super::error::{ModelError, ModelErrorKind};
use super::http::{build_client, post_json, server_label, with_deadline};
use super::sse::EventReader;
use super::{ChatModel, DeltaSink, HttpModelConfig, ModelRequest};
use crate::thread::AssistantMessage;

/// Characters of a malformed event quoted in the error.
const EXCERPT_CHARS: usize = 200;

/// A provider's client over one endpoint: a `ChatModel` that posts its request body and reads
/// the answer, all under the endpoint's request deadline.
#[async_trait]
pub trait EndpointClient: Send + Sync {
    fn endpoint(&self) -> &Endpoint;

    /// `gen_ai.provider.name` of this client's spans.
    fn provider(&self) -> &'static str;

    /// The provider's headers (key, version...).
    fn headers(&self) -> HeaderMap;

    /// The JSON body sent for `request`.
    fn request_body(&self, request: &ModelRequest) -> serde_json::Value;

    /// The whole message from a 2xx `response`, its deltas streamed into `on_delta`.
    async fn read_answer(
        &self,
        response: reqwest::Response,
        on_delta: DeltaSink<'_>,
    ) -> Result<AssistantMessage, ModelError>;
}

#[async_trait]
impl<C: EndpointClient> ChatModel for C {
    fn name(&self) -> &str {
        &self.endpoint().config.model
    }

    fn provider(&self) -> &str {
        EndpointClient::provider(self)
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        on_delta: DeltaSink<'_>,
    ) -> Result<AssistantMessage, ModelError> {
        let endpoint = self.endpoint();
        let call = async {
            let response = endpoint
                .post(self.headers(), &self.request_body(request))
                .await?;
            self.read_answer(response, on_delta).await
        };
        with_deadline(endpoint.config.request_timeout, &endpoint.server, call).await
    }
}

/// One model endpoint.
pub struct Endpoint {
    pub config: HttpModelConfig,
    client: reqwest::Client,
    /// `the model server at <base URL>`, for messages.
    pub server: String,
    pub url: String,
}

impl Endpoint {
    /// Requests for `config` go to `url`; fails only when the HTTP client cannot be set up.
    pub fn new(config: HttpModelConfig, url: String) -> Result<Self, ModelError> {
        Ok(Endpoint {
            client: build_client(&config)?,
            server: server_label(&config),
            url,
            config,
        })
    }

    /// The headers of a streamed request: `Accept: text/event-stream` and, when the model has
    /// a key, `auth: credential(key)`.
    pub fn stream_headers(
        &self,
        auth: HeaderName,
        credential: impl FnOnce(&str) -> String,
    ) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        if let Some(key) = self.config.api_key.as_deref().filter(|k| !k.is_empty())
            && let Ok(value) = HeaderValue::from_str(&credential(key))
        {
            headers.insert(auth, value);
        }
        headers
    }

    /// POSTs `body`; the response when it is a 2xx, else a typed error.
    pub async fn post(
        &self,
        headers: HeaderMap,
        body: &serde_json::Value,
    ) -> Result<reqwest::Response, ModelError> {
        post_json(
            &self.client,
            &self.url,
            headers,
            body,
            &self.server,
            self.config.stream_chunk_timeout,
        )
        .await
    }

    /// Reads `response` as server-sent events, each one's data parsed as `E` and handed to
    /// `apply`, until `apply` says the answer is complete, a data line is `end` (OpenAI's
    /// `[DONE]`), or the stream ends. Whether the answer is complete. `expected` says what an
    /// event should have been, for the error about one that is not.
    pub async fn read_events<E: DeserializeOwned>(
        &self,
        response: reqwest::Response,
        expected: &str,
        end: Option<&str>,
        mut apply: impl FnMut(E) -> Result<bool, ModelError>,
    ) -> Result<bool, ModelError> {
        let mut events = EventReader::new(response, self.config.stream_chunk_timeout, &self.server);
        while let Some(data) = events.next().await? {
            let data = data.trim();
            if end == Some(data) {
                return Ok(true);
            }
            if data.is_empty() {
                continue;
            }
            let event =
                serde_json::from_str(data).map_err(|e| self.malformed(expected, &e, data))?;
            if apply(event)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The error for `data` that is not what was `expected`.
    pub fn malformed(&self, expected: &str, error: &serde_json::Error, data: &str) -> ModelError {
        let excerpt = take_chars(data, EXCERPT_CHARS);
        ModelError::new(
            ModelErrorKind::InvalidResponse,
            format!("{} sent {expected} ({error}): {excerpt}", self.server),
        )
    }
}
