//! Questions over the run API: the question with the thread's checkpoint (gzip; summarized
//! first when over [`MAX_CHECKPOINT_GZIP_BYTES`], and the run ends `CheckpointTooLarge` when it
//! still is) goes to `POST clarification`, then `GET answers/{id}?wait=` until the answer comes.
//! The Run's clock stands still meanwhile (the wait counts against `inputTimeout`, not
//! `timeout`) and every poll re-bases it on the `secondsLeft` the run API gives.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use base64::Engine as _;
use herd_crds::report::{Clarification, StopReason};
use herd_crds::wire::{AnswerPoll, CheckpointReport, ClarificationRequest, ProgressReport};
use tokio::time::Instant;

use super::RunApiControlPlane;
use super::client::LONGEST_WAIT;
use crate::control::checkpoint::{Checkpoint, MAX_CHECKPOINT_GZIP_BYTES};
use crate::control::{AskOutcome, ControlError};
use crate::thread::ThreadState;

impl RunApiControlPlane {
    /// Reports `question` with the checkpoint of `state` and waits for its answer in this
    /// process (the pod keeps its workspace while it waits).
    pub(super) async fn ask_and_await_answer(
        &self,
        question: &Clarification,
        state: &ThreadState,
    ) -> Result<AskOutcome, ControlError> {
        let checkpoint = match self.checkpoint(question, state).await? {
            Ok(checkpoint) => checkpoint,
            Err(error) => {
                return Ok(AskOutcome::Ended {
                    reason: StopReason::CheckpointTooLarge,
                    error,
                });
            }
        };
        // From here the Run waits for input: its `timeout` clock stands still.
        let _paused = self.deadline.pause();
        let until = self.deadline.instant();
        // The todos and title of this moment go first: the progress middleware reports at
        // most once a second, so what it last sent may predate them; and they must land before
        // the question, as a report with a lower `seq` than the question's is dropped as stale.
        let seq = self.next_seq(0);
        self.progress.send(ProgressReport {
            attempt: self.attempt,
            seq,
            title: state.title.clone(),
            todos: state.todos.clone(),
            usage: state.usage,
        });
        if let Err(error) = self.progress.deliver_latest(until).await {
            if matches!(error, ControlError::StaleAttempt(_)) {
                return Err(error);
            }
            tracing::warn!(%error, "the progress before the question was not reported");
        }
        let request = ClarificationRequest {
            attempt: self.attempt,
            seq: self.next_seq(0),
            clarification: question.clone(),
            checkpoint_gzip_base64: checkpoint,
        };
        self.client
            .post("clarification", &request, self.deadline.instant())
            .await?;
        let _waiting = Waiting::on(&self.waiting_for_answer);
        tracing::info!(id = %question.id, "waiting for the answer (spec.responses)");
        loop {
            let started = Instant::now();
            let poll: AnswerPoll = self
                .client
                .long_poll(
                    &["answers", &question.id],
                    LONGEST_WAIT,
                    self.deadline.instant(),
                )
                .await?;
            if let Some(left) = poll.seconds_left {
                self.deadline.rebase(Duration::from_secs(left));
            }
            if let Some(answer) = poll.answer.filter(|answer| answer.id == question.id) {
                return Ok(AskOutcome::Answered(answer.answer));
            }
            self.client.pace_polls(started).await;
        }
    }

    /// Posts the checkpoint of a run interrupted by SIGTERM with the thread `state`, trying
    /// until `until` (the pod's last seconds: no summary is attempted, one too large is not
    /// sent).
    pub async fn post_interruption(
        &self,
        state: ThreadState,
        until: Instant,
    ) -> Result<(), ControlError> {
        let (gzip, _) = gzipped(Checkpoint::interrupted("SIGTERM", state)).await?;
        if gzip.len() > MAX_CHECKPOINT_GZIP_BYTES {
            return Err(ControlError::Refused(format!(
                "the checkpoint is {} bytes of gzip, over the {MAX_CHECKPOINT_GZIP_BYTES} bytes \
                 a ConfigMap can hold beside the Run",
                gzip.len()
            )));
        }
        let report = CheckpointReport {
            attempt: self.attempt,
            checkpoint_gzip_base64: base64::engine::general_purpose::STANDARD.encode(gzip),
        };
        let posted = self.client.post("checkpoint", &report, until).await;
        self.noting(posted)
    }

    /// Whether a question this attempt asked waits for its answer (its checkpoint is posted).
    pub fn waits_for_an_answer(&self) -> bool {
        self.waiting_for_answer.load(Ordering::SeqCst)
    }

    /// The checkpoint as gzip in base64, summarized first when it is too large; the inner
    /// error says why it does not fit even so.
    async fn checkpoint(
        &self,
        question: &Clarification,
        state: &ThreadState,
    ) -> Result<Result<String, String>, ControlError> {
        let mut checkpoint = Checkpoint::question(question.clone(), state.clone());
        let (mut gzip, back) = gzipped(checkpoint).await?;
        checkpoint = back;
        let mut summarized = false;
        if gzip.len() > MAX_CHECKPOINT_GZIP_BYTES
            && let Some(compactor) = self.compactor.get()
            && compactor.compact(&mut checkpoint.state).await
        {
            let before = gzip.len();
            (gzip, _) = gzipped(checkpoint).await?;
            summarized = true;
            tracing::info!(
                before,
                after = gzip.len(),
                "summarized the thread to fit its checkpoint"
            );
        }
        if gzip.len() > MAX_CHECKPOINT_GZIP_BYTES {
            let how = if summarized { " even summarized" } else { "" };
            return Ok(Err(format!(
                "the question's checkpoint is {} bytes of gzip{how}, over the \
                 {MAX_CHECKPOINT_GZIP_BYTES} bytes a ConfigMap can hold beside the Run",
                gzip.len()
            )));
        }
        Ok(Ok(base64::engine::general_purpose::STANDARD.encode(gzip)))
    }
}

/// `checkpoint` as gzip (on the blocking pool: a long thread takes a while), and the
/// checkpoint back.
async fn gzipped(checkpoint: Checkpoint) -> Result<(Vec<u8>, Checkpoint), ControlError> {
    let packed = tokio::task::spawn_blocking(move || {
        let gzip = checkpoint.to_gzip();
        (gzip, checkpoint)
    })
    .await
    .map_err(|error| ControlError::Io(format!("packing the checkpoint failed: {error}")))?;
    match packed {
        (Ok(gzip), checkpoint) => Ok((gzip, checkpoint)),
        (Err(error), _) => Err(ControlError::Io(format!(
            "cannot pack the checkpoint: {error}"
        ))),
    }
}

/// Marks a question as waiting for its answer while it lives.
struct Waiting<'a>(&'a AtomicBool);

impl<'a> Waiting<'a> {
    fn on(flag: &'a AtomicBool) -> Self {
        flag.store(true, Ordering::SeqCst);
        Waiting(flag)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}
