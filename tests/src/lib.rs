//! Helpers for Herd's end-to-end tests against a real cluster.
//!
//! The tests run only when `KUBECONFIG` points at a cluster; otherwise [`cluster_or_skip`]
//! prints a visible skip message (straight to stderr, past the test harness's capture) and the
//! test passes without doing anything.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use herd_crds::generate::crds;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, ValidationDirective};
use kube::core::Request;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

/// Field manager of everything these tests write.
pub const FIELD_MANAGER: &str = "herd-e2e";

/// A client for the cluster `KUBECONFIG` names, or `None` (after printing why) when the
/// variable is unset, so the calling test can return early and pass.
pub async fn cluster_or_skip(test: &str) -> anyhow::Result<Option<Client>> {
    if std::env::var_os("KUBECONFIG").is_none() {
        // Written to stderr directly: libtest captures `eprintln!`, and a skip must be visible.
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED {test}: KUBECONFIG is not set (these tests need a real Kubernetes cluster)"
        );
        return Ok(None);
    }
    install_crypto_provider();
    let client = Client::try_default()
        .await
        .context("KUBECONFIG is set but no client could be built from it")?;
    Ok(Some(client))
}

/// kube's TLS needs exactly one process-wide rustls provider; a second install is harmless.
fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The repository root (this crate's parent folder).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// Applies the three CRDs server-side (as `kubectl apply --server-side` does) and waits until
/// the API server serves them.
pub async fn apply_crds(client: &Client) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let mut names = Vec::new();
    for (file, crd) in crds()? {
        let name = crd.name_any();
        api.patch(&name, &params, &Patch::Apply(&crd))
            .await
            .with_context(|| format!("applying {file}"))?;
        names.push(name);
    }
    for name in names {
        let mut established = false;
        for _ in 0..120 {
            let crd = api.get(&name).await?;
            established = crd
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            if established {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        if !established {
            bail!("CRD {name} was not established within a minute");
        }
    }
    Ok(())
}

/// A namespace created for one test; [`TestNamespace::delete`] removes it with everything in it.
pub struct TestNamespace {
    client: Client,
    /// The namespace's name.
    pub name: String,
}

impl TestNamespace {
    /// Creates `herd-e2e-<suffix>-<pid>`.
    pub async fn create(client: &Client, suffix: &str) -> anyhow::Result<Self> {
        let name = format!("herd-e2e-{suffix}-{}", std::process::id());
        let api: Api<Namespace> = Api::all(client.clone());
        let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
        api.create(&PostParams::default(), &namespace)
            .await
            .with_context(|| format!("creating namespace {name}"))?;
        Ok(TestNamespace {
            client: client.clone(),
            name,
        })
    }

    /// Starts deleting the namespace (the API server finishes in the background).
    pub async fn delete(self) -> anyhow::Result<()> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        api.delete(&self.name, &DeleteParams::background())
            .await
            .with_context(|| format!("deleting namespace {}", self.name))?;
        Ok(())
    }
}

/// The URL path of a Herd resource collection in `namespace`.
fn collection_path(namespace: &str, kind: &str) -> anyhow::Result<String> {
    let plural = match kind {
        "Agent" => "agents",
        "Skill" => "skills",
        "Run" => "runs",
        other => bail!("not a Herd kind: {other}"),
    };
    Ok(format!(
        "/apis/herd.dev/v1alpha1/namespaces/{namespace}/{plural}"
    ))
}

/// The outcome of a request the API server may legitimately refuse.
pub type ServerResult = Result<Value, String>;

/// Creates `object` in `namespace` with strict field validation (as `kubectl create` does):
/// `Ok` with the stored object, or `Err` with the API server's message.
pub async fn create_strict(
    client: &Client,
    namespace: &str,
    object: &Value,
) -> anyhow::Result<ServerResult> {
    let kind = object["kind"].as_str().unwrap_or_default();
    let path = collection_path(namespace, kind)?;
    let mut request =
        Request::new(&path).create(&PostParams::default(), serde_json::to_vec(object)?)?;
    let uri = format!("{}?fieldValidation=Strict", request.uri().path());
    *request.uri_mut() = uri.parse()?;
    Ok(client
        .request::<Value>(request)
        .await
        .map_err(|e| e.to_string()))
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
    let path = collection_path(namespace, kind)?;
    let request = Request::new(&path);
    let params = PatchParams {
        field_validation: Some(ValidationDirective::Strict),
        ..PatchParams::default()
    };
    let status_only = patch_is_status_only(patch);
    let patch = Patch::Merge(patch);
    let request = if status_only {
        request.patch_subresource("status", name, &params, &patch)?
    } else {
        request.patch(name, &params, &patch)?
    };
    Ok(client
        .request::<Value>(request)
        .await
        .map_err(|e| e.to_string()))
}

fn patch_is_status_only(patch: &Value) -> bool {
    patch
        .as_object()
        .is_some_and(|fields| fields.len() == 1 && fields.contains_key("status"))
}

/// Parses one YAML document into JSON.
pub fn yaml(text: &str) -> anyhow::Result<Value> {
    Ok(serde_saphyr::from_str(text)?)
}

/// The `# expect: <message>` comment of a fixture.
pub fn expected_message(text: &str) -> Option<String> {
    text.lines()
        .find_map(|line| line.trim().strip_prefix("# expect:"))
        .map(|m| m.trim().to_owned())
}

/// Every `.yaml` file directly in `dir`, sorted.
pub fn yaml_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| dir.display().to_string())? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "yaml") {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_patches_go_to_the_subresource() {
        assert!(patch_is_status_only(&json!({"status": {"report": {}}})));
        assert!(!patch_is_status_only(&json!({"spec": {"cancel": true}})));
        assert!(!patch_is_status_only(&json!({"spec": {}, "status": {}})));
    }

    #[test]
    fn reads_expect_comments() {
        assert_eq!(
            expected_message("# a\n  # expect:  must be x \nkind: Run\n").as_deref(),
            Some("must be x")
        );
        assert_eq!(expected_message("kind: Run\n"), None);
    }

    #[test]
    fn collection_paths() {
        assert_eq!(
            collection_path("ns", "Run").unwrap(),
            "/apis/herd.dev/v1alpha1/namespaces/ns/runs"
        );
        assert!(collection_path("ns", "Pod").is_err());
    }
}
