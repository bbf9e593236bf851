//! The Agent controller: validates each Agent, resolves its skills, Secrets and ConfigMaps, and
//! writes its conditions and `resolvedSkills`.

use std::sync::Arc;

use futures::{Stream, StreamExt};
use herd_crds::agent::{Agent, AgentStatus, ModelSpec};
use herd_crds::condition::{ConditionStatus, changed_condition, find_condition};
use herd_crds::reason::condition_type;
use herd_crds::skill::Skill;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, ResourceExt};
use tracing::info;

use super::lifecycle::{Lifecycle, log_failure, under_lease};
use super::prologue::begin;
use crate::apply::apply_status;
use crate::controller_state::{Shared, key};
use crate::decide::agent_refs::{self, SecretRef};
use crate::decide::agent_status::{
    AgentFindings, ConfigMapFinding, ConfigMapState, SecretFinding, SecretState, next_status,
    unresolved_requeue,
};
use crate::decide::skill_refs::{SkillView, resolve};
use crate::error::Error;
use crate::labels;
use crate::scope::{Scope, Synced, cached_watch, watch_config};
use crate::slim::slim_metadata;

/// The controller's name in metrics and logs.
pub const NAME: &str = "agent";

/// What the Agent controller reads.
pub struct Context {
    /// Shared operator state.
    pub shared: Arc<Shared>,
    /// Skills of the scope.
    pub skills: Store<Skill>,
    /// Metadata of the Secrets labelled `herd.dev/model-credentials: "true"`.
    pub secrets: Store<PartialObjectMeta<Secret>>,
}

/// Builds the controller for `scope`; the returned stream runs it until the operator stops
/// (`lifecycle`).
pub fn controller(
    scope: Scope,
    shared: Arc<Shared>,
    lifecycle: Lifecycle,
) -> (impl Stream<Item = ()> + Send, Vec<Synced>) {
    let synced: Vec<Synced> = (0..3).map(|_| Synced::default()).collect();
    let (agents_synced, skills_synced, secrets_synced) =
        (synced[0].clone(), synced[1].clone(), synced[2].clone());
    let client = &shared.client;
    let (agents, agent_stream) = scope.cached::<Agent>(client, agents_synced, slim_metadata);
    let agent_stream = agent_stream.applied_objects();

    let (skills, skill_stream) = scope.cached::<Skill>(client, skills_synced, slim_metadata);
    let skill_stream = skill_stream.touched_objects();

    // An `Api` of `PartialObjectMeta` watches metadata only: Secret data never reaches us.
    let (secrets, secret_stream) = cached_watch(
        scope.api::<PartialObjectMeta<Secret>>(client),
        watch_config().labels(labels::MODEL_CREDENTIALS_SELECTOR),
        secrets_synced,
        slim_metadata,
    );
    let secret_stream = secret_stream.touched_objects();

    let context = Arc::new(Context {
        shared: shared.clone(),
        skills: skills.clone(),
        secrets: secrets.clone(),
    });
    let by_skill = agents.clone();
    let by_secret = agents.clone();
    let default_model = shared.default_model.clone();
    let controller = Controller::for_stream(agent_stream, agents.clone())
        .watches_stream(skill_stream, move |skill: Skill| {
            agents_using_skill(&by_skill, &skill)
        })
        .watches_stream(secret_stream, move |secret: PartialObjectMeta<Secret>| {
            agents_using_secret(&by_secret, &secret, default_model.as_ref())
        });
    let stream = under_lease(controller, &lifecycle)
        .run(reconcile, error_policy, context)
        .map(log_failure("agent"));
    (stream, synced)
}

fn agents_using_skill(agents: &Store<Agent>, skill: &Skill) -> Vec<ObjectRef<Agent>> {
    let name = skill.name_any();
    let namespace = skill.namespace();
    agents
        .state()
        .into_iter()
        .filter(|agent| agent.namespace() == namespace)
        .filter(|agent| {
            agent
                .spec
                .skills
                .as_ref()
                .is_none_or(|list| list.contains(&name))
        })
        .map(|agent| ObjectRef::from_obj(agent.as_ref()))
        .collect()
}

fn agents_using_secret(
    agents: &Store<Agent>,
    secret: &PartialObjectMeta<Secret>,
    default_model: Option<&ModelSpec>,
) -> Vec<ObjectRef<Agent>> {
    let name = secret.name_any();
    let namespace = secret.namespace();
    agents
        .state()
        .into_iter()
        .filter(|agent| agent.namespace() == namespace)
        .filter(|agent| {
            agent_refs::secret_refs(&agent.spec, default_model)
                .iter()
                .any(|r| r.name == name)
        })
        .map(|agent| ObjectRef::from_obj(agent.as_ref()))
        .collect()
}

