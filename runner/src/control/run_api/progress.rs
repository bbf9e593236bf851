//! Progress reports go out from a task of their own: the agent never waits on the run API for
//! them, reports queued while one is on its way collapse into the latest, and the result stops
//! the task so no progress report lands after it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use herd_crds::wire::ProgressReport;
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
        let sender = client.clone();
        let noted = delivered.clone();
        let task = tokio::spawn(async move {
            while waiting.changed().await.is_ok() {
                let Some(report) = waiting.borrow_and_update().clone() else {
                    continue;
                };
                match sender.post("progress", &report, deadline.instant()).await {
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
            task,
        }
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
        self.client.post("progress", &report, until).await?;
        self.delivered
            .fetch_max(report.seq.saturating_add(1), Ordering::SeqCst);
        Ok(())
    }
}

impl Drop for ProgressSender {
    fn drop(&mut self) {
        self.task.abort();
    }
}
