//! The budgets the operator knows, fed by a watch of the namespace's ZoneAwarePodDisruptionBudgets: each object goes through the core's [`Budgets`] (parse, validate, generation rules), every observation is
//! counted in `rollout_operator_zpdb_configurations_observed_total`, and an invalid object is logged.
//!
//! Owns the shared cache, its state (loading, known, unreadable) and the watch task. Decisions are never taken on
//! budgets not listed yet: until the first list the eviction webhook is told they are not loaded (and denies with
//! 429, so clients retry). A missing CRD means no budget can exist (known, empty); a 403 makes them unreadable
//! (denied with 500 and a message naming the grant), said once through the budgets' feature gate (`Gate::Budgets`).

use crate::cluster::{ApiError, DisruptionBudgets, WatchEvent};
use crate::ops::feature_gate::Gate;
use crate::ops::metrics::ZpdbMetrics;
use futures::StreamExt;
use rollout_core::zpdb::{Budgets, KnownBudgets, Observation};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::{Arc, RwLock};
use tokio::sync::watch;

#[derive(Debug, Clone, PartialEq)]
enum Status {
    Loading(String),
    Known,
    Unreadable(String),
}

#[derive(Debug)]
struct State {
    budgets: Budgets,
    status: Status,
    /// Names listed since the current (re)list began.
    listing: Option<BTreeSet<String>>,
}

/// The known budgets, shared by the watch task (writer), the eviction webhook and the ready-time tracker.
#[derive(Clone)]
pub struct BudgetCache {
    state: Arc<RwLock<State>>,
    /// Bumped whenever the budgets change, for the ready-time tracker.
    changes: watch::Sender<u64>,
}

impl Default for BudgetCache {
    /// No budgets, known: nothing is in scope.
    fn default() -> Self {
        Self::known(Budgets::default())
    }
}

impl BudgetCache {
    fn with(budgets: Budgets, status: Status) -> Self {
        BudgetCache {
            state: Arc::new(RwLock::new(State { budgets, status, listing: None })),
            changes: watch::channel(0).0,
        }
    }

    /// Waiting for the first list.
    pub fn loading() -> Self {
        Self::with(Budgets::default(), Status::Loading("waiting for the first list".to_string()))
    }

    /// These budgets, known at once.
    pub fn known(budgets: Budgets) -> Self {
        Self::with(budgets, Status::Known)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    /// What the eviction flow is told.
    pub fn snapshot(&self) -> KnownBudgets {
        let state = self.read();
        match &state.status {
            Status::Known => KnownBudgets::Known(state.budgets.all()),
            Status::Loading(why) => KnownBudgets::NotLoaded(why.clone()),
            Status::Unreadable(why) => KnownBudgets::Unreadable(why.clone()),
        }
    }

    /// Whether a known budget covers an object with these labels.
    pub fn any_selects(&self, labels: &BTreeMap<String, String>) -> bool {
        self.read().budgets.any_selects(labels)
    }

    /// Notified whenever the budgets change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn changed(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Applies one watch event; counts and logs what it did.
    pub fn apply(&self, event: WatchEvent<Value>, metrics: &ZpdbMetrics) {
        let mut changed = false;
        {
            let mut state = self.write();
            match event {
                WatchEvent::Init => state.listing = Some(BTreeSet::new()),
                WatchEvent::InitApply(object) | WatchEvent::Apply(object) => {
                    if let Some(listing) = state.listing.as_mut()
                        && let Some(name) = object.pointer("/metadata/name").and_then(Value::as_str)
                    {
                        listing.insert(name.to_string());
                    }
                    let observation = state.budgets.apply(&object);
                    changed |= observation == Observation::Updated;
                    observe(&object, &observation, metrics);
                }
                WatchEvent::Delete(object) => {
                    let observation = state.budgets.delete(&object);
                    changed |= observation == Observation::Deleted;
                    observe(&object, &observation, metrics);
                }
                WatchEvent::InitDone => {
                    metrics.gates.granted(Gate::Budgets);
                    let listed = state.listing.take().unwrap_or_default();
                    for name in state.budgets.retain_listed(&listed) {
                        tracing::info!(zpdb = %name, "ZoneAwarePodDisruptionBudget deleted (not listed again)");
                        metrics.configuration_observed(Observation::Deleted.result());
                        changed = true;
                    }
                    if state.status != Status::Known {
                        tracing::info!(budgets = state.budgets.len(), "ZoneAwarePodDisruptionBudgets loaded");
                        state.status = Status::Known;
                        changed = true;
                    }
                }
            }
        }
        if changed {
            self.changed();
        }
    }

    /// Takes a failed watch step into account: a missing CRD (no budget can exist), a refusal (unreadable),
    /// anything else transient (what is known stays known; the watch retries).
    pub fn failed(&self, err: &ApiError, metrics: &ZpdbMetrics) {
        let mut state = self.write();
        let status = match err {
            ApiError::NotFound(_) => {
                if state.status != Status::Known || !state.budgets.is_empty() {
                    tracing::info!(error = %err, "the ZoneAwarePodDisruptionBudget CRD is not installed: no budgets \
                        apply until it is");
                }
                state.budgets = Budgets::default();
                Status::Known
            }
            ApiError::Forbidden(_) => {
                metrics.gates.refused(Gate::Budgets, err);
                Status::Unreadable(format!(
                    "{err}; grant get, list and watch on zoneawarepoddisruptionbudgets.rollout-operator.grafana.com"
                ))
            }
            other => {
                tracing::warn!(error = %other, "watching ZoneAwarePodDisruptionBudgets failed; retrying");
                match &state.status {
                    Status::Loading(_) => Status::Loading(other.to_string()),
                    status => status.clone(),
                }
            }
        };
        let changed = status != state.status;
        state.status = status;
        drop(state);
        if changed {
            self.changed();
        }
    }
}

fn observe(object: &Value, observation: &Observation, metrics: &ZpdbMetrics) {
    let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    match observation {
        Observation::Invalid(err) => {
            tracing::error!(zpdb = %name, error = %err, "zpdb configuration error");
        }
        other => tracing::debug!(zpdb = %name, result = other.result(), "ZoneAwarePodDisruptionBudget observed"),
    }
    metrics.configuration_observed(observation.result());
}

/// Keeps `cache` up to date from the watch until `stop` resolves.
pub async fn run<C: DisruptionBudgets>(
    api: C,
    cache: BudgetCache,
    metrics: ZpdbMetrics,
    stop: impl Future<Output = ()>,
) {
    let mut events = api.watch_disruption_budgets();
    let watching = async {
        while let Some(item) = events.next().await {
            match item {
                Ok(event) => cache.apply(event, &metrics),
                Err(err) => cache.failed(&err, &metrics),
            }
        }
    };
    tokio::select! {
        biased;
        () = watching => tracing::warn!("the ZoneAwarePodDisruptionBudget watch ended"),
        () = stop => {}
    }
}
