//! Questions in a cluster: the runner reports the question with a checkpoint and waits in its
//! Pod; the Run shows `InputRequired`; an answer appended to `spec.responses` (as `kubectl patch
//! --type json` does) reaches the waiting runner. If the Pod is lost meanwhile, the next
//! attempt resumes from the checkpoint.

use std::time::Duration;

use anyhow::{Context, ensure};
use herd_crds::condition::ConditionStatus;
use herd_crds::run::{Run, RunPhase};
use herd_e2e::TestEnv;
use herd_e2e::requests::json_patch;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};
use serde_json::{Value, json};

use super::cluster::Scenario;
use super::script::{script_config_map, scripted_agent};
use crate::operator::run_fixtures::succeeded_report;

/// From the Run's creation to its question: a Pod start and a model call or two.
const ASK_TIME: Duration = Duration::from_secs(90);
/// From the answer (or a lost Pod) to the Run's end.
const ANSWER_TIME: Duration = Duration::from_secs(120);

/// The colour the user answers; the lead's last answer repeats it.
const ANSWER: &str = "teal";

/// The lead asks which colour, then answers with the one it was told. With `todos` (plan
/// mode), it writes them first and closes them before it answers.
fn ask_script(todos: bool) -> String {
    let mut rules =
        vec![json!({"match": {"purpose": "title"}, "respond": {"content": "A colour"}})];
    let mut call = 0;
    if todos {
        call += 1;
        rules.push(
            json!({"match": {"role": "lead", "call": call}, "respond": {"toolCalls": [
            {"name": "write_todos", "arguments": {"todos": [
                {"content": "Ask for the colour", "status": "in_progress"},
                {"content": "Paint", "status": "pending"}]}}]}}),
        );
    }
    call += 1;
    rules.push(
        json!({"match": {"role": "lead", "call": call}, "respond": {"toolCalls": [
        {"name": "ask_clarification", "arguments": {"question": "Which colour?",
            "clarification_type": "missing_info", "options": ["teal", "red"]}}]}}),
    );
    if todos {
        // Plan mode holds back an answer while todos are open: they are closed first.
        call += 1;
        rules.push(json!({"match": {"role": "lead", "call": call,
            "anyMessage": {"role": "user", "contains": ANSWER}},
            "respond": {"toolCalls": [{"name": "write_todos", "arguments": {"todos": [
                {"content": "Ask for the colour", "status": "completed"},
                {"content": "Paint", "status": "completed"}]}}]}}));
    }
    // The answer comes as a user message: the question's tool result lists every option, so
    // matching the tool's text would pass with any answer.
    rules.push(json!({"match": {"role": "lead", "call": call + 1,
        "anyMessage": {"role": "user", "contains": ANSWER}},
        "respond": {"content": format!("Painting it {ANSWER}.")}}));
    json!({ "rules": rules }).to_string()
}

/// Starts the scenario, creates the Run `name` and waits until it asks; the Run as it waits.
async fn asked(scenario: &mut Scenario, name: &str, run: Value) -> anyhow::Result<Run> {
    scenario.create_run_with(name, run).await?;
    scenario
        .until(name, "ask its question", ASK_TIME, |run| {
            phase(run) == Some(RunPhase::InputRequired)
        })
        .await
}

fn phase(run: &Run) -> Option<RunPhase> {
    run.status.as_ref().and_then(|s| s.phase)
}

/// Answers the Run's open question with a JSON patch adding to `/spec/responses/-`.
async fn answer(scenario: &Scenario, run: &Run) -> anyhow::Result<()> {
    let question = run
        .status
        .as_ref()
        .and_then(|s| s.report.as_ref())
        .and_then(|r| r.clarification.as_ref())
        .context("the waiting Run shows no question")?;
    ensure!(question.question == "Which colour?", "{question:?}");
    let patch = json!([
        {"op": "add", "path": "/spec/responses/-", "value": {"id": question.id, "answer": ANSWER}}
    ]);
    let name = kube::ResourceExt::name_any(run);
    if let Err(message) =
        json_patch(&scenario.admin, &scenario.namespace, "Run", &name, &patch).await?
    {
        anyhow::bail!("the answer was refused: {message}");
    }
    Ok(())
}

