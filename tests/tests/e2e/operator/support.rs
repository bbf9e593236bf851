//! Running an in-process operator the way a cluster runs it: as a ServiceAccount bound to
//! exactly the RBAC of `charts/herd/files/rbac/`, with its own Lease.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use herd_crds::condition::{Condition, ConditionStatus, find_condition};
use herd_operator::{Config, Running};
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

const MANAGER: &str = "herd-e2e";
const SERVICE_ACCOUNT: &str = "herd-operator";

/// Which RBAC variant the operator runs under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rbac {
    /// `role.yaml` bound in the test's namespace (the `--watch-namespaces` variant).
    Namespaced,
    /// `clusterrole.yaml` bound cluster-wide (no `--watch-namespaces`).
    ClusterWide,
}

fn rbac_file(name: &str) -> anyhow::Result<Value> {
    let path = herd_e2e::fixtures::repo_root()
        .join("charts/herd/files/rbac")
        .join(name);
    let text = std::fs::read_to_string(&path).with_context(|| path.display().to_string())?;
    serde_saphyr::from_str(&text).with_context(|| path.display().to_string())
}

/// Creates the ServiceAccount `herd-operator` in `namespace`, binds it as `rbac` says (plus
/// `tokenreview-clusterrole.yaml`), and returns a client authenticated with its token.
pub async fn operator_client(
    admin: &Client,
    kubeconfig: &Path,
    namespace: &str,
    rbac: Rbac,
) -> anyhow::Result<Client> {
    let apply = PatchParams::apply(MANAGER).force();
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), namespace);
    let account: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": SERVICE_ACCOUNT}}))?;
    accounts.create(&PostParams::default(), &account).await?;
    let subject =
        json!([{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": namespace}]);

    let cluster_role: ClusterRole =
        serde_json::from_value(rbac_file("tokenreview-clusterrole.yaml")?)?;
    let cluster_roles: Api<ClusterRole> = Api::all(admin.clone());
    cluster_roles
        .patch(
            &cluster_role.name_any(),
            &apply,
            &Patch::Apply(&cluster_role),
        )
        .await?;
    let bindings: Api<ClusterRoleBinding> = Api::all(admin.clone());
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": format!("{}-{namespace}", cluster_role.name_any())},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role.name_any()},
        "subjects": subject,
    }))?;
    bindings
        .patch(&binding.name_any(), &apply, &Patch::Apply(&binding))
        .await?;

    match rbac {
        Rbac::Namespaced => {
            let mut role: Role = serde_json::from_value(rbac_file("role.yaml")?)?;
            role.metadata.namespace = Some(namespace.to_owned());
            let roles: Api<Role> = Api::namespaced(admin.clone(), namespace);
            roles
                .patch(&role.name_any(), &apply, &Patch::Apply(&role))
                .await?;
            let binding: RoleBinding = serde_json::from_value(json!({
                "metadata": {"name": "herd-operator", "namespace": namespace},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role.name_any()},
                "subjects": subject,
            }))?;
            let bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), namespace);
            bindings
                .patch("herd-operator", &apply, &Patch::Apply(&binding))
                .await?;
        }
        Rbac::ClusterWide => {
            let role: ClusterRole = serde_json::from_value(rbac_file("clusterrole.yaml")?)?;
            cluster_roles
                .patch(&role.name_any(), &apply, &Patch::Apply(&role))
                .await?;
            let binding: ClusterRoleBinding = serde_json::from_value(json!({
                "metadata": {"name": format!("{}-{namespace}", role.name_any())},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role.name_any()},
                "subjects": subject,
            }))?;
            bindings
                .patch(&binding.name_any(), &apply, &Patch::Apply(&binding))
                .await?;
        }
    }

    let request: TokenRequest = serde_json::from_value(json!({
        "spec": {"audiences": [], "expirationSeconds": 3600}
    }))?;
    let token: TokenRequest = accounts
        .create_subresource("token", SERVICE_ACCOUNT, &PostParams::default(), &request)
        .await
        .context("requesting a ServiceAccount token")?;
    let token = token
        .status
        .map(|s| s.token)
        .context("the TokenRequest has no token")?;

    let file = Kubeconfig::read_from(kubeconfig)?;
    let mut config =
        kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default()).await?;
    config.auth_info = kube::config::AuthInfo {
        token: Some(token.into()),
        ..Default::default()
    };
    Ok(Client::try_from(config)?)
}

/// Operator settings for a test: scoped to `namespaces` (empty: all), a Lease of its own in
/// `lease_namespace`, short lease timings, the HTTP listener on a free loopback port.
pub fn test_config(
    namespaces: &[&str],
    lease_namespace: &str,
    identity: &str,
) -> anyhow::Result<Config> {
    let mut config = Config::for_namespaces(namespaces)?;
    config.lease.name = "herd-operator-e2e".into();
    config.lease.namespace = lease_namespace.to_owned();
    config.lease.identity = Some(identity.to_owned());
    config.lease.duration = Duration::from_secs(4);
    config.lease.renew_before = Duration::from_secs(2);
    config.http_addr = "127.0.0.1:0".parse()?;
    Ok(config)
}

/// Starts an operator and waits until it leads and its caches have synced.
pub async fn start_leader(config: Config, client: Client) -> anyhow::Result<Running> {
    let running = herd_operator::start(config, client).await?;
    let mut leader = running.leader.clone();
    tokio::time::timeout(Duration::from_secs(30), leader.wait_for(|l| *l))
        .await
        .context("the operator did not acquire its Lease within 30s")??;
    herd_e2e::wait::wait_for("the operator's caches", Duration::from_secs(30), || async {
        Ok(running.is_ready().then_some(()))
    })
    .await?;
    Ok(running)
}

/// GETs `path` from the operator's HTTP listener.
pub async fn http_get(running: &Running, path: &str) -> anyhow::Result<(u16, String)> {
    let url = format!("http://{}{path}", running.http_addr);
    let response = reqwest::get(&url).await.with_context(|| url.clone())?;
    let status = response.status().as_u16();
    Ok((status, response.text().await?))
}

/// Fails unless the condition `type_` is present as `(status, reason)`.
pub fn expect_condition(
    conditions: &[Condition],
    type_: &str,
    status: ConditionStatus,
    reason: &str,
) -> anyhow::Result<()> {
    match find_condition(conditions, type_) {
        Some(c) if c.status == status && c.reason == reason => Ok(()),
        other => bail!("{type_}: expected {status:?}/{reason}, found {other:?}"),
    }
}

/// Whether the condition `type_` is present as `(status, reason)`.
pub fn has_condition(
    conditions: &[Condition],
    type_: &str,
    status: ConditionStatus,
    reason: &str,
) -> bool {
    expect_condition(conditions, type_, status, reason).is_ok()
}
