//! The NetworkPolicies of Run pods: a namespace default-deny for every pod labelled
//! `herd.dev/run`, and one policy per Run, built from its snapshot, opening exactly kube-dns,
//! the run API, the model endpoint, the HTTP MCP servers and `sandbox.egress`. Policies add up, so the per-Run one
//! only ever widens the default-deny for its own pod.

use std::collections::BTreeMap;

use herd_crds::agent::{EgressMode, Provider, ToolGroup};
use k8s_openapi::api::networking::v1::{
    IPBlock, NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyPeer, NetworkPolicyPort,
    NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta, OwnerReference,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::run_snapshot::Snapshot;
use crate::labels;

/// Name of the namespace's default-deny policy.
pub const DEFAULT_DENY: &str = "herd-runs-default-deny";

/// Label marking the operator's per-namespace objects.
pub const PER_NAMESPACE: &str = "herd.dev/per-namespace";

/// IPv4 ranges `Internet` leaves out: private, shared (CGNAT), link-local, loopback.
const NOT_INTERNET_V4: [&str; 6] = [
    "10.0.0.0/8",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "100.64.0.0/10",
    "169.254.0.0/16",
    "127.0.0.0/8",
];
/// IPv6 ranges `Internet` leaves out: ULA, link-local, loopback.
const NOT_INTERNET_V6: [&str; 3] = ["fc00::/7", "fe80::/10", "::1/128"];

/// Where Run pods reach the run API.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunApiPeer {
    /// The operator's pods, by namespace name and pod labels.
    Pods {
        /// The operator's namespace.
        namespace: String,
        /// The operator pods' labels.
        labels: BTreeMap<String, String>,
    },
    /// A CIDR, when the operator runs outside the cluster (`--run-api-cidr`).
    Cidr(String),
}

/// The network settings of Run pods.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetworkConfig {
    /// Labels of the cluster DNS pods (default `k8s-app: kube-dns`), in any namespace.
    pub dns_labels: BTreeMap<String, String>,
    /// The run API.
    pub run_api: RunApiPeer,
    /// The run API's port.
    pub run_api_port: i32,
    /// The OTLP endpoint Run pods export traces to, when they do: its CIDR and TCP port.
    pub otlp: Option<(String, i32)>,
}

fn selector(labels: BTreeMap<String, String>) -> LabelSelector {
    LabelSelector {
        match_labels: Some(labels),
        ..LabelSelector::default()
    }
}

fn meta(name: &str, namespace: &str, extra: &[(&str, &str)]) -> ObjectMeta {
    let mut all = BTreeMap::from([(labels::MANAGED_BY.to_owned(), labels::MANAGER.to_owned())]);
    all.extend(
        extra
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(namespace.to_owned()),
        labels: Some(all),
        ..ObjectMeta::default()
    }
}

/// The namespace's default-deny: no ingress, no egress, for every Run pod.
pub fn default_deny(namespace: &str) -> NetworkPolicy {
    NetworkPolicy {
        metadata: meta(DEFAULT_DENY, namespace, &[(PER_NAMESPACE, "true")]),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_expressions: Some(vec![LabelSelectorRequirement {
                    key: labels::RUN.to_owned(),
                    operator: "Exists".to_owned(),
                    values: None,
                }]),
                ..LabelSelector::default()
            }),
            policy_types: Some(vec!["Ingress".to_owned(), "Egress".to_owned()]),
            ingress: None,
            egress: None,
        }),
    }
}

fn ip_block(cidr: &str, except: Vec<String>) -> NetworkPolicyPeer {
    NetworkPolicyPeer {
        ip_block: Some(IPBlock {
            cidr: cidr.to_owned(),
            except: (!except.is_empty()).then_some(except),
        }),
        ..NetworkPolicyPeer::default()
    }
}

/// The public internet: everything but private, link-local and ULA ranges.
fn internet() -> Vec<NetworkPolicyPeer> {
    let owned = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect();
    vec![
        ip_block("0.0.0.0/0", owned(&NOT_INTERNET_V4)),
        ip_block("::/0", owned(&NOT_INTERNET_V6)),
    ]
}

