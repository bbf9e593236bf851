//! Subagents in a cluster: each `task` call of the lead becomes a child Run with a Pod of its
//! own, admitted under the Agent's caps; the files a child writes come back into the parent's
//! `outputs/<child>/`.

use std::time::Duration;

use anyhow::ensure;
use herd_crds::condition::ConditionStatus;
use herd_crds::run::Run;
use herd_e2e::TestEnv;
use herd_e2e::wait::wait_for;
use kube::ResourceExt;
use serde_json::{Value, json};

use super::cluster::Scenario;
use super::script::{script_config_map, scripted_agent};
use crate::operator::run_fixtures::{message, succeeded, succeeded_report};

/// The notes the children write, two per answer of the lead.
const NOTES: [&str; 6] = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"];

/// The parent's answer once every note is in its outputs.
const ALL_ARRIVED: &str = "All six notes arrived.";

/// From the parent's creation to its first child: a Pod start and a model call.
const CHILD_TIME: Duration = Duration::from_secs(90);

/// Six children in three rounds of two, each a Pod start and two model calls.
const FAN_OUT_TIME: Duration = Duration::from_secs(240);

/// The lead starts two children per answer over three answers, then reads what came back;
/// each child writes its note into its own `outputs/` and answers. (JSON is YAML.)
fn fan_out_script() -> String {
    let mut rules =
        vec![json!({"match": {"purpose": "title"}, "respond": {"content": "Six notes"}})];
    let mut calls = 0;
    for pair in NOTES.chunks(2) {
        calls += 1;
        let tasks: Vec<Value> = pair
            .iter()
            .map(|note| {
                json!({"name": "task", "arguments": {"description": format!("Note {note}"),
                    "prompt": format!("Write the note {note}."), "subagent_type": "general-purpose"}})
            })
            .collect();
        rules.push(
            json!({"match": {"role": "lead", "call": calls}, "respond": {"toolCalls": tasks}}),
        );
    }
    let gather = "find /mnt/user-data/outputs -mindepth 2 -name 'note-*.md' -exec cat {} + | sort";
    rules.push(
        json!({"match": {"role": "lead", "call": calls + 1}, "respond": {"toolCalls": [
        {"name": "bash", "arguments": {"description": "Gather the notes", "command": gather}}]}}),
    );
    let mut sorted = NOTES.to_vec();
    sorted.sort_unstable();
    let every_note = sorted
        .iter()
        .map(|note| format!("note {note}"))
        .collect::<Vec<_>>()
        .join(".*");
    rules.push(json!({"match": {"role": "lead", "call": calls + 2,
        "lastMessage": {"role": "tool", "regex": format!("(?s){every_note}")}},
        "respond": {"content": ALL_ARRIVED}}));
    rules.push(json!({"match": {"role": "lead", "call": calls + 2},
        "respond": {"content": "Notes are missing."}}));
    for note in NOTES {
        rules.push(json!({"match": {"role": "subagent", "call": 1,
            "lastMessage": {"contains": format!("note {note}.")}},
            "respond": {"toolCalls": [{"name": "write_file", "arguments": {
                "description": "Write the note",
                "path": format!("/mnt/user-data/outputs/note-{note}.md"),
                "content": format!("note {note}\n")}}]}}));
    }
    rules.push(
        json!({"match": {"role": "subagent", "call": 2}, "respond": {"content": "Written."}}),
    );
    json!({ "rules": rules }).to_string()
}

/// Fan-out under `maxTotal: 6`, `maxConcurrent: 2`: all six children finish, their files
/// arrive under the parent's `outputs/<child>/`, and the parent answers.
pub async fn six_children_in_three_rounds_bring_their_files_back(
    env: TestEnv,
) -> anyhow::Result<()> {
    fan_out(env, false).await
}

/// The operator crashes while children are in flight and starts again: nothing is lost and no
/// child is created twice.
pub async fn an_operator_restart_mid_fan_out_loses_nothing(env: TestEnv) -> anyhow::Result<()> {
    fan_out(env, true).await
}

