//! `/metrics` protected as kube-rbac-proxy protects an operator's (`--metrics-secure`): served
//! over HTTPS with the run API's certificate, on a listener of its own, to a bearer token that a
//! TokenReview authenticates and a SubjectAccessReview allows `get` on the non-resource URL
//! `/metrics` (the chart's `<fullname>-metrics-reader` ClusterRole grants it). An allowed token
//! is trusted for [`REVIEW_TTL`] under its SHA-256, so a scrape every few seconds costs the API
//! server two reviews a minute; a refused one is reviewed again at each scrape.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, TokenReviewStatus};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Client;
use kube::api::{Api, PostParams};
use prometheus_client::metrics::gauge::Gauge;
use tokio::net::TcpListener;
use tracing::{error, info};

use crate::http::openmetrics;
use crate::metrics::Metrics;
use crate::run_api::authenticate::{REVIEW_TTL, bearer_token, token_hash};
use crate::run_api::certificate::{ServingCertificate, follow_secret, server_config};
use crate::run_api::connections;
use crate::run_api::failure::Failure;
use crate::run_api::listener::TlsListener;
use crate::scope::Synced;

/// The path served, and the non-resource URL a reader must be allowed to `get`.
pub const METRICS_PATH: &str = "/metrics";
/// Allowed tokens kept before the expired ones are dropped.
const PRUNE_ABOVE: usize = 1024;

/// The SubjectAccessReview asking whether the user a TokenReview vouches for may `get`
/// `/metrics`, or why the token is refused outright.
pub fn access_review(status: &TokenReviewStatus) -> Result<SubjectAccessReview, String> {
    if status.authenticated != Some(true) {
        return Err(match status.error.as_deref().filter(|e| !e.is_empty()) {
            Some(error) => format!("the token was not accepted: {error}"),
            None => "the token was not accepted".to_owned(),
        });
    }
    let user = status
        .user
        .as_ref()
        .filter(|u| u.username.as_deref().is_some_and(|name| !name.is_empty()))
        .ok_or("the token review names no user")?;
    Ok(SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: user.username.clone(),
            uid: user.uid.clone(),
            groups: user.groups.clone(),
            extra: user.extra.clone(),
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(METRICS_PATH.to_owned()),
                verb: Some("get".to_owned()),
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    })
}

/// Tokens allowed to read, each until its expiry.
#[derive(Debug, Default)]
struct Readers(Mutex<HashMap<[u8; 32], Instant>>);

impl Readers {
    fn allowed(&self, hash: &[u8; 32], now: Instant) -> bool {
        let readers = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        readers.get(hash).is_some_and(|expires| now < *expires)
    }

    fn allow(&self, hash: [u8; 32], now: Instant) {
        let mut readers = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if readers.len() >= PRUNE_ABOVE {
            readers.retain(|_, expires| now < *expires);
        }
        readers.insert(hash, now + REVIEW_TTL);
    }
}

/// What the secure endpoint reads.
struct Secure {
    client: Client,
    metrics: Arc<Metrics>,
    readers: Readers,
}

impl Secure {
    /// `Ok` when the request's token may read `/metrics`: 401 without an accepted token, 403
    /// when the user may not.
    async fn check(&self, headers: &HeaderMap) -> Result<(), Failure> {
        let token = bearer_token(headers)?;
        let hash = token_hash(token);
        let now = Instant::now();
        if self.readers.allowed(&hash, now) {
            return Ok(());
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_owned()),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let reviewed = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| Failure::kube("reviewing the token", &e))?;
        let question =
            access_review(&reviewed.status.unwrap_or_default()).map_err(Failure::unauthorized)?;
        let user = question.spec.user.clone().unwrap_or_default();
        let answer = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &question)
            .await
            .map_err(|e| Failure::kube("reviewing the access to /metrics", &e))?
            .status
            .unwrap_or_default();
        if !answer.allowed {
            let why = answer.reason.filter(|r| !r.is_empty()).unwrap_or_default();
            return Err(Failure::forbidden(format!(
                "{user} may not get {METRICS_PATH} {why}"
            )));
        }
        self.readers.allow(hash, now);
        Ok(())
    }
}

