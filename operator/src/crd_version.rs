//! At start, the served CRDs are compared with the ones this operator was built with (their
//! `herd.dev/api-version` annotation): a CRD older than the operator gets a log line and an
//! Event naming the command that updates it. The operator keeps running (an older schema only
//! lacks fields), but users learn why a new field is dropped.

use std::cmp::Ordering;

use herd_crds::generate::crds;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{Api, ResourceExt};
use tracing::warn;

use crate::shared::Shared;

/// The annotation `crdgen` writes on each CRD.
pub const ANNOTATION: &str = "herd.dev/api-version";

/// The command that updates the CRDs.
pub const UPGRADE_COMMAND: &str = "kubectl apply --server-side -f charts/herd/crds/";

/// Whether `served` is older than `expected`. Versions compare as dot-separated numbers
/// (`3` < `10`, `1.2` < `1.10`), else as text; a CRD without the annotation predates it and is
/// older than any annotated one.
pub fn is_older(served: Option<&str>, expected: Option<&str>) -> bool {
    match (served, expected) {
        (_, None) => false,
        (None, Some(_)) => true,
        (Some(served), Some(expected)) => compare(served, expected) == Ordering::Less,
    }
}

fn compare(a: &str, b: &str) -> Ordering {
    let numbers = |s: &str| -> Option<Vec<u64>> { s.split('.').map(|p| p.parse().ok()).collect() };
    match (numbers(a), numbers(b)) {
        (Some(a), Some(b)) => a.cmp(&b),
        _ => a.cmp(b),
    }
}

/// Compares every served Herd CRD with the built-in one; never fails the operator.
pub async fn check(shared: &Shared) {
    let Ok(expected) = crds() else {
        return;
    };
    let api: Api<CustomResourceDefinition> = Api::all(shared.client.clone());
    for (_, built) in expected {
        let name = built.name_any();
        let want = built.annotations().get(ANNOTATION).cloned();
        let served = match api.get_opt(&name).await {
            Ok(Some(served)) => served,
            Ok(None) => {
                warn!(crd = %name, command = UPGRADE_COMMAND, "a Herd CRD is not installed");
                continue;
            }
            Err(error) => {
                warn!(crd = %name, %error, "could not read a served CRD to compare versions");
                continue;
            }
        };
        let have = served.annotations().get(ANNOTATION).cloned();
        if is_older(have.as_deref(), want.as_deref()) {
            let note = format!(
                "the served CRD {name} is at API version {} but this operator expects {}; update it with: {UPGRADE_COMMAND}",
                have.as_deref().unwrap_or("(none)"),
                want.as_deref().unwrap_or("(none)"),
            );
            warn!(crd = %name, command = UPGRADE_COMMAND, "{note}");
            shared.event(&served, true, "CRDOutdated", note).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn older_versions_are_found() {
        assert!(is_older(Some("1"), Some("2")));
        assert!(is_older(Some("1.2"), Some("1.10")));
        assert!(is_older(None, Some("1")));
        assert!(!is_older(Some("2"), Some("2")));
        assert!(!is_older(Some("3"), Some("2")), "a newer CRD is fine");
        assert!(!is_older(Some("1"), None));
        assert!(!is_older(None, None));
        assert!(is_older(Some("a"), Some("b")), "text compares as text");
    }
}
