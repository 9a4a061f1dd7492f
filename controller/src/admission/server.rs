//! Starting the admission webhooks (the eviction webhook with the operator's known budgets): the served certificate
//! (self-signed in a Secret, or files) with its renewal or file reload and CA bundle injection
//! (`-webhooks.update-ca-bundle`), then the HTTPS listener on `-server-tls.port`.
//!
//! Owns only the wiring of its settings ([`WebhookServerConfig`], built from the flags by the command line) to the
//! pieces in `tls` and `admission::router`; it makes no decision of its own. The certificate half
//! ([`start_certificate`]) is built under `--cfg madsim` too, so the simulation runs it on each operator replica;
//! the listener half is not.

use crate::cluster::ClusterApi;
use crate::ops::metrics::Metrics;
use crate::tls::certificate::{SelfSignedSettings, TlsError};
use crate::tls::injector::run_ca_injector;
use crate::tls::listener::SwappableCert;
use crate::tls::secret::{
    SelfSignedSecret, ensure_self_signed, read_files, run_file_reload, run_self_signed_renewal, trusted_within,
};
use jiff::Timestamp;
use rollout_core::certificate::service_dns_names;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;
use tokio::task::JoinHandle;

/// How often certificate files are checked for changes.
const FILE_RELOAD_INTERVAL: Duration = Duration::from_secs(10);
/// Pause before retrying a failed renewal or CA injection.
const RETRY: Duration = Duration::from_secs(10);
/// How long a starting process waits for the webhook configurations to trust its certificate's CA.
const FIRST_INJECTION_WAIT: Duration = Duration::from_secs(30);

#[derive(Debug, Error)]
pub enum StartError {
    #[error("either self-signed certificate should be enabled or path to the certificate and key should be provided")]
    NoCertificate,
    #[error("self-signed certificate should be enabled to update the CA bundle in the webhook configurations")]
    CaBundleNeedsSelfSigned,
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error("cannot listen on the TLS port {port}: {source}")]
    Listen {
        port: u16,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot build the pod HTTP client: {0}")]
    PodClient(String),
}

/// The running webhook tasks; aborted when dropped.
pub struct WebhookTasks(Vec<JoinHandle<()>>);

