//! `--runner-resources` and `--sandbox-resources`: the `agent` and `sandbox` containers'
//! requests and limits as `requests.cpu=50m,requests.memory=128Mi,limits.memory=1Gi`, checked
//! at start so a typo fails the operator instead of every Run's Pod; and the merge of an
//! Agent's `sandbox.resources` over the sandbox default.

use std::collections::BTreeMap;

use herd_crds::agent::SandboxResources;
use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// The `agent` default: requests 50m CPU and 128Mi memory, a 1Gi memory limit.
pub const DEFAULT_RUNNER_RESOURCES: &str =
    "requests.cpu=50m,requests.memory=128Mi,limits.memory=1Gi";

/// The `sandbox` default: requests 100m CPU and 256Mi memory, a 2Gi memory limit. The sandbox
/// runs the model's bash and python (builds, data work), so it gets more than the agent; the
/// memory limit keeps a runaway tool from taking the node, and ends it as `OOMKilled`. No CPU
/// limit: CPU is compressible and a throttled tool only gets slow. No `ephemeral-storage`: the
/// root filesystem is read-only and every writable path is an emptyDir with its own `sizeLimit`
/// (workspace 10Gi, `/tmp` 1Gi); a container limit would also cap the whole Pod's disk below
/// the workspace's size, since the kubelet sums the containers' limits.
pub const DEFAULT_SANDBOX_RESOURCES: &str =
    "requests.cpu=100m,requests.memory=256Mi,limits.memory=2Gi";

/// Parses `requests.<resource>=<quantity>` and `limits.<resource>=<quantity>` pairs,
/// comma-separated; empty means none.
pub fn parse_resources(text: &str) -> Result<ResourceRequirements, String> {
    let mut requests = BTreeMap::new();
    let mut limits = BTreeMap::new();
    for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| format!("`{pair}`: expected requests.<resource>=<quantity>"))?;
        let (kind, resource) = key
            .trim()
            .split_once('.')
            .ok_or_else(|| format!("`{key}`: expected requests.<resource> or limits.<resource>"))?;
        let target = match kind {
            "requests" => &mut requests,
            "limits" => &mut limits,
            other => return Err(format!("`{other}`: expected requests or limits")),
        };
        if !valid_resource(resource) {
            return Err(format!("`{resource}` is not a resource name"));
        }
        let value = value.trim();
        if !valid_quantity(value) {
            return Err(format!(
                "`{value}` is not a quantity (e.g. 50m, 128Mi, 1.5)"
            ));
        }
        if target
            .insert(resource.to_owned(), Quantity(value.to_owned()))
            .is_some()
        {
            return Err(format!("`{key}` is given twice"));
        }
    }
    if let Some((resource, request, limit)) = over_limit(&requests, &limits) {
        return Err(format!(
            "requests.{resource}={request} exceeds limits.{resource}={limit}"
        ));
    }
    let some = |map: BTreeMap<String, Quantity>| (!map.is_empty()).then_some(map);
    Ok(ResourceRequirements {
        requests: some(requests),
        limits: some(limits),
        ..ResourceRequirements::default()
    })
}

/// The first resource whose request exceeds its limit (the API server refuses such a Pod).
fn over_limit<'a>(
    requests: &'a BTreeMap<String, Quantity>,
    limits: &'a BTreeMap<String, Quantity>,
) -> Option<(&'a str, &'a str, &'a str)> {
    requests.iter().find_map(|(resource, request)| {
        let limit = limits.get(resource)?;
        exceeds(request, limit).then_some((resource.as_str(), request.0.as_str(), limit.0.as_str()))
    })
}

/// Whether quantity `a` is larger than `b`; false when either does not parse.
fn exceeds(a: &Quantity, b: &Quantity) -> bool {
    match (quantity_value(&a.0), quantity_value(&b.0)) {
        (Some(a), Some(b)) => a > b,
        _ => false,
    }
}

/// The `sandbox` container's resources: the operator's `defaults` (`--sandbox-resources`) with
/// the Agent's `sandbox.resources` merged over them key by key, the Agent's keys winning, so an
/// Agent that sets only `requests.cpu` keeps the default memory request and limit. A request
/// never ends above its limit because of the merge: an Agent's request above the default limit
/// raises that limit to it (the Agent asked for more than the default allows, and keeps a
/// cap), and an Agent's limit below the default request lowers that request to it. A request
/// and a limit both the Agent's are left as given (the API server tells the user). `None` when
/// neither sets anything.
pub fn sandbox_resources(
    defaults: &ResourceRequirements,
    agent: Option<&SandboxResources>,
) -> Option<SandboxResources> {
    let empty = SandboxResources::default();
    let own = agent.unwrap_or(&empty);
    let mut requests = defaults.requests.clone().unwrap_or_default();
    let mut limits = defaults.limits.clone().unwrap_or_default();
    requests.extend(own.requests.clone());
    limits.extend(own.limits.clone());
    let resources: Vec<String> = requests.keys().cloned().collect();
    for resource in resources {
        let (Some(request), Some(limit)) = (requests.get(&resource), limits.get(&resource)) else {
            continue;
        };
        if !exceeds(request, limit) {
            continue;
        }
        let (request, limit) = (request.clone(), limit.clone());
        match (
            own.requests.contains_key(&resource),
            own.limits.contains_key(&resource),
        ) {
            (true, false) => {
                limits.insert(resource, request);
            }
            (false, true) => {
                requests.insert(resource, limit);
            }
            _ => {}
        }
    }
    let merged = SandboxResources { limits, requests };
    (merged != SandboxResources::default()).then_some(merged)
}

