//! Prometheus metrics of the operator, with the reference's names and labels.
//!
//! A fresh registry holds only the operator's own series (no process collectors), as in the reference. Per-group
//! series are created at zero when a group is first reconciled and removed when the group disappears.
//!
//! Besides the reference's names, the state of each group for dashboards and alerts ([`GroupReport`]: its state,
//! what it waits for, whether it is stuck, how long without progress, and per StatefulSet desired, updated and
//! unavailable pods), the Event recorder's counts, the serving certificate's expiry, and
//! `rollout_operator_build_info` ([`crate::ops::build_info`]).

use crate::ops::feature_gate::FeatureGates;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GroupLabels {
    pub rollout_group: String,
}

/// Prometheus' default buckets, as used by the reference for reconcile durations.
const DEFAULT_BUCKETS: [f64; 11] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

fn default_histogram() -> Histogram {
    Histogram::new(DEFAULT_BUCKETS)
}

pub struct Metrics {
    registry: Registry,
    group_reconciles: Family<GroupLabels, Counter>,
    group_reconciles_failed: Family<GroupLabels, Counter>,
    group_reconcile_duration: Family<GroupLabels, Histogram, fn() -> Histogram>,
    last_successful_group_reconcile: Family<GroupLabels, Gauge<f64, AtomicU64>>,
    /// Metrics of direct HTTP calls to pods, shared with every pod client built from them.
    pub pod_http_client: crate::pods::client::PodClientMetrics,
    /// Request metrics of both HTTP servers.
    pub http: std::sync::Arc<crate::ops::http_metrics::HttpMetrics>,
    /// Metrics of the Kubernetes client, shared with its layers.
    pub kube_client: KubeClientMetrics,
    /// Server-side cluster validation of both HTTP servers.
    pub cluster_validation: crate::ops::cluster_validation::ClusterValidationMetrics,
    scaling_errors: Family<ScalingErrorLabels, Counter>,
    /// ZoneAwarePodDisruptionBudget metrics, shared with the budget watch and the eviction webhook.
    pub zpdb: ZpdbMetrics,
    /// Health-gated zones' metrics, shared with the gates and their watch.
    pub health_checks: crate::health_check::metrics::HealthCheckMetrics,
    webhook_failure_policy: Family<FailurePolicyLabels, Gauge>,
    /// StatefulSets with scaling-error series, per group, so they go with the group.
    scaling_error_series: std::sync::Mutex<std::collections::BTreeMap<String, std::collections::BTreeSet<String>>>,
    group_state: Family<GroupStateLabels, Gauge>,
    group_waiting: Family<GroupWaitLabels, Gauge>,
    group_stuck: Family<GroupLabels, Gauge>,
    group_without_progress: Family<GroupLabels, Gauge<f64, AtomicU64>>,
    statefulset_replicas: Family<ScalingErrorLabels, Gauge>,
    statefulset_updated: Family<ScalingErrorLabels, Gauge>,
    statefulset_unavailable: Family<ScalingErrorLabels, Gauge>,
    /// Per group: the wait reason series now set, and the StatefulSets with state series.
    state_series: std::sync::Mutex<std::collections::BTreeMap<String, StateSeries>>,
    events: Family<EventLabels, Counter>,
    events_dropped: Family<CauseLabels, Counter>,
    certificate_expiry: Gauge<f64, AtomicU64>,
}

