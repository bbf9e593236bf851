//! The routes of the run API (docs/run-api.md), under `/v1/runs/{namespace}/{name}/`: `config`,
//! `progress` and `result` here; `children` ([`super::children`]), `clarification`
//! ([`super::clarification`]), `approval` ([`super::approval`]), `checkpoint` ([`super::interruption`]), `answers` ([`super::answers`]) and `memory` ([`super::memory`])
//! in their own modules. Every other path, and every refusal, answers an `ApiError`.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{get, post};
use herd_crds::report::StopReason;
use herd_crds::run::Run;
use herd_crds::wire::{MAX_BODY, ProgressBody, ResultAccepted, ResultReport};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource};
use tracing::info;

use super::RunApi;
use super::admit::{Admitted, Posted, check_live};
use super::answers::answer;
use super::approval::approval;
use super::authorize::RunPath;
use super::checkpoint::read_checkpoint;
use super::children::{child_file, child_outcome_of, start_child};
use super::clarification::clarification;
use super::failure::Failure;
use super::interruption::interruption;
use super::memory::{read_memory, update_memory};
use super::progress::RunInstance;
use super::report::{AfterResult, Stored, after_result};
use super::report_writer::{Written, write_report};
use super::request_span::trace_request;
use super::result_config_map::{decode_files, result_config_map, write_result_config_map};
use super::run_config::run_config;
use crate::controller::run_objects::owned_by;
use crate::decide::run_snapshot::{Snapshot, read_snapshot};
use crate::decide::run_status::snapshot_name;
use crate::metrics::run_api_requests::record;
use crate::metrics::usage::ReportOf;

/// The router of the run API, each request counted and timed by its route template, and
/// traced in its Run's trace.
pub fn router(api: Arc<RunApi>) -> Router {
    let measured = axum::middleware::from_fn_with_state(api.metrics.clone(), record);
    Router::new()
        .route("/v1/runs/{namespace}/{name}/config", get(config))
        .route("/v1/runs/{namespace}/{name}/progress", post(progress))
        .route("/v1/runs/{namespace}/{name}/result", post(result))
        .route(
            "/v1/runs/{namespace}/{name}/clarification",
            post(clarification),
        )
        .route("/v1/runs/{namespace}/{name}/approval", post(approval))
        .route("/v1/runs/{namespace}/{name}/answers/{id}", get(answer))
        .route("/v1/runs/{namespace}/{name}/checkpoint", post(interruption))
        .route(
            "/v1/runs/{namespace}/{name}/memory",
            get(read_memory).post(update_memory),
        )
        .route("/v1/runs/{namespace}/{name}/children", post(start_child))
        .route(
            "/v1/runs/{namespace}/{name}/children/{toolCallId}",
            get(child_outcome_of),
        )
        .route(
            "/v1/runs/{namespace}/{name}/children/{toolCallId}/files/{n}",
            get(child_file),
        )
        .fallback(no_route)
        .method_not_allowed_fallback(no_route)
        .layer(measured)
        .layer(axum::middleware::from_fn(trace_request))
        .with_state(api)
}

async fn no_route(method: Method, uri: Uri) -> Failure {
    Failure::not_found(format!("the run API has no route {method} {}", uri.path()))
}

