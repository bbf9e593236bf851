//! The W3C trace context across processes: the operator hands a Run's `traceparent` to its
//! pod as `TRACEPARENT` (and `TRACESTATE`), the runner continues that trace, and a child Run
//! requested through the run API carries the `traceparent` of the `task` call that asked.

use std::collections::HashMap;

use opentelemetry::Context;
use opentelemetry::propagation::TextMapPropagator as _;
use opentelemetry::trace::TraceContextExt as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;

/// The context a process continues: the remote parent in `TRACEPARENT`, else none (a new
/// trace).
pub fn context_from_env() -> Context {
    context_from(
        std::env::var("TRACEPARENT").ok().as_deref(),
        std::env::var("TRACESTATE").ok().as_deref(),
    )
}

/// The context of a W3C `traceparent` (and `tracestate`); an empty context when it does not
/// parse.
pub fn context_from(traceparent: Option<&str>, tracestate: Option<&str>) -> Context {
    let mut carrier = HashMap::new();
    if let Some(value) = traceparent {
        carrier.insert("traceparent".to_owned(), value.to_owned());
    }
    if let Some(value) = tracestate {
        carrier.insert("tracestate".to_owned(), value.to_owned());
    }
    TraceContextPropagator::new().extract(&carrier)
}

/// The `traceparent` of the current span, when there is a valid one to pass on.
pub fn current_traceparent() -> Option<String> {
    traceparent_of(&Context::current())
}

/// The `traceparent` of `cx`'s span, when it is valid.
pub fn traceparent_of(cx: &Context) -> Option<String> {
    if !cx.span().span_context().is_valid() {
        return None;
    }
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(cx, &mut carrier);
    carrier.remove("traceparent")
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_traceparent_round_trips_and_garbage_is_no_parent() {
        let cx = context_from(Some(PARENT), None);
        assert!(cx.span().span_context().is_remote());
        assert_eq!(traceparent_of(&cx).as_deref(), Some(PARENT));
        assert_eq!(traceparent_of(&context_from(Some("nonsense"), None)), None);
        assert_eq!(traceparent_of(&context_from(None, None)), None);
    }
}
