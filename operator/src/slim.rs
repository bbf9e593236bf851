//! What the caches keep: only what the controllers decide on. `managedFields` and kubectl's
//! last-applied annotation go from every object; a Run loses its task, its result and its todos
//! (large, and only the runner and the run API read them: code that needs them reads the Run
//! live), a Pod its spec (decisions read its status and metadata).

use herd_crds::run::Run;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

/// kubectl's copy of what it last applied: a whole second spec.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Drops `managedFields` and kubectl's last-applied annotation: large, and no decision reads
/// them.
pub fn slim_metadata<K: ResourceExt>(object: &mut K) {
    object.managed_fields_mut().clear();
    if let Some(annotations) = object.meta_mut().annotations.as_mut() {
        annotations.remove(LAST_APPLIED);
    }
}

/// A Run as the caches keep it: without `spec.task`, `status.report.result`,
/// `status.report.todos` and `managedFields`.
pub fn slim_run(run: &mut Run) {
    slim_metadata(run);
    run.spec.task = String::new();
    if let Some(report) = run.status.as_mut().and_then(|s| s.report.as_mut()) {
        report.result = None;
        report.todos = Vec::new();
    }
}

/// A Pod as the caches keep it: metadata (without `managedFields`) and status.
pub fn slim_pod(pod: &mut Pod) {
    slim_metadata(pod);
    pod.spec = None;
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
    use serde_json::json;

    #[test]
    fn managed_fields_and_the_last_applied_copy_are_stripped() {
        let mut cm = ConfigMap::default();
        cm.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
        cm.metadata.annotations = Some(
            [
                (LAST_APPLIED.to_owned(), "{...}".to_owned()),
                ("keep".to_owned(), "me".to_owned()),
            ]
            .into(),
        );
        slim_metadata(&mut cm);
        assert!(cm.managed_fields().is_empty());
        assert_eq!(cm.annotations().len(), 1);
        assert_eq!(cm.annotations()["keep"], "me");
    }

    #[test]
    fn a_slim_run_keeps_what_decisions_read() {
        let mut run: Run = serde_json::from_value(json!({
            "apiVersion": "herd.dev/v1alpha1", "kind": "Run",
            "metadata": {"name": "r", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                "labels": {"herd.dev/user": "ana"},
                "managedFields": [{"manager": "herd-runapi", "operation": "Apply"}]},
            "spec": {"agentRef": {"name": "a"}, "task": "a long task", "cancel": true,
                "parentRef": {"name": "p", "toolCallId": "c1"}, "subagentType": "bash",
                "responses": [{"id": "q1", "answer": "yes"}]},
            "status": {"attempt": 2, "podName": "r-2",
                "conditions": [{"type": "Succeeded", "status": "Unknown", "reason": "Running",
                    "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                "children": [{"name": "r-abc", "state": "Running"}],
                "report": {"attempt": 2, "seq": 9, "title": "T", "stopReason": "completed",
                    "usage": {"inputTokens": 3, "outputTokens": 4},
                    "todos": [{"content": "x", "status": "pending"}],
                    "clarification": {"id": "q2", "question": "Which?", "type": "missing_info"},
                    "result": {"text": "a long answer"}}}
        }))
        .unwrap();
        let mut expected = run.clone();
        slim_run(&mut run);
        expected.metadata.managed_fields = Some(vec![]);
        expected.spec.task = String::new();
        let report = expected
            .status
            .as_mut()
            .and_then(|s| s.report.as_mut())
            .unwrap();
        report.result = None;
        report.todos.clear();
        assert_eq!(
            run, expected,
            "only the task, result, todos and managedFields go"
        );
        assert_eq!(
            run.status.unwrap().report.unwrap().usage.output_tokens,
            4,
            "usage stays"
        );
    }

    #[test]
    fn a_slim_pod_keeps_metadata_and_status() {
        let mut pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "r-1", "labels": {"herd.dev/run": "r"},
                "ownerReferences": [{"apiVersion": "herd.dev/v1alpha1", "kind": "Run",
                    "name": "r", "uid": "u", "controller": true}]},
            "spec": {"containers": [{"name": "agent", "image": "i"}]},
            "status": {"phase": "Running"}
        }))
        .unwrap();
        slim_pod(&mut pod);
        assert!(pod.spec.is_none());
        assert_eq!(pod.owner_references().len(), 1);
        assert_eq!(pod.status.unwrap().phase.as_deref(), Some("Running"));
    }
}
