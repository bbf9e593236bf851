//! Starting an accepted Run's Pod: its inputs and skill versions must exist, admission must let
//! it, then the per-namespace objects, its egress set's NetworkPolicy (once per namespace and
//! set), its workspace claim and the Pod, each created, never re-applied.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use herd_crds::agent::ResolvedSkill;
use herd_crds::run::Run;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};

use super::run_context::{Context, Ids};
use super::run_objects::{
    Created, create_owned, create_shared, ensure_namespace, missing_input, owned_by,
};
use crate::decide::admission::{ParentCap, RunKey, Waiting};
use crate::decide::admission_ledger::{Answer, Ready};
use crate::decide::budget_admission::Hold;
use crate::decide::run_network_policy::egress_set;
use crate::decide::run_pod::{PodInputs, SkillMount, custom_versions, desired_pod, skill_mounts};
use crate::decide::run_snapshot::Snapshot;
use crate::decide::run_status::snapshot_name;
use crate::decide::run_workspace::desired_workspace_claim;
use crate::decide::skill_version::config_map_name;
use crate::decide::trace_context::traceparent_of;
use crate::error::Error;
use crate::traces::{AdmissionSpan, record_admission};

/// Said to a Run admission has not decided on yet (it wakes the Run when it has).
const UNDECIDED: &str = "waiting for admission";

/// How far the start of a Pod came.
pub(super) enum Started {
    /// The Pod was created.
    Created,
    /// A prerequisite is missing or a quota refused an object: retried with backoff.
    Blocked(String),
    /// Admission keeps the Run waiting, for this reason; it wakes the Run.
    Queued(String),
    /// A Budget holds the Run (it waits for the window to reset, or is refused); admission
    /// wakes it when that changes.
    OverBudget(Hold),
    /// The API server refused an object for good.
    Refused(String),
    /// The Run's snapshot ConfigMap is gone: no attempt may start without it.
    SnapshotLost,
}

/// The inputs' and skill versions' check, admission, the per-namespace objects, the egress
/// set's NetworkPolicy, the workspace claim, then the Pod; the first that does not go through
/// is what the start came to.
pub(super) async fn start_pod(
    ctx: &Context,
    run: &Run,
    ids: &Ids<'_>,
    snap: &Snapshot,
    written_now: bool,
    attempt: u32,
    time_left: Duration,
) -> Result<Started, Error> {
    let client = &ctx.shared.client;
    let skills = match inputs_and_skills(ctx, run, ids, snap).await? {
        Ok(skills) => skills,
        Err(why) => {
            ctx.admission
                .withdraw(&RunKey::new(ids.namespace, ids.name));
            return Ok(Started::Blocked(why));
        }
    };
    if let Some(not_admitted) = admit(ctx, run, ids, snap, attempt).await {
        return Ok(not_admitted);
    }
    let bundle = ctx.tls.bundle().await?;
    ensure_namespace(
        client,
        &ctx.prepared,
        &ctx.config_maps,
        ids.namespace,
        &bundle,
    )
    .await?;
    let owner = run
        .controller_owner_ref(&())
        .ok_or(Error::MissingField("metadata.uid"))?;
    let egress = egress_set(ids.namespace, snap, &ctx.network);
    if let Some(refused) = ensure_egress_policy(ctx, ids.namespace, &egress.policy).await? {
        return Ok(refused);
    }
    if let Some(claim) = desired_workspace_claim(ids.name, ids.namespace, owner.clone(), snap) {
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ids.namespace);
        if let Some(refused) = refusal(create_owned(&claims, &claim, &ids.uid).await?) {
            return Ok(refused);
        }
    }
    if !written_now && !snapshot_exists(ctx, ids).await? {
        return Ok(Started::SnapshotLost);
    }
    let pod = desired_pod(
        &PodInputs {
            run: ids.name,
            namespace: ids.namespace,
            owner,
            attempt,
            snapshot: snap,
            inputs: &run.spec.inputs,
            skills: &skills,
            time_left,
            answers_given: run.spec.responses.len(),
            traceparent: traceparent_of(run),
            egress_set: &egress.digest,
        },
        &ctx.pod_config,
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), ids.namespace);
    // The status change to PodPending names the Pod, and its Event says so: no Event here.
    Ok(refusal(create_owned(&pods, &pod, &ids.uid).await?).unwrap_or(Started::Created))
}

/// The skills to mount, or why the Run cannot start yet: an input ConfigMap or a skill
/// version's ConfigMap is missing.
async fn inputs_and_skills(
    ctx: &Context,
    run: &Run,
    ids: &Ids<'_>,
    snap: &Snapshot,
) -> Result<Result<Vec<SkillMount>, String>, Error> {
    let inputs = run
        .spec
        .inputs
        .iter()
        .map(|i| i.config_map_ref.name.clone());
    if let Some(why) = missing_input(&ctx.shared.client, ids.namespace, inputs).await? {
        return Ok(Err(why));
    }
    let versions = || custom_versions(&snap.skills, &ctx.shared.builtin_skills);
    let found = version_keys(ctx, ids.namespace, versions()).await?;
    Ok(skill_mounts(versions(), &found))
}

