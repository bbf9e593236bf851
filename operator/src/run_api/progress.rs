//! Progress reports coalesced to at most one status write per [`WRITE_INTERVAL`] per Run: the
//! first is written at once, later ones wait for the interval and only the latest is written,
//! so none is lost at the end. An older `(attempt, seq)` than one already taken is dropped; the
//! write itself drops what the live report shows to be stale.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use herd_crds::wire::ProgressBody;

use super::authorize::RunPath;

/// Whose progress: the Run in the path, by UID (a Run recreated under its name is another).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RunInstance {
    /// The Run's namespace and name.
    pub path: RunPath,
    /// The Run's UID.
    pub uid: String,
}

/// The least time between two progress writes of one Run (docs/run-api.md: ≤ 1 write/s/Run).
pub const WRITE_INTERVAL: Duration = Duration::from_secs(1);
/// How often a write that failed for a transient reason is tried again.
const RETRIES: u32 = 3;

/// How a write went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Written, or dropped for good (stale, the Run gone, refused).
    Done,
    /// Failed for now (the API server unavailable): try again after the interval.
    Retry,
}

/// Writes one progress report of a Run.
pub type WriteProgress =
    Arc<dyn Fn(RunInstance, ProgressBody) -> BoxFuture<'static, WriteOutcome> + Send + Sync>;

/// One Run's writer: the newest report taken and the one waiting to be written.
struct Slot {
    newest: (u32, u64),
    /// The newest report taken, written or not.
    latest: ProgressBody,
    pending: Option<ProgressBody>,
    retries: u32,
}

type Slots = Arc<Mutex<HashMap<RunInstance, Slot>>>;

/// The progress writers of every Run.
pub struct Coalescer {
    interval: Duration,
    slots: Slots,
    write: WriteProgress,
}

fn lock(slots: &Slots) -> std::sync::MutexGuard<'_, HashMap<RunInstance, Slot>> {
    slots
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Coalescer {
    /// Writes through `write`, at most once per `interval` per Run.
    pub fn new(interval: Duration, write: WriteProgress) -> Self {
        Coalescer {
            interval,
            slots: Arc::default(),
            write,
        }
    }

    /// Takes a progress report of `run`: false when it is older than one already taken.
    pub fn offer(&self, run: RunInstance, report: ProgressBody) -> bool {
        let order = (report.report.attempt, report.report.seq);
        let mut slots = lock(&self.slots);
        if let Some(slot) = slots.get_mut(&run) {
            if order <= slot.newest {
                return false;
            }
            slot.newest = order;
            slot.latest = report.clone();
            slot.pending = Some(report);
            return true;
        }
        slots.insert(
            run.clone(),
            Slot {
                newest: order,
                latest: report.clone(),
                pending: None,
                retries: 0,
            },
        );
        drop(slots);
        tokio::spawn(write_loop(
            self.slots.clone(),
            self.write.clone(),
            self.interval,
            run,
            report,
        ));
        true
    }

    /// The newest report of `run` taken within the last interval: waiting, being written or
    /// just written.
    pub fn latest(&self, run: &RunInstance) -> Option<ProgressBody> {
        lock(&self.slots).get(run).map(|slot| slot.latest.clone())
    }

    /// Drops what waits for `run` (its result supersedes it).
    pub fn forget(&self, run: &RunInstance) {
        if let Some(slot) = lock(&self.slots).get_mut(run) {
            slot.pending = None;
        }
    }
}

