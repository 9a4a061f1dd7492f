//! The RolloutHealthChecks the controller's gates read: a watch of the namespace's objects
//! ([`HealthCheckSource`], a port the kube adapter serves), kept as the gates' map of parsed resources.
//!
//! A missing CRD means no resource exists: every gated StatefulSet is then misconfigured (rolled without its gate,
//! said in its plan's warnings). A refusal turns the gates off (`Gate::HealthChecks`: said once, and gated
//! StatefulSets roll as without a gate); the watch retries either way and a later grant brings them back.

use super::gates::HealthGates;
use super::offline::HealthChecks;
use crate::cluster::{ApiError, WatchEvent};
use crate::ops::feature_gate::{FeatureGates, Gate};
use futures::StreamExt;
use futures::stream::BoxStream;
use rollout_core::health_check::config;
use serde_json::Value;
use std::future::Future;

/// The namespace's RolloutHealthChecks, as generic objects (the core parses them).
pub trait HealthCheckSource: Clone + Send + Sync + 'static {
    /// Watches them, with the semantics of the other watches: [`ApiError::NotFound`] without the CRD, a 403
    /// without the grant; the watch retries either way.
    fn watch_health_checks(&self) -> BoxStream<'static, Result<WatchEvent<Value>, ApiError>>;
}

fn name_of(object: &Value) -> Option<String> {
    object.pointer("/metadata/name").and_then(Value::as_str).map(str::to_string)
}

/// Keeps `gates`' RolloutHealthChecks up to date from the watch until `stop` resolves.
pub async fn run<S: HealthCheckSource>(
    source: S,
    gates: HealthGates,
    features: FeatureGates,
    stop: impl Future<Output = ()>,
) {
    let mut events = source.watch_health_checks();
    let mut known = HealthChecks::new();
    let mut listing: Option<HealthChecks> = None;
    let watching = async {
        while let Some(item) = events.next().await {
            match item {
                Ok(WatchEvent::Init) => listing = Some(HealthChecks::new()),
                Ok(WatchEvent::InitApply(object)) => {
                    if let (Some(list), Some(name)) = (listing.as_mut(), name_of(&object)) {
                        list.insert(name, observe(&object, &gates));
                    }
                }
                Ok(WatchEvent::InitDone) => {
                    features.granted(Gate::HealthChecks);
                    known = listing.take().unwrap_or_default();
                    tracing::info!(health_checks = known.len(), "RolloutHealthChecks loaded");
                    gates.set_checks(Some(known.clone()));
                }
                Ok(WatchEvent::Apply(object)) => {
                    if let Some(name) = name_of(&object) {
                        known.insert(name, observe(&object, &gates));
                        gates.set_checks(Some(known.clone()));
                    }
                }
                Ok(WatchEvent::Delete(object)) => {
                    if let Some(name) = name_of(&object) {
                        known.remove(&name);
                        gates.metrics().configuration_observed("deleted");
                        gates.set_checks(Some(known.clone()));
                    }
                }
                Err(ApiError::NotFound(_)) => {
                    known.clear();
                    gates.set_checks(Some(HealthChecks::new()));
                }
                Err(err @ ApiError::Forbidden(_)) => {
                    features.refused(Gate::HealthChecks, &err);
                    gates.set_checks(None);
                }
                Err(err) => tracing::warn!(error = %err, "watching RolloutHealthChecks failed; retrying"),
            }
        }
    };
    tokio::select! {
        _ = watching => tracing::error!("the RolloutHealthCheck watch ended"),
        _ = stop => {}
    }
}

/// The namespace's RolloutHealthChecks as one list (a command's view, not the controller's): the watch's first
/// listing. A missing CRD is no resource; any other error ends the listing with it.
pub async fn list_once<S: HealthCheckSource>(source: &S) -> Result<HealthChecks, ApiError> {
    let mut events = source.watch_health_checks();
    let mut listing = HealthChecks::new();
    while let Some(item) = events.next().await {
        match item {
            Ok(WatchEvent::Init) => listing.clear(),
            Ok(WatchEvent::InitApply(object)) => {
                if let Some(name) = name_of(&object) {
                    listing.insert(name, config::parse(&object));
                }
            }
            Ok(WatchEvent::InitDone) => return Ok(listing),
            Ok(WatchEvent::Apply(_) | WatchEvent::Delete(_)) => {}
            Err(ApiError::NotFound(_)) => return Ok(HealthChecks::new()),
            Err(error) => return Err(error),
        }
    }
    Ok(listing)
}

fn observe(object: &Value, gates: &HealthGates) -> Result<config::HealthCheckConfig, config::ConfigError> {
    let parsed = config::parse(object);
    match &parsed {
        Ok(_) => gates.metrics().configuration_observed("valid"),
        Err(error) => {
            tracing::error!(health_check = name_of(object).unwrap_or_default(), %error, "invalid RolloutHealthCheck");
            gates.metrics().configuration_observed("invalid");
        }
    }
    parsed
}