/// Waits for the Run to end and checks it succeeded with the answer, on `attempt`.
async fn painted(scenario: &mut Scenario, name: &str, attempt: u32) -> anyhow::Result<Run> {
    let run = scenario.finished(name, ANSWER_TIME).await?;
    let report = succeeded_report(&run)?;
    let text = report.result.as_ref().map(|r| r.text.as_str());
    ensure!(text == Some("Painting it teal."), "the answer: {text:?}");
    let status = run.status.as_ref().context("no status")?;
    ensure!(
        status.attempt == Some(attempt),
        "ended on attempt {:?}, not {attempt}",
        status.attempt
    );
    Ok(run)
}

/// The Run waits with `InputRequired` and its question; the answer resumes the same Pod.
pub async fn an_answer_resumes_the_waiting_pod(env: TestEnv) -> anyhow::Result<()> {
    let mut scenario = Scenario::start(&env, scripted_agent(json!({}))).await?;
    script_config_map(&scenario.admin, &scenario.namespace, &ask_script(false)).await?;
    let waiting = asked(&mut scenario, "paint", json!({"task": "Paint the fence."})).await?;
    let condition = waiting.status.as_ref().and_then(|s| {
        herd_crds::condition::find_condition(&s.conditions, "InputRequired").cloned()
    });
    ensure!(
        condition.as_ref().map(|c| c.status) == Some(ConditionStatus::True),
        "InputRequired: {condition:?}"
    );
    answer(&scenario, &waiting).await?;
    painted(&mut scenario, "paint", 1).await?;
    Ok(())
}

/// With a retry left, the Pod deleted while it waits: the second attempt resumes from the
/// checkpoint (told that its workspace is gone) and the answer finishes it.
pub async fn a_lost_pod_resumes_from_the_checkpoint(env: TestEnv) -> anyhow::Result<()> {
    let agent = scripted_agent(json!({"runDefaults": {"retries": 1}}));
    let mut scenario = Scenario::start(&env, agent).await?;
    script_config_map(&scenario.admin, &scenario.namespace, &ask_script(false)).await?;
    let waiting = asked(&mut scenario, "paint", json!({"task": "Paint the fence."})).await?;
    let pods: Api<Pod> = Api::namespaced(scenario.admin.clone(), &scenario.namespace);
    pods.delete(&Scenario::pod_name(&waiting), &DeleteParams::default())
        .await?;
    let again = scenario
        .until("paint", "ask again on attempt 2", ANSWER_TIME, |run| {
            run.status.as_ref().and_then(|s| s.attempt) == Some(2)
                && phase(run) == Some(RunPhase::InputRequired)
        })
        .await?;
    answer(&scenario, &again).await?;
    painted(&mut scenario, "paint", 2).await?;
    Ok(())
}

/// Plan mode: the todos written before the question are in `status.report.todos` while the
/// Run waits; the answer lets it finish.
pub async fn plan_mode_todos_show_while_the_run_waits(env: TestEnv) -> anyhow::Result<()> {
    let mut scenario = Scenario::start(&env, scripted_agent(json!({}))).await?;
    script_config_map(&scenario.admin, &scenario.namespace, &ask_script(true)).await?;
    let waiting = asked(
        &mut scenario,
        "plan",
        json!({"task": "Paint the fence.", "planMode": true}),
    )
    .await?;
    let todos: Vec<String> = waiting
        .status
        .as_ref()
        .and_then(|s| s.report.as_ref())
        .map(|r| r.todos.iter().map(|t| t.content.clone()).collect())
        .unwrap_or_default();
    ensure!(
        todos == ["Ask for the colour", "Paint"],
        "the todos while waiting: {todos:?}"
    );
    answer(&scenario, &waiting).await?;
    painted(&mut scenario, "plan", 1).await?;
    Ok(())
}
