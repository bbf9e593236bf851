//! `POST clarification`: the runner asks the user a question and waits in the same Pod. In
//! order: the checkpoint into `<run>-checkpoint` (or, past its limit, none), then
//! `status.report` (`InputRequired` with the question, or `CheckpointTooLarge`), then the
//! runner's 200 with the stop reason stored (`{"stopReason": ...}`, as `result` answers). A
//! child Run cannot ask: its parent's model answers for it.

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Json, Response};
use herd_crds::report::{Clarification, StopReason};
use herd_crds::wire::{ClarificationRequest, ResultAccepted};
use kube::Resource;
use tracing::info;

use super::RunApi;
use super::admit::{Admitted, Posted, check_live};
use super::checkpoint::{decode_checkpoint, too_large, write_checkpoint};
use super::failure::Failure;
use super::progress::RunInstance;
use super::report::{
    AfterClarification, Awaiting, Checkpointed, after_clarification, truncate_chars,
};
use super::report_writer::{Written, write_report};

/// Most characters of a question's id (`spec.responses[].id` quotes it).
pub const MAX_QUESTION_ID: usize = 64;
/// Most characters of a question and of its context.
pub const MAX_QUESTION: usize = 4096;
/// Most options offered.
pub const MAX_OPTIONS: usize = 24;

/// The question as the CRD takes it: refused without an id or text, or with an id over
/// [`MAX_QUESTION_ID`] or a malformed `askedAt`; texts cut and options capped to its limits.
pub fn checked_question(question: Clarification) -> Result<Clarification, Failure> {
    if question.id.is_empty() || question.id.chars().count() > MAX_QUESTION_ID {
        return Err(Failure::bad_request(format!(
            "a question's id must be 1 to {MAX_QUESTION_ID} characters"
        )));
    }
    if question.question.trim().is_empty() {
        return Err(Failure::bad_request("the question is empty"));
    }
    question
        .validate()
        .map_err(|errors| Failure::bad_request(errors.to_string()))?;
    Ok(Clarification {
        question: truncate_chars(&question.question, MAX_QUESTION).0,
        context: question.context.map(|c| truncate_chars(&c, MAX_QUESTION).0),
        options: question.options.into_iter().take(MAX_OPTIONS).collect(),
        ..question
    })
}

/// `POST /v1/runs/{namespace}/{name}/clarification`.
pub async fn clarification(
    State(api): State<Arc<RunApi>>,
    Posted(admitted, request): Posted<ClarificationRequest>,
) -> Result<Response, Failure> {
    if admitted.run.spec.parent_ref.is_some() {
        return Err(Failure::bad_request(
            "a child Run cannot ask the user a question",
        ));
    }
    let question = checked_question(request.clarification)?;
    store_awaiting(
        &api,
        &admitted,
        (request.attempt, request.seq),
        Awaiting::Question(&question),
        &request.checkpoint_gzip_base64,
    )
    .await
}

/// Stores what a runner waits for (a question, or tool calls held for approval) and its
/// checkpoint for `(attempt, seq)`, in this module's order: the checkpoint, then the report,
/// then the runner's 200 with the stop reason stored.
pub(super) async fn store_awaiting(
    api: &RunApi,
    admitted: &Admitted,
    (attempt, seq): (u32, u64),
    asked: Awaiting<'_>,
    checkpoint_gzip_base64: &str,
) -> Result<Response, Failure> {
    let gzip = decode_checkpoint(checkpoint_gzip_base64)?;
    // The cache is never ahead of the live report: refuse an older question before its
    // checkpoint replaces a newer one.
    let cached = admitted.run.status.as_ref().and_then(|s| s.report.as_ref());
    if let Some(live) = cached.filter(|r| r.attempt == attempt && r.seq > seq) {
        return Err(Failure::bad_request(format!(
            "seq {seq} is below the report's {}",
            live.seq
        )));
    }
    let key = RunInstance {
        path: admitted.path.clone(),
        uid: admitted.uid.clone(),
    };
    // Progress sent just before the question may still wait in the coalescer (or be on its
    // way): the question's report carries it, so the todos written before asking show.
    let progress = api.progress.latest(&key);
    api.progress.forget(&key);
    let name = &admitted.path.name;
    let namespace = &admitted.path.namespace;
    let ids = asked.ids();
    let checkpointed = match too_large(name, gzip.len()) {
        Some(why) => Checkpointed::TooLarge(why),
        None => {
            let owner = admitted
                .run
                .controller_owner_ref(&())
                .ok_or_else(|| Failure::internal("the Run has no UID"))?;
            write_checkpoint(&api.client, namespace, name, owner, gzip, &ids).await?;
            Checkpointed::Written
        }
    };
    let written = write_report(&api.client, namespace, name, |live| {
        check_live(live, admitted)?;
        let current = live.status.as_ref().and_then(|s| s.report.as_ref());
        Ok(
            match after_clarification(
                current,
                attempt,
                seq,
                asked,
                &checkpointed,
                progress.as_ref().map(|body| &body.report),
                progress.as_ref().and_then(|body| body.sandbox.as_ref()),
            )? {
                AfterClarification::Write(next) => {
                    let stop = next.stop_reason.unwrap_or(StopReason::InputRequired);
                    (Some(*next), stop)
                }
                AfterClarification::Stored(stop) => (None, stop),
            },
        )
    })
    .await?;
    let stop_reason = match written {
        Written::Applied(stop) => {
            info!(run = %admitted.path, attempt = admitted.attempt, ids = ?ids, ?stop, "stored what the run waits for");
            stop
        }
        Written::Skipped(stop) => stop,
    };
    Ok(Json(ResultAccepted { stop_reason }).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;
    use herd_crds::report::ClarificationType;

    fn question(id: &str, text: &str) -> Clarification {
        Clarification {
            id: id.into(),
            question: text.into(),
            kind: ClarificationType::MissingInfo,
            context: Some("c".repeat(MAX_QUESTION + 5)),
            options: (0..30).map(|n| n.to_string()).collect(),
            asked_at: Some("2026-01-31T09:30:00Z".into()),
        }
    }

    #[test]
    fn a_question_is_cut_to_the_crds_limits() {
        let long = "é".repeat(MAX_QUESTION + 1);
        let checked = checked_question(question("q-call_1", &long)).unwrap();
        assert_eq!(checked.id, "q-call_1");
        assert_eq!(checked.question.chars().count(), MAX_QUESTION);
        assert_eq!(checked.context.unwrap().chars().count(), MAX_QUESTION);
        assert_eq!(checked.options.len(), MAX_OPTIONS);
        assert_eq!(checked.asked_at.as_deref(), Some("2026-01-31T09:30:00Z"));
    }

    #[test]
    fn a_question_without_an_id_or_text_or_with_a_bad_time_is_refused() {
        for refused in [
            question("", "Which?"),
            question(&"q".repeat(MAX_QUESTION_ID + 1), "Which?"),
            question("q", "  "),
            Clarification {
                asked_at: Some("yesterday".into()),
                ..question("q", "Which?")
            },
        ] {
            assert_eq!(
                checked_question(refused.clone())
                    .unwrap_err()
                    .status
                    .as_u16(),
                400,
                "{refused:?}"
            );
        }
        assert!(checked_question(question(&"q".repeat(MAX_QUESTION_ID), "Which?")).is_ok());
    }
}
