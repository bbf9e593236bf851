//! The run API's requests in their Runs' traces: a runner sends the `traceparent` of its
//! current span with every request, and the operator answers under a server span
//! `{METHOD} {route}` (HTTP semantic conventions) in that trace. A request without a valid
//! `traceparent` starts no trace: a long poll of an untraced Run is not worth a trace of its
//! own.

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use opentelemetry::trace::{Span as _, SpanKind, Status, Tracer as _};
use opentelemetry::{KeyValue, global};

use crate::decide::trace_context::is_traceparent;
use crate::metrics::run_api_requests::{method_label, route_of};
use crate::traces::{TRACER_NAME, run_context};

/// Answers `request` under a span in the trace its `traceparent` header names, if any.
pub async fn trace_request(request: Request, next: Next) -> Response {
    let parent = request
        .headers()
        .get("traceparent")
        .and_then(|value| value.to_str().ok())
        .filter(|value| is_traceparent(value))
        .map(run_context);
    let Some(parent) = parent else {
        return next.run(request).await;
    };
    let route = route_of(&request);
    let method = method_label(request.method());
    let tracer = global::tracer(TRACER_NAME);
    let mut span = tracer
        .span_builder(format!("{method} {route}"))
        .with_kind(SpanKind::Server)
        .with_attributes(vec![
            KeyValue::new("http.request.method", method),
            KeyValue::new("http.route", route),
            KeyValue::new("url.path", request.uri().path().to_owned()),
        ])
        .start_with_context(&tracer, &parent);
    let response = next.run(request).await;
    let status = response.status();
    span.set_attribute(KeyValue::new(
        "http.response.status_code",
        i64::from(status.as_u16()),
    ));
    if status.is_server_error() {
        span.set_status(Status::error(status.to_string()));
    }
    span.end();
    response
}

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::body::Body;
    use axum::http::StatusCode;
    use axum::routing::post;
    use opentelemetry::trace::TraceContextExt as _;
    use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
    use tower::ServiceExt as _;

    use super::*;

    const PARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    async fn send(traceparent: Option<&str>, path: &str) {
        let router = Router::new()
            .route(
                "/v1/runs/{namespace}/{name}/result",
                post(|| async { StatusCode::SERVICE_UNAVAILABLE }),
            )
            .layer(axum::middleware::from_fn(trace_request));
        let mut request = Request::post(path);
        if let Some(traceparent) = traceparent {
            request = request.header("traceparent", traceparent);
        }
        let response = router
            .oneshot(request.body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    }

    #[tokio::test]
    async fn a_traced_request_is_a_server_span_in_its_runners_trace_and_others_are_not() {
        let _turn = crate::traces::GLOBAL_PROVIDER.lock().await;
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        global::set_tracer_provider(provider.clone());
        send(Some(PARENT), "/v1/runs/ns/r/result").await;
        send(None, "/v1/runs/ns/r/result").await;
        send(Some("00-garbage"), "/v1/runs/ns/r/result").await;
        global::set_tracer_provider(opentelemetry::trace::noop::NoopTracerProvider::new());
        let spans = exporter.get_finished_spans().unwrap();
        assert_eq!(spans.len(), 1, "{spans:#?}");
        let span = &spans[0];
        assert_eq!(span.name, "POST /v1/runs/{namespace}/{name}/result");
        assert_eq!(span.span_kind, SpanKind::Server);
        let parent = run_context(PARENT);
        assert_eq!(
            span.span_context.trace_id(),
            parent.span().span_context().trace_id()
        );
        assert_eq!(span.parent_span_id, parent.span().span_context().span_id());
        let attribute = |key: &str| {
            span.attributes
                .iter()
                .find(|kv| kv.key.as_str() == key)
                .map(|kv| kv.value.to_string())
        };
        assert_eq!(attribute("http.request.method").as_deref(), Some("POST"));
        assert_eq!(
            attribute("http.route").as_deref(),
            Some("/v1/runs/{namespace}/{name}/result")
        );
        assert_eq!(
            attribute("url.path").as_deref(),
            Some("/v1/runs/ns/r/result")
        );
        assert_eq!(
            attribute("http.response.status_code").as_deref(),
            Some("503")
        );
        assert!(matches!(span.status, Status::Error { .. }));
    }
}
