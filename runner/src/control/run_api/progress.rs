//! Progress reports go out from a task of their own: the agent never waits on the run API for
//! them, reports queued while one is on its way collapse into the latest, and the result stops
//! the task so no progress report lands after it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use herd_crds::report::SandboxReport;
use herd_crds::wire::{ProgressBody, ProgressReport};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::client::RunApiClient;
use crate::control::ControlError;
use crate::control::deadline::Deadline;

/// Sends the latest progress report, one at a time.
#[derive(Debug)]
pub(crate) struct ProgressSender {
    client: Arc<RunApiClient>,
    latest: watch::Sender<Option<ProgressReport>>,
    /// One more than the `seq` of the last report the run API accepted (0: none yet).
    delivered: Arc<AtomicU64>,
    /// The sandbox's layers, sent with every report once known (a coalescing run API may
    /// write any one of them).
    sandbox: Arc<OnceLock<SandboxReport>>,
    task: JoinHandle<()>,
}

impl ProgressSender {
    /// Starts the task; reports are retried until `deadline`, and a 409 is passed to `stale`.
    pub fn start(
        client: Arc<RunApiClient>,
        deadline: Deadline,
        stale: impl Fn(&ControlError) + Send + 'static,
    ) -> Self {
        let (latest, mut waiting) = watch::channel(None::<ProgressReport>);
        let delivered = Arc::new(AtomicU64::new(0));
        let sandbox = Arc::new(OnceLock::new());
        let sender = client.clone();
        let noted = delivered.clone();
        let layers = sandbox.clone();
        let task = tokio::spawn(async move {
            while waiting.changed().await.is_ok() {
                let Some(report) = waiting.borrow_and_update().clone() else {
                    continue;
                };
                let body = body(report.clone(), &layers);
                match sender.post("progress", &body, deadline.instant()).await {
                    Ok(()) => {
                        noted.fetch_max(report.seq.saturating_add(1), Ordering::SeqCst);
                    }
                    Err(error) => {
                        stale(&error);
                        // Progress is best effort: the result carries the same data.
                        tracing::warn!(%error, "could not report progress");
                    }
                }
            }
        });
        ProgressSender {
            client,
            latest,
            delivered,
            sandbox,
            task,
        }
    }

    /// Sends `sandbox` with every report from now on (only the first call counts).
    pub fn set_sandbox(&self, sandbox: SandboxReport) {
        let _ = self.sandbox.set(sandbox);
    }

    /// Queues `report`, replacing any report not sent yet.
    pub fn send(&self, report: ProgressReport) {
        self.latest.send_replace(Some(report));
    }

    /// Stops sending (a report in flight is abandoned).
    pub fn stop(&self) {
        self.task.abort();
    }

    /// Stops the task, then sends the latest report unless the run API has it already,
    /// trying until `until`.
    pub async fn flush(&self, until: Instant) -> Result<(), ControlError> {
        self.stop();
        self.deliver_latest(until).await
    }

    /// Sends the latest report now unless the run API has it already, trying until `until`,
    /// the task going on: a report that must not be dropped as stale by a write with a later
    /// `seq` (a question) goes out first. The task may send it too; the run API takes the
    /// same `seq` twice.
    pub async fn deliver_latest(&self, until: Instant) -> Result<(), ControlError> {
        let Some(report) = self.latest.borrow().clone() else {
            return Ok(());
        };
        if self.delivered.load(Ordering::SeqCst) > report.seq {
            return Ok(());
        }
        let seq = report.seq;
        self.client
            .post("progress", &body(report, &self.sandbox), until)
            .await?;
        self.delivered
            .fetch_max(seq.saturating_add(1), Ordering::SeqCst);
        Ok(())
    }
}

/// The body of `report`, with the sandbox's layers when known.
fn body(report: ProgressReport, sandbox: &OnceLock<SandboxReport>) -> ProgressBody {
    ProgressBody {
        report,
        sandbox: sandbox.get().cloned(),
    }
}

impl Drop for ProgressSender {
    fn drop(&mut self) {
        self.task.abort();
    }
}