impl Drop for WebhookTasks {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// What the webhook server is started with, from the controller's flags.
#[derive(Debug, Clone)]
pub struct WebhookServerConfig {
    /// `-kubernetes.namespace`.
    pub namespace: String,
    /// `-kubernetes.cluster-domain`.
    pub cluster_domain: String,
    /// `-server-tls.port`.
    pub port: u16,
    /// `-server-tls.request-timeout`.
    pub request_timeout: Duration,
    /// `-server-tls.cert-file` and `-server-tls.key-file`, used when the certificate is not self-signed.
    pub cert_file: String,
    pub key_file: String,
    /// `-server-tls.self-signed-cert.enabled`.
    pub self_signed: bool,
    /// `-server-tls.self-signed-cert.secret-name`.
    pub self_signed_secret: String,
    /// `-server-tls.self-signed-cert.org`.
    pub self_signed_org: String,
    /// `-server-tls.self-signed-cert.dns-name`.
    pub self_signed_dns_name: String,
    /// `-server-tls.self-signed-cert.expiration`.
    pub self_signed_validity: Duration,
    /// `-server-tls.service-name`.
    pub service_name: String,
    /// `-webhooks.update-ca-bundle`.
    pub update_ca_bundle: bool,
    /// `-pods.client-timeout`.
    pub pods_client_timeout: Duration,
    /// The zone tracker's ConfigMap when `-use-zone-tracker` is true.
    pub zone_tracker_config_map: Option<String>,
}

/// The name the API server calls the webhooks by (a stored certificate covering it is kept):
/// `-server-tls.self-signed-cert.dns-name` when set (the reference's only SAN), else `<service>.<namespace>.svc`.
pub fn required_dns_name(config: &WebhookServerConfig) -> String {
    let given = config.self_signed_dns_name.trim().trim_end_matches('.');
    if given.is_empty() { format!("{}.{}.svc", config.service_name, config.namespace) } else { given.to_string() }
}

/// The DNS names the self-signed certificate must carry.
pub fn dns_names(config: &WebhookServerConfig) -> Vec<String> {
    service_dns_names(&config.service_name, &config.namespace, &config.cluster_domain, &config.self_signed_dns_name)
}

/// Keeps `rollout_operator_tls_certificate_expiry_timestamp_seconds` at the served certificate's expiry, whichever
/// task renewed or reloaded it.
async fn publish_certificate_expiry(cert: Arc<SwappableCert>, metrics: Arc<Metrics>) {
    loop {
        if let Some(at) = cert.not_after() {
            metrics.certificate_expires_at(at.as_second() as f64);
        }
        tokio::time::sleep(Duration::from_secs(60)).await;
    }
}

/// The certificate this process serves and the tasks that keep it fresh (and, with `-webhooks.update-ca-bundle`,
/// its CA in the labelled webhook configurations).
pub struct ServedCertificate {
    pub cert: Arc<SwappableCert>,
    pub tasks: WebhookTasks,
}

/// Reads or creates the certificate to serve and starts its renewal (or file reload), the expiry metric and the CA
/// injector.
pub async fn start_certificate<C: ClusterApi>(
    config: &WebhookServerConfig,
    api: C,
    metrics: &Arc<Metrics>,
) -> Result<ServedCertificate, StartError> {
    let namespace = config.namespace.clone();
    let mut tasks = Vec::new();
    let (bundle, source) = if config.self_signed {
        let source = SelfSignedSecret {
            api: api.clone(),
            secret: config.self_signed_secret.clone(),
            namespace: namespace.clone(),
            settings: SelfSignedSettings {
                organization: config.self_signed_org.clone(),
                dns_names: dns_names(config),
                required_dns_names: vec![required_dns_name(config)],
                validity: config.self_signed_validity,
            },
        };
        let bundle = ensure_self_signed(&api, &source.secret, &namespace, &source.settings, Timestamp::now()).await?;
        (bundle, Some(source))
    } else if !config.cert_file.is_empty() && !config.key_file.is_empty() {
        if config.update_ca_bundle {
            return Err(StartError::CaBundleNeedsSelfSigned);
        }
        let (cert, key) = (PathBuf::from(&config.cert_file), PathBuf::from(&config.key_file));
        (read_files(&cert, &key, Timestamp::now())?, None)
    } else {
        return Err(StartError::NoCertificate);
    };
    let cert = SwappableCert::new(&bundle)?;
    tasks.push(tokio::spawn(publish_certificate_expiry(cert.clone(), metrics.clone())));
    let (ca_tx, ca_rx) = tokio::sync::watch::channel(bundle.ca_pem.clone());
    let injecting = config.self_signed && config.update_ca_bundle;
    let (trusted_tx, trusted_rx) = tokio::sync::watch::channel(String::new());
    if injecting {
        tasks.push(tokio::spawn(run_ca_injector(api, namespace, ca_rx, RETRY, trusted_tx, metrics.gates().clone())));
    }
    let mut trusted = injecting.then_some(trusted_rx);
    // Served only once the webhook configurations trust it (the Secret may hold a certificate another replica has
    // just renewed and not injected yet), or after a while regardless: nothing else could be served.
    if let Some(trusted) = trusted.as_mut()
        && !trusted_within(trusted, &bundle.ca_pem, FIRST_INJECTION_WAIT).await
    {
        tracing::warn!(
            waited = ?FIRST_INJECTION_WAIT,
            "serving a certificate whose CA not every webhook configuration trusts yet"
        );
    }
    match source {
        Some(source) => tasks.push(tokio::spawn(run_self_signed_renewal(
            source,
            bundle.clone(),
            cert.clone(),
            ca_tx,
            trusted,
            RETRY,
        ))),
        None => tasks.push(tokio::spawn(run_file_reload(
            PathBuf::from(&config.cert_file),
            PathBuf::from(&config.key_file),
            bundle.clone(),
            cert.clone(),
            FILE_RELOAD_INTERVAL,
        ))),
    }
    Ok(ServedCertificate { cert, tasks: WebhookTasks(tasks) })
}

/// Starts the certificate ([`start_certificate`]) and serves the webhooks over HTTPS with it.
#[cfg(not(madsim))]
pub async fn start<C: ClusterApi>(
    config: &WebhookServerConfig,
    api: C,
    metrics: &Arc<Metrics>,
    validation: Option<Arc<crate::ops::cluster_validation::ClusterValidation>>,
    zpdb: crate::zpdb::Zpdb,
    events: crate::ops::events::EventRecorder,
) -> Result<WebhookTasks, StartError> {
    use crate::admission::no_downscale::ParentLookups;
    use crate::admission::router::{self, WebhookSettings, Webhooks};
    use crate::pods::hyper_client::HyperPodClient;
    use crate::tls::listener::{serve, server_config};
    use std::net::{Ipv4Addr, Ipv6Addr};
    use tokio::net::TcpListener;

    let namespace = config.namespace.clone();
    let ServedCertificate { cert, mut tasks } = start_certificate(config, api.clone(), metrics).await?;
    tasks.0.push(tokio::spawn(crate::ops::failure_policy::run(api.clone(), namespace.clone(), metrics.clone())));

    let pods = HyperPodClient::new(config.pods_client_timeout, &namespace, metrics.pod_http_client.clone())
        .map_err(|e| StartError::PodClient(e.to_string()))?;
    let router = router::router_with_zpdb(
        Webhooks {
            api,
            pods,
            settings: WebhookSettings::new(
                &namespace,
                &config.cluster_domain,
                config.zone_tracker_config_map.as_deref(),
                config.request_timeout,
            )
            .with_events(events)
            .with_parent_lookups(ParentLookups::reporting_to(metrics.clone())),
            clock: router::system_clock(),
        },
        zpdb,
    );
    let router = match validation {
        Some(validation) => crate::ops::cluster_validation::validate(router, validation),
        None => router,
    };
    let router = crate::ops::http_metrics::instrument(router, metrics.http.clone());
    let port = config.port;
    let listener = match TcpListener::bind((Ipv6Addr::UNSPECIFIED, port)).await {
        Ok(listener) => listener,
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => return Err(StartError::Listen { port, source: e }),
        Err(_) => TcpListener::bind((Ipv4Addr::UNSPECIFIED, port))
            .await
            .map_err(|source| StartError::Listen { port, source })?,
    };
    tracing::info!(port, "serving admission webhooks over HTTPS");
    tasks.0.push(tokio::spawn(serve(listener, server_config(cert)?, router, config.request_timeout)));
    Ok(tasks)
}
