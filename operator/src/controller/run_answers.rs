//! Answers that match no question (docs/operator.md, step 6): judged once each by
//! [`crate::decide::answers`], remembered in the Run's annotation, and a Warning Event for
//! each ignored one; a Normal Event for each decision on a tool call, naming the field manager
//! that wrote it. The questions asked are read from the checkpoint's metadata, and who wrote a
//! decision from the Run's `managedFields`, only when a response is new.

use std::collections::BTreeSet;

use herd_crds::run::{Run, RunStatus};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use tracing::{info, warn};

use super::run_context::{Context, Ids};
use super::run_objects::owned_by;
use crate::controller_state::FIELD_MANAGER;
use crate::decide::answers::{
    ANSWER_IGNORED, JUDGED_ANNOTATION, judge, judged_answers, new_answers,
};
use crate::decide::approval_events::decision_events;
use crate::decide::asked_questions::{asked_questions, checkpoint_name};
use crate::error::Error;

/// Judges the Run's new answers; records them under the version read (a reconcile from a
/// stale cache gets a conflict rather than judging twice), then warns about the ignored ones
/// (a lost Event is only logged, a repeated one would mislead). Whether it wrote: the Run's
/// next version is then the one to reconcile.
pub(super) async fn judge_answers(
    ctx: &Context,
    api: &Api<Run>,
    run: &Run,
    ids: &Ids<'_>,
    previous: &RunStatus,
) -> Result<bool, Error> {
    let judged: BTreeSet<String> =
        judged_answers(run.annotations().get(JUDGED_ANNOTATION).map(String::as_str));
    let new = new_answers(&run.spec.responses, &judged);
    if new.is_empty() {
        return Ok(false);
    }
    let accepted = previous.start_time.is_some();
    let mut asked = if accepted {
        asked_of(ctx, ids).await?
    } else {
        Vec::new()
    };
    // The open approval requests are asked too (their ids also go into the checkpoint's list).
    let requests = previous
        .report
        .as_ref()
        .map(|r| r.approvals.clone())
        .unwrap_or_default();
    asked.extend(requests.iter().map(|r| r.id.clone()));
    let pending = previous
        .report
        .as_ref()
        .and_then(|r| r.clarification.as_ref())
        .map(|q| q.id.as_str());
    let judgement = judge(&new, &judged, accepted, pending, &asked);
    let patch = serde_json::json!({
        "metadata": {
            "resourceVersion": run.resource_version(),
            "annotations": {JUDGED_ANNOTATION: judgement.annotation()},
        }
    });
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    api.patch(ids.name, &params, &Patch::Merge(&patch)).await?;
    for (id, message) in judgement.ignored {
        warn!(run = ids.name, namespace = ids.namespace, answer = %id, "answer ignored");
        ctx.shared.event(run, true, ANSWER_IGNORED, message);
    }
    if new.iter().any(|response| response.decision.is_some()) {
        // The caches drop `managedFields`: who wrote a decision is read live, once.
        let managed = api
            .get_metadata(ids.name)
            .await?
            .metadata
            .managed_fields
            .unwrap_or_default();
        for (reason, message) in decision_events(&new, &requests, &managed) {
            info!(run = ids.name, namespace = ids.namespace, %message, "tool call decided");
            ctx.shared.event(run, false, reason, message);
        }
    }
    Ok(true)
}

/// The ids of the questions the Run asked, from its checkpoint's metadata (none without one).
async fn asked_of(ctx: &Context, ids: &Ids<'_>) -> Result<Vec<String>, Error> {
    let config_maps: Api<ConfigMap> = Api::namespaced(ctx.shared.client.clone(), ids.namespace);
    Ok(config_maps
        .get_metadata_opt(&checkpoint_name(ids.name))
        .await?
        .filter(|cm| owned_by(cm, &ids.uid))
        .map(|cm| asked_questions(&cm.metadata))
        .unwrap_or_default())
}
