//! Issuing the run API's certificates: a self-signed CA and serving certificates it signs.
//! The CA is rebuilt from its key and fixed subject, so a leaf can be renewed without parsing
//! the stored CA certificate.

use jiff::Timestamp;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use crate::decide::run_api_tls::Validity;
use crate::error::Error;

/// The CA's common name.
const CA_NAME: &str = "herd-run-api-ca";

/// A certificate and its private key, both PEM.
#[derive(Clone, Debug)]
pub struct CertificatePem {
    /// The certificate.
    pub cert: String,
    /// Its PKCS#8 private key.
    pub key: String,
}

fn offset(time: Timestamp) -> Result<time::OffsetDateTime, Error> {
    time::OffsetDateTime::from_unix_timestamp(time.as_second())
        .map_err(|e| Error::Config(format!("certificate time {time}: {e}")))
}

fn tls(error: rcgen::Error) -> Error {
    Error::Config(format!("issuing the run API's certificate: {error}"))
}

fn ca_params() -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name.push(DnType::CommonName, CA_NAME);
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params
}

/// A new self-signed CA valid for `validity`.
pub fn new_ca(validity: Validity) -> Result<CertificatePem, Error> {
    let key = KeyPair::generate().map_err(tls)?;
    let mut params = ca_params();
    params.not_before = offset(validity.not_before)?;
    params.not_after = offset(validity.not_after)?;
    let cert = params.self_signed(&key).map_err(tls)?;
    Ok(CertificatePem {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

/// A serving certificate for `names` (IP addresses become IP SANs), valid for `validity`,
/// signed by the CA whose key is `ca_key`.
pub fn new_leaf(
    ca_key: &str,
    names: &[String],
    validity: Validity,
) -> Result<CertificatePem, Error> {
    let issuer = Issuer::new(ca_params(), KeyPair::from_pem(ca_key).map_err(tls)?);
    let key = KeyPair::generate().map_err(tls)?;
    let mut params = CertificateParams::new(names.to_vec()).map_err(tls)?;
    if let Some(first) = names.first() {
        params
            .distinguished_name
            .push(DnType::CommonName, first.as_str());
    }
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.not_before = offset(validity.not_before)?;
    params.not_after = offset(validity.not_after)?;
    let cert = params.signed_by(&key, &issuer).map_err(tls)?;
    Ok(CertificatePem {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}
