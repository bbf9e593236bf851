//! The children routes of the run API (docs/operator.md, step 7): a runner's `task` call starts a child
//! Run (`POST children`, through [`create_child`], which enforces `maxTotal`, `maxDepth` and the
//! narrowed budget whatever the runner claims), waits for its outcome (`GET
//! children/{toolCallId}?wait=`, a long poll woken by the Run cache's watch events) and fetches
//! the files it presented (`GET children/{toolCallId}/files/{n}`). A child is found by the name
//! `create_child` gives it and counts only when its controller owner is the Run in the path.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Json, Response};
use herd_crds::run::{Run, phase_of};
use herd_crds::wire::{ChildOutcome, ChildRequest, FILE_CONTENT_TYPE, FILE_PATH_HEADER, MAX_BODY};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use tracing::info;

use super::RunApi;
use super::admit::{Admitted, Posted};
use super::authorize::RunPath;
use super::child_outcome::{child_outcome, deleted, going};
use super::failure::Failure;
use super::long_poll::{WaitQuery, long_poll};
use super::result_config_map::{presented_file, result_name};
use crate::controller::create_child::{ChildError, create_child};
use crate::controller::run_objects::owned_by;
use crate::decide::child_run::{Refusal, child_name};
use crate::error::Error;

/// What stays as it is in [`FILE_PATH_HEADER`]: a URL path's unreserved characters and `/`.
const PATH_KEPT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'/');

/// `POST children`: 201 with the new child's name; 200 when the `toolCallId` has its child
/// already, with its outcome once it has ended.
pub async fn start_child(
    State(api): State<Arc<RunApi>>,
    headers: HeaderMap,
    Posted(admitted, request): Posted<ChildRequest>,
) -> Result<Response, Failure> {
    let traceparent = headers
        .get("traceparent")
        .and_then(|value| value.to_str().ok());
    let child = create_child(&api.client, &admitted.run, &request, traceparent)
        .await
        .map_err(refused)?;
    if child.created {
        info!(run = %admitted.path, child = %child.name, call = %request.tool_call_id,
            "child Run created");
        return Ok((StatusCode::CREATED, Json(going(child.name))).into_response());
    }
    let live = api.live_run(&admitted.path.namespace, &child.name).await?;
    let outcome = match live {
        Some(run) if owned_by(&run, &admitted.uid) => child_outcome(&run),
        _ => deleted(child.name),
    };
    Ok(Json(outcome).into_response())
}

/// `GET children/{toolCallId}?wait=`: the child's outcome once it has ended, else (after the
/// wait) its name only.
pub async fn child_outcome_of(
    State(api): State<Arc<RunApi>>,
    Path((namespace, name, call)): Path<(String, String, String)>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Response, Failure> {
    let admitted = api
        .admit(RunPath::from((namespace, name)), &headers, MAX_BODY)
        .await?;
    let wait = WaitQuery::from_query(query.as_deref())?;
    let child = api.child(&admitted, &call).await?;
    let name = child.name_any();
    let uid = child.uid().unwrap_or_default();
    let watched = ObjectRef::new(&name).within(&admitted.path.namespace);
    let outcome = long_poll(
        &admitted.caches.changes,
        &[&watched],
        wait.duration(),
        || api.ended_child(&admitted, &watched, &uid),
    )
    .await?;
    Ok(Json(outcome.unwrap_or_else(|| going(name))).into_response())
}

/// `GET children/{toolCallId}/files/{n}`: the bytes of the `n`-th file the child presented,
/// its path in [`FILE_PATH_HEADER`].
pub async fn child_file(
    State(api): State<Arc<RunApi>>,
    Path((namespace, name, call, n)): Path<(String, String, String, String)>,
    headers: HeaderMap,
) -> Result<Response, Failure> {
    let admitted = api
        .admit(RunPath::from((namespace, name)), &headers, MAX_BODY)
        .await?;
    let child = api.child(&admitted, &call).await?;
    let name = child.name_any();
    let no_file = || Failure::not_found(format!("the child Run {name} presented no file {n}"));
    let index: usize = n.parse().map_err(|_| no_file())?;
    let config_maps: Api<ConfigMap> = Api::namespaced(api.client.clone(), &admitted.path.namespace);
    let result = config_maps
        .get_opt(&result_name(&name))
        .await
        .map_err(|e| Failure::kube("reading the child's result", &e))?
        .filter(|cm| owned_by(cm, &child.uid().unwrap_or_default()))
        .ok_or_else(no_file)?;
    let (path, bytes) = presented_file(&result, index).ok_or_else(no_file)?;
    let encoded = HeaderValue::from_str(&encode_path(&path))
        .map_err(|_| Failure::internal(format!("the path of file {n} is not a header value")))?;
    let mut response = Body::from(bytes.to_vec()).into_response();
    let answer = response.headers_mut();
    answer.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(FILE_CONTENT_TYPE),
    );
    answer.insert(header::CONTENT_LENGTH, HeaderValue::from(bytes.len()));
    answer.insert(FILE_PATH_HEADER, encoded);
    Ok(response)
}

