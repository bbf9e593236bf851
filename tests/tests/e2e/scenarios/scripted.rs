//! Scenarios with the `scripted` model: no model server, the script travelling from the Agent's
//! ConfigMap through the snapshot and the run API's `config` to the runner in the Pod.

use std::time::Duration;

use anyhow::{Context, ensure};
use herd_crds::condition::ConditionStatus;
use herd_crds::report::StopReason;
use herd_e2e::TestEnv;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::json;

use super::cluster::Scenario;
use super::leaks::{MODEL_SECRET, assert_secrets_nowhere};
use super::script::{script_config_map, scripted_agent};
use crate::operator::run_fixtures::{message, succeeded_report};

/// How long a scripted Run may take from creation to its end: the Pod's two containers start,
/// the sandbox's probe passes, and the runner makes a few calls.
const RUN_TIME: Duration = Duration::from_secs(90);

/// The lead writes a file, presents it and answers; the title comes from its own call.
const SCRIPT: &str = r##"
rules:
  - match: {purpose: title}
    respond: {content: "A greeting"}
  - match: {role: lead, call: 1}
    respond:
      toolCalls:
        - name: write_file
          arguments: {description: "Write the greeting", path: /mnt/user-data/outputs/hello.md, content: "# Hello\n"}
  - match: {role: lead, call: 2}
    respond:
      toolCalls:
        - name: present_files
          arguments: {filepaths: [/mnt/user-data/outputs/hello.md]}
  - match: {role: lead, call: 3}
    respond: {content: "Hello from the pod.", usage: {inputTokens: 300, outputTokens: 6}}
"##;

/// A Run of the scripted Agent succeeds: the answer, title and usage in status, `answer.md`
/// and the presented file in the result ConfigMap; the model key is nowhere but the Secret.
pub async fn a_scripted_run_succeeds_and_keeps_its_key_secret(env: TestEnv) -> anyhow::Result<()> {
    let mut scenario = Scenario::start(&env, scripted_agent(json!({}))).await?;
    script_config_map(&scenario.admin, &scenario.namespace, SCRIPT).await?;
    scenario.create_run("hello", "Say hello.").await?;
    let run = scenario.finished("hello", RUN_TIME).await?;
    let report = succeeded_report(&run)?;
    ensure!(
        report.result.as_ref().map(|r| r.text.as_str()) == Some("Hello from the pod."),
        "{report:?}"
    );
    ensure!(report.title.as_deref() == Some("A greeting"), "{report:?}");
    let artifacts = report.result.as_ref().map(|r| r.artifacts.len());
    ensure!(
        artifacts == Some(1),
        "the presented file in status: {report:?}"
    );
    ensure!(
        report.stop_reason == Some(StopReason::Completed),
        "{report:?}"
    );
    ensure!(
        report.usage.model_calls >= 3 && report.usage.output_tokens >= 6,
        "the usage of the three lead calls and the title: {:?}",
        report.usage
    );

    let results: Api<ConfigMap> = Api::namespaced(scenario.admin.clone(), &scenario.namespace);
    let result = results.get("hello-result").await?;
    let data = result.data.unwrap_or_default();
    ensure!(
        data.get("answer.md").map(String::as_str) == Some("Hello from the pod."),
        "{data:?}"
    );
    let files = data.get("files.json").context("no files.json")?;
    ensure!(files.contains("hello.md"), "the presented file: {files}");
    ensure!(
        result
            .binary_data
            .unwrap_or_default()
            .values()
            .any(|b| b.0 == b"# Hello\n"),
        "the presented file's bytes"
    );
    assert_secrets_nowhere(&scenario, &run, &[MODEL_SECRET]).await?;
    Ok(())
}

/// A runner that cannot start (its script is not YAML) exits non-zero with a termination
/// message, and the Run fails with that message.
pub async fn a_crashing_runner_fails_the_run_with_its_message(env: TestEnv) -> anyhow::Result<()> {
    let mut scenario = Scenario::start(&env, scripted_agent(json!({}))).await?;
    script_config_map(&scenario.admin, &scenario.namespace, "rules: [unclosed").await?;
    scenario.create_run("broken", "Say hello.").await?;
    let run = scenario.finished("broken", RUN_TIME).await?;
    let said = message(&run);
    ensure!(
        run.status.as_ref().is_some_and(|s| {
            herd_crds::condition::find_condition(&s.conditions, "Succeeded")
                .is_some_and(|c| c.status == ConditionStatus::False)
        }),
        "the Run failed: {said}"
    );
    ensure!(
        said.contains("script"),
        "the runner's termination message reaches the Run: {said}"
    );
    Ok(())
}
