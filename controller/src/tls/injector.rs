//! CA bundle injection into the labelled webhook configurations: watches, conditional patches, retries, and the
//! confirmation that every configuration trusts the current CA (which renewal waits for before serving a renewed
//! certificate).

use super::certificate::bundled_cas;
use crate::cluster::{ApiError, CertificateStore, WatchEvent, WebhookConfiguration, WebhookKind};
use crate::ops::feature_gate::{FeatureGates, Gate};
use futures::StreamExt;
use rollout_core::certificate::{BundledCa, ca_bundle_patch, trusted_cas};
use rollout_core::keys;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tokio::sync::watch;

/// The label selector of the configurations to inject the CA into.
pub fn injection_selector(namespace: &str) -> String {
    format!("{}=true,{}={namespace}", keys::INJECT_ROLLOUT_OPERATOR_CA, keys::NAMESPACE_LABEL)
}

/// Standard base64 with padding, as the API serialises bytes (k8s-openapi's `ByteString` does the encoding).
pub(super) fn base64(bytes: &[u8]) -> String {
    match serde_json::to_value(k8s_openapi::ByteString(bytes.to_vec())) {
        Ok(serde_json::Value::String(encoded)) => encoded,
        _ => String::new(),
    }
}

/// The PEM text of a base64 `caBundle` (empty when it does not decode).
fn decode(bundle: &str) -> String {
    serde_json::from_value::<k8s_openapi::ByteString>(serde_json::Value::String(bundle.to_string()))
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        .unwrap_or_default()
}

/// The `caBundle` (base64) an entry holding `current` should hold with `ours` injected ([`trusted_cas`]).
fn wanted_bundle(ours: &BundledCa, current: Option<&str>) -> String {
    let current = bundled_cas(&decode(current.unwrap_or_default()));
    base64(trusted_cas(ours, &current, jiff::Timestamp::now()).concat().as_bytes())
}

/// Whether every entry of `config` trusts `ours`.
fn trusts(config: &WebhookConfiguration, ours: &BundledCa) -> bool {
    config.ca_bundles().iter().all(|(_, bundle)| {
        let pem = bundle.as_deref().map(String::from_utf8_lossy).unwrap_or_default();
        bundled_cas(&pem).iter().any(|ca| ca.pem == ours.pem)
    })
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
/// them when the CA changes. The bundle keeps this operator's earlier CAs until they expire ([`trusted_cas`]), so
/// a replica still serving the certificate of an earlier CA keeps being trusted. Patches are conditional on the
/// resourceVersion seen; a failed patch is retried after `retry` (on the newest version the watch delivered), never
/// forgotten. Once both watches have listed and every configuration trusts the current CA, sends that CA on
/// `trusted`; also while RBAC refuses a watch or a patch (`Gate::CaInjection`, said once through `gates`), where
/// nothing can be injected and nothing should wait for it. Runs until dropped.
pub async fn run_ca_injector<C: CertificateStore>(
    api: C,
    namespace: String,
    mut ca_rx: watch::Receiver<String>,
    retry: Duration,
    trusted: watch::Sender<String>,
    gates: FeatureGates,
) {
    let selector = injection_selector(&namespace);
    let watch = |kind| api.watch_webhook_configurations(kind, &selector).map(move |event| (kind, event));
    let mut events = futures::stream::select(watch(WebhookKind::Validating), watch(WebhookKind::Mutating));
    let mut known: BTreeMap<(WebhookKind, String), WebhookConfiguration> = BTreeMap::new();
    let mut dirty: BTreeSet<(WebhookKind, String)> = BTreeSet::new();
    let mut retry_at: Option<tokio::time::Instant> = None;
    // The kinds whose watch has listed, and the refusals in force: a kind's watch refused since its last list, the
    // last patch refused.
    let mut listed: BTreeSet<WebhookKind> = BTreeSet::new();
    let mut watch_refused: BTreeSet<WebhookKind> = BTreeSet::new();
    let mut patch_refused = false;
    loop {
        let ours = bundled_cas(&ca_rx.borrow()).into_iter().next();
        let Some(ours) = ours else {
            tracing::error!("the CA to inject is not a PEM certificate; not injecting");
            if ca_rx.changed().await.is_err() {
                return;
            }
            continue;
        };
        // Patch everything dirty now (or at the retry time).
        if retry_at.is_none_or(|at| tokio::time::Instant::now() >= at) {
            retry_at = None;
            for key in std::mem::take(&mut dirty) {
                let Some(config) = known.get(&key) else { continue };
                let Some(patch) = ca_bundle_patch(&configuration_json(config), |current| wanted_bundle(&ours, current))
                else {
                    tracing::debug!(name = %key.1, kind = key.0.as_str(), "already has same CA bundle set, not patching");
                    continue;
                };
                match api.patch_webhook_configuration(key.0, &key.1, &patch).await {
                    Ok(updated) => {
                        tracing::info!(name = %key.1, kind = key.0.as_str(), "injected the CA bundle");
                        known.insert(key, updated);
                        patch_refused = false;
                    }
                    Err(err @ ApiError::Forbidden(_)) => {
                        gates.refused(Gate::CaInjection, &err);
                        patch_refused = true;
                        dirty.insert(key);
                        retry_at = Some(tokio::time::Instant::now() + retry);
                    }
                    Err(err) => {
                        tracing::warn!(name = %key.1, kind = key.0.as_str(), error = %err, "injecting the CA bundle failed; will retry");
                        dirty.insert(key);
                        retry_at = Some(tokio::time::Instant::now() + retry);
                    }
                }
            }
        }
        let cannot_inject = patch_refused || !watch_refused.is_empty();
        if !cannot_inject {
            gates.granted(Gate::CaInjection);
        }
        let injected = listed.len() == 2 && dirty.is_empty() && known.values().all(|c| trusts(c, &ours));
        if cannot_inject || injected {
            trusted.send_if_modified(|confirmed| {
                let new = *confirmed != ours.pem;
                confirmed.clone_from(&ours.pem);
                new
            });
        }
        let sleep_until = retry_at.unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(3600));
        // In order, not at random: the simulation must replay a seed exactly.
        tokio::select! {
            biased;
            event = events.next() => match event {
                Some((_, Ok(WatchEvent::InitApply(config) | WatchEvent::Apply(config)))) => {
                    let key = (config.kind(), config.metadata().name.clone().unwrap_or_default());
                    known.insert(key.clone(), config);
                    dirty.insert(key);
                }
                Some((_, Ok(WatchEvent::Delete(config)))) => {
                    let key = (config.kind(), config.metadata().name.clone().unwrap_or_default());
                    known.remove(&key);
                    dirty.remove(&key);
                }
                Some((kind, Ok(WatchEvent::InitDone))) => {
                    listed.insert(kind);
                    watch_refused.remove(&kind);
                }
                Some((_, Ok(WatchEvent::Init))) => {}
                Some((kind, Err(err @ ApiError::Forbidden(_)))) => {
                    // Nothing can be injected: a renewed or starting certificate need not wait for it.
                    gates.refused(Gate::CaInjection, &err);
                    watch_refused.insert(kind);
                }
                Some((_, Err(err))) => tracing::warn!(error = %err, "watching webhook configurations"),
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