impl RunApi {
    /// The child Run of the Run in the path for the `task` call `call`: cached, else read live;
    /// never another Run's.
    async fn child(&self, admitted: &Admitted, call: &str) -> Result<Arc<Run>, Failure> {
        let name = child_name(&admitted.path.name, &admitted.uid, call);
        let namespace = &admitted.path.namespace;
        let cached = admitted
            .caches
            .runs
            .get(&ObjectRef::new(&name).within(namespace))
            .filter(|run| owned_by(run.as_ref(), &admitted.uid));
        if let Some(run) = cached {
            return Ok(run);
        }
        self.live_run(namespace, &name)
            .await?
            .filter(|run| owned_by(run, &admitted.uid))
            .map(Arc::new)
            .ok_or_else(|| {
                Failure::not_found(format!(
                    "Run {} has no child Run for toolCallId {call:?}",
                    admitted.path
                ))
            })
    }

    /// The Run `name`, read live.
    async fn live_run(&self, namespace: &str, name: &str) -> Result<Option<Run>, Failure> {
        let runs: Api<Run> = Api::namespaced(self.client.clone(), namespace);
        runs.get_opt(name)
            .await
            .map_err(|e| Failure::kube("reading the child Run", &e))
    }

    /// The outcome of the child `watched` (of UID `uid`) once it has ended or is gone; `None`
    /// while the cache shows it going. The cache lacks the result, so an end is read live.
    async fn ended_child(
        &self,
        admitted: &Admitted,
        watched: &ObjectRef<Run>,
        uid: &str,
    ) -> Result<Option<ChildOutcome>, Failure> {
        let cached = admitted
            .caches
            .runs
            .get(watched)
            .filter(|run| run.uid().as_deref() == Some(uid));
        if cached.is_some_and(|run| !is_finished(&run)) {
            return Ok(None);
        }
        let live = self
            .live_run(&admitted.path.namespace, &watched.name)
            .await?;
        Ok(match live {
            Some(run) if run.uid().as_deref() == Some(uid) => {
                is_finished(&run).then(|| child_outcome(&run))
            }
            _ => Some(deleted(watched.name.clone())),
        })
    }
}

fn is_finished(run: &Run) -> bool {
    run.status
        .as_ref()
        .is_some_and(|s| phase_of(&s.conditions).is_finished())
}

/// A file's virtual path as [`FILE_PATH_HEADER`] carries it.
fn encode_path(path: &str) -> String {
    utf8_percent_encode(path, PATH_KEPT).to_string()
}

