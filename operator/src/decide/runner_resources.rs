//! `--runner-resources`: the `agent` container's requests and limits as
//! `requests.cpu=50m,requests.memory=128Mi,limits.memory=1Gi`, checked at start so a typo
//! fails the operator instead of every Run's Pod.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// The default: requests 50m CPU and 128Mi memory, a 1Gi memory limit.
pub const DEFAULT_RUNNER_RESOURCES: &str =
    "requests.cpu=50m,requests.memory=128Mi,limits.memory=1Gi";

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
    let some = |map: BTreeMap<String, Quantity>| (!map.is_empty()).then_some(map);
    Ok(ResourceRequirements {
        requests: some(requests),
        limits: some(limits),
        ..ResourceRequirements::default()
    })
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
        ] {
            assert!(parse_resources(bad).is_err(), "{bad}");
        }
    }

    proptest! {
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
