//! The Node this kubelet plays: created if missing, `Ready` through `nodes/status`, its
//! heartbeat renewed. Only this kubelet and the Pods bound to it care: there is no
//! scheduler, and the node lifecycle controllers are off on a node-less test cluster.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, NodeSystemInfo,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};

use super::env::POD_IP;

/// How often the node's conditions are written again.
const HEARTBEAT: Duration = Duration::from_secs(30);
/// The taint the API server puts on a new Node until a kubelet reports it ready.
const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";

/// The Node object, as a kubelet registers itself.
pub fn node(name: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(BTreeMap::from([
                ("kubernetes.io/hostname".to_owned(), name.to_owned()),
                ("kubernetes.io/os".to_owned(), "linux".to_owned()),
                ("kubernetes.io/arch".to_owned(), go_arch().to_owned()),
            ])),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec::default()),
        status: None,
    }
}

/// What the node reports: `Ready`, no pressure, this machine's size and identity.
pub fn node_status(name: &str, machine: &Machine, now: Timestamp) -> NodeStatus {
    let condition = |type_: &str, status: &str, reason: &str, message: &str| NodeCondition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
        last_heartbeat_time: Some(Time(now)),
        last_transition_time: Some(Time(machine.started)),
    };
    let resources = BTreeMap::from([
        ("cpu".to_owned(), Quantity(machine.cpus.to_string())),
        (
            "memory".to_owned(),
            Quantity(format!("{}Ki", machine.memory_kib)),
        ),
        ("pods".to_owned(), Quantity("110".to_owned())),
    ]);
    NodeStatus {
        conditions: Some(vec![
            condition(
                "Ready",
                "True",
                "KubeletReady",
                "local-kubelet is posting ready status",
            ),
            condition(
                "MemoryPressure",
                "False",
                "KubeletHasSufficientMemory",
                "local-kubelet does not watch memory",
            ),
            condition(
                "DiskPressure",
                "False",
                "KubeletHasNoDiskPressure",
                "local-kubelet does not watch disks",
            ),
            condition(
                "PIDPressure",
                "False",
                "KubeletHasSufficientPID",
                "local-kubelet does not watch PIDs",
            ),
        ]),
        addresses: Some(vec![
            NodeAddress {
                type_: "InternalIP".to_owned(),
                address: POD_IP.to_owned(),
            },
            NodeAddress {
                type_: "Hostname".to_owned(),
                address: name.to_owned(),
            },
        ]),
        capacity: Some(resources.clone()),
        allocatable: Some(resources),
        node_info: Some(NodeSystemInfo {
            architecture: go_arch().to_owned(),
            boot_id: machine.boot_id.clone(),
            container_runtime_version: format!("local-kubelet://{}", env!("CARGO_PKG_VERSION")),
            kernel_version: machine.kernel.clone(),
            kube_proxy_version: String::new(),
            kubelet_version: format!("local-kubelet-{}", env!("CARGO_PKG_VERSION")),
            machine_id: machine.machine_id.clone(),
            operating_system: "linux".to_owned(),
            os_image: machine.os_image.clone(),
            system_uuid: machine.machine_id.clone(),
            ..NodeSystemInfo::default()
        }),
        ..NodeStatus::default()
    }
}

/// Facts about this machine the node reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    /// When this kubelet started.
    pub started: Timestamp,
    /// CPUs.
    pub cpus: usize,
    /// Memory (`MemTotal`).
    pub memory_kib: u64,
    /// `/proc/sys/kernel/random/boot_id`.
    pub boot_id: String,
    /// `/etc/machine-id`.
    pub machine_id: String,
    /// `/proc/sys/kernel/osrelease`.
    pub kernel: String,
    /// `PRETTY_NAME` of `/etc/os-release`.
    pub os_image: String,
}

