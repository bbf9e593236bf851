//! The NetworkPolicies of Run pods: a namespace default-deny for every pod labelled
//! `herd.dev/run`, and one policy per egress set, built from a Run's snapshot, opening exactly
//! kube-dns, the run API, the model endpoint, the HTTP MCP servers and `sandbox.egress`.
//! Policies add up, so an egress-set policy only ever widens the default-deny, and only for the
//! pods labelled with its set.
//!
//! An egress set is named by a digest of its rules: every Run whose snapshot opens the same
//! peers shares one policy per namespace (most Runs of an Agent do), so a Run costs no
//! NetworkPolicy write of its own. The policy is a per-namespace object like the default-deny:
//! unowned, created when first needed, never updated (a different set is another policy).

use std::collections::BTreeMap;

use herd_crds::agent::{EgressMode, Provider, ToolGroup};
use k8s_openapi::api::networking::v1::{
    IPBlock, NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyPeer, NetworkPolicyPort,
    NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use sha2::{Digest, Sha256};

use super::run_snapshot::Snapshot;
use crate::labels;

/// Name of the namespace's default-deny policy.
pub const DEFAULT_DENY: &str = "herd-runs-default-deny";

/// Label marking the operator's per-namespace objects.
pub const PER_NAMESPACE: &str = "herd.dev/per-namespace";

/// Prefix of an egress-set policy's name; the set's digest follows.
pub const EGRESS_SET_PREFIX: &str = "herd-egress-";

/// Hex digits of the rules' SHA-256 that name an egress set: 64 bits, no collision among the
/// handful of sets a namespace sees.
const EGRESS_SET_DIGITS: usize = 16;

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

/// The egress set of a Run: its digest (the Pod's `herd.dev/egress-set` label) and the
/// namespace's policy that opens it.
#[derive(Clone, Debug, PartialEq)]
pub struct EgressSet {
    /// The digest of the rules, the value of the Pod's [`labels::EGRESS_SET`] label.
    pub digest: String,
    /// The policy selecting the pods of this set.
    pub policy: NetworkPolicy,
}

/// The egress set a Run with `snapshot` needs in `namespace`.
pub fn egress_set(namespace: &str, snapshot: &Snapshot, config: &NetworkConfig) -> EgressSet {
    let egress = egress_rules(snapshot, config);
    let digest = rules_digest(&egress);
    let name = format!("{EGRESS_SET_PREFIX}{digest}");
    let metadata = meta(
        &name,
        namespace,
        &[(PER_NAMESPACE, "true"), (labels::EGRESS_SET, &digest)],
    );
    let policy = NetworkPolicy {
        metadata,
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(selector(BTreeMap::from([(
                labels::EGRESS_SET.to_owned(),
                digest.clone(),
            )]))),
            policy_types: Some(vec!["Ingress".to_owned(), "Egress".to_owned()]),
            ingress: None,
            egress: Some(egress),
        }),
    };
    EgressSet { digest, policy }
}

/// The first [`EGRESS_SET_DIGITS`] hex digits of the SHA-256 of the rules' JSON (the rules are
/// built in a fixed order, so equal sets give equal digests).
fn rules_digest(egress: &[NetworkPolicyEgressRule]) -> String {
    // Plain structs with string keys always serialize.
    let json = serde_json::to_vec(egress).unwrap_or_default();
    let hex: String = Sha256::digest(&json)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    hex[..EGRESS_SET_DIGITS].to_owned()
}

