//! The Skill controller: validates each Skill's SKILL.md, renders each version into an
//! immutable ConfigMap `<skill>-<digest8>` owned by the Skill, and writes its status. An old
//! version's ConfigMap is deleted once no unfinished Run's snapshot and no Agent names it.

use std::sync::Arc;
use std::time::Duration;

use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender};
use futures::{Stream, StreamExt};
use herd_crds::agent::Agent;
use herd_crds::condition::{ConditionStatus, changed_condition, find_condition};
use herd_crds::reason::condition_type;
use herd_crds::run::{Run, phase_of};
use herd_crds::skill::{Skill, SkillStatus};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::PostParams;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource, ResourceExt};
use tracing::info;

use super::lifecycle::{Lifecycle, log_failure, under_lease};
use super::prologue::begin;
use super::run_context::RunCaches;
use super::run_objects::owned_by;
use crate::apply::apply_status;
use crate::controller_state::{Shared, key};
use crate::decide::run_snapshot::{Snapshot, read_snapshot};
use crate::decide::run_status::snapshot_name;
use crate::decide::skill_status::{Rendered, SkillVersion, evaluate, next_status};
use crate::decide::skill_version::{config_map_name, desired_config_map};
use crate::decide::skill_version_gc::{unused_versions, versions_in_use};
use crate::error::Error;
use crate::labels;
use crate::scope::{Scope, Synced, WatchEvent};
use crate::slim::slim_metadata;

/// The controller's name in metrics and logs.
pub const NAME: &str = "skill";

/// How soon a Skill whose ConfigMap name is taken looks again (garbage collection of a deleted
/// Skill's leftovers takes seconds).
pub const CONFLICT_REQUEUE: Duration = Duration::from_secs(10);

/// How soon a Skill whose old version is still in use looks again (no watch tells it when the
/// last Run using that version finishes).
pub const IN_USE_REQUEUE: Duration = Duration::from_secs(60);

/// What the Skill controller reads.
pub struct Context {
    /// Shared operator state.
    pub shared: Arc<Shared>,
    /// The operator's ConfigMaps of the scope (by the managed-by label).
    pub config_maps: Store<ConfigMap>,
    /// The Runs of the scope: whose snapshots keep old versions.
    pub runs: Store<Run>,
    /// The Agents of the scope: whose resolved skills keep old versions.
    pub agents: Store<Agent>,
}

/// Wakes Skills from the Run controller's caches, which the Skill controller shares: a version
/// ConfigMap's Skill when the ConfigMap changes, and the Skills a Run's snapshot names when the
/// Run changes (its end may free an old version).
#[derive(Clone)]
pub struct SkillWake(UnboundedSender<ObjectRef<Skill>>);

impl SkillWake {
    /// A wake and the Skills it wakes, for [`controller`].
    pub fn channel() -> (SkillWake, UnboundedReceiver<ObjectRef<Skill>>) {
        let (tx, rx) = futures::channel::mpsc::unbounded();
        (SkillWake(tx), rx)
    }

    fn send(&self, skill: ObjectRef<Skill>) {
        // The controller's end of the channel lives as long as the operator.
        let _ = self.0.unbounded_send(skill);
    }

    /// A ConfigMap watch event: wakes the Skill that owns the ConfigMap.
    pub fn config_map(&self, event: &WatchEvent<ConfigMap>) {
        let cm = match event {
            Ok(watcher::Event::Apply(cm) | watcher::Event::Delete(cm)) => cm,
            _ => return,
        };
        let namespace = cm.namespace().unwrap_or_default();
        for owner in cm.owner_references() {
            if owner.kind == "Skill" && owner.controller == Some(true) {
                self.send(ObjectRef::new(&owner.name).within(&namespace));
            }
        }
    }

    /// A Run watch event: wakes the Skills its snapshot (in `config_maps`) names.
    pub fn run(&self, config_maps: &Store<ConfigMap>, event: &WatchEvent<Run>) {
        if let Ok(watcher::Event::Apply(run) | watcher::Event::Delete(run)) = event {
            for skill in skills_of_snapshot(config_maps, run) {
                self.send(skill);
            }
        }
    }
}

