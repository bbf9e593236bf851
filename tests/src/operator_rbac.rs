//! An operator's identity as a cluster gives it: the ServiceAccount `herd-operator` bound to
//! exactly the RBAC of `charts/herd/files/rbac/`, and a token to act as it. Its namespace
//! stands for the release namespace (the Lease, the run API's TLS Secret).

use anyhow::Context;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

const MANAGER: &str = "herd-e2e";
/// The operator's ServiceAccount.
pub const SERVICE_ACCOUNT: &str = "herd-operator";

/// Which RBAC variant the operator runs under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rbac {
    /// `role.yaml` bound in one namespace (the `--watch-namespaces` variant).
    Namespaced,
    /// `clusterrole.yaml` bound cluster-wide (no `--watch-namespaces`).
    ClusterWide,
}

fn rbac_file(name: &str) -> anyhow::Result<Value> {
    let path = crate::fixtures::repo_root()
        .join("charts/herd/files/rbac")
        .join(name);
    let text = std::fs::read_to_string(&path).with_context(|| path.display().to_string())?;
    serde_saphyr::from_str(&text).with_context(|| path.display().to_string())
}

/// Creates the ServiceAccount `herd-operator` in `namespace`, binds it as `rbac` says (plus
/// `tokenreview-clusterrole.yaml`, and `release-role.yaml` in `namespace`), and returns a token
/// for it valid `seconds`.
pub async fn operator_token(
    admin: &Client,
    namespace: &str,
    rbac: Rbac,
    seconds: i64,
) -> anyhow::Result<String> {
    operator_token_watching(admin, namespace, rbac, &[namespace], seconds).await
}

/// As [`operator_token`], but with [`Rbac::Namespaced`] `role.yaml` is bound in `watched`
/// (which need not hold `namespace`, as a chart release watching other namespaces) instead.
/// Over 80 lines: the ServiceAccount, each role the chart gives it and its binding, then the
/// token, in the order a cluster administrator would apply them.
pub async fn operator_token_watching(
    admin: &Client,
    namespace: &str,
    rbac: Rbac,
    watched: &[&str],
    seconds: i64,
) -> anyhow::Result<String> {
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

    let mut release: Role = serde_json::from_value(rbac_file("release-role.yaml")?)?;
    release.metadata.namespace = Some(namespace.to_owned());
    let roles: Api<Role> = Api::namespaced(admin.clone(), namespace);
    roles
        .patch(&release.name_any(), &apply, &Patch::Apply(&release))
        .await?;
    let role_bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), namespace);
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": release.name_any(), "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": release.name_any()},
        "subjects": subject,
    }))?;
    role_bindings
        .patch(&binding.name_any(), &apply, &Patch::Apply(&binding))
        .await?;

    match rbac {
        Rbac::Namespaced => {
            for &watched in watched {
                let mut role: Role = serde_json::from_value(rbac_file("role.yaml")?)?;
                role.metadata.namespace = Some(watched.to_owned());
                let roles: Api<Role> = Api::namespaced(admin.clone(), watched);
                roles
                    .patch(&role.name_any(), &apply, &Patch::Apply(&role))
                    .await?;
                let binding: RoleBinding = serde_json::from_value(json!({
                    "metadata": {"name": "herd-operator", "namespace": watched},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role.name_any()},
                    "subjects": subject,
                }))?;
                let bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), watched);
                bindings
                    .patch("herd-operator", &apply, &Patch::Apply(&binding))
                    .await?;
            }
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

    account_token(&accounts, SERVICE_ACCOUNT, seconds).await
}

/// A token of the ServiceAccount `account` among `accounts`, for the API server's own audience,
/// valid `seconds`.
pub async fn account_token(
    accounts: &Api<ServiceAccount>,
    account: &str,
    seconds: i64,
) -> anyhow::Result<String> {
    let request: TokenRequest = serde_json::from_value(json!({
        "spec": {"audiences": [], "expirationSeconds": seconds}
    }))?;
    let token: TokenRequest = accounts
        .create_subresource("token", account, &PostParams::default(), &request)
        .await
        .context("requesting a ServiceAccount token")?;
    token
        .status
        .map(|s| s.token)
        .context("the TokenRequest has no token")
}
