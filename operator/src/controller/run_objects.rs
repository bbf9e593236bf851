//! Creating a Run's objects: created, never re-applied (an upgrade that changes them must not
//! fight immutable fields); AlreadyExists counts only when the object is the Run's own, so a
//! Run recreated under the same name never adopts leftovers.

use std::collections::HashSet;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::PostParams;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::run_api_tls::ensure_ca_config_map;
use crate::decide::per_namespace::{NamespaceWork, namespace_work};
use crate::decide::run_api_tls::per_namespace_labels;
use crate::decide::run_network_policy::default_deny;
use crate::decide::run_pod::{RUN_API_CA, RUNNER_SERVICE_ACCOUNT};
use crate::error::Error;

/// What creating one of a Run's objects came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Created {
    /// It exists and is the Run's.
    Done,
    /// It exists and belongs to another object (a deleted Run's leftover).
    Foreign(String),
    /// A ResourceQuota refused it: retried with backoff, the Run stays `Queued`.
    Quota(String),
    /// The API server refused it for good (Pod Security, an admission policy): the Run fails
    /// `InvalidSpec`. A namespace being deleted is no refusal of the Run's: it is
    /// [`Error::NamespaceTerminating`], and the Run is left alone.
    Refused(String),
}

/// Whether `object`'s controller owner is `uid`.
pub fn owned_by<K: Resource>(object: &K, uid: &str) -> bool {
    controller_uid(object) == Some(uid)
}

/// The uid of `object`'s controller owner.
pub fn controller_uid<K: Resource>(object: &K) -> Option<&str> {
    object
        .meta()
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.as_str())
}

/// The cause the API server's NamespaceLifecycle admission gives when it refuses to create
/// anything in a namespace being deleted (with a 403 Forbidden).
pub const NAMESPACE_TERMINATING_CAUSE: &str = "NamespaceTerminating";

/// Whether a refusal says the namespace is being deleted: a 403 whose details carry the
/// `NamespaceTerminating` cause (or, from a server that gives no details, its message).
pub fn namespace_terminating(status: &kube::core::Status) -> bool {
    status.code == 403
        && (status
            .details
            .iter()
            .flat_map(|d| d.causes.iter())
            .any(|c| c.reason == NAMESPACE_TERMINATING_CAUSE)
            || status.message.contains("because it is being terminated"))
}

/// Whether `namespace` is being deleted, asked the one way the operator's RBAC allows without
/// reading Namespaces: a dry-run create of a ConfigMap, which the API server refuses in a
/// namespace being deleted and otherwise accepts without storing anything. A refusal for
/// another reason says nothing either way: `false`.
pub async fn probe_namespace_terminating(client: &Client, namespace: &str) -> Result<bool, Error> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let probe = ConfigMap {
        metadata: ObjectMeta {
            generate_name: Some("herd-namespace-probe-".to_owned()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    let params = PostParams {
        dry_run: true,
        field_manager: None,
    };
    match api.create(&params, &probe).await {
        Ok(_) => Ok(false),
        Err(kube::Error::Api(status)) if namespace_terminating(&status) => Ok(true),
        Err(kube::Error::Api(status)) if (400..500).contains(&status.code) => Ok(false),
        Err(error) => Err(error.into()),
    }
}

/// Classifies a refusal of the API server (a 4xx): a quota is retried, the rest is final.
pub fn refusal(status: &kube::core::Status) -> Created {
    let message = status.message.clone();
    if status.code == 403
        && (message.contains("exceeded quota") || message.contains("must specify"))
    {
        Created::Quota(message)
    } else {
        Created::Refused(message)
    }
}

/// Creates `object` owned by the Run `uid` unless it exists.
pub async fn create_owned<K>(api: &Api<K>, object: &K, uid: &str) -> Result<Created, Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    match api.create(&PostParams::default(), object).await {
        Ok(_) => Ok(Created::Done),
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let name = object.name_any();
            match api.get_opt(&name).await? {
                Some(existing) if owned_by(&existing, uid) => Ok(Created::Done),
                Some(_) => Ok(Created::Foreign(format!(
                    "{} {name} exists and belongs to another object",
                    K::kind(&())
                ))),
                // Deleted in between: the next reconcile creates it.
                None => Err(Error::Kube(kube::Error::Api(status))),
            }
        }
        Err(kube::Error::Api(status)) if namespace_terminating(&status) => {
            Err(Error::NamespaceTerminating(api_namespace(object)))
        }
        Err(kube::Error::Api(status)) if (400..500).contains(&status.code) => Ok(refusal(&status)),
        Err(error) => Err(error.into()),
    }
}

