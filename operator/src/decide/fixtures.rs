//! Test fixtures shared by the operator's unit tests.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

/// The controller reference of the Run `name` with `uid`, as the Run controller sets it.
pub fn run_owner(name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: "herd.dev/v1alpha1".into(),
        kind: "Run".into(),
        name: name.into(),
        uid: uid.into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}
