//! The webhook server's TLS: the certificate (self-signed and persisted in a Secret, or read from files), its
//! renewal and hot swap into the running listener, the HTTPS listener itself, and CA bundle injection into the
//! labelled webhook configurations.
//!
//! Owns: generating certificates (rcgen, ECDSA P-256, random serial numbers), reading their validity (x509-parser),
//! the Secret (`ca`, `cert`, `key`, compatible with the reference), the rustls certificate resolver that the
//! renewal task swaps without closing the listener, the accept loop (rustls with the ring provider, HTTP/1.1 with
//! keep-alive, the axum router), and the CA injector's watches and conditional patches with retries.
//!
//! Decisions (reuse or replace a stored certificate, when to renew, which DNS names, which patch) are
//! `rollout_core::certificate`'s. Not built under `--cfg madsim` (no rustls there).

use crate::cluster::{ApiError, CertificateStore, WatchEvent, WebhookConfiguration, WebhookKind};
use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SerialNumber,
};
use rollout_core::certificate::{CertificateFacts, CertificateVerdict, ca_bundle_patch, judge_self_signed, renew_at};
use rollout_core::keys;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use thiserror::Error;
use tokio::net::TcpListener;
use tokio::sync::watch;

#[derive(Debug, Error)]
pub enum TlsError {
    #[error("cannot generate the self-signed certificate: {0}")]
    Generate(String),
    #[error("{what} is not a valid certificate and key: {reason}")]
    Invalid { what: String, reason: String },
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
    let invalid = |reason: String| TlsError::Invalid { what: what.to_string(), reason };
    certified_key(cert_pem, key_pem).map_err(invalid)?;
    let mut facts = Vec::new();
    for der in CertificateDer::pem_slice_iter(cert_pem.as_bytes()) {
        let der = der.map_err(|e| invalid(format!("unreadable PEM: {e}")))?;
        facts.push(certificate_facts(&der).map_err(invalid)?);
    }
    if facts.is_empty() {
        return Err(invalid("no certificates".to_string()));
    }
    for der in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        let der = der.map_err(|e| invalid(format!("unreadable CA PEM: {e}")))?;
        let ca = certificate_facts(&der).map_err(invalid)?;
        if !facts.contains(&ca) {
            facts.push(ca);
        }
    }
    Ok(CertBundle { ca_pem: ca_pem.to_string(), cert_pem: cert_pem.to_string(), key_pem: key_pem.to_string(), facts })
}

fn certificate_facts(der: &CertificateDer<'_>) -> Result<CertificateFacts, String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).map_err(|e| format!("not X.509: {e}"))?;
    let validity = cert.validity();
    let ts = |t: x509_parser::time::ASN1Time| Timestamp::from_second(t.timestamp()).map_err(|e| e.to_string());
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
pub fn certified_key(cert_pem: &str, key_pem: &str) -> Result<CertifiedKey, String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("unreadable certificate PEM: {e}"))?;
    if chain.is_empty() {
        return Err("no certificates".to_string());
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| format!("unreadable key PEM: {e}"))?;
    let provider = rustls::crypto::ring::default_provider();
    CertifiedKey::from_der(chain, key, &provider).map_err(|e| format!("certificate and key do not match: {e}"))
}

/// The certificate the listener serves; swapped in place on renewal, so open listeners and connections stay.
#[derive(Debug)]
pub struct SwappableCert {
    current: RwLock<Arc<CertifiedKey>>,
}

impl SwappableCert {
    pub fn new(bundle: &CertBundle) -> Result<Arc<Self>, TlsError> {
        let key = certified_key(&bundle.cert_pem, &bundle.key_pem)
            .map_err(|reason| TlsError::Invalid { what: "the serving certificate".into(), reason })?;
        Ok(Arc::new(SwappableCert { current: RwLock::new(Arc::new(key)) }))
    }

    pub fn swap(&self, bundle: &CertBundle) -> Result<(), TlsError> {
        let key = certified_key(&bundle.cert_pem, &bundle.key_pem)
            .map_err(|reason| TlsError::Invalid { what: "the renewed certificate".into(), reason })?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(key);
        Ok(())
    }
}

impl ResolvesServerCert for SwappableCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.read().unwrap_or_else(|e| e.into_inner()).clone())
    }
}

/// The rustls server configuration over a swappable certificate (HTTP/1.1, ring provider).
pub fn server_config(cert: Arc<SwappableCert>) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Invalid { what: "TLS settings".into(), reason: e.to_string() })?
        .with_no_client_auth()
        .with_cert_resolver(cert);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Serves `router` over TLS on `listener` until the task is dropped: each connection gets a TLS handshake
