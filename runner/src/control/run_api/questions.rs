//! Questions over the run API: the question with the thread's checkpoint (gzip; summarized
//! first when over [`MAX_CHECKPOINT_GZIP_BYTES`], and the run ends `CheckpointTooLarge` when it
//! still is) goes to `POST clarification`, then `GET answers/{id}?wait=` until the answer comes.
//! The Run's clock stands still meanwhile (the wait counts against `inputTimeout`, not
//! `timeout`) and every poll re-bases it on the `secondsLeft` the run API gives.
//!
//! A wait for a person (a question, or any other wait that goes through here) that outlasts
//! the Run's `suspendAfter` suspends the Pod: the checkpoint is posted once more, with the
//! workspace's files when the workspace dies with the Pod (`emptyDir`), and the wait ends
//! suspended; the Pod then exits and the operator resumes the Run in a new
//! attempt once the answer is in `spec.responses`. A checkpoint that cannot hold the files
//! (over [`MAX_CHECKPOINT_GZIP_BYTES`], or over [`MAX_SAVED_BYTES`] before packing) does not
//! suspend: the Pod says why in its log and keeps waiting.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use base64::Engine as _;
use herd_crds::report::StopReason;
use herd_crds::wire::{
    Answer, AnswerPoll, ApprovalAsk, CheckpointReport, ClarificationRequest, ProgressReport,
};
use herd_sandbox::SandboxClient;
use tokio::time::Instant;

use super::RunApiControlPlane;
use super::client::LONGEST_WAIT;
use crate::control::ControlError;
use crate::control::asked::Asked;
use crate::control::checkpoint::{Checkpoint, MAX_CHECKPOINT_GZIP_BYTES};
use crate::thread::ThreadState;

impl RunApiControlPlane {
    /// Reports what is `asked` (a question, or tool calls to approve) with the checkpoint of
    /// `state` and waits for the answer to each of its ids in this process (the pod keeps its
    /// workspace while it waits), giving up after `give_up` when set.
    pub(super) async fn ask_and_await_answer(
        &self,
        asked: Asked<'_>,
        give_up: Option<Duration>,
        state: &ThreadState,
    ) -> Result<Awaited, ControlError> {
        let (checkpoint, encoded) = match self.checkpoint(asked, state).await? {
            Ok(packed) => packed,
            Err(error) => {
                return Ok(Awaited::Ended {
                    reason: StopReason::CheckpointTooLarge,
                    error,
                });
            }
        };
        // From here the Run waits for input: its `timeout` clock stands still.
        let _paused = self.deadline.pause();
        let until = self.deadline.instant();
        self.report_before_asking(state, until).await?;
        self.post_asked(asked, encoded).await?;
        let _waiting = Waiting::on(&self.waiting_for_answer);
        let ids = asked.ids();
        tracing::info!(ids = ?ids, "waiting for the answer (spec.responses)");
        let mut suspend_at = self.suspension.get().map(|s| Instant::now() + s.after);
        let give_up_at = give_up.map(|after| Instant::now() + after);
        let mut answers = Vec::with_capacity(ids.len());
        while let Some(id) = ids.get(answers.len()).copied() {
            let started = Instant::now();
            let wait = [suspend_at, give_up_at]
                .into_iter()
                .flatten()
                .fold(LONGEST_WAIT, |wait, at| {
                    wait.min(at.saturating_duration_since(started))
                });
            let poll: AnswerPoll = self
                .client
                .long_poll(&["answers", id], wait, self.deadline.instant())
                .await?;
            if let Some(left) = poll.seconds_left {
                self.deadline.rebase(Duration::from_secs(left));
            }
            if let Some(answer) = poll.answer.filter(|answer| answer.id == id) {
                answers.push(answer);
                continue;
            }
            if give_up_at.is_some_and(|at| Instant::now() >= at) {
                return Ok(Awaited::TimedOut(answers));
            }
            if suspend_at.is_some_and(|at| Instant::now() >= at) {
                match self.suspend(asked, checkpoint.clone()).await? {
                    Ok(()) => return Ok(Awaited::Suspended),
                    Err(why) => {
                        tracing::warn!(
                            id,
                            "not suspending while waiting for the answer, the Pod keeps \
                             waiting: {why}"
                        );
                        suspend_at = None;
                    }
                }
            }
            self.client.pace_polls(started).await;
        }
        Ok(Awaited::Answered(answers))
    }