impl Machine {
    /// Reads this machine's facts; what cannot be read is left empty.
    pub fn read() -> Machine {
        let read = |path: &str| {
            std::fs::read_to_string(path)
                .map(|s| s.trim().to_owned())
                .unwrap_or_default()
        };
        Machine {
            started: Timestamp::now(),
            cpus: std::thread::available_parallelism().map_or(1, usize::from),
            memory_kib: mem_total_kib(&read("/proc/meminfo")).unwrap_or(0),
            boot_id: read("/proc/sys/kernel/random/boot_id"),
            machine_id: read("/etc/machine-id"),
            kernel: read("/proc/sys/kernel/osrelease"),
            os_image: pretty_name(&read("/etc/os-release")).unwrap_or_else(|| "Linux".into()),
        }
    }
}

fn mem_total_kib(meminfo: &str) -> Option<u64> {
    meminfo
        .lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn pretty_name(os_release: &str) -> Option<String> {
    let value = os_release
        .lines()
        .find_map(|line| line.strip_prefix("PRETTY_NAME="))?;
    Some(value.trim_matches('"').to_owned())
}

/// Go's name for this architecture, which is what Kubernetes labels use.
fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

/// Creates the node if it is missing, reports it ready, and lifts the not-ready taint the
/// API server gave it.
pub async fn register(nodes: &Api<Node>, name: &str, machine: &Machine) -> anyhow::Result<()> {
    match nodes.create(&PostParams::default(), &node(name)).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.is_already_exists() => {}
        Err(error) => return Err(error).with_context(|| format!("creating Node {name}")),
    }
    report(nodes, name, machine).await?;
    let current = nodes.get(name).await?;
    let taints = current
        .spec
        .and_then(|spec| spec.taints)
        .unwrap_or_default();
    if taints.iter().any(|t| t.key == NOT_READY_TAINT) {
        let kept: Vec<_> = taints
            .into_iter()
            .filter(|t| t.key != NOT_READY_TAINT)
            .collect();
        nodes
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"spec": {"taints": kept}})),
            )
            .await
            .with_context(|| format!("lifting the not-ready taint of Node {name}"))?;
    }
    Ok(())
}

async fn report(nodes: &Api<Node>, name: &str, machine: &Machine) -> anyhow::Result<()> {
    let status = node_status(name, machine, Timestamp::now());
    nodes
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"status": status})),
        )
        .await
        .with_context(|| format!("writing the status of Node {name}"))?;
    Ok(())
}

/// Renews the node's heartbeat forever (a failed write is logged and tried again).
pub async fn heartbeat(nodes: Api<Node>, name: String, machine: Machine) {
    loop {
        tokio::time::sleep(HEARTBEAT).await;
        if let Err(error) = report(&nodes, &name, &machine).await {
            tracing::warn!("node heartbeat: {error:#}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_is_ready_with_this_machines_facts() {
        let machine = Machine {
            started: Timestamp::from_second(1_700_000_000).unwrap(),
            cpus: 2,
            memory_kib: 4096,
            boot_id: "b".into(),
            machine_id: "m".into(),
            kernel: "6.1".into(),
            os_image: "Debian".into(),
        };
        let status = serde_json::to_value(node_status("n", &machine, machine.started)).unwrap();
        assert_eq!(status["conditions"][0]["type"], "Ready");
        assert_eq!(status["conditions"][0]["status"], "True");
        assert_eq!(status["capacity"]["cpu"], "2");
        assert_eq!(status["capacity"]["memory"], "4096Ki");
        assert_eq!(status["addresses"][0]["address"], "127.0.0.1");
        assert_eq!(status["nodeInfo"]["osImage"], "Debian");
        let node = serde_json::to_value(node("n")).unwrap();
        assert_eq!(node["metadata"]["labels"]["kubernetes.io/hostname"], "n");
    }

    #[test]
    fn machine_facts_are_parsed() {
        assert_eq!(
            mem_total_kib("MemTotal:       16314504 kB\nMemFree: 1 kB\n"),
            Some(16_314_504)
        );
        assert_eq!(mem_total_kib(""), None);
        assert_eq!(
            pretty_name("NAME=x\nPRETTY_NAME=\"Debian GNU/Linux 12\"\n").as_deref(),
            Some("Debian GNU/Linux 12")
        );
    }
}
