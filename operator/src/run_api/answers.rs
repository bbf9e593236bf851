//! `GET answers/{id}?wait=<s>`: the answer to the runner's question once `spec.responses` has
//! it, long-polled on the Run cache's watch events (the cache keeps `spec.responses`).
//!
//! `secondsLeft` is the working time left before the Run's deadline as the operator enforces
//! it, as `config` computes it: its `timeout` from `startTime`, less the time it waited for a
//! person (`status.waitedSeconds` and the current wait from `status.waitingSince`). Waiting is
//! bounded by `inputTimeout` from the `InputRequired` transition, which the operator enforces
//! itself (the Run ends `InputTimedOut` and its Pod is deleted), so after a long wait the
//! runner's deadline has exactly the working time the operator will still give it.

use std::sync::Arc;

use axum::extract::{Path, RawQuery, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Json, Response};
use herd_crds::run::{Run, RunStatus};
use herd_crds::wire::{Answer, AnswerPoll, MAX_BODY};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

use super::RunApi;
use super::admit::Admitted;
use super::authorize::RunPath;
use super::failure::Failure;
use super::long_poll::{WaitQuery, long_poll};
use super::run_config::seconds_left;

/// What a look at the cached Run found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Looked {
    /// The answer is there.
    Answered(Answer),
    /// The Run has finished: no answer will come.
    Finished,
}

/// What the cached Run says about the answer `id` to a Pod of `attempt` of the Run `uid`:
/// found, finished, not yet (`None`), or refused (gone, recreated, superseded).
pub fn look(
    run: Option<&Run>,
    uid: &str,
    attempt: u32,
    id: &str,
) -> Result<Option<Looked>, Failure> {
    let Some(run) = run.filter(|r| r.uid().as_deref() == Some(uid)) else {
        return Err(Failure::not_found("the Run is gone (deleted or recreated)"));
    };
    let status = run.status.as_ref();
    let current = status.and_then(|s| s.attempt).unwrap_or(0);
    if current > attempt {
        return Err(Failure::stale_attempt(attempt, current));
    }
    if let Some(given) = run.spec.responses.iter().find(|r| r.id == id) {
        return Ok(Some(Looked::Answered(Answer::from(given))));
    }
    Ok(status
        .is_some_and(|s| s.completion_time.is_some())
        .then_some(Looked::Finished))
}

/// `GET /v1/runs/{namespace}/{name}/answers/{id}?wait=<seconds>`.
pub async fn answer(
    State(api): State<Arc<RunApi>>,
    Path((namespace, name, id)): Path<(String, String, String)>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Response, Failure> {
    let wait = WaitQuery::from_query(query.as_deref())?;
    let admitted = api
        .admit(RunPath::from((namespace, name)), &headers, MAX_BODY)
        .await?;
    let snapshot = api.snapshot(&admitted).await?;
    let watched = ObjectRef::new(&admitted.path.name).within(&admitted.path.namespace);
    let runs = &admitted.caches.runs;
    let found = long_poll(
        &admitted.caches.changes,
        &[&watched],
        wait.duration(),
        || {
            let looked = look(
                runs.get(&watched).as_deref(),
                &admitted.uid,
                admitted.attempt,
                &id,
            );
            async move { looked }
        },
    )
    .await?;
    let status = status_of(&admitted);
    let now = Time(jiff::Timestamp::now());
    let poll = AnswerPoll {
        answer: match found {
            Some(Looked::Answered(answer)) => Some(answer),
            Some(Looked::Finished) | None => None,
        },
        seconds_left: Some(seconds_left(snapshot.run.timeout(), status.as_ref(), &now)),
    };
    Ok(Json(poll).into_response())
}

/// The Run's status (its clocks), as the cache has it now.
fn status_of(admitted: &Admitted) -> Option<RunStatus> {
    let watched = ObjectRef::new(&admitted.path.name).within(&admitted.path.namespace);
    admitted
        .caches
        .runs
        .get(&watched)
        .unwrap_or_else(|| admitted.run.clone())
        .status
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(responses: serde_json::Value, status: serde_json::Value) -> Run {
        serde_json::from_value(json!({
            "apiVersion": "herd.dev/v1alpha1", "kind": "Run",
            "metadata": {"name": "r", "namespace": "ns", "uid": "u"},
            "spec": {"agentRef": {"name": "a"}, "task": "", "responses": responses},
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn the_answer_is_found_by_its_id() {
        let asked = run(
            json!([{"id": "q-1", "answer": "EU"}, {"id": "q-2", "answer": "both"}]),
            json!({"attempt": 1}),
        );
        assert_eq!(
            look(Some(&asked), "u", 1, "q-2").unwrap(),
            Some(Looked::Answered(Answer::text("q-2", "both")))
        );
        assert_eq!(look(Some(&asked), "u", 1, "q-3").unwrap(), None, "not yet");
        let decided = run(
            json!([{"id": "a-1", "decision": "deny", "reason": "not on main"}]),
            json!({"attempt": 1}),
        );
        let Some(Looked::Answered(given)) = look(Some(&decided), "u", 1, "a-1").unwrap() else {
            panic!("the decision is an answer");
        };
        assert_eq!(
            (given.decision, given.reason.as_deref()),
            (
                Some(herd_crds::approval::ApprovalDecision::Deny),
                Some("not on main")
            )
        );
    }

    #[test]
    fn a_finished_run_answers_at_once_without_an_answer() {
        let done = run(
            json!([]),
            json!({"attempt": 1, "completionTime": "2026-01-01T00:00:00Z"}),
        );
        assert_eq!(
            look(Some(&done), "u", 1, "q-1").unwrap(),
            Some(Looked::Finished)
        );
    }

    #[test]
    fn a_gone_recreated_or_superseded_run_is_refused() {
        let asked = run(json!([]), json!({"attempt": 2}));
        assert_eq!(look(None, "u", 2, "q").unwrap_err().status.as_u16(), 404);
        assert_eq!(
            look(Some(&asked), "other", 2, "q")
                .unwrap_err()
                .status
                .as_u16(),
            404
        );
        let stale = look(Some(&asked), "u", 1, "q").unwrap_err();
        assert_eq!((stale.status.as_u16(), stale.reason), (409, "StaleAttempt"));
    }
}
