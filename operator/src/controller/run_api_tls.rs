//! The run API's TLS Secret in the operator's namespace and its CA bundle in every namespace
//! with Run pods: issued when absent (replicas racing at first start read the winner's),
//! renewed at two thirds of a certificate's life by a timer, copied before any Pod mounts it and
//! whenever it changes. With `--run-api-tls=external` someone else (cert-manager) writes the
//! Secret: the operator only reads its `ca.crt` and copies it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, PostParams};
use kube::runtime::reflector::Store;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::certificates::{new_ca, new_leaf};
use crate::config::RunApiTlsMode;
use crate::decide::backoff;
use crate::decide::run_api_tls::{
    CA_VALIDITY, Issued, LEAF_VALIDITY, Renewal, TLS_SECRET, Validity, ca_config_map,
    ca_config_map_stale, current_ca, next_check, per_namespace_labels, renewal, rotated_bundle,
    stale_copies,
};
use crate::decide::run_pod::{CA_KEY, RUN_API_CA};
use crate::error::Error;

/// The key of the CA's private key in the Secret.
const CA_PRIVATE_KEY: &str = "ca.key";
/// The serving certificate's key in a `kubernetes.io/tls` Secret.
const TLS_CERT: &str = "tls.crt";
/// The serving key's key in a `kubernetes.io/tls` Secret.
const TLS_KEY: &str = "tls.key";

fn text(secret: &Secret, key: &str) -> Option<String> {
    let bytes = secret.data.as_ref()?.get(key)?;
    String::from_utf8(bytes.0.clone()).ok()
}

/// The Secret's contents after `what`, from `previous` (absent at first start).
fn renewed(
    previous: Option<&Secret>,
    what: Renewal,
    names: &[String],
    now: jiff::Timestamp,
) -> Result<(BTreeMap<String, String>, Issued), Error> {
    let validity = |length| {
        Validity::starting(now, length)
            .ok_or_else(|| Error::Config("certificate validity overflows".into()))
    };
    let old_bundle = previous.and_then(|s| text(s, CA_KEY)).unwrap_or_default();
    let old_issued = previous.map(issued_by).unwrap_or_default();
    let old_ca_key = previous.and_then(|s| text(s, CA_PRIVATE_KEY));
    let (ca_key, bundle, ca_validity) = match (what, old_ca_key, old_issued.ca) {
        (Renewal::Leaf | Renewal::Keep, Some(key), Some(ca))
            if current_ca(&old_bundle).is_some() =>
        {
            (key, old_bundle, ca)
        }
        _ => {
            let ca_validity = validity(CA_VALIDITY)?;
            let ca = new_ca(ca_validity)?;
            (ca.key, rotated_bundle(&ca.cert, &old_bundle), ca_validity)
        }
    };
    let leaf_validity = validity(LEAF_VALIDITY)?;
    let leaf = new_leaf(&ca_key, names, leaf_validity)?;
    let data = [
        (CA_KEY.to_owned(), bundle),
        (CA_PRIVATE_KEY.to_owned(), ca_key),
        (TLS_CERT.to_owned(), leaf.cert),
        (TLS_KEY.to_owned(), leaf.key),
    ]
    .into();
    let issued = Issued {
        ca: Some(ca_validity),
        leaf: Some(leaf_validity),
        names: names.to_vec(),
    };
    Ok((data, issued))
}

fn secret(namespace: &str, data: BTreeMap<String, String>, issued: &Issued) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(TLS_SECRET.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some(per_namespace_labels()),
            annotations: Some(issued.annotations()),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/tls".to_owned()),
        data: Some(
            data.into_iter()
                .map(|(k, v)| (k, ByteString(v.into_bytes())))
                .collect(),
        ),
        ..Secret::default()
    }
}

/// The TLS Secret as it stands after [`ensure_tls_secret`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Served {
    /// The CA bundle clients must trust.
    pub bundle: String,
    /// What its annotations say was issued (when the next renewal is due).
    pub issued: Issued,
}