fn cidrs(list: &[String]) -> Vec<NetworkPolicyPeer> {
    list.iter().map(|c| ip_block(c, Vec::new())).collect()
}

fn port(protocol: &str, number: i32) -> NetworkPolicyPort {
    NetworkPolicyPort {
        protocol: Some(protocol.to_owned()),
        port: Some(IntOrString::Int(number)),
        end_port: None,
    }
}

fn to(
    peers: Vec<NetworkPolicyPeer>,
    ports: Option<Vec<NetworkPolicyPort>>,
) -> NetworkPolicyEgressRule {
    NetworkPolicyEgressRule {
        to: Some(peers),
        ports,
    }
}

/// The peers `sandbox.egress` opens: explicit, else `Internet` when the `web` group is on,
/// else none.
fn sandbox_egress(snapshot: &Snapshot) -> Vec<NetworkPolicyPeer> {
    let egress = snapshot.agent.sandbox.egress.as_ref();
    let web = snapshot
        .agent
        .tool_groups
        .as_ref()
        .is_none_or(|groups| groups.contains(&ToolGroup::Web));
    let mode = egress.and_then(|e| e.mode).unwrap_or(if web {
        EgressMode::Internet
    } else {
        EgressMode::None
    });
    match mode {
        EgressMode::None => Vec::new(),
        EgressMode::Internet => internet(),
        EgressMode::Cidrs => cidrs(egress.map(|e| e.cidrs.as_slice()).unwrap_or_default()),
    }
}