/// Builds the controller for `scope`, on the Runs and ConfigMaps the Run controller caches
/// (`woken` by [`SkillWake`]); the returned stream runs it until the operator stops
/// (`lifecycle`).
pub fn controller(
    scope: Scope,
    shared: Arc<Shared>,
    caches: RunCaches,
    woken: UnboundedReceiver<ObjectRef<Skill>>,
    lifecycle: Lifecycle,
) -> (impl Stream<Item = ()> + Send, Vec<Synced>) {
    let synced: Vec<Synced> = (0..2).map(|_| Synced::default()).collect();
    let (skills_synced, agents_synced) = (synced[0].clone(), synced[1].clone());
    let client = &shared.client;
    let (skills, skill_stream) = scope.cached::<Skill>(client, skills_synced, slim_metadata);
    let skill_stream = skill_stream.applied_objects();
    let (agents, agent_stream) = scope.cached::<Agent>(client, agents_synced, slim_metadata);
    let agent_stream = agent_stream.touched_objects();
    let context = Arc::new(Context {
        shared,
        config_maps: caches.config_maps,
        runs: caches.runs,
        agents,
    });
    let controller = Controller::for_stream(skill_stream, skills.clone())
        // A version ConfigMap changing, a Run finishing (see SkillWake).
        .reconcile_on(woken)
        // An Agent moving to a new version may free an old one.
        .watches_stream(agent_stream, |agent: Agent| {
            let namespace = agent.namespace().unwrap_or_default();
            agent
                .status
                .iter()
                .flat_map(|s| s.resolved_skills.iter())
                .map(|s| ObjectRef::new(&s.name).within(&namespace))
                .collect::<Vec<_>>()
        });
    let stream = under_lease(controller, &lifecycle)
        .run(reconcile, error_policy, context)
        .map(log_failure("skill"));
    (stream, synced)
}

/// Validates the Skill, ensures its version's ConfigMap, and applies its status when it
/// changed.
pub async fn reconcile(skill: Arc<Skill>, ctx: Arc<Context>) -> Result<Action, Error> {
    let shared = &ctx.shared;
    let Some(start) = begin(shared, NAME, skill.as_ref())? else {
        return Ok(Action::await_change());
    };
    let current = start.mark_reconciling(skill.as_ref()).await?;
    let (name, namespace, previous) = (start.name, start.namespace, &start.previous);
    let outcome = match evaluate(name, &skill.spec) {
        Err(rejection) => Err(rejection),
        Ok(version) => {
            let rendered = ensure_config_map(&ctx, &skill, namespace, &version).await?;
            Ok((version, rendered))
        }
    };
    let generation = skill.metadata.generation;
    let status = next_status(
        previous,
        generation,
        skill.spec.enabled,
        &outcome,
        &start.now,
    );
    if status != *previous {
        apply_status(&start.api, current.as_ref(), &status).await?;
        announce(shared, &skill, previous, &status);
    }
    let old_in_use = match &outcome {
        Ok((version, Rendered::Ready)) => {
            delete_unused_versions(&ctx, &skill, namespace, &version.digest).await?
        }
        _ => false,
    };
    shared.succeeded(&key(NAME, skill.as_ref()));
    Ok(match outcome {
        Ok((_, Rendered::Conflict(_))) => Action::requeue(CONFLICT_REQUEUE),
        _ if old_in_use => Action::requeue(IN_USE_REQUEUE),
        _ => Action::await_change(),
    })
}

/// The Skills a Run's snapshot names.
fn skills_of_snapshot(config_maps: &Store<ConfigMap>, run: &Run) -> Vec<ObjectRef<Skill>> {
    let namespace = run.namespace().unwrap_or_default();
    let name = snapshot_name(&run.name_any());
    config_maps
        .get(&ObjectRef::new(&name).within(&namespace))
        .and_then(|cm| read_snapshot(&cm))
        .map(|snap| {
            snap.skills
                .iter()
                .map(|s| ObjectRef::new(&s.name).within(&namespace))
                .collect()
        })
        .unwrap_or_default()
}

