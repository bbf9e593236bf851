//! Starting a new top-level Run's trace (docs/traces.md): a `reconcile Run` span whose
//! `traceparent` the Run keeps as its `herd.dev/traceparent` annotation. A child Run gets its
//! annotation from the run API instead (the span of its parent's `task` call).

use herd_crds::run::{Run, RunStatus, TRACEPARENT_ANNOTATION};
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};

use super::run_context::Ids;
use crate::controller_state::FIELD_MANAGER;
use crate::error::Error;
use crate::traces::start_run_trace;

/// Writes the trace annotation on a new top-level Run without one, when the operator records
/// traces; `true` when it did (the write's watch event reconciles the new version).
pub(super) async fn start_trace(
    api: &Api<Run>,
    run: &Run,
    ids: &Ids<'_>,
    previous: &RunStatus,
) -> Result<bool, Error> {
    let new = previous.start_time.is_none() && run.spec.parent_ref.is_none();
    if !new || run.annotations().contains_key(TRACEPARENT_ANNOTATION) {
        return Ok(false);
    }
    let Some(traceparent) = start_run_trace(ids.namespace, ids.name, &run.spec.agent_ref.name)
    else {
        return Ok(false);
    };
    let patch = serde_json::json!({
        "metadata": {
            "resourceVersion": run.resource_version(),
            "annotations": {TRACEPARENT_ANNOTATION: traceparent},
        }
    });
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    api.patch(ids.name, &params, &Patch::Merge(&patch)).await?;
    Ok(true)
}
