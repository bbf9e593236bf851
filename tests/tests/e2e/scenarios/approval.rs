//! Tool approval in a cluster: an Agent requires approval for `bash`; the runner holds the
//! model's command, the Run reports the request (`status.report.approvals`, `InputRequired`
//! with reason `WaitingForApproval`); a denial appended to `spec.responses` reaches the waiting
//! runner and the model reads it and tries something else; an approval runs the next command
//! as the model sent it. Each decision gets an Event naming the field manager that wrote it.

use std::time::Duration;

use anyhow::{Context, ensure};
use herd_crds::approval::ApprovalRequest;
use herd_crds::condition::{ConditionStatus, find_condition};
use herd_crds::run::Run;
use herd_e2e::TestEnv;
use herd_e2e::requests::json_patch;
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

use super::cluster::Scenario;
use super::script::{script_config_map, scripted_agent};
use crate::operator::run_fixtures::succeeded_report;

/// From the Run's creation (or a decision) to the next request: a Pod start, a model call.
const ASK_TIME: Duration = Duration::from_secs(90);
/// From the last decision to the Run's end.
const END_TIME: Duration = Duration::from_secs(120);
/// What the approved command prints; the model's answer quotes it.
pub(crate) const RAN: &str = "approved-command-ran";

/// The lead first wants to remove `build/`; denied (its tool result containing `denial`), it
/// asks to print a line instead, and once that ran it answers `Done: <RAN>.`. Matched on the
/// last tool result, so each step follows the one before.
pub(crate) fn cleanup_script(denial: &str) -> String {
    json!({"rules": [
        {"match": {"purpose": "title"}, "respond": {"content": "Cleanup"}},
        {"match": {"role": "lead", "lastMessage": {"role": "tool", "contains": RAN}},
         "respond": {"content": format!("Done: {RAN}.")}},
        {"match": {"role": "lead", "lastMessage": {"role": "tool", "contains": denial}},
         "respond": {"toolCalls": [{"name": "bash", "arguments": {"command": format!("echo {RAN}"),
             "description": "Print a line"}}]}},
        {"match": {"role": "lead"},
         "respond": {"toolCalls": [{"name": "bash", "arguments": {"command": "rm -rf build/",
             "description": "Remove the build folder"}}]}},
    ]})
    .to_string()
}

/// The Run's open approval requests.
fn requests(run: &Run) -> Vec<ApprovalRequest> {
    run.status
        .as_ref()
        .and_then(|s| s.report.as_ref())
        .map(|r| r.approvals.clone())
        .unwrap_or_default()
}

/// Whether the controller shows the Run waiting for approval (`InputRequired`).
fn waits_for_approval(run: &Run) -> bool {
    run.status
        .as_ref()
        .and_then(|s| find_condition(&s.conditions, "InputRequired"))
        .is_some_and(|c| c.status == ConditionStatus::True && c.reason == "WaitingForApproval")
}

/// Waits until the Run holds a call whose command contains `command`; the Run and its request.
async fn held(
    scenario: &mut Scenario,
    name: &str,
    command: &str,
) -> anyhow::Result<(Run, ApprovalRequest)> {
    let what = format!("hold `{command}` for approval");
    let run = scenario
        .until(name, &what, ASK_TIME, |run| {
            requests(run).iter().any(|r| r.arguments.contains(command)) && waits_for_approval(run)
        })
        .await?;
    let request = requests(&run)
        .into_iter()
        .find(|r| r.arguments.contains(command))
        .context("the request")?;
    Ok((run, request))
}

/// Appends `decision` on the request `id` to `spec.responses`, as `kubectl patch --type json`.
async fn decide(scenario: &Scenario, name: &str, decision: Value) -> anyhow::Result<()> {
    let patch = json!([{"op": "add", "path": "/spec/responses/-", "value": decision}]);
    if let Err(message) =
        json_patch(&scenario.admin, &scenario.namespace, "Run", name, &patch).await?
    {
        anyhow::bail!("the decision was refused: {message}");
    }
    Ok(())
}

