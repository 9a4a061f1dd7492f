//! The certificate in a Secret (`ca`, `cert`, `key`, compatible with the reference): reusing or replacing the
//! stored one (`rollout_core::certificate` judges), renewing it before expiry, and reloading certificate files.

use super::certificate::*;
use super::listener::SwappableCert;
use crate::cluster::{ApiError, CertificateStore};
use jiff::Timestamp;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rollout_core::certificate::{CertificateVerdict, judge_self_signed, renew_at};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

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

/// Waits until the CA injector confirms that every webhook configuration trusts `ca_pem`, at most `within`;
/// whether it did.
pub async fn trusted_within(trusted: &mut watch::Receiver<String>, ca_pem: &str, within: Duration) -> bool {
    let Some(wanted) = super::certificate::bundled_cas(ca_pem).into_iter().next().map(|ca| ca.pem) else {
        return false;
    };
    let confirmed = trusted.wait_for(|confirmed| *confirmed == wanted);
    matches!(tokio::time::timeout(within, confirmed).await, Ok(Ok(_)))
}

/// Keeps the self-signed certificate fresh: sleeps until its renewal time, renews it through the Secret, publishes
/// the new CA and, with the CA injector (`trusted`: its confirmations), waits until every webhook configuration
/// trusts it before swapping it into the listener (at most until the certificate served now expires), so the API
/// server never meets a certificate its bundle does not trust. Failures are retried every `retry`. Runs until
/// dropped.
pub async fn run_self_signed_renewal<C: CertificateStore>(
    source: SelfSignedSecret<C>,
    mut bundle: CertBundle,
    cert: Arc<SwappableCert>,
    ca_tx: watch::Sender<String>,
    mut trusted: Option<watch::Receiver<String>>,
    retry: Duration,
) {
    let SelfSignedSecret { api, secret, namespace, settings } = source;
    loop {
        let due = bundle_renew_at(&bundle);
        let wait = Duration::try_from(due.duration_since(Timestamp::now())).unwrap_or(Duration::ZERO);
        // Wake at least hourly: clocks jump, and another replica may have renewed the Secret.
        tokio::time::sleep(wait.min(Duration::from_secs(3600))).await;
        match ensure_self_signed(&api, &secret, &namespace, &settings, Timestamp::now()).await {
            Ok(fresh) if fresh != bundle => {
                ca_tx.send_replace(fresh.ca_pem.clone());
                if let Some(trusted) = trusted.as_mut() {
                    let expires = bundle.facts.iter().map(|f| f.not_after).min().unwrap_or(Timestamp::MAX);
                    let left = Duration::try_from(expires.duration_since(Timestamp::now())).unwrap_or(Duration::ZERO);
                    if !trusted_within(trusted, &fresh.ca_pem, left).await {
                        tracing::warn!(
                            "serving the renewed certificate before every webhook configuration trusts its CA: the one served until now expires"
                        );
                    }
                }
                match cert.swap(&fresh) {
                    Ok(()) => {
                        tracing::info!(renew_at = %bundle_renew_at(&fresh), "serving a renewed certificate");
                        bundle = fresh;
                    }
                    Err(err) => {
                        tracing::error!(error = %err, "cannot serve the renewed certificate");
                        tokio::time::sleep(retry).await;
                    }
                }
            }
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
