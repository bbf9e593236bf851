//! How every controller of the operator runs: so many reconciles at once, every object again
//! when this replica gains the Lease (it may have missed changes while it only followed),
//! stopped gracefully at shutdown; a failed reconcile is logged at debug level only (its error
//! policy counts it and backs off, and the object's status says what is wrong).

use std::fmt::{Debug, Display};
use std::future::Future;
use std::hash::Hash;

use futures::Stream;
use kube::Resource;
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tracing::debug;

/// What every controller runs under: how many reconciles at once, whether this replica holds
/// the Lease, and whether the operator is stopping.
#[derive(Clone, Debug)]
pub struct Lifecycle {
    /// Reconciles at once.
    pub concurrency: u16,
    /// True once this replica holds the Lease.
    pub leader: watch::Receiver<bool>,
    /// True once the operator is stopping.
    pub shutdown: watch::Receiver<bool>,
}

/// `controller` with the lifecycle's reconciles at once, all objects reconciled again when
/// this replica gains the Lease, and a graceful stop at shutdown.
pub fn under_lease<K>(controller: Controller<K>, lifecycle: &Lifecycle) -> Controller<K>
where
    K: Clone + Resource + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    controller
        .with_config(ControllerConfig::default().concurrency(lifecycle.concurrency))
        .reconcile_all_on(leader_gained(lifecycle.leader.clone()))
        .graceful_shutdown_on(stopped(lifecycle.shutdown.clone()))
}

/// Resolves once `shutdown` carries true (or its sender is gone).
pub fn stopped(
    mut shutdown: watch::Receiver<bool>,
) -> impl Future<Output = ()> + Send + Sync + 'static {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let _ = shutdown.wait_for(|stop| *stop).await;
        let _ = tx.send(());
    });
    async move {
        let _ = rx.await;
    }
}

/// Emits once when this replica becomes the leader, so the new leader reconciles every object
/// (it never leads twice: losing the Lease ends the operator).
fn leader_gained(leader: watch::Receiver<bool>) -> impl Stream<Item = ()> + Send + 'static {
    futures::stream::unfold(Some(leader), |state| async move {
        let mut leader = state?;
        leader.wait_for(|leading| *leading).await.ok()?;
        Some(((), None))
    })
}

/// Logs a failed reconcile of the controller `name`; what succeeded says nothing.
pub fn log_failure<T, E: Display>(name: &'static str) -> impl FnMut(Result<T, E>) {
    move |result| {
        if let Err(error) = result {
            debug!(%error, "{name} controller");
        }
    }
}
