//! The operator's part of a Run's trace: it starts the trace of each new top-level Run with a
//! `reconcile Run` span and stores its W3C `traceparent` on the Run
//! (`herd.dev/traceparent`), which the Run's pod and every child continue; admission's answers
//! (`admit Run`) and the run API's requests join the trace they belong to. Spans go to an
//! OTLP/HTTP endpoint named by the standard `OTEL_*` variables (the chart sets them); without
//! one the operator starts no traces and writes no annotation.

use std::time::SystemTime;

use opentelemetry::global;
use opentelemetry::trace::{Span as _, Tracer as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;

/// The operator's tracer (the instrumentation scope of its spans).
pub const TRACER_NAME: &str = "herd-operator";

/// Installs the OTLP/HTTP exporter (batching in its own thread, bounded queue) as the
/// process's tracer provider when the environment names an endpoint; the caller shuts it down
/// to send what is queued.
pub fn init_from_env() -> Option<SdkTracerProvider> {
    if !herd_otlp::export_wanted_from_env() {
        return None;
    }
    install(None, herd_otlp::sampling_ratio_from_env())
}

/// Installs the exporter to the OTLP/HTTP base URL `endpoint` (as `OTEL_EXPORTER_OTLP_ENDPOINT`
/// names it), for an operator run in another program's process (the e2e suite).
pub fn export_to(endpoint: &str) -> Option<SdkTracerProvider> {
    global::set_text_map_propagator(TraceContextPropagator::new());
    install(Some(herd_otlp::traces_url(endpoint)), 1.0)
}

/// Installs the exporter, to `endpoint` or where the `OTEL_*` variables say, keeping
/// `ratio` of new traces.
fn install(endpoint: Option<String>, ratio: f64) -> Option<SdkTracerProvider> {
    let exporter = herd_otlp::exporter(endpoint)?;
    let provider = herd_otlp::batching_provider(exporter, ratio, TRACER_NAME);
    global::set_tracer_provider(provider.clone());
    Some(provider)
}

/// The operator's `tracing` spans as OpenTelemetry spans: its own, kube-runtime's
/// reconciles (`reconciling object`, with the object) and kube-client's API calls.
pub fn span_layer<S>(provider: &SdkTracerProvider) -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
{
    use opentelemetry::trace::TracerProvider as _;
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::filter::Targets;
    let targets = Targets::new()
        .with_target("herd_operator", tracing::Level::INFO)
        .with_target("kube_runtime", tracing::Level::INFO)
        .with_target("kube_client", tracing::Level::DEBUG);
    tracing_opentelemetry::layer()
        .with_tracer(provider.tracer(TRACER_NAME))
        .with_filter(targets)
}

/// Starts the trace of the new Run `name` in `namespace` of Agent `agent` with a
/// `reconcile Run` span, and returns its `traceparent`; `None` when no trace is recorded (no
/// exporter, or the sampler dropped it).
pub fn start_run_trace(namespace: &str, name: &str, agent: &str) -> Option<String> {
    let tracer = global::tracer(TRACER_NAME);
    let mut span = tracer
        .span_builder(format!("reconcile Run {name}"))
        .with_attributes(vec![
            KeyValue::new("k8s.namespace.name", namespace.to_owned()),
            KeyValue::new("herd.run", name.to_owned()),
            KeyValue::new("gen_ai.agent.name", agent.to_owned()),
        ])
        .start_with_context(&tracer, &Context::new());
    span.add_event("herd.run_created", Vec::new());
    let context = span.span_context().clone();
    span.end();
    if !context.is_valid() || !context.is_sampled() {
        return None;
    }
    Some(format!(
        "00-{}-{}-{:02x}",
        context.trace_id(),
        context.span_id(),
        context.trace_flags().to_u8()
    ))
}

/// What admission answered a Run, as its trace shows it.
pub struct AdmissionSpan<'a> {
    /// The Run's namespace.
    pub namespace: &'a str,
    /// The Run's name.
    pub name: &'a str,
    /// When the Run asked.
    pub asked: SystemTime,
    /// `admitted`, `waiting` (a cap is full) or `held` (by a Budget).
    pub decision: &'static str,
    /// Why it waits or is held; `None` when admitted.
    pub reason: Option<String>,
}

