//! Where the operator looks: all namespaces, or one (`--watch-namespaces` runs one set of
//! caches and controllers per namespace, because a cache fed by several watches would lose
//! objects each time one of them relists).

use std::fmt;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::{Stream, StreamExt};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

/// All namespaces, or one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Every namespace (needs the ClusterRole).
    All,
    /// One namespace (a Role there is enough).
    Namespace(String),
}

impl Scope {
    /// The scopes of a `--watch-namespaces` list (empty: all namespaces).
    pub fn from_list(namespaces: &[String]) -> Vec<Scope> {
        let mut names: Vec<&String> = namespaces.iter().filter(|n| !n.is_empty()).collect();
        names.sort();
        names.dedup();
        if names.is_empty() {
            vec![Scope::All]
        } else {
            names
                .into_iter()
                .map(|n| Scope::Namespace(n.clone()))
                .collect()
        }
    }

    /// Whether `namespace` is in this scope.
    pub fn contains(&self, namespace: &str) -> bool {
        match self {
            Scope::All => true,
            Scope::Namespace(own) => own == namespace,
        }
    }

    /// An API for `K` in this scope.
    pub fn api<K>(&self, client: &Client) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        match self {
            Scope::All => Api::all(client.clone()),
            Scope::Namespace(namespace) => Api::namespaced(client.clone(), namespace),
        }
    }

    /// A cache of every `K` in the scope, watched with [`watch_config`]: see [`cached_watch`].
    pub fn cached<K>(
        &self,
        client: &Client,
        synced: Synced,
        slim: fn(&mut K),
    ) -> (Store<K>, impl Stream<Item = WatchEvent<K>> + Send + 'static)
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + DeserializeOwned
            + Debug
            + Send
            + Sync
            + 'static,
    {
        cached_watch(self.api::<K>(client), watch_config(), synced, slim)
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::All => f.write_str("all namespaces"),
            Scope::Namespace(namespace) => write!(f, "namespace {namespace}"),
        }
    }
}

/// One event of a cache's watch, or the error that interrupted it.
pub type WatchEvent<K> = Result<watcher::Event<K>, watcher::Error>;

/// The watch settings of every cache: bookmarks on, so relists after a restart are cheap.
pub fn watch_config() -> watcher::Config {
    watcher::Config::default().any_semantic()
}

/// A cache's first full list: set once the watch has listed everything, so `/readyz` can
/// answer without awaiting the store (kube's controller already awaits it, and a store wakes
/// only one waiter).
#[derive(Clone, Debug, Default)]
pub struct Synced(Arc<AtomicBool>);

impl Synced {
    /// Whether the cache has been filled once.
    pub fn is_synced(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    /// Marks it done by other means than a list (the run API's first certificate loaded).
    pub fn set(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// Marks the cache filled when `event` ends the initial list.
    pub fn observe<K>(&self, event: &WatchEvent<K>) {
        if matches!(event, Ok(watcher::Event::InitDone)) {
            self.0.store(true, Ordering::Release);
        }
    }
}

/// A cache of what `api` lists under `config`: the store, and the watch events that keep it
/// current (with backoff, `slim` applied before the store, `synced` marked after the first full
/// list) for the controller to map to the objects it reconciles.
pub fn cached_watch<K>(
    api: Api<K>,
    config: watcher::Config,
    synced: Synced,
    slim: fn(&mut K),
) -> (Store<K>, impl Stream<Item = WatchEvent<K>> + Send + 'static)
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    let (store, writer) = reflector::store::<K>();
    let events = watcher(api, config)
        .default_backoff()
        .modify(slim)
        .reflect(writer)
        .inspect(move |event| synced.observe(event));
    (store, events)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_means_all_and_lists_are_deduplicated() {
        assert_eq!(Scope::from_list(&[]), vec![Scope::All]);
        assert_eq!(Scope::from_list(&[String::new()]), vec![Scope::All]);
        assert_eq!(
            Scope::from_list(&["b".into(), "a".into(), "b".into()]),
            vec![Scope::Namespace("a".into()), Scope::Namespace("b".into())]
        );
    }

    #[test]
    fn a_scope_contains_its_namespaces() {
        assert!(Scope::All.contains("any"));
        assert!(Scope::Namespace("a".into()).contains("a"));
        assert!(!Scope::Namespace("a".into()).contains("b"));
    }

    #[test]
    fn synced_after_the_first_full_list() {
        let synced = Synced::default();
        synced.observe::<k8s_openapi::api::core::v1::ConfigMap>(&Ok(watcher::Event::Init));
        assert!(!synced.is_synced());
        synced.observe::<k8s_openapi::api::core::v1::ConfigMap>(&Ok(watcher::Event::InitDone));
        assert!(synced.clone().is_synced());
    }
}
