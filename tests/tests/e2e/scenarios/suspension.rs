//! Suspension: a question that waits longer than the Agent's `suspendAfter` ends its Pod (the
//! checkpoint posted with the `emptyDir` workspace's files); the Run shows `Suspended` with no
//! running Pod and holds no slot; the answer starts a new attempt that resumes from the checkpoint,
//! its files written back, and ends as the same Run without suspension would. The wait does not
//! count against `timeout`: the Run waits past its whole timeout and still finishes.

use std::time::Duration;

use anyhow::{Context, ensure};
use herd_crds::condition::{ConditionStatus, find_condition};
use herd_crds::run::{Run, RunPhase};
use herd_e2e::TestEnv;
use herd_e2e::requests::json_patch;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use serde_json::json;

use super::cluster::Scenario;
use super::script::{script_config_map, scripted_agent};
use crate::operator::run_fixtures::{message, succeeded_report};

/// From the Run's creation to its suspension: a Pod start, two model calls, `suspendAfter`.
const SUSPEND_TIME: Duration = Duration::from_secs(120);
/// From the answer to the Run's end: a new Pod, two model calls.
const RESUME_TIME: Duration = Duration::from_secs(120);
/// The Run's `timeout`: less than the time it waits, more than the time it works.
const TIMEOUT_SECONDS: u64 = 45;

/// What the lead wrote before it asked, and reads after the answer.
const NOTE: &str = "north side, two coats";
/// The lead's answer when its note is back: the same as without suspension.
const PAINTED: &str = "Painting it teal.";

/// The lead writes a note into its workspace, asks which colour, then reads the note back and
/// answers; a missing note gives another answer.
fn script() -> String {
    json!({"rules": [
        {"match": {"purpose": "title"}, "respond": {"content": "A colour"}},
        {"match": {"role": "lead", "call": 1}, "respond": {"toolCalls": [{"name": "write_file",
            "arguments": {"description": "Note the plan",
                "path": "/mnt/user-data/workspace/notes.md", "content": NOTE}}]}},
        {"match": {"role": "lead", "call": 2}, "respond": {"toolCalls": [
            {"name": "ask_clarification", "arguments": {"question": "Which colour?",
                "clarification_type": "missing_info", "options": ["teal", "red"]}}]}},
        {"match": {"role": "lead", "call": 3, "anyMessage": {"role": "user", "contains": "teal"}},
            "respond": {"toolCalls": [{"name": "read_file", "arguments": {
                "description": "Read the plan", "path": "/mnt/user-data/workspace/notes.md"}}]}},
        {"match": {"role": "lead", "call": 4, "lastMessage": {"role": "tool", "contains": NOTE}},
            "respond": {"content": PAINTED}},
        {"match": {"role": "lead", "call": 4}, "respond": {"content": "The notes are gone."}},
    ]})
    .to_string()
}

fn phase(run: &Run) -> Option<RunPhase> {
    run.status.as_ref().and_then(|s| s.phase)
}

/// The Pods of the Run `name` that still run.
async fn pods_of(scenario: &Scenario, name: &str) -> anyhow::Result<Vec<String>> {
    let pods: Api<Pod> = Api::namespaced(scenario.admin.clone(), &scenario.namespace);
    let listed = pods
        .list(&ListParams::default().labels(&format!("herd.dev/run={name}")))
        .await?;
    Ok(listed
        .items
        .into_iter()
        .filter(|pod| {
            let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
            !matches!(phase, Some("Succeeded" | "Failed"))
        })
        .filter_map(|pod| pod.metadata.name)
        .collect())
}

/// A Run that waits past `suspendAfter` gives back its Pod, shows `Suspended`, and an answer
/// given after its whole `timeout` has passed resumes it in attempt 2 with its workspace's
/// files: it ends with the answer it gives without suspension.
pub async fn a_suspended_run_resumes_with_its_files_and_its_working_time(
    env: TestEnv,
) -> anyhow::Result<()> {
    let agent = scripted_agent(json!({"runDefaults": {
        "suspendAfter": "2s", "timeout": format!("{TIMEOUT_SECONDS}s")}}));
    let mut scenario = Scenario::start(&env, agent).await?;
    script_config_map(&scenario.admin, &scenario.namespace, &script()).await?;
    scenario
        .create_run_with("paint", json!({"task": "Paint the fence."}))
        .await?;
    let suspended = scenario
        .until("paint", "suspend", SUSPEND_TIME, |run| {
            phase(run) == Some(RunPhase::Suspended)
        })
        .await?;
    let status = suspended.status.as_ref().context("no status")?;
    let input = find_condition(&status.conditions, "InputRequired");
    ensure!(
        input.map(|c| c.status) == Some(ConditionStatus::True),
        "InputRequired while suspended: {input:?}"
    );
    ensure!(status.pod_name.is_none(), "{:?}", status.pod_name);
    ensure!(
        status.waiting_since.is_some(),
        "no waitingSince: {status:?}"
    );
    let question = status
        .report
        .as_ref()
        .and_then(|r| r.clarification.clone())
        .context("the suspended Run shows no question")?;
    herd_e2e::wait::wait_for("the suspended Run's Pod to end", RESUME_TIME, || async {
        Ok(pods_of(&scenario, "paint").await?.is_empty().then_some(()))
    })
    .await?;

    // Wait past the whole timeout before answering, counted from the question (later than
    // startTime by the Pod's start and two model calls, seconds on a busy node): the wait alone
    // outlasts the timeout, and so does the time since startTime.
    let asked = status.waiting_since.clone().context("no waitingSince")?;
    let past = Duration::from_secs(TIMEOUT_SECONDS + 5);
    loop {
        let waited = jiff::Timestamp::now().duration_since(asked.0);
        if Duration::try_from(waited).is_ok_and(|w| w >= past) {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let still = scenario.runs().get("paint").await?;
    ensure!(
        phase(&still) == Some(RunPhase::Suspended),
        "after its timeout the Run waits on: {}",
        message(&still)
    );

    let patch = json!([{"op": "add", "path": "/spec/responses/-",
        "value": {"id": question.id, "answer": "teal"}}]);
    if let Err(refused) =
        json_patch(&scenario.admin, &scenario.namespace, "Run", "paint", &patch).await?
    {
        anyhow::bail!("the answer was refused: {refused}");
    }
    let run = scenario.finished("paint", RESUME_TIME).await?;
    let report = succeeded_report(&run)?;
    let text = report.result.as_ref().map(|r| r.text.as_str());
    ensure!(text == Some(PAINTED), "the answer: {text:?}");
    let status = run.status.as_ref().context("no status")?;
    ensure!(
        (status.attempt, status.resumptions) == (Some(2), Some(1)),
        "attempt {:?}, resumptions {:?}",
        status.attempt,
        status.resumptions
    );
    let waited = status.waited_seconds.unwrap_or(0);
    ensure!(
        waited >= TIMEOUT_SECONDS,
        "the wait ({waited} s) is in waitedSeconds"
    );
    ensure!(status.waiting_since.is_none(), "{:?}", status.waiting_since);
    Ok(())
}
