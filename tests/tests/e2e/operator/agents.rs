//! The Agent and Skill controllers on the real API server, each test with its own operator.

use std::time::Duration;

use anyhow::{Context, ensure};
use herd_crds::agent::Agent;
use herd_crds::condition::{Condition, ConditionStatus, find_condition};
use herd_crds::skill::Skill;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::support::{Operated, has_condition};
use herd_e2e::wait::wait_for;

const WAIT: Duration = Duration::from_secs(60);

pub(super) fn skill_md(name: &str, description: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\n# {name}\n")
}

pub(super) async fn create_skill(
    client: &Client,
    namespace: &str,
    name: &str,
    content: &str,
) -> anyhow::Result<()> {
    let skills: Api<Skill> = Api::namespaced(client.clone(), namespace);
    let skill: Skill = serde_json::from_value(json!({
        "apiVersion": "herd.dev/v1alpha1", "kind": "Skill",
        "metadata": {"name": name},
        "spec": {"content": content, "files": {"scripts/run.py": "print('hi')\n"}},
    }))?;
    skills.create(&PostParams::default(), &skill).await?;
    Ok(())
}

async fn create_agent(agents: &Api<Agent>, name: &str, spec: Value) -> anyhow::Result<()> {
    let agent: Agent = serde_json::from_value(json!({
        "apiVersion": "herd.dev/v1alpha1", "kind": "Agent",
        "metadata": {"name": name}, "spec": spec,
    }))?;
    agents.create(&PostParams::default(), &agent).await?;
    Ok(())
}

async fn agent_until(
    agents: &Api<Agent>,
    name: &str,
    what: &str,
    check: impl Fn(&Agent) -> bool,
) -> anyhow::Result<Agent> {
    wait_for(what, WAIT, || async {
        let agent = agents.get(name).await?;
        Ok(check(&agent).then_some(agent))
    })
    .await
}

/// Whether `type_` is `False` and the object `Stalled`, both for `reason`.
fn stalled(conditions: &[Condition], type_: &str, reason: &str) -> bool {
    has_condition(conditions, type_, ConditionStatus::False, reason)
        && has_condition(conditions, "Stalled", ConditionStatus::True, reason)
}

fn conditions(agent: &Agent) -> &[Condition] {
    agent
        .status
        .as_ref()
        .map_or(&[], |s| s.conditions.as_slice())
}

/// An Agent listing a Skill that does not exist reports `SkillNotFound` and `Stalled`; once the
/// Skill is applied, `ResolvedRefs` flips and the Agent is `Ready` with the Skill's digest.
/// Run with the operator watching only its namespace, and (the cluster-wide RBAC variant)
/// without `--watch-namespaces`.
pub async fn agent_waits_for_its_skill(op: Operated) -> anyhow::Result<()> {
    let agents: Api<Agent> = op.api();
    create_agent(
        &agents,
        "researcher",
        json!({"model": {"provider": "openai", "name": "m"}, "skills": ["notes", "deep-research"]}),
    )
    .await?;
    let stalled = agent_until(&agents, "researcher", "SkillNotFound", |a| {
        stalled(conditions(a), "ResolvedRefs", "SkillNotFound")
            && has_condition(conditions(a), "Ready", ConditionStatus::False, "NotReady")
    })
    .await?;
    ensure!(
        stalled.status.as_ref().and_then(|s| s.observed_generation) == stalled.metadata.generation
    );

    create_skill(
        &op.admin,
        &op.namespace,
        "notes",
        &skill_md("notes", "Take notes."),
    )
    .await?;
    let ready = agent_until(
        &agents,
        "researcher",
        "Ready after the Skill appeared",
        |a| has_condition(conditions(a), "Ready", ConditionStatus::True, "Ready"),
    )
    .await?;
    ensure!(
        find_condition(conditions(&ready), "Stalled").is_none(),
        "Stalled must clear"
    );
    let skills: Api<Skill> = op.api();
    let digest = skills
        .get("notes")
        .await?
        .status
        .and_then(|s| s.digest)
        .context("the Skill has no digest")?;
    let resolved = &ready.status.as_ref().context("no status")?.resolved_skills;
    let names: Vec<&str> = resolved.iter().map(|s| s.name.as_str()).collect();
    ensure!(
        names == ["deep-research", "notes"],
        "resolvedSkills: {names:?}"
    );
    ensure!(
        resolved[1].digest == digest,
        "the Agent names the Skill's digest"
    );

    let (status, body) = super::support::http_get(op.http_addr, "/metrics").await?;
    ensure!(
        status == 200 && body.contains("herd_reconciles_total{controller=\"agent\"}"),
        "{body}"
    );
    ensure!(!body.contains("researcher"), "no object names in metrics");
    Ok(())
}

/// A Secret without `herd.dev/model-credentials: "true"` makes the Agent `SecretNotAllowed`
/// and `Stalled`; labelling it makes the Agent `Ready`.
pub async fn unlabelled_secret_is_not_allowed(op: Operated) -> anyhow::Result<()> {
    let secrets: Api<Secret> = op.api();
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "model-key"}, "stringData": {"api-key": "sk-test"},
    }))?;
    secrets.create(&PostParams::default(), &secret).await?;
    let agents: Api<Agent> = op.api();
    create_agent(
        &agents,
        "keyed",
        json!({"model": {"provider": "openai", "name": "m",
            "apiKeySecretRef": {"name": "model-key", "key": "api-key"}}, "skills": []}),
    )
    .await?;
    agent_until(&agents, "keyed", "SecretNotAllowed", |a| {
        stalled(conditions(a), "ResolvedRefs", "SecretNotAllowed")
    })
    .await?;

    let label = json!({"metadata": {"labels": {"herd.dev/model-credentials": "true"}}});
    secrets
        .patch("model-key", &PatchParams::default(), &Patch::Merge(&label))
        .await?;
    let ready = agent_until(&agents, "keyed", "Ready after labelling the Secret", |a| {
        has_condition(conditions(a), "Ready", ConditionStatus::True, "Ready")
    })
    .await?;
    ensure!(find_condition(conditions(&ready), "Stalled").is_none());
    Ok(())
}

