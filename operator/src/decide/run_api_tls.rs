//! The run API's TLS: when the Secret `herd-run-api-tls` needs a new leaf or a new CA, which
//! names the leaf carries, and the CA bundle every namespace with Run pods trusts.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::run_network_policy::PER_NAMESPACE;
use super::run_pod::{CA_KEY, RUN_API_CA};
use crate::labels;

/// The Secret holding the run API's serving certificate, its key and its CA.
pub const TLS_SECRET: &str = "herd-run-api-tls";
/// How long the self-signed CA is valid.
pub const CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);
/// How long a serving certificate is valid.
pub const LEAF_VALIDITY: Duration = Duration::from_secs(365 * 24 * 3600);
/// Annotation: when the CA's validity ends (RFC 3339).
pub const CA_NOT_AFTER: &str = "herd.dev/ca-not-after";
/// Annotation: when the CA's validity starts (RFC 3339).
pub const CA_NOT_BEFORE: &str = "herd.dev/ca-not-before";
/// Annotation: when the leaf's validity ends (RFC 3339).
pub const LEAF_NOT_AFTER: &str = "herd.dev/leaf-not-after";
/// Annotation: when the leaf's validity starts (RFC 3339).
pub const LEAF_NOT_BEFORE: &str = "herd.dev/leaf-not-before";
/// Annotation: the leaf's subject alternative names, comma-separated.
pub const LEAF_NAMES: &str = "herd.dev/leaf-names";

const END_CERTIFICATE: &str = "-----END CERTIFICATE-----";

/// When a certificate is valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Validity {
    /// Its first valid instant.
    pub not_before: Timestamp,
    /// Its last valid instant.
    pub not_after: Timestamp,
}

impl Validity {
    /// Valid from `now` for `length`.
    pub fn starting(now: Timestamp, length: Duration) -> Option<Self> {
        let not_after = now
            .checked_add(jiff::SignedDuration::try_from(length).ok()?)
            .ok()?;
        Some(Validity {
            not_before: now,
            not_after,
        })
    }

    /// When two thirds of its life have passed (the earliest instant when it has no life at
    /// all: due at once).
    pub fn renew_at(&self) -> Timestamp {
        let life = self.not_after.duration_since(self.not_before);
        if life.is_negative() || life.is_zero() {
            return Timestamp::MIN;
        }
        self.not_before
            .checked_add(life / 3 * 2)
            .unwrap_or(self.not_before)
    }

    /// Whether two thirds of its life have passed at `now` (or it is unusable).
    pub fn renewal_due(&self, now: Timestamp) -> bool {
        now >= self.renew_at()
    }
}

/// What the Secret's annotations say was issued.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Issued {
    /// The CA's validity, when readable.
    pub ca: Option<Validity>,
    /// The leaf's validity, when readable.
    pub leaf: Option<Validity>,
    /// The leaf's names.
    pub names: Vec<String>,
}

impl Issued {
    /// Reads the annotations of the TLS Secret; unreadable values count as absent.
    pub fn from_annotations(annotations: &BTreeMap<String, String>) -> Self {
        let time = |key: &str| annotations.get(key).and_then(|t| t.parse().ok());
        let validity = |before: &str, after: &str| {
            Some(Validity {
                not_before: time(before)?,
                not_after: time(after)?,
            })
        };
        Issued {
            ca: validity(CA_NOT_BEFORE, CA_NOT_AFTER),
            leaf: validity(LEAF_NOT_BEFORE, LEAF_NOT_AFTER),
            names: annotations
                .get(LEAF_NAMES)
                .map(|n| split_names(n))
                .unwrap_or_default(),
        }
    }

    /// The annotations recording this issuance.
    pub fn annotations(&self) -> BTreeMap<String, String> {
        let mut all = BTreeMap::new();
        if let Some(ca) = self.ca {
            all.insert(CA_NOT_BEFORE.to_owned(), ca.not_before.to_string());
            all.insert(CA_NOT_AFTER.to_owned(), ca.not_after.to_string());
        }
        if let Some(leaf) = self.leaf {
            all.insert(LEAF_NOT_BEFORE.to_owned(), leaf.not_before.to_string());
            all.insert(LEAF_NOT_AFTER.to_owned(), leaf.not_after.to_string());
        }
        all.insert(LEAF_NAMES.to_owned(), self.names.join(","));
        all
    }
}

fn split_names(text: &str) -> Vec<String> {
    text.split(',')
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .collect()
}

/// What the TLS Secret needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Renewal {
    /// Nothing: both certificates are in the first two thirds of their lives.
    Keep,
    /// A new leaf from the same CA (due, or the names changed).
    Leaf,
    /// A new CA and a new leaf; the bundle keeps the old CA beside the new one.
    All,
}

