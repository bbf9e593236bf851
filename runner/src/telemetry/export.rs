//! Sending spans to an OTLP/HTTP endpoint, configured by the standard `OTEL_*` variables as
//! `herd_otlp` reads them (the operator reads them the same way).
//!
//! Export never holds the run up: spans wait in the batch processor's bounded queue (2048 by
//! default, `OTEL_BSP_MAX_QUEUE_SIZE`) and its own thread posts them; when the queue is full a
//! span is dropped, counted, and the count logged at shutdown.

use opentelemetry::global::{self, BoxedTracer};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;

use std::sync::Arc;

use super::export_failures::{Counted, ExportFailures};
use super::{TRACER_NAME, Telemetry};

/// The installed exporter; [`TraceExport::shutdown`] sends what is still queued.
pub struct TraceExport {
    provider: SdkTracerProvider,
    failures: Arc<ExportFailures>,
}

impl std::fmt::Debug for TraceExport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TraceExport")
    }
}

/// Installs the OTLP exporter as the process's tracer provider when the environment names an
/// endpoint (and `OTEL_SDK_DISABLED` is not `true`); always installs the W3C trace context
/// propagator. A bad configuration is a warning: the run goes on untraced.
pub fn init_from_env() -> Option<TraceExport> {
    if !herd_otlp::export_wanted_from_env() {
        return None;
    }
    let failures = Arc::new(ExportFailures::default());
    let provider = provider(None, herd_otlp::sampling_ratio_from_env(), failures.clone())?;
    global::set_tracer_provider(provider.clone());
    // Warm the tracer so the first span does not pay for its creation.
    let _ = provider.tracer(TRACER_NAME);
    Some(TraceExport { provider, failures })
}

/// An exporter to the OTLP/HTTP base URL `endpoint` that is not the process's (the bench
/// compares runs with and without one); [`TraceExport::telemetry`] gives agents its tracer.
pub fn exporting_to(endpoint: &str) -> Option<TraceExport> {
    let url = herd_otlp::traces_url(endpoint);
    let failures = Arc::new(ExportFailures::default());
    provider(Some(url), 1.0, failures.clone()).map(|provider| TraceExport { provider, failures })
}

/// The batching provider over an OTLP/HTTP exporter to `endpoint`, else where the `OTEL_*`
/// variables say; failed exports are counted in `failures`.
fn provider(
    endpoint: Option<String>,
    ratio: f64,
    failures: Arc<ExportFailures>,
) -> Option<SdkTracerProvider> {
    let exporter = herd_otlp::exporter(endpoint)?;
    Some(herd_otlp::batching_provider(
        Counted::new(exporter, failures),
        ratio,
        TRACER_NAME,
    ))
}

impl TraceExport {
    /// Agents' telemetry through this exporter.
    pub fn telemetry(&self, capture_content: bool) -> Telemetry {
        Telemetry::with_tracer(
            BoxedTracer::new(Box::new(self.provider.tracer(TRACER_NAME))),
            capture_content,
        )
    }

    /// Exports what is queued and stops the export thread; it blocks, so async callers run it
    /// on a blocking thread.
    pub fn shutdown(self) {
        if let Err(error) = self.provider.shutdown() {
            tracing::warn!(%error, "the last spans were not exported");
        }
        if let Some(summary) = self.failures.summary() {
            tracing::warn!("{summary}");
        }
    }
}
