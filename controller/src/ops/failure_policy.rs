//! `kube_validating_webhook_failure_policy`: the failure policy of every webhook of the webhook configurations
//! labelled `grafana.com/namespace=<namespace>`, kept up to date from a watch (the reference's collector, which its
//! "incorrect webhook failure policy" alert queries). Runs with the TLS server, whether or not CA bundles are
//! injected.
//!
//! Owns only that gauge; it never writes to the cluster.

use crate::cluster::{CertificateStore, WatchEvent, WebhookConfiguration, WebhookKind};
use crate::ops::metrics::Metrics;
use futures::StreamExt;
use std::sync::Arc;

/// `(type label, webhook entry name, policy)` of every webhook of `config`; a missing policy is `Fail`, the API
/// server's default.
pub fn failure_policies(config: &WebhookConfiguration) -> Vec<(&'static str, String, String)> {
    let policy = |p: &Option<String>| p.clone().unwrap_or_else(|| "Fail".to_string());
    match config {
        WebhookConfiguration::Validating(c) => c
            .webhooks
            .iter()
            .flatten()
            .map(|w| ("ValidatingWebhook", w.name.clone(), policy(&w.failure_policy)))
            .collect(),
        WebhookConfiguration::Mutating(c) => c
            .webhooks
            .iter()
            .flatten()
            .map(|w| ("MutatingWebhook", w.name.clone(), policy(&w.failure_policy)))
            .collect(),
    }
}

/// Watches the configurations of `namespace` until the watches end, recording each webhook's policy.
pub async fn run<C: CertificateStore>(api: C, namespace: String, metrics: Arc<Metrics>) {
    let selector = format!("{}={namespace}", rollout_core::keys::NAMESPACE_LABEL);
    let mut events = futures::stream::select(
        api.watch_webhook_configurations(WebhookKind::Validating, &selector),
        api.watch_webhook_configurations(WebhookKind::Mutating, &selector),
    );
    while let Some(event) = events.next().await {
        match event {
            Ok(WatchEvent::InitApply(config) | WatchEvent::Apply(config)) => {
                for (kind, webhook, policy) in failure_policies(&config) {
                    metrics.webhook_failure_policy(kind, &webhook, &policy);
                }
            }
            // As in the reference, series are not removed when a configuration goes.
            Ok(_) => {}
            Err(err) => tracing::warn!(error = %err, "watching webhook configurations for their failure policies"),
        }
    }
}