/// What `issued` needs at `now` for a leaf carrying `names`.
pub fn renewal(issued: &Issued, names: &[String], now: Timestamp) -> Renewal {
    match (issued.ca, issued.leaf) {
        (Some(ca), _) if ca.renewal_due(now) => Renewal::All,
        (None, _) => Renewal::All,
        (Some(_), Some(leaf)) if !leaf.renewal_due(now) && issued.names == names => Renewal::Keep,
        (Some(_), _) => Renewal::Leaf,
    }
}

/// Longest sleep between two looks at the TLS Secret: cert-manager, an admin or another
/// replica may change it, and a copy of the bundle may have been edited.
pub const MAX_CHECK_INTERVAL: Duration = Duration::from_secs(3600);

/// How long until the TLS Secret needs looking at again: its first renewal (the leaf's or the
/// CA's, at two thirds of their lives), at most [`MAX_CHECK_INTERVAL`], at least a second.
pub fn next_check(issued: &Issued, now: Timestamp) -> Duration {
    let until = |validity: &Validity| {
        Duration::try_from(validity.renew_at().duration_since(now)).unwrap_or(Duration::ZERO)
    };
    [issued.ca.as_ref(), issued.leaf.as_ref()]
        .into_iter()
        .flatten()
        .map(until)
        .fold(MAX_CHECK_INTERVAL, Duration::min)
        .max(Duration::from_secs(1))
}

/// The leaf's names: `dns_names`, then the host of `run_api_url`, without duplicates or
/// empties, in that order.
pub fn leaf_names(dns_names: &[String], run_api_url: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let host = url_host(run_api_url);
    for name in dns_names.iter().map(String::as_str).chain(host) {
        let name = name.trim();
        if !name.is_empty() && !names.iter().any(|n| n == name) {
            names.push(name.to_owned());
        }
    }
    names
}

/// The host of a URL (`https://host:port/path`), without brackets around an IPv6 address.
pub fn url_host(url: &str) -> Option<&str> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let host = if let Some(bracketed) = host_port.strip_prefix('[') {
        bracketed.split_once(']').map(|(host, _)| host)?
    } else {
        host_port.split(':').next().unwrap_or_default()
    };
    (!host.is_empty()).then_some(host)
}

/// The certificates of a PEM text, each ending with its END line.
fn certificates(pem: &str) -> Vec<String> {
    pem.split_inclusive(END_CERTIFICATE)
        .filter(|c| c.contains(END_CERTIFICATE))
        .map(|c| format!("{}\n", c.trim()))
        .collect()
}

/// The bundle after a CA rotation: the new CA, then the CA the old bundle started with (clients
/// still holding the old bundle trust the old leaf until they reload).
pub fn rotated_bundle(new_ca: &str, previous_bundle: &str) -> String {
    let mut all = certificates(new_ca);
    if let Some(old) = certificates(previous_bundle).into_iter().next()
        && !all.contains(&old)
    {
        all.push(old);
    }
    all.concat()
}

/// The first certificate of a bundle: the CA signing leaves now.
pub fn current_ca(bundle: &str) -> Option<String> {
    certificates(bundle).into_iter().next()
}

/// The namespace's copy of the CA bundle, mounted by every Run pod there.
pub fn ca_config_map(namespace: &str, bundle: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(RUN_API_CA.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some(per_namespace_labels()),
            ..ObjectMeta::default()
        },
        data: Some([(CA_KEY.to_owned(), bundle.to_owned())].into()),
        ..ConfigMap::default()
    }
}

/// Whether the namespace's copy differs from `bundle`.
pub fn ca_config_map_stale(existing: &ConfigMap, bundle: &str) -> bool {
    existing
        .data
        .as_ref()
        .and_then(|d| d.get(CA_KEY))
        .is_none_or(|b| b != bundle)
}

/// The namespaces whose copy of the CA bundle differs from `bundle`, among `config_maps` (the
/// operator's cached ConfigMaps).
pub fn stale_copies<'a>(
    config_maps: impl IntoIterator<Item = &'a ConfigMap>,
    bundle: &str,
) -> Vec<String> {
    let mut namespaces: Vec<String> = config_maps
        .into_iter()
        .filter(|cm| cm.metadata.name.as_deref() == Some(RUN_API_CA))
        .filter(|cm| ca_config_map_stale(cm, bundle))
        .filter_map(|cm| cm.metadata.namespace.clone())
        .collect();
    namespaces.sort();
    namespaces.dedup();
    namespaces
}