async fn secure_metrics(State(secure): State<Arc<Secure>>, headers: HeaderMap) -> Response {
    if let Err(refused) = secure.check(&headers).await {
        return refused.into_response();
    }
    openmetrics(&secure.metrics)
}

/// Serves `/metrics` on `listener` with the certificate of the run API's TLS Secret in
/// `tls_namespace` until `shutdown` resolves. It follows that Secret with a watch of its own,
/// so that it never depends on the run API's lifetime; until the Secret is read, handshakes
/// fail.
pub async fn serve(
    listener: TcpListener,
    client: Client,
    tls_namespace: String,
    metrics: Arc<Metrics>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    // Not the readiness of the operator, nor the expiry metric: the run API's own copy says both.
    let certificate = Arc::new(ServingCertificate::new(
        provider.clone(),
        Synced::default(),
        Gauge::default(),
    ));
    let config = match server_config(provider, certificate.clone()) {
        Ok(config) => config,
        Err(error) => {
            error!(%error, "the secure metrics listener cannot serve TLS");
            return;
        }
    };
    let listener = match TlsListener::new(listener, Arc::new(config)) {
        Ok(listener) => listener,
        Err(error) => {
            error!(%error, "the secure metrics listener cannot listen");
            return;
        }
    };
    if let Ok(addr) = axum::serve::Listener::local_addr(&listener) {
        info!(%addr, "serving /metrics over HTTPS to authorized readers");
    }
    let follower = tokio::spawn(follow_secret(client.clone(), tls_namespace, certificate));
    let app = Router::new()
        .route(METRICS_PATH, get(secure_metrics))
        .with_state(Arc::new(Secure {
            client,
            metrics,
            readers: Readers::default(),
        }));
    connections::serve(listener, app, shutdown).await;
    follower.abort();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(value: serde_json::Value) -> TokenReviewStatus {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn an_accepted_token_asks_whether_its_user_may_get_metrics() {
        let review = access_review(&status(serde_json::json!({
            "authenticated": true,
            "user": {"username": "system:serviceaccount:monitoring:prometheus", "uid": "u-1",
                     "groups": ["system:serviceaccounts"], "extra": {"k": ["v"]}},
        })))
        .unwrap();
        let spec = review.spec;
        assert_eq!(
            spec.user.as_deref(),
            Some("system:serviceaccount:monitoring:prometheus")
        );
        assert_eq!(spec.uid.as_deref(), Some("u-1"));
        assert_eq!(spec.groups, Some(vec!["system:serviceaccounts".to_owned()]));
        assert_eq!(spec.extra.unwrap()["k"], vec!["v".to_owned()]);
        let asked = spec.non_resource_attributes.unwrap();
        assert_eq!(
            (asked.path.as_deref(), asked.verb.as_deref()),
            (Some("/metrics"), Some("get"))
        );
        assert!(spec.resource_attributes.is_none());
    }

    #[test]
    fn a_refused_or_anonymous_token_asks_nothing() {
        let refused = access_review(&status(serde_json::json!({
            "authenticated": false, "error": "token expired",
        })))
        .unwrap_err();
        assert!(refused.contains("token expired"), "{refused}");
        let nameless = access_review(&status(serde_json::json!({
            "authenticated": true, "user": {"username": ""},
        })))
        .unwrap_err();
        assert!(nameless.contains("names no user"), "{nameless}");
    }

    #[test]
    fn an_allowed_token_is_trusted_for_a_while() {
        let readers = Readers::default();
        let now = Instant::now();
        let hash = token_hash("token");
        assert!(!readers.allowed(&hash, now));
        readers.allow(hash, now);
        assert!(readers.allowed(&hash, now + REVIEW_TTL / 2));
        assert!(!readers.allowed(&hash, now + REVIEW_TTL));
        assert!(!readers.allowed(&token_hash("other"), now));
    }
}
