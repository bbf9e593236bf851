//! The Run controller on the real API server, in a namespace enforcing the `restricted` Pod
//! Security Standard; the kubelet player of [`super::run_fixtures`] drives the `agent`
//! container, so the Run follows its terminated state.

use std::time::Duration;

use anyhow::{Context, ensure};
use herd_crds::agent::Agent;
use herd_crds::condition::ConditionStatus;
use herd_crds::run::Run;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::run_fixtures::{
    WAIT, container, create_agent, create_agent_with, create_agent_with_skills, create_run,
    create_run_spec, message, pending_run, reaches, run_until, start_agent, succeeded,
    terminate_agent, write_report,
};
use super::support::{Operated, http_get};
use herd_e2e::wait::wait_for;

/// A Run becomes exactly its snapshot and Pod, admitted under `restricted`, its egress opened by
/// its egress set's NetworkPolicy; the key reaches `agent` only, by `secretKeyRef`; the
/// per-namespace ServiceAccount and default-deny exist; the agent exiting 1 with a termination message fails the Run with it.
pub async fn run_becomes_snapshot_policy_and_pod(op: Operated) -> anyhow::Result<()> {
    create_agent(&op.admin, &op.namespace).await?;
    let runs: Api<Run> = op.api();
    let started = pending_run(&op.admin, &op.namespace, "hello").await?;
    let status = started.status.clone().context("no status")?;
    ensure!(status.start_time.is_some(), "startTime is written");
    ensure!(status.attempt == Some(1));
    ensure!(status.pod_name.as_deref() == Some("hello-1"));
    ensure!(status.snapshot.as_deref() == Some("hello-snapshot"));
    let uid = started.metadata.uid.clone().context("no uid")?;

    let cms: Api<ConfigMap> = op.api();
    let snapshot = cms.get("hello-snapshot").await?;
    ensure!(snapshot.immutable == Some(true));
    ensure!(
        snapshot
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.uid == uid && o.controller == Some(true))
    );
    let text = snapshot
        .data
        .as_ref()
        .and_then(|d| d.get("snapshot.json"))
        .context("no snapshot.json")?;
    ensure!(
        !text.contains("sk-e2e-secret-value"),
        "never a Secret value"
    );
    let parsed: Value = serde_json::from_str(text)?;
    ensure!(parsed["agent"]["soul"] == "Be brief.", "{parsed}");
    ensure!(parsed["run"]["timeoutSeconds"] == 1800, "{parsed}");

    let pods: Api<Pod> = op.api();
    let pod = serde_json::to_value(pods.get("hello-1").await?)?;
    let set = pod["metadata"]["labels"]["herd.dev/egress-set"]
        .as_str()
        .context("no egress-set label on the Pod")?;
    let policies: Api<NetworkPolicy> = op.api();
    let policy = serde_json::to_value(policies.get(&format!("herd-egress-{set}")).await?)?;
    ensure!(
        policy["spec"]["podSelector"] == json!({"matchLabels": {"herd.dev/egress-set": set}}),
        "{policy}"
    );
    ensure!(
        policy["spec"]["egress"][2] == json!({"to": [{"ipBlock": {"cidr": "10.20.0.0/16"}}]}),
        "the model's CIDR: {policy}"
    );
    ensure!(
        policy["metadata"]["labels"]["herd.dev/per-namespace"] == "true",
        "{policy}"
    );
    policies.get("herd-runs-default-deny").await?;
    let accounts: Api<ServiceAccount> = op.api();
    accounts.get("herd-runner").await?;

    let agent = container(&pod, "containers", "agent")?;
    let key = agent["env"]
        .as_array()
        .and_then(|env| env.iter().find(|e| e["name"] == "HERD_MODEL_API_KEY"))
        .context("no key in agent")?;
    ensure!(
        key["valueFrom"]["secretKeyRef"]["name"] == "model-key",
        "{key}"
    );
    let sandbox = container(&pod, "initContainers", "sandbox")?;
    ensure!(sandbox["restartPolicy"] == "Always");
    ensure!(
        !sandbox.to_string().contains("secretKeyRef"),
        "no key in the sandbox"
    );
    ensure!(pod["spec"]["containers"].as_array().map(Vec::len) == Some(1));

    terminate_agent(
        &op.admin,
        &op.namespace,
        "hello-1",
        json!({"exitCode": 1, "reason": "Error", "message": "model endpoint refused"}),
    )
    .await?;
    let failed = reaches(&runs, "hello", ConditionStatus::False, "Failed").await?;
    ensure!(
        message(&failed) == "the agent exited with code 1: model endpoint refused",
        "{}",
        message(&failed)
    );
    ensure!(failed.status.and_then(|s| s.completion_time).is_some());
    Ok(())
}