/// Makes sure the TLS Secret in `namespace` holds a leaf for `names` that is not due for
/// renewal; returns the CA bundle clients must trust and what was issued.
pub async fn ensure_tls_secret(
    client: &Client,
    namespace: &str,
    names: &[String],
) -> Result<Served, Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let now = jiff::Timestamp::now();
    let existing = match api.get_opt(TLS_SECRET).await? {
        Some(existing) => existing,
        None => {
            let (data, issued) = renewed(None, Renewal::All, names, now)?;
            match api
                .create(&PostParams::default(), &secret(namespace, data, &issued))
                .await
            {
                Ok(created) => created,
                // Another replica won the race: use its certificates.
                Err(kube::Error::Api(status)) if status.code == 409 => api.get(TLS_SECRET).await?,
                Err(error) => return Err(error.into()),
            }
        }
    };
    let issued = issued_by(&existing);
    let what = renewal(&issued, names, now);
    if what == Renewal::Keep
        && let Some(bundle) = text(&existing, CA_KEY)
    {
        return Ok(Served { bundle, issued });
    }
    let (data, issued) = renewed(Some(&existing), what, names, now)?;
    let mut next = secret(namespace, data, &issued);
    // The resourceVersion makes a concurrent renewal fail with a conflict and retry.
    next.metadata.resource_version = existing.metadata.resource_version.clone();
    let stored = api
        .replace(TLS_SECRET, &PostParams::default(), &next)
        .await?;
    let bundle = text(&stored, CA_KEY)
        .ok_or_else(|| Error::Config(format!("{TLS_SECRET} has no {CA_KEY}")))?;
    Ok(Served { bundle, issued })
}

/// The CA bundle of a Secret someone else writes (`--run-api-tls=external`), never changing it.
pub async fn read_external_secret(client: &Client, namespace: &str) -> Result<Served, Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = api.get_opt(TLS_SECRET).await?.ok_or_else(|| {
        Error::Config(format!(
            "Secret {namespace}/{TLS_SECRET} does not exist: with --run-api-tls=external, \
             cert-manager (the chart's Certificate) or an admin writes it"
        ))
    })?;
    let bundle = text(&secret, CA_KEY)
        .filter(|b| !b.trim().is_empty())
        .ok_or_else(|| {
            Error::Config(format!(
                "Secret {namespace}/{TLS_SECRET} has no {CA_KEY}: Run pods need the CA that signed \
             its tls.crt (cert-manager writes it for CA and self-signed issuers)"
            ))
        })?;
    Ok(Served {
        bundle,
        issued: Issued::default(),
    })
}

fn issued_by(secret: &Secret) -> Issued {
    secret
        .metadata
        .annotations
        .as_ref()
        .map(Issued::from_annotations)
        .unwrap_or_default()
}

/// Creates or updates `herd-run-api-ca` in `namespace` so it holds `bundle`.
pub async fn ensure_ca_config_map(
    client: &Client,
    namespace: &str,
    bundle: &str,
) -> Result<(), Error> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let desired = ca_config_map(namespace, bundle);
    let existing = match api.get_opt(RUN_API_CA).await? {
        Some(existing) => existing,
        None => match api.create(&PostParams::default(), &desired).await {
            Ok(_) => return Ok(()),
            // Another Run of the namespace created it a moment ago: compare with its copy.
            Err(kube::Error::Api(status)) if status.code == 409 => api.get(RUN_API_CA).await?,
            Err(error) => return Err(error.into()),
        },
    };
    if ca_config_map_stale(&existing, bundle) {
        let mut next = desired;
        next.metadata.resource_version = existing.metadata.resource_version.clone();
        api.replace(RUN_API_CA, &PostParams::default(), &next)
            .await?;
    }
    Ok(())
}

