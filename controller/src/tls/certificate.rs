//! Certificates: generating the self-signed CA and serving certificate (rcgen, ECDSA P-256, random serial
//! numbers), parsing a PEM bundle and reading its validity (x509-parser), and the rustls key they make.

use crate::cluster::ApiError;
use jiff::Timestamp;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SerialNumber,
};
use rollout_core::certificate::{BundledCa, CertificateFacts};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use std::path::PathBuf;
use std::time::Duration;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum TlsError {
    #[error("cannot generate the self-signed certificate: {0}")]
    Generate(String),
    #[error("{what} is not a valid certificate and key: {reason}")]
    Invalid {
        what: String,
        #[source]
        reason: CertificateError,
    },
    /// rustls refused the protocol versions it was given.
    #[error("TLS settings is not a valid certificate and key: {0}")]
    Settings(#[source] rustls::Error),
    #[error(
        "secret {secret:?} in namespace {namespace:?} does not contain a {key} key, delete the secret and try again"
    )]
    MissingKey { secret: String, namespace: String, key: &'static str },
    #[error("the certificate secret: {0}")]
    Api(ApiError),
    #[error("cannot read {path}: {source}")]
    File {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the provided certificate {index} for {subject} is expired: notAfter={not_after}")]
    Expired { index: usize, subject: String, not_after: String },
    #[error(
        "tried to create a cert because it didn't exist, but it exists now and it doesn't contain a valid \
         certificate: {0}"
    )]
    RaceLost(String),
}

