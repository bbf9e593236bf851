//! Accepting a Run (docs/operator.md, step 1): its snapshot, taken once and stored as the immutable
//! ConfigMap `<run>-snapshot`. A top-level Run's comes from its Agent once ready (with
//! `soulFrom` and `model.scriptFrom` inlined); a child's is its parent's snapshot narrowed,
//! never the live Agent.

use herd_crds::condition::{ConditionStatus, find_condition};
use herd_crds::reason::condition_type;
use herd_crds::run::{ParentRef, Run};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};

use super::run_context::{Context, Ids};
use super::run_objects::{Created, controller_uid, create_owned, owned_by};
use crate::decide::child_run::child_snapshot;
use crate::decide::run_clocks::elapsed;
use crate::decide::run_snapshot::{
    Snapshot, SnapshotSources, read_snapshot, snapshot, snapshot_config_map,
};
use crate::decide::run_status::{AgentState, snapshot_name};
use crate::decide::runner_resources::sandbox_resources;
use crate::error::Error;

/// What accepting found.
enum Taken {
    /// The snapshot to store.
    Snapshot(Box<Snapshot>),
    /// The Agent is not there or not ready yet.
    Waiting(AgentState),
    /// No snapshot can ever be taken: the Run fails `InvalidSpec` with this.
    Invalid(String),
}

/// What accepting found: the Agent's state, the snapshot when there is one, and whether this
/// reconcile wrote it (else it came from the cache, which may lag a deletion).
pub(super) struct Accepted {
    /// The Agent's state.
    pub(super) agent: AgentState,
    /// The Run's snapshot.
    pub(super) snapshot: Option<Snapshot>,
    /// Whether this reconcile wrote it.
    pub(super) written: bool,
}

impl Accepted {
    fn without_snapshot(agent: AgentState) -> Self {
        Accepted {
            agent,
            snapshot: None,
            written: false,
        }
    }
}

/// Takes and stores the snapshot when it can; `invalid` says why it never can. A snapshot an
/// earlier reconcile stored (before the Run's status showed it accepted) is used as it is,
/// never taken again.
pub(super) async fn accept(
    ctx: &Context,
    run: &Run,
    ids: &Ids<'_>,
    invalid: &mut Option<String>,
) -> Result<Accepted, Error> {
    // A command pattern CEL took that the runner's regexes do not (RE2 and Rust's regex differ
    // at the edges) would fail every attempt: the Run fails `InvalidSpec` saying which.
    if let Some(why) = run.spec.approval.as_ref().and_then(|a| a.compile().err()) {
        *invalid = Some(format!("spec.{why}"));
        return Ok(Accepted::without_snapshot(AgentState::Ready));
    }
    let stored = ctx
        .config_maps
        .get(&ObjectRef::new(&snapshot_name(ids.name)).within(ids.namespace))
        .filter(|cm| owned_by(cm.as_ref(), &ids.uid))
        .and_then(|cm| read_snapshot(&cm));
    if let Some(snapshot) = stored {
        return Ok(Accepted {
            agent: AgentState::Ready,
            snapshot: Some(snapshot),
            written: false,
        });
    }
    let taken = match &run.spec.parent_ref {
        Some(parent) => delegated(ctx, run, ids, parent).await?,
        None => from_agent(ctx, run, ids).await?,
    };
    let snap = match taken {
        Taken::Snapshot(snap) => *snap,
        Taken::Waiting(state) => return Ok(Accepted::without_snapshot(state)),
        Taken::Invalid(why) => {
            *invalid = Some(why);
            return Ok(Accepted::without_snapshot(AgentState::Ready));
        }
    };
    let owner = run
        .controller_owner_ref(&())
        .ok_or(Error::MissingField("metadata.uid"))?;
    let cm = snapshot_config_map(ids.name, ids.namespace, owner, &snap)
        .map_err(|e| Error::Config(e.to_string()))?;
    let api: Api<ConfigMap> = Api::namespaced(ctx.shared.client.clone(), ids.namespace);
    match create_owned(&api, &cm, &ids.uid).await? {
        Created::Done => Ok(Accepted {
            agent: AgentState::Ready,
            snapshot: Some(snap),
            written: true,
        }),
        Created::Foreign(why) | Created::Quota(why) | Created::Refused(why) => {
            *invalid = Some(why);
            Ok(Accepted::without_snapshot(AgentState::Ready))
        }
    }
}