/// A Run applied before its Agent waits with `AgentNotFound`, then proceeds to its Pod; an
/// OOM-killed agent ends it `OOMKilled`.
pub async fn run_waits_for_its_agent(op: Operated) -> anyhow::Result<()> {
    create_run(&op.admin, &op.namespace, "early").await?;
    let runs: Api<Run> = op.api();
    let waiting = reaches(&runs, "early", ConditionStatus::Unknown, "AgentNotFound").await?;
    ensure!(
        waiting
            .status
            .as_ref()
            .and_then(|s| s.start_time.clone())
            .is_none(),
        "not accepted yet"
    );
    create_agent(&op.admin, &op.namespace).await?;
    run_until(&runs, "early", "PodPending after the Agent appeared", |r| {
        succeeded(r, ConditionStatus::Unknown, "PodPending")
    })
    .await?;
    terminate_agent(
        &op.admin,
        &op.namespace,
        "early-1",
        json!({"exitCode": 137, "reason": "OOMKilled"}),
    )
    .await?;
    reaches(&runs, "early", ConditionStatus::False, "OOMKilled").await?;
    Ok(())
}

/// A terminal report of the current attempt decides (`completed` → `Succeeded`; `modelError` →
/// `ModelError` with the result's text), written as the run API writes it; the controller's
/// status writes never take `report` over.
pub async fn a_terminal_report_decides(op: Operated) -> anyhow::Result<()> {
    create_agent(&op.admin, &op.namespace).await?;
    let runs: Api<Run> = op.api();
    pending_run(&op.admin, &op.namespace, "answered").await?;
    write_report(
        &runs,
        "answered",
        json!({"attempt": 1, "seq": 1, "stopReason": "completed",
            "usage": {"inputTokens": 5, "outputTokens": 2}, "result": {"text": "hello"}}),
    )
    .await?;
    terminate_agent(
        &op.admin,
        &op.namespace,
        "answered-1",
        json!({"exitCode": 0, "reason": "Completed"}),
    )
    .await?;
    let done = reaches(&runs, "answered", ConditionStatus::True, "Succeeded").await?;
    let status = done.status.context("no status")?;
    ensure!(
        status.report.and_then(|r| r.result).map(|r| r.text) == Some("hello".into()),
        "the report stays"
    );
    let controller_fields = done
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|f| f.manager.as_deref() == Some("herd-controller"))
        .map(|f| serde_json::to_string(&f.fields_v1).unwrap_or_default())
        .collect::<String>();
    ensure!(
        !controller_fields.is_empty() && !controller_fields.contains("f:report"),
        "herd-controller must not own report: {controller_fields}"
    );
    let (code, body) = super::support::http_get(op.http_addr, "/metrics").await?;
    ensure!(
        code == 200
            && body.contains(r#"herd_runs_finished_total{succeeded="True",reason="Succeeded"} 1"#)
            && body.contains(&format!(
                r#"herd_run_tokens_total{{namespace="{}",agent="helper"}} 7"#,
                op.namespace
            )),
        "{body}"
    );
    // As a label value (quoted): the word itself may be in a metric's help text.
    ensure!(
        !body.contains("\"answered\""),
        "no Run names in metrics: {body}"
    );

    // The operator's caches keep no result: its text reaches the message from a live read.
    pending_run(&op.admin, &op.namespace, "refused").await?;
    write_report(
        &runs,
        "refused",
        json!({"attempt": 1, "seq": 1, "stopReason": "modelError",
            "result": {"text": "the endpoint refused the key"}}),
    )
    .await?;
    let failed = reaches(&runs, "refused", ConditionStatus::False, "ModelError").await?;
    ensure!(
        message(&failed) == "model error: the endpoint refused the key",
        "{}",
        message(&failed)
    );
    Ok(())
}

