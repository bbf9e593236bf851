//! Questions over the run API: the question and its checkpoint posted, the answer long-polled,
//! the deadline standing still and re-based meanwhile; a checkpoint too large summarized, then
//! refused.

#![cfg(test)]

use std::sync::atomic::AtomicUsize;

use anyhow::Context as _;
use base64::Engine as _;
use herd_crds::report::ClarificationType;
use herd_crds::wire::ClarificationRequest;
use rand::Rng as _;

use super::super::test_server::{Canned, Reply, canned};
use super::*;
use crate::control::checkpoint::{
    Checkpoint, CheckpointStop, MAX_CHECKPOINT_GZIP_BYTES, ThreadCompactor,
};
use crate::thread::Message;

fn question(id: &str) -> Clarification {
    Clarification {
        id: id.into(),
        question: "Which market?".into(),
        kind: ClarificationType::MissingInfo,
        context: Some("The task names none.".into()),
        options: vec!["Europe".into(), "Asia".into()],
        asked_at: Some("2026-05-01T10:00:00Z".into()),
    }
}

fn poll(body: Value) -> Reply {
    Reply::json(200, &body).after(Duration::from_millis(400))
}

fn posted_checkpoint(request: &Recorded) -> anyhow::Result<(ClarificationRequest, Checkpoint)> {
    let body: ClarificationRequest = serde_json::from_slice(&request.body)?;
    let checkpoint =
        Checkpoint::from_gzip_base64(&body.checkpoint_gzip_base64).map_err(anyhow::Error::msg)?;
    Ok((body, checkpoint))
}

// Over 80 lines: one question's wait, polled step by step on a paused clock; each step's
// state depends on the one before.
#[tokio::test]
async fn a_question_waits_for_a_later_poll_with_the_clock_stopped_then_rebased()
-> anyhow::Result<()> {
    let setup = Setup::new(canned(Canned {
        answer_polls: vec![
            poll(json!({"secondsLeft": 1})),
            poll(json!({"secondsLeft": 1})),
            poll(
                json!({"answer": {"id": "q-call_1_0", "answer": "Europe only"},
                "secondsLeft": 42}),
            ),
        ],
        ..Canned::default()
    }))
    .await;
    // A second left, and the polls take 1.2 s: only a stopped clock lets the run wait.
    let deadline = Deadline::at(Instant::now() + Duration::from_secs(1));
    let lead = deadline.earlier_by(Duration::from_millis(500));
    let control = setup.control_until(deadline.clone(), vec![]);
    control.report_progress(progress(100)).await?;
    let mut state = ThreadState::new("Map the market.");
    state
        .messages
        .push(Message::user("u-2", "Quickly, please."));
    state.todos = vec![herd_crds::report::Todo {
        content: "Ask for the market".into(),
        status: herd_crds::report::TodoStatus::InProgress,
    }];

    let asked = control.ask(&question("q-call_1_0"), &state).await?;

    assert_eq!(asked, AskOutcome::Answered("Europe only".into()));
    assert!(
        !lead.has_passed(),
        "the wait did not count against the timeout"
    );
    let left = deadline.left();
    assert!(
        left <= Duration::from_secs(42) && left > Duration::from_secs(41),
        "re-based on the last secondsLeft: {left:?}"
    );
    assert!(lead.left() < left, "the lead's view moved with it");

    let requests = setup.server.requests();
    let position = |suffix: &str| requests.iter().position(|r| r.path.ends_with(suffix));
    // The sender's task may post the same report again after the question; the run API takes
    // a `seq` once.
    let reported = requests
        .iter()
        .position(|r| {
            r.path.ends_with("/progress")
                && serde_json::from_slice::<ProgressReport>(&r.body)
                    .is_ok_and(|p| p.seq == 101 && p.todos == state.todos)
        })
        .expect("the todos of the moment the question was asked were reported");
    assert!(
        reported < position("/clarification").context("a question posted")?,
        "the progress before the question lands before it"
    );
    let asked = setup.server.requests_to("/clarification");
    assert_eq!(asked.len(), 1);
    let (body, checkpoint) = posted_checkpoint(&asked[0])?;
    assert_eq!(
        (body.attempt, body.seq),
        (1, 102),
        "after the last progress"
    );
    assert_eq!(body.clarification, question("q-call_1_0"));
    assert_eq!(
        checkpoint.stop,
        CheckpointStop::Question(question("q-call_1_0"))
    );
    assert_eq!(checkpoint.state, state);
    let polls = setup.server.requests_to("/answers/q-call_1_0");
    assert_eq!(polls.len(), 3);
    assert!(
        polls
            .iter()
            .all(|p| p.method == "GET" && p.query.as_deref() == Some("wait=55"))
    );
    Ok(())
}

#[tokio::test]
async fn an_answer_the_run_already_has_is_handed_out_without_asking() -> anyhow::Result<()> {
    let setup = Setup::new(canned(Canned::default())).await;
    let answers = vec![Answer::text("q-call_1_0", "Europe only")];
    let control = setup.control(answers);
    let state = ThreadState::new("task");
    assert_eq!(
        control.ask(&question("q-call_1_0"), &state).await?,
        AskOutcome::Answered("Europe only".into())
    );
    assert!(setup.server.requests().is_empty());
    Ok(())
}

