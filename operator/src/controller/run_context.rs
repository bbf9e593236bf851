//! What the Run controller's parts share: its context (caches, settings, admission), the
//! caches other controllers and tasks read, the operator-wide setup, and a Run's identity.

use super::superseded::Superseded;
use std::sync::Arc;

use herd_crds::agent::Agent;
use herd_crds::run::Run;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::runtime::reflector::Store;

use super::admission::Admission;
use super::run_api_tls::RunApiTls;
use super::run_changes::RunChanges;
use super::run_objects::Ensured;
use crate::config::RunPodConfig;
use crate::controller_state::Shared;
use crate::decide::run_network_policy::NetworkConfig;
use crate::decide::run_pod::PodConfig;

/// What the Run controller reads.
pub struct Context {
    /// Shared operator state.
    pub shared: Arc<Shared>,
    /// The Runs of the scope (parents and children).
    pub runs: Store<Run>,
    /// The Agents of the scope.
    pub agents: Store<Agent>,
    /// The operator's Pods of the scope.
    pub pods: Store<Pod>,
    /// The operator's ConfigMaps of the scope (snapshots, skill versions).
    pub config_maps: Store<ConfigMap>,
    /// How Run pods are made.
    pub pod_config: PodConfig,
    /// What Run pods may reach.
    pub network: NetworkConfig,
    /// Images of Run pods.
    pub images: RunPodConfig,
    /// The run API's TLS Secret and CA bundle.
    pub tls: Arc<RunApiTls>,
    /// The per-namespace objects in place: each namespace's, and the egress sets' policies.
    pub prepared: Ensured,
    /// Admission under the caps.
    pub admission: Arc<Admission>,
    /// The Run versions this controller wrote over: a reconcile of one waits for the newer.
    pub superseded: Superseded,
}

/// The caches of a Run controller other tasks read.
#[derive(Clone)]
pub struct RunCaches {
    /// The Runs of the scope.
    pub runs: Store<Run>,
    /// The operator's Pods of the scope.
    pub pods: Store<Pod>,
    /// The operator's ConfigMaps of the scope.
    pub config_maps: Store<ConfigMap>,
    /// The Runs' changes, once the store has them (the run API's long polls).
    pub changes: RunChanges,
}

/// What the Run controllers of an operator share besides [`Shared`].
#[derive(Clone)]
pub struct RunSetup {
    /// How Run pods are made.
    pub runs: RunPodConfig,
    /// The operator's namespace (the run API's TLS Secret, its pods).
    pub operator_namespace: String,
    /// The run API's TLS.
    pub tls: Arc<RunApiTls>,
    /// Admission under the caps.
    pub admission: Arc<Admission>,
}

/// The Run's identity, read once.
pub(super) struct Ids<'a> {
    /// `metadata.name`.
    pub(super) name: &'a str,
    /// `metadata.namespace`.
    pub(super) namespace: &'a str,
    /// `metadata.uid`.
    pub(super) uid: String,
}