/// Records an `admit Run {name}` span, from the ask to the answer, in the trace of the Run's
/// `traceparent` (nothing when no exporter is installed or the trace is not sampled).
pub fn record_admission(traceparent: &str, admission: AdmissionSpan<'_>) {
    let tracer = global::tracer(TRACER_NAME);
    let mut attributes = vec![
        KeyValue::new("k8s.namespace.name", admission.namespace.to_owned()),
        KeyValue::new("herd.run", admission.name.to_owned()),
        KeyValue::new("herd.admission.decision", admission.decision),
    ];
    if let Some(reason) = admission.reason {
        attributes.push(KeyValue::new("herd.admission.reason", reason));
    }
    tracer
        .span_builder(format!("admit Run {}", admission.name))
        .with_start_time(admission.asked)
        .with_attributes(attributes)
        .start_with_context(&tracer, &run_context(traceparent))
        .end();
}

/// The context of a Run's `traceparent`, for spans the operator adds to its trace.
pub fn run_context(traceparent: &str) -> Context {
    use opentelemetry::propagation::TextMapPropagator as _;
    let carrier =
        std::collections::HashMap::from([("traceparent".to_owned(), traceparent.to_owned())]);
    TraceContextPropagator::new().extract(&carrier)
}

/// Tests that install the process's tracer provider take turns with this lock, and put the
/// no-op provider back before they let go.
#[cfg(test)]
pub(crate) static GLOBAL_PROVIDER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[cfg(test)]
mod tests {
    use opentelemetry::trace::TraceContextExt as _;
    use opentelemetry_sdk::trace::InMemorySpanExporter;

    use super::*;
    use crate::decide::trace_context::is_traceparent;

    #[test]
    fn reconciles_and_api_calls_become_spans_and_other_crates_do_not() {
        use tracing_subscriber::layer::SubscriberExt as _;

        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let subscriber = tracing_subscriber::registry().with(span_layer(&provider));
        tracing::subscriber::with_default(subscriber, || {
            let reconcile = tracing::info_span!(target: "kube_runtime", "reconciling object");
            let _entered = reconcile.enter();
            drop(tracing::debug_span!(target: "kube_client", "HTTP").entered());
            drop(tracing::info_span!(target: "hyper_util", "connect").entered());
        });
        let mut names: Vec<String> = exporter
            .get_finished_spans()
            .unwrap()
            .into_iter()
            .map(|span| span.name.into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["HTTP", "reconciling object"]);
    }

    #[test]
    fn without_an_exporter_no_trace_is_started_and_with_one_it_is() {
        let _turn = GLOBAL_PROVIDER.blocking_lock();
        assert_eq!(start_run_trace("ns", "r", "a"), None);
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        global::set_tracer_provider(provider);
        let traceparent = start_run_trace("ns", "r", "a").unwrap();
        assert!(is_traceparent(&traceparent), "{traceparent}");
        let spans = exporter.get_finished_spans().unwrap();
        assert_eq!(spans[0].name, "reconcile Run r");
        assert!(run_context(&traceparent).span().span_context().is_remote());
        global::set_tracer_provider(opentelemetry::trace::noop::NoopTracerProvider::new());
    }

    #[test]
    fn an_admission_answer_is_a_span_in_the_runs_trace() {
        let _turn = GLOBAL_PROVIDER.blocking_lock();
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        global::set_tracer_provider(provider.clone());
        let parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        record_admission(
            parent,
            AdmissionSpan {
                namespace: "ns",
                name: "r",
                asked: SystemTime::UNIX_EPOCH,
                decision: "waiting",
                reason: Some("namespace at 2/2".to_owned()),
            },
        );
        global::set_tracer_provider(opentelemetry::trace::noop::NoopTracerProvider::new());
        let spans = exporter.get_finished_spans().unwrap();
        let [span] = spans.as_slice() else {
            panic!("one span: {spans:#?}");
        };
        assert_eq!(span.name, "admit Run r");
        assert_eq!(span.start_time, SystemTime::UNIX_EPOCH);
        assert_eq!(
            span.parent_span_id,
            run_context(parent).span().span_context().span_id()
        );
        let attributes: Vec<(String, String)> = span
            .attributes
            .iter()
            .map(|kv| (kv.key.to_string(), kv.value.to_string()))
            .collect();
        let expected = [
            ("k8s.namespace.name", "ns"),
            ("herd.run", "r"),
            ("herd.admission.decision", "waiting"),
            ("herd.admission.reason", "namespace at 2/2"),
        ]
        .map(|(key, value)| (key.to_owned(), value.to_owned()));
        assert_eq!(attributes, expected);
    }
}