/// What is wrong with a certificate chain and its key.
#[derive(Debug, Error)]
pub enum CertificateError {
    /// A PEM block of the chain cannot be read.
    #[error("unreadable certificate PEM: {0}")]
    CertificatePem(#[source] rustls::pki_types::pem::Error),
    /// A PEM block of the CA cannot be read.
    #[error("unreadable CA PEM: {0}")]
    CaPem(#[source] rustls::pki_types::pem::Error),
    #[error("unreadable key PEM: {0}")]
    KeyPem(#[source] rustls::pki_types::pem::Error),
    /// The chain holds no certificate.
    #[error("no certificates")]
    NoCertificates,
    /// A certificate is not DER-encoded X.509 (the parser's description).
    #[error("not X.509: {0}")]
    NotX509(String),
    /// A validity bound beyond the times the operator can represent (the reason as the time library gives it).
    #[error("{0}")]
    ValidityOutOfRange(String),
    /// The key is not the leaf certificate's, or is of a kind rustls cannot sign with.
    #[error("certificate and key do not match: {0}")]
    KeyMismatch(#[source] rustls::Error),
}

/// A certificate with its key, as PEM, and what the core needs to judge it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertBundle {
    /// The CA's certificate (what webhook configurations must trust); empty for file certificates without one.
    pub ca_pem: String,
    /// The serving certificate chain (leaf first).
    pub cert_pem: String,
    pub key_pem: String,
    /// Facts of the chain (leaf first), then of the CA when it is not in the chain.
    pub facts: Vec<CertificateFacts>,
}

/// What the self-signed certificate looks like.
#[derive(Debug, Clone)]
pub struct SelfSignedSettings {
    pub organization: String,
    /// The names a certificate we generate carries.
    pub dns_names: Vec<String>,
    /// The names a stored certificate must cover to be kept: the one the API server calls (a certificate the
    /// reference operator stored carries just that one, so it is reused rather than replaced on the first start).
    pub required_dns_names: Vec<String>,
    pub validity: Duration,
}

fn random_serial() -> SerialNumber {
    let mut bytes = [0u8; 16];
    // The installed provider's secure random source; ring's if none is installed yet.
    let filled = match rustls::crypto::CryptoProvider::get_default() {
        Some(provider) => provider.secure_random.fill(&mut bytes),
        None => rustls::crypto::ring::default_provider().secure_random.fill(&mut bytes),
    };
    if filled.is_err() {
        // Without randomness rcgen's default (a hash of the fresh public key) is still unique per key.
        bytes = [0; 16];
    }
    bytes[0] &= 0x7f;
    bytes[0] |= 0x01;
    SerialNumber::from_slice(&bytes)
}

fn offset(t: Timestamp) -> Result<time::OffsetDateTime, TlsError> {
    time::OffsetDateTime::from_unix_timestamp(t.as_second()).map_err(|e| TlsError::Generate(e.to_string()))
}

/// Generates a CA and a leaf certificate for `settings.dns_names`, valid from `now` for `settings.validity`.
pub fn generate(settings: &SelfSignedSettings, now: Timestamp) -> Result<CertBundle, TlsError> {
    let err = |e: rcgen::Error| TlsError::Generate(e.to_string());
    let not_after = now
        .checked_add(jiff::SignedDuration::try_from(settings.validity).map_err(|e| TlsError::Generate(e.to_string()))?)
        .map_err(|e| TlsError::Generate(e.to_string()))?;

    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    ca_params.distinguished_name = DistinguishedName::new();
    ca_params.distinguished_name.push(DnType::OrganizationName, settings.organization.clone());
    ca_params.distinguished_name.push(DnType::CommonName, "rollout-operator CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyCertSign];
    ca_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth, ExtendedKeyUsagePurpose::ServerAuth];
    ca_params.not_before = offset(now)?;
    ca_params.not_after = offset(not_after)?;
    ca_params.serial_number = Some(random_serial());
    let ca_key = KeyPair::generate().map_err(err)?;
    let ca_cert = ca_params.self_signed(&ca_key).map_err(err)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let mut leaf_params = CertificateParams::new(settings.dns_names.clone()).map_err(err)?;
    leaf_params.distinguished_name = DistinguishedName::new();
    leaf_params.distinguished_name.push(DnType::OrganizationName, settings.organization.clone());
    leaf_params.distinguished_name.push(DnType::CommonName, "rollout-operator");
    leaf_params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    leaf_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth, ExtendedKeyUsagePurpose::ServerAuth];
    leaf_params.not_before = offset(now)?;
    leaf_params.not_after = offset(not_after)?;
    leaf_params.serial_number = Some(random_serial());
    let leaf_key = KeyPair::generate().map_err(err)?;
    let leaf = leaf_params.signed_by(&leaf_key, &issuer).map_err(err)?;

    parse_bundle("the generated certificate", &ca_cert.pem(), &leaf.pem(), &leaf_key.serialize_pem())
}

/// Reads a certificate chain and key (PEM) and checks that they belong together.
pub fn parse_bundle(what: &str, ca_pem: &str, cert_pem: &str, key_pem: &str) -> Result<CertBundle, TlsError> {
    let invalid = |reason: CertificateError| TlsError::Invalid { what: what.to_string(), reason };
    certified_key(cert_pem, key_pem).map_err(invalid)?;
    let mut facts = Vec::new();
    for der in CertificateDer::pem_slice_iter(cert_pem.as_bytes()) {
        let der = der.map_err(|e| invalid(CertificateError::CertificatePem(e)))?;
        facts.push(certificate_facts(&der).map_err(invalid)?);
    }
    if facts.is_empty() {
        return Err(invalid(CertificateError::NoCertificates));
    }
    for der in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        let der = der.map_err(|e| invalid(CertificateError::CaPem(e)))?;
        let ca = certificate_facts(&der).map_err(invalid)?;
        if !facts.contains(&ca) {
            facts.push(ca);
        }
    }
    Ok(CertBundle { ca_pem: ca_pem.to_string(), cert_pem: cert_pem.to_string(), key_pem: key_pem.to_string(), facts })
}

/// The CA certificates of a PEM bundle, each as its own PEM block (trimmed, one final newline) with what it says
/// when it reads as X.509; text outside the blocks is dropped.
pub fn bundled_cas(pem: &str) -> Vec<BundledCa> {
    const END: &str = "-----END CERTIFICATE-----";
    let mut out = Vec::new();
    let mut rest = pem;
    while let Some(end) = rest.find(END) {
        let (block, after) = rest.split_at(end + END.len());
        rest = after;
        let Some(begin) = block.find("-----BEGIN CERTIFICATE-----") else { continue };
        let block = format!("{}\n", block[begin..].trim());
        let facts = CertificateDer::pem_slice_iter(block.as_bytes())
            .next()
            .and_then(Result::ok)
            .and_then(|der| certificate_facts(&der).ok());
        out.push(BundledCa { pem: block, facts });
    }
    out
}

fn certificate_facts(der: &CertificateDer<'_>) -> Result<CertificateFacts, CertificateError> {
    let (_, cert) =
        x509_parser::parse_x509_certificate(der.as_ref()).map_err(|e| CertificateError::NotX509(e.to_string()))?;
    let validity = cert.validity();
    let ts = |t: x509_parser::time::ASN1Time| {
        Timestamp::from_second(t.timestamp()).map_err(|e| CertificateError::ValidityOutOfRange(e.to_string()))
    };
    let mut dns_names = Vec::new();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for name in &san.value.general_names {
            if let x509_parser::extensions::GeneralName::DNSName(dns) = name {
                dns_names.push(dns.to_string());
            }
        }
    }
    Ok(CertificateFacts {
        subject: cert.subject().to_string(),
        not_before: ts(validity.not_before)?,
        not_after: ts(validity.not_after)?,
        dns_names,
    })
}

/// The rustls key for serving `cert_pem` with `key_pem`; fails when they do not belong together.
pub fn certified_key(cert_pem: &str, key_pem: &str) -> Result<CertifiedKey, CertificateError> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(CertificateError::CertificatePem)?;
    if chain.is_empty() {
        return Err(CertificateError::NoCertificates);
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(CertificateError::KeyPem)?;
    let provider = rustls::crypto::ring::default_provider();
    CertifiedKey::from_der(chain, key, &provider).map_err(CertificateError::KeyMismatch)
}
