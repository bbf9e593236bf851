//! Admission on the real API server: Runs wait under the namespace and operator caps, with the
//! full cap in their message, and start as room frees up.

use std::time::Duration;

use anyhow::ensure;
use herd_crds::condition::ConditionStatus;
use herd_crds::run::Run;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use serde_json::json;

use super::run_fixtures::{
    create_agent, create_run, message, pending_run, run_until, succeeded, terminate_agent,
};
use super::support::Operated;
use herd_operator::Config;

/// `--max-active-per-namespace=1`.
pub fn one_active_run_per_namespace(config: &mut Config) {
    config.admission.max_active_per_namespace = 1;
}

/// With `--max-active-per-namespace=1` ([`one_active_run_per_namespace`]) a second top-level Run waits `Queued` with "namespace at
/// 1/1", gets no Pod and is not rewritten while it waits; it starts once the first ends.
pub async fn namespace_cap_queues_top_level_runs(op: Operated) -> anyhow::Result<()> {
    create_agent(&op.admin, &op.namespace).await?;
    let runs: Api<Run> = op.api();
    pending_run(&op.admin, &op.namespace, "first").await?;
    create_run(&op.admin, &op.namespace, "second").await?;
    let waiting = run_until(&runs, "second", "Queued under the namespace cap", |r| {
        succeeded(r, ConditionStatus::Unknown, "Queued") && message(r) == "namespace at 1/1"
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let still = runs.get("second").await?;
    ensure!(
        still.metadata.resource_version == waiting.metadata.resource_version,
        "a waiting Run is written once per reason"
    );
    let pods: Api<Pod> = op.api();
    ensure!(
        pods.get_opt("second-1").await?.is_none(),
        "no Pod while it waits"
    );
    terminate_agent(
        &op.admin,
        &op.namespace,
        "first-1",
        json!({"exitCode": 1, "reason": "Error"}),
    )
    .await?;
    run_until(&runs, "second", "PodPending once the first ended", |r| {
        succeeded(r, ConditionStatus::Unknown, "PodPending")
    })
    .await?;
    Ok(())
}
