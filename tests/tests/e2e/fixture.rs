//! The suite's own fixture on the real server: the controller manager runs, and a failure
//! report shows the namespace's objects, Events and attached logs.

use std::time::Duration;

use anyhow::{Context, bail};
use herd_e2e::dump::dump_namespace;
use herd_e2e::requests::{create_strict, merge_patch};
use herd_e2e::wait::wait_for;
use herd_e2e::{E2eTest, TestEnv};
use k8s_openapi::api::core::v1::{Event, ServiceAccount};
use kube::api::{Api, PostParams};
use serde_json::json;

pub fn tests() -> Vec<E2eTest> {
    vec![
        E2eTest::shared(
            "fixture::controller_manager_creates_default_service_accounts",
            controller_manager_creates_default_service_accounts,
        ),
        E2eTest::shared(
            "fixture::failure_report_shows_status_events_and_logs",
            failure_report_shows_status_events_and_logs,
        ),
    ]
}

/// Namespace deletion, garbage collection and ServiceAccounts need the controller manager; the
/// `default` ServiceAccount of a new namespace shows it runs.
async fn controller_manager_creates_default_service_accounts(env: TestEnv) -> anyhow::Result<()> {
    let accounts: Api<ServiceAccount> = Api::namespaced(env.client(), env.namespace());
    wait_for(
        "the default ServiceAccount",
        Duration::from_secs(30),
        || async { Ok(accounts.get_opt("default").await?) },
    )
    .await?;
    Ok(())
}

async fn failure_report_shows_status_events_and_logs(env: TestEnv) -> anyhow::Result<()> {
    let client = env.client();
    let namespace = env.namespace();
    let run = json!({
        "apiVersion": "herd.dev/v1alpha1",
        "kind": "Run",
        "metadata": {"name": "reported"},
        "spec": {"agentRef": {"name": "researcher"}, "task": "Be reported"},
    });
    create_strict(&client, namespace, &run)
        .await?
        .map_err(anyhow::Error::msg)?;
    let status =
        json!({"status": {"report": {"attempt": 1, "seq": 1, "title": "A title to find"}}});
    merge_patch(&client, namespace, "Run", "reported", &status)
        .await?
        .map_err(anyhow::Error::msg)?;
    let event: Event = serde_json::from_value(json!({
        "metadata": {"name": "reported.1"},
        "involvedObject": {"kind": "Run", "name": "reported", "namespace": namespace},
        "reason": "PodPending",
        "message": "an event to find",
        "type": "Normal",
    }))?;
    Api::<Event>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &event)
        .await
        .context("creating the Event")?;
    let dir = tempfile::tempdir()?;
    let log = dir.path().join("operator.log");
    std::fs::write(&log, "first line\na log line to find\n")?;

    let report = dump_namespace(&client, namespace, &[log]).await;
    for expected in [
        "Run/reported: status",
        "A title to find",
        "Normal PodPending Run/reported: an event to find",
        "a log line to find",
    ] {
        if !report.contains(expected) {
            bail!("the failure report lacks {expected:?}:\n{report}");
        }
    }
    Ok(())
}