/// The Run's own policy, named like the Run and owned by it.
pub fn desired_network_policy(
    run: &str,
    namespace: &str,
    owner: OwnerReference,
    snapshot: &Snapshot,
    config: &NetworkConfig,
) -> NetworkPolicy {
    let mut egress = vec![to(
        vec![NetworkPolicyPeer {
            namespace_selector: Some(LabelSelector::default()),
            pod_selector: Some(selector(config.dns_labels.clone())),
            ip_block: None,
        }],
        Some(vec![port("UDP", 53), port("TCP", 53)]),
    )];
    let run_api = match &config.run_api {
        RunApiPeer::Pods { namespace, labels } => NetworkPolicyPeer {
            namespace_selector: Some(selector(BTreeMap::from([(
                "kubernetes.io/metadata.name".to_owned(),
                namespace.clone(),
            )]))),
            pod_selector: Some(selector(labels.clone())),
            ip_block: None,
        },
        RunApiPeer::Cidr(cidr) => ip_block(cidr, Vec::new()),
    };
    egress.push(to(
        vec![run_api],
        Some(vec![port("TCP", config.run_api_port)]),
    ));
    if let Some((cidr, otlp_port)) = &config.otlp {
        egress.push(to(
            vec![ip_block(cidr, Vec::new())],
            Some(vec![port("TCP", *otlp_port)]),
        ));
    }
    if let Some(model) = &snapshot.agent.model
        && model.provider != Provider::Scripted
    {
        let peers = match &model.egress_cidrs {
            Some(list) => cidrs(list),
            None => internet(),
        };
        if !peers.is_empty() {
            egress.push(to(peers, None));
        }
    }
    let mcp_servers = snapshot.agent.mcp.iter().flat_map(|mcp| mcp.servers.iter());
    for server in mcp_servers.filter(|server| server.url.is_some()) {
        let peers = match &server.egress_cidrs {
            Some(list) => cidrs(list),
            None => internet(),
        };
        if !peers.is_empty() {
            egress.push(to(peers, None));
        }
    }
    let sandbox = sandbox_egress(snapshot);
    if !sandbox.is_empty() {
        egress.push(to(sandbox, None));
    }
    let mut metadata = meta(run, namespace, &[(labels::RUN, run)]);
    metadata.owner_references = Some(vec![owner]);
    NetworkPolicy {
        metadata,
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(selector(BTreeMap::from([(
                labels::RUN.to_owned(),
                run.to_owned(),
            )]))),
            policy_types: Some(vec!["Ingress".to_owned(), "Egress".to_owned()]),
            ingress: None,
            egress: Some(egress),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn snapshot(agent: serde_json::Value) -> Snapshot {
        serde_json::from_value(json!({
            "agentName": "a",
            "agent": agent,
            "run": {"planMode": false, "thinking": true, "timeoutSeconds": 60,
                    "inputTimeoutSeconds": 60, "maxModelCalls": 5, "retries": 0},
            "skills": [],
            "runnerImage": "r",
            "sandboxImage": "s",
            "depth": 0
        }))
        .unwrap()
    }

    fn owner() -> OwnerReference {
        OwnerReference {
            api_version: "herd.dev/v1alpha1".into(),
            kind: "Run".into(),
            name: "r".into(),
            uid: "u1".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    fn config() -> NetworkConfig {
        NetworkConfig {
            dns_labels: BTreeMap::from([("k8s-app".into(), "kube-dns".into())]),
            run_api: RunApiPeer::Pods {
                namespace: "herd-system".into(),
                labels: BTreeMap::from([("app.kubernetes.io/name".into(), "herd".into())]),
            },
            run_api_port: 8443,
            otlp: None,
        }
    }

    fn egress(policy: &NetworkPolicy) -> serde_json::Value {
        serde_json::to_value(&policy.spec.as_ref().unwrap().egress).unwrap()
    }

    const DNS: &str = r#"{"ports":[{"port":53,"protocol":"UDP"},{"port":53,"protocol":"TCP"}],"to":[{"namespaceSelector":{},"podSelector":{"matchLabels":{"k8s-app":"kube-dns"}}}]}"#;

    fn run_api() -> serde_json::Value {
        json!({"ports": [{"port": 8443, "protocol": "TCP"}], "to": [{
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "herd-system"}},
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "herd"}}}]})
    }

    fn internet_rule() -> serde_json::Value {
        json!({"to": [
            {"ipBlock": {"cidr": "0.0.0.0/0", "except": NOT_INTERNET_V4}},
            {"ipBlock": {"cidr": "::/0", "except": NOT_INTERNET_V6}}]})
    }

    #[test]
    fn the_default_deny_selects_every_run_pod_and_allows_nothing() {
        let policy = default_deny("ns");
        assert_eq!(
            serde_json::to_value(&policy).unwrap(),
            json!({
                "apiVersion": "networking.k8s.io/v1",
                "kind": "NetworkPolicy",
                "metadata": {"name": DEFAULT_DENY, "namespace": "ns", "labels": {
                    "app.kubernetes.io/managed-by": "herd-operator",
                    "herd.dev/per-namespace": "true"}},
                "spec": {"podSelector": {"matchExpressions": [
                            {"key": "herd.dev/run", "operator": "Exists"}]},
                         "policyTypes": ["Ingress", "Egress"]}
            })
        );
    }

    #[test]
    fn a_scripted_agent_without_web_reaches_only_dns_and_the_run_api() {
        let s = snapshot(json!({"model": {"provider": "scripted", "name": "s"},
                                "toolGroups": ["bash"]}));
        let policy = desired_network_policy("r", "ns", owner(), &s, &config());
        let dns: serde_json::Value = serde_json::from_str(DNS).unwrap();
        assert_eq!(egress(&policy), json!([dns, run_api()]));
        assert_eq!(policy.metadata.name.as_deref(), Some("r"));
        assert_eq!(policy.metadata.owner_references, Some(vec![owner()]));
        let spec = policy.spec.unwrap();
        assert_eq!(
            serde_json::to_value(spec.pod_selector).unwrap(),
            json!({"matchLabels": {"herd.dev/run": "r"}})
        );
        assert_eq!(spec.ingress, None, "no ingress at all");
        assert_eq!(
            spec.policy_types,
            Some(vec!["Ingress".into(), "Egress".into()])
        );
    }

    #[test]
    fn the_model_gets_its_cidrs_or_the_internet() {
        let s = snapshot(json!({"model": {"provider": "openai", "name": "m",
                                          "egressCIDRs": ["10.20.0.0/16"]},
                                "toolGroups": ["bash"]}));
        let e = egress(&desired_network_policy("r", "ns", owner(), &s, &config()));
        assert_eq!(e[2], json!({"to": [{"ipBlock": {"cidr": "10.20.0.0/16"}}]}));
        assert_eq!(e.as_array().unwrap().len(), 3);
        let s = snapshot(json!({"model": {"provider": "anthropic", "name": "m"},
                                "toolGroups": []}));
        let e = egress(&desired_network_policy("r", "ns", owner(), &s, &config()));
        assert_eq!(e[2], internet_rule());
    }

    #[test]
    fn sandbox_egress_follows_its_mode_or_the_web_group() {
        let scripted = json!({"provider": "scripted", "name": "s"});
        let cases = [
            (json!({"model": scripted}), Some(internet_rule())),
            (
                json!({"model": scripted, "toolGroups": ["web"]}),
                Some(internet_rule()),
            ),
            (json!({"model": scripted, "toolGroups": ["bash"]}), None),
            (
                json!({"model": scripted, "sandbox": {"egress": {"mode": "None"}}}),
                None,
            ),
            (
                json!({"model": scripted, "toolGroups": [],
                       "sandbox": {"egress": {"mode": "Internet"}}}),
                Some(internet_rule()),
            ),
            (
                json!({"model": scripted, "sandbox": {"egress": {"mode": "CIDRs",
                                                                 "cidrs": ["192.0.2.0/24"]}}}),
                Some(json!({"to": [{"ipBlock": {"cidr": "192.0.2.0/24"}}]})),
            ),
        ];
        for (agent, sandbox) in cases {
            let e = egress(&desired_network_policy(
                "r",
                "ns",
                owner(),
                &snapshot(agent.clone()),
                &config(),
            ));
            assert_eq!(e.get(2).cloned(), sandbox, "{agent}");
        }
    }

    #[test]
    fn each_http_mcp_server_gets_its_cidrs_or_the_internet_and_stdio_ones_nothing() {
        let s = snapshot(json!({"model": {"provider": "scripted", "name": "s"},
            "toolGroups": [],
            "mcp": {"servers": [
                {"name": "docs", "url": "http://docs.tools:8000/mcp",
                 "egressCIDRs": ["10.30.0.0/16", "fd00:30::/64"]},
                {"name": "time", "command": ["python3", "-m", "mcp_server_time"]},
                {"name": "public", "url": "https://mcp.example.com/mcp"},
                {"name": "closed", "url": "http://x/mcp", "egressCIDRs": []}]}}));
        let e = egress(&desired_network_policy("r", "ns", owner(), &s, &config()));
        assert_eq!(
            e.as_array().unwrap().len(),
            4,
            "DNS, the run API, docs, public: {e}"
        );
        assert_eq!(
            e[2],
            json!({"to": [{"ipBlock": {"cidr": "10.30.0.0/16"}},
                          {"ipBlock": {"cidr": "fd00:30::/64"}}]})
        );
        assert_eq!(e[3], internet_rule());
    }

    #[test]
    fn the_otlp_endpoint_is_opened_on_its_port_only() {
        let s = snapshot(json!({"model": {"provider": "scripted", "name": "s"},
                                "toolGroups": []}));
        let traced = NetworkConfig {
            otlp: Some(("10.0.0.9/32".into(), 4318)),
            ..config()
        };
        let e = egress(&desired_network_policy("r", "ns", owner(), &s, &traced));
        assert_eq!(
            e[2],
            json!({"ports": [{"port": 4318, "protocol": "TCP"}],
                   "to": [{"ipBlock": {"cidr": "10.0.0.9/32"}}]})
        );
        let plain = egress(&desired_network_policy("r", "ns", owner(), &s, &config()));
        assert_eq!(
            e.as_array().unwrap().len(),
            plain.as_array().unwrap().len() + 1
        );
    }

    #[test]
    fn an_outside_operator_is_reached_by_cidr() {
        let s = snapshot(json!({"model": {"provider": "scripted", "name": "s"},
                                "toolGroups": []}));
        let outside = NetworkConfig {
            run_api: RunApiPeer::Cidr("203.0.113.7/32".into()),
            ..config()
        };
        let e = egress(&desired_network_policy("r", "ns", owner(), &s, &outside));
        assert_eq!(
            e[1],
            json!({"ports": [{"port": 8443, "protocol": "TCP"}],
                   "to": [{"ipBlock": {"cidr": "203.0.113.7/32"}}]})
        );
    }
}
