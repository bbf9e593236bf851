//! `RunApiControlPlane`: the control plane of a Run's pod, the operator's run API
//! (`/v1/runs/{namespace}/{name}/`). Progress, questions, child Runs, memory and the result go
//! over HTTPS; a child's presented files are written into this pod's sandbox, and the time a
//! question waits for its answer moves the run's deadline as the run API says.

mod child_files;
mod children;
mod client;
mod progress;
mod questions;
mod retry;
#[cfg(test)]
pub(crate) mod test_server;
#[cfg(test)]
mod tests;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use herd_crds::approval::{ApprovalRequest, OnApprovalTimeout, Verdict, timed_out_reason};
use herd_crds::report::{Clarification, StopReason};
use herd_crds::wire::{
    Answer, ChildOutcome, ChildRequest, MemoryDocument, MemoryOperation, MemoryUpdate,
    ProgressReport, ResultReport,
};
use herd_sandbox::ToolExecutor;
use tokio::sync::watch;
use tokio::time::Instant;

pub use self::child_files::MAX_CHILD_FILES_BYTES;
pub use self::client::{RunApiClient, RunApiTarget};
use self::progress::ProgressSender;
use self::questions::Awaited;
use super::asked::{Asked, verdict_of};
use super::checkpoint::ThreadCompactor;
use super::deadline::Deadline;
use super::{ApprovalOutcome, AskOutcome, Budget, ControlError, ControlPlane};
use crate::thread::ThreadState;

/// The run API as the control plane of one attempt of a Run.
pub struct RunApiControlPlane {
    client: Arc<RunApiClient>,
    /// The attempt this pod serves.
    attempt: u32,
    /// The Run's deadline: requests are retried until then; a question's wait moves it.
    deadline: Deadline,
    /// Answers the Run already has (`spec.responses`), by question id.
    answers: Vec<Answer>,
    progress: ProgressSender,
    /// The highest `seq` reported so far: a question's and the result's come after it.
    last_seq: Arc<AtomicU64>,
    /// Set once the run API says a newer attempt has replaced this pod (409).
    superseded: Arc<watch::Sender<Option<String>>>,
    /// Where a child's presented files are written (the pod's sandbox, once connected).
    sandbox: OnceLock<Arc<dyn ToolExecutor>>,
    /// Shrinks a thread whose checkpoint is too large (the run's summarization).
    compactor: OnceLock<Arc<dyn ThreadCompactor>>,
    /// Set while a question's answer is awaited.
    waiting_for_answer: AtomicBool,
    /// When a wait for an answer suspends the Pod, if ever.
    suspension: OnceLock<Suspension>,
    /// How long a tool call waits for approval, and what its timeout becomes.
    approval_timeout: OnceLock<(Duration, OnApprovalTimeout)>,
}

/// When and how a wait for an answer suspends the Pod (the Run's `suspendAfter`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Suspension {
    /// How long the Pod waits before it suspends.
    pub after: Duration,
    /// Whether the workspace's files go with the checkpoint (an `emptyDir` workspace, gone
    /// with the Pod).
    pub save_files: bool,
}

impl std::fmt::Debug for RunApiControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunApiControlPlane")
            .field("client", &self.client)
            .field("attempt", &self.attempt)
            .field("deadline", &self.deadline.instant())
            .finish_non_exhaustive()
    }
}

impl RunApiControlPlane {
    /// Reports attempt `attempt` to `client` until `deadline`, handing out `answers` to the
    /// questions they answer.
    pub fn new(
        client: Arc<RunApiClient>,
        attempt: u32,
        deadline: Deadline,
        answers: Vec<Answer>,
    ) -> Self {
        let superseded = Arc::new(watch::Sender::new(None));
        let noted = superseded.clone();
        let progress = ProgressSender::start(client.clone(), deadline.clone(), move |error| {
            note_stale(&noted, error);
        });
        RunApiControlPlane {
            client,
            attempt,
            deadline,
            answers,
            progress,
            last_seq: Arc::default(),
            superseded,
            sandbox: OnceLock::new(),
            compactor: OnceLock::new(),
            waiting_for_answer: AtomicBool::new(false),
            suspension: OnceLock::new(),
            approval_timeout: OnceLock::new(),
        }
    }

