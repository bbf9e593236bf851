//! `POST checkpoint`: an attempt stopped by SIGTERM while it worked (its Pod deleted, evicted,
//! drained) posts its thread before it exits, into `<run>-checkpoint`, so another attempt
//! resumes from it instead of starting over. Only the attempt the live Run is on may write it
//! (an older one would replace a newer question's checkpoint); the list of questions asked is
//! kept, and the report is not touched: how the attempt ends is the operator's to decide.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use herd_crds::run::Run;
use herd_crds::wire::CheckpointReport;
use kube::{Api, Resource};
use tracing::info;

use super::RunApi;
use super::admit::{Posted, check_live};
use super::checkpoint::{decode_checkpoint, too_large, write_checkpoint};
use super::failure::Failure;

/// `POST /v1/runs/{namespace}/{name}/checkpoint`: 204 once the checkpoint is written.
pub async fn interruption(
    State(api): State<Arc<RunApi>>,
    Posted(admitted, report): Posted<CheckpointReport>,
) -> Result<Response, Failure> {
    let gzip = decode_checkpoint(&report.checkpoint_gzip_base64)?;
    let name = &admitted.path.name;
    let namespace = &admitted.path.namespace;
    if let Some(why) = too_large(name, gzip.len()) {
        return Err(Failure::bad_request(why));
    }
    let runs: Api<Run> = Api::namespaced(api.client.clone(), namespace);
    let live = runs
        .get_opt(name)
        .await
        .map_err(|e| Failure::kube("reading the Run", &e))?
        .ok_or_else(|| Failure::not_found(format!("Run {} is gone", admitted.path)))?;
    check_live(&live, &admitted)?;
    if live
        .status
        .as_ref()
        .is_some_and(|status| status.completion_time.is_some())
    {
        return Err(Failure::ended(format!(
            "Run {} has ended: nothing will resume from a checkpoint",
            admitted.path
        )));
    }
    let owner = admitted
        .run
        .controller_owner_ref(&())
        .ok_or_else(|| Failure::internal("the Run has no UID"))?;
    let size = gzip.len();
    write_checkpoint(&api.client, namespace, name, owner, gzip, &[]).await?;
    info!(run = %admitted.path, attempt = admitted.attempt, size, "checkpoint of an interrupted attempt stored");
    Ok(StatusCode::NO_CONTENT.into_response())
}
