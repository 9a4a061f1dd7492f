//! The health gates' metrics, with the names and labels of the resource's proposal, except one: its
//! `rollout_operator_health_check_misconfigured_total` counter would share its family name with the
//! `rollout_operator_health_check_misconfigured` gauge, which OpenMetrics forbids (a counter's family is named
//! without `_total`); the counter is `rollout_operator_health_check_misconfigurations_total`.

use super::evaluate::GateRun;
use crate::ops::metrics::dskit_histogram;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GroupLabels {
    pub rollout_group: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EvaluationLabels {
    pub rollout_group: String,
    pub check: String,
    /// `pass`, `fail`, `no_data`, `error`, `skipped`.
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueryLabels {
    pub rollout_group: String,
    pub check: String,
    /// `current`, `baseline`, `success`.
    pub query_type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// `valid`, `invalid`, `deleted`.
    pub outcome: String,
}

/// Cheap to clone (shared series).
#[derive(Clone)]
pub struct HealthCheckMetrics {
    evaluations: Family<EvaluationLabels, Counter>,
    blocked: Family<GroupLabels, Gauge>,
    misconfigurations: Family<GroupLabels, Counter>,
    misconfigured: Family<GroupLabels, Gauge>,
    query_duration: Family<QueryLabels, Histogram, fn() -> Histogram>,
    configurations_observed: Family<OutcomeLabels, Counter>,
}

impl Default for HealthCheckMetrics {
    fn default() -> Self {
        HealthCheckMetrics {
            evaluations: Family::default(),
            blocked: Family::default(),
            misconfigurations: Family::default(),
            misconfigured: Family::default(),
            query_duration: Family::new_with_constructor(dskit_histogram),
            configurations_observed: Family::default(),
        }
    }
}

fn group(rollout_group: &str) -> GroupLabels {
    GroupLabels { rollout_group: rollout_group.to_string() }
}

impl HealthCheckMetrics {
    /// Creates the series and registers them in a registry prefixed `rollout_operator`.
    pub fn register(registry: &mut Registry) -> Self {
        let m = HealthCheckMetrics::default();
        registry.register(
            "health_check_evaluations",
            "Checks of RolloutHealthChecks evaluated, by result (pass, fail, no_data, error, skipped).",
            m.evaluations.clone(),
        );
        registry.register(
            "health_check_blocked",
            "1 while a RolloutHealthCheck holds the next zone of the rollout group back.",
            m.blocked.clone(),
        );
        registry.register(
            "health_check_misconfigurations",
            "Times a gated StatefulSet's RolloutHealthCheck was found missing, invalid or not selecting it.",
            m.misconfigurations.clone(),
        );
        registry.register(
            "health_check_misconfigured",
            "1 while the next zone's RolloutHealthCheck is missing, invalid or does not select it (it rolls ungated).",
            m.misconfigured.clone(),
        );
        registry.register(
            "health_check_query_duration_seconds",
            "Time spent on one health check query, retries included.",
            m.query_duration.clone(),
        );
        registry.register(
            "health_check_configurations_observed",
            "RolloutHealthChecks observed by the operator, by outcome (valid, invalid, deleted).",
            m.configurations_observed.clone(),
        );
        m
    }

    /// Records one evaluation of `rollout_group`'s gate.
    pub fn evaluated(&self, rollout_group: &str, run: &GateRun) {
        for record in &run.records {
            let labels = EvaluationLabels {
                rollout_group: rollout_group.to_string(),
                check: record.check.clone(),
                result: record.result.label().to_string(),
            };
            self.evaluations.get_or_create(&labels).inc();
        }
        for (check, kind, took) in &run.durations {
            let labels = QueryLabels {
                rollout_group: rollout_group.to_string(),
                check: check.clone(),
                query_type: kind.as_str().to_string(),
            };
            self.query_duration.get_or_create(&labels).observe(took.as_secs_f64());
        }
    }

    /// The gate's state as the last pass met it.
    pub fn gate_state(&self, rollout_group: &str, blocked: bool, misconfigured: bool) {
        self.blocked.get_or_create(&group(rollout_group)).set(i64::from(blocked));
        let gauge = self.misconfigured.get_or_create(&group(rollout_group));
        if misconfigured && gauge.get() == 0 {
            self.misconfigurations.get_or_create(&group(rollout_group)).inc();
        }
        gauge.set(i64::from(misconfigured));
    }

    /// Removes the gauges (and the misconfiguration count) of a rollout group that no longer exists: a group deleted
    /// while held back would otherwise stay `blocked` for good. The evaluations' series stay, as history.
    pub fn forget_group(&self, rollout_group: &str) {
        self.blocked.remove(&group(rollout_group));
        self.misconfigured.remove(&group(rollout_group));
        self.misconfigurations.remove(&group(rollout_group));
    }

    /// A RolloutHealthCheck observed by the watch.
    pub fn configuration_observed(&self, outcome: &str) {
        self.configurations_observed.get_or_create(&OutcomeLabels { outcome: outcome.to_string() }).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exposition(registry: &Registry) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
        text
    }

    #[test]
    fn a_forgotten_group_leaves_no_gauge_behind() {
        let mut registry = Registry::with_prefix("rollout_operator");
        let metrics = HealthCheckMetrics::register(&mut registry);
        metrics.gate_state("ingester", true, true);
        metrics.gate_state("store-gateway", true, false);
        metrics.forget_group("ingester");
        let text = exposition(&registry);
        assert!(!text.contains("rollout_group=\"ingester\""), "{text}");
        assert!(text.contains("rollout_operator_health_check_blocked{rollout_group=\"store-gateway\"} 1"), "{text}");
    }
}