/// ConfigMaps are not watched, so an Agent whose `soulFrom` ConfigMap is applied just after it
/// (one `kubectl apply -f dir/` in file order) is polled: it becomes `Ready` within seconds, not
/// after a minute's requeue.
pub async fn an_agent_applied_before_its_config_map_becomes_ready_soon(
    op: Operated,
) -> anyhow::Result<()> {
    let agents: Api<Agent> = op.api();
    create_agent(
        &agents,
        "souled",
        json!({"model": {"provider": "openai", "name": "m"}, "skills": [],
            "soulFrom": {"configMapKeyRef": {"name": "soul", "key": "SOUL.md"}}}),
    )
    .await?;
    agent_until(&agents, "souled", "ConfigMapNotFound", |a| {
        has_condition(
            conditions(a),
            "ResolvedRefs",
            ConditionStatus::False,
            "ConfigMapNotFound",
        )
    })
    .await?;

    let config_maps: Api<ConfigMap> = op.api();
    let soul: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "soul"}, "data": {"SOUL.md": "You are terse."},
    }))?;
    config_maps.create(&PostParams::default(), &soul).await?;
    wait_for(
        "the Agent Ready after its ConfigMap appeared",
        SOON,
        || async {
            let agent = agents.get("souled").await?;
            Ok(
                has_condition(conditions(&agent), "Ready", ConditionStatus::True, "Ready")
                    .then_some(()),
            )
        },
    )
    .await?;
    Ok(())
}

/// How soon an Agent notices a ConfigMap created a moment after it: the first polls come after
/// one, two, four seconds (`decide::agent_status::unresolved_requeue`), far below the 60 s cap.
const SOON: Duration = Duration::from_secs(15);

/// A Skill whose frontmatter names another skill is `NameMismatch`; a valid Skill's versions
/// each become an immutable ConfigMap `<skill>-<digest8>`; an older version nothing uses (no
/// Agent resolves to it, no unfinished Run's snapshot names it) is deleted.
pub async fn skill_versions_become_immutable_config_maps(op: Operated) -> anyhow::Result<()> {
    let skills: Api<Skill> = op.api();
    create_skill(
        &op.admin,
        &op.namespace,
        "misnamed",
        &skill_md("other", "Wrong name."),
    )
    .await?;
    let mismatch = wait_for("NameMismatch", WAIT, || async {
        let skill = skills.get("misnamed").await?;
        let conditions = skill
            .status
            .as_ref()
            .map(|s| s.conditions.clone())
            .unwrap_or_default();
        Ok((stalled(&conditions, "Accepted", "NameMismatch")).then_some(skill))
    })
    .await?;
    ensure!(
        mismatch
            .status
            .as_ref()
            .and_then(|s| s.digest.as_ref())
            .is_none()
    );

    create_skill(
        &op.admin,
        &op.namespace,
        "notes",
        &skill_md("notes", "First version."),
    )
    .await?;
    let first = ready_digest(&skills, "notes", None).await?;
    let patch = json!({"spec": {"content": skill_md("notes", "Second version.")}});
    skills
        .patch("notes", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let second = ready_digest(&skills, "notes", Some(&first)).await?;

    let config_maps: Api<ConfigMap> = op.api();
    let expected = vec![format!("notes-{}", &second[..8])];
    let listed = wait_for("only the current version", WAIT, || async {
        let listed = config_maps
            .list(&ListParams::default().labels("herd.dev/skill=notes"))
            .await?;
        let names: Vec<String> = listed
            .items
            .iter()
            .filter_map(|c| c.metadata.name.clone())
            .collect();
        Ok((names == expected).then_some(listed))
    })
    .await?;
    ensure!(first != second);
    let uid = skills.get("notes").await?.metadata.uid;
    for cm in &listed.items {
        ensure!(cm.immutable == Some(true), "immutable");
        let owner = cm
            .metadata
            .owner_references
            .as_ref()
            .and_then(|o| o.first())
            .context("owner")?;
        ensure!(Some(&owner.uid) == uid.as_ref() && owner.controller == Some(true));
        let data = cm.data.as_ref().context("data")?;
        ensure!(data.get("scripts_-run.py").map(String::as_str) == Some("print('hi')\n"));
    }
    let edit = json!({"data": {"SKILL.md": "changed"}});
    let refused = config_maps
        .patch(&expected[0], &PatchParams::default(), &Patch::Merge(&edit))
        .await;
    ensure!(refused.is_err(), "a rendered version cannot be edited");
    Ok(())
}

async fn ready_digest(
    skills: &Api<Skill>,
    name: &str,
    not: Option<&str>,
) -> anyhow::Result<String> {
    wait_for("a Ready Skill version", WAIT, || async {
        let skill = skills.get(name).await?;
        let Some(status) = skill.status else {
            return Ok(None);
        };
        let ready = has_condition(&status.conditions, "Ready", ConditionStatus::True, "Ready")
            && status.observed_generation == skill.metadata.generation;
        Ok(status.digest.filter(|d| ready && Some(d.as_str()) != not))
    })
    .await
}