/// Reads what the Agent refers to, decides its status, and applies it when it changed.
pub async fn reconcile(agent: Arc<Agent>, ctx: Arc<Context>) -> Result<Action, Error> {
    let shared = &ctx.shared;
    let Some(start) = begin(shared, NAME, agent.as_ref())? else {
        return Ok(Action::await_change());
    };
    let current = start.mark_reconciling(agent.as_ref()).await?;
    let previous = &start.previous;
    let findings = find(&ctx, &agent, start.namespace).await?;
    let status = next_status(previous, agent.metadata.generation, &findings, &start.now);
    if status != *previous {
        apply_status(&start.api, current.as_ref(), &status).await?;
        announce(shared, &agent, previous, &status);
    }
    shared.succeeded(&key(NAME, agent.as_ref()));
    Ok(match unresolved_requeue(&status, &start.now) {
        Some(wait) => Action::requeue(wait),
        None => Action::await_change(),
    })
}

/// Everything the Agent's status depends on.
async fn find(ctx: &Context, agent: &Agent, namespace: &str) -> Result<AgentFindings, Error> {
    let shared = &ctx.shared;
    let custom: Vec<SkillView> = ctx
        .skills
        .state()
        .iter()
        .filter(|skill| skill.metadata.namespace.as_deref() == Some(namespace))
        .map(|skill| SkillView::of(skill))
        .collect();
    let skills = resolve(
        agent.spec.skills.as_deref(),
        &custom,
        &shared.builtin_skills,
    );
    let mut secrets = Vec::new();
    for reference in agent_refs::secret_refs(&agent.spec, shared.default_model.as_ref()) {
        let state = secret_state(ctx, namespace, &reference).await?;
        secrets.push(SecretFinding {
            field: reference.field,
            name: reference.name,
            state,
        });
    }
    let mut config_maps = Vec::new();
    let config_map_api: Api<ConfigMap> = Api::namespaced(shared.client.clone(), namespace);
    for reference in agent_refs::config_map_keys(&agent.spec) {
        let state = match config_map_api.get_opt(&reference.name).await? {
            None => ConfigMapState::NotFound,
            Some(cm) => {
                let in_data = cm.data.is_some_and(|d| d.contains_key(&reference.key));
                let in_binary = cm
                    .binary_data
                    .is_some_and(|d| d.contains_key(&reference.key));
                if in_data || in_binary {
                    ConfigMapState::Found
                } else {
                    ConfigMapState::KeyMissing
                }
            }
        };
        config_maps.push(ConfigMapFinding {
            field: reference.field,
            name: reference.name,
            key: reference.key,
            state,
        });
    }
    Ok(AgentFindings {
        spec_error: agent_refs::spec_error(&agent.spec, shared.default_model.as_ref()),
        skills,
        secrets,
        config_maps,
    })
}

/// A Secret's state from its metadata: the labelled-Secrets cache first, then one live
/// metadata-only GET (the operator never reads Secret data).
async fn secret_state(
    ctx: &Context,
    namespace: &str,
    reference: &SecretRef,
) -> Result<SecretState, Error> {
    let key = ObjectRef::new(&reference.name).within(namespace);
    if let Some(cached) = ctx.secrets.get(&key) {
        return Ok(labelled_state(cached.labels()));
    }
    let api: Api<Secret> = Api::namespaced(ctx.shared.client.clone(), namespace);
    Ok(match api.get_metadata_opt(&reference.name).await? {
        None => SecretState::NotFound,
        Some(meta) => labelled_state(meta.labels()),
    })
}

fn labelled_state(labels: &std::collections::BTreeMap<String, String>) -> SecretState {
    if labels.get(labels::MODEL_CREDENTIALS).map(String::as_str) == Some("true") {
        SecretState::Allowed
    } else {
        SecretState::NotAllowed
    }
}

/// An Event and a log line when `Ready` changes.
fn announce(shared: &Shared, agent: &Agent, before: &AgentStatus, after: &AgentStatus) {
    let Some((_, new)) =
        changed_condition(&before.conditions, &after.conditions, condition_type::READY)
    else {
        return;
    };
    let ready = new.status == ConditionStatus::True;
    let note = if ready {
        "the agent is ready".to_owned()
    } else {
        new.message.clone()
    };
    info!(agent = %agent.name_any(), namespace = ?agent.namespace(), ready, reason = %new.reason, "agent status changed");
    let reason = if ready {
        new.reason.clone()
    } else {
        find_condition(&after.conditions, condition_type::STALLED)
            .map_or_else(|| new.reason.clone(), |c| c.reason.clone())
    };
    shared.event(agent, !ready, &reason, note);
}

/// Backs off per Agent: 1 s doubling to 5 min.
pub fn error_policy(agent: Arc<Agent>, error: &Error, ctx: Arc<Context>) -> Action {
    ctx.shared.reconcile_failed(NAME, agent.as_ref(), error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_label_value_allows() {
        let mut labels = std::collections::BTreeMap::new();
        assert_eq!(labelled_state(&labels), SecretState::NotAllowed);
        labels.insert(labels::MODEL_CREDENTIALS.to_owned(), "yes".to_owned());
        assert_eq!(labelled_state(&labels), SecretState::NotAllowed);
        labels.insert(labels::MODEL_CREDENTIALS.to_owned(), "true".to_owned());
        assert_eq!(labelled_state(&labels), SecretState::Allowed);
    }
}
