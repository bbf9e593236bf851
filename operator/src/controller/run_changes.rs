//! Run changes as the Run cache sees them, for the run API's long polls (a child's outcome, an
//! answer in `spec.responses`): a poll wakes on the watch event that may answer it, never by
//! sleeping and looking again. The Run controller's watch stream feeds it after the store has
//! the change, so a woken poll reads the new state from the cache.

use herd_crds::run::Run;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use tokio::sync::broadcast;

use crate::scope::WatchEvent;

/// Changes kept for a slow listener; one that falls further behind looks at everything again.
const BACKLOG: usize = 1024;

/// What changed.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Change {
    /// This Run was created, updated or deleted.
    Run(ObjectRef<Run>),
    /// The watch relisted: any Run may have changed.
    Relisted,
}

/// The Runs of one scope, as they change.
#[derive(Clone, Debug)]
pub struct RunChanges(broadcast::Sender<Change>);

impl Default for RunChanges {
    fn default() -> Self {
        RunChanges(broadcast::channel(BACKLOG).0)
    }
}

impl RunChanges {
    /// Tells the listeners what `event` changed.
    pub fn observe(&self, event: &WatchEvent<Run>) {
        let change = match event {
            Ok(
                watcher::Event::Apply(run)
                | watcher::Event::Delete(run)
                | watcher::Event::InitApply(run),
            ) => Change::Run(ObjectRef::from_obj(run)),
            Ok(watcher::Event::InitDone) => Change::Relisted,
            Ok(watcher::Event::Init) | Err(_) => return,
        };
        // No listener is no error: nobody is waiting.
        let _ = self.0.send(change);
    }

    /// Starts listening. Subscribe before looking at the state a poll waits on, so a change
    /// between the look and the wait is not missed.
    pub fn listen(&self) -> RunListener {
        RunListener(self.0.subscribe())
    }
}

/// One long poll's view of the changes since it subscribed.
#[derive(Debug)]
pub struct RunListener(broadcast::Receiver<Change>);

impl RunListener {
    /// Returns once one of `runs` may have changed: it changed, the watch relisted, or this
    /// listener fell behind. Never returns while the operator is up and `runs` are quiet.
    pub async fn changed(&mut self, runs: &[&ObjectRef<Run>]) {
        loop {
            match self.0.recv().await {
                Ok(Change::Run(run)) if !runs.contains(&&run) => {}
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => return,
                // The sender lives as long as the Run controller, that is the operator.
                Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::Duration;

    use super::*;

    /// A Run `name` in namespace `team`.
    pub(crate) fn run(name: &str) -> Run {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "herd.dev/v1alpha1", "kind": "Run",
            "metadata": {"name": name, "namespace": "team"},
            "spec": {"agentRef": {"name": "a"}, "task": "t"}
        }))
        .expect("a Run")
    }

    async fn wakes(listener: &mut RunListener, watched: &Run) -> bool {
        let watched = ObjectRef::from_obj(watched);
        tokio::time::timeout(Duration::from_millis(50), listener.changed(&[&watched]))
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn a_listener_wakes_for_its_run_only() {
        let changes = RunChanges::default();
        let (mine, other) = (run("mine"), run("other"));
        let mut listener = changes.listen();
        changes.observe(&Ok(watcher::Event::Apply(other.clone())));
        assert!(!wakes(&mut listener, &mine).await, "another Run's change");
        changes.observe(&Ok(watcher::Event::Apply(mine.clone())));
        assert!(wakes(&mut listener, &mine).await);
        changes.observe(&Ok(watcher::Event::Delete(mine.clone())));
        assert!(wakes(&mut listener, &mine).await, "a deletion is a change");
    }

    #[tokio::test]
    async fn a_relist_or_falling_behind_wakes_every_listener() {
        let changes = RunChanges::default();
        let mine = run("mine");
        let mut listener = changes.listen();
        changes.observe(&Ok(watcher::Event::Init));
        assert!(!wakes(&mut listener, &mine).await, "a relist's start");
        changes.observe(&Ok(watcher::Event::InitDone));
        assert!(wakes(&mut listener, &mine).await);
        let other = run("other");
        for _ in 0..=BACKLOG {
            changes.observe(&Ok(watcher::Event::Apply(other.clone())));
        }
        assert!(wakes(&mut listener, &mine).await, "lagged");
    }

    #[tokio::test]
    async fn a_change_before_the_wait_is_not_lost() {
        let changes = RunChanges::default();
        let mine = run("mine");
        let mut listener = changes.listen();
        changes.observe(&Ok(watcher::Event::Apply(mine.clone())));
        assert!(wakes(&mut listener, &mine).await);
    }
}