async fn config(
    State(api): State<Arc<RunApi>>,
    Path(path): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, Failure> {
    let admitted = api.admit(RunPath::from(path), &headers, MAX_BODY).await?;
    let runs: Api<Run> = Api::namespaced(api.client.clone(), &admitted.path.namespace);
    let live = runs
        .get_opt(&admitted.path.name)
        .await
        .map_err(|e| Failure::kube("reading the Run", &e))?
        .ok_or_else(|| Failure::not_found(format!("Run {} is gone", admitted.path)))?;
    check_live(&live, &admitted)?;
    let snapshot = api.snapshot(&admitted).await?;
    let checkpoint = read_checkpoint(
        &api.client,
        &admitted.path.namespace,
        &admitted.path.name,
        &admitted.uid,
    )
    .await?;
    let now = Time(jiff::Timestamp::now());
    let mut config = run_config(
        &snapshot,
        &live.spec,
        admitted.attempt,
        live.status.as_ref(),
        &now,
        checkpoint.as_deref(),
    );
    config.token_budget = crate::controller::budget_allowance::token_budget(
        &api.client,
        &admitted.caches.runs,
        &live,
        &snapshot,
        config.token_budget,
    )
    .await
    .map_err(|e| Failure::kube("reading the Budgets", &e))?;
    Ok(Json(config).into_response())
}

impl RunApi {
    /// The Run's snapshot: cached, else read live; never another Run's.
    pub(super) async fn snapshot(&self, admitted: &Admitted) -> Result<Snapshot, Failure> {
        let name = snapshot_name(&admitted.path.name);
        let namespace = &admitted.path.namespace;
        let cached = admitted
            .caches
            .config_maps
            .get(&ObjectRef::new(&name).within(namespace))
            .filter(|cm| owned_by(cm.as_ref(), &admitted.uid));
        let config_map = match cached {
            Some(cm) => cm,
            None => {
                let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
                api.get_opt(&name)
                    .await
                    .map_err(|e| Failure::kube("reading the Run's snapshot", &e))?
                    .filter(|cm| owned_by(cm, &admitted.uid))
                    .map(Arc::new)
                    .ok_or_else(|| {
                        Failure::internal(format!("the Run's snapshot {name} is missing"))
                    })?
            }
        };
        read_snapshot(&config_map)
            .ok_or_else(|| Failure::internal(format!("the Run's snapshot {name} does not parse")))
    }
}

async fn progress(
    State(api): State<Arc<RunApi>>,
    Posted(admitted, report): Posted<ProgressBody>,
) -> Result<Response, Failure> {
    count_usage(
        &api,
        &admitted,
        report.report.seq,
        &report.report.usage,
        &report.report.calls,
    );
    let key = RunInstance {
        path: admitted.path,
        uid: admitted.uid,
    };
    // A stale report is dropped without a word: the runner has a newer one out already.
    api.progress.offer(key, report);
    Ok((StatusCode::ACCEPTED, Json(serde_json::json!({}))).into_response())
}

/// Counts the tokens and cost a report of `admitted` at `seq` adds (once per report, however
/// often it is sent; stale ones add nothing).
fn count_usage(
    api: &RunApi,
    admitted: &Admitted,
    seq: u64,
    usage: &herd_crds::report::Usage,
    calls: &herd_crds::wire::CallStats,
) {
    let shown = admitted
        .run
        .status
        .as_ref()
        .and_then(|status| status.report.as_ref())
        .map(|report| &report.usage);
    api.metrics.usage().report(
        ReportOf {
            namespace: &admitted.path.namespace,
            agent: &admitted.run.spec.agent_ref.name,
            uid: &admitted.uid,
            attempt: admitted.attempt,
            seq,
        },
        usage,
        calls,
        shown,
    );
}

async fn result(
    State(api): State<Arc<RunApi>>,
    Posted(admitted, report): Posted<ResultReport>,
) -> Result<Response, Failure> {
    if report.stop_reason == StopReason::Interrupted {
        return Err(Failure::bad_request(
            "an interrupted runner posts its checkpoint (POST checkpoint), not a result",
        ));
    }
    let files = decode_files(&report.files)?;
    api.progress.forget(&RunInstance {
        path: admitted.path.clone(),
        uid: admitted.uid.clone(),
    });
    let owner = admitted
        .run
        .controller_owner_ref(&())
        .ok_or_else(|| Failure::internal("the Run has no UID"))?;
    let stored = match result_config_map(
        &admitted.path.name,
        &admitted.path.namespace,
        owner,
        &report.text,
        &files,
    ) {
        Ok((config_map, artifacts)) => {
            write_result_config_map(&api.client, &admitted.uid, config_map).await?;
            Stored::Written(artifacts)
        }
        Err(why) => Stored::TooLarge(why),
    };
    let written = write_report(
        &api.client,
        &admitted.path.namespace,
        &admitted.path.name,
        |live| {
            check_live(live, &admitted)?;
            let current = live.status.as_ref().and_then(|s| s.report.as_ref());
            Ok(match after_result(current, &report, &stored)? {
                AfterResult::Write(next) => {
                    let stop = next.stop_reason.unwrap_or(report.stop_reason);
                    (Some(*next), stop)
                }
                AfterResult::Stored(stop) => (None, stop),
            })
        },
    )
    .await?;
    count_usage(
        &api,
        &admitted,
        report.seq,
        &report.usage,
        &herd_crds::wire::CallStats::default(),
    );
    let stop_reason = match written {
        Written::Applied(stop) => {
            info!(run = %admitted.path, attempt = admitted.attempt, ?stop, "result stored");
            stop
        }
        Written::Skipped(stop) => stop,
    };
    Ok(Json(ResultAccepted { stop_reason }).into_response())
}