    /// Reports the todos and title of `state` before the question, by `until`. They go first:
    /// the progress middleware reports at most once a second, so what it last sent may predate
    /// them; and they must land before the question, as a report with a lower `seq` than the
    /// question's is dropped as stale. Only a stale attempt is an error.
    async fn report_before_asking(
        &self,
        state: &ThreadState,
        until: Instant,
    ) -> Result<(), ControlError> {
        let seq = self.next_seq(0);
        self.progress.send(ProgressReport {
            attempt: self.attempt,
            seq,
            title: state.title.clone(),
            todos: state.todos.clone(),
            usage: state.usage_with_children(),
            ..ProgressReport::default()
        });
        if let Err(error) = self.progress.deliver_latest(until).await {
            if matches!(error, ControlError::StaleAttempt(_)) {
                return Err(error);
            }
            tracing::warn!(%error, "the progress before the question was not reported");
        }
        Ok(())
    }

    /// Posts what is `asked` with the checkpoint `encoded` (gzip, base64): a question to
    /// `clarification`, tool calls to approve to `approval`.
    async fn post_asked(&self, asked: Asked<'_>, encoded: String) -> Result<(), ControlError> {
        let seq = self.next_seq(0);
        let until = self.deadline.instant();
        match asked {
            Asked::Question(question) => {
                let request = ClarificationRequest {
                    attempt: self.attempt,
                    seq,
                    clarification: question.clone(),
                    checkpoint_gzip_base64: encoded,
                };
                self.client.post("clarification", &request, until).await
            }
            Asked::Approval(requests) => {
                let request = ApprovalAsk {
                    attempt: self.attempt,
                    seq,
                    approvals: requests.to_vec(),
                    checkpoint_gzip_base64: encoded,
                };
                self.client.post("approval", &request, until).await
            }
        }
    }

    /// Posts the question once more with `checkpoint` and, when the workspace dies with the
    /// Pod, the workspace's files; the inner error says why the Pod cannot suspend.
    async fn suspend(
        &self,
        asked: Asked<'_>,
        mut checkpoint: Checkpoint,
    ) -> Result<Result<(), String>, ControlError> {
        let saves_files = self.suspension.get().is_some_and(|s| s.save_files);
        if saves_files {
            let Some(sandbox) = self.sandbox.get() else {
                return Ok(Err("the sandbox is not connected".to_owned()));
            };
            match sandbox.save_files(MAX_SAVED_BYTES).await {
                Ok(files) => checkpoint.files = files,
                Err(error) => {
                    return Ok(Err(format!(
                        "the workspace's files cannot be saved: {error}"
                    )));
                }
            }
        }
        let (gzip, _) = gzipped(checkpoint).await?;
        if gzip.len() > MAX_CHECKPOINT_GZIP_BYTES {
            return Ok(Err(format!(
                "the checkpoint with the workspace's files is {} bytes of gzip, over the \
                 {MAX_CHECKPOINT_GZIP_BYTES} bytes a ConfigMap can hold beside the Run",
                gzip.len()
            )));
        }
        // Nothing may land after the question's report: a progress report would clear it.
        self.progress.stop();
        self.post_asked(
            asked,
            base64::engine::general_purpose::STANDARD.encode(gzip),
        )
        .await?;
        tracing::info!(
            ids = ?asked.ids(),
            files = saves_files,
            "suspended: the checkpoint is posted, the Pod ends until the answer comes"
        );
        Ok(Ok(()))
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

    /// The checkpoint, summarized first when it is too large, and it as gzip in base64; the
    /// inner error says why it does not fit even so.
    async fn checkpoint(
        &self,
        asked: Asked<'_>,
        state: &ThreadState,
    ) -> Result<Result<(Checkpoint, String), String>, ControlError> {
        let mut checkpoint = asked.checkpoint(state.clone());
        let (mut gzip, back) = gzipped(checkpoint).await?;
        checkpoint = back;
        let mut summarized = false;
        if gzip.len() > MAX_CHECKPOINT_GZIP_BYTES
            && let Some(compactor) = self.compactor.get()
            && compactor.compact(&mut checkpoint.state).await
        {
            let before = gzip.len();
            (gzip, checkpoint) = gzipped(checkpoint).await?;
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
        Ok(Ok((
            checkpoint,
            base64::engine::general_purpose::STANDARD.encode(gzip),
        )))
    }
}

/// What came of a wait for answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Awaited {
    /// Every id has its answer, in order.
    Answered(Vec<Answer>),
    /// The Pod suspended: the checkpoint is posted, the process should stop.
    Suspended,
    /// The run ends so (the checkpoint does not fit).
    Ended { reason: StopReason, error: String },
    /// Not every answer came in time; those that did.
    TimedOut(Vec<Answer>),
}

/// Most bytes of workspace files a suspension reads before packing: files compress, so more
/// than the checkpoint's limit may fit, but never without bound.
pub const MAX_SAVED_BYTES: u64 = 8 * MAX_CHECKPOINT_GZIP_BYTES as u64;

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