/// Deletes the Skill's old version ConfigMaps nothing needs; true when some are still in use.
async fn delete_unused_versions(
    ctx: &Context,
    skill: &Skill,
    namespace: &str,
    digest: &str,
) -> Result<bool, Error> {
    let skill_name = skill.name_any();
    let uid = skill.uid().unwrap_or_default();
    let in_namespace = |cm: &ConfigMap| cm.namespace().as_deref() == Some(namespace);
    let all = ctx.config_maps.state();
    let versions: Vec<String> = all
        .iter()
        .filter(|cm| in_namespace(cm) && cm.labels().get(labels::SKILL) == Some(&skill_name))
        .filter(|cm| owned_by(cm.as_ref(), &uid))
        .map(|cm| cm.name_any())
        .collect();
    let current = config_map_name(&skill_name, digest);
    if versions.iter().all(|v| *v == current) {
        return Ok(false);
    }
    let unfinished = |run_name: &str| {
        ctx.runs
            .get(&ObjectRef::new(run_name).within(namespace))
            // A Run not cached yet is taken as unfinished: keeping a version is always safe.
            .is_none_or(|run| {
                !phase_of(&run.status.clone().unwrap_or_default().conditions).is_finished()
            })
    };
    let snapshots: Vec<Snapshot> = all
        .iter()
        .filter(|cm| in_namespace(cm))
        .filter(|cm| {
            cm.labels()
                .get(labels::RUN)
                .is_some_and(|run| unfinished(run))
        })
        .filter_map(|cm| read_snapshot(cm))
        .collect();
    let agents = ctx.agents.state();
    let in_use = versions_in_use(
        snapshots.iter().flat_map(|s| s.skills.iter()).chain(
            agents
                .iter()
                .filter(|a| a.namespace().as_deref() == Some(namespace))
                .filter_map(|a| a.status.as_ref())
                .flat_map(|s| s.resolved_skills.iter()),
        ),
    );
    let unused = unused_versions(&current, &versions, &in_use);
    let api: Api<ConfigMap> = Api::namespaced(ctx.shared.client.clone(), namespace);
    for name in &unused {
        match api.delete(name, &Default::default()).await {
            Ok(_) => {
                info!(skill = %skill_name, namespace, config_map = %name, "deleted an unused skill version");
                ctx.shared.event(
                    skill,
                    false,
                    "VersionDeleted",
                    format!("deleted unused ConfigMap {name}"),
                );
            }
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => return Err(error.into()),
        }
    }
    Ok(versions.len() > unused.len() + usize::from(versions.contains(&current)))
}

/// Creates the version's ConfigMap unless it exists. It is never updated: it is immutable, and
/// its name changes with its content.
async fn ensure_config_map(
    ctx: &Context,
    skill: &Skill,
    namespace: &str,
    version: &SkillVersion,
) -> Result<Rendered, Error> {
    let skill_name = skill.name_any();
    let cm_name = config_map_name(&skill_name, &version.digest);
    let uid = skill.uid();
    let owned = |cm: &ConfigMap| {
        cm.owner_references()
            .iter()
            .any(|o| o.controller == Some(true) && Some(&o.uid) == uid.as_ref())
    };
    let conflict = || {
        Rendered::Conflict(format!(
            "ConfigMap {cm_name} exists and belongs to another object; waiting for it to go"
        ))
    };
    if let Some(cached) = ctx
        .config_maps
        .get(&ObjectRef::new(&cm_name).within(namespace))
    {
        return Ok(if owned(&cached) {
            Rendered::Ready
        } else {
            conflict()
        });
    }
    let owner = skill
        .controller_owner_ref(&())
        .ok_or(Error::MissingField("metadata.uid"))?;
    let desired = desired_config_map(
        &skill_name,
        namespace,
        owner,
        &version.digest,
        version.data.clone(),
    );
    let api: Api<ConfigMap> = Api::namespaced(ctx.shared.client.clone(), namespace);
    match api.create(&PostParams::default(), &desired).await {
        Ok(_) => {
            ctx.shared.event(
                skill,
                false,
                "VersionRendered",
                format!("rendered ConfigMap {cm_name}"),
            );
            Ok(Rendered::Ready)
        }
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let existing = api.get_opt(&cm_name).await?;
            Ok(match existing {
                Some(cm) if owned(&cm) => Rendered::Ready,
                _ => conflict(),
            })
        }
        Err(error) => Err(error.into()),
    }
}

/// An Event and a log line when `Ready` changes.
fn announce(shared: &Shared, skill: &Skill, before: &SkillStatus, after: &SkillStatus) {
    let Some((_, new)) =
        changed_condition(&before.conditions, &after.conditions, condition_type::READY)
    else {
        return;
    };
    let ready = new.status == ConditionStatus::True;
    info!(skill = %skill.name_any(), namespace = ?skill.namespace(), ready, reason = %new.reason, "skill status changed");
    let reason = find_condition(&after.conditions, condition_type::STALLED)
        .map_or_else(|| new.reason.clone(), |c| c.reason.clone());
    shared.event(skill, !ready, &reason, new.message.clone());
}

/// Backs off per Skill: 1 s doubling to 5 min.
pub fn error_policy(skill: Arc<Skill>, error: &Error, ctx: Arc<Context>) -> Action {
    ctx.shared.reconcile_failed(NAME, skill.as_ref(), error)
}