/// The run API's TLS as this operator last made sure of it: the Secret's place, names and
/// writer, and the CA bundle new namespaces get.
pub struct RunApiTls {
    client: Client,
    namespace: String,
    names: Vec<String>,
    mode: RunApiTlsMode,
    bundle: Mutex<Option<String>>,
}

impl RunApiTls {
    /// The TLS of the Secret in `namespace`, for a leaf carrying `names`, written by `mode`.
    pub fn new(client: Client, namespace: String, names: Vec<String>, mode: RunApiTlsMode) -> Self {
        RunApiTls {
            client,
            namespace,
            names,
            mode,
            bundle: Mutex::new(None),
        }
    }

    /// The CA bundle: the one last made sure of, else the Secret's now.
    pub async fn bundle(&self) -> Result<String, Error> {
        if let Some(bundle) = self.known() {
            return Ok(bundle);
        }
        Ok(self.ensure().await?.bundle)
    }

    /// Makes sure of the Secret (issuing or renewing what is due, when the operator writes it)
    /// and remembers its bundle.
    pub async fn ensure(&self) -> Result<Served, Error> {
        let served = match self.mode {
            RunApiTlsMode::Operator => {
                ensure_tls_secret(&self.client, &self.namespace, &self.names).await?
            }
            RunApiTlsMode::External => read_external_secret(&self.client, &self.namespace).await?,
        };
        *self
            .bundle
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(served.bundle.clone());
        Ok(served)
    }

