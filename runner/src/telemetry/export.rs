//! Sending spans to an OTLP/HTTP endpoint, configured by the standard `OTEL_*` variables
//! (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `..._HEADERS`,
//! `..._TIMEOUT`, `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_BSP_*`,
//! `OTEL_TRACES_SAMPLER_ARG`).
//!
//! Export never holds the run up: spans wait in the batch processor's bounded queue (2048 by
//! default, `OTEL_BSP_MAX_QUEUE_SIZE`) and its own thread posts them; when the queue is full a
//! span is dropped, counted, and the count logged at shutdown.

use opentelemetry::global::{self, BoxedTracer};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, SpanExporter, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{BatchSpanProcessor, Sampler, SdkTracerProvider};

use std::sync::Arc;

use super::export_failures::{Counted, ExportFailures};
use super::{TRACER_NAME, Telemetry};

/// The variables that name an endpoint; without one nothing is exported.
const ENDPOINT_VARIABLES: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
];

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
    global::set_text_map_propagator(TraceContextPropagator::new());
    let disabled = std::env::var("OTEL_SDK_DISABLED").is_ok_and(|value| value == "true");
    let configured = ENDPOINT_VARIABLES
        .iter()
        .any(|name| std::env::var(name).is_ok_and(|value| !value.is_empty()));
    if disabled || !configured {
        return None;
    }
    let failures = Arc::new(ExportFailures::default());
    let provider = provider(None, sampling_ratio(), failures.clone())?;
    global::set_tracer_provider(provider.clone());
    // Warm the tracer so the first span does not pay for its creation.
    let _ = provider.tracer(TRACER_NAME);
    Some(TraceExport { provider, failures })
}

/// An exporter to the OTLP/HTTP base URL `endpoint` that is not the process's (the bench
/// compares runs with and without one); [`TraceExport::telemetry`] gives agents its tracer.
pub fn exporting_to(endpoint: &str) -> Option<TraceExport> {
    let url = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
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
    let mut builder = SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary);
    if let Some(endpoint) = endpoint {
        builder = builder.with_endpoint(endpoint);
    }
    let exporter = match builder.build() {
        Ok(exporter) => exporter,
        Err(error) => {
            tracing::warn!(%error, "traces are not exported: the OTLP exporter cannot be built");
            return None;
        }
    };
    let provider = SdkTracerProvider::builder()
        .with_span_processor(BatchSpanProcessor::builder(Counted::new(exporter, failures)).build())
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
            ratio,
        ))))
        .with_resource(
            Resource::builder()
                .with_service_name(service_name())
                .build(),
        )
        .build();
    Some(provider)
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

/// `OTEL_SERVICE_NAME`, else `herd-runner`.
fn service_name() -> String {
    std::env::var("OTEL_SERVICE_NAME")
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| TRACER_NAME.to_owned())
}

/// The share of new traces kept (`OTEL_TRACES_SAMPLER_ARG`, 0 to 1, default 1); a trace
/// continued from a parent follows the parent's decision.
fn sampling_ratio() -> f64 {
    parse_ratio(std::env::var("OTEL_TRACES_SAMPLER_ARG").ok().as_deref())
}

fn parse_ratio(value: Option<&str>) -> f64 {
    value
        .and_then(|text| text.trim().parse::<f64>().ok())
        .filter(|ratio| (0.0..=1.0).contains(ratio))
        .unwrap_or(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sampling_ratio_is_a_share_or_everything() {
        assert_eq!(parse_ratio(None), 1.0);
        assert_eq!(parse_ratio(Some("0.25")), 0.25);
        assert_eq!(parse_ratio(Some("2")), 1.0);
        assert_eq!(parse_ratio(Some("half")), 1.0);
    }
}
