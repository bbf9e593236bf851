//! The workspace claim `<run>-workspace` of an Agent with `sandbox.workspace.persistentVolumeClaim`:
//! owned by the Run, created before its first Pod and reused by later attempts, so a retry finds
//! the files. With `ReadWriteMany`, child Runs mount their parent's claim instead of their own.

use std::collections::BTreeMap;

use herd_crds::agent::AccessMode;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimSpec, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use super::run_snapshot::Snapshot;
use crate::decide::run_owned::{Cached, run_owned};

/// The name of a Run's own workspace claim.
pub fn workspace_claim_name(run: &str) -> String {
    format!("{run}-workspace")
}

/// The claim a Run's Pods mount: the one its parent shares with it, else its own.
pub fn workspace_claim(run: &str, snapshot: &Snapshot) -> String {
    snapshot
        .delegation
        .as_ref()
        .and_then(|d| d.workspace_claim.clone())
        .unwrap_or_else(|| workspace_claim_name(run))
}

/// The claim `parent` shares with its children: the one it mounts, when it is `ReadWriteMany`.
pub fn shared_workspace(parent: &str, parent_snapshot: &Snapshot) -> Option<String> {
    let claim = parent_snapshot
        .agent
        .sandbox
        .workspace
        .persistent_volume_claim
        .as_ref()?;
    (claim.access_mode == AccessMode::ReadWriteMany)
        .then(|| workspace_claim(parent, parent_snapshot))
}

/// The Run's own claim, or `None` when the workspace is an emptyDir or its parent's.
pub fn desired_workspace_claim(
    run: &str,
    namespace: &str,
    owner: OwnerReference,
    snapshot: &Snapshot,
) -> Option<PersistentVolumeClaim> {
    if snapshot
        .delegation
        .as_ref()
        .is_some_and(|d| d.workspace_claim.is_some())
    {
        return None;
    }
    let claim = snapshot
        .agent
        .sandbox
        .workspace
        .persistent_volume_claim
        .as_ref()?;
    let mode = match claim.access_mode {
        AccessMode::ReadWriteOnce => "ReadWriteOnce",
        AccessMode::ReadWriteMany => "ReadWriteMany",
        AccessMode::ReadWriteOncePod => "ReadWriteOncePod",
    };
    Some(PersistentVolumeClaim {
        metadata: run_owned(
            workspace_claim_name(run),
            run,
            namespace,
            owner,
            Cached::Yes,
        ),
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec![mode.to_owned()]),
            storage_class_name: claim.storage_class_name.clone(),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([("storage".to_owned(), claim.size.clone())])),
                limits: None,
            }),
            ..PersistentVolumeClaimSpec::default()
        }),
        status: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::fixtures::run_owner;
    use serde_json::json;

    fn snapshot(sandbox: serde_json::Value) -> Snapshot {
        serde_json::from_value(json!({
            "agentName": "a", "agent": {"sandbox": sandbox},
            "run": {"planMode": false, "thinking": true, "timeoutSeconds": 60,
                    "inputTimeoutSeconds": 60, "maxModelCalls": 5, "retries": 0},
            "skills": [], "runnerImage": "r", "sandboxImage": "s", "depth": 0
        }))
        .unwrap()
    }

    fn owner() -> OwnerReference {
        run_owner("r", "u1")
    }

    #[test]
    fn children_share_a_read_write_many_workspace_down_the_tree() {
        let rwx = snapshot(json!({"workspace": {"persistentVolumeClaim": {
            "accessMode": "ReadWriteMany"}}}));
        assert_eq!(
            shared_workspace("root", &rwx).as_deref(),
            Some("root-workspace")
        );
        let mut child = rwx.clone();
        child.delegation = Some(crate::decide::run_snapshot::Delegation {
            parent: "root".into(),
            max_concurrent: 2,
            workspace_claim: shared_workspace("root", &rwx),
        });
        assert_eq!(workspace_claim("root-1a2b3c4d", &child), "root-workspace");
        assert_eq!(
            desired_workspace_claim("root-1a2b3c4d", "ns", owner(), &child),
            None,
            "no claim of its own"
        );
        assert_eq!(
            shared_workspace("root-1a2b3c4d", &child).as_deref(),
            Some("root-workspace"),
            "a grandchild mounts the root's claim too"
        );
        let rwo = snapshot(json!({"workspace": {"persistentVolumeClaim": {}}}));
        assert_eq!(shared_workspace("root", &rwo), None);
        assert_eq!(shared_workspace("root", &snapshot(json!({}))), None);
        assert_eq!(workspace_claim("root", &rwo), "root-workspace");
    }

    #[test]
    fn no_claim_for_an_empty_dir_workspace() {
        assert_eq!(
            desired_workspace_claim("r", "ns", owner(), &snapshot(json!({}))),
            None
        );
    }

    #[test]
    fn the_claim_follows_the_agent_and_is_owned_by_the_run() {
        let s = snapshot(json!({"workspace": {"persistentVolumeClaim": {
            "storageClassName": "fast", "size": "20Gi", "accessMode": "ReadWriteMany"}}}));
        let claim = desired_workspace_claim("r", "ns", owner(), &s).unwrap();
        assert_eq!(
            serde_json::to_value(&claim).unwrap(),
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": "r-workspace", "namespace": "ns",
                    "labels": {"app.kubernetes.io/managed-by": "herd-operator", "herd.dev/run": "r"},
                    "ownerReferences": [serde_json::to_value(owner()).unwrap()]},
                "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "fast",
                    "resources": {"requests": {"storage": "20Gi"}}}})
        );
        let defaults = snapshot(json!({"workspace": {"persistentVolumeClaim": {}}}));
        let claim = desired_workspace_claim("r", "ns", owner(), &defaults).unwrap();
        let spec = serde_json::to_value(claim.spec).unwrap();
        assert_eq!(spec["accessModes"], json!(["ReadWriteOnce"]));
        assert_eq!(spec["resources"]["requests"]["storage"], "10Gi");
        assert!(spec.get("storageClassName").is_none());
    }
}
