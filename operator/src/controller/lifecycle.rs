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
use tracing::debug;

/// `controller` with `concurrency` reconciles at once, all objects reconciled again at each
/// `leader_gained`, and a graceful stop at `shutdown`.
pub fn under_lease<K>(
    controller: Controller<K>,
    concurrency: u16,
    leader_gained: impl Stream<Item = ()> + Send + 'static,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> Controller<K>
where
    K: Clone + Resource + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    controller
        .with_config(ControllerConfig::default().concurrency(concurrency))
        .reconcile_all_on(leader_gained)
        .graceful_shutdown_on(shutdown)
}

/// Logs a failed reconcile of the controller `name`; what succeeded says nothing.
pub fn log_failure<T, E: Display>(name: &'static str) -> impl FnMut(Result<T, E>) {
    move |result| {
        if let Err(error) = result {
            debug!(%error, "{name} controller");
        }
    }
}
