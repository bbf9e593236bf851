//! Approvals over the run API: the held calls and their checkpoint posted to `approval`, each
//! decision long-polled like an answer; decisions the Run already has handed out without
//! asking; an approval timeout denying or ending the run.

#![cfg(test)]

use herd_crds::approval::{ApprovalDecision, ApprovalRequest, OnApprovalTimeout, Verdict};
use herd_crds::wire::ApprovalAsk;

use super::super::test_server::{Canned, Reply, canned};
use super::*;
use crate::control::checkpoint::{Checkpoint, CheckpointStop};

fn held() -> Vec<ApprovalRequest> {
    vec![ApprovalRequest::new(
        "call_1",
        "bash",
        r#"{"command":"rm -rf build/"}"#,
    )]
}

fn poll(body: Value) -> Reply {
    Reply::json(200, &body).after(Duration::from_millis(100))
}

#[tokio::test]
async fn held_calls_are_posted_with_their_checkpoint_and_the_decision_polled() -> anyhow::Result<()>
{
    let setup = Setup::new(canned(Canned {
        answer_polls: vec![
            poll(json!({"secondsLeft": 20})),
            poll(json!({"answer": {"id": "a-call_1", "decision": "deny",
                "reason": "keep it"}, "secondsLeft": 20})),
        ],
        ..Canned::default()
    }))
    .await;
    let control = setup.control(vec![]);
    let state = ThreadState::new("Clean up.");
    let requests = held();
    let outcome = control.ask_approval(&requests, &state).await?;
    assert_eq!(
        outcome,
        ApprovalOutcome::Decided(vec![(
            "a-call_1".into(),
            Verdict::deny(Some("keep it".into()))
        )])
    );
    let posted = setup.server.requests_to("/approval");
    assert_eq!(posted.len(), 1);
    let body: ApprovalAsk = serde_json::from_slice(&posted[0].body)?;
    assert_eq!(body.approvals, requests);
    let checkpoint =
        Checkpoint::from_gzip_base64(&body.checkpoint_gzip_base64).map_err(anyhow::Error::msg)?;
    assert_eq!(checkpoint.stop, CheckpointStop::Approval(requests));
    assert_eq!(setup.server.requests_to("/answers/a-call_1").len(), 2);
    assert!(setup.server.requests_to("/clarification").is_empty());
    Ok(())
}

#[tokio::test]
async fn decisions_the_run_has_are_handed_out_without_asking() -> anyhow::Result<()> {
    let setup = Setup::new(canned(Canned::default())).await;
    let given = Answer {
        decision: Some(ApprovalDecision::Approve),
        ..Answer::text("a-call_1", "")
    };
    let control = setup.control(vec![given]);
    let outcome = control
        .ask_approval(&held(), &ThreadState::new("task"))
        .await?;
    assert_eq!(
        outcome,
        ApprovalOutcome::Decided(vec![("a-call_1".into(), Verdict::approve())])
    );
    assert!(setup.server.requests().is_empty());
    Ok(())
}

#[tokio::test]
async fn an_undecided_call_is_denied_or_ends_the_run_at_its_timeout() -> anyhow::Result<()> {
    for (on_timeout, expected) in [
        (
            OnApprovalTimeout::Deny,
            ApprovalOutcome::Decided(vec![(
                "a-call_1".into(),
                Verdict::deny(Some("no answer within 1s".into())),
            )]),
        ),
        (
            OnApprovalTimeout::Fail,
            ApprovalOutcome::Ended {
                reason: StopReason::ApprovalTimedOut,
                error: "a tool call waited for approval: no answer within 1s".into(),
            },
        ),
    ] {
        let setup = Setup::new(canned(Canned {
            answer_polls: vec![poll(json!({"secondsLeft": 20}))],
            ..Canned::default()
        }))
        .await;
        let control = setup.control(vec![]);
        control.use_approval_timeout(Duration::from_secs(1), on_timeout);
        let outcome = control
            .ask_approval(&held(), &ThreadState::new("task"))
            .await?;
        assert_eq!(outcome, expected);
        assert!(setup.server.requests_to("/answers/a-call_1").len() >= 2);
    }
    Ok(())
}

#[tokio::test]
async fn a_resumed_wait_counts_from_when_the_call_was_first_held() -> anyhow::Result<()> {
    let setup = Setup::new(canned(Canned {
        answer_polls: vec![poll(json!({"secondsLeft": 20}))],
        ..Canned::default()
    }))
    .await;
    let control = setup.control(vec![]);
    control.use_approval_timeout(Duration::from_secs(60), OnApprovalTimeout::Deny);
    let mut requests = held();
    let long_ago = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(120);
    requests[0].asked_at = Some(long_ago.to_string());
    let outcome = control
        .ask_approval(&requests, &ThreadState::new("task"))
        .await?;
    assert_eq!(
        outcome,
        ApprovalOutcome::Decided(vec![(
            "a-call_1".into(),
            Verdict::deny(Some("no answer within 1m".into()))
        )])
    );
    Ok(())
}
