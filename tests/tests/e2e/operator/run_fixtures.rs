//! What the Run tests share: Agents and Runs as users create them, waits on a Run's status, and
//! the kubelet player (no kubelet runs here: the player writes `pods/status` as a kubelet would).

use std::time::Duration;

use anyhow::Context;
use herd_crds::agent::Agent;
use herd_crds::condition::ConditionStatus;
use herd_crds::run::{Run, RunReport};
use k8s_openapi::api::core::v1::{Namespace, Pod, Secret};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::support::has_condition;
use herd_e2e::wait::wait_for;

pub(crate) const WAIT: Duration = Duration::from_secs(60);

/// Labels the namespace to enforce the `restricted` Pod Security Standard.
pub(crate) async fn enforce_restricted(admin: &Client, namespace: &str) -> anyhow::Result<()> {
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    let label = json!({"metadata": {"labels": {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "latest"}}});
    namespaces
        .patch(namespace, &PatchParams::default(), &Patch::Merge(&label))
        .await?;
    Ok(())
}

/// A ready Agent whose model key is a labelled Secret.
pub(crate) async fn create_agent(admin: &Client, namespace: &str) -> anyhow::Result<()> {
    create_agent_with(admin, namespace, json!({}), json!({})).await
}

/// A ready Agent with these `runDefaults` and `sandbox`.
pub(crate) async fn create_agent_with(
    admin: &Client,
    namespace: &str,
    run_defaults: Value,
    sandbox: Value,
) -> anyhow::Result<()> {
    create_agent_spec(
        admin,
        namespace,
        json!({"runDefaults": run_defaults, "sandbox": sandbox}),
    )
    .await
}

/// A ready Agent using these skills.
pub(crate) async fn create_agent_with_skills(
    admin: &Client,
    namespace: &str,
    skills: &[&str],
) -> anyhow::Result<()> {
    create_agent_spec(admin, namespace, json!({"skills": skills})).await
}

/// A ready Agent `helper` whose model key is a labelled Secret; `spec`'s fields replace those
/// of a plain spec (no skills, a short SOUL, the model's CIDR).
pub(crate) async fn create_agent_spec(
    admin: &Client,
    namespace: &str,
    spec: Value,
) -> anyhow::Result<()> {
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), namespace);
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "model-key", "labels": {"herd.dev/model-credentials": "true"}},
        "stringData": {"api-key": "sk-e2e-secret-value"},
    }))?;
    secrets.create(&PostParams::default(), &secret).await?;
    let mut full = json!({"model": {"provider": "openai", "name": "m",
        "egressCIDRs": ["10.20.0.0/16"],
        "apiKeySecretRef": {"name": "model-key", "key": "api-key"}},
        "skills": [], "soul": "Be brief."});
    if let (Some(full), Some(spec)) = (full.as_object_mut(), spec.as_object()) {
        full.extend(spec.clone());
    }
    let agent: Agent = serde_json::from_value(json!({
        "apiVersion": "herd.dev/v1alpha1", "kind": "Agent",
        "metadata": {"name": "helper"}, "spec": full,
    }))?;
    Api::<Agent>::namespaced(admin.clone(), namespace)
        .create(&PostParams::default(), &agent)
        .await?;
    Ok(())
}

/// Creates the Run `name` of the Agent `helper`, its task "Say hello.".
pub(crate) async fn create_run(admin: &Client, namespace: &str, name: &str) -> anyhow::Result<()> {
    create_run_spec(admin, namespace, name, json!({})).await
}

/// Creates the Run `name` of the Agent `helper`; `spec`'s fields replace those of a plain spec
/// (the task "Say hello.").
pub(crate) async fn create_run_spec(
    admin: &Client,
    namespace: &str,
    name: &str,
    spec: Value,
) -> anyhow::Result<()> {
    let mut full = json!({"agentRef": {"name": "helper"}, "task": "Say hello."});
    if let (Some(full), Some(spec)) = (full.as_object_mut(), spec.as_object()) {
        full.extend(spec.clone());
    }
    let run: Run = serde_json::from_value(json!({
        "apiVersion": "herd.dev/v1alpha1", "kind": "Run",
        "metadata": {"name": name}, "spec": full,
    }))?;
    Api::<Run>::namespaced(admin.clone(), namespace)
        .create(&PostParams::default(), &run)
        .await?;
    Ok(())
}

pub(crate) async fn run_until(
    runs: &Api<Run>,
    name: &str,
    what: &str,
    check: impl Fn(&Run) -> bool,
) -> anyhow::Result<Run> {
    wait_for(what, WAIT, || async {
        let run = runs.get(name).await?;
        Ok(check(&run).then_some(run))
    })
    .await
}