    /// Gives up waiting for a tool call's approval after `wait`, then denies it or ends the
    /// run as `on_timeout` says (only the first call counts). Without, the wait lasts as long
    /// as the Run's time.
    pub fn use_approval_timeout(&self, wait: Duration, on_timeout: OnApprovalTimeout) {
        let _ = self.approval_timeout.set((wait, on_timeout));
    }

    /// Suspends the Pod after waiting `suspension.after` for an answer from now on (only the
    /// first call counts).
    pub fn use_suspension(&self, suspension: Suspension) {
        let _ = self.suspension.set(suspension);
    }

    /// Writes children's presented files into `sandbox` from now on (only the first call
    /// counts: a pod has one sandbox); its layers of isolation go with every progress report
    /// from now on.
    pub fn use_sandbox(&self, sandbox: Arc<dyn ToolExecutor>) {
        let layers = sandbox.sandbox_layers();
        if !layers.is_empty() {
            self.progress
                .set_sandbox(herd_crds::report::SandboxReport { layers }.bounded());
        }
        let _ = self.sandbox.set(sandbox);
    }

    /// Shrinks too large checkpoints with `compactor` from now on (only the first call counts).
    pub fn use_compactor(&self, compactor: Arc<dyn ThreadCompactor>) {
        let _ = self.compactor.set(compactor);
    }

    /// The Run's deadline as this control plane holds it (a question's wait moves it).
    pub fn deadline(&self) -> &Deadline {
        &self.deadline
    }

    /// Resolves when the run API has said that a newer attempt replaced this pod, with what
    /// it said: the run must stop, nothing it reports counts any more.
    pub async fn superseded(&self) -> String {
        let mut said = self.superseded.subscribe();
        match said.wait_for(Option::is_some).await {
            Ok(message) => message.clone().unwrap_or_default(),
            // The sender lives as long as `self`.
            Err(_) => std::future::pending().await,
        }
    }

    /// Sends the progress the run API does not have yet, for at most `within` (the pod is
    /// stopping); no progress goes out after it.
    pub async fn flush_progress(&self, within: Duration) {
        let until = (Instant::now() + within).min(self.deadline.instant());
        match tokio::time::timeout(within, self.progress.flush(until)).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                note_stale(&self.superseded, &error);
                tracing::warn!(%error, "could not report the last progress");
            }
            Err(_) => tracing::warn!("the last progress was not reported within {within:?}"),
        }
    }

    /// The `seq` of a write that must come after every progress report so far.
    fn next_seq(&self, at_least: u64) -> u64 {
        let after_progress = self.last_seq.load(Ordering::SeqCst).saturating_add(1);
        let seq = at_least.max(after_progress);
        self.last_seq.fetch_max(seq, Ordering::SeqCst);
        seq
    }

    fn noting<T>(&self, result: Result<T, ControlError>) -> Result<T, ControlError> {
        if let Err(error) = &result {
            note_stale(&self.superseded, error);
        }
        result
    }
}

/// How long the oldest of `requests` has waited (their `askedAt`; none readable: not at all).
fn waited_since(requests: &[ApprovalRequest]) -> Duration {
    requests
        .iter()
        .filter_map(|r| r.asked_at.as_deref()?.parse::<jiff::Timestamp>().ok())
        .min()
        .and_then(|asked| {
            let waited = jiff::Timestamp::now().duration_since(asked);
            Duration::try_from(waited).ok()
        })
        .unwrap_or_default()
}

fn note_stale(superseded: &watch::Sender<Option<String>>, error: &ControlError) {
    if let ControlError::StaleAttempt(message) = error {
        superseded.send_if_modified(|said| {
            let first = said.is_none();
            if first {
                *said = Some(message.clone());
            }
            first
        });
    }
}

#[async_trait]
impl ControlPlane for RunApiControlPlane {
    async fn report_progress(&self, report: ProgressReport) -> Result<(), ControlError> {
        self.last_seq.fetch_max(report.seq, Ordering::SeqCst);
        self.progress.send(report);
        Ok(())
    }

    async fn run_child(
        &self,
        request: ChildRequest,
        parent: Budget,
    ) -> Result<ChildOutcome, ControlError> {
        let outcome = self.start_and_await_child(request, parent).await;
        self.noting(outcome)
    }

