//! `kubectl herd logs` against real container logs (the real node only: `local-kubelet` serves
//! none): `-f` on a Run waiting for its answer follows the `agent` container through the answer
//! to its exit; afterwards the whole log is there without `-f`, and `-c sandbox` reads the other
//! container.

use std::time::Duration;

use anyhow::ensure;
use herd_crds::run::RunPhase;
use herd_e2e::TestEnv;
use serde_json::json;

use super::kubectl_herd;
use super::script::{COLOUR, asking};
use crate::scenarios::cluster::Scenario;
use crate::scenarios::script::{script_config_map, scripted_agent};

/// What the `bash` call after the answer prints: the agent's log shows the call's result.
const MARKER: &str = "painted-after-the-answer";

/// How long the Run may take to ask, and then to end after its answer.
const RUN_TIME: Duration = Duration::from_secs(90);

/// Ask, then run a command naming the colour given, then answer.
fn script() -> String {
    let [title, question] = asking();
    json!({"rules": [
        title,
        question,
        {"match": {"role": "lead", "call": 2, "anyMessage": {"role": "user", "contains": COLOUR}},
            "respond": {"toolCalls": [{"name": "bash", "arguments": {
                "description": "Paint", "command": format!("echo {MARKER}")}}]}},
        {"match": {"role": "lead", "call": 3}, "respond": {"content": "Painted."}},
    ]})
    .to_string()
}

pub async fn logs_follow_the_agent_through_its_answer(env: TestEnv) -> anyhow::Result<()> {
    let mut scenario = Scenario::start(&env, scripted_agent(json!({}))).await?;
    script_config_map(&scenario.admin, &scenario.namespace, &script()).await?;
    scenario.create_run("paint", "Paint the fence.").await?;
    scenario
        .until("paint", "ask", RUN_TIME, |run| {
            run.status.as_ref().and_then(|s| s.phase) == Some(RunPhase::InputRequired)
        })
        .await?;

    let follow_env = env.clone();
    let follow =
        tokio::spawn(async move { kubectl_herd(&follow_env, &["logs", "paint", "-f"]).await });
    // The follow is reading before the answer arrives.
    tokio::time::sleep(Duration::from_secs(2)).await;
    if follow.is_finished() {
        anyhow::bail!("logs -f ended while the Run waited: {:?}", follow.await?);
    }
    kubectl_herd(&env, &["answer", "paint", COLOUR])
        .await?
        .expect_code(0)?;
    let followed = follow.await??.expect_code(0)?;
    ensure!(
        followed.stdout.contains("ask_clarification") && followed.stdout.contains(MARKER),
        "logs -f shows the question's call and, after the answer, the command's output: {:?}",
        followed.stdout
    );
    scenario.finished("paint", RUN_TIME).await?;

    let whole = kubectl_herd(&env, &["logs", "paint"])
        .await?
        .expect_code(0)?;
    ensure!(
        whole.stdout.contains("ask_clarification") && whole.stdout.contains(MARKER),
        "logs after the end: {:?}",
        whole.stdout
    );
    let sandbox = kubectl_herd(&env, &["logs", "paint", "-c", "sandbox"])
        .await?
        .expect_code(0)?;
    ensure!(
        !sandbox.stdout.contains("ask_clarification"),
        "-c sandbox reads the sandbox container, not the agent's: {:?}",
        sandbox.stdout
    );
    Ok(())
}
