//! The operator's HTTP endpoints: `/healthz` (the process serves), `/readyz` (its caches have
//! synced and the run API serves, whether or not it leads) and `/metrics` (Prometheus text
//! format), unless `--metrics-secure` serves it over HTTPS to authorized readers instead
//! ([`crate::secure_metrics`]).

use std::sync::{Arc, OnceLock};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::metrics::Metrics;
use crate::scope::Synced;

/// Whether every cache has been filled once and the run API has its certificate (set when the
/// controllers are built).
#[derive(Debug, Default)]
pub struct Readiness(OnceLock<Vec<Synced>>);

impl Readiness {
    /// Registers the caches to wait for; only the first call counts.
    pub fn set(&self, caches: Vec<Synced>) {
        let _ = self.0.set(caches);
    }

    /// True once the caches are registered and each has listed everything once.
    pub fn is_ready(&self) -> bool {
        self.0
            .get()
            .is_some_and(|caches| caches.iter().all(Synced::is_synced))
    }
}

/// What the endpoints read.
#[derive(Clone)]
pub struct HttpState {
    /// Whether every cache has synced.
    pub ready: Arc<Readiness>,
    /// The metrics to serve.
    pub metrics: Arc<Metrics>,
    /// Whether `/metrics` is served here (plain HTTP) rather than by the secure listener.
    pub plain_metrics: bool,
}

/// The router of the endpoints.
pub fn router(state: HttpState) -> Router {
    let router = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz));
    let router = if state.plain_metrics {
        router.route("/metrics", get(metrics))
    } else {
        router
    };
    router.with_state(state)
}

async fn readyz(State(state): State<HttpState>) -> impl IntoResponse {
    if state.ready.is_ready() {
        (StatusCode::OK, "ok")
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "caches not synced or the run API not serving",
        )
    }
}

async fn metrics(State(state): State<HttpState>) -> Response {
    openmetrics(&state.metrics)
}

/// `metrics` as `/metrics` answers them, plain or secure: the OpenMetrics text.
pub fn openmetrics(metrics: &Metrics) -> Response {
    match metrics.encode() {
        Ok(text) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn serve(state: HttpState) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router(state)).await });
        format!("http://{addr}")
    }

    async fn get(url: String) -> (u16, String) {
        let response = reqwest::get(url).await.unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    }

    #[tokio::test]
    async fn readyz_follows_the_caches_and_healthz_always_answers() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let ready = Arc::new(Readiness::default());
        let base = serve(HttpState {
            ready: ready.clone(),
            metrics: Arc::new(Metrics::default()),
            plain_metrics: true,
        })
        .await;
        assert_eq!(get(format!("{base}/healthz")).await, (200, "ok".into()));
        assert_eq!(get(format!("{base}/readyz")).await.0, 503, "no caches yet");
        let cache = Synced::default();
        ready.set(vec![cache.clone()]);
        assert_eq!(get(format!("{base}/readyz")).await.0, 503, "not listed yet");
        cache.observe::<k8s_openapi::api::core::v1::ConfigMap>(&Ok(
            kube::runtime::watcher::Event::InitDone,
        ));
        assert_eq!(get(format!("{base}/readyz")).await, (200, "ok".into()));
        let (status, body) = get(format!("{base}/metrics")).await;
        assert_eq!(status, 200);
        assert!(body.contains("herd_leader 0"), "{body}");
        assert_eq!(get(format!("{base}/nope")).await.0, 404);
    }

    #[tokio::test]
    async fn secure_metrics_are_not_served_in_plain_http() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let base = serve(HttpState {
            ready: Arc::new(Readiness::default()),
            metrics: Arc::new(Metrics::default()),
            plain_metrics: false,
        })
        .await;
        assert_eq!(get(format!("{base}/metrics")).await.0, 404);
        assert_eq!(get(format!("{base}/healthz")).await, (200, "ok".into()));
    }
}
