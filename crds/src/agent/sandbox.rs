//! `spec.sandbox` of an Agent: the pod its Runs execute in.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Toleration;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where and how a Run's pod executes tools.
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxSpec {
    /// Image of the `sandbox` container, which runs the model's tool calls. It must contain the
    /// `herd-runner` binary. No whitespace; pin it with `@sha256:<64 hex digits>` if you like.
    /// Absent: the operator's default image (Debian slim with bash, coreutils, python3 and git).
    #[schemars(length(max = 1024))]
    #[x_kube(validation = Rule::new(crate::rules::IMAGE).message(crate::rules::expression(crate::rules::IMAGE_MESSAGE)))]
    pub image: Option<String>,
    /// Requests and limits of the `sandbox` container, merged key by key over the operator's
    /// default (`--sandbox-resources`, by default requests `cpu: 100m`, `memory: 256Mi`, limit
    /// `memory: 2Gi`) when a Run is accepted: a key set here wins, the others keep the default.
    /// A request set here above the default limit raises that limit to it; a limit set here
    /// below the default request lowers that request to it. The `ephemeral-storage` limit (else
    /// request) also sizes the emptyDir workspace (default `10Gi`).
    pub resources: Option<SandboxResources>,
    /// RuntimeClass of the pod (a DNS-1123 subdomain), e.g. `gvisor` or `kata` for stronger
    /// isolation.
    #[schemars(length(max = 253))]
    #[x_kube(validation = Rule::new(crate::rules::DNS_SUBDOMAIN).message(crate::rules::expression(crate::rules::DNS_SUBDOMAIN_MESSAGE)))]
    pub runtime_class_name: Option<String>,
    /// Node labels the pod must be scheduled on (at most 32).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 32, "additionalProperties" = {"type": "string", "maxLength": 63}))]
    #[x_kube(validation = Rule::new(crate::rules::NODE_SELECTOR).message(crate::rules::expression(crate::rules::NODE_SELECTOR_MESSAGE)))]
    pub node_selector: BTreeMap<String, String>,
    /// Taints the pod tolerates (at most 32; operators `Exists` and `Equal`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::tolerations")]
    pub tolerations: Vec<Toleration>,
    /// The volume mounted at `/mnt/user-data` (workspace, uploads, outputs). Default: an
    /// emptyDir, gone with the pod.
    #[serde(default)]
    #[schemars(extend("default" = {}))]
    pub workspace: WorkspaceSpec,
    /// Where the pod may connect to, besides DNS, the run API and the model endpoint. Absent:
    /// `Internet` when the `web` tool group is on, else `None`.
    pub egress: Option<EgressSpec>,
}

/// Resources of the `sandbox` container, as in a Pod (`cpu`, `memory`, `ephemeral-storage`...).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxResources {
    /// Most of each resource the container may use, e.g. `memory: 2Gi` (at most 15).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 15, "additionalProperties" = {"x-kubernetes-int-or-string": true, "maxLength": 64, "description": "A quantity such as `500m` or `2` (CPU) or `512Mi` or `1Gi` (memory, storage)."}))]
    #[x_kube(validation = Rule::new(crate::rules::QUANTITIES).message(crate::rules::expression(crate::rules::QUANTITIES_MESSAGE)))]
    pub limits: BTreeMap<String, Quantity>,
    /// What the container is guaranteed, e.g. `cpu: 250m` (at most 15).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 15, "additionalProperties" = {"x-kubernetes-int-or-string": true, "maxLength": 64, "description": "A quantity such as `500m` or `2` (CPU) or `512Mi` or `1Gi` (memory, storage)."}))]
    #[x_kube(validation = Rule::new(crate::rules::QUANTITIES).message(crate::rules::expression(crate::rules::QUANTITIES_MESSAGE)))]
    pub requests: BTreeMap<String, Quantity>,
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
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceClaimSpec {
    /// StorageClass of the claim (a DNS-1123 subdomain). Absent: the cluster's default class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    #[x_kube(validation = Rule::new(crate::rules::DNS_SUBDOMAIN).message(crate::rules::expression(crate::rules::DNS_SUBDOMAIN_MESSAGE)))]
    pub storage_class_name: Option<String>,
    /// Requested size, e.g. `10Gi`. Default `10Gi`.
    #[serde(default = "default_size")]
    #[x_kube(validation = Rule::new(crate::rules::QUANTITY).message(crate::rules::expression(crate::rules::QUANTITY_MESSAGE)))]
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
    #[x_kube(validation = Rule::new(crate::rules::CIDRS).message(crate::rules::expression(crate::rules::CIDRS_MESSAGE)))]
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
