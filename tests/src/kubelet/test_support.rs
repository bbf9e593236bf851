//! What the kubelet's unit tests build their Pods, containers and clock from.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Container, Pod};
use serde_json::{Value, json};

use super::lifecycle::{PodState, ProbeResult};

/// `seconds` after the tests' epoch, 2023-11-14T22:13:20Z.
pub fn t(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + seconds).unwrap()
}

/// A container written as JSON.
pub fn container(value: Value) -> Container {
    serde_json::from_value(value).unwrap()
}

/// `base` with the keys of `extra` set over its own (both JSON objects).
pub fn merged(mut base: Value, extra: Value) -> Value {
    if let (Some(base), Some(extra)) = (base.as_object_mut(), extra.as_object()) {
        base.extend(extra.clone());
    }
    base
}

/// A Pod shaped like a Run's: a `sandbox` sidecar with a startup probe, then the `agent`,
/// restart policy `Never`, with `extra` set over its spec.
pub fn herd_pod(extra: Value) -> Pod {
    let spec = merged(
        json!({
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 30,
            "initContainers": [{"name": "sandbox", "restartPolicy": "Always", "image": "s:1",
                                "startupProbe": {"exec": {"command": ["true"]}}}],
            "containers": [{"name": "agent", "image": "r:1"}]
        }),
        extra,
    );
    serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap()
}

/// The state of `pod`, new at 0 s, with its volumes ready.
pub fn ready(pod: &Pod) -> PodState {
    let mut state = PodState::new(pod, t(0));
    state.volumes_ready = true;
    state
}

/// [`herd_pod`] with `extra`, run until the agent runs: the sidecar started at 1 s, its
/// startup probe passed, the agent started at 2 s.
pub fn running(extra: Value) -> PodState {
    let mut state = ready(&herd_pod(extra));
    state.step(t(0));
    state.started(0, t(1));
    state.probed(0, ProbeResult::Started);
    state.step(t(2));
    state.started(1, t(2));
    state
}
