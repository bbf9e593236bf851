//! What users run with `kubectl`: `kubectl apply -k examples/gitops` and the `argocd-cm` patch
//! of `charts/herd/files/argocd/`, against the test's API server through its admin kubeconfig
//! (never the `KUBECONFIG` of the machine running the tests).

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use anyhow::{Context, bail};
use herd_e2e::TestEnv;
use herd_e2e::argo_cd::{SCRIPTS, config_map_key, script, scripts_dir};
use herd_e2e::external_tools::KUBECTL;
use herd_e2e::fixtures::repo_root;
use herd_e2e::requests::get_object;
use herd_e2e::wait::wait_for;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::json;

use super::health::{Case, Flux, Verdict, check};
use crate::operator::support::{Rbac, operator_client, start_leader, test_config};

const WAIT: Duration = Duration::from_secs(60);

async fn kubectl(kubectl: &Path, env: &TestEnv, args: &[&str]) -> anyhow::Result<String> {
    let output: Output = tokio::process::Command::new(kubectl)
        .env_remove("KUBECONFIG")
        .arg("--kubeconfig")
        .arg(env.cluster().kubeconfig())
        .args(["--namespace", env.namespace()])
        .args(args)
        .current_dir(repo_root())
        .output()
        .await
        .with_context(|| format!("running {}", kubectl.display()))?;
    if !output.status.success() {
        bail!(
            "kubectl {} failed ({}): {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(String::from_utf8(output.stdout)?)
}

/// `kubectl apply -k examples/gitops` creates the Skill, the Agent and its ConfigMap, a second
/// apply changes nothing, and with the operator the Agent becomes Ready: healthy for Argo CD
/// and current for Flux.
pub async fn example_applies_with_kubectl_kustomize(env: TestEnv) -> anyhow::Result<()> {
    const TEST: &str = "gitops::example_applies_with_kubectl_kustomize";
    let Some(kubectl_path) = KUBECTL.find(TEST)? else {
        return Ok(());
    };
    let first = kubectl(&kubectl_path, &env, &["apply", "-k", "examples/gitops"]).await?;
    for object in [
        "skill.herd.dev/release-notes created",
        "agent.herd.dev/release-writer created",
        "configmap/release-writer-script created",
    ] {
        if !first.contains(object) {
            bail!("the first apply did not say {object:?}:\n{first}");
        }
    }
    let second = kubectl(&kubectl_path, &env, &["apply", "-k", "examples/gitops"]).await?;
    if second.lines().count() != 3 || !second.lines().all(|l| l.ends_with(" unchanged")) {
        bail!("the second apply changed something:\n{second}");
    }

    let admin = env.client();
    let ns = env.namespace();
    let operator =
        operator_client(&admin, env.cluster().kubeconfig(), ns, Rbac::Namespaced).await?;
    let running = start_leader(test_config(&[ns], ns, "gitops-example")?, operator).await?;
    let ready = |kind: &'static str, name: &'static str| {
        let admin = admin.clone();
        async move {
            wait_for(&format!("{kind} {name} Ready"), WAIT, || async {
                let object = get_object(&admin, ns, kind, name).await?;
                let ready = object
                    .pointer("/status/conditions")
                    .and_then(|c| c.as_array())
                    .is_some_and(|c| {
                        c.iter()
                            .any(|c| c["type"] == "Ready" && c["status"] == "True")
                    });
                Ok(ready.then_some(object))
            })
            .await
        }
    };
    let skill = ready("Skill", "release-notes").await?;
    let agent = ready("Agent", "release-writer").await?;
    running.shutdown().await?;
    let skill_message = skill
        .pointer("/status/conditions")
        .and_then(|c| c.as_array())
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .and_then(|c| c["message"].as_str())
        .unwrap_or_default()
        .to_owned();
    let current = Flux::Evaluated([false, false, true], Verdict::Current);
    check(
        TEST,
        &[
            Case::new(
                "Skill release-notes",
                skill,
                ("Healthy", skill_message),
                current,
            ),
            Case::new("Agent release-writer", agent, ("Healthy", "Ready"), current),
        ],
    )
}

/// charts/herd/README.md's `kubectl patch` of `argocd-cm` with `argocd-cm-patch.yaml` adds the three
/// scripts verbatim and keeps the settings already there.
pub async fn argocd_cm_patch_adds_the_health_checks(env: TestEnv) -> anyhow::Result<()> {
    const TEST: &str = "gitops::argocd_cm_patch_adds_the_health_checks";
    let Some(kubectl_path) = KUBECTL.find(TEST)? else {
        return Ok(());
    };
    let config_maps: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
    let existing: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "argocd-cm"},
        "data": {"url": "https://argocd.example.com", "timeout.reconciliation": "180s"},
    }))?;
    config_maps
        .create(&PostParams::default(), &existing)
        .await?;
    let patch_file = scripts_dir().join("argocd-cm-patch.yaml");
    let patch_file = patch_file.to_str().context("the patch file's path")?;
    kubectl(
        &kubectl_path,
        &env,
        &[
            "patch",
            "configmap",
            "argocd-cm",
            "--type",
            "merge",
            "--patch-file",
            patch_file,
        ],
    )
    .await?;
    let data = config_maps
        .get("argocd-cm")
        .await?
        .data
        .context("argocd-cm has no data")?;
    let mut problems = Vec::new();
    for key in ["url", "timeout.reconciliation"] {
        if data.get(key) != existing.data.as_ref().and_then(|d| d.get(key)) {
            problems.push(format!("{key} was changed"));
        }
    }
    for (kind, file) in SCRIPTS {
        if data.get(&config_map_key(kind)) != Some(&script(kind)?) {
            problems.push(format!("{} is not {file}", config_map_key(kind)));
        }
    }
    if data.len() != 2 + SCRIPTS.len() {
        problems.push(format!("unexpected keys: {:?}", data.keys()));
    }
    if !problems.is_empty() {
        bail!("{}", problems.join("\n"));
    }
    Ok(())
}
