//! At start, the served CRDs are compared with the ones this operator was built with (their
//! `herd.dev/api-version` annotation): a CRD older than the operator gets a log line and an
//! Event naming the command that updates it. The operator keeps running (an older schema only
//! lacks fields), but users learn why a new field is dropped.

use herd_crds::generate::{API_VERSION_ANNOTATION, SCHEMA_REVISION, crds, schema_revision_number};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{Api, ResourceExt};
use tracing::warn;

use crate::controller_state::Shared;

/// The command that updates the CRDs.
pub const UPGRADE_COMMAND: &str = "kubectl apply --server-side -f charts/herd/crds/";

/// Whether a served CRD's `herd.dev/api-version` annotation is older than this operator's
/// [`SCHEMA_REVISION`]. A CRD without the annotation predates it, so it is older; a value of
/// another API version (a newer CRD) is not.
pub fn is_older(served: Option<&str>) -> bool {
    let Some(ours) = schema_revision_number(SCHEMA_REVISION) else {
        return false;
    };
    match served {
        None => true,
        Some(served) => schema_revision_number(served).is_some_and(|n| n < ours),
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
        let have = served.annotations().get(API_VERSION_ANNOTATION).cloned();
        if is_older(have.as_deref()) {
            let note = format!(
                "the served CRD {name} is at API version {} but this operator expects {SCHEMA_REVISION}; update it with: {UPGRADE_COMMAND}",
                have.as_deref().unwrap_or("(none)"),
            );
            warn!(crd = %name, command = UPGRADE_COMMAND, "{note}");
            shared.event(&served, true, "CRDOutdated", note);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn older_revisions_are_found() {
        let ours = schema_revision_number(SCHEMA_REVISION).unwrap();
        assert!(!is_older(Some(SCHEMA_REVISION)));
        assert!(
            !is_older(Some(&format!("v1alpha1.{}", ours + 1))),
            "newer is fine"
        );
        assert!(is_older(None), "no annotation predates it");
        if ours > 0 {
            assert!(is_older(Some(&format!("v1alpha1.{}", ours - 1))));
        }
        assert!(is_older(Some("v1alpha1.0")) == (ours > 0));
        assert!(
            !is_older(Some("v1beta1.0")),
            "another API version is not older"
        );
    }
}
