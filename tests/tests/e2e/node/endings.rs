//! How a Run's Pod ends on a real node: the sandbox sidecar exits 0 when the kubelet stops it
//! after the agent's exit (no container-error alert per Run) and its Landlock layer, reported in
//! the Run's status, keeps the model's commands from writing outside the workspace; a Pod
//! evicted for its ephemeral storage fails the Run `Evicted` with the kubelet's message, or,
//! with `retries`, is followed by a new attempt.

use std::time::Duration;

use anyhow::{Context, ensure};
use herd_crds::condition::ConditionStatus;
use herd_e2e::TestEnv;
use herd_e2e::requests::merge_patch;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use serde_json::{Value, json};

use super::outcome;
use crate::operator::run_fixtures::succeeded_report;
use crate::scenarios::cluster::Scenario;
use crate::scenarios::script::{script_config_map, scripted_agent};

const RUN_TIME: Duration = Duration::from_secs(120);

/// The lead tries to write a file the container could write but the workspace rules forbid
/// (the kubelet's termination-log mount), and one in its outputs.
const LANDLOCK_SCRIPT: &str = r#"
rules:
  - match: {purpose: title}
    respond: {content: "Writes"}
  - match: {role: lead, call: 1}
    respond:
      toolCalls:
        - name: bash
          arguments:
            description: "Write inside and outside the workspace"
            command: "echo x > /dev/termination-log; echo outside=$?; echo y > /mnt/user-data/outputs/ok.txt; echo inside=$?"
  - match: {role: lead, call: 2, lastMessage: {role: tool, contains: "outside=1"}}
    respond: {content: "Only the workspace is writable."}
  - match: {role: lead, call: 2}
    respond: {content: "The write outside the workspace went through."}
"#;

pub async fn the_sandbox_exits_0_and_its_landlock_holds(env: TestEnv) -> anyhow::Result<()> {
    let mut scenario = Scenario::start(&env, scripted_agent(json!({}))).await?;
    script_config_map(&scenario.admin, &scenario.namespace, LANDLOCK_SCRIPT).await?;
    scenario.create_run("writes", "Write.").await?;
    let run = scenario.finished("writes", RUN_TIME).await?;
    let report = succeeded_report(&run)?;
    let answer = report.result.as_ref().map(|r| r.text.as_str());
    ensure!(
        answer == Some("Only the workspace is writable."),
        "Landlock refused the write outside the workspace: {answer:?}"
    );
    let status = serde_json::to_value(&run)?["status"].take();
    ensure!(
        has_active_layer(&status, "landlock"),
        "the Run's status reports the active landlock layer: {status}"
    );

    let pods: Api<Pod> = Api::namespaced(scenario.admin.clone(), &scenario.namespace);
    let name = Scenario::pod_name(&run);
    let ended = herd_e2e::wait::wait_for("the Pod to end", RUN_TIME, || async {
        let pod = pods.get(&name).await?;
        let phase = pod.status.as_ref().and_then(|s| s.phase.clone());
        Ok(matches!(phase.as_deref(), Some("Succeeded" | "Failed")).then_some(pod))
    })
    .await?;
    let status = ended.status.unwrap_or_default();
    let exits: Vec<(String, Option<i32>)> = herd_e2e::node::container_statuses(&status)
        .map(|c| {
            let code = c.state.as_ref().and_then(|s| s.terminated.as_ref());
            (c.name.clone(), code.map(|t| t.exit_code))
        })
        .collect();
    ensure!(
        status.phase.as_deref() == Some("Succeeded")
            && exits.iter().all(|(_, code)| *code == Some(0)),
        "the Pod Succeeded and both containers exited 0: {:?} {exits:?}",
        status.phase
    );
    Ok(())
}

/// Whether `status` holds, at any depth, a layer `{name, active: true}`.
fn has_active_layer(value: &Value, name: &str) -> bool {
    match value {
        Value::Object(map) => {
            (map.get("name").and_then(Value::as_str) == Some(name)
                && map.get("active") == Some(&Value::Bool(true)))
                || map.values().any(|v| has_active_layer(v, name))
        }
        Value::Array(items) => items.iter().any(|v| has_active_layer(v, name)),
        _ => false,
    }
}

/// The first attempt fills its workspace past the sandbox's ephemeral-storage limit and waits;
/// a second attempt answers at once.
const EVICTION_SCRIPT: &str = r#"
rules:
  - match: {purpose: title}
    respond: {content: "Storage"}
  - match: {role: lead, attempt: 1, call: 1}
    respond:
      toolCalls:
        - name: bash
          arguments:
            description: "Fill the workspace"
            command: "head -c 167772160 /dev/zero > /mnt/user-data/workspace/big; sleep 300"
  - match: {role: lead, attempt: 2}
    respond: {content: "Done on the second attempt."}
"#;

/// Long enough for the kubelet's eviction manager (every 10 s) and the operator.
const EVICTION_TIME: Duration = Duration::from_secs(150);

pub async fn an_evicted_pod_fails_evicted_or_retries(env: TestEnv) -> anyhow::Result<()> {
    let spec = json!({"sandbox": {"resources": {"limits": {"ephemeral-storage": "64Mi"}}},
        "runDefaults": {"retries": 0}});
    let mut scenario = Scenario::start(&env, scripted_agent(spec)).await?;
    script_config_map(&scenario.admin, &scenario.namespace, EVICTION_SCRIPT).await?;

    scenario.create_run("evicted", "Fill it.").await?;
    let failed = scenario.finished("evicted", EVICTION_TIME).await?;
    let (status, reason, message) =
        outcome(&failed).context("the Run has no Succeeded condition")?;
    ensure!(
        status == ConditionStatus::False && reason == "Evicted",
        "the Run fails Evicted: {status:?} {reason}: {message}"
    );
    ensure!(
        message.contains("ephemeral") || message.contains("exceeds"),
        "with the kubelet's message: {message:?}"
    );

    merge_patch(
        &scenario.admin,
        &scenario.namespace,
        "Agent",
        "helper",
        &json!({"spec": {"runDefaults": {"retries": 1}}}),
    )
    .await?
    .map_err(anyhow::Error::msg)?;
    // The next Run's snapshot is taken from the Agent as the operator last saw it.
    let agents: Api<herd_crds::agent::Agent> =
        Api::namespaced(scenario.admin.clone(), &scenario.namespace);
    herd_e2e::wait::wait_for(
        "the operator to see the Agent's retries",
        Duration::from_secs(30),
        || async {
            let agent = agents.get("helper").await?;
            let seen = agent.status.as_ref().and_then(|s| s.observed_generation);
            Ok((seen.is_some() && seen == agent.metadata.generation).then_some(()))
        },
    )
    .await?;
    scenario.create_run("retried", "Fill it.").await?;
    let run = scenario.finished("retried", EVICTION_TIME).await?;
    let report = succeeded_report(&run)?;
    ensure!(
        report.result.as_ref().map(|r| r.text.as_str()) == Some("Done on the second attempt."),
        "{report:?}"
    );
    let attempt = run.status.as_ref().and_then(|s| s.attempt);
    ensure!(attempt == Some(2), "ended on attempt {attempt:?}");
    let pods: Api<Pod> = Api::namespaced(scenario.admin.clone(), &scenario.namespace);
    let first = pods.get_opt("retried-1").await?;
    if let Some(first) = first {
        let reason = first.status.and_then(|s| s.reason);
        ensure!(
            reason.as_deref() == Some("Evicted"),
            "the first attempt's Pod was evicted: {reason:?}"
        );
    }
    Ok(())
}