#[tokio::test]
async fn an_answer_to_another_question_does_not_answer_this_one() -> anyhow::Result<()> {
    let setup = Setup::new(canned(Canned {
        answer_polls: vec![
            Reply::json(200, &json!({"answer": {"id": "q-other", "answer": "no"}})),
            Reply::json(200, &json!({"answer": {"id": "q/odd?#", "answer": "yes"}})),
        ],
        ..Canned::default()
    }))
    .await;
    let control = setup.control(vec![]);
    let asked = control
        .ask(&question("q/odd?#"), &ThreadState::new("task"))
        .await?;
    assert_eq!(asked, AskOutcome::Answered("yes".into()));
    let polls = setup.server.requests_to("/answers/q%2Fodd%3F%23");
    assert_eq!(polls.len(), 2, "the id is one path segment, encoded");
    Ok(())
}

#[tokio::test]
async fn a_newer_attempt_while_waiting_stops_the_run() -> anyhow::Result<()> {
    let setup = Setup::new(canned(Canned {
        answer_polls: vec![Reply::error(409, "StaleAttempt", "attempt 2 is current")],
        ..Canned::default()
    }))
    .await;
    let control = setup.control(vec![]);
    let error = control
        .ask(&question("q-1"), &ThreadState::new("task"))
        .await
        .unwrap_err();
    assert!(matches!(error, ControlError::StaleAttempt(_)), "{error:?}");
    Ok(())
}

/// Summarizes as the run's summarization does, deterministically: all but the last `keep`
/// messages become the summary.
struct KeepLast {
    keep: usize,
    calls: AtomicUsize,
}

#[async_trait]
impl ThreadCompactor for KeepLast {
    async fn compact(&self, state: &mut ThreadState) -> bool {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let cut = state.messages.len().saturating_sub(self.keep);
        let old: Vec<Message> = state.messages.drain(..cut).collect();
        state.summary = Some(format!("{} messages of data dumps were read.", old.len()));
        !old.is_empty()
    }
}

/// Text gzip cannot shrink much (random letters and digits pack to about 3/4).
fn noise(bytes: usize) -> String {
    rand::rng()
        .sample_iter(&rand::distr::Alphanumeric)
        .take(bytes)
        .map(char::from)
        .collect()
}

/// A thread of `dumps` messages of `each` bytes of noise after the task.
fn heavy_thread(dumps: usize, each: usize) -> ThreadState {
    let mut state = ThreadState::new("Map the market.");
    for index in 0..dumps {
        state
            .messages
            .push(Message::user(format!("dump-{index}"), noise(each)));
    }
    state
}

#[tokio::test]
async fn an_oversize_checkpoint_is_summarized_before_it_is_posted() -> anyhow::Result<()> {
    let setup = Setup::new(canned(Canned {
        answer_polls: vec![Reply::json(
            200,
            &json!({"answer": {"id": "q-1", "answer": "EU"}}),
        )],
        ..Canned::default()
    }))
    .await;
    let control = setup.control(vec![]);
    let compactor = Arc::new(KeepLast {
        keep: 2,
        calls: AtomicUsize::new(0),
    });
    control.use_compactor(compactor.clone());
    let state = heavy_thread(20, 80 * 1024);
    let unsummarized = Checkpoint::question(question("q-1"), state.clone());
    assert!(unsummarized.to_gzip()?.len() > MAX_CHECKPOINT_GZIP_BYTES);

    let asked = control.ask(&question("q-1"), &state).await?;

    assert_eq!(asked, AskOutcome::Answered("EU".into()));
    assert_eq!(compactor.calls.load(Ordering::SeqCst), 1);
    let (_, checkpoint) = posted_checkpoint(&setup.server.requests_to("/clarification")[0])?;
    assert_eq!(checkpoint.state.messages.len(), 2);
    assert_eq!(
        checkpoint.state.summary.as_deref(),
        Some("19 messages of data dumps were read.")
    );
    assert_eq!(checkpoint.state.messages[1], state.messages[20]);
    Ok(())
}

#[tokio::test]
async fn a_checkpoint_too_large_even_summarized_ends_the_run_checkpoint_too_large()
-> anyhow::Result<()> {
    let setup = Setup::new(canned(Canned::default())).await;
    let control = setup.control(vec![]);
    let compactor = Arc::new(KeepLast {
        keep: 2,
        calls: AtomicUsize::new(0),
    });
    control.use_compactor(compactor.clone());
    // The kept messages alone are too large.
    let state = heavy_thread(3, 700 * 1024);

    let asked = control.ask(&question("q-1"), &state).await?;

    let AskOutcome::Ended { reason, error } = asked else {
        panic!("{asked:?}");
    };
    assert_eq!(reason, StopReason::CheckpointTooLarge);
    assert!(
        error.contains("bytes of gzip even summarized, over the 921600 bytes"),
        "{error}"
    );
    assert_eq!(compactor.calls.load(Ordering::SeqCst), 1);
    assert!(
        setup.server.requests().is_empty(),
        "no question the Run could not resume from"
    );

    let plain = setup.control(vec![]);
    let AskOutcome::Ended { error, .. } = plain.ask(&question("q-1"), &state).await? else {
        panic!("not ended");
    };
    assert!(!error.contains("summarized"), "{error}");
    Ok(())
}

#[test]
fn the_checkpoint_in_the_request_is_base64_of_gzip() -> anyhow::Result<()> {
    let checkpoint = Checkpoint::question(question("q-1"), ThreadState::new("task"));
    let gzip = checkpoint.to_gzip()?;
    assert_eq!(&gzip[..2], &[0x1f, 0x8b], "gzip magic");
    let text = base64::engine::general_purpose::STANDARD.encode(&gzip);
    assert_eq!(
        Checkpoint::from_gzip_base64(&text).map_err(anyhow::Error::msg)?,
        checkpoint
    );
    Ok(())
}
