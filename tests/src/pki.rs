//! Throwaway certificates and keys of a test control plane: a cluster CA (serving and client
//! certificates), a front-proxy CA for the aggregation layer, a service-account signing key, and
//! the static bearer tokens of the admin and the controller manager.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use anyhow::Context;
use rand::RngCore;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};

/// Where [`Pki::write`] put each file, and the tokens it made.
#[derive(Debug, Clone)]
pub struct Pki {
    /// The cluster CA's certificate: the API server's serving certificate chains to it, and it
    /// signs client certificates (e.g. those a test issues for an RBAC-limited user).
    pub ca_cert: PathBuf,
    /// The cluster CA's private key (PKCS#8 PEM), for tests that sign client certificates.
    pub ca_key: PathBuf,
    /// The API server's serving certificate (SANs: 127.0.0.1, localhost, kubernetes...).
    pub serving_cert: PathBuf,
    /// The serving certificate's key.
    pub serving_key: PathBuf,
    /// The front-proxy CA that vouches for the proxy client.
    pub front_proxy_ca_cert: PathBuf,
    /// The front-proxy client certificate the API server presents to extension servers.
    pub front_proxy_client_cert: PathBuf,
    /// Its key.
    pub front_proxy_client_key: PathBuf,
    /// The key that signs ServiceAccount tokens (ECDSA P-256, PKCS#8).
    pub service_account_key: PathBuf,
    /// Its public half, which verifies them.
    pub service_account_public_key: PathBuf,
    /// `--token-auth-file`: the admin (group `system:masters`) and the controller manager.
    pub token_file: PathBuf,
    /// Bearer token of the cluster admin.
    pub admin_token: String,
    /// Bearer token of `system:kube-controller-manager`.
    pub controller_manager_token: String,
}

/// Host names the serving certificate is valid for, besides 127.0.0.1.
const SERVING_NAMES: [&str; 4] = [
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
];

impl Pki {
    /// Generates every certificate, key and token into `dir` (which must exist).
    pub fn write(dir: &Path) -> anyhow::Result<Pki> {
        let ca = new_ca("herd-e2e-ca")?;
        let front_proxy_ca = new_ca("herd-e2e-front-proxy-ca")?;

        let serving_key = KeyPair::generate()?;
        let mut serving = CertificateParams::new(
            SERVING_NAMES
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>(),
        )?;
        serving
            .subject_alt_names
            .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        serving
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let serving_cert = serving.signed_by(&serving_key, &ca)?;

        let proxy_key = KeyPair::generate()?;
        let mut proxy = CertificateParams::new(Vec::<String>::new())?;
        proxy
            .distinguished_name
            .push(DnType::CommonName, "front-proxy-client");
        proxy.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let proxy_cert = proxy.signed_by(&proxy_key, &front_proxy_ca)?;

        let service_account_key = KeyPair::generate()?;
        let admin_token = token();
        let controller_manager_token = token();

        let pki = Pki {
            ca_cert: dir.join("ca.crt"),
            ca_key: dir.join("ca.key"),
            serving_cert: dir.join("apiserver.crt"),
            serving_key: dir.join("apiserver.key"),
            front_proxy_ca_cert: dir.join("front-proxy-ca.crt"),
            front_proxy_client_cert: dir.join("front-proxy-client.crt"),
            front_proxy_client_key: dir.join("front-proxy-client.key"),
            service_account_key: dir.join("sa.key"),
            service_account_public_key: dir.join("sa.pub"),
            token_file: dir.join("tokens.csv"),
            admin_token,
            controller_manager_token,
        };
        let files = [
            (&pki.ca_cert, ca.pem()),
            (&pki.ca_key, ca.key().serialize_pem()),
            (&pki.serving_cert, serving_cert.pem()),
            (&pki.serving_key, serving_key.serialize_pem()),
            (&pki.front_proxy_ca_cert, front_proxy_ca.pem()),
            (&pki.front_proxy_client_cert, proxy_cert.pem()),
            (&pki.front_proxy_client_key, proxy_key.serialize_pem()),
            (
                &pki.service_account_key,
                service_account_key.serialize_pem(),
            ),
            (
                &pki.service_account_public_key,
                service_account_key.public_key_pem(),
            ),
            (
                &pki.token_file,
                format!(
                    "{},admin,admin,system:masters\n{},system:kube-controller-manager,kcm\n",
                    pki.admin_token, pki.controller_manager_token
                ),
            ),
        ];
        for (path, text) in files {
            std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(pki)
    }
}

/// A self-signed CA valid for signing certificates.
fn new_ca(name: &str) -> anyhow::Result<CertifiedIssuer<'static, KeyPair>> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(CertifiedIssuer::self_signed(params, KeyPair::generate()?)?)
}

/// 24 random bytes as hex, as `openssl rand -hex 24` would make.
fn token() -> String {
    let mut bytes = [0u8; 24];
    rand::rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_every_file_with_distinct_tokens() {
        let dir = tempfile::tempdir().unwrap();
        let pki = Pki::write(dir.path()).unwrap();
        assert_eq!(pki.admin_token.len(), 48);
        assert_ne!(pki.admin_token, pki.controller_manager_token);
        let ca = std::fs::read_to_string(&pki.ca_cert).unwrap();
        assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"));
        let key = std::fs::read_to_string(&pki.service_account_key).unwrap();
        assert!(key.starts_with("-----BEGIN PRIVATE KEY-----"));
        let tokens = std::fs::read_to_string(&pki.token_file).unwrap();
        assert!(tokens.contains(",admin,admin,system:masters\n"));
    }
}