fn api_namespace<K: Resource>(object: &K) -> String {
    object.meta().namespace.clone().unwrap_or_default()
}

/// Creates the per-namespace `object` unless an object of its name exists (whoever made it),
/// as [`Created`]: a refusal is the Run's to report.
pub async fn create_shared<K>(api: &Api<K>, object: &K) -> Result<Created, Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    match create_if_absent(api, object).await {
        Ok(()) => Ok(Created::Done),
        Err(Error::Kube(kube::Error::Api(status))) if (400..500).contains(&status.code) => {
            Ok(refusal(&status))
        }
        Err(error) => Err(error),
    }
}

/// Creates `object` unless an object of its name exists (whoever made it).
async fn create_if_absent<K>(api: &Api<K>, object: &K) -> Result<(), Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    match api.create(&PostParams::default(), object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(kube::Error::Api(status)) if namespace_terminating(&status) => {
            Err(Error::NamespaceTerminating(api_namespace(object)))
        }
        Err(error) => Err(error.into()),
    }
}

/// The per-namespace objects this process made sure of, by key: each is created when absent
/// and never updated, so once per process is enough (a namespace's `herd-runner`
/// ServiceAccount and default-deny policy by its name, an egress set's policy by
/// `namespace/name`). Making them is one reconcile at a time: the first Runs of a burst would
/// otherwise all create them (and be refused with a 409 each).
#[derive(Debug, Default)]
pub struct Ensured {
    done: Mutex<HashSet<String>>,
    making: tokio::sync::Mutex<()>,
}

impl Ensured {
    /// Waits until no other reconcile is making per-namespace objects; they may be made until
    /// the guard drops.
    pub async fn making(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.making.lock().await
    }

    /// Whether `key` was made sure of.
    pub fn contains(&self, key: &str) -> bool {
        self.lock().contains(key)
    }

    /// Remembers `key` as made sure of.
    pub fn insert(&self, key: &str) {
        self.lock().insert(key.to_owned());
    }

