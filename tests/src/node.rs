//! The real node: a one-node cluster (kubelet, kube-scheduler and kube-proxy on containerd, its
//! own API server) that `scripts/e2e-node` starts from `../shared/node` and names with
//! `HERD_E2E_NODE`. The suite's [`Lane::Node`](crate::Lane::Node) tests run their Pods there:
//! real images, users, seccomp, cgroup limits, eviction, Pod IPs, Services, DNS and container
//! logs.
//!
//! Pods reach the machine only at the node's address on its bridge (`node_ip`, the Pods'
//! gateway): a run API or a test server meant for Pods listens there, never on 127.0.0.1,
//! which inside a Pod is the Pod.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodStatus};
use kube::api::{Api, ListParams, LogParams};

use crate::cluster::{Cluster, Source};

/// Names the folder of a running node rig (`scripts/e2e-node` prints it).
pub const NODE_ENV: &str = "HERD_E2E_NODE";

/// The images the rig's containerd holds for Herd (`scripts/build-images --repository
/// localhost --tag e2e`, imported by `scripts/e2e-node`).
pub const IMAGE_REPOSITORY: &str = "localhost";
/// Their tag.
pub const IMAGE_TAG: &str = "e2e";

/// A node rig and an admin client of its API server.
#[derive(Debug)]
pub struct RealNode {
    node_ip: IpAddr,
    node_name: String,
    cluster: Arc<Cluster>,
}

impl RealNode {
    /// The rig `HERD_E2E_NODE` names, if set (and not empty).
    pub fn dir_from_env() -> Option<PathBuf> {
        std::env::var_os(NODE_ENV)
            .filter(|dir| !dir.is_empty())
            .map(PathBuf::from)
    }

    /// Connects to the rig in `dir`: its `kubeconfig` and the node's address from its `env`.
    pub async fn connect(dir: &Path) -> anyhow::Result<RealNode> {
        let env_file = dir.join("env");
        let text = std::fs::read_to_string(&env_file).with_context(|| {
            format!(
                "reading {} (is the node rig running? scripts/e2e-node starts it)",
                env_file.display()
            )
        })?;
        let value = |key: &str| {
            text.lines()
                .find_map(|line| line.strip_prefix(key)?.strip_prefix('='))
                .map(str::to_owned)
                .with_context(|| format!("{} has no {key}=", env_file.display()))
        };
        let node_ip = value("node_ip")?
            .parse()
            .with_context(|| format!("node_ip in {}", env_file.display()))?;
        let node_name = value("node")?;
        let cluster = Arc::new(Cluster::connect(&Source::Existing(dir.join("kubeconfig"))).await?);
        Ok(RealNode {
            node_ip,
            node_name,
            cluster,
        })
    }

    /// The rig's cluster.
    pub fn cluster(&self) -> &Arc<Cluster> {
        &self.cluster
    }

    /// The node's address on the Pods' bridge: where Pods reach this machine.
    pub fn node_ip(&self) -> IpAddr {
        self.node_ip
    }

    /// The Node's name.
    pub fn node_name(&self) -> &str {
        &self.node_name
    }

    /// The image `herd-<name>` (operator, runner, sandbox) as the rig holds it.
    pub fn image(name: &str) -> String {
        format!("{IMAGE_REPOSITORY}/herd-{name}:{IMAGE_TAG}")
    }
}

/// Every container's log (current and, where it restarted, previous) of every Pod in
/// `namespace`, from the kubelet through the API server, as `(pod/container, text)`; what cannot
/// be read is said in the text.
pub async fn container_logs(client: &kube::Client, namespace: &str) -> Vec<(String, String)> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let Ok(list) = pods.list(&ListParams::default()).await else {
        return Vec::new();
    };
    let mut logs = Vec::new();
    for pod in list.items {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let status = pod.status.clone().unwrap_or_default();
        for container in container_statuses(&status) {
            let started = container
                .state
                .as_ref()
                .is_some_and(|s| s.waiting.is_none())
                || container.restart_count > 0;
            if !started {
                continue;
            }
            let mut params = LogParams {
                container: Some(container.name.clone()),
                ..LogParams::default()
            };
            let text = match pods.logs(&name, &params).await {
                Ok(text) => text,
                Err(e) => format!("(cannot read the log: {e})"),
            };
            logs.push((format!("{name}/{}", container.name), text));
            if container.restart_count > 0 {
                params.previous = true;
                if let Ok(text) = pods.logs(&name, &params).await {
                    logs.push((format!("{name}/{} (previous)", container.name), text));
                }
            }
        }
    }
    logs
}

/// Every container's status in a Pod's status: init containers (the `sandbox` sidecar among
/// them) first, then the others.
pub fn container_statuses(status: &PodStatus) -> impl Iterator<Item = &ContainerStatus> {
    status
        .init_container_statuses
        .iter()
        .flatten()
        .chain(status.container_statuses.iter().flatten())
}
