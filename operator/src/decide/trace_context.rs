//! The W3C trace context a Run carries: its `herd.dev/traceparent` annotation, passed to its
//! pod as `TRACEPARENT`. A child Run takes the `traceparent` header of the runner's request
//! that created it (the span of the parent's `task` call), so a fan-out is one trace.

use std::collections::BTreeMap;

use herd_crds::run::{Run, TRACEPARENT_ANNOTATION};

/// Whether `value` is a W3C `traceparent` of version 00 with a valid trace and span id:
/// anything else, from a request header, is not written onto a Run.
pub fn is_traceparent(value: &str) -> bool {
    let parts: Vec<&str> = value.split('-').collect();
    let [version, trace_id, span_id, flags] = parts.as_slice() else {
        return false;
    };
    let hex = |part: &str, len: usize| {
        part.len() == len
            && part
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let nonzero = |part: &str| part.bytes().any(|b| b != b'0');
    *version == "00"
        && hex(trace_id, 32)
        && nonzero(trace_id)
        && hex(span_id, 16)
        && nonzero(span_id)
        && hex(flags, 2)
}

/// The Run's trace, when its annotation holds a valid `traceparent`.
pub fn traceparent_of(run: &Run) -> Option<&str> {
    run.metadata
        .annotations
        .as_ref()
        .and_then(|annotations| annotations.get(TRACEPARENT_ANNOTATION))
        .map(String::as_str)
        .filter(|value| is_traceparent(value))
}

/// Records `traceparent` (when valid) on `run` as its annotation.
pub fn set_traceparent(run: &mut Run, traceparent: Option<&str>) {
    if let Some(value) = traceparent.filter(|value| is_traceparent(value)) {
        run.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(TRACEPARENT_ANNOTATION.to_owned(), value.to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn only_a_well_formed_traceparent_is_kept() {
        assert!(is_traceparent(PARENT));
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\nx: y",
        ] {
            assert!(!is_traceparent(bad), "{bad:?}");
        }
    }

    #[test]
    fn a_run_keeps_a_valid_traceparent_and_reads_it_back() {
        let mut run = Run::new(
            "r",
            serde_json::from_value(serde_json::json!({"agentRef": {"name": "a"}, "task": "t"}))
                .unwrap(),
        );
        set_traceparent(&mut run, Some("garbage"));
        assert_eq!(traceparent_of(&run), None);
        set_traceparent(&mut run, Some(PARENT));
        assert_eq!(traceparent_of(&run), Some(PARENT));
    }
}