/// Asks admission for a slot (traced on the Run's trace); `None` once admitted, else what the
/// start came to: queued behind a cap, undecided, or held by a Budget.
async fn admit(
    ctx: &Context,
    run: &Run,
    ids: &Ids<'_>,
    snap: &Snapshot,
    attempt: u32,
) -> Option<Started> {
    let ready = Ready {
        run: Waiting {
            key: RunKey::new(ids.namespace, ids.name),
            created: run
                .metadata
                .creation_timestamp
                .as_ref()
                .map_or_else(jiff::Timestamp::now, |t| t.0),
            parent: snap.delegation.as_ref().map(|d| ParentCap {
                key: RunKey::new(ids.namespace, &d.parent),
                max_concurrent: d.max_concurrent,
            }),
        },
        uid: ids.uid.clone(),
        attempt,
    };
    let asked = SystemTime::now();
    let answer = ctx.admission.ask(ready).await;
    if let Some(traceparent) = traceparent_of(run) {
        record_admission(traceparent, admission_span(ids, asked, &answer));
    }
    match answer {
        Answer::Admitted => None,
        Answer::Waiting(full) => Some(Started::Queued(full.to_string())),
        Answer::Undecided => Some(Started::Queued(UNDECIDED.to_owned())),
        Answer::Held(hold) => Some(Started::OverBudget(hold)),
    }
}

/// Creates the egress set's NetworkPolicy once per namespace and set (one reconcile at a
/// time makes it); `Some` when the API server refused it.
async fn ensure_egress_policy(
    ctx: &Context,
    namespace: &str,
    policy: &NetworkPolicy,
) -> Result<Option<Started>, Error> {
    let ensured = format!("{namespace}/{}", policy.name_any());
    if ctx.prepared.contains(&ensured) {
        return Ok(None);
    }
    let _one_at_a_time = ctx.prepared.making().await;
    if ctx.prepared.contains(&ensured) {
        return Ok(None);
    }
    let policies: Api<NetworkPolicy> = Api::namespaced(ctx.shared.client.clone(), namespace);
    let created = create_shared(&policies, policy).await?;
    if matches!(created, Created::Done) {
        ctx.prepared.insert(&ensured);
    }
    Ok(refusal(created))
}

/// Whether the Run's snapshot still exists: one from the cache may have been deleted since
/// (the cache may not show it yet), and no Pod starts for a Run whose snapshot is gone.
async fn snapshot_exists(ctx: &Context, ids: &Ids<'_>) -> Result<bool, Error> {
    let snapshots: Api<ConfigMap> = Api::namespaced(ctx.shared.client.clone(), ids.namespace);
    Ok(snapshots
        .get_metadata_opt(&snapshot_name(ids.name))
        .await?
        .is_some_and(|cm| owned_by(&cm, &ids.uid)))
}

/// What a refused creation comes to: a quota blocks the start (retried with backoff), any
/// other refusal fails the Run; `None` when the object was created or is the Run's.
fn refusal(created: Created) -> Option<Started> {
    match created {
        Created::Done => None,
        Created::Quota(why) => Some(Started::Blocked(why)),
        Created::Foreign(why) | Created::Refused(why) => Some(Started::Refused(why)),
    }
}

/// How the Run's trace shows admission's `answer` (an undecided ask shows as waiting).
fn admission_span<'a>(ids: &Ids<'a>, asked: SystemTime, answer: &Answer) -> AdmissionSpan<'a> {
    let (decision, reason) = match answer {
        Answer::Admitted => ("admitted", None),
        Answer::Waiting(full) => ("waiting", Some(full.to_string())),
        Answer::Undecided => ("waiting", Some(UNDECIDED.to_owned())),
        Answer::Held(hold) => ("held", Some(hold.message.clone())),
    };
    AdmissionSpan {
        namespace: ids.namespace,
        name: ids.name,
        asked,
        decision,
        reason,
    }
}

/// The keys of each skill version ConfigMap of `versions` that exists: from the cache, else
/// live (the Skill controller may have created it before this cache saw it).
async fn version_keys(
    ctx: &Context,
    namespace: &str,
    versions: impl Iterator<Item = &ResolvedSkill>,
) -> Result<BTreeMap<String, Vec<String>>, Error> {
    let api: Api<ConfigMap> = Api::namespaced(ctx.shared.client.clone(), namespace);
    let mut found = BTreeMap::new();
    for skill in versions {
        let name = config_map_name(&skill.name, &skill.digest);
        let keys = |cm: &ConfigMap| -> Vec<String> {
            cm.data.iter().flatten().map(|(k, _)| k.clone()).collect()
        };
        let cached = ctx
            .config_maps
            .get(&ObjectRef::new(&name).within(namespace));
        let keys = match cached {
            Some(cm) => Some(keys(&cm)),
            None => api.get_opt(&name).await?.as_ref().map(keys),
        };
        if let Some(keys) = keys {
            found.insert(name, keys);
        }
    }
    Ok(found)
}
