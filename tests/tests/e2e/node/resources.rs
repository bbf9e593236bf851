//! The sandbox container's memory limit holds: the Agent's `sandbox.resources` merged over the
//! operator's defaults, and a command that allocates without bound is OOM-killed inside the
//! sandbox (the kernel kills the largest process of the container's memory cgroup: the command,
//! not the sandbox server), the model sees the failed command, the Run goes on and succeeds,
//! and neither container restarts.

use std::time::Duration;

use anyhow::{Context, ensure};
use herd_e2e::TestEnv;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use serde_json::json;

use crate::operator::run_fixtures::succeeded_report;
use crate::scenarios::cluster::Scenario;
use crate::scenarios::script::{script_config_map, scripted_agent};

const RUN_TIME: Duration = Duration::from_secs(120);

/// The lead runs a command that wants 2 GiB, then says what it saw.
const SCRIPT: &str = r#"
rules:
  - match: {purpose: title}
    respond: {content: "Memory"}
  - match: {role: lead, call: 1}
    respond:
      toolCalls:
        - name: bash
          arguments:
            description: "Allocate"
            command: "python3 -c 'b = bytearray(2 * 1024 ** 3); print(len(b))'; echo exit=$?"
  - match: {role: lead, call: 2, lastMessage: {role: tool, contains: "exit=137"}}
    respond: {content: "The command was killed for memory."}
  - match: {role: lead, call: 2}
    respond: {content: "The command was not killed."}
"#;

pub async fn a_command_out_of_memory_is_killed_inside_the_sandbox(
    env: TestEnv,
) -> anyhow::Result<()> {
    let spec = json!({"sandbox": {"resources": {"limits": {"memory": "300Mi"}}}});
    let mut scenario = Scenario::start(&env, scripted_agent(spec)).await?;
    script_config_map(&scenario.admin, &scenario.namespace, SCRIPT).await?;
    scenario.create_run("hungry", "Allocate.").await?;
    let run = scenario.finished("hungry", RUN_TIME).await?;
    let report = succeeded_report(&run)?;
    let answer = report.result.as_ref().map(|r| r.text.as_str());
    ensure!(
        answer == Some("The command was killed for memory."),
        "the model saw the command killed (exit 137) and went on: {answer:?}"
    );

    let pods: Api<Pod> = Api::namespaced(scenario.admin.clone(), &scenario.namespace);
    let pod = pods.get(&Scenario::pod_name(&run)).await?;
    let spec = pod.spec.as_ref().context("the Pod's spec")?;
    let sandbox = spec
        .init_containers
        .iter()
        .flatten()
        .find(|c| c.name == "sandbox")
        .context("the sandbox container")?;
    let resources = sandbox.resources.clone().unwrap_or_default();
    let limit = resources.limits.unwrap_or_default();
    let requests = resources.requests.unwrap_or_default();
    ensure!(
        limit.get("memory").map(|q| q.0.as_str()) == Some("300Mi"),
        "the Agent's limit: {limit:?}"
    );
    ensure!(
        requests.contains_key("cpu"),
        "the operator's default request beside it: {requests:?}"
    );
    let status = pod.status.unwrap_or_default();
    let restarts: Vec<(String, i32)> = herd_e2e::node::container_statuses(&status)
        .map(|c| (c.name.clone(), c.restart_count))
        .collect();
    ensure!(
        restarts.iter().all(|(_, count)| *count == 0),
        "no container restarted: the kill stayed inside the command: {restarts:?}"
    );
    Ok(())
}