/// Why no child was started, as the runner (and through it the model) is told: the Agent's
/// limits and an invalid request are 4xx that say which limit; a parent that has ended or moved
/// to a later attempt is 409 (its runner stops); the API server's trouble is 503 (retried).
fn refused(error: ChildError) -> Failure {
    match error {
        ChildError::Refused(Refusal::Invalid(why)) => Failure::bad_request(why),
        ChildError::Refused(limit) => Failure::forbidden(limit.to_string()),
        ChildError::ParentGone(why) => Failure::not_found(why),
        ChildError::ParentEnded(why) => Failure::ended(why),
        ChildError::StaleAttempt { asked, current, .. } => Failure::stale_attempt(asked, current),
        ChildError::NoSnapshot(why) => Failure::internal(why),
        ChildError::Retry(why) => Failure::unavailable(why),
        ChildError::Api(Error::Kube(error)) => Failure::kube("starting the child Run", &error),
        ChildError::Api(error) => Failure::internal(format!("starting the child Run: {error}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use percent_encoding::percent_decode_str;
    use proptest::prelude::*;

    #[test]
    fn refusals_say_which_limit_and_how_to_go_on() {
        let cases = [
            (
                ChildError::Refused(Refusal::TotalReached { max_total: 6 }),
                403,
                "this Run has started 6 child Runs, its maxTotal",
            ),
            (
                ChildError::Refused(Refusal::TooDeep {
                    depth: 1,
                    max_depth: 1,
                }),
                403,
                "a Run at depth 1 cannot delegate: maxDepth is 1",
            ),
            (
                ChildError::Refused(Refusal::NotEnabled),
                403,
                "subagents are not enabled for this Run",
            ),
            (
                ChildError::Refused(Refusal::NoTimeLeft),
                403,
                "no time left for a child Run",
            ),
            (
                ChildError::Refused(Refusal::Invalid("unknown subagent type".into())),
                400,
                "unknown subagent type",
            ),
            (
                ChildError::ParentGone("the parent Run p is gone".into()),
                404,
                "the parent Run p is gone",
            ),
            (
                ChildError::ParentEnded("the parent Run p has ended".into()),
                409,
                "the parent Run p has ended",
            ),
            (
                ChildError::StaleAttempt {
                    parent: "p".into(),
                    asked: 1,
                    current: 2,
                },
                409,
                "this Pod serves attempt 1, but the Run is at attempt 2",
            ),
            (
                ChildError::NoSnapshot("the parent Run p has no snapshot".into()),
                500,
                "the parent Run p has no snapshot",
            ),
            (ChildError::Retry("try again".into()), 503, "try again"),
        ];
        for (error, status, message) in cases {
            let failure = refused(error);
            assert_eq!(
                (failure.status.as_u16(), failure.message.as_str()),
                (status, message)
            );
        }
        let down = refused(ChildError::Api(Error::Kube(kube::Error::Api(
            kube::core::Status::failure("etcd", "InternalError")
                .with_code(500)
                .boxed(),
        ))));
        assert_eq!(down.status.as_u16(), 503);
        assert!(
            down.message.starts_with("starting the child Run: "),
            "{}",
            down.message
        );
        let missing = refused(ChildError::Api(Error::MissingField("metadata.uid")));
        assert_eq!(missing.status.as_u16(), 500);
    }

    #[test]
    fn paths_are_percent_encoded_as_url_paths() {
        assert_eq!(
            encode_path("/mnt/user-data/outputs/a b/résumé (1).md"),
            "/mnt/user-data/outputs/a%20b/r%C3%A9sum%C3%A9%20%281%29.md"
        );
        assert_eq!(
            encode_path("/mnt/user-data/outputs/x%y\n"),
            "/mnt/user-data/outputs/x%25y%0A"
        );
    }

    proptest! {
        #[test]
        fn every_path_is_a_header_value_that_decodes_back(path in "\\PC{0,60}") {
            let encoded = encode_path(&path);
            prop_assert!(HeaderValue::from_str(&encoded).is_ok());
            prop_assert_eq!(percent_decode_str(&encoded).decode_utf8().ok(), Some(path.into()));
        }
    }
}
