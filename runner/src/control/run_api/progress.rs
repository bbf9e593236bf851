//! Progress reports go out from a task of their own: the agent never waits on the run API for
//! them, reports queued while one is on its way collapse into the latest, and the result stops
//! the task so no progress report lands after it.

use std::sync::Arc;

use herd_crds::wire::ProgressReport;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::client::RunApiClient;
use crate::control::ControlError;

/// Sends the latest progress report, one at a time.
#[derive(Debug)]
pub(crate) struct ProgressSender {
    latest: watch::Sender<Option<ProgressReport>>,
    task: JoinHandle<()>,
}

impl ProgressSender {
    /// Starts the task; reports are retried until `until`, and a 409 is passed to `stale`.
    pub fn start(
        client: Arc<RunApiClient>,
        until: Instant,
        stale: impl Fn(&ControlError) + Send + 'static,
    ) -> Self {
        let (latest, mut waiting) = watch::channel(None::<ProgressReport>);
        let task = tokio::spawn(async move {
            while waiting.changed().await.is_ok() {
                let Some(report) = waiting.borrow_and_update().clone() else {
                    continue;
                };
                if let Err(error) = client.post("progress", &report, until).await {
                    stale(&error);
                    // Progress is best effort: the result carries the same data.
                    tracing::warn!(%error, "could not report progress");
                }
            }
        });
        ProgressSender { latest, task }
    }

    /// Queues `report`, replacing any report not sent yet.
    pub fn send(&self, report: ProgressReport) {
        self.latest.send_replace(Some(report));
    }

    /// Stops sending (a report in flight is abandoned).
    pub fn stop(&self) {
        self.task.abort();
    }
}

impl Drop for ProgressSender {
    fn drop(&mut self) {
        self.task.abort();
    }
}
