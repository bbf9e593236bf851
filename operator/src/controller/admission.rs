//! Admission as one task on the leader (docs/operator.md, step 2). The Run controllers of every scope ask
//! it before creating a Pod; it owns the [`Ledger`], looks at the Run and Pod caches of all scopes
//! once they have synced (so it starts from what the API server holds, after a restart too),
//! decides with [`crate::decide::admission::admit`], and wakes each Run whose verdict changed.
//! Watch events and asks wake it; bursts are taken in one look.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures::channel::mpsc::UnboundedSender;
use herd_crds::budget::Budget;
use herd_crds::run::{Run, RunPhase, phase_of};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};
use tokio::sync::{Notify, watch};
use tracing::debug;

use super::budget_admission::BudgetFeed;
use super::run_objects::controller_uid;
use crate::decide::admission::{Caps, RunKey};
use crate::decide::admission_ledger::{Answer, Ledger, PodSeen, Ready, RunSeen};
use crate::decide::run_pod::pod_name;
use crate::labels;
use crate::metrics::Metrics;
use crate::scope::{Scope, Synced};

/// How long an ask waits for a look that decides it before the Run is told to wait.
const DECIDE_WAIT: Duration = Duration::from_secs(2);
/// How long admission lets a burst of events gather before it looks, at least: twice as long
/// as its last look took, so looking never takes more than a third of a core however many Runs
/// wait.
const GATHER: Duration = Duration::from_millis(10);
/// The longest gathering between two looks.
const MAX_GATHER: Duration = Duration::from_millis(500);
/// How often admission looks without an event (grants linger and expire).
const TICK: Duration = Duration::from_secs(5);

/// What admission reads and wakes in one scope.
struct Feed {
    scope: Scope,
    runs: Store<Run>,
    pods: Store<Pod>,
    synced: Vec<Synced>,
    wake: UnboundedSender<ObjectRef<Run>>,
}

/// The admission of one operator, shared by its Run controllers.
pub struct Admission {
    caps: Caps,
    metrics: Arc<Metrics>,
    ledger: Mutex<Ledger>,
    feeds: Mutex<Vec<Feed>>,
    changed: Notify,
    looked: watch::Sender<u64>,
    budgets: BudgetFeed,
}

impl Admission {
    /// Admission under `caps`.
    pub fn new(caps: Caps, metrics: Arc<Metrics>) -> Self {
        Admission {
            caps,
            metrics,
            ledger: Mutex::new(Ledger::default()),
            feeds: Mutex::new(Vec::new()),
            changed: Notify::new(),
            looked: watch::Sender::new(0),
            budgets: BudgetFeed::default(),
        }
    }

    /// Adds a scope: its Run and Pod caches (looked at once `synced`), and where its Runs are
    /// woken.
    pub fn register(
        &self,
        scope: Scope,
        runs: Store<Run>,
        pods: Store<Pod>,
        synced: Vec<Synced>,
        wake: UnboundedSender<ObjectRef<Run>>,
    ) {
        lock(&self.feeds).push(Feed {
            scope,
            runs,
            pods,
            synced,
            wake,
        });
    }

    /// Adds a scope's Budgets: the Runs they select wait while a limit is reached.
    pub fn register_budgets(&self, budgets: Store<Budget>) {
        self.budgets.register(budgets);
    }

    /// Something a decision depends on changed (a watch event): look again soon.
    pub fn notify(&self) {
        self.changed.notify_one();
    }

