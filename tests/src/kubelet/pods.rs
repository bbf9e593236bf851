//! Which Pods this node takes, and one worker for each: the Pods of the watched namespaces
//! that are bound to this node, or bound to none (there is no scheduler: this node binds
//! them), each handed to [`worker::run`] with every new version of it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;

use super::worker::{self, Context};

/// Whether this node takes `pod`: bound here, or unbound, not being deleted, not ended and
/// not held back by scheduling gates.
pub fn takes(pod: &Pod, node: &str) -> bool {
    let Some(spec) = &pod.spec else {
        return false;
    };
    match spec.node_name.as_deref() {
        Some(bound) => bound == node,
        None => {
            let ended = matches!(
                pod.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            );
            let gated = spec
                .scheduling_gates
                .as_ref()
                .is_some_and(|g| !g.is_empty());
            pod.metadata.deletion_timestamp.is_none() && !ended && !gated
        }
    }
}

struct Running {
    stream: usize,
    updates: watch::Sender<Option<Pod>>,
}

/// Watches the Pods of `namespaces` (every namespace when empty) and runs the ones this
/// node takes, until the watch ends.
pub async fn run(ctx: Arc<Context>, namespaces: &[String]) {
    let apis: Vec<Api<Pod>> = if namespaces.is_empty() {
        vec![Api::all(ctx.client.clone())]
    } else {
        namespaces
            .iter()
            .map(|ns| Api::namespaced(ctx.client.clone(), ns))
            .collect()
    };
    let streams = apis.into_iter().enumerate().map(|(index, api)| {
        watcher(api, watcher::Config::default())
            .default_backoff()
            .map(move |event| (index, event))
            .boxed()
    });
    let mut events = stream::select_all(streams);
    let mut running: BTreeMap<String, Running> = BTreeMap::new();
    let mut listed: BTreeMap<usize, BTreeSet<String>> = BTreeMap::new();
    while let Some((index, event)) = events.next().await {
        let event = match event {
            Ok(event) => event,
            Err(error) => {
                tracing::warn!("watching Pods: {error}");
                continue;
            }
        };
        match event {
            watcher::Event::Init => {
                listed.insert(index, BTreeSet::new());
            }
            watcher::Event::InitApply(pod) => {
                if let Some(uid) = pod.metadata.uid.clone() {
                    listed.entry(index).or_default().insert(uid);
                }
                apply(&ctx, &mut running, index, pod);
            }
            watcher::Event::Apply(pod) => apply(&ctx, &mut running, index, pod),
            watcher::Event::Delete(pod) => {
                if let Some(gone) = pod.metadata.uid.and_then(|uid| running.remove(&uid)) {
                    gone.updates.send_replace(None);
                }
            }
            watcher::Event::InitDone => {
                // What the new list lacks was deleted while the watch was down.
                let seen = listed.remove(&index).unwrap_or_default();
                let gone: Vec<String> = running
                    .iter()
                    .filter(|(uid, r)| r.stream == index && !seen.contains(*uid))
                    .map(|(uid, _)| uid.clone())
                    .collect();
                for uid in gone {
                    if let Some(gone) = running.remove(&uid) {
                        gone.updates.send_replace(None);
                    }
                }
            }
        }
    }
}

fn apply(ctx: &Arc<Context>, running: &mut BTreeMap<String, Running>, stream: usize, pod: Pod) {
    let Some(uid) = pod.metadata.uid.clone() else {
        return;
    };
    if let Some(worker) = running.get(&uid) {
        worker.updates.send_replace(Some(pod));
        return;
    }
    if !takes(&pod, &ctx.node) {
        return;
    }
    let (updates, receiver) = watch::channel(Some(pod.clone()));
    running.insert(uid, Running { stream, updates });
    tokio::spawn(worker::run(ctx.clone(), pod, receiver));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::test_support::merged;
    use serde_json::json;

    fn pod(value: serde_json::Value) -> Pod {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn this_node_takes_its_own_and_unbound_runnable_pods() {
        let spec = |extra| merged(json!({"containers": [{"name": "c"}]}), extra);
        assert!(takes(&pod(json!({"spec": spec(json!({}))})), "n"));
        assert!(takes(
            &pod(json!({"spec": spec(json!({"nodeName": "n"}))})),
            "n"
        ));
        assert!(!takes(
            &pod(json!({"spec": spec(json!({"nodeName": "other"}))})),
            "n"
        ));
        assert!(!takes(
            &pod(json!({"spec": spec(json!({"schedulingGates": [{"name": "wait"}]}))})),
            "n"
        ));
        assert!(!takes(
            &pod(json!({"spec": spec(json!({})), "status": {"phase": "Failed"}})),
            "n"
        ));
        assert!(!takes(
            &pod(
                json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"},
                        "spec": spec(json!({}))})
            ),
            "n"
        ));
        assert!(
            takes(
                &pod(
                    json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"},
                            "spec": spec(json!({"nodeName": "n"}))})
                ),
                "n"
            ),
            "a Pod of this node being deleted is this node's to stop"
        );
        assert!(!takes(&Pod::default(), "n"));
    }
}
