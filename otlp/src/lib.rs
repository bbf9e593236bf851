//! How the operator and the runner export traces, read the same way in both: the standard
//! `OTEL_*` variables (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`,
//! `..._HEADERS`, `..._TIMEOUT`, `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_BSP_*`,
//! `OTEL_SDK_DISABLED`, `OTEL_TRACES_SAMPLER_ARG`) and a provider that batches spans in its own
//! thread and posts them over OTLP/HTTP with protobuf bodies.
//!
//! The SDK reads most variables itself (headers, timeout, queue sizes, resource attributes);
//! this crate reads only the ones it decides on: whether to export at all, the sampling ratio
//! and the service name's fallback.

use opentelemetry::global;
use opentelemetry_otlp::{Protocol, SpanExporter, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{BatchSpanProcessor, Sampler, SdkTracerProvider};

/// The variables that name an endpoint; without one nothing is exported.
const ENDPOINT_VARIABLES: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
];

/// Installs the W3C trace-context propagator (always: a program that exports nothing still
/// passes a caller's trace on) and answers whether the environment asks for export: an
/// endpoint is named and `OTEL_SDK_DISABLED` is not `true`.
pub fn export_wanted_from_env() -> bool {
    global::set_text_map_propagator(TraceContextPropagator::new());
    let disabled = std::env::var("OTEL_SDK_DISABLED").is_ok_and(|value| value == "true");
    let configured = ENDPOINT_VARIABLES
        .iter()
        .any(|name| std::env::var(name).is_ok_and(|value| !value.is_empty()));
    configured && !disabled
}

/// The share of new traces kept (`OTEL_TRACES_SAMPLER_ARG`, 0 to 1, default 1); a trace
/// continued from a parent follows the parent's decision.
pub fn sampling_ratio_from_env() -> f64 {
    parse_ratio(std::env::var("OTEL_TRACES_SAMPLER_ARG").ok().as_deref())
}

fn parse_ratio(value: Option<&str>) -> f64 {
    value
        .and_then(|text| text.trim().parse::<f64>().ok())
        .filter(|ratio| (0.0..=1.0).contains(ratio))
        .unwrap_or(1.0)
}

/// The traces URL under an OTLP/HTTP base URL (as `OTEL_EXPORTER_OTLP_ENDPOINT` names one).
pub fn traces_url(base: &str) -> String {
    format!("{}/v1/traces", base.trim_end_matches('/'))
}

/// The OTLP/HTTP exporter to `endpoint` (a traces URL), else where the `OTEL_*` variables say.
/// A configuration it cannot build is a warning: the program goes on untraced.
pub fn exporter(endpoint: Option<String>) -> Option<SpanExporter> {
    let mut builder = SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary);
    if let Some(endpoint) = endpoint {
        builder = builder.with_endpoint(endpoint);
    }
    match builder.build() {
        Ok(exporter) => Some(exporter),
        Err(error) => {
            tracing::warn!(%error, "traces are not exported: the OTLP exporter cannot be built");
            None
        }
    }
}

/// A provider that batches `exporter`'s spans in its own thread (bounded queue: a full queue
/// drops spans rather than holding the program up), keeps `ratio` of new traces, and names the
/// service `OTEL_SERVICE_NAME`, else `default_service`.
pub fn batching_provider<E>(exporter: E, ratio: f64, default_service: &str) -> SdkTracerProvider
where
    E: opentelemetry_sdk::trace::SpanExporter + 'static,
{
    let service = std::env::var("OTEL_SERVICE_NAME")
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| default_service.to_owned());
    SdkTracerProvider::builder()
        .with_span_processor(BatchSpanProcessor::builder(exporter).build())
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
            ratio,
        ))))
        .with_resource(Resource::builder().with_service_name(service).build())
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sampling_ratio_is_a_share_or_everything() {
        assert_eq!(parse_ratio(None), 1.0);
        assert_eq!(parse_ratio(Some("0.25")), 0.25);
        assert_eq!(parse_ratio(Some(" 0 ")), 0.0);
        assert_eq!(parse_ratio(Some("2")), 1.0);
        assert_eq!(parse_ratio(Some("-0.5")), 1.0);
        assert_eq!(parse_ratio(Some("half")), 1.0);
    }

    #[test]
    fn the_traces_url_sits_under_the_base() {
        assert_eq!(traces_url("http://c:4318"), "http://c:4318/v1/traces");
        assert_eq!(traces_url("http://c:4318/"), "http://c:4318/v1/traces");
    }
}
