//! The run API (docs/run-api.md): HTTPS/JSON between a Run's `agent` container and the operator,
//! served by every replica, whether or not it leads. A runner's projected token is checked by a
//! TokenReview for the audience `herd.dev` and must be its Pod's, of the Run in the path, of the
//! Run's latest attempt; each Run may make 20 requests a second. Results and reports are written
//! result ConfigMap first, then `status.report`, then the runner's 2xx; questions likewise,
//! checkpoint ConfigMap first.
//!
//! Pure parts: [`authenticate::runner_of`], [`authorize::authorize`], [`rate_limit`],
//! [`run_config::run_config`], [`report`], [`result_config_map::result_config_map`],
//! [`child_outcome::child_outcome`]; the rest reads caches and the API server and writes.

pub mod admit;
pub mod answers;
pub mod approval;
pub mod authenticate;
pub mod authorize;
pub mod body;
pub mod certificate;
pub mod checkpoint;
pub mod child_outcome;
pub mod children;
pub mod clarification;
pub mod connections;
pub mod failure;
pub mod interruption;
pub mod listener;
pub mod long_poll;
pub mod memory;
pub mod memory_config_map;
pub mod progress;
pub mod rate_limit;
pub mod report;
pub mod report_writer;
pub mod request_span;
pub mod result_config_map;
pub mod routes;
pub mod run_config;

use std::sync::Arc;

use herd_crds::wire::ProgressBody;
use kube::Client;
use tokio::net::TcpListener;
use tracing::{error, info, warn};

use self::authenticate::ReviewCache;
use self::authorize::Attempts;
use self::certificate::{ServingCertificate, follow_secret, server_config};
use self::failure::Failure;
use self::listener::TlsListener;
use self::progress::{Coalescer, RunInstance, WRITE_INTERVAL, WriteOutcome, WriteProgress};
use self::rate_limit::RateLimiter;
use self::report::after_progress;
use self::report_writer::write_report;
use crate::controller::run_context::RunCaches;
use crate::metrics::Metrics;
use crate::scope::{Scope, Synced};

/// What the run API's requests share.
pub struct RunApi {
    client: Client,
    scopes: Vec<(Scope, RunCaches)>,
    reviews: ReviewCache,
    attempts: Attempts,
    limiter: RateLimiter,
    progress: Coalescer,
    metrics: Arc<Metrics>,
}

impl RunApi {
    /// The run API of the Runs in `scopes` (their controllers' caches), measured into
    /// `metrics`.
    pub fn new(client: Client, scopes: Vec<(Scope, RunCaches)>, metrics: Arc<Metrics>) -> Self {
        RunApi {
            metrics,
            progress: Coalescer::new(WRITE_INTERVAL, progress_writer(client.clone())),
            client,
            scopes,
            reviews: ReviewCache::default(),
            attempts: Attempts::default(),
            limiter: RateLimiter::default(),
        }
    }
}

/// Writes a coalesced progress report over the live report (dropped when stale).
fn progress_writer(client: Client) -> WriteProgress {
    Arc::new(move |key: RunInstance, report: ProgressBody| {
        let client = client.clone();
        Box::pin(async move {
            let written = write_report(&client, &key.path.namespace, &key.path.name, |live| {
                let current = live.status.as_ref().and_then(|s| s.attempt).unwrap_or(0);
                if live.metadata.uid.as_deref() != Some(key.uid.as_str())
                    || current > report.report.attempt
                {
                    return Ok((None, ()));
                }
                let live_report = live.status.as_ref().and_then(|s| s.report.as_ref());
                Ok((
                    after_progress(live_report, &report.report, report.sandbox.as_ref()),
                    (),
                ))
            })
            .await;
            match written {
                Ok(_) => WriteOutcome::Done,
                Err(Failure {
                    status, message, ..
                }) => {
                    warn!(run = %key.path, %message, "could not write a progress report");
                    if status.as_u16() == 503 {
                        WriteOutcome::Retry
                    } else {
                        WriteOutcome::Done
                    }
                }
            }
        })
    })
}

/// Serves the run API on `listener` with the certificate of the TLS Secret in `tls_namespace`
/// (marking `loaded` once it has one) until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    api: RunApi,
    tls_namespace: String,
    loaded: Synced,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certificate = Arc::new(ServingCertificate::new(
        provider.clone(),
        loaded,
        api.metrics.certificate_expiry(),
    ));
    let config = match server_config(provider, certificate.clone()) {
        Ok(config) => config,
        Err(error) => {
            error!(%error, "the run API cannot serve TLS");
            return;
        }
    };
    let listener = match TlsListener::new(listener, Arc::new(config)) {
        Ok(listener) => listener,
        Err(error) => {
            error!(%error, "the run API cannot listen");
            return;
        }
    };
    if let Ok(addr) = axum::serve::Listener::local_addr(&listener) {
        info!(%addr, "serving the run API");
    }
    let follower = tokio::spawn(follow_secret(
        api.client.clone(),
        tls_namespace,
        certificate,
    ));
    let app = routes::router(Arc::new(api));
    connections::serve(listener, app, shutdown).await;
    follower.abort();
}