#[derive(Debug, Default)]
struct StateSeries {
    waiting: Option<String>,
    statefulsets: std::collections::BTreeSet<String>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GroupStateLabels {
    pub rollout_group: String,
    pub state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GroupWaitLabels {
    pub rollout_group: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EventLabels {
    pub reason: String,
    #[prometheus(flatten)]
    pub r#type: TypeLabel,
}

/// The leader election's series, registered only with `-leader-election.enabled` (so a single replica's metrics
/// are unchanged): whether this replica leads, and its lease transitions.
#[derive(Clone, Debug, Default)]
pub struct LeaderMetrics {
    leader: Gauge,
    transitions: Family<TransitionLabels, Counter>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TransitionLabels {
    /// `acquired`, `lost` or `released`.
    pub transition: String,
}

impl LeaderMetrics {
    /// 1 while this replica may act as the leader, 0 otherwise.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// Counts one transition of this replica's leadership.
    pub fn transition(&self, transition: &str) {
        self.transitions.get_or_create(&TransitionLabels { transition: transition.to_string() }).inc();
    }

    pub fn is_leader(&self) -> bool {
        self.leader.get() == 1
    }

    pub fn transitions(&self, transition: &str) -> u64 {
        self.transitions.get_or_create(&TransitionLabels { transition: transition.to_string() }).get()
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CauseLabels {
    pub cause: String,
}

/// The state of a group after a pass, for [`Metrics::group_report`].
#[derive(Debug, Clone, PartialEq)]
pub struct GroupReport {
    pub state: rollout_core::GroupState,
    pub waiting: Option<rollout_core::WaitReason>,
    pub stuck: bool,
    pub without_progress: Duration,
    pub statefulsets: Vec<StatefulSetReport>,
}

/// Pods of one StatefulSet: desired (`spec.replicas`), on the update revision (below `spec.replicas`), and expected
/// but not available.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatefulSetReport {
    pub name: String,
    pub desired: u32,
    pub updated: u32,
    pub unavailable: u32,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KubeCallLabels {
    /// What the request was about (`core/v1/pods collection`, ...), see `kube::layers::describe_path`.
    pub path: String,
    pub method: String,
    /// The HTTP status, or `error` when there was no response.
    pub status_code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApiGroupLabels {
    pub api_group: String,
}

/// dskit's request-duration buckets, as the reference's request, Kubernetes client and pod client metrics use.
const DSKIT_BUCKETS: [f64; 14] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0];

/// A histogram with [`DSKIT_BUCKETS`].
pub fn dskit_histogram() -> Histogram {
    Histogram::new(DSKIT_BUCKETS)
}

/// Metrics of the Kubernetes client (its layers record them), with the reference's names.
#[derive(Clone)]
pub struct KubeClientMetrics {
    request_duration: Family<KubeCallLabels, Histogram, fn() -> Histogram>,
    rate_limited: Family<ApiGroupLabels, Counter>,
}

impl Default for KubeClientMetrics {
    fn default() -> Self {
        KubeClientMetrics {
            request_duration: Family::new_with_constructor(dskit_histogram),
            rate_limited: Family::default(),
        }
    }
}

impl KubeClientMetrics {
    fn register(registry: &mut Registry) -> Self {
        let metrics = KubeClientMetrics::default();
        registry.register(
            "kubernetes_api_client_request_duration_seconds",
            "Time spent on requests to the Kubernetes API (not counting the wait for the client-side rate limiter).",
            metrics.request_duration.clone(),
        );
        registry.register(
            "kubernetes_api_client_rate_limited_requests",
            "Requests to the Kubernetes API that got no token from the client-side rate limiter.",
            metrics.rate_limited.clone(),
        );
        metrics
    }

    pub fn observe_request(&self, path: &str, method: &str, status_code: &str, took: Duration) {
        let labels =
            KubeCallLabels { path: path.to_string(), method: method.to_string(), status_code: status_code.to_string() };
        self.request_duration.get_or_create(&labels).observe(took.as_secs_f64());
    }

    pub fn rate_limited(&self, api_group: &str) {
        self.rate_limited.get_or_create(&ApiGroupLabels { api_group: api_group.to_string() }).inc();
    }

    /// For tests: how many requests of `api_group` got no token.
    pub fn rate_limited_count(&self, api_group: &str) -> u64 {
        self.rate_limited.get_or_create(&ApiGroupLabels { api_group: api_group.to_string() }).get()
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FailurePolicyLabels {
    /// `ValidatingWebhook` or `MutatingWebhook`.
    #[prometheus(flatten)]
    pub r#type: TypeLabel,
    pub webhook: String,
    /// `Fail` or `Ignore`.
    pub policy: String,
}

/// The `type` label (a Rust keyword as a field name).
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct TypeLabel(pub String);

impl prometheus_client::encoding::EncodeLabelSet for TypeLabel {
    fn encode(&self, encoder: &mut prometheus_client::encoding::LabelSetEncoder) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeLabel;
        ("type", self.0.as_str()).encode(encoder.encode_label())
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FeatureLabels {
    pub feature: String,
    /// What the operator may not do, e.g. `get configmaps`.
    pub missing_permission: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EvictionLabels {
    pub reason: String,
    pub status: String,
}

/// The reference's `rollout_operator_zpdb_*` metrics, and the feature-disabled gauge for what the budgets need
/// and may be refused.
#[derive(Clone, Debug)]
pub struct ZpdbMetrics {
    configurations_observed: Family<ResultLabels, Counter>,
    eviction_requests: Family<EvictionLabels, Counter>,
    inflight: Gauge,
    /// The process's feature gates (`rollout_operator_feature_disabled`), shared with [`Metrics::gates`].
    pub gates: FeatureGates,
}

impl Default for ZpdbMetrics {
    /// Metrics in no registry (tests, `review`).
    fn default() -> Self {
        ZpdbMetrics {
            configurations_observed: Family::default(),
            eviction_requests: Family::default(),
            inflight: Gauge::default(),
            gates: FeatureGates::default(),
        }
    }
}

impl ZpdbMetrics {
    fn register(registry: &mut Registry, features_disabled: Family<FeatureLabels, Gauge>) -> Self {
        let metrics = ZpdbMetrics { gates: FeatureGates::reporting_to(features_disabled), ..ZpdbMetrics::default() };
        registry.register(
            "zpdb_configurations_observed",
            "ZoneAwarePodDisruptionBudget objects observed, by what they did to the known budgets (updated, \
             invalid, ignored, deleted, delete-ignored).",
            metrics.configurations_observed.clone(),
        );
        registry.register(
            "zpdb_eviction_requests",
            "Eviction requests decided against ZoneAwarePodDisruptionBudgets, by reason and HTTP status.",
            metrics.eviction_requests.clone(),
        );
        registry.register(
            "zpdb_inflight_eviction_requests",
            "Eviction requests being decided against ZoneAwarePodDisruptionBudgets.",
            metrics.inflight.clone(),
        );
        metrics
    }

    /// Counts a budget object observed (`result`: what it did to the known budgets).
    pub fn configuration_observed(&self, result: &str) {
        self.configurations_observed.get_or_create(&ResultLabels { result: result.to_string() }).inc();
    }

    /// Counts an eviction decided with this outcome.
    pub fn eviction_decided(&self, reason: &str, status: u16) {
        let labels = EvictionLabels { reason: reason.to_string(), status: status.to_string() };
        self.eviction_requests.get_or_create(&labels).inc();
    }

    /// For tests: evictions counted with this outcome.
    pub fn evictions(&self, reason: &str, status: u16) -> u64 {
        let labels = EvictionLabels { reason: reason.to_string(), status: status.to_string() };
        self.eviction_requests.get_or_create(&labels).get()
    }

    /// For tests: budget objects counted with this result.
    pub fn configurations(&self, result: &str) -> u64 {
        self.configurations_observed.get_or_create(&ResultLabels { result: result.to_string() }).get()
    }

    /// Marks an eviction in flight until the guard is dropped.
    pub fn inflight(&self) -> InflightGuard {
        self.inflight.inc();
        InflightGuard(self.inflight.clone())
    }

    /// For tests: whether `feature` is reported disabled for lack of `missing_permission`.
    pub fn is_feature_disabled(&self, feature: &str, missing_permission: &str) -> bool {
        self.gates.is_reported(feature, missing_permission)
    }
}

/// Decrements the in-flight gauge when dropped (also when the handler is cancelled).
pub struct InflightGuard(Gauge);

impl Drop for InflightGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ScalingErrorLabels {
    pub rollout_group: String,
    pub statefulset: String,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut root = Registry::default();
        // `kube_validating_webhook_failure_policy` has no prefix (the reference's name); everything else does.
        let webhook_failure_policy = Family::<FailurePolicyLabels, Gauge>::default();
        root.register(
            "kube_validating_webhook_failure_policy",
            "Failure policy of the webhooks of the configurations labelled for this operator's namespace: 1 for the \
             configured policy, 0 for the other.",
            webhook_failure_policy.clone(),
        );
        let registry = root.sub_registry_with_prefix("rollout_operator");
        crate::ops::build_info::register(registry);
        let group_reconciles = Family::<GroupLabels, Counter>::default();
        let group_reconciles_failed = Family::<GroupLabels, Counter>::default();
        let group_reconcile_duration =
            Family::<GroupLabels, Histogram, fn() -> Histogram>::new_with_constructor(default_histogram);
        let last_successful_group_reconcile = Family::<GroupLabels, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "group_reconciles",
            "Total number of reconciles of a rollout group.",
            group_reconciles.clone(),
        );
        registry.register(
            "group_reconciles_failed",
            "Total number of failed reconciles of a rollout group.",
            group_reconciles_failed.clone(),
        );
        registry.register(
            "group_reconcile_duration_seconds",
            "Time spent reconciling a rollout group.",
            group_reconcile_duration.clone(),
        );
        registry.register(
            "last_successful_group_reconcile_timestamp_seconds",
            "Time of the last successful reconcile of a rollout group.",
            last_successful_group_reconcile.clone(),
        );
        let pod_http_client = crate::pods::client::PodClientMetrics::register(registry);
        let http = crate::ops::http_metrics::HttpMetrics::register(registry);
        let kube_client = KubeClientMetrics::register(registry);
        let cluster_validation = crate::ops::cluster_validation::ClusterValidationMetrics::register(registry);
        let scaling_errors = Family::<ScalingErrorLabels, Counter>::default();
        registry.register(
            "scaling_errors",
            "Reconciles in which a StatefulSet could not be scaled (missing leader, bad annotation, unreachable \
             reference resource or pods).",
            scaling_errors.clone(),
        );
        let features_disabled = Family::<FeatureLabels, Gauge>::default();
        registry.register(
            "feature_disabled",
            "1 while an optional feature is disabled because the API refused a request it needs (403).",
            features_disabled.clone(),
        );
        let zpdb = ZpdbMetrics::register(registry, features_disabled.clone());
        let health_checks = crate::health_check::metrics::HealthCheckMetrics::register(registry);
        let group_state = Family::<GroupStateLabels, Gauge>::default();
        registry.register(
            "group_state",
            "1 for the state of a rollout group at its last reconcile (progressing, waiting, done, blocked), 0 for \
             the others.",
            group_state.clone(),
        );
        let group_waiting = Family::<GroupWaitLabels, Gauge>::default();
        registry.register(
            "group_waiting",
            "1 for what a rollout group waits for at its last reconcile (pods-not-ready, pods-missing, paused, ...); \
             no series when it waits for nothing.",
            group_waiting.clone(),
        );
        let group_stuck = Family::<GroupLabels, Gauge>::default();
        registry.register(
            "group_stuck",
            "1 while a rollout group with work to do has made no progress for longer than -rollout.progress-deadline.",
            group_stuck.clone(),
        );
        let group_without_progress = Family::<GroupLabels, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "group_seconds_without_progress",
            "Seconds since a rollout group last made progress (a pod updated and available, a revision advanced), \
             as of its last reconcile; 0 when it is done.",
            group_without_progress.clone(),
        );
        let statefulset_replicas = Family::<ScalingErrorLabels, Gauge>::default();
        registry.register(
            "statefulset_replicas",
            "Desired pods (spec.replicas) of a StatefulSet of a rollout group.",
            statefulset_replicas.clone(),
        );
        let statefulset_updated = Family::<ScalingErrorLabels, Gauge>::default();
        registry.register(
            "statefulset_replicas_updated",
            "Pods of a StatefulSet of a rollout group on its update revision (ordinals below spec.replicas).",
            statefulset_updated.clone(),
        );
        let statefulset_unavailable = Family::<ScalingErrorLabels, Gauge>::default();
        registry.register(
            "statefulset_replicas_unavailable",
            "Expected pods of a StatefulSet of a rollout group that are missing or not available.",
            statefulset_unavailable.clone(),
        );
        let events = Family::<EventLabels, Counter>::default();
        registry.register(
            "events",
            "Kubernetes Events recorded (created, or added to the series of an identical recent one).",
            events.clone(),
        );
        let events_dropped = Family::<CauseLabels, Counter>::default();
        registry.register(
            "events_dropped",
            "Kubernetes Events not written: rate_limited (per-object budget), queue_full, disabled (refused with \
             403 or -events.enabled off), failed (any other API error).",
            events_dropped.clone(),
        );
        let certificate_expiry = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "tls_certificate_expiry_timestamp_seconds",
            "When the certificate the webhook server serves expires (Unix seconds); absent without -server-tls.enabled.",
            certificate_expiry.clone(),
        );
        Metrics {
            group_state,
            group_waiting,
            group_stuck,
            group_without_progress,
            statefulset_replicas,
            statefulset_updated,
            statefulset_unavailable,
            state_series: Default::default(),
            events,
            events_dropped,
            certificate_expiry,
            registry: root,
            webhook_failure_policy,
            zpdb,
            health_checks,
            group_reconciles,
            group_reconciles_failed,
            group_reconcile_duration,
            last_successful_group_reconcile,
            pod_http_client,
            http,
            kube_client,
            cluster_validation,
            scaling_errors,
            scaling_error_series: Default::default(),
        }
    }

    /// Registers the leader election's series (`rollout_operator_leader`,
    /// `rollout_operator_leader_transitions_total`) and returns their handle. Called once, at startup, only with
    /// `-leader-election.enabled`.
    pub fn register_leader_election(&mut self) -> LeaderMetrics {
        let metrics = LeaderMetrics::default();
        let registry = self.registry.sub_registry_with_prefix("rollout_operator");
        registry.register(
            "leader",
            "1 while this replica holds the leader election Lease and may run the controller, 0 otherwise.",
            metrics.leader.clone(),
        );
        registry.register(
            "leader_transitions",
            "Changes of this replica's leadership: acquired, lost (renew deadline passed or another holder seen), \
             released (graceful shutdown).",
            metrics.transitions.clone(),
        );
        metrics
    }

    /// Records the failure policy of webhook `webhook` (entry name) of a configuration of `kind`
    /// (`ValidatingWebhook` / `MutatingWebhook`): 1 for `policy`, 0 for the other. Never removed, as in the reference.
    pub fn webhook_failure_policy(&self, kind: &str, webhook: &str, policy: &str) {
        for candidate in ["Fail", "Ignore"] {
            let labels = FailurePolicyLabels {
                r#type: TypeLabel(kind.to_string()),
                webhook: webhook.to_string(),
                policy: candidate.to_string(),
            };
            self.webhook_failure_policy.get_or_create(&labels).set(i64::from(candidate == policy));
        }
    }

    /// The process's feature gates (one memory, shared with the budgets' metrics).
    pub fn gates(&self) -> &FeatureGates {
        &self.zpdb.gates
    }

    /// For tests: whether `feature` is reported disabled for lack of `missing_permission`.
    pub fn is_feature_disabled(&self, feature: &str, missing_permission: &str) -> bool {
        self.zpdb.is_feature_disabled(feature, missing_permission)
    }

    /// Counts a reconcile in which `statefulset` of `group` had a scaling error.
    pub fn scaling_error(&self, group: &str, statefulset: &str) {
        let labels = ScalingErrorLabels { rollout_group: group.to_string(), statefulset: statefulset.to_string() };
        self.scaling_errors.get_or_create(&labels).inc();
        if let Ok(mut series) = self.scaling_error_series.lock() {
            series.entry(group.to_string()).or_default().insert(statefulset.to_string());
        }
    }

    /// Counts a reconcile of `group` and makes sure its failure and last-success series exist (at 0).
    pub fn group_reconcile_started(&self, group: &str) {
        let labels = GroupLabels { rollout_group: group.to_string() };
        self.group_reconciles.get_or_create(&labels).inc();
        drop(self.group_reconciles_failed.get_or_create(&labels));
        drop(self.last_successful_group_reconcile.get_or_create(&labels));
    }

    /// Records the outcome of a reconcile of `group`. `now_unix` is the wall-clock time in seconds.
    pub fn group_reconcile_finished(&self, group: &str, took: Duration, succeeded: bool, now_unix: f64) {
        let labels = GroupLabels { rollout_group: group.to_string() };
        self.group_reconcile_duration.get_or_create(&labels).observe(took.as_secs_f64());
        if succeeded {
            self.last_successful_group_reconcile.get_or_create(&labels).set(now_unix);
        } else {
            self.group_reconciles_failed.get_or_create(&labels).inc();
        }
    }

    /// Records the state of `group` after a pass: state, wait reason, stuck, time without progress, and each
    /// StatefulSet's pods. Series of StatefulSets that left the group, and the previous wait reason, are removed.
    pub fn group_report(&self, group: &str, report: &GroupReport) {
        let labels = GroupLabels { rollout_group: group.to_string() };
        for state in [
            rollout_core::GroupState::Progressing,
            rollout_core::GroupState::Waiting,
            rollout_core::GroupState::Done,
            rollout_core::GroupState::Blocked,
        ] {
            let state_labels = GroupStateLabels { rollout_group: group.to_string(), state: state.as_str().to_string() };
            self.group_state.get_or_create(&state_labels).set(i64::from(state == report.state));
        }
        self.group_stuck.get_or_create(&labels).set(i64::from(report.stuck));
        self.group_without_progress.get_or_create(&labels).set(report.without_progress.as_secs_f64());
        let Ok(mut all) = self.state_series.lock() else { return };
        let series = all.entry(group.to_string()).or_default();
        let waiting = report.waiting.map(|w| w.as_str().to_string());
        if series.waiting != waiting {
            if let Some(old) = series.waiting.take() {
                self.group_waiting.remove(&GroupWaitLabels { rollout_group: group.to_string(), reason: old });
            }
            series.waiting = waiting;
        }
        if let Some(reason) = &series.waiting {
            let labels = GroupWaitLabels { rollout_group: group.to_string(), reason: reason.clone() };
            self.group_waiting.get_or_create(&labels).set(1);
        }
        let now: std::collections::BTreeSet<String> = report.statefulsets.iter().map(|s| s.name.clone()).collect();
        for gone in series.statefulsets.difference(&now) {
            self.remove_statefulset_series(group, gone);
        }
        for sts in &report.statefulsets {
            let labels = ScalingErrorLabels { rollout_group: group.to_string(), statefulset: sts.name.clone() };
            self.statefulset_replicas.get_or_create(&labels).set(i64::from(sts.desired));
            self.statefulset_updated.get_or_create(&labels).set(i64::from(sts.updated));
            self.statefulset_unavailable.get_or_create(&labels).set(i64::from(sts.unavailable));
        }
        series.statefulsets = now;
    }

    fn remove_statefulset_series(&self, group: &str, statefulset: &str) {
        let labels = ScalingErrorLabels { rollout_group: group.to_string(), statefulset: statefulset.to_string() };
        self.statefulset_replicas.remove(&labels);
        self.statefulset_updated.remove(&labels);
        self.statefulset_unavailable.remove(&labels);
    }

    /// Counts an Event recorded (created or added to a series).
    pub fn event_recorded(&self, reason: &str, type_: &str) {
        let labels = EventLabels { reason: reason.to_string(), r#type: TypeLabel(type_.to_string()) };
        self.events.get_or_create(&labels).inc();
    }

    /// Counts an Event not written, by `cause`.
    pub fn event_dropped(&self, cause: &str) {
        self.events_dropped.get_or_create(&CauseLabels { cause: cause.to_string() }).inc();
    }

    /// When the served certificate expires.
    pub fn certificate_expires_at(&self, unix_seconds: f64) {
        self.certificate_expiry.set(unix_seconds);
    }

    /// Removes every series of a rollout group that no longer exists.
    pub fn forget_group(&self, group: &str) {
        let labels = GroupLabels { rollout_group: group.to_string() };
        for state in ["progressing", "waiting", "done", "blocked"] {
            self.group_state.remove(&GroupStateLabels { rollout_group: group.to_string(), state: state.to_string() });
        }
        self.group_stuck.remove(&labels);
        self.group_without_progress.remove(&labels);
        let series = self.state_series.lock().ok().and_then(|mut s| s.remove(group)).unwrap_or_default();
        if let Some(reason) = series.waiting {
            self.group_waiting.remove(&GroupWaitLabels { rollout_group: group.to_string(), reason });
        }
        for statefulset in &series.statefulsets {
            self.remove_statefulset_series(group, statefulset);
        }
        self.group_reconciles.remove(&labels);
        self.group_reconciles_failed.remove(&labels);
        self.group_reconcile_duration.remove(&labels);
        self.last_successful_group_reconcile.remove(&labels);
        let statefulsets = self.scaling_error_series.lock().ok().and_then(|mut s| s.remove(group)).unwrap_or_default();
        for statefulset in statefulsets {
            self.scaling_errors.remove(&ScalingErrorLabels { rollout_group: group.to_string(), statefulset });
        }
    }

    /// Prometheus text exposition of every registered metric.
    /// The registry in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// The registry in the Prometheus text format 0.0.4 (what the reference serves, and what a scraper that does
    /// not ask for OpenMetrics gets).
    pub fn encode_prometheus_text(&self) -> String {
        openmetrics_to_prometheus_text(&self.encode())
    }
}

/// Rewrites OpenMetrics text as Prometheus text 0.0.4: no `# EOF` or `# UNIT` lines, and a counter's `# HELP` and
/// `# TYPE` name its samples' `_total` name (OpenMetrics names the family without it). Other lines are the same in
/// both formats for the metric types used here (counters, gauges, histograms).
pub fn openmetrics_to_prometheus_text(openmetrics: &str) -> String {
    let counters: std::collections::BTreeSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, tail) = rest.split_once(' ')?;
            counters.contains(name).then(|| format!("{prefix}{name}_total {tail}"))
        });
        match renamed {
            Some(l) => out.push_str(&l),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_series_have_reference_names_and_disappear_with_the_group() {
        let m = Metrics::new();
        m.group_reconcile_started("ingester");
        m.group_reconcile_finished("ingester", Duration::from_millis(3), true, 1700000000.0);
        let text = m.encode();
        assert!(text.contains("rollout_operator_group_reconciles_total{rollout_group=\"ingester\"} 1"), "{text}");
        assert!(
            text.contains("rollout_operator_group_reconciles_failed_total{rollout_group=\"ingester\"} 0"),
            "{text}"
        );
        assert!(text.contains("rollout_operator_group_reconcile_duration_seconds_count{rollout_group=\"ingester\"} 1"));
        assert!(text.contains(
            "rollout_operator_last_successful_group_reconcile_timestamp_seconds{rollout_group=\"ingester\"} 1700000000"
        ));
        m.group_reconcile_started("ingester");
        m.group_reconcile_finished("ingester", Duration::from_millis(3), false, 1700000001.0);
        assert!(m.encode().contains("rollout_operator_group_reconciles_failed_total{rollout_group=\"ingester\"} 1"));
        m.scaling_error("ingester", "ingester-zone-b");
        assert!(m.encode().contains(
            "rollout_operator_scaling_errors_total{rollout_group=\"ingester\",statefulset=\"ingester-zone-b\"} 1"
        ));
        m.forget_group("ingester");
        assert!(!m.encode().contains("rollout_group=\"ingester\""));
    }

    #[test]
    fn zpdb_series_have_reference_names() {
        let m = Metrics::new();
        m.zpdb.configuration_observed("invalid");
        m.zpdb.eviction_decided("denied", 429);
        let inflight = m.zpdb.inflight();
        let text = m.encode_prometheus_text();
        assert!(text.contains("rollout_operator_zpdb_configurations_observed_total{result=\"invalid\"} 1"), "{text}");
        assert!(text.contains("rollout_operator_zpdb_eviction_requests_total{reason=\"denied\",status=\"429\"} 1"));
        assert!(text.contains("# TYPE rollout_operator_zpdb_eviction_requests_total counter"), "{text}");
        assert!(text.contains("rollout_operator_zpdb_inflight_eviction_requests 1"), "{text}");
        drop(inflight);
        assert!(m.encode().contains("rollout_operator_zpdb_inflight_eviction_requests 0"));
        m.zpdb.gates.refused(crate::ops::feature_gate::Gate::PodIntents, &"pods is forbidden");
        assert!(m.encode().contains(
            "rollout_operator_feature_disabled{feature=\"zpdb-eviction-intents\",missing_permission=\"patch pods\"} 1"
        ));
    }

    #[test]
    fn group_state_series_follow_the_group_and_go_with_it() {
        use rollout_core::{GroupState, WaitReason};
        let m = Metrics::new();
        let sts = |name: &str, updated| StatefulSetReport { name: name.into(), desired: 3, updated, unavailable: 1 };
        let mut report = GroupReport {
            state: GroupState::Waiting,
            waiting: Some(WaitReason::PodsNotReady),
            stuck: true,
            without_progress: Duration::from_secs(1900),
            statefulsets: vec![sts("ingester-zone-a", 3), sts("ingester-zone-b", 1)],
        };
        m.group_report("ingester", &report);
        let text = m.encode();
        for line in [
            "rollout_operator_group_state{rollout_group=\"ingester\",state=\"waiting\"} 1",
            "rollout_operator_group_state{rollout_group=\"ingester\",state=\"done\"} 0",
            "rollout_operator_group_waiting{rollout_group=\"ingester\",reason=\"pods-not-ready\"} 1",
            "rollout_operator_group_stuck{rollout_group=\"ingester\"} 1",
            "rollout_operator_group_seconds_without_progress{rollout_group=\"ingester\"} 1900",
            "rollout_operator_statefulset_replicas{rollout_group=\"ingester\",statefulset=\"ingester-zone-b\"} 3",
            "rollout_operator_statefulset_replicas_updated{rollout_group=\"ingester\",statefulset=\"ingester-zone-b\"} 1",
            "rollout_operator_statefulset_replicas_unavailable{rollout_group=\"ingester\",statefulset=\"ingester-zone-a\"} 1",
        ] {
            assert!(text.contains(line), "{line} not in\n{text}");
        }
        report.state = GroupState::Done;
        report.waiting = None;
        report.stuck = false;
        report.statefulsets.pop();
        m.group_report("ingester", &report);
        let text = m.encode();
        assert!(!text.contains("reason=\"pods-not-ready\""), "the old wait reason goes: {text}");
        assert!(!text.contains("ingester-zone-b"), "a StatefulSet that left the group goes: {text}");
        assert!(text.contains("rollout_operator_group_state{rollout_group=\"ingester\",state=\"done\"} 1"));
        m.forget_group("ingester");
        assert!(!m.encode().contains("rollout_group=\"ingester\""), "{}", m.encode());
    }
}