/// What a Run with `snapshot` may reach: kube-dns, the run API, the OTLP endpoint, the model,
/// the HTTP MCP servers and `sandbox.egress`, in that order.
fn egress_rules(snapshot: &Snapshot, config: &NetworkConfig) -> Vec<NetworkPolicyEgressRule> {
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
    egress
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::fixtures::snapshot;
    use serde_json::json;
    use std::collections::BTreeSet;

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
        let EgressSet { digest, policy } = egress_set("ns", &s, &config());
        let dns: serde_json::Value = serde_json::from_str(DNS).unwrap();
        assert_eq!(egress(&policy), json!([dns, run_api()]));
        assert_eq!(digest.len(), EGRESS_SET_DIGITS);
        assert!(digest.chars().all(|c| c.is_ascii_hexdigit()), "{digest}");
        assert_eq!(
            policy.metadata.name,
            Some(format!("{EGRESS_SET_PREFIX}{digest}"))
        );
        assert_eq!(policy.metadata.owner_references, None, "per namespace");
        assert_eq!(
            serde_json::to_value(&policy.metadata.labels).unwrap(),
            json!({"app.kubernetes.io/managed-by": "herd-operator",
                   "herd.dev/per-namespace": "true", "herd.dev/egress-set": digest})
        );
        let spec = policy.spec.unwrap();
        assert_eq!(
            serde_json::to_value(spec.pod_selector).unwrap(),
            json!({"matchLabels": {"herd.dev/egress-set": digest}})
        );
        assert_eq!(spec.ingress, None, "no ingress at all");
        assert_eq!(
            spec.policy_types,
            Some(vec!["Ingress".into(), "Egress".into()])
        );
    }

    #[test]
    fn runs_that_open_the_same_peers_share_one_set_and_others_get_their_own() {
        let bash =
            |model: serde_json::Value| snapshot(json!({"model": model, "toolGroups": ["bash"]}));
        let digest = |s: &Snapshot, config: &NetworkConfig| egress_set("ns", s, config).digest;
        let scripted = bash(json!({"provider": "scripted", "name": "s"}));
        let other_scripted = bash(json!({"provider": "scripted", "name": "t"}));
        assert_eq!(
            digest(&scripted, &config()),
            digest(&other_scripted, &config()),
            "the same peers: one set"
        );
        assert_eq!(
            egress_set("ns", &scripted, &config()).policy.spec,
            egress_set("other", &scripted, &config()).policy.spec,
            "a set is the same in every namespace"
        );
        let openai = bash(json!({"provider": "openai", "name": "m"}));
        let narrowed = bash(json!({"provider": "openai", "name": "m",
                                   "egressCIDRs": ["10.20.0.0/16"]}));
        let traced = NetworkConfig {
            otlp: Some(("10.0.0.9/32".into(), 4318)),
            ..config()
        };
        let digests = BTreeSet::from([
            digest(&scripted, &config()),
            digest(&openai, &config()),
            digest(&narrowed, &config()),
            digest(&scripted, &traced),
        ]);
        assert_eq!(digests.len(), 4, "each other set its own: {digests:?}");
    }

    #[test]
    fn the_model_gets_its_cidrs_or_the_internet() {
        let s = snapshot(json!({"model": {"provider": "openai", "name": "m",
                                          "egressCIDRs": ["10.20.0.0/16"]},
                                "toolGroups": ["bash"]}));
        let e = egress(&egress_set("ns", &s, &config()).policy);
        assert_eq!(e[2], json!({"to": [{"ipBlock": {"cidr": "10.20.0.0/16"}}]}));
        assert_eq!(e.as_array().unwrap().len(), 3);
        let s = snapshot(json!({"model": {"provider": "anthropic", "name": "m"},
                                "toolGroups": []}));
        let e = egress(&egress_set("ns", &s, &config()).policy);
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
            let e = egress(&egress_set("ns", &snapshot(agent.clone()), &config()).policy);
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
        let e = egress(&egress_set("ns", &s, &config()).policy);
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
        let e = egress(&egress_set("ns", &s, &traced).policy);
        assert_eq!(
            e[2],
            json!({"ports": [{"port": 4318, "protocol": "TCP"}],
                   "to": [{"ipBlock": {"cidr": "10.0.0.9/32"}}]})
        );
        let plain = egress(&egress_set("ns", &s, &config()).policy);
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
        let e = egress(&egress_set("ns", &s, &outside).policy);
        assert_eq!(
            e[1],
            json!({"ports": [{"port": 8443, "protocol": "TCP"}],
                   "to": [{"ipBlock": {"cidr": "203.0.113.7/32"}}]})
        );
    }
}