/// Cancel while Running deletes the Pod and ends the Run `Cancelled`; a cancelled Queued Run never gets a Pod
/// (its input is missing); `ttlSecondsAfterFinished` then deletes the finished Run. An accepted
/// Run whose snapshot disappeared fails `SnapshotLost` rather than re-reading its Agent.
pub async fn cancel_and_ttl(op: Operated) -> anyhow::Result<()> {
    create_agent(&op.admin, &op.namespace).await?;
    let runs: Api<Run> = op.api();
    pending_run(&op.admin, &op.namespace, "busy").await?;
    start_agent(&op.admin, &op.namespace, "busy-1").await?;
    reaches(&runs, "busy", ConditionStatus::Unknown, "Running").await?;
    let cancel = json!({"spec": {"cancel": true}});
    runs.patch("busy", &PatchParams::default(), &Patch::Merge(&cancel))
        .await?;
    reaches(&runs, "busy", ConditionStatus::False, "Cancelled").await?;
    let pods: Api<Pod> = op.api();
    wait_for("the cancelled Run's pod to go", WAIT, || async {
        Ok(pods.get_opt("busy-1").await?.is_none().then_some(()))
    })
    .await?;

    let missing_input = json!({"task": "Read it.", "inputs": [{"configMapRef": {"name": "missing"}}],
        "ttlSecondsAfterFinished": 1});
    create_run_spec(&op.admin, &op.namespace, "queued", missing_input).await?;
    let waiting = run_until(&runs, "queued", "Queued on the missing input", |r| {
        succeeded(r, ConditionStatus::Unknown, "Queued")
    })
    .await?;
    ensure!(
        message(&waiting) == "input ConfigMap missing not found",
        "{}",
        message(&waiting)
    );
    runs.patch("queued", &PatchParams::default(), &Patch::Merge(&cancel))
        .await?;
    create_run_spec(
        &op.admin,
        &op.namespace,
        "lost",
        json!({"task": "Read it.", "inputs": [{"configMapRef": {"name": "late"}}]}),
    )
    .await?;
    run_until(&runs, "lost", "Queued on the late input", |r| {
        succeeded(r, ConditionStatus::Unknown, "Queued")
    })
    .await?;
    let cms: Api<ConfigMap> = op.api();
    cms.delete("lost-snapshot", &Default::default()).await?;
    let late: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "late"}, "data": {"a.txt": "a"}}))?;
    cms.create(&PostParams::default(), &late).await?;
    let failed = run_until(&runs, "lost", "SnapshotLost without its snapshot", |r| {
        succeeded(r, ConditionStatus::False, "SnapshotLost")
    })
    .await?;
    ensure!(
        message(&failed) == "snapshot ConfigMap lost-snapshot was deleted while the Run was active",
        "{}",
        message(&failed)
    );
    wait_for("the lost Run's Pod to be deleted", WAIT, || async {
        Ok(pods.get_opt("lost-1").await?.is_none().then_some(()))
    })
    .await?;
    wait_for("the TTL to delete the cancelled Run", WAIT, || async {
        Ok(runs.get_opt("queued").await?.is_none().then_some(()))
    })
    .await?;
    ensure!(
        pods.get_opt("queued-1").await?.is_none(),
        "a Queued Run never gets a Pod"
    );
    Ok(())
}