/// The labels of the operator's per-namespace objects and of the TLS Secret.
pub fn per_namespace_labels() -> BTreeMap<String, String> {
    [
        (labels::MANAGED_BY.to_owned(), labels::MANAGER.to_owned()),
        (PER_NAMESPACE.to_owned(), "true".to_owned()),
    ]
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn names(all: &[&str]) -> Vec<String> {
        all.iter().map(|n| (*n).to_owned()).collect()
    }

    fn issued(ca: (&str, &str), leaf: (&str, &str), leaf_names: &[&str]) -> Issued {
        Issued {
            ca: Some(Validity {
                not_before: at(ca.0),
                not_after: at(ca.1),
            }),
            leaf: Some(Validity {
                not_before: at(leaf.0),
                not_after: at(leaf.1),
            }),
            names: names(leaf_names),
        }
    }

    #[test]
    fn renewal_is_due_at_two_thirds_of_the_life() {
        let v = Validity {
            not_before: at("2026-01-01T00:00:00Z"),
            not_after: at("2026-01-04T00:00:00Z"),
        };
        assert!(!v.renewal_due(at("2026-01-02T23:59:59Z")));
        assert!(v.renewal_due(at("2026-01-03T00:00:00Z")));
        assert!(v.renewal_due(at("2027-01-01T00:00:00Z")), "expired");
        let backwards = Validity {
            not_before: v.not_after,
            not_after: v.not_before,
        };
        assert!(backwards.renewal_due(at("2026-01-01T00:00:00Z")));
    }

    #[test]
    fn a_year_leaf_renews_after_eight_months() {
        let now = at("2026-01-01T00:00:00Z");
        let leaf = Validity::starting(now, LEAF_VALIDITY).unwrap();
        assert!(!leaf.renewal_due(at("2026-08-31T00:00:00Z")));
        assert!(leaf.renewal_due(at("2026-09-02T00:00:00Z")));
        let ca = Validity::starting(now, CA_VALIDITY).unwrap();
        assert!(!ca.renewal_due(at("2032-08-01T00:00:00Z")));
        assert!(ca.renewal_due(at("2032-09-01T00:00:00Z")));
    }

    #[test]
    fn renewal_decisions() {
        let now = at("2026-06-01T00:00:00Z");
        let ca = ("2026-01-01T00:00:00Z", "2036-01-01T00:00:00Z");
        let fresh = ("2026-05-01T00:00:00Z", "2027-05-01T00:00:00Z");
        let old = ("2025-07-01T00:00:00Z", "2026-07-01T00:00:00Z");
        let wanted = names(&["a.svc", "10.0.0.1"]);
        assert_eq!(
            renewal(&issued(ca, fresh, &["a.svc", "10.0.0.1"]), &wanted, now),
            Renewal::Keep
        );
        assert_eq!(
            renewal(&issued(ca, old, &["a.svc", "10.0.0.1"]), &wanted, now),
            Renewal::Leaf
        );
        assert_eq!(
            renewal(&issued(ca, fresh, &["a.svc"]), &wanted, now),
            Renewal::Leaf,
            "the names changed"
        );
        let mut no_leaf = issued(ca, fresh, &["a.svc", "10.0.0.1"]);
        no_leaf.leaf = None;
        assert_eq!(renewal(&no_leaf, &wanted, now), Renewal::Leaf);
        let old_ca = ("2016-01-01T00:00:00Z", "2026-12-01T00:00:00Z");
        assert_eq!(
            renewal(&issued(old_ca, fresh, &["a.svc", "10.0.0.1"]), &wanted, now),
            Renewal::All
        );
        assert_eq!(renewal(&Issued::default(), &wanted, now), Renewal::All);
    }

    #[test]
    fn the_next_check_is_the_first_renewal_within_an_hour() {
        let now = at("2026-06-01T00:00:00Z");
        let ca = ("2026-01-01T00:00:00Z", "2036-01-01T00:00:00Z");
        // Two thirds of a 30 s life starting now: 20 s.
        let soon = ("2026-06-01T00:00:00Z", "2026-06-01T00:00:30Z");
        assert_eq!(
            next_check(&issued(ca, soon, &[]), now),
            Duration::from_secs(20)
        );
        let fresh = ("2026-05-01T00:00:00Z", "2027-05-01T00:00:00Z");
        assert_eq!(
            next_check(&issued(ca, fresh, &[]), now),
            MAX_CHECK_INTERVAL,
            "a year-long leaf is looked at again within the hour"
        );
        let ca_soon = ("2026-05-31T23:59:00Z", "2026-06-01T00:02:00Z");
        assert_eq!(
            next_check(&issued(ca_soon, fresh, &[]), now),
            Duration::from_secs(60),
            "the CA's renewal counts too"
        );
        let overdue = ("2025-01-01T00:00:00Z", "2025-06-01T00:00:00Z");
        assert_eq!(
            next_check(&issued(ca, overdue, &[]), now),
            Duration::from_secs(1),
            "overdue: at once, but never a busy loop"
        );
        assert_eq!(next_check(&Issued::default(), now), MAX_CHECK_INTERVAL);
    }

    #[test]
    fn stale_copies_are_the_namespaces_whose_bundle_differs() {
        let mut other = ca_config_map("c", A);
        other.metadata.name = Some("not-the-ca".into());
        let copies = [
            ca_config_map("b", A),
            ca_config_map("a", B),
            ca_config_map("d", &format!("{B}{A}")),
            other,
        ];
        assert_eq!(stale_copies(&copies, B), ["b", "d"]);
        assert_eq!(stale_copies(&copies, A), ["a", "d"]);
        assert!(stale_copies(&[], A).is_empty());
    }

    #[test]
    fn annotations_round_trip() {
        let all = issued(
            ("2026-01-01T00:00:00Z", "2036-01-01T00:00:00Z"),
            ("2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z"),
            &["a", "b"],
        );
        assert_eq!(Issued::from_annotations(&all.annotations()), all);
        let mut broken = all.annotations();
        broken.insert(LEAF_NOT_AFTER.to_owned(), "yesterday".to_owned());
        assert_eq!(Issued::from_annotations(&broken).leaf, None);
        assert_eq!(Issued::from_annotations(&broken).ca, all.ca);
    }

    #[test]
    fn leaf_names_are_the_dns_names_and_the_url_host() {
        let dns = names(&["herd-operator.herd-system.svc", "herd-operator"]);
        assert_eq!(
            leaf_names(&dns, "https://herd-operator.herd-system.svc:8443"),
            dns
        );
        assert_eq!(
            leaf_names(&dns, "https://10.1.2.3:8443/x"),
            names(&["herd-operator.herd-system.svc", "herd-operator", "10.1.2.3"])
        );
        assert_eq!(
            leaf_names(&[], "https://[fd00::1]:8443"),
            names(&["fd00::1"])
        );
        assert_eq!(leaf_names(&[], "https://"), Vec::<String>::new());
    }

    #[test]
    fn url_hosts() {
        assert_eq!(url_host("https://a.b:1/c?d"), Some("a.b"));
        assert_eq!(url_host("https://user@a.b"), Some("a.b"));
        assert_eq!(url_host("a.b:8443"), Some("a.b"));
        assert_eq!(url_host("https://[::1]:8443"), Some("::1"));
        assert_eq!(url_host("https://[::1"), None);
        assert_eq!(url_host(""), None);
    }

    const A: &str = "-----BEGIN CERTIFICATE-----\nAAA\n-----END CERTIFICATE-----\n";
    const B: &str = "-----BEGIN CERTIFICATE-----\nBBB\n-----END CERTIFICATE-----\n";
    const C: &str = "-----BEGIN CERTIFICATE-----\nCCC\n-----END CERTIFICATE-----\n";

    #[test]
    fn rotation_keeps_the_previous_ca_only() {
        assert_eq!(rotated_bundle(B, A), format!("{B}{A}"));
        assert_eq!(
            rotated_bundle(C, &format!("{B}{A}")),
            format!("{C}{B}"),
            "the CA before the previous one is dropped"
        );
        assert_eq!(rotated_bundle(A, A), A, "no duplicate");
        assert_eq!(rotated_bundle(A, ""), A);
        assert_eq!(current_ca(&format!("{B}{A}")).as_deref(), Some(B));
        assert_eq!(current_ca("garbage"), None);
    }

    #[test]
    fn the_ca_config_map_is_labelled_and_compared_by_content() {
        let cm = ca_config_map("ns", A);
        assert_eq!(cm.metadata.name.as_deref(), Some(RUN_API_CA));
        let labels = cm.metadata.labels.clone().unwrap();
        assert_eq!(labels[labels::MANAGED_BY], labels::MANAGER);
        assert_eq!(labels[PER_NAMESPACE], "true");
        assert!(!ca_config_map_stale(&cm, A));
        assert!(ca_config_map_stale(&cm, &format!("{B}{A}")));
        assert!(ca_config_map_stale(&ConfigMap::default(), A));
    }

    proptest! {
        #[test]
        fn url_host_never_panics_and_finds_generated_hosts(
            junk in ".{0,64}",
            host in "[a-z][a-z0-9.-]{0,20}",
            port in 1u16..,
            path in "(/[a-z0-9]{0,8}){0,3}",
        ) {
            let _ = url_host(&junk);
            let _ = leaf_names(std::slice::from_ref(&junk), &junk);
            let url = format!("https://{host}:{port}{path}");
            prop_assert_eq!(url_host(&url), Some(host.as_str()));
        }
    }
}