async fn write_loop(
    slots: Slots,
    write: WriteProgress,
    interval: Duration,
    run: RunInstance,
    first: ProgressBody,
) {
    let mut next = Some(first);
    loop {
        if let Some(report) = next.take()
            && write(run.clone(), report.clone()).await == WriteOutcome::Retry
            && let Some(slot) = lock(&slots).get_mut(&run)
            && slot.pending.is_none()
            && slot.retries < RETRIES
        {
            slot.retries += 1;
            slot.pending = Some(report);
        }
        tokio::time::sleep(interval).await;
        let mut all = lock(&slots);
        match all.get_mut(&run).and_then(|slot| slot.pending.take()) {
            Some(report) => next = Some(report),
            None => {
                all.remove(&run);
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::Instant;

    type Log = Arc<Mutex<Vec<(Instant, u64)>>>;

    fn recording(outcomes: Vec<WriteOutcome>) -> (WriteProgress, Log) {
        let log: Log = Arc::default();
        let outcomes = Arc::new(Mutex::new(outcomes));
        let seen = log.clone();
        let write: WriteProgress = Arc::new(move |_run, report: ProgressBody| {
            seen.lock()
                .unwrap()
                .push((Instant::now(), report.report.seq));
            let outcome = outcomes.lock().unwrap().pop().unwrap_or(WriteOutcome::Done);
            Box::pin(async move { outcome })
        });
        (write, log)
    }

    fn run() -> RunInstance {
        RunInstance {
            path: RunPath {
                namespace: "ns".into(),
                name: "r".into(),
            },
            uid: "u".into(),
        }
    }

    fn report(attempt: u32, seq: u64) -> ProgressBody {
        ProgressBody {
            report: herd_crds::wire::ProgressReport {
                attempt,
                seq,
                ..Default::default()
            },
            sandbox: None,
        }
    }

    async fn settle() {
        tokio::time::sleep(Duration::from_secs(5)).await;
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_is_written_at_once_and_the_latest_after_the_interval() {
        let (write, log) = recording(vec![]);
        let coalescer = Coalescer::new(WRITE_INTERVAL, write);
        let start = Instant::now();
        for seq in 1..=10 {
            assert!(coalescer.offer(run(), report(1, seq)));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        settle().await;
        let log = log.lock().unwrap().clone();
        let seqs: Vec<u64> = log.iter().map(|(_, s)| *s).collect();
        assert_eq!(seqs, vec![1, 10], "only the first and the latest");
        assert_eq!(log[0].0, start);
        assert_eq!(log[1].0 - log[0].0, WRITE_INTERVAL);
    }

    #[tokio::test(start_paused = true)]
    async fn writes_are_at_least_an_interval_apart_under_a_steady_stream() {
        let (write, log) = recording(vec![]);
        let coalescer = Coalescer::new(WRITE_INTERVAL, write);
        for seq in 1..=50 {
            coalescer.offer(run(), report(1, seq));
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        settle().await;
        let log = log.lock().unwrap().clone();
        assert!(log.windows(2).all(|w| w[1].0 - w[0].0 >= WRITE_INTERVAL));
        assert_eq!(
            log.last().map(|(_, s)| *s),
            Some(50),
            "the last is never lost"
        );
        assert!(
            (10..=11).contains(&log.len()),
            "{} writes in 10 s",
            log.len()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn older_reports_are_dropped_and_a_new_attempt_is_newer() {
        let (write, log) = recording(vec![]);
        let coalescer = Coalescer::new(WRITE_INTERVAL, write);
        assert!(coalescer.offer(run(), report(1, 5)));
        assert!(!coalescer.offer(run(), report(1, 5)));
        assert!(!coalescer.offer(run(), report(1, 4)));
        assert!(coalescer.offer(run(), report(2, 1)));
        assert!(!coalescer.offer(run(), report(1, 9)));
        settle().await;
        let seqs: Vec<u64> = log.lock().unwrap().iter().map(|(_, s)| *s).collect();
        assert_eq!(seqs, vec![5, 1]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_transient_failure_is_written_again_unless_newer_came() {
        let (write, log) = recording(vec![WriteOutcome::Retry]);
        let coalescer = Coalescer::new(WRITE_INTERVAL, write);
        coalescer.offer(run(), report(1, 1));
        settle().await;
        let seqs: Vec<u64> = log.lock().unwrap().iter().map(|(_, s)| *s).collect();
        assert_eq!(seqs, vec![1, 1], "retried");

        let (write, log) = recording(vec![WriteOutcome::Retry]);
        let coalescer = Coalescer::new(WRITE_INTERVAL, write);
        coalescer.offer(run(), report(1, 1));
        coalescer.offer(run(), report(1, 2));
        settle().await;
        let seqs: Vec<u64> = log.lock().unwrap().iter().map(|(_, s)| *s).collect();
        assert_eq!(seqs, vec![1, 2], "the newer one instead");
    }

    #[tokio::test(start_paused = true)]
    async fn forgotten_progress_is_not_written_and_idle_runs_leave_no_slot() {
        let (write, log) = recording(vec![]);
        let coalescer = Coalescer::new(WRITE_INTERVAL, write);
        coalescer.offer(run(), report(1, 1));
        coalescer.offer(run(), report(1, 2));
        coalescer.forget(&run());
        settle().await;
        let seqs: Vec<u64> = log.lock().unwrap().iter().map(|(_, s)| *s).collect();
        assert_eq!(seqs, vec![1]);
        assert!(lock(&coalescer.slots).is_empty());
        // A new writer once the slot went (the live report drops what is stale).
        assert!(coalescer.offer(run(), report(1, 1)));
    }
}