    async fn ask(
        &self,
        question: &Clarification,
        checkpoint: &ThreadState,
    ) -> Result<AskOutcome, ControlError> {
        if let Some(given) = self.answers.iter().find(|given| given.id == question.id) {
            return Ok(AskOutcome::Answered(given.answer.clone()));
        }
        let asked = self
            .ask_and_await_answer(Asked::Question(question), None, checkpoint)
            .await;
        Ok(match self.noting(asked)? {
            Awaited::Answered(answers) => AskOutcome::Answered(
                answers
                    .into_iter()
                    .next()
                    .map(|a| a.answer)
                    .unwrap_or_default(),
            ),
            Awaited::Suspended => AskOutcome::Suspended,
            Awaited::Ended { reason, error } => AskOutcome::Ended { reason, error },
            // A question waits without a time limit of its own (the operator enforces
            // `inputTimeout`).
            Awaited::TimedOut(_) => AskOutcome::Ended {
                reason: StopReason::TimedOut,
                error: "nobody answered the question in time".to_owned(),
            },
        })
    }

    async fn ask_approval(
        &self,
        requests: &[ApprovalRequest],
        checkpoint: &ThreadState,
    ) -> Result<ApprovalOutcome, ControlError> {
        let given = |id: &str| self.answers.iter().find(|a| a.id == id);
        if requests.iter().all(|r| given(&r.id).is_some()) {
            return Ok(ApprovalOutcome::Decided(
                requests
                    .iter()
                    .filter_map(|r| Some((r.id.clone(), verdict_of(given(&r.id)?))))
                    .collect(),
            ));
        }
        let (wait, on_timeout) = self
            .approval_timeout
            .get()
            .copied()
            .unwrap_or((self.deadline.left(), OnApprovalTimeout::Deny));
        // The wait counts from when the calls were first held: an attempt that resumes them
        // (after a suspension or a lost Pod) does not start it again.
        let left = wait.saturating_sub(waited_since(requests));
        let asked = self
            .ask_and_await_answer(Asked::Approval(requests), Some(left), checkpoint)
            .await;
        let decided = |answers: &[herd_crds::wire::Answer], missing: Option<Verdict>| {
            requests
                .iter()
                .filter_map(|r| {
                    let verdict = answers
                        .iter()
                        .find(|a| a.id == r.id)
                        .map(verdict_of)
                        .or_else(|| missing.clone())?;
                    Some((r.id.clone(), verdict))
                })
                .collect()
        };
        Ok(match self.noting(asked)? {
            Awaited::Answered(answers) => ApprovalOutcome::Decided(decided(&answers, None)),
            Awaited::Suspended => ApprovalOutcome::Suspended,
            Awaited::Ended { reason, error } => ApprovalOutcome::Ended { reason, error },
            Awaited::TimedOut(answers) => match on_timeout {
                OnApprovalTimeout::Deny => ApprovalOutcome::Decided(decided(
                    &answers,
                    Some(Verdict::deny(Some(timed_out_reason(wait)))),
                )),
                OnApprovalTimeout::Fail => ApprovalOutcome::Ended {
                    reason: StopReason::ApprovalTimedOut,
                    error: format!(
                        "a tool call waited for approval: {}",
                        timed_out_reason(wait)
                    ),
                },
            },
        })
    }

    async fn post_result(&self, mut result: ResultReport) -> Result<(), ControlError> {
        // The result is the last word: no progress report may land after it.
        self.progress.stop();
        result.seq = self.next_seq(result.seq);
        let posted = self
            .client
            .post("result", &result, self.deadline.instant())
            .await;
        self.noting(posted)
    }

    async fn read_memory(&self) -> Result<MemoryDocument, ControlError> {
        let read = self.client.get("memory", self.deadline.instant()).await;
        self.noting(read)
    }

    async fn update_memory(&self, operations: Vec<MemoryOperation>) -> Result<(), ControlError> {
        let update = MemoryUpdate {
            attempt: self.attempt,
            operations,
        };
        let posted = self
            .client
            .post("memory", &update, self.deadline.instant())
            .await;
        self.noting(posted)
    }
}