async fn fan_out(env: TestEnv, restart: bool) -> anyhow::Result<()> {
    let agent = scripted_agent(json!({
        "subagents": {"enabled": true, "maxConcurrent": 2, "maxTotal": 6},
    }));
    let mut scenario = Scenario::start(&env, agent).await?;
    script_config_map(&scenario.admin, &scenario.namespace, &fan_out_script()).await?;
    scenario.create_run("notes", "Collect six notes.").await?;
    if restart {
        wait_for("a child in flight", CHILD_TIME, || async {
            Ok(children(&scenario)
                .await?
                .iter()
                .any(|child| !ended(child))
                .then_some(()))
        })
        .await?;
        scenario.restart_operator().await?;
    }
    let run = scenario.finished("notes", FAN_OUT_TIME).await?;
    let report = succeeded_report(&run)?;
    let answer = report.result.as_ref().map(|r| r.text.as_str());
    ensure!(
        answer == Some(ALL_ARRIVED),
        "the parent read every child's file from its outputs: {answer:?}"
    );
    let children = children(&scenario).await?;
    ensure!(children.len() == NOTES.len(), "{} children", children.len());
    for child in &children {
        ensure!(
            succeeded(child, ConditionStatus::True, "Succeeded"),
            "child {} ended otherwise: {}",
            child.name_any(),
            message(child)
        );
    }
    Ok(())
}

/// The parent's children, as the API server has them.
async fn children(scenario: &Scenario) -> anyhow::Result<Vec<Run>> {
    Ok(scenario
        .runs()
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter(|child| child.name_any() != "notes")
        .collect())
}

fn ended(run: &Run) -> bool {
    run.status
        .as_ref()
        .and_then(|s| s.phase)
        .is_some_and(|phase| phase.is_finished())
}

/// A `bash` child tries to ask the user and to fetch the web, neither of which its tools
/// allow; each is an error it sees, and it answers without them.
fn narrowed_script() -> String {
    let mut rules = vec![json!({"match": {"purpose": "title"}, "respond": {"content": "Narrow"}})];
    rules.push(
        json!({"match": {"role": "lead", "call": 1}, "respond": {"toolCalls": [
        {"name": "task", "arguments": {"description": "Try to widen",
            "prompt": "Ask the user, then fetch the web.", "subagent_type": "bash"}}]}}),
    );
    rules.push(json!({"match": {"role": "lead", "call": 2,
        "lastMessage": {"role": "tool", "contains": NARROWED}},
        "respond": {"content": NARROWED}}));
    rules.push(
        json!({"match": {"role": "subagent", "call": 1}, "respond": {"toolCalls": [
        {"name": "ask_clarification", "arguments": {"question": "May I?",
            "clarification_type": "missing_info"}},
        {"name": "web_fetch", "arguments": {"url": "https://example.com/"}}]}}),
    );
    rules.push(json!({"match": {"role": "subagent", "call": 2,
        "anyMessage": {"role": "tool", "contains": "ask_clarification"}},
        "respond": {"content": NARROWED}}));
    json!({ "rules": rules }).to_string()
}

/// What the child answers once its tools were refused, and the parent after it.
const NARROWED: &str = "Neither tool was mine to use.";

/// A child cannot ask the user a question, nor use a tool its subagent type does not have:
/// both are refused, the child answers, and the parent finishes.
pub async fn a_child_cannot_ask_or_widen_its_tools(env: TestEnv) -> anyhow::Result<()> {
    let agent = scripted_agent(json!({
        "subagents": {"enabled": true, "maxConcurrent": 1, "maxTotal": 1},
    }));
    let mut scenario = Scenario::start(&env, agent).await?;
    script_config_map(&scenario.admin, &scenario.namespace, &narrowed_script()).await?;
    scenario
        .create_run("notes", "Try to widen a child.")
        .await?;
    let run = scenario.finished("notes", FAN_OUT_TIME).await?;
    ensure!(
        succeeded(&run, ConditionStatus::True, "Succeeded"),
        "the parent ended otherwise: {}",
        message(&run)
    );
    let children = children(&scenario).await?;
    let [child] = children.as_slice() else {
        anyhow::bail!("{} children", children.len());
    };
    let report = child.status.as_ref().and_then(|s| s.report.as_ref());
    ensure!(
        report.is_some_and(|r| r.clarification.is_none()),
        "the child asked nothing: {report:?}"
    );
    ensure!(
        succeeded(child, ConditionStatus::True, "Succeeded"),
        "the child ended otherwise: {}",
        message(child)
    );
    Ok(())
}