/// Waits until the Run `name`'s `Succeeded` condition is `(status, reason)`.
pub(crate) async fn reaches(
    runs: &Api<Run>,
    name: &str,
    status: ConditionStatus,
    reason: &str,
) -> anyhow::Result<Run> {
    run_until(runs, name, reason, |r| succeeded(r, status, reason)).await
}

/// Creates the Run `name` ([`create_run`]) and waits until its Pod is created (`PodPending`).
pub(crate) async fn pending_run(
    admin: &Client,
    namespace: &str,
    name: &str,
) -> anyhow::Result<Run> {
    create_run(admin, namespace, name).await?;
    let runs: Api<Run> = Api::namespaced(admin.clone(), namespace);
    reaches(&runs, name, ConditionStatus::Unknown, "PodPending").await
}

/// Writes `report` (attempt, seq, stopReason, …) into the Run `name`'s status as the run API
/// writes it: applied by its field manager, `herd-runapi`.
pub(crate) async fn write_report(runs: &Api<Run>, name: &str, report: Value) -> anyhow::Result<()> {
    let patch = json!({"apiVersion": "herd.dev/v1alpha1", "kind": "Run",
        "status": {"report": report}});
    runs.patch_status(
        name,
        &PatchParams::apply("herd-runapi").force(),
        &Patch::Apply(&patch),
    )
    .await?;
    Ok(())
}

/// Plays the runner and the kubelet for one attempt: a completed report with `text`, as the run
/// API writes it, then the `agent` container exits 0.
pub(crate) async fn complete(
    admin: &Client,
    namespace: &str,
    run: &str,
    text: &str,
) -> anyhow::Result<()> {
    let runs: Api<Run> = Api::namespaced(admin.clone(), namespace);
    let report =
        json!({"attempt": 1, "seq": 1, "stopReason": "completed", "result": {"text": text}});
    write_report(&runs, run, report).await?;
    terminate_agent(
        admin,
        namespace,
        &format!("{run}-1"),
        json!({"exitCode": 0, "reason": "Completed"}),
    )
    .await
}

pub(crate) fn succeeded(run: &Run, status: ConditionStatus, reason: &str) -> bool {
    run.status
        .as_ref()
        .is_some_and(|s| has_condition(&s.conditions, "Succeeded", status, reason))
}

/// The report of `run`, which must have succeeded (else an error with its message).
pub(crate) fn succeeded_report(run: &Run) -> anyhow::Result<&RunReport> {
    anyhow::ensure!(
        succeeded(run, ConditionStatus::True, "Succeeded"),
        "the Run ended otherwise: {}",
        message(run)
    );
    run.status
        .as_ref()
        .and_then(|s| s.report.as_ref())
        .context("no report")
}

pub(crate) fn message(run: &Run) -> String {
    run.status
        .as_ref()
        .and_then(|s| {
            herd_crds::condition::find_condition(&s.conditions, "Succeeded")
                .map(|c| c.message.clone())
        })
        .unwrap_or_default()
}

pub(crate) fn container<'a>(pod: &'a Value, list: &str, name: &str) -> anyhow::Result<&'a Value> {
    pod["spec"][list]
        .as_array()
        .and_then(|all| all.iter().find(|c| c["name"] == name))
        .with_context(|| format!("no {list} entry {name}"))
}

/// Plays the kubelet: the Pod `Running` with its `agent` container started.
pub(crate) async fn start_agent(admin: &Client, namespace: &str, pod: &str) -> anyhow::Result<()> {
    let pods: Api<Pod> = Api::namespaced(admin.clone(), namespace);
    let status = json!({"status": {
        "phase": "Running",
        "containerStatuses": [{"name": "agent", "image": "ghcr.io/herd-dev/herd-runner:latest",
            "imageID": "", "ready": true, "restartCount": 0, "started": true,
            "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}],
    }});
    pods.patch_status(pod, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    Ok(())
}

/// Plays the kubelet: the `agent` container terminated as given, the Pod `Failed` or
/// `Succeeded` by its exit code.
pub(crate) async fn terminate_agent(
    admin: &Client,
    namespace: &str,
    pod: &str,
    terminated: Value,
) -> anyhow::Result<()> {
    let pods: Api<Pod> = Api::namespaced(admin.clone(), namespace);
    let phase = if terminated["exitCode"] == 0 {
        "Succeeded"
    } else {
        "Failed"
    };
    let status = json!({"status": {
        "phase": phase,
        "containerStatuses": [{"name": "agent", "image": "ghcr.io/herd-dev/herd-runner:latest",
            "imageID": "", "ready": false, "restartCount": 0, "started": false,
            "state": {"terminated": terminated}}],
    }});
    pods.patch_status(pod, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    Ok(())
}
