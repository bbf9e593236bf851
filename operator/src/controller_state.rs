//! What every controller shares: the client, leadership, Events, metrics and the per-object
//! failure counts behind `error_policy`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use herd_crds::agent::{ModelSpec, ResolvedSkill};
use kube::Client;
use kube::Resource;
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::ObjectRef;
use tokio::sync::watch;
use tracing::{debug, warn};

use crate::decide::backoff;
use crate::error::Error;
use crate::metrics::Metrics;

/// When to reconcile again after a write refused for a stale cache, should no watch event come
/// first.
const STALE_WRITE_RETRY: std::time::Duration = std::time::Duration::from_millis(500);

/// The field manager of everything the controllers write.
pub const FIELD_MANAGER: &str = "herd-controller";

/// State shared by the controllers of one operator.
pub struct Shared {
    /// The API client.
    pub client: Client,
    /// Publishes Events.
    pub recorder: Recorder,
    /// The operator's metrics.
    pub metrics: Arc<Metrics>,
    /// True while this replica holds the Lease.
    pub leader: watch::Receiver<bool>,
    /// The model of Agents without `spec.model`, when the operator has one.
    pub default_model: Option<ModelSpec>,
    /// The built-in skills and their digests.
    pub builtin_skills: Vec<ResolvedSkill>,
    failures: Mutex<HashMap<String, u32>>,
}

impl Shared {
    /// State for controllers using `client`.
    pub fn new(
        client: Client,
        recorder: Recorder,
        metrics: Arc<Metrics>,
        leader: watch::Receiver<bool>,
        default_model: Option<ModelSpec>,
    ) -> Self {
        Shared {
            client,
            recorder,
            metrics,
            leader,
            default_model,
            builtin_skills: crate::builtin_skills::builtin_skills(),
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// Whether this replica leads: only the leader reconciles; the others keep their caches
    /// warm so a new leader starts at once.
    pub fn is_leader(&self) -> bool {
        *self.leader.borrow()
    }

    /// The backoff after one more failure of `key` (1 s doubling to 5 min, per object).
    pub fn failed(&self, controller: &'static str, key: String) -> Action {
        self.metrics.failure(controller);
        let mut failures = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = failures.entry(key).or_insert(0);
        *count = count.saturating_add(1);
        Action::requeue(backoff::after(*count))
    }

    /// The `error_policy` of every controller. A status write refused because the cache was
    /// behind is retried soon without counting as a failure (the newer version is on its way);
    /// anything else is logged and backs off per object.
    pub fn reconcile_failed<K: Resource<DynamicType = ()>>(
        &self,
        controller: &'static str,
        object: &K,
        error: &Error,
    ) -> Action {
        let key = key(controller, object);
        if error.is_stale_write() {
            debug!(%key, "decided from a stale cache; reconciling the newer version");
            return Action::requeue(STALE_WRITE_RETRY);
        }
        warn!(%key, %error, "reconcile failed");
        self.failed(controller, key)
    }

    /// Forgets the failures of `key` after a successful reconcile.
    pub fn succeeded(&self, key: &str) {
        let mut failures = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        failures.remove(key);
    }

    /// Publishes an Event about `object` in the background (a reconcile never waits for it);
    /// a failure is logged, never fails the reconcile.
    pub fn event<K: Resource<DynamicType = ()>>(
        &self,
        object: &K,
        warning: bool,
        reason: &str,
        note: String,
    ) {
        let event = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_owned(),
            note: Some(note),
            action: "Reconcile".to_owned(),
            secondary: None,
        };
        let reference = object.object_ref(&());
        let recorder = self.recorder.clone();
        tokio::spawn(async move {
            if let Err(error) = recorder.publish(&event, &reference).await {
                warn!(%error, reason = %event.reason, "could not publish an Event");
            }
        });
    }
}

/// The failure-count key of an object.
pub fn key<K: Resource<DynamicType = ()>>(kind: &str, object: &K) -> String {
    format!("{kind}/{}", ObjectRef::from_obj(object))
}
