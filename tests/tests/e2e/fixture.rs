//! The suite's own fixture on the real server: the controller manager runs, a failure report
//! shows the namespace's objects, Events and attached logs, and ServiceAccount tokens act
//! under their RBAC rights.

use std::time::Duration;

use anyhow::{Context, bail};
use herd_crds::agent::Agent;
use herd_crds::run::Run;
use herd_e2e::dump::dump_namespace;
use herd_e2e::requests::{create_strict, merge_patch};
use herd_e2e::wait::wait_for;
use herd_e2e::{E2eTest, TestEnv};
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{Event, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
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
        E2eTest::shared(
            "fixture::service_account_tokens_act_under_rbac",
            service_account_tokens_act_under_rbac,
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

/// A ServiceAccount's token (TokenRequest) authenticates, and its client has exactly the rights
/// a Role grants: it may list Runs in its namespace once bound, and never Agents.
async fn service_account_tokens_act_under_rbac(env: TestEnv) -> anyhow::Result<()> {
    let admin = env.client();
    let namespace = env.namespace();
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), namespace);
    let account: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": "reader"}}))?;
    accounts.create(&PostParams::default(), &account).await?;
    let request: TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": [], "expirationSeconds": 600}}))?;
    let token = accounts
        .create_token_request("reader", &PostParams::default(), &request)
        .await?
        .status
        .context("the TokenRequest has no status")?
        .token;
    let reader = env.cluster().client_with_token(&token).await?;
    let runs: Api<DynamicObject> =
        Api::namespaced_with(reader.clone(), namespace, &ApiResource::erase::<Run>(&()));
    if runs.list(&ListParams::default()).await.is_ok() {
        bail!("an unbound ServiceAccount could list Runs");
    }
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "run-reader"},
        "rules": [{"apiGroups": ["herd.dev"], "resources": ["runs"], "verbs": ["list"]}],
    }))?;
    Api::<Role>::namespaced(admin.clone(), namespace)
        .create(&PostParams::default(), &role)
        .await?;
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "run-reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "run-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": namespace}],
    }))?;
    Api::<RoleBinding>::namespaced(admin, namespace)
        .create(&PostParams::default(), &binding)
        .await?;
    wait_for(
        "the RoleBinding to take effect",
        Duration::from_secs(30),
        || async { Ok(runs.list(&ListParams::default()).await.ok()) },
    )
    .await?;
    let agents: Api<DynamicObject> =
        Api::namespaced_with(reader, namespace, &ApiResource::erase::<Agent>(&()));
    match agents.list(&ListParams::default()).await {
        Ok(_) => bail!("the run reader could list Agents"),
        Err(kube::Error::Api(status)) if status.code == 403 => Ok(()),
        Err(other) => bail!("listing Agents failed otherwise than forbidden: {other}"),
    }
}
