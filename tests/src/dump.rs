//! What a failing test prints: the status of every object in its namespace, the namespace's
//! Events, and the end of every log it attached (an operator's, a runner's).

use std::fmt::Write as _;
use std::path::Path;

use herd_crds::agent::Agent;
use herd_crds::run::Run;
use herd_crds::skill::Skill;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};

/// Lines of each attached log shown on failure.
const LOG_LINES: usize = 60;

/// A readable report of `namespace` for a failure message. Never fails: what cannot be read is
/// reported as such.
pub async fn dump_namespace(
    client: &Client,
    namespace: &str,
    logs: &[std::path::PathBuf],
) -> String {
    let mut out = format!("--- namespace {namespace}\n");
    for resource in [
        ApiResource::erase::<Agent>(&()),
        ApiResource::erase::<Skill>(&()),
        ApiResource::erase::<Run>(&()),
        ApiResource::erase::<Pod>(&()),
        ApiResource::erase::<ConfigMap>(&()),
    ] {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
        match api.list(&ListParams::default()).await {
            Ok(list) => {
                for object in list.items {
                    let name = object.metadata.name.clone().unwrap_or_default();
                    let status = object.data.get("status").map(compact).unwrap_or_default();
                    let _ = writeln!(out, "{}/{name}: status {status}", resource.kind);
                }
            }
            Err(e) => {
                let _ = writeln!(out, "{}: cannot list: {e}", resource.kind);
            }
        }
    }
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    match events.list(&ListParams::default()).await {
        Ok(list) => {
            let mut items = list.items;
            items.sort_by_key(|e| {
                e.last_timestamp
                    .as_ref()
                    .map(|t| t.0)
                    .or_else(|| e.event_time.as_ref().map(|t| t.0))
            });
            let _ = writeln!(out, "--- events");
            for event in items {
                let _ = writeln!(
                    out,
                    "{} {} {}/{}: {}",
                    event.type_.unwrap_or_default(),
                    event.reason.unwrap_or_default(),
                    event.involved_object.kind.unwrap_or_default(),
                    event.involved_object.name.unwrap_or_default(),
                    event.message.unwrap_or_default(),
                );
            }
        }
        Err(e) => {
            let _ = writeln!(out, "events: cannot list: {e}");
        }
    }
    for log in logs {
        let _ = writeln!(out, "--- {} (last {LOG_LINES} lines)", log.display());
        out.push_str(&tail(log, LOG_LINES));
    }
    out
}

fn compact(value: &serde_json::Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// The last `lines` lines of a text file, or why it cannot be read.
pub fn tail(path: &Path, lines: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let all: Vec<&str> = text.lines().collect();
            let mut out = all[all.len().saturating_sub(lines)..].join("\n");
            out.push('\n');
            out
        }
        Err(e) => format!("({}: {e})\n", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_the_last_lines() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("log");
        std::fs::write(&file, "a\nb\nc\nd\n").unwrap();
        assert_eq!(tail(&file, 2), "c\nd\n");
        assert_eq!(tail(&file, 10), "a\nb\nc\nd\n");
        assert!(tail(&dir.path().join("missing"), 2).contains("missing"));
    }
}
