//! Spans the collector never got, told once: the SDK's batch processor drops a failed batch
//! quietly, so a person who set `OTEL_EXPORTER_OTLP_ENDPOINT` to an address nothing listens on
//! would find no trace and no reason. [`Counted`] wraps the exporter, counts the spans of failed
//! exports and keeps the first error, and [`ExportFailures::summary`] says it when the run ends.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};

/// What failed so far; shared by the exporter (which records) and the run (which reports).
#[derive(Debug, Default)]
pub struct ExportFailures {
    lost_spans: AtomicU64,
    first_error: Mutex<Option<String>>,
}

impl ExportFailures {
    fn record(&self, spans: usize, error: &dyn std::fmt::Display) {
        let spans = u64::try_from(spans).unwrap_or(u64::MAX);
        self.lost_spans.fetch_add(spans, Ordering::Relaxed);
        self.first_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert_with(|| error.to_string());
    }

    /// One sentence for the person, when any export failed: how many spans were lost and why.
    pub fn summary(&self) -> Option<String> {
        let lost = self.lost_spans.load(Ordering::Relaxed);
        let error = self
            .first_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()?;
        Some(format!(
            "{lost} span(s) were not exported to the OTLP endpoint: {error}"
        ))
    }
}

/// An exporter whose failed exports are counted in [`ExportFailures`].
#[derive(Debug)]
pub struct Counted<E> {
    inner: E,
    failures: Arc<ExportFailures>,
}

impl<E> Counted<E> {
    /// Wraps `inner`; failures go to `failures`.
    pub fn new(inner: E, failures: Arc<ExportFailures>) -> Self {
        Counted { inner, failures }
    }
}

impl<E: SpanExporter> SpanExporter for Counted<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len();
        let result = self.inner.export(batch).await;
        if let Err(error) = &result {
            self.failures.record(spans, error);
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

#[cfg(test)]
mod tests {
    use opentelemetry_sdk::error::OTelSdkError;

    use super::*;

    /// An exporter that refuses every batch, as one facing a closed port does.
    #[derive(Debug)]
    struct Refusing;

    impl SpanExporter for Refusing {
        async fn export(&self, _batch: Vec<SpanData>) -> OTelSdkResult {
            Err(OTelSdkError::InternalFailure(
                "connection refused".to_owned(),
            ))
        }
    }

    /// An exporter that takes every batch.
    #[derive(Debug)]
    struct Accepting;

    impl SpanExporter for Accepting {
        async fn export(&self, _batch: Vec<SpanData>) -> OTelSdkResult {
            Ok(())
        }
    }

    fn spans(count: usize) -> Vec<SpanData> {
        use opentelemetry::trace::{Tracer as _, TracerProvider as _};
        use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
        let memory = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(memory.clone())
            .build();
        let tracer = provider.tracer("test");
        for _ in 0..count {
            tracer.in_span("span", |_| {});
        }
        memory.get_finished_spans().unwrap()
    }

    #[tokio::test]
    async fn failed_exports_are_counted_and_the_first_reason_kept() {
        let failures = Arc::new(ExportFailures::default());
        let refusing = Counted::new(Refusing, failures.clone());
        assert!(refusing.export(spans(3)).await.is_err());
        assert!(refusing.export(spans(2)).await.is_err());
        assert_eq!(
            failures.summary().as_deref(),
            Some(
                "5 span(s) were not exported to the OTLP endpoint: Operation failed: \
                 connection refused"
            )
        );
    }

    #[tokio::test]
    async fn exports_that_succeed_say_nothing() {
        let failures = Arc::new(ExportFailures::default());
        let accepting = Counted::new(Accepting, failures.clone());
        assert!(accepting.export(spans(4)).await.is_ok());
        assert_eq!(failures.summary(), None);
    }
}