    /// Forgets `namespace` and every object in it: it is prepared anew (deleted, maybe created
    /// again under the same name, its objects gone with it).
    fn forget_namespace(&self, namespace: &str) {
        let inside = format!("{namespace}/");
        self.lock()
            .retain(|key| key != namespace && !key.starts_with(&inside));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.done
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The per-namespace objects Run pods need, in order: the `herd-runner` ServiceAccount (never
/// updated: admins may add `imagePullSecrets`), the run API's CA `bundle` in `herd-run-api-ca`
/// (a Pod mounting a missing ConfigMap never starts) and the default-deny NetworkPolicy; in a
/// namespace prepared before, only a stale copy of the bundle (as `cached` shows it).
pub async fn ensure_namespace(
    client: &Client,
    prepared: &Ensured,
    cached: &Store<ConfigMap>,
    namespace: &str,
    bundle: &str,
) -> Result<(), Error> {
    let copy = cached.get(&ObjectRef::new(RUN_API_CA).within(namespace));
    match namespace_work(prepared.contains(namespace), copy.as_deref(), bundle) {
        NamespaceWork::Nothing => return Ok(()),
        NamespaceWork::Copy => return ensure_ca_config_map(client, namespace, bundle).await,
        NamespaceWork::All => {}
    }
    let was_prepared = prepared.contains(namespace);
    let _one_at_a_time = prepared.making().await;
    if !was_prepared && prepared.contains(namespace) {
        // Another reconcile prepared it while this one waited.
        return Ok(());
    }
    prepared.forget_namespace(namespace);
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let account = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(RUNNER_SERVICE_ACCOUNT.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some(per_namespace_labels()),
            ..ObjectMeta::default()
        },
        automount_service_account_token: Some(false),
        ..ServiceAccount::default()
    };
    create_if_absent(&accounts, &account).await?;
    ensure_ca_config_map(client, namespace, bundle).await?;
    let policies: Api<NetworkPolicy> = Api::namespaced(client.clone(), namespace);
    create_if_absent(&policies, &default_deny(namespace)).await?;
    prepared.insert(namespace);
    Ok(())
}

/// The first input ConfigMap that does not exist, if any: a kubelet would leave the Pod in
/// `ContainerCreating` forever, so the Run waits `Queued` instead.
pub async fn missing_input(
    client: &Client,
    namespace: &str,
    names: impl Iterator<Item = String>,
) -> Result<Option<String>, Error> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    for name in names {
        if api.get_metadata_opt(&name).await?.is_none() {
            return Ok(Some(format!("input ConfigMap {name} not found")));
        }
    }
    Ok(None)
}

/// Deletes the Pod of a finished Run (cancel, timeout); gone already is fine.
pub async fn delete_pod(client: &Client, namespace: &str, name: &str) -> Result<(), Error> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    match api.delete(name, &Default::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(error) => Err(error.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_prepared_anew_forgets_its_objects_only() {
        let ensured = Ensured::default();
        for key in [
            "ns",
            "ns/herd-egress-1",
            "ns2",
            "ns2/herd-egress-1",
            "ns-b/herd-egress-1",
        ] {
            ensured.insert(key);
        }
        ensured.forget_namespace("ns");
        assert!(!ensured.contains("ns"));
        assert!(!ensured.contains("ns/herd-egress-1"));
        assert!(ensured.contains("ns2"));
        assert!(ensured.contains("ns2/herd-egress-1"));
        assert!(ensured.contains("ns-b/herd-egress-1"));
    }

    fn status(code: u16, message: &str) -> kube::core::Status {
        kube::core::Status::failure(message, "Forbidden").with_code(code)
    }

    #[test]
    fn quota_refusals_are_retried_and_other_refusals_are_final() {
        let quota = "pods \"r-1\" is forbidden: exceeded quota: q, requested: pods=1";
        assert_eq!(
            refusal(&status(403, quota)),
            Created::Quota(quota.to_owned())
        );
        let limits = "pods \"r-1\" is forbidden: failed quota: q: must specify limits.cpu";
        assert_eq!(
            refusal(&status(403, limits)),
            Created::Quota(limits.to_owned())
        );
        let security = "pods \"r-1\" is forbidden: violates PodSecurity \"restricted:latest\"";
        assert_eq!(
            refusal(&status(403, security)),
            Created::Refused(security.to_owned())
        );

        assert_eq!(
            refusal(&status(422, "exceeded quota")),
            Created::Refused("exceeded quota".to_owned()),
            "only a 403 is a quota"
        );
    }

    #[test]
    fn a_namespace_being_deleted_is_told_by_its_cause_or_its_message() {
        let message = "configmaps \"x\" is forbidden: unable to create new content in namespace \
                       ns because it is being terminated";
        assert!(namespace_terminating(&status(403, message)));
        let detailed: kube::core::Status = serde_json::from_value(serde_json::json!({
            "code": 403, "reason": "Forbidden", "message": "forbidden",
            "details": {"causes": [{"reason": "NamespaceTerminating",
                "message": "namespace ns is being terminated", "field": "metadata.namespace"}]}
        }))
        .unwrap();
        assert!(namespace_terminating(&detailed));
        assert!(!namespace_terminating(&status(
            403,
            "pods \"r-1\" is forbidden: violates PodSecurity"
        )));
        assert!(
            !namespace_terminating(&status(409, message)),
            "only a 403 is the namespace's lifecycle"
        );
    }

    #[test]
    fn ownership_is_by_controller_uid() {
        let mut pod = Pod::default();
        assert!(!owned_by(&pod, "u1"));
        pod.metadata.owner_references = Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                uid: "u1".into(),
                controller: Some(false),
                ..Default::default()
            },
        ]);
        assert!(!owned_by(&pod, "u1"), "not as controller");
        if let Some(refs) = pod.metadata.owner_references.as_mut() {
            refs[0].controller = Some(true);
        }
        assert!(owned_by(&pod, "u1"));
        assert!(!owned_by(&pod, "u2"));
    }
}
