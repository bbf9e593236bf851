//! What the runner in a Run's Pod is given, by the kubelet and the operator: a token of the
//! ServiceAccount `herd-runner` bound to its Pod, and the namespace's copy of the run API's CA.

use anyhow::Context;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, ServiceAccount};
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

/// A token of `herd-runner` in `namespace` bound to `pod`, for `audience` (none: the API
/// server's own), valid `seconds`.
pub async fn runner_token(
    admin: &Client,
    namespace: &str,
    pod: &Pod,
    audience: Option<&str>,
    seconds: i64,
) -> anyhow::Result<String> {
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), namespace);
    let request: TokenRequest = serde_json::from_value(json!({"spec": {
        "audiences": audience.into_iter().collect::<Vec<_>>(),
        "expirationSeconds": seconds,
        "boundObjectRef": {"kind": "Pod", "apiVersion": "v1",
            "name": pod.name_any(), "uid": pod.uid()},
    }}))?;
    Ok(accounts
        .create_token_request("herd-runner", &PostParams::default(), &request)
        .await
        .context("requesting a runner token")?
        .status
        .context("the TokenRequest has no status")?
        .token)
}

/// The run API's CA bundle as a runner trusts it: `ca.crt` of the namespace's
/// `herd-run-api-ca`.
pub async fn run_api_ca(admin: &Client, namespace: &str) -> anyhow::Result<String> {
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), namespace);
    cms.get("herd-run-api-ca")
        .await?
        .data
        .and_then(|d| d.get("ca.crt").cloned())
        .context("herd-run-api-ca has no ca.crt")
}
