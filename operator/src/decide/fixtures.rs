//! Test fixtures shared by the operator's unit tests.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use crate::decide::run_snapshot::{RunSettings, Snapshot};

/// The controller reference of the Run `name` with `uid`, as the Run controller sets it.
pub fn run_owner(name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: "herd.dev/v1alpha1".into(),
        kind: "Run".into(),
        name: name.into(),
        uid: uid.into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The snapshot of a top-level Run of the Agent `helper` whose spec is `agent` (JSON): a 30m
/// timeout, a 1h input timeout, five model calls, no retries, thinking on, no skills.
pub fn snapshot(agent: serde_json::Value) -> Snapshot {
    Snapshot {
        agent_name: "helper".into(),
        agent: serde_json::from_value(agent).unwrap(),
        script: None,
        run: RunSettings {
            plan_mode: false,
            thinking: true,
            timeout_seconds: 1800,
            input_timeout_seconds: 3600,
            suspend_after_seconds: None,
            max_model_calls: 5,
            token_budget: None,
            retries: 0,
            ttl_seconds_after_finished: None,
        },
        skills: Vec::new(),
        runner_image: "ghcr.io/herd/runner:1".into(),
        sandbox_image: "ghcr.io/herd/sandbox:1".into(),
        depth: 0,
        delegation: None,
    }
}