/// An evicted Pod is an infrastructure failure: with `retries: 1` the Run makes attempt 2 (a
/// new Pod on the same workspace claim), and a second eviction ends it `Evicted`. The ServiceAccount the Pods run
/// as has no rights beyond self-review.
pub async fn eviction_is_retried(op: Operated) -> anyhow::Result<()> {
    let claimed = json!({"workspace": {"persistentVolumeClaim": {"size": "1Gi"}}});
    create_agent_with(&op.admin, &op.namespace, json!({"retries": 1}), claimed).await?;
    let runs: Api<Run> = op.api();
    pending_run(&op.admin, &op.namespace, "evicted").await?;
    let pods: Api<Pod> = op.api();
    let evict = json!({"status": {"phase": "Failed", "reason": "Evicted",
        "message": "The node was low on resource: memory."}});
    pods.patch_status("evicted-1", &PatchParams::default(), &Patch::Merge(&evict))
        .await?;
    run_until(&runs, "evicted", "attempt 2", |r| {
        r.status.as_ref().and_then(|s| s.attempt) == Some(2)
            && r.status.as_ref().and_then(|s| s.pod_name.as_deref()) == Some("evicted-2")
    })
    .await?;
    let second = pods.get("evicted-2").await?;
    ensure!(
        second
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("herd.dev/attempt"))
            .map(String::as_str)
            == Some("2")
    );
    let claims: Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> = op.api();
    let claim = claims.get("evicted-workspace").await?;
    ensure!(
        claim
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.kind == "Run"),
        "the workspace claim is the Run's"
    );
    let volumes = serde_json::to_value(&second.spec.as_ref().context("no spec")?.volumes)?;
    ensure!(
        volumes
            .to_string()
            .contains(r#""claimName":"evicted-workspace""#),
        "attempt 2 reuses the workspace: {volumes}"
    );
    pods.patch_status("evicted-2", &PatchParams::default(), &Patch::Merge(&evict))
        .await?;
    let done = reaches(&runs, "evicted", ConditionStatus::False, "Evicted").await?;
    ensure!(
        message(&done) == "the pod was evicted: The node was low on resource: memory.",
        "{}",
        message(&done)
    );

    let review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
        "spec": {"namespace": op.namespace}});
    let file = kube::config::Kubeconfig::read_from(&op.kubeconfig)?;
    let mut impersonated =
        kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
            .await?;
    impersonated.auth_info.impersonate = Some(format!(
        "system:serviceaccount:{}:herd-runner",
        op.namespace
    ));
    let runner = Client::try_from(impersonated)?;
    let request = http::Request::post("/apis/authorization.k8s.io/v1/selfsubjectrulesreviews")
        .header("Content-Type", "application/json")
        .body(serde_json::to_vec(&review)?)?;
    let answer: Value = runner.request(request).await?;
    let rules = answer["status"]["resourceRules"]
        .as_array()
        .context("no resourceRules")?;
    ensure!(
        !rules.is_empty(),
        "the self-review rules are listed: {answer}"
    );
    for rule in rules {
        let groups = rule["apiGroups"].to_string();
        ensure!(
            groups.contains("authorization.k8s.io") || groups.contains("authentication.k8s.io"),
            "herd-runner may do more than self-review: {rule}"
        );
    }
    Ok(())
}

/// The operator enforces `timeout` itself from `startTime`, whatever the Pod is doing: the Run
/// ends `TimedOut` and its running Pod is deleted.
pub async fn timeout_while_the_pod_runs(op: Operated) -> anyhow::Result<()> {
    create_agent(&op.admin, &op.namespace).await?;
    let runs: Api<Run> = op.api();
    create_run_spec(
        &op.admin,
        &op.namespace,
        "slow",
        json!({"task": "Take your time.", "timeout": "4s"}),
    )
    .await?;
    reaches(&runs, "slow", ConditionStatus::Unknown, "PodPending").await?;
    start_agent(&op.admin, &op.namespace, "slow-1").await?;
    let pods: Api<Pod> = op.api();
    reaches(&runs, "slow", ConditionStatus::Unknown, "Running").await?;
    let done = reaches(&runs, "slow", ConditionStatus::False, "TimedOut").await?;
    ensure!(
        message(&done) == "the timeout of 4s passed",
        "{}",
        message(&done)
    );
    wait_for("the timed-out Run's pod to go", WAIT, || async {
        Ok(pods.get_opt("slow-1").await?.is_none().then_some(()))
    })
    .await?;
    Ok(())
}