    fn known(&self) -> Option<String> {
        self.bundle
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// While this replica leads: renews the Secret when two thirds of its leaf's (or CA's) life have
/// passed, and copies a changed bundle into every namespace's `herd-run-api-ca` (the cached
/// copies of `config_maps`), without waiting for a new Pod. A change to the Secret (cert-manager
/// renewing it, an admin editing it) is looked at at once. Runs until aborted.
pub async fn keep_renewed(
    tls: Arc<RunApiTls>,
    config_maps: Vec<Store<ConfigMap>>,
    mut leader: watch::Receiver<bool>,
) {
    if leader.wait_for(|leading| *leading).await.is_err() {
        return;
    }
    let secrets: Api<Secret> = Api::namespaced(tls.client.clone(), &tls.namespace);
    let one_secret = watcher::Config::default().fields(&format!("metadata.name={TLS_SECRET}"));
    // Its own writes come back too: a second look then finds nothing due and writes nothing.
    let mut changes = watcher(secrets, one_secret)
        .default_backoff()
        .applied_objects()
        .boxed();
    let mut failures = 0;
    loop {
        let wait = match renew_and_copy(&tls, &config_maps).await {
            Ok(issued) => {
                failures = 0;
                next_check(&issued, jiff::Timestamp::now())
            }
            Err(error) => {
                failures += 1;
                warn!(%error, "could not renew the run API's TLS or copy its CA bundle");
                backoff::after(failures)
            }
        };
        debug!(?wait, "next look at the run API's TLS");
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            Some(change) = changes.next() => {
                if let Err(error) = change {
                    debug!(%error, "watching the run API's TLS Secret");
                }
            }
        }
    }
}

async fn renew_and_copy(
    tls: &RunApiTls,
    config_maps: &[Store<ConfigMap>],
) -> Result<Issued, Error> {
    let served = tls.ensure().await?;
    let cached: Vec<Arc<ConfigMap>> = config_maps.iter().flat_map(Store::state).collect();
    for namespace in stale_copies(cached.iter().map(AsRef::as_ref), &served.bundle) {
        match ensure_ca_config_map(&tls.client, &namespace, &served.bundle).await {
            Ok(()) => info!(%namespace, "copied the run API's CA bundle"),
            // A namespace being deleted takes its copy along.
            Err(Error::Kube(kube::Error::Api(status)))
                if status.code == 404
                    || (status.code == 403 && status.message.contains("being terminated")) =>
            {
                debug!(%namespace, message = %status.message, "no copy of the CA bundle");
            }
            Err(error) => return Err(error),
        }
    }
    Ok(served.issued)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::client::WebPkiServerVerifier;
    use rustls::client::danger::ServerCertVerifier;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
    use std::sync::Arc;

    fn verify(bundle: &str, leaf: &str, name: &str, at: jiff::Timestamp) -> Result<(), String> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(bundle.as_bytes()) {
            roots
                .add(cert.map_err(|e| e.to_string())?)
                .map_err(|e| e.to_string())?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| e.to_string())?;
        let leaf = CertificateDer::from_pem_slice(leaf.as_bytes()).map_err(|e| e.to_string())?;
        let server = ServerName::try_from(name.to_owned()).map_err(|e| e.to_string())?;
        let time = UnixTime::since_unix_epoch(std::time::Duration::from_secs(
            u64::try_from(at.as_second()).map_err(|e| e.to_string())?,
        ));
        verifier
            .verify_server_cert(&leaf, &[], &server, &[], time)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    fn names() -> Vec<String> {
        vec!["herd-operator.herd-system.svc".into(), "10.1.2.3".into()]
    }

    fn secret_of(data: BTreeMap<String, String>, issued: &Issued) -> Secret {
        secret("herd-system", data, issued)
    }

    #[test]
    fn a_new_secret_verifies_for_every_name_and_is_labelled() {
        let now = jiff::Timestamp::now();
        let (data, issued) = renewed(None, Renewal::All, &names(), now).unwrap();
        for name in names() {
            verify(&data[CA_KEY], &data[TLS_CERT], &name, now).unwrap();
        }
        assert!(verify(&data[CA_KEY], &data[TLS_CERT], "other.svc", now).is_err());
        let in_13_months = now
            .checked_add(jiff::SignedDuration::from_hours(24 * 400))
            .unwrap();
        assert!(
            verify(&data[CA_KEY], &data[TLS_CERT], "10.1.2.3", in_13_months).is_err(),
            "the leaf lives a year"
        );
        let stored = secret_of(data, &issued);
        assert_eq!(stored.type_.as_deref(), Some("kubernetes.io/tls"));
        assert_eq!(stored.metadata.labels, Some(per_namespace_labels()));
        assert_eq!(
            renewal(
                &Issued::from_annotations(&issued.annotations()),
                &names(),
                now
            ),
            Renewal::Keep
        );
    }

    #[test]
    fn a_leaf_renewal_keeps_the_ca_and_a_ca_renewal_keeps_the_old_one_trusted() {
        let now = jiff::Timestamp::now();
        let (data, issued) = renewed(None, Renewal::All, &names(), now).unwrap();
        let first = secret_of(data.clone(), &issued);
        let (leaf_only, _) = renewed(Some(&first), Renewal::Leaf, &names(), now).unwrap();
        assert_eq!(leaf_only[CA_KEY], data[CA_KEY], "same bundle");
        assert_eq!(leaf_only[CA_PRIVATE_KEY], data[CA_PRIVATE_KEY]);
        assert_ne!(leaf_only[TLS_CERT], data[TLS_CERT]);
        verify(&data[CA_KEY], &leaf_only[TLS_CERT], "10.1.2.3", now).unwrap();

        let (rotated, _) = renewed(Some(&first), Renewal::All, &names(), now).unwrap();
        assert_ne!(rotated[CA_PRIVATE_KEY], data[CA_PRIVATE_KEY]);
        assert!(rotated[CA_KEY].ends_with(&data[CA_KEY]), "old CA kept");
        assert!(
            verify(&data[CA_KEY], &rotated[TLS_CERT], "10.1.2.3", now).is_err(),
            "the new leaf is the new CA's"
        );
        verify(&rotated[CA_KEY], &rotated[TLS_CERT], "10.1.2.3", now).unwrap();
        verify(&rotated[CA_KEY], &data[TLS_CERT], "10.1.2.3", now).unwrap();
    }
}
