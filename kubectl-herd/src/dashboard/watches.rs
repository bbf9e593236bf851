//! One watch per kind for the whole dashboard: a kube-runtime reflector keeps the objects the
//! caller may list, and every open page reads that one store and hears of its changes through
//! a counter (`tokio::sync::watch`), however many tabs are open.

use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use herd_crds::terminal_text::one_line;
use kube::Resource;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

/// How long a page waits for the first list before it says the API server is slow.
const FIRST_LIST: Duration = Duration::from_secs(20);

/// The objects of one kind, kept up to date, and the last refusal of the API server.
#[derive(Clone)]
pub struct SharedWatch<K: Resource<DynamicType = ()> + 'static> {
    store: Store<K>,
    changes: watch::Receiver<u64>,
    refusal: Arc<Mutex<Option<String>>>,
}

impl<K: Resource<DynamicType = ()>> std::fmt::Debug for SharedWatch<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedWatch")
            .field("kind", &K::kind(&()))
            .finish_non_exhaustive()
    }
}

impl<K> SharedWatch<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// Starts watching `api` in a task of its own, for as long as the process lives.
    pub fn start(api: Api<K>) -> SharedWatch<K> {
        let (store, writer) = reflector::store();
        let (tell, changes) = watch::channel(0u64);
        let refusal = Arc::new(Mutex::new(None));
        let said = Arc::clone(&refusal);
        tokio::spawn(async move {
            let events = reflector::reflector(writer, watcher(api, watcher::Config::default()))
                .default_backoff();
            futures::pin_mut!(events);
            while let Some(event) = events.next().await {
                let now = event.err().map(|e| refused(&e));
                if let Ok(mut last) = said.lock() {
                    *last = now;
                }
                tell.send_modify(|n| *n = n.wrapping_add(1));
            }
        });
        SharedWatch {
            store,
            changes,
            refusal,
        }
    }

    /// A receiver that changes with every event of the watch.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.clone()
    }

    /// The objects, once the first list is in; else what the API server said instead.
    pub async fn objects(&self) -> Result<Vec<Arc<K>>, String> {
        let mut changes = self.changes.clone();
        let refused = async {
            loop {
                if let Some(said) = self.refusal() {
                    return said;
                }
                if changes.changed().await.is_err() {
                    return format!("the watch of {}s has stopped", K::kind(&()));
                }
            }
        };
        let waited = tokio::time::timeout(FIRST_LIST, async {
            tokio::select! {
                biased;
                ready = self.store.wait_until_ready() => ready
                    .map_err(|_| format!("the watch of {}s has stopped", K::kind(&()))),
                said = refused => Err(said),
            }
        })
        .await;
        match waited {
            Ok(Ok(())) => Ok(self.store.state()),
            Ok(Err(said)) => Err(said),
            Err(_) => Err(format!(
                "the API server has not listed the {}s after {}s",
                K::kind(&()),
                FIRST_LIST.as_secs()
            )),
        }
    }

    /// What the API server said on the watch's last failure, when the watch has not recovered.
    pub fn refusal(&self) -> Option<String> {
        self.refusal.lock().ok().and_then(|said| said.clone())
    }
}

/// A watch failure as the API server said it: its code and message.
fn refused(error: &watcher::Error) -> String {
    let api = match error {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => e,
        watcher::Error::WatchError(status) => {
            return format!("{} {}", status.code, one_line(&status.message));
        }
        other => return one_line(&other.to_string()),
    };
    crate::dashboard::said(api)
}
