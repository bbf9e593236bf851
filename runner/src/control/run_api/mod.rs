//! `RunApiControlPlane`: the control plane of a Run's pod, the operator's run API
//! (`/v1/runs/{namespace}/{name}/`). Progress and the result go over HTTPS; starting child
//! Runs, asking the user and memory come with the issue "Run API, part 2" and are refused
//! here, so the agent goes on without them.

mod client;
mod progress;
mod retry;
#[cfg(test)]
pub(crate) mod test_server;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use herd_crds::report::Clarification;
use herd_crds::wire::{
    Answer, ChildOutcome, ChildRequest, MemoryDocument, MemoryOperation, ProgressReport,
    ResultReport,
};
use tokio::sync::watch;
use tokio::time::Instant;

pub use self::client::{RunApiClient, RunApiTarget};
use self::progress::ProgressSender;
use super::{AskOutcome, Budget, ControlError, ControlPlane};
use crate::thread::ThreadState;

/// The issue that brings child Runs, questions and memory to the run API.
pub const RUN_API_PART_2: &str = "Run API, part 2";

/// The run API as the control plane of one attempt of a Run.
#[derive(Debug)]
pub struct RunApiControlPlane {
    client: Arc<RunApiClient>,
    /// Requests are retried until then (the Run's deadline).
    until: Instant,
    /// Answers the Run already has (`spec.responses`), by question id.
    answers: Vec<Answer>,
    progress: ProgressSender,
    /// The highest `seq` reported so far: the result's comes after it.
    last_seq: Arc<AtomicU64>,
    /// Set once the run API says a newer attempt has replaced this pod (409).
    superseded: Arc<watch::Sender<Option<String>>>,
}

impl RunApiControlPlane {
    /// Reports to `client` until `until`, handing out `answers` to questions they answer.
    pub fn new(client: Arc<RunApiClient>, until: Instant, answers: Vec<Answer>) -> Self {
        let superseded = Arc::new(watch::Sender::new(None));
        let noted = superseded.clone();
        let progress = ProgressSender::start(client.clone(), until, move |error| {
            note_stale(&noted, error);
        });
        RunApiControlPlane {
            client,
            until,
            answers,
            progress,
            last_seq: Arc::default(),
            superseded,
        }
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
        let until = (Instant::now() + within).min(self.until);
        match tokio::time::timeout(within, self.progress.flush(until)).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                note_stale(&self.superseded, &error);
                tracing::warn!(%error, "could not report the last progress");
            }
            Err(_) => tracing::warn!("the last progress was not reported within {within:?}"),
        }
    }

    fn noting<T>(&self, result: Result<T, ControlError>) -> Result<T, ControlError> {
        if let Err(error) = &result {
            note_stale(&self.superseded, error);
        }
        result
    }

    fn not_yet(what: &str) -> ControlError {
        ControlError::Refused(format!(
            "{what} from a Run's pod comes with the issue '{RUN_API_PART_2}'"
        ))
    }
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
        _request: ChildRequest,
        _parent: Budget,
    ) -> Result<ChildOutcome, ControlError> {
        Err(Self::not_yet("starting a subagent"))
    }

    async fn ask(
        &self,
        question: &Clarification,
        _checkpoint: &ThreadState,
    ) -> Result<AskOutcome, ControlError> {
        match self.answers.iter().find(|given| given.id == question.id) {
            Some(given) => Ok(AskOutcome::Answered(given.answer.clone())),
            None => Err(Self::not_yet("asking the user")),
        }
    }

    async fn post_result(&self, mut result: ResultReport) -> Result<(), ControlError> {
        // The result is the last word: no progress report may land after it.
        self.progress.stop();
        let after_progress = self.last_seq.load(Ordering::SeqCst).saturating_add(1);
        result.seq = result.seq.max(after_progress);
        let posted = self.client.post("result", &result, self.until).await;
        self.noting(posted)
    }

    async fn read_memory(&self) -> Result<MemoryDocument, ControlError> {
        Err(Self::not_yet("agent memory"))
    }

    async fn update_memory(&self, _operations: Vec<MemoryOperation>) -> Result<(), ControlError> {
        Err(Self::not_yet("agent memory"))
    }
}
