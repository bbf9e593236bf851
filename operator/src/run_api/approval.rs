//! `POST approval`: tool calls of one turn wait for a person's decision, the run in the same
//! Pod. Stored the way a question is ([`super::clarification::store_awaiting`]): the
//! checkpoint, then `status.report.approvals` (`InputRequired`), then the runner's 200 with the
//! stop reason stored. The decisions come back through `GET answers/{id}`, from
//! `spec.responses`. A child Run may ask too: it inherits its parent's rules, and a person
//! decides on it as on any Run.

use std::sync::Arc;

use axum::extract::State;
use axum::response::Response;
use herd_crds::approval::{
    ApprovalRequest, MAX_APPROVAL_ARGUMENTS, MAX_APPROVAL_ID, MAX_PENDING_APPROVALS,
};
use herd_crds::wire::ApprovalAsk;

use super::RunApi;
use super::admit::Posted;
use super::clarification::store_awaiting;
use super::failure::Failure;
use super::report::{Awaiting, truncate_chars};

/// Most characters of a tool's name and of a call id.
const MAX_NAME: usize = 128;

/// The requests as the CRD takes them: refused when there are none, too many, or one without
/// an id (or with one too long, or twice), or with a malformed `askedAt`; names and arguments
/// cut to its limits.
pub fn checked_requests(requests: Vec<ApprovalRequest>) -> Result<Vec<ApprovalRequest>, Failure> {
    if requests.is_empty() || requests.len() > MAX_PENDING_APPROVALS {
        return Err(Failure::bad_request(format!(
            "an approval asks about 1 to {MAX_PENDING_APPROVALS} tool calls"
        )));
    }
    let mut checked: Vec<ApprovalRequest> = Vec::with_capacity(requests.len());
    for request in requests {
        if request.id.is_empty() || request.id.chars().count() > MAX_APPROVAL_ID {
            return Err(Failure::bad_request(format!(
                "an approval request's id must be 1 to {MAX_APPROVAL_ID} characters"
            )));
        }
        if checked.iter().any(|c| c.id == request.id) {
            return Err(Failure::bad_request(format!(
                "the approval request {:?} is there twice",
                request.id
            )));
        }
        request
            .validate()
            .map_err(|errors| Failure::bad_request(errors.to_string()))?;
        let (arguments, cut) = truncate_chars(&request.arguments, MAX_APPROVAL_ARGUMENTS);
        checked.push(ApprovalRequest {
            tool: truncate_chars(&request.tool, MAX_NAME).0,
            call_id: truncate_chars(&request.call_id, MAX_NAME).0,
            truncated: request.truncated || cut,
            arguments,
            ..request
        });
    }
    Ok(checked)
}

/// `POST /v1/runs/{namespace}/{name}/approval`.
pub async fn approval(
    State(api): State<Arc<RunApi>>,
    Posted(admitted, request): Posted<ApprovalAsk>,
) -> Result<Response, Failure> {
    let requests = checked_requests(request.approvals)?;
    store_awaiting(
        &api,
        &admitted,
        (request.attempt, request.seq),
        Awaiting::Approval(&requests),
        &request.checkpoint_gzip_base64,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(id: &str) -> ApprovalRequest {
        ApprovalRequest {
            id: id.into(),
            tool: "t".repeat(MAX_NAME + 3),
            arguments: "é".repeat(MAX_APPROVAL_ARGUMENTS + 1),
            truncated: false,
            call_id: "call_1".into(),
            asked_at: Some("2026-01-31T09:30:00Z".into()),
        }
    }

    #[test]
    fn requests_are_cut_to_the_crds_limits() {
        let checked = checked_requests(vec![request("a-1"), request("a-2")]).unwrap();
        assert_eq!(checked.len(), 2);
        assert_eq!(checked[0].tool.chars().count(), MAX_NAME);
        assert_eq!(checked[0].arguments.chars().count(), MAX_APPROVAL_ARGUMENTS);
        assert!(checked[0].truncated);
        assert_eq!(checked[1].id, "a-2");
    }

    #[test]
    fn none_too_many_bad_ids_twice_or_a_bad_time_are_refused() {
        let too_many: Vec<_> = (0..=MAX_PENDING_APPROVALS)
            .map(|n| request(&format!("a-{n}")))
            .collect();
        for refused in [
            vec![],
            too_many,
            vec![request("")],
            vec![request(&"a".repeat(MAX_APPROVAL_ID + 1))],
            vec![request("a-1"), request("a-1")],
            vec![ApprovalRequest {
                asked_at: Some("yesterday".into()),
                ..request("a-1")
            }],
        ] {
            assert_eq!(checked_requests(refused).unwrap_err().status.as_u16(), 400);
        }
    }
}
