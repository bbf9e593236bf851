//! A parent's side of its child Runs: which Runs are its children (it owns them), their states in
//! its `status.children` and `childCounts`, their cancellation once it has ended, and the wake
//! of the parent when one of them changes. A child is never deleted by its TTL while its parent
//! lives (the parent's deletion takes it along).

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::channel::mpsc::UnboundedSender;
use herd_crds::run::{Run, RunStatus, phase_of};
use kube::api::{Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use tracing::info;

use super::run_context::{Context, Ids};
use super::run_objects::{controller_uid, owned_by};
use crate::controller_state::FIELD_MANAGER;
use crate::decide::child_run::children_status;
use crate::error::Error;
use crate::scope::WatchEvent;

/// The Run's children the cache shows (Runs it owns that name it as parent). Only a Run that
/// reserved children has any: `create_child` reserves before it creates.
pub(super) fn children_of(ctx: &Context, ids: &Ids<'_>, previous: &RunStatus) -> Vec<Arc<Run>> {
    if previous.children.is_empty() {
        return Vec::new();
    }
    ctx.runs
        .state()
        .into_iter()
        .filter(|run| run.metadata.namespace.as_deref() == Some(ids.namespace))
        .filter(|run| {
            run.spec
                .parent_ref
                .as_ref()
                .is_some_and(|p| p.name == ids.name)
        })
        .filter(|run| owned_by(run.as_ref(), &ids.uid))
        .collect()
}

/// Sets `status.children` and `childCounts` from the reserved children and the cached ones.
pub(super) fn set_children(status: &mut RunStatus, previous: &RunStatus, children: &[Arc<Run>]) {
    let seen: BTreeMap<String, herd_crds::run::RunPhase> = children
        .iter()
        .map(|child| {
            let conditions = child
                .status
                .as_ref()
                .map(|s| s.conditions.as_slice())
                .unwrap_or_default();
            (child.name_any(), phase_of(conditions))
        })
        .collect();
    let (children, counts) = children_status(&previous.children, &seen);
    status.children = children;
    status.child_counts = counts;
}

/// Sets `spec.cancel` on each unfinished child of an ended parent.
pub(super) async fn cancel_children(
    client: &Client,
    namespace: &str,
    children: &[Arc<Run>],
) -> Result<(), Error> {
    let api: Api<Run> = Api::namespaced(client.clone(), namespace);
    let cancel = serde_json::json!({"spec": {"cancel": true}});
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    for child in children {
        let finished = child
            .status
            .as_ref()
            .is_some_and(|s| phase_of(&s.conditions).is_finished());
        if finished || child.spec.cancel {
            continue;
        }
        let name = child.name_any();
        info!(%namespace, child = %name, "the parent ended: cancelling its child");
        match api.patch(&name, &params, &Patch::Merge(&cancel)).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => return Err(error.into()),
        }
    }
    Ok(())
}

/// Whether `run` is a child whose parent (the Run that owns it) still exists.
pub(super) fn parent_alive(ctx: &Context, run: &Run) -> bool {
    let (Some(parent), Some(owner), Some(namespace)) = (
        run.spec.parent_ref.as_ref(),
        controller_uid(run),
        run.metadata.namespace.as_deref(),
    ) else {
        return false;
    };
    ctx.runs
        .get(&ObjectRef::new(&parent.name).within(namespace))
        .is_some_and(|p| p.uid().as_deref() == Some(owner))
}

/// Wakes the parent of every child Run a watch event touches.
pub(super) fn wake_parents(wake: &UnboundedSender<ObjectRef<Run>>, event: &WatchEvent<Run>) {
    let run = match event {
        Ok(watcher::Event::Apply(run) | watcher::Event::Delete(run)) => run,
        _ => return,
    };
    if let (Some(parent), Some(namespace)) = (&run.spec.parent_ref, &run.metadata.namespace) {
        // The controller's end of the channel lives as long as the operator.
        let _ = wake.unbounded_send(ObjectRef::new(&parent.name).within(namespace));
    }
}