/// A quantity's value, for comparisons only (`1Gi` = 1073741824, `500m` = 0.5).
fn quantity_value(text: &str) -> Option<f64> {
    if !valid_quantity(text) {
        return None;
    }
    let number_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(number_end);
    let number: f64 = number.parse().ok()?;
    let scale = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        exponent => {
            let digits = exponent.get(1..)?;
            10f64.powi(digits.parse::<i32>().ok()?)
        }
    };
    Some(number * scale)
}

fn valid_resource(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-./".contains(c))
}

/// A Kubernetes quantity: a non-negative decimal number with an optional binary (Ki..Ei),
/// decimal (n, u, m, k, M, G, T, P, E) or exponent suffix.
fn valid_quantity(text: &str) -> bool {
    let number_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(number_end);
    let digits = number.replace('.', "");
    let number_ok = !digits.is_empty() && number.matches('.').count() <= 1;
    let suffix_ok = matches!(
        suffix,
        "" | "Ki"
            | "Mi"
            | "Gi"
            | "Ti"
            | "Pi"
            | "Ei"
            | "n"
            | "u"
            | "m"
            | "k"
            | "M"
            | "G"
            | "T"
            | "P"
            | "E"
    ) || suffix
        .strip_prefix(['e', 'E'])
        .map(|e| e.strip_prefix(['+', '-']).unwrap_or(e))
        .is_some_and(|e| !e.is_empty() && e.chars().all(|c| c.is_ascii_digit()));
    number_ok && suffix_ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn q(text: &str) -> Quantity {
        Quantity(text.to_owned())
    }

    #[test]
    fn the_default_requests_50m_and_128mi_and_limits_1gi() {
        let parsed = parse_resources(DEFAULT_RUNNER_RESOURCES).unwrap();
        assert_eq!(
            parsed.requests,
            Some(BTreeMap::from([
                ("cpu".to_owned(), q("50m")),
                ("memory".to_owned(), q("128Mi")),
            ]))
        );
        assert_eq!(
            parsed.limits,
            Some(BTreeMap::from([("memory".to_owned(), q("1Gi"))]))
        );
    }

    #[test]
    fn other_values_and_empty() {
        let parsed =
            parse_resources(" requests.cpu = 1.5 , limits.ephemeral-storage=2e3,limits.cpu=2")
                .unwrap();
        assert_eq!(
            parsed.requests,
            Some(BTreeMap::from([("cpu".to_owned(), q("1.5"))]))
        );
        assert_eq!(parsed.limits.unwrap().len(), 2);
        assert_eq!(
            parse_resources("").unwrap(),
            ResourceRequirements::default()
        );
    }

    #[test]
    fn mistakes_are_refused() {
        for bad in [
            "cpu=1",
            "requests.cpu",
            "request.cpu=1",
            "requests.=1",
            "requests.CPU=1",
            "requests.cpu=lots",
            "requests.cpu=1.2.3",
            "requests.cpu=-1",
            "requests.memory=1GB",
            "requests.cpu=1e",
            "requests.cpu=1,requests.cpu=2",
            "requests.memory=2Gi,limits.memory=1Gi",
            "requests.cpu=1.5,limits.cpu=1500m,requests.memory=1025Mi,limits.memory=1Gi",
        ] {
            assert!(parse_resources(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_request_equal_to_its_limit_in_other_units_is_fine() {
        assert!(parse_resources("requests.memory=1024Mi,limits.memory=1Gi").is_ok());
        assert!(parse_resources("requests.cpu=1500m,limits.cpu=1.5").is_ok());
        assert!(parse_resources("requests.cpu=2e3,limits.cpu=2k").is_ok());
    }

    #[test]
    fn quantities_compare_by_value() {
        for (text, value) in [
            ("1Gi", 1073741824.0),
            ("500m", 0.5),
            ("1.5", 1.5),
            ("2k", 2000.0),
            ("3e2", 300.0),
            ("1E-3", 0.001),
            ("128Mi", 134217728.0),
        ] {
            assert_eq!(quantity_value(text), Some(value), "{text}");
        }
        assert_eq!(quantity_value("lots"), None);
        assert_eq!(quantity_value("1GB"), None);
    }

    fn sandbox_default() -> ResourceRequirements {
        parse_resources(DEFAULT_SANDBOX_RESOURCES).unwrap()
    }

    fn own(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> SandboxResources {
        let map = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), q(v)))
                .collect::<BTreeMap<_, _>>()
        };
        SandboxResources {
            requests: map(requests),
            limits: map(limits),
        }
    }

    #[test]
    fn the_sandbox_default_is_100m_and_256mi_with_a_2gi_limit() {
        assert_eq!(
            sandbox_resources(&sandbox_default(), None),
            Some(own(
                &[("cpu", "100m"), ("memory", "256Mi")],
                &[("memory", "2Gi")]
            ))
        );
    }

    #[test]
    fn the_agents_keys_win_and_the_others_keep_the_default() {
        let agent = own(&[("cpu", "2")], &[]);
        assert_eq!(
            sandbox_resources(&sandbox_default(), Some(&agent)),
            Some(own(
                &[("cpu", "2"), ("memory", "256Mi")],
                &[("memory", "2Gi")]
            )),
            "only requests.cpu: the default memory request and limit stay"
        );
        let agent = own(&[], &[("memory", "4Gi"), ("ephemeral-storage", "3Gi")]);
        assert_eq!(
            sandbox_resources(&sandbox_default(), Some(&agent)),
            Some(own(
                &[("cpu", "100m"), ("memory", "256Mi")],
                &[("ephemeral-storage", "3Gi"), ("memory", "4Gi")]
            ))
        );
    }

    #[test]
    fn an_agents_request_above_the_default_limit_raises_the_limit() {
        let agent = own(&[("memory", "3Gi")], &[]);
        assert_eq!(
            sandbox_resources(&sandbox_default(), Some(&agent)),
            Some(own(
                &[("cpu", "100m"), ("memory", "3Gi")],
                &[("memory", "3Gi")]
            ))
        );
    }

    #[test]
    fn an_agents_limit_below_the_default_request_lowers_the_request() {
        let agent = own(&[], &[("memory", "128Mi"), ("cpu", "50m")]);
        assert_eq!(
            sandbox_resources(&sandbox_default(), Some(&agent)),
            Some(own(
                &[("cpu", "50m"), ("memory", "128Mi")],
                &[("cpu", "50m"), ("memory", "128Mi")]
            ))
        );
    }

    #[test]
    fn an_agents_own_request_and_limit_are_left_as_given() {
        let agent = own(&[("memory", "4Gi")], &[("memory", "1Gi")]);
        let merged = sandbox_resources(&sandbox_default(), Some(&agent)).unwrap();
        assert_eq!(merged.requests["memory"], q("4Gi"));
        assert_eq!(merged.limits["memory"], q("1Gi"));
    }

    #[test]
    fn nothing_from_either_is_none_and_no_default_keeps_the_agents() {
        let none = ResourceRequirements::default();
        assert_eq!(sandbox_resources(&none, None), None);
        assert_eq!(
            sandbox_resources(&none, Some(&SandboxResources::default())),
            None
        );
        let agent = own(&[("cpu", "1")], &[]);
        assert_eq!(sandbox_resources(&none, Some(&agent)), Some(agent.clone()));
    }

    proptest! {
        #[test]
        fn merged_requests_never_exceed_limits_the_agent_did_not_set_both(
            request in 1u32..10_000,
            limit in 1u32..10_000,
            agent_sets_request in any::<bool>(),
        ) {
            let agent = if agent_sets_request {
                own(&[("memory", &format!("{request}Mi"))], &[])
            } else {
                own(&[], &[("memory", &format!("{limit}Mi"))])
            };
            let merged = sandbox_resources(&sandbox_default(), Some(&agent)).unwrap();
            prop_assert!(!exceeds(&merged.requests["memory"], &merged.limits["memory"]));
        }

        #[test]
        fn never_panics(text in ".{0,80}") {
            let _ = parse_resources(&text);
        }

        #[test]
        fn generated_pairs_round_trip(
            cpu in 1u32..100_000,
            memory in 1u32..100_000,
            unit in prop::sample::select(vec!["Ki", "Mi", "Gi", "M", "G", ""]),
        ) {
            let text = format!("requests.cpu={cpu}m,limits.memory={memory}{unit}");
            let parsed = parse_resources(&text).unwrap();
            prop_assert_eq!(&parsed.requests.unwrap()["cpu"], &q(&format!("{cpu}m")));
            prop_assert_eq!(&parsed.limits.unwrap()["memory"], &q(&format!("{memory}{unit}")));
        }
    }
}
