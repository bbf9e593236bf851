//! Runs, Agents and Skills as the tests without an operator need them: created as a user
//! creates them, their status written as the operator would write it.

use anyhow::Context;
use herd_crds::agent::Agent;
use herd_crds::run::Run;
use herd_crds::skill::Skill;
use herd_e2e::TestEnv;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// A timestamp in the past the fixtures' times are written at.
pub const LONG_AGO: &str = "2026-01-01T00:00:00Z";

/// The test namespace's Runs.
pub fn runs(env: &TestEnv) -> Api<Run> {
    Api::namespaced(env.client(), env.namespace())
}

/// Creates the Run `name` of `agent`, a child of `parent` when given, with `labels`.
pub async fn create_run(
    env: &TestEnv,
    name: &str,
    agent: &str,
    parent: Option<&Run>,
    labels: Value,
) -> anyhow::Result<Run> {
    let mut run = json!({
        "apiVersion": "herd.dev/v1alpha1", "kind": "Run",
        "metadata": {"name": name, "labels": labels},
        "spec": {"agentRef": {"name": agent}, "task": format!("Task of {name}.")},
    });
    if let Some(parent) = parent {
        run["spec"]["parentRef"] = json!({"name": parent.name_any(), "toolCallId": "call-1"});
        run["spec"]["subagentType"] = json!("general-purpose");
        run["metadata"]["ownerReferences"] = json!([{
            "apiVersion": "herd.dev/v1alpha1", "kind": "Run", "name": parent.name_any(),
            "uid": parent.uid().context("the parent has a uid")?, "controller": true,
            "blockOwnerDeletion": true}]);
    }
    let run: Run = serde_json::from_value(run)?;
    Ok(runs(env).create(&PostParams::default(), &run).await?)
}

/// Writes the Run's status: the `Succeeded` condition as `status`/`reason`, with `extra`
/// (report, podName...) merged in.
pub async fn set_run_status(
    env: &TestEnv,
    name: &str,
    status: &str,
    reason: &str,
    extra: Value,
) -> anyhow::Result<Run> {
    let mut body = json!({
        "conditions": [{"type": "Succeeded", "status": status, "reason": reason,
            "message": format!("{name} is {reason}"), "lastTransitionTime": LONG_AGO}],
    });
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    Ok(runs(env)
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": body})),
        )
        .await?)
}

/// Creates the Agent `name` (the operator's default model) with `skills`.
pub async fn create_agent(env: &TestEnv, name: &str, skills: &[&str]) -> anyhow::Result<Agent> {
    let agents: Api<Agent> = Api::namespaced(env.client(), env.namespace());
    let agent: Agent = serde_json::from_value(json!({
        "apiVersion": "herd.dev/v1alpha1", "kind": "Agent",
        "metadata": {"name": name}, "spec": {"skills": skills},
    }))?;
    Ok(agents.create(&PostParams::default(), &agent).await?)
}

/// Writes the Agent's `Ready` condition (and `ResolvedRefs`, with the same reason and message).
pub async fn set_agent_ready(
    env: &TestEnv,
    name: &str,
    ready: bool,
    reason: &str,
    message: &str,
) -> anyhow::Result<()> {
    let agents: Api<Agent> = Api::namespaced(env.client(), env.namespace());
    let status = if ready { "True" } else { "False" };
    let condition = |kind: &str| {
        json!({"type": kind, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": LONG_AGO})
    };
    let body = json!({"status": {"conditions": [condition("Ready"), condition("ResolvedRefs")]}});
    agents
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&body))
        .await?;
    Ok(())
}

/// Creates the Skill `name`, described as `description`, ready.
pub async fn create_skill(env: &TestEnv, name: &str, description: &str) -> anyhow::Result<()> {
    let skills: Api<Skill> = Api::namespaced(env.client(), env.namespace());
    let skill: Skill = serde_json::from_value(json!({
        "apiVersion": "herd.dev/v1alpha1", "kind": "Skill", "metadata": {"name": name},
        "spec": {"content": format!("---\nname: {name}\ndescription: {description}\n---\nDo it.")},
    }))?;
    skills.create(&PostParams::default(), &skill).await?;
    let body = json!({"status": {"description": description, "conditions": [{"type": "Ready",
        "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": LONG_AGO}]}});
    skills
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&body))
        .await?;
    Ok(())
}
