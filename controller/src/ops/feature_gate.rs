//! The one feature gate: what turns itself off when RBAC refuses it, and how it comes back.
//!
//! Owns the table of gates ([`Gate`]: the name `rollout_operator_feature_disabled{feature}` carries, the grant it
//! waits for, what stops meanwhile, when it is tried again) and the process's memory of refusals
//! ([`FeatureGates`]). Every optional part of the operator reports a refusal here and asks here whether to try again;
//! `rollout-operator rbac` reads the same table to name what each optional rule keeps working. A refusal is said
//! once: one error line naming the grant, the series set to 1; a later success clears both, with one line saying so.
//! Must not decide what a refused part does instead: each part says that itself.

use crate::kube::rbac::Feature;
use crate::ops::metrics::FeatureLabels;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use std::collections::BTreeMap;
use std::fmt::Display;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// How long a gate whose part stops while refused waits before it tries again (a grant takes effect without a
/// restart).
pub const RETRY_REFUSED_AFTER: Duration = Duration::from_secs(300);

/// When a refused part tries again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// At every use: the part's requests go on (a refused read is its fail-safe answer), only the saying is once.
    EveryUse,
    /// Once [`RETRY_REFUSED_AFTER`] has passed since the last refusal; meanwhile the part stays off.
    AfterAWhile,
}

/// One part of the operator that RBAC can turn off: one series of `rollout_operator_feature_disabled`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Gate {
    /// Writing Events.
    Events,
    /// Listing and watching ZoneAwarePodDisruptionBudgets.
    Budgets,
    /// Reading pods live for the budgets' decisions.
    BudgetPodReads,
    /// Eviction intents on pods.
    PodIntents,
    /// Eviction intents on StatefulSets (where pods cannot be patched).
    StatefulSetIntents,
    /// `grafana.com/ready-time` stamps on pods.
    ReadyTime,
    /// Changing replicas.
    Scaling,
    /// The zone tracker's ConfigMap.
    ZoneTracker,
    /// The no-downscale webhook's reads of Deployments (`/scale` parents).
    DeploymentLookups,
    /// The no-downscale webhook's reads of ReplicaSets (`/scale` parents).
    ReplicaSetLookups,
    /// Listing and watching RolloutHealthChecks.
    HealthChecks,
    /// `grafana.com/rollout-health-check-started-at` on StatefulSets (the health checks' baseline time).
    HealthCheckStartedAt,
    /// Injecting the self-signed CA into the labelled webhook configurations.
    CaInjection,
}

impl Gate {
    pub const ALL: [Gate; 13] = [
        Gate::Events,
        Gate::Budgets,
        Gate::BudgetPodReads,
        Gate::PodIntents,
        Gate::StatefulSetIntents,
        Gate::ReadyTime,
        Gate::Scaling,
        Gate::ZoneTracker,
        Gate::DeploymentLookups,
        Gate::ReplicaSetLookups,
        Gate::HealthChecks,
        Gate::HealthCheckStartedAt,
        Gate::CaInjection,
    ];

