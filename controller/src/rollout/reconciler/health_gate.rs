//! The controller's side of health-gated zones: the gate the pass consults (from [`HealthGates`], never waiting on
//! Prometheus) and the `grafana.com/rollout-health-check-started-at` bookkeeping the checks' baseline time comes from.

use super::Controller;
use crate::cluster::{ApiError, ClusterApi};
use crate::health_check::gates::{HealthGates, started_at_due};
use crate::ops::feature_gate::Gate;
use crate::pods::client::PodHttpClient;
use jiff::Timestamp;
use rollout_core::group::GroupSnapshot;
use rollout_core::health_check::GroupGates;
use rollout_core::pass::Pass;
use rollout_core::wait::WaitReason;
use rollout_core::{Planner, keys};
use std::collections::BTreeMap;

impl<C: ClusterApi, P: Planner, H: PodHttpClient> Controller<C, P, H> {
    /// The same controller holding each zone after the first back until its RolloutHealthCheck passes.
    pub fn with_health_gates(mut self, gates: HealthGates) -> Self {
        self.health_gates = Some(gates);
        self
    }

    /// The group's gates for this pass: `None` when gates are off.
    pub(super) fn health_gate(&self, snapshot: &GroupSnapshot, now: Timestamp) -> Option<GroupGates> {
        self.health_gates.as_ref()?.gate(snapshot, now)
    }

    /// Tells the gates what the pass did with them (their gauges).
    pub(super) fn health_gate_passed(&self, snapshot: &GroupSnapshot, gate: &Option<GroupGates>, pass: &Pass) {
        if let Some(gates) = &self.health_gates {
            let held = pass.plan.wait.as_ref().is_some_and(|w| w.reason == WaitReason::HeldByHealthCheck);
            gates.passed(snapshot, gate.as_ref(), held);
        }
    }

    /// Tells the gates which zones a passing evaluation let roll, once the pass's deletions are made (a pass that
    /// failed, lost its leadership or was held back live leaves them gated).
    pub(super) fn health_gate_cleared(&self, snapshot: &GroupSnapshot, cleared: &[String]) {
        if let Some(gates) = &self.health_gates {
            gates.cleared(snapshot, cleared);
        }
    }

    /// Writes the `started-at` annotations due in a gated group (with gates on). A failed write is logged and tried
    /// again by the next pass; a refused one (RBAC) turns the writes off for a while, said once (`Gate::
    /// HealthCheckStartedAt`). Until one lands, the gates take the time this process first saw the rollout.
    pub(super) async fn mark_rollout_started(&self, snapshot: &GroupSnapshot, now: Timestamp) {
        let feature_gates = self.metrics.gates();
        if self.health_gates.is_none() || !feature_gates.may_try(Gate::HealthCheckStartedAt) {
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
            match self.api.merge_statefulset_annotations(&statefulset, &changes).await {
                Ok(_) => feature_gates.granted(Gate::HealthCheckStartedAt),
                Err(error @ ApiError::Forbidden(_)) => {
                    feature_gates.refused(Gate::HealthCheckStartedAt, &error);
                    return;
                }
                Err(error) => tracing::warn!(rollout_group = %snapshot.name, %statefulset, %error,
                    "cannot record when the rollout started (the health check's baseline time)"),
            }
        }
    }
}