/// A top-level Run's snapshot from its Agent, once the Agent is ready.
async fn from_agent(ctx: &Context, run: &Run, ids: &Ids<'_>) -> Result<Taken, Error> {
    let agent_name = &run.spec.agent_ref.name;
    let Some(agent) = ctx
        .agents
        .get(&ObjectRef::new(agent_name).within(ids.namespace))
    else {
        return Ok(Taken::Waiting(AgentState::NotFound));
    };
    let status = agent.status.clone().unwrap_or_default();
    let ready = find_condition(&status.conditions, condition_type::READY);
    if status.observed_generation != agent.metadata.generation
        || ready.is_none_or(|c| c.status != ConditionStatus::True)
    {
        let why = ready.map_or_else(|| "not reconciled yet".to_owned(), |c| c.message.clone());
        return Ok(Taken::Waiting(AgentState::NotReady(why)));
    }
    let texts: Api<ConfigMap> = Api::namespaced(ctx.shared.client.clone(), ids.namespace);
    let text = |from: Option<&herd_crds::refs::ValueFrom>| {
        let texts = texts.clone();
        let from = from.cloned();
        async move {
            let Some(from) = from else {
                return Ok::<_, Error>(None);
            };
            let key = from.config_map_key_ref;
            let cm = texts.get_opt(&key.name).await?;
            Ok(cm.and_then(|cm| cm.data?.get(&key.key).cloned()))
        }
    };
    let soul = text(agent.spec.soul_from.as_ref()).await?;
    let script = text(
        agent
            .spec
            .model
            .as_ref()
            .and_then(|m| m.script_from.as_ref()),
    )
    .await?;
    let taken = snapshot(
        &run.spec,
        &agent.spec,
        SnapshotSources {
            agent_name,
            skills: &status.resolved_skills,
            soul,
            script,
            default_model: ctx.shared.default_model.as_ref(),
            runner_image: &ctx.images.runner_image,
            sandbox_image: &ctx.images.sandbox_image,
        },
    );
    Ok(match taken {
        Ok(mut snap) => {
            // The operator's default, like the images, is fixed in the snapshot: every attempt
            // gets the resources the Run was accepted with.
            snap.agent.sandbox.resources = sandbox_resources(
                &ctx.images.sandbox_resources,
                snap.agent.sandbox.resources.as_ref(),
            );
            Taken::Snapshot(Box::new(snap))
        }
        Err(error) => Taken::Invalid(error.to_string()),
    })
}

/// A child Run's snapshot: its parent's (the Run that owns it), narrowed by what the child was
/// created with and the time the parent has left now.
async fn delegated(
    ctx: &Context,
    run: &Run,
    ids: &Ids<'_>,
    parent_ref: &ParentRef,
) -> Result<Taken, Error> {
    let owner = controller_uid(run);
    let parent = ctx
        .runs
        .get(&ObjectRef::new(&parent_ref.name).within(ids.namespace))
        .filter(|parent| owner.is_some() && parent.uid().as_deref() == owner);
    let Some(parent) = parent else {
        return Ok(Taken::Invalid(format!(
            "parentRef names Run {}, which is gone or does not own this Run",
            parent_ref.name
        )));
    };
    let parent_ids = Ids {
        name: &parent_ref.name,
        namespace: ids.namespace,
        uid: parent.uid().unwrap_or_default(),
    };
    let Some(parent_snap) = load_snapshot(ctx, &parent_ids).await? else {
        return Ok(Taken::Invalid(format!(
            "the snapshot of parent Run {} is missing",
            parent_ref.name
        )));
    };
    let now = Time(jiff::Timestamp::now());
    let started = parent.status.as_ref().and_then(|s| s.start_time.as_ref());
    let left = started.map_or(parent_snap.run.timeout(), |start| {
        parent_snap
            .run
            .timeout()
            .saturating_sub(elapsed(start, &now))
    });
    Ok(match child_snapshot(&parent_snap, run, left) {
        Ok(snap) => Taken::Snapshot(Box::new(snap)),
        Err(refusal) => Taken::Invalid(refusal.to_string()),
    })
}

/// An accepted Run's snapshot, from the cache or the API server.
pub(super) async fn load_snapshot(ctx: &Context, ids: &Ids<'_>) -> Result<Option<Snapshot>, Error> {
    let name = snapshot_name(ids.name);
    let owned = |cm: &ConfigMap| owned_by(cm, &ids.uid).then(|| read_snapshot(cm)).flatten();
    if let Some(cm) = ctx
        .config_maps
        .get(&ObjectRef::new(&name).within(ids.namespace))
    {
        return Ok(owned(&cm));
    }
    let api: Api<ConfigMap> = Api::namespaced(ctx.shared.client.clone(), ids.namespace);
    Ok(api.get_opt(&name).await?.as_ref().and_then(owned))
}
