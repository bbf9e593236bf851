//! Status writes: server-side apply of the whole part the controller owns, as field manager
//! `herd-controller`; never a merge patch or a replace.

use kube::api::{Patch, PatchParams};
use kube::{Api, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::shared::FIELD_MANAGER;

/// Applies `status` to the status subresource of `name`. Every field the controller owns is
/// sent, so fields it no longer sets (a `Stalled` condition that cleared) are removed.
pub async fn apply_status<K, S>(api: &Api<K>, name: &str, status: &S) -> Result<K, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
    S: Serialize,
{
    let body = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch_status(name, &params, &Patch::Apply(&body)).await
}
