//! `spec.sandbox` of an Agent: the pod its Runs execute in.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ResourceRequirements, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where and how a Run's pod executes tools.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxSpec {
    /// Image of the `sandbox` container, which runs the model's tool calls. It must contain the
    /// `herd-runner` binary. Absent: the operator's default image (Debian slim with bash,
    /// coreutils, python3 and git).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub image: Option<String>,
    /// CPU and memory of the `sandbox` container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// RuntimeClass of the pod, e.g. `gvisor` or `kata` for stronger isolation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub runtime_class_name: Option<String>,
    /// Node labels the pod must be scheduled on.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Taints the pod tolerates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[x_kube(merge_strategy = ListMerge::Atomic)]
    pub tolerations: Vec<Toleration>,
    /// The volume mounted at `/mnt/user-data` (workspace, uploads, outputs). Default: an
    /// emptyDir, gone with the pod.
    #[serde(default)]
    #[schemars(extend("default" = {}))]
    pub workspace: WorkspaceSpec,
    /// Where the pod may connect to, besides DNS, the run API and the model endpoint. Absent:
    /// `Internet` when the `web` tool group is on, else `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<EgressSpec>,
}

/// The workspace volume: an emptyDir unless `persistentVolumeClaim` is set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceSpec {
    /// A PersistentVolumeClaim created per Run (owned by it), so files survive a pod
    /// replacement; with `ReadWriteMany`, child Runs mount their parent's workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim: Option<WorkspaceClaimSpec>,
}

fn default_size() -> Quantity {
    Quantity("10Gi".to_owned())
}

/// The PersistentVolumeClaim of a Run's workspace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceClaimSpec {
    /// StorageClass of the claim. Absent: the cluster's default class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub storage_class_name: Option<String>,
    /// Requested size, e.g. `10Gi`. Default `10Gi`.
    #[serde(default = "default_size")]
    pub size: Quantity,
    /// Access mode of the claim. Default `ReadWriteOnce`.
    #[serde(default)]
    pub access_mode: AccessMode,
}

/// Access mode of a workspace claim.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum AccessMode {
    /// One node mounts it read-write.
    #[default]
    ReadWriteOnce,
    /// Many nodes mount it read-write; child Runs share their parent's workspace.
    ReadWriteMany,
    /// One pod mounts it read-write.
    ReadWriteOncePod,
}

/// Network egress of a Run's pod, enforced by a NetworkPolicy per Agent. Hostnames cannot be
/// enforced by a NetworkPolicy, so the choices are address ranges.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new(crate::rules::EGRESS_CIDRS).message(crate::rules::EGRESS_CIDRS_MESSAGE))]
pub struct EgressSpec {
    /// `None`: nothing beyond DNS, the run API and the model; `Internet`: `0.0.0.0/0` and `::/0`
    /// minus private, link-local and unique-local ranges; `CIDRs`: only `cidrs`. Absent:
    /// `Internet` when the `web` tool group is on, else `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::optional_enum::<EgressMode>")]
    pub mode: Option<EgressMode>,
    /// The ranges allowed with mode `CIDRs` (at most 32), e.g. `10.20.0.0/16`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), inner(length(max = 64)))]
    pub cidrs: Vec<String>,
}

/// Egress modes of a Run's pod.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum EgressMode {
    /// No egress beyond DNS, the run API and the model endpoint.
    None,
    /// The public internet, without private ranges.
    Internet,
    /// Only the listed CIDRs.
    #[serde(rename = "CIDRs")]
    Cidrs,
}