    /// The `feature` label of `rollout_operator_feature_disabled`.
    pub fn name(self) -> &'static str {
        match self {
            Gate::Events => "events",
            Gate::Budgets | Gate::BudgetPodReads => "zpdb",
            Gate::PodIntents => "zpdb-eviction-intents",
            Gate::StatefulSetIntents => "zpdb-eviction-intents-on-statefulsets",
            Gate::ReadyTime => "zpdb-ready-time",
            Gate::Scaling => "scaling",
            Gate::ZoneTracker => "zone-tracker",
            Gate::DeploymentLookups | Gate::ReplicaSetLookups => "no-downscale-parent-lookups",
            Gate::HealthChecks => "health-checks",
            Gate::HealthCheckStartedAt => "health-check-started-at",
            Gate::CaInjection => "ca-injection",
        }
    }

    /// The `missing_permission` label: the grant the part waits for.
    pub fn missing_permission(self) -> &'static str {
        match self {
            Gate::Events => "events.k8s.io events create/patch",
            Gate::Budgets => "list zoneawarepoddisruptionbudgets",
            Gate::BudgetPodReads => "get pods",
            Gate::PodIntents | Gate::ReadyTime => "patch pods",
            Gate::StatefulSetIntents => "patch statefulsets",
            Gate::Scaling => "statefulsets patch",
            Gate::ZoneTracker => "configmaps get/update/create",
            Gate::DeploymentLookups => "deployments get",
            Gate::ReplicaSetLookups => "replicasets get",
            Gate::HealthChecks => "list rollouthealthchecks",
            Gate::HealthCheckStartedAt => "patch statefulsets",
            Gate::CaInjection => "webhookconfigurations list/watch/patch",
        }
    }

    /// The permission rule group the part belongs to (what `rollout-operator rbac` marks).
    pub fn feature(self) -> Feature {
        match self {
            Gate::Events => Feature::Events,
            Gate::Budgets | Gate::BudgetPodReads => Feature::DisruptionBudgets,
            Gate::PodIntents | Gate::ReadyTime => Feature::PodAnnotations,
            Gate::StatefulSetIntents | Gate::Scaling => Feature::Scaling,
            Gate::ZoneTracker => Feature::ZoneTracker,
            Gate::DeploymentLookups | Gate::ReplicaSetLookups => Feature::ParentLookups,
            Gate::HealthChecks | Gate::HealthCheckStartedAt => Feature::HealthChecks,
            Gate::CaInjection => Feature::CaInjection,
        }
    }

    /// What the operator does while the part is refused, and what to grant: the refusal's log line.
    pub fn while_refused(self) -> &'static str {
        match self {
            Gate::Events => {
                "the operator may not write Events: grant create and patch on events (API group events.k8s.io), or \
                 drop -events.enabled; Events are off until then, nothing else changes"
            }
            Gate::Budgets => {
                "cannot list or watch ZoneAwarePodDisruptionBudgets: evictions of pods they may cover are denied; \
                 grant get, list and watch on zoneawarepoddisruptionbudgets.rollout-operator.grafana.com"
            }
            Gate::BudgetPodReads => {
                "cannot read pods live: ZoneAwarePodDisruptionBudgets are not honoured by the controller's deletions \
                 and evictions of pods a budget covers are denied; grant get on pods"
            }
            Gate::PodIntents => {
                "cannot write eviction intents on pods: writing them on the pods' StatefulSets instead (each costs a \
                 StatefulSet patch and list more); grant patch on pods"
            }
            Gate::StatefulSetIntents => {
                "cannot write eviction intents on pods nor on StatefulSets: eviction decisions are serialised per \
                 replica only (as the reference does), so two operator replicas or a restart can break a \
                 ZoneAwarePodDisruptionBudget; grant patch on pods (or on statefulsets)"
            }
            Gate::ReadyTime => {
                "cannot annotate pods with grafana.com/ready-time: partition budgets with crossZoneEvictionDelay \
                 deny evictions; grant patch on pods"
            }
            Gate::Scaling => {
                "the operator may not change replicas: grant it patch on apps statefulsets; until then due replica \
                 changes are reported as scaling errors and rollouts go on"
            }
            Gate::ZoneTracker => {
                "-use-zone-tracker is set but the operator may not use its ConfigMap: grant get, update and create \
                 on configmaps (or drop -use-zone-tracker); until then the prepare-downscale webhook denies \
                 downscales of the groups it serves, followers are not scaled down, and rollouts go on"
            }
            Gate::DeploymentLookups => {
                "the no-downscale webhook may not read apps deployments: /scale downscales of deployments are \
                 allowed with a warning, their no-downscale label unread, until the operator is granted get on them"
            }
            Gate::ReplicaSetLookups => {
                "the no-downscale webhook may not read apps replicasets: /scale downscales of replicasets are \
                 allowed with a warning, their no-downscale label unread, until the operator is granted get on them"
            }
            Gate::HealthChecks => {
                "cannot list or watch RolloutHealthChecks: StatefulSets that name one roll as without a gate; grant \
                 list and watch on rollouthealthchecks.rollout-operator.grafana.com"
            }
            Gate::HealthCheckStartedAt => {
                "cannot record when a rollout started (grafana.com/rollout-health-check-started-at on its \
                 StatefulSets): health checks take their baseline time from when this process first saw the rollout \
                 instead, later after a restart; grant patch on apps statefulsets"
            }
            Gate::CaInjection => {
                "cannot watch or patch the labelled webhook configurations: their CA bundle is not injected, so the \
                 API server cannot call the webhooks unless the bundle is set by other means, and certificates are \
                 served without waiting for an injection; grant list, watch and patch on \
                 validatingwebhookconfigurations and mutatingwebhookconfigurations (a ClusterRole), or set \
                 -webhooks.update-ca-bundle=false"
            }
        }
    }

    /// When the part tries again once refused.
    pub fn retry(self) -> Retry {
        match self {
            // Reads whose refusal is itself the safe answer, and watches that retry with their own back-off.
            Gate::Budgets
            | Gate::BudgetPodReads
            | Gate::DeploymentLookups
            | Gate::ReplicaSetLookups
            | Gate::HealthChecks
            | Gate::CaInjection => Retry::EveryUse,
            Gate::Events
            | Gate::PodIntents
            | Gate::StatefulSetIntents
            | Gate::ReadyTime
            | Gate::Scaling
            | Gate::ZoneTracker
            | Gate::HealthCheckStartedAt => Retry::AfterAWhile,
        }
    }
}

/// The process's refusals, reported in `rollout_operator_feature_disabled`. Cheap to clone (shared).
#[derive(Clone, Default)]
pub struct FeatureGates {
    series: Family<FeatureLabels, Gauge>,
    /// Each refused gate and when it was last refused.
    refused: Arc<Mutex<BTreeMap<Gate, Instant>>>,
}

impl std::fmt::Debug for FeatureGates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FeatureGates").field("refused", &*self.lock()).finish()
    }
}

