//! The controller's side of health-gated zones: the gate the pass consults (from [`HealthGates`], never waiting on
//! Prometheus) and the `grafana.com/rollout-health-check-started-at` bookkeeping the checks' baseline time comes from.

use super::Controller;
use crate::cluster::ClusterApi;
use crate::health_check::gates::{HealthGates, started_at_due};
use crate::pods::client::PodHttpClient;
use jiff::Timestamp;
use rollout_core::group::GroupSnapshot;
use rollout_core::health_check::HealthGate;
use rollout_core::{Planner, keys};
use std::collections::BTreeMap;

impl<C: ClusterApi, P: Planner, H: PodHttpClient> Controller<C, P, H> {
    /// The same controller holding each zone after the first back until its RolloutHealthCheck passes.
    pub fn with_health_gates(mut self, gates: HealthGates) -> Self {
        self.health_gates = Some(gates);
        self
    }

    /// The group's gate for this pass: `None` when gates are off, `Some(None)` when none is in sight.
    pub(super) fn health_gate(&self, snapshot: &GroupSnapshot, now: Timestamp) -> Option<Option<HealthGate>> {
        self.health_gates.as_ref()?.gate(snapshot, now)
    }

    /// Tells the gates what the pass did with the gate (their gauges).
    pub(super) fn health_gate_passed(&self, snapshot: &GroupSnapshot, gate: &Option<Option<HealthGate>>, held: bool) {
        if let Some(gates) = &self.health_gates {
            gates.passed(snapshot, gate.as_ref().and_then(Option::as_ref), held);
        }
    }

    /// Writes the `started-at` annotations due in a gated group (with gates on). A failed write is logged and tried
    /// again by the next pass: until it lands, the gate has no baseline time and holds the next zone.
    pub(super) async fn mark_rollout_started(&self, snapshot: &GroupSnapshot, now: Timestamp) {
        if self.health_gates.is_none() {
            return;
        }
        for (statefulset, value) in started_at_due(snapshot, now) {
            if self
                .may_write(&|| format!("the {} annotation of {statefulset}", keys::ROLLOUT_HEALTH_CHECK_STARTED_AT))
                .is_err()
            {
                return;
            }
            let changes = BTreeMap::from([(keys::ROLLOUT_HEALTH_CHECK_STARTED_AT.to_string(), Some(value))]);
            if let Err(error) = self.api.merge_statefulset_annotations(&statefulset, &changes).await {
                tracing::warn!(rollout_group = %snapshot.name, %statefulset, %error,
                    "cannot record when the rollout started (the health check's baseline time)");
            }
        }
    }
}