    /// A Run whose prerequisites are met asks to create its Pod; an undecided ask waits a
    /// moment for the look that decides it (and is not woken by it).
    pub async fn ask(&self, ready: Ready) -> Answer {
        let mut looked = self.looked.subscribe();
        let answer = lock(&self.ledger).ask(ready.clone());
        if answer != Answer::Undecided {
            return answer;
        }
        self.notify();
        let decided = async {
            while looked.changed().await.is_ok() {
                if lock(&self.ledger).peek(&ready) != Answer::Undecided {
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(DECIDE_WAIT, decided).await;
        // Read under the lock that ends the wait: a look before this wakes nobody (the answer
        // is read here), a look after it wakes the Run.
        lock(&self.ledger).stop_asking(&ready)
    }

    /// A Run's prerequisites went missing: it leaves the line and frees any slot it held.
    pub fn withdraw(&self, key: &RunKey) {
        lock(&self.ledger).withdraw(key);
        self.notify();
    }

    /// The task: once this replica leads and every registered cache has synced, looks at the
    /// caches whenever something changed (or every few seconds), and wakes the Runs whose
    /// verdict changed. Runs until aborted.
    pub async fn run(self: Arc<Self>, mut leader: watch::Receiver<bool>) {
        if leader.wait_for(|leading| *leading).await.is_err() {
            return;
        }
        while !self.synced() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut gather = GATHER;
        loop {
            let _ = tokio::time::timeout(TICK, self.changed.notified()).await;
            tokio::time::sleep(gather).await;
            let started = tokio::time::Instant::now();
            self.look();
            gather = (started.elapsed() * 2).clamp(GATHER, MAX_GATHER);
        }
    }

    fn synced(&self) -> bool {
        lock(&self.feeds)
            .iter()
            .all(|feed| feed.synced.iter().all(Synced::is_synced))
    }

    /// One look: the caches, the ledger's step, the wakes.
    fn look(&self) {
        let (runs, pods) = self.observe();
        let run_objects: Vec<Arc<Run>> = lock(&self.feeds)
            .iter()
            .flat_map(|feed| feed.runs.state())
            .collect();
        let now = jiff::Timestamp::now();
        let (changed, waiting, held) = {
            let mut ledger = lock(&self.ledger);
            let held = self
                .budgets
                .hold(&run_objects, &mut ledger, &self.metrics, now);
            let mut changed = ledger.step(&runs, &pods, &self.caps, now);
            changed.retain(|(key, _)| !ledger.is_asking(key));
            (changed, ledger.waiting(), held)
        };
        self.metrics.set_queued_runs(waiting);
        self.metrics
            .set_suspended_runs(runs.iter().filter(|r| r.suspended).count());
        self.metrics
            .set_active_pods(pods.iter().filter(|p| p.running).count());
        self.looked.send_modify(|n| *n = n.wrapping_add(1));
        if changed.is_empty() && held.is_empty() {
            return;
        }
        debug!(
            changed = changed.len(),
            held = held.len(),
            "admission verdicts changed"
        );
        let feeds = lock(&self.feeds);
        for key in changed.into_iter().map(|(key, _)| key).chain(held) {
            let Some(feed) = feeds.iter().find(|f| f.scope.contains(&key.namespace)) else {
                continue;
            };
            // The controller's end of the channel lives as long as the operator.
            let _ = feed
                .wake
                .unbounded_send(ObjectRef::new(&key.name).within(&key.namespace));
        }
    }

    fn observe(&self) -> (Vec<RunSeen>, Vec<PodSeen>) {
        let feeds = lock(&self.feeds);
        let runs = feeds
            .iter()
            .flat_map(|feed| feed.runs.state())
            .filter_map(|run| run_seen(&run))
            .collect();
        let pods = feeds
            .iter()
            .flat_map(|feed| feed.pods.state())
            .filter_map(|pod| pod_seen(&pod))
            .collect();
        (runs, pods)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The key of a Run.
pub fn run_key(run: &Run) -> Option<RunKey> {
    Some(RunKey::new(
        &run.namespace()?,
        run.metadata.name.as_deref()?,
    ))
}

fn run_seen(run: &Run) -> Option<RunSeen> {
    let key = run_key(run)?;
    let status = run.status.as_ref();
    let attempt = status.and_then(|s| s.attempt).unwrap_or(1);
    let conditions = status.map(|s| s.conditions.as_slice()).unwrap_or_default();
    let pod_named =
        status.and_then(|s| s.pod_name.as_deref()) == Some(pod_name(&key.name, attempt).as_str());
    Some(RunSeen {
        parent: run
            .spec
            .parent_ref
            .as_ref()
            .map(|p| RunKey::new(&key.namespace, &p.name)),
        uid: run.uid()?,
        finished: phase_of(conditions).is_finished(),
        suspended: phase_of(conditions) == RunPhase::Suspended,
        attempt,
        pod_named,
        key,
    })
}

fn pod_seen(pod: &Pod) -> Option<PodSeen> {
    let labels = pod.labels();
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    Some(PodSeen {
        run: RunKey::new(&pod.namespace()?, labels.get(labels::RUN)?),
        owner_uid: controller_uid(pod)?.to_owned(),
        attempt: labels.get(labels::ATTEMPT)?.parse().ok()?,
        running: !matches!(phase, Some("Succeeded" | "Failed")),
    })
}
