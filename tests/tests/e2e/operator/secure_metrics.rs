//! `--metrics-secure` on a real API server: `/metrics` leaves the plain HTTP listener and is
//! served over HTTPS with the run API's certificate, refused without a token (401), refused to
//! a ServiceAccount the API server does not allow `get` on the non-resource URL `/metrics`
//! (403), and served to one bound to `charts/herd/files/metrics/reader-clusterrole.yaml`. The
//! operator runs under the chart's RBAC plus `files/metrics/auth-clusterrole.yaml`, as the
//! chart binds it with `metrics.secure`.

use anyhow::{Context, ensure};
use herd_e2e::TestEnv;
use herd_e2e::fixtures::{read_yaml, repo_root};
use herd_e2e::operator_rbac::{Rbac, SERVICE_ACCOUNT, account_token};
use herd_e2e::wait::wait_for;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use super::run_fixtures::WAIT;
use super::support::{Clients, http_get, start_leader, test_config};

/// The test's name.
pub const TEST: &str = "operator::secure_metrics_need_an_allowed_token";

pub async fn secure_metrics_need_an_allowed_token(env: TestEnv) -> anyhow::Result<()> {
    let Clients {
        operator,
        admin,
        namespace,
    } = Clients::new(&env, Rbac::Namespaced).await?;
    bind_cluster_role(&admin, &namespace, "auth-clusterrole.yaml", SERVICE_ACCOUNT).await?;
    bind_cluster_role(&admin, &namespace, "reader-clusterrole.yaml", "prometheus").await?;
    let reader = token(&admin, &namespace, "prometheus").await?;
    let stranger = token(&admin, &namespace, "stranger").await?;

    let mut config = test_config(&[&namespace], &namespace, "secure-metrics")?;
    config.metrics_secure = true;
    config.metrics_addr = "127.0.0.1:0".parse()?;
    let running = start_leader(config, operator).await?;
    let addr = running
        .metrics_addr
        .context("--metrics-secure starts a metrics listener")?;
    let (status, _) = http_get(running.http_addr, "/metrics").await?;
    ensure!(status == 404, "plain /metrics answered {status}");

    // The certificate is the run API's, issued for the Service's names, not 127.0.0.1: what is
    // tested here is who may read, so the name is not checked.
    let https = reqwest::Client::builder()
        .tls_danger_accept_invalid_certs(true)
        .build()?;
    let url = format!("https://{addr}/metrics");
    let get = |token: Option<String>| {
        let mut request = https.get(&url);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        async move {
            let response = request.send().await?;
            Ok::<_, anyhow::Error>((response.status().as_u16(), response.text().await?))
        }
    };
    // Its listener loads the run API's certificate by a watch of its own: until then
    // handshakes fail.
    let (status, body) = wait_for("the secure metrics listener to serve TLS", WAIT, || async {
        Ok(get(None).await.ok())
    })
    .await?;
    ensure!(
        status == 401 && body.contains("no Authorization header"),
        "{status} {body}"
    );
    let (status, body) = get(Some("not-a-token".to_owned())).await?;
    ensure!(
        status == 401 && body.contains("not accepted"),
        "{status} {body}"
    );
    let (status, body) = get(Some(stranger)).await?;
    ensure!(
        status == 403 && body.contains(&format!("system:serviceaccount:{namespace}:stranger")),
        "{status} {body}"
    );
    for _ in 0..2 {
        // The second time from the review kept for a while.
        let (status, body) = get(Some(reader.clone())).await?;
        ensure!(
            status == 200 && body.contains("herd_build_info{") && body.contains("herd_leader 1"),
            "{status} {body}"
        );
    }
    Ok(())
}

/// Applies the ClusterRole of `charts/herd/files/metrics/<file>` and binds it to the
/// ServiceAccount `account` of `namespace` (created when missing).
async fn bind_cluster_role(
    admin: &Client,
    namespace: &str,
    file: &str,
    account: &str,
) -> anyhow::Result<()> {
    let apply = PatchParams::apply("herd-e2e").force();
    let role: ClusterRole = serde_json::from_value(read_yaml(
        &repo_root().join("charts/herd/files/metrics").join(file),
    )?)?;
    Api::<ClusterRole>::all(admin.clone())
        .patch(&role.name_any(), &apply, &Patch::Apply(&role))
        .await?;
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), namespace);
    if accounts.get_opt(account).await?.is_none() {
        let created: ServiceAccount =
            serde_json::from_value(json!({"metadata": {"name": account}}))?;
        accounts.create(&PostParams::default(), &created).await?;
    }
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": format!("{}-{namespace}", role.name_any())},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role.name_any()},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
    }))?;
    Api::<ClusterRoleBinding>::all(admin.clone())
        .patch(&binding.name_any(), &apply, &Patch::Apply(&binding))
        .await?;
    Ok(())
}

/// A token of the ServiceAccount `account` of `namespace` (created when missing), for the API
/// server's own audience, as Prometheus' projected token is.
async fn token(admin: &Client, namespace: &str, account: &str) -> anyhow::Result<String> {
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), namespace);
    if accounts.get_opt(account).await?.is_none() {
        let created: ServiceAccount =
            serde_json::from_value(json!({"metadata": {"name": account}}))?;
        accounts.create(&PostParams::default(), &created).await?;
    }
    account_token(&accounts, account, 3600).await
}
