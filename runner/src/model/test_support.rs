//! What the provider clients' tests share: a configuration, a streamed response, and a call
//! that records the deltas it streamed.

use std::sync::Mutex;
use std::time::Duration;

use wiremock::ResponseTemplate;

use super::{ChatModel, HttpModelConfig, ModelError, ModelRequest, StreamDelta};
use crate::thread::AssistantMessage;

/// A configuration for `model` at `base_url`, with generous timeouts.
pub(crate) fn http_config(model: &str, base_url: &str, api_key: Option<&str>) -> HttpModelConfig {
    HttpModelConfig {
        model: model.into(),
        base_url: base_url.into(),
        api_key: api_key.map(str::to_owned),
        request_timeout: Duration::from_secs(20),
        stream_chunk_timeout: Duration::from_secs(10),
    }
}

/// A 200 answer streaming `body` as server-sent events.
pub(crate) fn sse(body: impl Into<String>) -> ResponseTemplate {
    ResponseTemplate::new(200)
        .insert_header("content-type", "text/event-stream")
        .set_body_string(body.into())
}

/// Calls `model` and returns the result with the deltas it streamed.
pub(crate) async fn run(
    model: &dyn ChatModel,
    request: &ModelRequest,
) -> (Result<AssistantMessage, ModelError>, Vec<StreamDelta>) {
    let deltas = Mutex::new(Vec::new());
    let sink = |delta: StreamDelta| {
        if let Ok(mut deltas) = deltas.lock() {
            deltas.push(delta);
        }
    };
    let result = model.complete(request, &sink).await;
    (result, deltas.into_inner().unwrap_or_default())
}
