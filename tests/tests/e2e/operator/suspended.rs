//! Suspended Runs on the real API server, their runners simulated: a Run whose runner posted
//! its question and exited 0 is `Suspended` with no running Pod, and holds no concurrency slot.

use anyhow::ensure;
use futures::{StreamExt, TryStreamExt};
use herd_crds::condition::ConditionStatus;
use herd_crds::run::{Run, RunPhase};
use herd_e2e::wait::wait_for;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::run_fixtures::{
    WAIT, create_agent, create_run, message, run_until, succeeded, terminate_agent, write_report,
};
use super::support::Operated;
use herd_operator::Config;

/// How many Runs are suspended, and the namespace cap they would fill ten times over.
const SUSPENDED: usize = 200;
const CAP: u32 = 20;
/// Runs driven to their suspension at once (a Run waits for a slot, then for its Pod).
const AT_ONCE: usize = 40;

/// Plays the runner of `name`'s first attempt: once its Pod exists, the question goes into the
/// report as the run API writes it, and `agent` exits 0 as a suspending runner does; then waits
/// for `Suspended`.
async fn suspend(admin: &Client, namespace: &str, name: &str) -> anyhow::Result<()> {
    let pods: Api<Pod> = Api::namespaced(admin.clone(), namespace);
    let pod = format!("{name}-1");
    wait_for(&format!("Pod {pod}"), WAIT * 5, || async {
        Ok(pods.get_opt(&pod).await?.map(drop))
    })
    .await?;
    let runs: Api<Run> = Api::namespaced(admin.clone(), namespace);
    write_report(
        &runs,
        name,
        json!({"attempt": 1, "seq": 1, "stopReason": "inputRequired",
            "clarification": {"id": "q1", "question": "Which region?", "type": "missing_info"}}),
    )
    .await?;
    terminate_agent(
        admin,
        namespace,
        &pod,
        json!({"exitCode": 0, "reason": "Completed", "message": "suspended"}),
    )
    .await?;
    run_until(&runs, name, "Suspended", |r| {
        r.status.as_ref().and_then(|s| s.phase) == Some(RunPhase::Suspended)
    })
    .await?;
    Ok(())
}

/// `--max-active-per-namespace` at [`CAP`].
pub fn capped(config: &mut Config) {
    config.admission.max_active_per_namespace = CAP;
}

/// 200 Runs suspended under a namespace cap of 20 ([`capped`]): none holds a running Pod or a slot, a new
/// Run still starts, and an answer resumes a suspended Run in attempt 2 (admitted like any
/// start).
pub async fn suspended_runs_hold_no_slot(op: Operated) -> anyhow::Result<()> {
    create_agent(&op.admin, &op.namespace).await?;
    let names: Vec<String> = (0..SUSPENDED).map(|i| format!("waits-{i}")).collect();
    futures::stream::iter(names)
        .map(|name| {
            let (admin, namespace) = (op.admin.clone(), op.namespace.clone());
            async move {
                create_run(&admin, &namespace, &name).await?;
                suspend(&admin, &namespace, &name).await
            }
        })
        .buffer_unordered(AT_ONCE)
        .try_collect::<Vec<()>>()
        .await?;

    let runs: Api<Run> = op.api();
    let all = runs.list(&Default::default()).await?;
    let suspended = all
        .items
        .iter()
        .filter(|r| r.status.as_ref().and_then(|s| s.phase) == Some(RunPhase::Suspended))
        .count();
    ensure!(suspended == SUSPENDED, "{suspended} Runs are suspended");
    let pods: Api<Pod> = op.api();
    let left = pods.list(&Default::default()).await?;
    let busy: Vec<_> = left
        .items
        .iter()
        .filter(|p| {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            !matches!(phase, Some("Succeeded" | "Failed"))
        })
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    ensure!(
        busy.is_empty(),
        "suspended Runs keep Pods running: {busy:?}"
    );
    let named = all
        .items
        .iter()
        .filter(|r| r.status.as_ref().is_some_and(|s| s.pod_name.is_some()))
        .count();
    ensure!(named == 0, "{named} suspended Runs name a Pod");

    create_run(&op.admin, &op.namespace, "fresh").await?;
    run_until(
        &runs,
        "fresh",
        "PodPending beside 200 suspended Runs",
        |r| succeeded(r, ConditionStatus::Unknown, "PodPending"),
    )
    .await?;

    let answer = json!([{"op": "add", "path": "/spec/responses/-",
        "value": {"id": "q1", "answer": "EU"}}]);
    runs.patch(
        "waits-7",
        &PatchParams::default(),
        &Patch::<()>::Json(serde_json::from_value(answer)?),
    )
    .await?;
    let resumed = run_until(&runs, "waits-7", "PodPending on attempt 2", |r| {
        succeeded(r, ConditionStatus::Unknown, "PodPending")
            && r.status.as_ref().and_then(|s| s.attempt) == Some(2)
    })
    .await?;
    let status = resumed.status.as_ref();
    ensure!(
        status.and_then(|s| s.resumptions) == Some(1),
        "resumptions: {:?}; {}",
        status.and_then(|s| s.resumptions),
        message(&resumed)
    );
    ensure!(
        pods.get_opt("waits-7-2").await?.is_some(),
        "the resumed attempt's Pod"
    );
    Ok(())
}
