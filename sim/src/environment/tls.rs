//! The API server's side of the webhooks' TLS: the webhook configurations a deployment installs (labelled for CA
//! injection, their `caBundle` empty until the operator injects one), and the check a real API server's client
//! makes before it sends a review: the certificate the replica serves verifies against the configuration's CA
//! bundle for the Service's DNS name, at the (simulated) time of the call.

use crate::environment::objects::NAMESPACE;
use jiff::Timestamp;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, ServiceReference, ValidatingWebhook, ValidatingWebhookConfiguration,
    WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rollout_core::keys;
use rollout_operator::cluster::WebhookConfiguration;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use std::sync::Arc;

/// The Service in front of the webhook replicas (`-server-tls.service-name`, the jsonnet's name).
pub const SERVICE: &str = "rollout-operator";

/// The name the API server calls the Service by, which the certificate must cover.
pub fn service_dns_name() -> String {
    format!("{SERVICE}.{NAMESPACE}.svc")
}

/// The mutating configuration of the prepare-downscale webhook, whose CA bundle the API server's calls use.
pub fn prepare_downscale_configuration() -> String {
    format!("prepare-downscale-{NAMESPACE}")
}

/// The validating configuration of the pod-eviction webhook (the drains worlds'), whose CA bundle the API
/// server's eviction admissions use.
pub fn pod_eviction_configuration() -> String {
    format!("pod-eviction-{NAMESPACE}")
}

/// The pod-eviction configuration as the deployments install it, without a CA bundle.
pub fn installed_pod_eviction_configuration() -> WebhookConfiguration {
    let name = pod_eviction_configuration();
    WebhookConfiguration::Validating(ValidatingWebhookConfiguration {
        metadata: metadata(name.clone()),
        webhooks: Some(vec![ValidatingWebhook {
            name: format!("{name}.grafana.com"),
            client_config: client_config(rollout_operator::admission::evictions::POD_EVICTION_PATH),
            failure_policy: Some("Fail".to_string()),
            admission_review_versions: vec!["v1".to_string()],
            side_effects: "NoneOnDryRun".to_string(),
            ..ValidatingWebhook::default()
        }]),
    })
}

fn metadata(name: String) -> ObjectMeta {
    let labels = [(keys::INJECT_ROLLOUT_OPERATOR_CA, "true"), (keys::NAMESPACE_LABEL, NAMESPACE)];
    ObjectMeta {
        name: Some(name),
        labels: Some(labels.into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
        ..ObjectMeta::default()
    }
}

fn client_config(path: &str) -> WebhookClientConfig {
    WebhookClientConfig {
        service: Some(ServiceReference {
            name: SERVICE.to_string(),
            namespace: NAMESPACE.to_string(),
            path: Some(path.to_string()),
            port: Some(443),
        }),
        ..WebhookClientConfig::default()
    }
}

/// The configurations the deployments install (a mutating and a validating one, so both of the injector's watches
/// have work), without a CA bundle.
pub fn installed_configurations() -> Vec<WebhookConfiguration> {
    let prepare = prepare_downscale_configuration();
    let no_downscale = format!("no-downscale-{NAMESPACE}");
    vec![
        WebhookConfiguration::Mutating(MutatingWebhookConfiguration {
            metadata: metadata(prepare.clone()),
            webhooks: Some(vec![MutatingWebhook {
                name: format!("{prepare}.grafana.com"),
                client_config: client_config("/admission/prepare-downscale"),
                failure_policy: Some("Fail".to_string()),
                admission_review_versions: vec!["v1".to_string()],
                side_effects: "NoneOnDryRun".to_string(),
                ..MutatingWebhook::default()
            }]),
        }),
        WebhookConfiguration::Validating(ValidatingWebhookConfiguration {
            metadata: metadata(no_downscale.clone()),
            webhooks: Some(vec![ValidatingWebhook {
                name: format!("{no_downscale}.grafana.com"),
                client_config: client_config("/admission/no-downscale"),
                failure_policy: Some("Fail".to_string()),
                admission_review_versions: vec!["v1".to_string()],
                side_effects: "None".to_string(),
                ..ValidatingWebhook::default()
            }]),
        }),
    ]
}

/// Whether `chain` (leaf first), served by a replica, verifies for `server_name` against the PEM `ca_bundle` at
/// `now`; the reason as a client would report it when it does not.
pub fn verify_served(
    chain: &[CertificateDer<'static>],
    ca_bundle: Option<&[u8]>,
    server_name: &str,
    now: Timestamp,
) -> Result<(), String> {
    let Some(bundle) = ca_bundle.filter(|b| !b.is_empty()) else {
        return Err("x509: certificate signed by unknown authority (no caBundle in the configuration)".to_string());
    };
    let mut roots = rustls::RootCertStore::empty();
    for der in CertificateDer::pem_slice_iter(bundle) {
        let der = der.map_err(|e| format!("the caBundle is not PEM: {e}"))?;
        roots.add(der).map_err(|e| format!("the caBundle holds an unusable certificate: {e}"))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| format!("the caBundle trusts nothing: {e}"))?;
    let (leaf, intermediates) = chain.split_first().ok_or("the replica serves no certificate")?;
    let name = ServerName::try_from(server_name.to_string()).map_err(|e| e.to_string())?;
    let now = UnixTime::since_unix_epoch(std::time::Duration::from_secs(now.as_second().max(0) as u64));
    verifier.verify_server_cert(leaf, intermediates, &name, &[], now).map(|_| ()).map_err(|e| e.to_string())
}