/// The API server refusing the Pod (here the RuntimeClass admission: the Agent's
/// `runtimeClassName` does not exist) fails the Run `InvalidSpec` with the server's message.
pub async fn refused_pod_is_invalid_spec(op: Operated) -> anyhow::Result<()> {
    create_agent_with(
        &op.admin,
        &op.namespace,
        json!({}),
        json!({"runtimeClassName": "no-such-runtime"}),
    )
    .await?;
    create_run(&op.admin, &op.namespace, "refused").await?;
    let runs: Api<Run> = op.api();
    let failed = reaches(&runs, "refused", ConditionStatus::False, "InvalidSpec").await?;
    ensure!(
        message(&failed).contains("no-such-runtime"),
        "the server's message: {}",
        message(&failed)
    );
    let pods: Api<Pod> = op.api();
    ensure!(pods.get_opt("refused-1").await?.is_none());
    Ok(())
}

/// A Skill's old version stays while an unfinished Run's snapshot names it (its Pod mounts
/// it), and is deleted once that Run is cancelled.
pub async fn old_skill_version_lives_while_a_run_uses_it(op: Operated) -> anyhow::Result<()> {
    use super::agents::{create_skill, skill_md};
    use herd_crds::skill::Skill;
    create_skill(
        &op.admin,
        &op.namespace,
        "notes",
        &skill_md("notes", "First."),
    )
    .await?;
    let skills: Api<Skill> = op.api();
    let digest = |skill: &Skill| skill.status.as_ref().and_then(|s| s.digest.clone());
    let first = wait_for("the first version", WAIT, || async {
        Ok(digest(&skills.get("notes").await?))
    })
    .await?;
    create_agent_with_skills(&op.admin, &op.namespace, &["notes"]).await?;
    let agents: Api<Agent> = op.api();
    create_run(&op.admin, &op.namespace, "pinned").await?;
    let pods: Api<Pod> = op.api();
    wait_for("the Run's Pod", WAIT, || async {
        Ok(pods.get_opt("pinned-1").await?)
    })
    .await?;
    let cms: Api<ConfigMap> = op.api();
    let snapshot = cms.get("pinned-snapshot").await?;
    let old_name = format!("notes-{}", &first[..8]);
    ensure!(
        snapshot
            .data
            .as_ref()
            .and_then(|d| d.get("snapshot.json"))
            .is_some_and(|s| s.contains(&first)),
        "the snapshot names the first version"
    );

    let patch = json!({"spec": {"content": skill_md("notes", "Second.")}});
    skills
        .patch("notes", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let second = wait_for("the second version", WAIT, || async {
        Ok(digest(&skills.get("notes").await?).filter(|d| *d != first))
    })
    .await?;
    let new_name = format!("notes-{}", &second[..8]);
    wait_for("the Agent on the second version", WAIT, || async {
        let agent = agents.get("helper").await?;
        Ok(agent
            .status
            .as_ref()
            .is_some_and(|s| s.resolved_skills.iter().any(|r| r.digest == second))
            .then_some(()))
    })
    .await?;
    wait_for("the second version's ConfigMap", WAIT, || async {
        Ok(cms.get_opt(&new_name).await?)
    })
    .await?;
    // Give the Skill controller time to act on the Agent's change before checking it kept the
    // version the running Run uses.
    tokio::time::sleep(Duration::from_secs(3)).await;
    ensure!(
        cms.get_opt(&old_name).await?.is_some(),
        "{old_name} is kept while the Run runs"
    );

    let runs: Api<Run> = op.api();
    let cancel = json!({"spec": {"cancel": true}});
    runs.patch("pinned", &PatchParams::default(), &Patch::Merge(&cancel))
        .await?;
    reaches(&runs, "pinned", ConditionStatus::False, "Cancelled").await?;
    wait_for("the old version deleted", WAIT, || async {
        Ok(cms.get_opt(&old_name).await?.is_none().then_some(()))
    })
    .await?;
    ensure!(cms.get_opt(&new_name).await?.is_some(), "the current stays");
    Ok(())
}

/// An open question (a report written as the run API writes it) makes the Run
/// `WaitingForInput` with `InputRequired`; unanswered past `inputTimeout` it ends
/// `InputTimedOut` and its Pod is deleted.
pub async fn run_input_times_out(op: Operated) -> anyhow::Result<()> {
    create_agent(&op.admin, &op.namespace).await?;
    let runs: Api<Run> = op.api();
    create_run_spec(
        &op.admin,
        &op.namespace,
        "asking",
        json!({"task": "Ask first.", "inputTimeout": "2s"}),
    )
    .await?;
    reaches(&runs, "asking", ConditionStatus::Unknown, "PodPending").await?;
    start_agent(&op.admin, &op.namespace, "asking-1").await?;
    write_report(
        &runs,
        "asking",
        json!({"attempt": 1, "seq": 1, "stopReason": "inputRequired",
            "clarification": {"id": "q1", "question": "Which region?", "type": "missing_info"}}),
    )
    .await?;
    let waiting = reaches(&runs, "asking", ConditionStatus::Unknown, "WaitingForInput").await?;
    ensure!(
        message(&waiting) == "Which region?",
        "{}",
        message(&waiting)
    );
    ensure!(
        waiting.status.as_ref().is_some_and(|s| s
            .conditions
            .iter()
            .any(|c| c.type_ == "InputRequired" && c.status == ConditionStatus::True)),
        "InputRequired is True"
    );
    reaches(&runs, "asking", ConditionStatus::False, "InputTimedOut").await?;
    let pods: Api<Pod> = op.api();
    wait_for("the timed-out Run's pod to go", WAIT, || async {
        Ok(pods.get_opt("asking-1").await?.is_none().then_some(()))
    })
    .await?;
    Ok(())
}

/// An accepted Run whose skill version ConfigMap is gone (its Skill was deleted) waits `Queued`
/// with the ConfigMap's name instead of starting a Pod without the skill, and starts once the
/// Skill is back with the same content.
pub async fn run_waits_for_its_skill_version(op: Operated) -> anyhow::Result<()> {
    use super::agents::{create_skill, skill_md};
    use herd_crds::skill::Skill;
    let content = skill_md("notes", "Notes.");
    create_skill(&op.admin, &op.namespace, "notes", &content).await?;
    let skills: Api<Skill> = op.api();
    let digest = wait_for("the skill's version", WAIT, || async {
        Ok(skills.get("notes").await?.status.and_then(|s| s.digest))
    })
    .await?;
    let version = format!("notes-{}", &digest[..8]);
    create_agent_with_skills(&op.admin, &op.namespace, &["notes"]).await?;
    let runs: Api<Run> = op.api();
    create_run_spec(
        &op.admin,
        &op.namespace,
        "skilled",
        json!({"task": "Take notes.", "inputs": [{"configMapRef": {"name": "late"}}]}),
    )
    .await?;
    run_until(&runs, "skilled", "Queued on the late input", |r| {
        succeeded(r, ConditionStatus::Unknown, "Queued")
            && message(r) == "input ConfigMap late not found"
    })
    .await?;
    skills.delete("notes", &Default::default()).await?;
    let cms: Api<ConfigMap> = op.api();
    wait_for("the skill version's ConfigMap to go", WAIT, || async {
        Ok(cms.get_opt(&version).await?.is_none().then_some(()))
    })
    .await?;
    let late: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "late"}, "data": {"a.txt": "a"}}))?;
    cms.create(&PostParams::default(), &late).await?;
    run_until(&runs, "skilled", "Queued on the skill version", |r| {
        succeeded(r, ConditionStatus::Unknown, "Queued")
            && message(r) == format!("skill ConfigMap {version} not found")
    })
    .await?;
    let pods: Api<Pod> = op.api();
    ensure!(
        pods.get_opt("skilled-1").await?.is_none(),
        "no Pod without its skill"
    );
    create_skill(&op.admin, &op.namespace, "notes", &content).await?;
    run_until(
        &runs,
        "skilled",
        "PodPending once the version is back",
        |r| succeeded(r, ConditionStatus::Unknown, "PodPending"),
    )
    .await?;
    let pod = serde_json::to_value(pods.get("skilled-1").await?)?;
    ensure!(
        pod["spec"]["volumes"].to_string().contains(&version),
        "the Pod mounts {version}: {}",
        pod["spec"]["volumes"]
    );
    Ok(())
}

