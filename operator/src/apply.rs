//! Status writes: server-side apply of the whole part the controller owns, as field manager
//! `herd-controller`; never a merge patch or a replace.

use kube::api::{Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::controller_state::FIELD_MANAGER;

/// Applies `status` to the status subresource of `object`. Every field the controller owns is
/// sent, so fields it no longer sets (a `Stalled` condition that cleared) are removed.
///
/// The write is conditional on `object`'s `resourceVersion`, the version the status was
/// decided from. A reconcile working from a cache that has not yet seen an earlier write gets
/// a 409 Conflict instead of repeating a transition (and its Event and metrics); the watch
/// event of the newer version reconciles again. Returns the object as written, whose version
/// a second write in the same reconcile must use.
pub async fn apply_status<K, S>(api: &Api<K>, object: &K, status: &S) -> Result<K, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
    S: Serialize,
{
    let name = object.name_any();
    let body = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "metadata": {"name": name, "resourceVersion": object.resource_version()},
        "status": status,
    });
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch_status(&name, &params, &Patch::Apply(&body)).await
}