impl FeatureGates {
    /// Gates reporting in `series` (the registered `rollout_operator_feature_disabled` family).
    pub fn reporting_to(series: Family<FeatureLabels, Gauge>) -> Self {
        FeatureGates { series, refused: Arc::default() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<Gate, Instant>> {
        self.refused.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn labels(gate: Gate) -> FeatureLabels {
        FeatureLabels { feature: gate.name().to_string(), missing_permission: gate.missing_permission().to_string() }
    }

    /// RBAC refused `gate`'s request with `error`. Said at the first refusal (and the first after a success): one
    /// error line naming the grant and what stops, and the series set to 1. Returns whether it was said.
    pub fn refused(&self, gate: Gate, error: &dyn Display) -> bool {
        let first = self.lock().insert(gate, Instant::now()).is_none();
        if first {
            tracing::error!(feature = gate.name(), grant = gate.missing_permission(), error = %error, "{}",
                gate.while_refused());
            self.series.get_or_create(&Self::labels(gate)).set(1);
        } else {
            tracing::debug!(feature = gate.name(), error = %error, "refused again (said before)");
        }
        first
    }

    /// `gate`'s request succeeded: if it was refused, it is on again (one line, the series back to 0).
    pub fn granted(&self, gate: Gate) {
        if self.lock().remove(&gate).is_some() {
            tracing::info!(feature = gate.name(), grant = gate.missing_permission(), "granted: on again");
            self.series.get_or_create(&Self::labels(gate)).set(0);
        }
    }

    /// Whether `gate`'s part should try its request now: it was not refused, it retries at every use, or a while
    /// has passed since its last refusal.
    pub fn may_try(&self, gate: Gate) -> bool {
        match self.lock().get(&gate) {
            None => true,
            Some(since) => gate.retry() == Retry::EveryUse || since.elapsed() >= RETRY_REFUSED_AFTER,
        }
    }

    /// Whether the series of `feature` and `missing_permission` says disabled.
    pub fn is_reported(&self, feature: &str, missing_permission: &str) -> bool {
        let labels = FeatureLabels { feature: feature.to_string(), missing_permission: missing_permission.to_string() };
        self.series.get_or_create(&labels).get() == 1
    }

    /// Whether `gate` was refused and not granted since.
    pub fn is_refused(&self, gate: Gate) -> bool {
        self.lock().contains_key(&gate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(gates: &FeatureGates, gate: Gate) -> i64 {
        gates.series.get_or_create(&FeatureGates::labels(gate)).get()
    }

    #[test]
    fn a_refusal_is_said_once_and_a_success_turns_the_part_on_again() {
        let gates = FeatureGates::default();
        assert!(gates.may_try(Gate::Scaling));
        assert!(gates.refused(Gate::Scaling, &"statefulsets.apps is forbidden"));
        assert!(!gates.refused(Gate::Scaling, &"statefulsets.apps is forbidden"));
        assert_eq!(value(&gates, Gate::Scaling), 1);
        assert!(!gates.may_try(Gate::Scaling), "stays off for a while");
        gates.granted(Gate::Scaling);
        assert_eq!(value(&gates, Gate::Scaling), 0);
        assert!(gates.may_try(Gate::Scaling));
        assert!(gates.refused(Gate::Scaling, &"forbidden"), "a refusal after a grant is said again");
    }

    #[test]
    fn reads_whose_refusal_is_their_safe_answer_try_at_every_use() {
        let gates = FeatureGates::default();
        gates.refused(Gate::DeploymentLookups, &"forbidden");
        assert!(gates.may_try(Gate::DeploymentLookups));
        assert!(gates.is_refused(Gate::DeploymentLookups));
    }

    // Tokio's paused clock; madsim's clock is driven by its own runtime.
    #[cfg(not(madsim))]
    #[tokio::test(start_paused = true)]
    async fn a_part_that_stops_tries_again_after_a_while() {
        let gates = FeatureGates::default();
        gates.refused(Gate::Events, &"forbidden");
        tokio::time::advance(RETRY_REFUSED_AFTER - Duration::from_secs(1)).await;
        assert!(!gates.may_try(Gate::Events));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(gates.may_try(Gate::Events));
    }

    #[test]
    fn every_gate_has_a_series_of_its_own() {
        let labels: std::collections::BTreeSet<_> =
            Gate::ALL.iter().map(|g| (g.name(), g.missing_permission())).collect();
        assert_eq!(labels.len(), Gate::ALL.len());
    }

    #[test]
    fn every_optional_feature_names_its_gates() {
        for gate in Gate::ALL {
            assert!(!gate.name().is_empty() && !gate.missing_permission().is_empty());
            assert!(gate.while_refused().contains("grant"), "{gate:?} names its grant");
        }
        for feature in Feature::ALL.into_iter().filter(|f| f.is_optional()) {
            let has_gate = Gate::ALL.iter().any(|g| g.feature() == feature);
            assert!(has_gate || feature == Feature::MirrorTargets, "{feature:?} has no gate");
        }
    }
}