/// A namespace deleted while its Run is active goes away completely (the controller manager
/// deletes its Runs and Pods; the operator's refusals there are final, not retried), and the
/// operator, watching all namespaces, settles and goes on serving other namespaces.
pub async fn namespace_deleted_while_a_run_is_active(op: Operated) -> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::Namespace;
    let doomed = herd_e2e::namespace::create_namespace(
        &op.admin,
        "operator::doomed",
        herd_e2e::namespace::PodSecurity::Unset,
    )
    .await?;
    create_agent_with(&op.admin, &doomed, json!({"retries": 2}), json!({})).await?;
    let runs: Api<Run> = Api::namespaced(op.admin.clone(), &doomed);
    pending_run(&op.admin, &doomed, "doomed").await?;
    start_agent(&op.admin, &doomed, "doomed-1").await?;
    reaches(&runs, "doomed", ConditionStatus::Unknown, "Running").await?;
    // Every state the Run shows until it is gone: none may be an outcome, since a Run going
    // away with its namespace is not decided (garbage collection taking its snapshot or Pod
    // first must not read as InvalidSpec or PodFailed).
    let decided = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = decided.clone();
    let watch_runs = runs.clone();
    let watching = tokio::spawn(async move {
        use futures::StreamExt as _;
        use kube::runtime::WatchStreamExt as _;
        let mut events = kube::runtime::watcher(watch_runs, Default::default())
            .applied_objects()
            .boxed();
        while let Some(Ok(run)) = events.next().await {
            if !succeeded(&run, ConditionStatus::Unknown, "Running")
                && let Ok(mut seen) = seen.lock()
            {
                seen.push(message(&run));
            }
        }
    });
    herd_e2e::namespace::delete_namespace(&op.admin, &doomed).await?;
    let namespaces: Api<Namespace> = Api::all(op.admin.clone());
    wait_for("the namespace to go", WAIT, || async {
        Ok(namespaces.get_opt(&doomed).await?.is_none().then_some(()))
    })
    .await?;
    watching.abort();
    let decided = decided.lock().map(|d| d.clone()).unwrap_or_default();
    ensure!(
        decided.is_empty(),
        "the Run of the deleted namespace was decided on its way out: {decided:?}"
    );
    let errors = || async {
        let (_, text) = http_get(op.http_addr, "/metrics").await?;
        let line = text
            .lines()
            .find(|l| l.starts_with(r#"herd_reconcile_errors_total{controller="run"}"#))
            .map(str::to_owned);
        anyhow::Ok(line.unwrap_or_default())
    };
    let deadline = std::time::Instant::now() + WAIT;
    let mut last = errors().await?;
    loop {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let now = errors().await?;
        if now == last {
            break;
        }
        ensure!(
            std::time::Instant::now() < deadline,
            "the run controller keeps failing: {now}"
        );
        last = now;
    }
    create_agent(&op.admin, &op.namespace).await?;
    create_run(&op.admin, &op.namespace, "after").await?;
    let runs: Api<Run> = op.api();
    run_until(&runs, "after", "PodPending in another namespace", |r| {
        succeeded(r, ConditionStatus::Unknown, "PodPending")
    })
    .await?;
    Ok(())
}