/// (bounded by `request_timeout`) and HTTP/1.1 with keep-alive. A failing connection never stops the listener.
pub async fn serve(
    listener: TcpListener,
    config: Arc<rustls::ServerConfig>,
    router: axum::Router,
    request_timeout: Duration,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(err) => {
                tracing::warn!(error = %err, "accepting a TLS connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let acceptor = acceptor.clone();
        let router = router.clone();
        tokio::spawn(async move {
            let tls = match tokio::time::timeout(request_timeout, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(err)) => {
                    tracing::debug!(%peer, error = %err, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            };
            let service = hyper_util::service::TowerToHyperService::new(router);
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder.timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(request_timeout).keep_alive(true);
            if let Err(err) = builder.serve_connection(hyper_util::rt::TokioIo::new(tls), service).await {
                tracing::debug!(%peer, error = %err, "webhook connection ended with an error");
            }
        });
    }
}

// ---- self-signed certificate in a Secret ------------------------------------------------------------------------

fn secret_data(bundle: &CertBundle) -> BTreeMap<String, ByteString> {
    BTreeMap::from([
        ("ca".to_string(), ByteString(bundle.ca_pem.clone().into_bytes())),
        ("cert".to_string(), ByteString(bundle.cert_pem.clone().into_bytes())),
        ("key".to_string(), ByteString(bundle.key_pem.clone().into_bytes())),
    ])
}

fn bundle_from_secret(secret: &Secret, name: &str, namespace: &str) -> Result<Option<CertBundle>, TlsError> {
    let data = secret.data.clone().unwrap_or_default();
    if data.is_empty() {
        return Ok(None);
    }
    let get = |key: &'static str| -> Result<String, TlsError> {
        let value = data.get(key).ok_or(TlsError::MissingKey {
            secret: name.to_string(),
            namespace: namespace.to_string(),
            key,
        })?;
        Ok(String::from_utf8_lossy(&value.0).into_owned())
    };
    let (ca, cert, key) = (get("ca")?, get("cert")?, get("key")?);
    parse_bundle(&format!("secret {name:?} in namespace {namespace:?}"), &ca, &cert, &key).map(Some)
}

/// Returns the self-signed certificate from the Secret `name`, generating (and storing) a new one when there is
/// none, or when the stored one must be replaced (expired, two thirds of its lifetime passed, DNS names changed).
/// Writes are conditional: when another replica wrote first, its certificate is used.
pub async fn ensure_self_signed<C: CertificateStore>(
    api: &C,
    name: &str,
    namespace: &str,
    settings: &SelfSignedSettings,
    now: Timestamp,
) -> Result<CertBundle, TlsError> {
    let existing = api.get_secret(name).await.map_err(TlsError::Api)?;
    match existing {
        None => {
            let bundle = generate(settings, now)?;
            let secret = Secret {
                metadata: ObjectMeta { name: Some(name.to_string()), ..ObjectMeta::default() },
                data: Some(secret_data(&bundle)),
                ..Secret::default()
            };
            match api.create_secret(&secret).await {
                Ok(_) => {
                    tracing::info!(secret = name, "created a self-signed certificate");
                    Ok(bundle)
                }
                Err(ApiError::Conflict(_)) => {
                    // Another replica created it meanwhile: use theirs if it is good.
                    let raced = api.get_secret(name).await.map_err(TlsError::Api)?;
                    match raced.as_ref().map(|s| bundle_from_secret(s, name, namespace)) {
                        Some(Ok(Some(bundle))) => Ok(bundle),
                        Some(Err(err)) => Err(TlsError::RaceLost(err.to_string())),
                        _ => Err(TlsError::RaceLost("it is empty".to_string())),
                    }
                }
                Err(err) => Err(TlsError::Api(err)),
            }
        }
        Some(secret) => {
            let stored = bundle_from_secret(&secret, name, namespace)?;
            if let Some(bundle) = &stored {
                match judge_self_signed(&bundle.facts, &settings.required_dns_names, now) {
                    CertificateVerdict::Reuse { .. } => return Ok(bundle.clone()),
                    CertificateVerdict::Replace(reason) => {
                        tracing::info!(secret = name, %reason, "replacing the self-signed certificate")
                    }
                }
            }
            let bundle = generate(settings, now)?;
            let mut updated = secret.clone();
            updated.data = Some(secret_data(&bundle));
            match api.replace_secret(&updated).await {
                Ok(_) => Ok(bundle),
                Err(ApiError::Conflict(_)) => {
                    // Another replica renewed it first: use theirs.
                    let current = api.get_secret(name).await.map_err(TlsError::Api)?;
                    match current.as_ref().map(|s| bundle_from_secret(s, name, namespace)) {
                        Some(Ok(Some(bundle))) => Ok(bundle),
                        Some(Err(err)) => Err(err),
                        _ => Err(TlsError::RaceLost("it is empty".to_string())),
                    }
                }
                Err(err) => Err(TlsError::Api(err)),
            }
        }
    }
}

/// When the bundle must be renewed (the earliest two-thirds point of its chain).
pub fn bundle_renew_at(bundle: &CertBundle) -> Timestamp {
    bundle.facts.iter().map(|f| renew_at(f.not_before, f.not_after)).min().unwrap_or(Timestamp::MAX)
}

/// Where the self-signed certificate lives and what it must look like.
#[derive(Clone)]
pub struct SelfSignedSecret<C> {
    pub api: C,
    pub secret: String,
    pub namespace: String,
    pub settings: SelfSignedSettings,
}

/// Keeps the self-signed certificate fresh: sleeps until its renewal time, renews it through the Secret, swaps it
/// into the listener and publishes the new CA. Failures are retried every `retry`. Runs until dropped.
pub async fn run_self_signed_renewal<C: CertificateStore>(
    source: SelfSignedSecret<C>,
    mut bundle: CertBundle,
    cert: Arc<SwappableCert>,
    ca_tx: watch::Sender<String>,
    retry: Duration,
) {
    let SelfSignedSecret { api, secret, namespace, settings } = source;
    loop {
        let due = bundle_renew_at(&bundle);
        let wait = Duration::try_from(due.duration_since(Timestamp::now())).unwrap_or(Duration::ZERO);
        // Wake at least hourly: clocks jump, and another replica may have renewed the Secret.
        tokio::time::sleep(wait.min(Duration::from_secs(3600))).await;
        match ensure_self_signed(&api, &secret, &namespace, &settings, Timestamp::now()).await {
            Ok(fresh) if fresh != bundle => match cert.swap(&fresh) {
                Ok(()) => {
                    tracing::info!(renew_at = %bundle_renew_at(&fresh), "serving a renewed certificate");
                    let _ = ca_tx.send(fresh.ca_pem.clone());
                    bundle = fresh;
                }
                Err(err) => {
                    tracing::error!(error = %err, "cannot serve the renewed certificate");
                    tokio::time::sleep(retry).await;
                }
            },
            Ok(_) => {}
            Err(err) => {
                tracing::error!(error = %err, "renewing the self-signed certificate failed; retrying");
                tokio::time::sleep(retry).await;
            }
        }
    }
}

// ---- certificate files --------------------------------------------------------------------------------------------

/// Reads `-server-tls.cert-file` and `-server-tls.key-file`. An expired certificate is refused (reference 6.4).
pub fn read_files(cert_file: &PathBuf, key_file: &PathBuf, now: Timestamp) -> Result<CertBundle, TlsError> {
    let read =
        |path: &PathBuf| std::fs::read_to_string(path).map_err(|source| TlsError::File { path: path.clone(), source });
    let bundle = parse_bundle(&format!("{}", cert_file.display()), "", &read(cert_file)?, &read(key_file)?)?;
    for (index, f) in bundle.facts.iter().enumerate() {
        if now >= f.not_after {
            return Err(TlsError::Expired {
                index,
                subject: f.subject.clone(),
                not_after: rollout_core::downscale::format_timestamp(f.not_after),
            });
        }
    }
    Ok(bundle)
}

/// Reloads the certificate files when they change (checked every `interval`) and swaps them in. A broken
/// intermediate state (e.g. the key written before the certificate) is logged and retried at the next check.
pub async fn run_file_reload(
    cert_file: PathBuf,
    key_file: PathBuf,
    mut bundle: CertBundle,
    cert: Arc<SwappableCert>,
    interval: Duration,
) {
    loop {
        tokio::time::sleep(interval).await;
        match read_files(&cert_file, &key_file, Timestamp::now()) {
            Ok(fresh) if fresh != bundle => match cert.swap(&fresh) {
                Ok(()) => {
                    tracing::info!(file = %cert_file.display(), "reloaded the certificate files");
                    bundle = fresh;
                }
                Err(err) => tracing::warn!(error = %err, "cannot serve the changed certificate files"),
            },
            Ok(_) => {}
            Err(err) => tracing::warn!(error = %err, "cannot reload the certificate files"),
        }
    }
}

// ---- CA bundle injection ------------------------------------------------------------------------------------------

/// The label selector of the configurations to inject the CA into.
pub fn injection_selector(namespace: &str) -> String {
    format!("{}=true,{}={namespace}", keys::INJECT_ROLLOUT_OPERATOR_CA, keys::NAMESPACE_LABEL)
}

fn base64(bytes: &[u8]) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(TABLE[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn configuration_json(config: &WebhookConfiguration) -> serde_json::Value {
    match config {
        WebhookConfiguration::Validating(c) => serde_json::to_value(c),
        WebhookConfiguration::Mutating(c) => serde_json::to_value(c),
    }
    .unwrap_or_default()
}

/// Injects the CA into every labelled Validating- and MutatingWebhookConfiguration: on every add/update seen by the
/// watches (so configurations created later, or whose bundle someone removed, are patched), and again for all of
/// them when the CA changes. Patches are conditional on the resourceVersion seen; a failed patch is retried after
/// `retry` (on the newest version the watch delivered), never forgotten. Runs until dropped.
pub async fn run_ca_injector<C: CertificateStore>(
    api: C,
    namespace: String,
    mut ca_rx: watch::Receiver<String>,
    retry: Duration,
) {
    let selector = injection_selector(&namespace);
    let mut events = futures::stream::select(
        api.watch_webhook_configurations(WebhookKind::Validating, &selector),
        api.watch_webhook_configurations(WebhookKind::Mutating, &selector),
    );
    let mut known: BTreeMap<(WebhookKind, String), WebhookConfiguration> = BTreeMap::new();
    let mut dirty: BTreeSet<(WebhookKind, String)> = BTreeSet::new();
    let mut retry_at: Option<tokio::time::Instant> = None;
    loop {
        let ca = base64(ca_rx.borrow().as_bytes());
        // Patch everything dirty now (or at the retry time).
        if retry_at.is_none_or(|at| tokio::time::Instant::now() >= at) {
            retry_at = None;
            for key in std::mem::take(&mut dirty) {
                let Some(config) = known.get(&key) else { continue };
                let Some(patch) = ca_bundle_patch(&configuration_json(config), &ca) else {
                    tracing::debug!(name = %key.1, kind = key.0.as_str(), "already has same CA bundle set, not patching");
                    continue;
                };
                match api.patch_webhook_configuration(key.0, &key.1, &patch).await {
                    Ok(updated) => {
                        tracing::info!(name = %key.1, kind = key.0.as_str(), "injected the CA bundle");
                        known.insert(key, updated);
                    }
                    Err(err) => {
                        tracing::warn!(name = %key.1, kind = key.0.as_str(), error = %err, "injecting the CA bundle failed; will retry");
                        dirty.insert(key);
                        retry_at = Some(tokio::time::Instant::now() + retry);
                    }
                }
            }
        }
        let sleep_until = retry_at.unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            event = events.next() => match event {
                Some(Ok(WatchEvent::InitApply(config) | WatchEvent::Apply(config))) => {
                    let key = (config.kind(), config.metadata().name.clone().unwrap_or_default());
                    known.insert(key.clone(), config);
                    dirty.insert(key);
                }
                Some(Ok(WatchEvent::Delete(config))) => {
                    let key = (config.kind(), config.metadata().name.clone().unwrap_or_default());
                    known.remove(&key);
                    dirty.remove(&key);
                }
                Some(Ok(WatchEvent::Init | WatchEvent::InitDone)) => {}
                Some(Err(err)) => tracing::warn!(error = %err, "watching webhook configurations"),
                None => return,
            },
            changed = ca_rx.changed() => {
                if changed.is_err() {
                    return;
                }
                dirty.extend(known.keys().cloned());
                retry_at = None;
            }
            _ = tokio::time::sleep_until(sleep_until) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_standard_alphabet_with_padding() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64(b"CA"), "Q0E=");
    }

    #[test]
    fn generated_certificates_have_the_names_validity_and_distinct_random_serials() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let settings = SelfSignedSettings {
            organization: "Grafana Labs".into(),
            dns_names: vec!["rollout-operator".into(), "rollout-operator.ns.svc".into()],
            required_dns_names: vec!["rollout-operator.ns.svc".into()],
            validity: Duration::from_secs(3 * 3600),
        };
        let a = generate(&settings, now).unwrap();
        let b = generate(&settings, now).unwrap();
        assert_eq!(a.facts[0].dns_names, settings.dns_names);
        assert_eq!(a.facts[0].not_before, now);
        assert_eq!(a.facts[0].not_after, "2026-01-01T03:00:00Z".parse().unwrap());
        assert_eq!(bundle_renew_at(&a), "2026-01-01T02:00:00Z".parse().unwrap());
        let serial = |pem: &str| {
            let der = CertificateDer::pem_slice_iter(pem.as_bytes()).next().unwrap().unwrap();
            let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).unwrap();
            cert.raw_serial().to_vec()
        };
        assert_ne!(serial(&a.cert_pem), serial(&b.cert_pem));
        assert_ne!(serial(&a.ca_pem), serial(&b.ca_pem));
        assert_ne!(serial(&a.cert_pem), serial(&a.ca_pem));
        // A key from another certificate is refused.
        let err = parse_bundle("mixed", &a.ca_pem, &a.cert_pem, &b.key_pem).unwrap_err();
        assert!(err.to_string().contains("do not match"), "{err}");
    }
}
