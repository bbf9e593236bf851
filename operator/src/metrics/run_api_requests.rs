//! The run API's requests, counted and timed by route template (`/v1/runs/{namespace}/{name}/
//! result`), never by the raw path, which names a Run: an axum middleware reading the route
//! the router matched.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use prometheus_client::encoding::EncodeLabelSet;

use super::Metrics;

/// The route of a request no route matched (answered 404).
pub const UNMATCHED: &str = "unmatched";

/// The label set of `herd_run_api_requests_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    /// The route template, or [`UNMATCHED`].
    pub route: String,
    /// The HTTP method, or `other` for one the run API never serves.
    pub method: &'static str,
    /// The HTTP status code answered.
    pub code: u16,
}

/// The label set of `herd_run_api_request_duration_seconds`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteTimingLabels {
    /// As in [`RouteLabels`].
    pub route: String,
    /// As in [`RouteLabels`].
    pub method: &'static str,
}

/// A method as a label: the common ones by name, anything a client invents as `other`.
pub fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// The route template the router matched for `request`, or [`UNMATCHED`].
pub fn route_of(request: &Request) -> String {
    request
        .extensions()
        .get::<MatchedPath>()
        .map_or(UNMATCHED, MatchedPath::as_str)
        .to_owned()
}

/// Records the request into `metrics` once the handler has answered (a long poll counts
/// when it answers).
pub async fn record(State(metrics): State<Arc<Metrics>>, request: Request, next: Next) -> Response {
    let route = route_of(&request);
    let method = method_label(request.method());
    let start = Instant::now();
    let response = next.run(request).await;
    metrics.run_api_request(
        RouteLabels {
            route,
            method,
            code: response.status().as_u16(),
        },
        start.elapsed(),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::Router;
    use axum::body::Body;
    use axum::http::StatusCode;
    use axum::routing::get;
    use tower::ServiceExt as _;

    #[tokio::test]
    async fn requests_are_counted_by_route_template_never_by_path() {
        let metrics = Arc::new(Metrics::default());
        let app = Router::new()
            .route("/v1/runs/{namespace}/{name}/config", get(|| async { "{}" }))
            .fallback(|| async { StatusCode::NOT_FOUND })
            .layer(axum::middleware::from_fn_with_state(
                metrics.clone(),
                record,
            ));
        for (method, path) in [
            ("GET", "/v1/runs/team/run-a/config"),
            ("GET", "/v1/runs/team/run-b/config"),
            ("POST", "/v1/runs/team/run-a/config"),
            ("GET", "/nothing/here"),
            ("BREW", "/v1/runs/team/run-a/config"),
        ] {
            let request = Request::builder()
                .method(method)
                .uri(path)
                .body(Body::empty())
                .unwrap();
            app.clone().oneshot(request).await.unwrap();
        }
        let text = metrics.encode().unwrap();
        let route = "/v1/runs/{namespace}/{name}/config";
        for line in [
            format!(
                "herd_run_api_requests_total{{route=\"{route}\",method=\"GET\",code=\"200\"}} 2"
            ),
            format!(
                "herd_run_api_requests_total{{route=\"{route}\",method=\"POST\",code=\"405\"}} 1"
            ),
            format!(
                "herd_run_api_requests_total{{route=\"{route}\",method=\"other\",code=\"405\"}} 1"
            ),
            "herd_run_api_requests_total{route=\"unmatched\",method=\"GET\",code=\"404\"} 1"
                .to_owned(),
            format!(
                "herd_run_api_request_duration_seconds_count{{route=\"{route}\",method=\"GET\"}} 2"
            ),
        ] {
            assert!(text.contains(&line), "{line} in {text}");
        }
        assert!(!text.contains("run-a"), "no Run name in a label: {text}");
    }
}
