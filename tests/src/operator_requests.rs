//! The operator's requests to the API server as its own client counts them
//! (`herd_kube_requests_total{verb,resource,code}` on its `/metrics`): read once before and
//! once after some work, the difference per unit of work is what the work cost.

use std::collections::BTreeMap;

/// Verbs that write.
pub const WRITE_VERBS: [&str; 4] = ["create", "update", "patch", "delete"];

/// A request count by (verb, resource), summed over response codes.
pub type RequestCounts = BTreeMap<(String, String), f64>;

/// `herd_kube_requests_total` by (verb, resource), from the Prometheus text of `/metrics`.
pub fn request_counts(metrics: &str) -> RequestCounts {
    let mut counts = BTreeMap::new();
    for line in metrics.lines() {
        let Some(rest) = line.strip_prefix("herd_kube_requests_total{") else {
            continue;
        };
        let Some((labels, value)) = rest.split_once("} ") else {
            continue;
        };
        let label = |name: &str| {
            labels
                .split(',')
                .find_map(|pair| pair.strip_prefix(&format!("{name}=\"")))
                .map(|v| v.trim_end_matches('"').to_owned())
                .unwrap_or_default()
        };
        let value: f64 = value.trim().parse().unwrap_or(0.0);
        *counts
            .entry((label("verb"), label("resource")))
            .or_insert(0.0) += value;
    }
    counts
}

/// The requests from `before` to `after` per one of `units`, leaving out watches, lists and
/// the leader Lease (they do not grow with the work) and kinds that did not move.
pub fn per_unit(before: &RequestCounts, after: &RequestCounts, units: usize) -> RequestCounts {
    let units = units.max(1) as f64;
    after
        .iter()
        .map(|(key, value)| {
            let grown = value - before.get(key).copied().unwrap_or(0.0);
            (key.clone(), grown / units)
        })
        .filter(|((verb, resource), value)| {
            *value > 0.0 && verb != "watch" && verb != "list" && !resource.starts_with("leases.")
        })
        .collect()
}

/// The sum of `counts` over `verbs` (folded from +0.0: an empty f64 sum is -0.0, which prints
/// as "-0.00").
pub fn total(counts: &RequestCounts, verbs: &[&str]) -> f64 {
    counts
        .iter()
        .filter(|((verb, _), _)| verbs.contains(&verb.as_str()))
        .fold(0.0, |sum, (_, value)| sum + value)
}

/// `counts` as a table, one (verb, resource) a line.
pub fn table(counts: &RequestCounts) -> String {
    let mut table = String::from("verb     resource                          per Run\n");
    for ((verb, resource), value) in counts {
        table.push_str(&format!("{verb:<8} {resource:<33} {value:.2}\n"));
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = r#"# HELP herd_kube_requests_total Requests.
herd_kube_requests_total{verb="create",resource="pods",code="201"} 1
herd_kube_requests_total{verb="watch",resource="pods",code="200"} 2
"#;
    const AFTER: &str = r#"herd_kube_requests_total{verb="create",resource="pods",code="201"} 11
herd_kube_requests_total{verb="create",resource="pods",code="409"} 1
herd_kube_requests_total{verb="get",resource="configmaps",code="404"} 5
herd_kube_requests_total{verb="update",resource="leases.coordination.k8s.io",code="200"} 9
herd_kube_requests_total{verb="watch",resource="pods",code="200"} 7
herd_request_other{verb="create"} 100
"#;

    #[test]
    fn counts_grow_per_unit_without_watches_lists_or_the_lease() {
        let per_run = per_unit(&request_counts(BEFORE), &request_counts(AFTER), 10);
        let key = |verb: &str, resource: &str| (verb.to_owned(), resource.to_owned());
        assert_eq!(
            per_run,
            RequestCounts::from([
                (key("create", "pods"), 1.1),
                (key("get", "configmaps"), 0.5)
            ])
        );
        assert_eq!(total(&per_run, &WRITE_VERBS), 1.1);
        assert_eq!(total(&per_run, &["delete"]).to_string(), "0");
        assert!(table(&per_run).contains("get      configmaps"));
    }
}
