//! Writes to Herd objects (and the ConfigMaps examples carry for their Agents) as `kubectl`
//! makes them, keeping the API server's refusal as a value: many tests expect a refusal and
//! check its message.

use anyhow::bail;
use kube::Client;
use kube::api::{Patch, PatchParams, PostParams, ValidationDirective};
use kube::core::Request;
use serde_json::Value;

/// Field manager of everything these tests write.
pub const FIELD_MANAGER: &str = "herd-e2e";

/// The outcome of a request the API server may legitimately refuse: the stored object, or the
/// server's message.
pub type ServerResult = Result<Value, String>;

/// The URL path of a Herd resource collection (or of ConfigMaps) in `namespace`.
pub fn collection_path(namespace: &str, kind: &str) -> anyhow::Result<String> {
    if kind == "ConfigMap" {
        return Ok(format!("/api/v1/namespaces/{namespace}/configmaps"));
    }
    let plural = match kind {
        "Agent" => "agents",
        "Skill" => "skills",
        "Run" => "runs",
        "Schedule" => "schedules",
        "Budget" => "budgets",
        other => bail!("not a Herd kind: {other}"),
    };
    Ok(format!(
        "/apis/herd.dev/v1alpha1/namespaces/{namespace}/{plural}"
    ))
}

/// Creates `object` in `namespace` with strict field validation (as `kubectl create` does).
pub async fn create_strict(
    client: &Client,
    namespace: &str,
    object: &Value,
) -> anyhow::Result<ServerResult> {
    let kind = object["kind"].as_str().unwrap_or_default();
    let path = collection_path(namespace, kind)?;
    let params = PostParams::default();
    let mut request = Request::new(&path).create(&params, serde_json::to_vec(object)?)?;
    let uri = format!("{}?fieldValidation=Strict", request.uri().path());
    *request.uri_mut() = uri.parse()?;
    Ok(send(client, request).await)
}

/// Sends a JSON merge patch (as `kubectl patch --type merge` does) to the object, or to its
/// `status` subresource when the patch's only top-level key is `status`.
pub async fn merge_patch(
    client: &Client,
    namespace: &str,
    kind: &str,
    name: &str,
    patch: &Value,
) -> anyhow::Result<ServerResult> {
    let subresource = patch_is_status_only(patch);
    patch_object(
        client,
        namespace,
        kind,
        name,
        subresource,
        &Patch::Merge(patch),
    )
    .await
}

/// Sends a JSON patch (RFC 6902, as `kubectl patch --type json` does) to the object.
pub async fn json_patch(
    client: &Client,
    namespace: &str,
    kind: &str,
    name: &str,
    patch: &Value,
) -> anyhow::Result<ServerResult> {
    let uri = format!(
        "{}/{name}?fieldValidation=Strict",
        collection_path(namespace, kind)?
    );
    let request = http::Request::patch(uri)
        .header(http::header::CONTENT_TYPE, "application/json-patch+json")
        .body(serde_json::to_vec(patch)?)?;
    Ok(send(client, request).await)
}

/// Reads a Herd object as JSON.
pub async fn get_object(
    client: &Client,
    namespace: &str,
    kind: &str,
    name: &str,
) -> anyhow::Result<Value> {
    let request = Request::new(collection_path(namespace, kind)?).get(name, &Default::default())?;
    Ok(client.request::<Value>(request).await?)
}

async fn patch_object<P: serde::Serialize>(
    client: &Client,
    namespace: &str,
    kind: &str,
    name: &str,
    status: bool,
    patch: &Patch<P>,
) -> anyhow::Result<ServerResult> {
    let request = Request::new(collection_path(namespace, kind)?);
    let params = PatchParams {
        field_validation: Some(ValidationDirective::Strict),
        ..PatchParams::default()
    };
    let request = if status {
        request.patch_subresource("status", name, &params, patch)?
    } else {
        request.patch(name, &params, patch)?
    };
    Ok(send(client, request).await)
}

async fn send(client: &Client, request: http::Request<Vec<u8>>) -> ServerResult {
    client
        .request::<Value>(request)
        .await
        .map_err(|e| e.to_string())
}

fn patch_is_status_only(patch: &Value) -> bool {
    patch
        .as_object()
        .is_some_and(|fields| fields.len() == 1 && fields.contains_key("status"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_patches_go_to_the_subresource() {
        assert!(patch_is_status_only(
            &serde_json::json!({"status": {"report": {}}})
        ));
        assert!(!patch_is_status_only(
            &serde_json::json!({"spec": {"cancel": true}})
        ));
        assert!(!patch_is_status_only(
            &serde_json::json!({"spec": {}, "status": {}})
        ));
    }

    #[test]
    fn collection_paths() {
        assert_eq!(
            collection_path("ns", "Run").unwrap(),
            "/apis/herd.dev/v1alpha1/namespaces/ns/runs"
        );
        assert_eq!(
            collection_path("ns", "ConfigMap").unwrap(),
            "/api/v1/namespaces/ns/configmaps"
        );
        assert!(collection_path("ns", "Pod").is_err());
    }
}