/// The field manager the Run's `managedFields` name for the response `id`.
async fn writer_of(scenario: &Scenario, name: &str, id: &str) -> anyhow::Result<String> {
    let run = scenario.runs().get(name).await?;
    let key = format!("k:{}", json!({ "id": id }));
    run.managed_fields()
        .iter()
        .find(|entry| {
            entry
                .fields_v1
                .as_ref()
                .and_then(|f| f.0.get("f:spec"))
                .and_then(|spec| spec.get("f:responses"))
                .and_then(|responses| responses.get(&key))
                .is_some()
        })
        .and_then(|entry| entry.manager.clone())
        .context("no field manager owns the response")
}

/// Waits for the Event `reason` about the Run `name` whose note contains `text`.
async fn event(
    scenario: &Scenario,
    name: &str,
    reason: &str,
    text: &str,
) -> anyhow::Result<String> {
    let events: Api<Event> = Api::namespaced(scenario.admin.clone(), &scenario.namespace);
    let started = tokio::time::Instant::now();
    loop {
        let list = events
            .list(&ListParams::default().fields(&format!("regarding.name={name}")))
            .await?;
        if let Some(note) = list
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .filter_map(|e| e.note)
            .find(|note| note.contains(text))
        {
            return Ok(note);
        }
        ensure!(
            started.elapsed() < Duration::from_secs(30),
            "no {reason} Event about Run {name} says {text:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Denied once (the model reads why and tries something else), approved once (the command
/// runs): the Run succeeds with what the approved command printed.
pub async fn a_denied_call_is_told_and_an_approved_one_runs(env: TestEnv) -> anyhow::Result<()> {
    let agent = scripted_agent(json!({"approval": {"tools": ["bash"]}}));
    let mut scenario = Scenario::start(&env, agent).await?;
    script_config_map(
        &scenario.admin,
        &scenario.namespace,
        &cleanup_script("denied by a person: keep the build"),
    )
    .await?;
    scenario
        .create_run_with("clean", json!({"task": "Clean up the build."}))
        .await?;

    let (waiting, first) = held(&mut scenario, "clean", "rm -rf build/").await?;
    ensure!(first.tool == "bash", "{first:?}");
    ensure!(
        !first.call_id.is_empty() && first.asked_at.is_some(),
        "{first:?}"
    );
    let status = waiting.status.as_ref().context("no status")?;
    let input = find_condition(&status.conditions, "InputRequired").context("InputRequired")?;
    ensure!(
        input.status == ConditionStatus::True && input.reason == "WaitingForApproval",
        "{input:?}"
    );
    ensure!(
        input.message.contains("bash: rm -rf build/"),
        "{}",
        input.message
    );
    decide(
        &scenario,
        "clean",
        json!({"id": first.id, "decision": "deny", "reason": "keep the build"}),
    )
    .await?;
    let denier = writer_of(&scenario, "clean", &first.id).await?;
    let note = event(&scenario, "clean", "ToolCallDenied", &first.id).await?;
    ensure!(
        note.contains(&format!("denied by {denier}: keep the build")),
        "{note}"
    );

    let (_, second) = held(&mut scenario, "clean", RAN).await?;
    decide(
        &scenario,
        "clean",
        json!({"id": second.id, "decision": "approve"}),
    )
    .await?;
    let run = scenario.finished("clean", END_TIME).await?;
    let report = succeeded_report(&run)?;
    let text = report.result.as_ref().map(|r| r.text.as_str());
    ensure!(
        text == Some(&format!("Done: {RAN}.")[..]),
        "the answer: {text:?}"
    );
    let approver = writer_of(&scenario, "clean", &second.id).await?;
    event(
        &scenario,
        "clean",
        "ToolCallApproved",
        &format!("{} (bash: echo {RAN}) approved by {approver}", second.id),
    )
    .await?;
    Ok(())
}
