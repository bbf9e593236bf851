//! The run API's serving certificate: the `tls.crt`/`tls.key` of Secret `herd-run-api-tls`
//! (issued and renewed by the leader, or by cert-manager), watched by every replica and swapped
//! into the TLS server as it changes, without a restart or a dropped connection. A Secret that
//! does not hold a usable pair keeps the last good one. The served certificate's expiry is a
//! metric (`herd_run_api_certificate_expiry_timestamp_seconds`), so a renewal that never came
//! alerts before Run pods are refused.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use prometheus_client::metrics::gauge::Gauge;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tracing::{info, warn};

use crate::decide::run_api_tls::TLS_SECRET;
use crate::scope::Synced;

/// The serving certificate's key in a `kubernetes.io/tls` Secret.
pub const TLS_CERT: &str = "tls.crt";
/// The serving key's key in a `kubernetes.io/tls` Secret.
pub const TLS_KEY: &str = "tls.key";

/// The certificate and key of a Secret's `tls.crt` and `tls.key` PEM, checked to match.
pub fn certified_key(
    cert_pem: &[u8],
    key_pem: &[u8],
    provider: &CryptoProvider,
) -> Result<CertifiedKey, String> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{TLS_CERT} is not PEM certificates: {e}"))?;
    if chain.is_empty() {
        return Err(format!("{TLS_CERT} holds no certificate"));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|e| format!("{TLS_KEY} is not a PEM private key: {e}"))?;
    CertifiedKey::from_der(chain, key, provider)
        .map_err(|e| format!("{TLS_CERT} and {TLS_KEY} are not a usable pair: {e}"))
}

/// When the first certificate of a PEM chain expires, in seconds since the Unix epoch.
pub fn not_after(cert: &CertificateDer<'_>) -> Result<i64, String> {
    x509_parser::parse_x509_certificate(cert.as_ref())
        .map(|(_, parsed)| parsed.validity().not_after.timestamp())
        .map_err(|e| format!("{TLS_CERT} does not parse as X.509: {e}"))
}

/// The certificate served now; none until the Secret was first read.
#[derive(Debug)]
pub struct ServingCertificate {
    current: RwLock<Option<Arc<CertifiedKey>>>,
    provider: Arc<CryptoProvider>,
    loaded: Synced,
    expiry: Gauge<f64, AtomicU64>,
}

impl ServingCertificate {
    /// No certificate yet; `loaded` is marked once there is one, and `expiry` set to its
    /// end (Unix seconds) with each.
    pub fn new(
        provider: Arc<CryptoProvider>,
        loaded: Synced,
        expiry: Gauge<f64, AtomicU64>,
    ) -> Self {
        ServingCertificate {
            current: RwLock::new(None),
            provider,
            loaded,
            expiry,
        }
    }

    /// Serves the pair in `secret` from now on, if it is usable.
    pub fn load(&self, secret: &Secret) -> Result<(), String> {
        let data = secret.data.as_ref();
        let field = |key: &str| {
            data.and_then(|d| d.get(key))
                .map(|b| b.0.as_slice())
                .ok_or_else(|| format!("{TLS_SECRET} has no {key}"))
        };
        let key = certified_key(field(TLS_CERT)?, field(TLS_KEY)?, &self.provider)?;
        let leaf = key
            .cert
            .first()
            .ok_or_else(|| format!("{TLS_CERT} holds no certificate"))?;
        let expires = not_after(leaf)?;
        *self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::new(key));
        self.expiry.set(expires as f64);
        self.loaded.set();
        Ok(())
    }
}

impl ResolvesServerCert for ServingCertificate {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// A TLS server serving `certificate` (HTTP/1.1 only): the run API's, and the secure
/// `/metrics` listener's.
pub fn server_config(
    provider: Arc<CryptoProvider>,
    certificate: Arc<ServingCertificate>,
) -> Result<rustls::ServerConfig, rustls::Error> {
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(certificate);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Follows the Secret in `namespace` into `serving` until aborted.
pub async fn follow_secret(client: Client, namespace: String, serving: Arc<ServingCertificate>) {
    let api: Api<Secret> = Api::namespaced(client, &namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={TLS_SECRET}"));
    let mut secrets = watcher(api, config)
        .default_backoff()
        .applied_objects()
        .boxed();
    while let Some(event) = secrets.next().await {
        match event {
            Ok(secret) => match serving.load(&secret) {
                Ok(()) => info!(%namespace, "serving the run API's certificate of {TLS_SECRET}"),
                Err(why) => warn!(%namespace, %why, "keeping the run API's last certificate"),
            },
            Err(error) => warn!(%error, "watching the run API's TLS Secret"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certificates::{new_ca, new_leaf};
    use crate::decide::run_api_tls::Validity;
    use k8s_openapi::ByteString;

    fn provider() -> Arc<CryptoProvider> {
        Arc::new(rustls::crypto::ring::default_provider())
    }

    fn pair(name: &str) -> (String, String) {
        let validity =
            Validity::starting(jiff::Timestamp::now(), std::time::Duration::from_secs(3600))
                .unwrap();
        let ca = new_ca(validity).unwrap();
        let leaf = new_leaf(&ca.key, &[name.to_owned()], validity).unwrap();
        (leaf.cert, leaf.key)
    }

    fn secret(cert: &str, key: &str) -> Secret {
        Secret {
            data: Some(
                [
                    (TLS_CERT.to_owned(), ByteString(cert.as_bytes().to_vec())),
                    (TLS_KEY.to_owned(), ByteString(key.as_bytes().to_vec())),
                ]
                .into(),
            ),
            ..Secret::default()
        }
    }

    #[test]
    fn a_usable_pair_is_served_and_replaced_by_the_next() {
        let loaded = Synced::default();
        let expiry = Gauge::<f64, AtomicU64>::default();
        let serving = ServingCertificate::new(provider(), loaded.clone(), expiry.clone());
        assert!(serving.current.read().unwrap().is_none());
        let (cert, key) = pair("a.svc");
        serving.load(&secret(&cert, &key)).unwrap();
        assert!(loaded.is_synced());
        let in_an_hour = jiff::Timestamp::now().as_second() + 3600;
        assert!(
            (expiry.get() - in_an_hour as f64).abs() < 5.0,
            "the leaf's notAfter, an hour from now: {}",
            expiry.get()
        );
        let first = serving.current.read().unwrap().clone().unwrap();
        let (cert, key) = pair("b.svc");
        serving.load(&secret(&cert, &key)).unwrap();
        let second = serving.current.read().unwrap().clone().unwrap();
        assert_ne!(first.cert, second.cert, "hot-reloaded");
    }

    #[test]
    fn an_unusable_secret_keeps_the_last_good_pair() {
        let serving = ServingCertificate::new(provider(), Synced::default(), Gauge::default());
        let (cert, key) = pair("a.svc");
        serving.load(&secret(&cert, &key)).unwrap();
        let (_, other_key) = pair("b.svc");
        let mismatched = serving.load(&secret(&cert, &other_key)).unwrap_err();
        assert!(mismatched.contains("not a usable pair"), "{mismatched}");
        let garbage = serving.load(&secret("old leaf", "old key")).unwrap_err();
        assert!(garbage.contains("no certificate"), "{garbage}");
        assert!(
            serving
                .load(&Secret::default())
                .unwrap_err()
                .contains("has no tls.crt")
        );
        let kept = serving.current.read().unwrap().clone().unwrap();
        assert_eq!(
            kept.cert[0].as_ref(),
            CertificateDer::from_pem_slice(cert.as_bytes())
                .unwrap()
                .as_ref()
        );
    }
}
