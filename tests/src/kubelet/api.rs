//! The kubelet's calls to the API server, each one request: binding a Pod, writing its
//! status, deleting it for good, reading the Secrets and ConfigMaps it names, requesting its
//! ServiceAccount tokens.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{
    Binding, ConfigMap, ObjectReference, PersistentVolumeClaim, Pod, PodStatus, Secret,
    ServiceAccount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, Client};

use super::token::Token;
use super::volume_plan::TokenKey;

/// Binds the Pod `name` (with `uid`) to `node`, as the scheduler does.
pub async fn bind(pods: &Api<Pod>, name: &str, uid: &str, node: &str) -> kube::Result<()> {
    let binding = Binding {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            uid: Some(uid.to_owned()),
            ..ObjectMeta::default()
        },
        target: ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("Node".to_owned()),
            name: Some(node.to_owned()),
            ..ObjectReference::default()
        },
    };
    pods.create_subresource::<Binding, serde_json::Value>(
        "binding",
        name,
        &PostParams::default(),
        &binding,
    )
    .await?;
    Ok(())
}

/// Writes the Pod's whole status (`pods/status`; lists replace what was there).
pub async fn write_status(pods: &Api<Pod>, name: &str, status: &PodStatus) -> kube::Result<()> {
    pods.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"status": status})),
    )
    .await?;
    Ok(())
}

/// Deletes the Pod with grace 0 once its containers are gone (only this very Pod: a new
/// one of the same name is left alone).
pub async fn delete_now(pods: &Api<Pod>, name: &str, uid: &str) -> kube::Result<()> {
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: Some(uid.to_owned()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match pods.delete(name, &params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
        Err(error) => Err(error),
    }
}

/// A Secret's data, `None` when there is no such Secret.
pub async fn secret(
    client: &Client,
    namespace: &str,
    name: &str,
) -> kube::Result<Option<BTreeMap<String, Vec<u8>>>> {
    let secret = Api::<Secret>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await?;
    Ok(secret.map(|secret| {
        secret
            .data
            .unwrap_or_default()
            .into_iter()
            .map(|(key, value)| (key, value.0))
            .collect()
    }))
}

/// A ConfigMap's `data` and `binaryData`, `None` when there is no such ConfigMap.
pub async fn config_map(
    client: &Client,
    namespace: &str,
    name: &str,
) -> kube::Result<Option<BTreeMap<String, Vec<u8>>>> {
    let map = Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await?;
    Ok(map.map(|map| {
        let text = map
            .data
            .unwrap_or_default()
            .into_iter()
            .map(|(key, value)| (key, value.into_bytes()));
        let binary = map
            .binary_data
            .unwrap_or_default()
            .into_iter()
            .map(|(key, value)| (key, value.0));
        text.chain(binary).collect()
    }))
}

/// Whether the claim exists.
pub async fn claim_exists(client: &Client, namespace: &str, name: &str) -> kube::Result<bool> {
    let claim = Api::<PersistentVolumeClaim>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await?;
    Ok(claim.is_some())
}

/// A token of the Pod's ServiceAccount bound to the Pod, as the kubelet requests one for a
/// projected volume.
pub async fn request_token(client: &Client, pod: &Pod, key: &TokenKey) -> anyhow::Result<Token> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let account = pod
        .spec
        .as_ref()
        .and_then(|spec| spec.service_account_name.clone())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "default".to_owned());
    let request = TokenRequest {
        metadata: ObjectMeta::default(),
        spec: TokenRequestSpec {
            audiences: if key.audience.is_empty() {
                Vec::new()
            } else {
                vec![key.audience.clone()]
            },
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".to_owned()),
                kind: Some("Pod".to_owned()),
                name: pod.metadata.name.clone(),
                uid: pod.metadata.uid.clone(),
            }),
            expiration_seconds: Some(key.expiration_seconds),
        },
        status: None,
    };
    let issued = Timestamp::now();
    let answer = Api::<ServiceAccount>::namespaced(client.clone(), namespace)
        .create_token_request(&account, &PostParams::default(), &request)
        .await?;
    let Some(status) = answer.status else {
        anyhow::bail!("the TokenRequest for ServiceAccount {account} came back without a token");
    };
    Ok(Token {
        value: status.token,
        issued,
        expires: status.expiration_timestamp.0,
    })
}
