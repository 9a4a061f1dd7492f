//! Label and annotation keys shared with the reference operator. These strings are an interface: users' manifests
//! carry them, so they never change.

/// Label on a StatefulSet: the StatefulSet is managed iff the label exists; its value names the rollout group.
pub const ROLLOUT_GROUP: &str = "rollout-group";
/// Label Kubernetes sets on every pod of a StatefulSet: the revision the pod was created from.
pub const CONTROLLER_REVISION_HASH: &str = "controller-revision-hash";
/// Annotation (no `grafana.com/` prefix, for compatibility): pods of the StatefulSet that may be unavailable at once.
pub const ROLLOUT_MAX_UNAVAILABLE: &str = "rollout-max-unavailable";
/// Annotation: `"true"` stops the controller from deleting pods of this StatefulSet.
pub const ROLLOUT_PAUSED: &str = "grafana.com/rollout-paused";

/// Update strategy the rollout controller requires: Kubernetes replaces pods only when they are deleted.
pub const ON_DELETE: &str = "OnDelete";

// Scaling and downscale coordination (reference section 1.1-1.3).

/// Annotation (preferred) or label (compatibility): Go duration between downscales of two zones of a group.
pub const MIN_TIME_BETWEEN_ZONES_DOWNSCALE: &str = "grafana.com/min-time-between-zones-downscale";
/// Annotation: RFC 3339 time of the StatefulSet's last downscale (written by the reference's webhook; read here).
pub const LAST_DOWNSCALE: &str = "grafana.com/last-downscale";
/// Annotation on a follower: the StatefulSet of the same group whose `spec.replicas` it follows.
pub const ROLLOUT_DOWNSCALE_LEADER: &str = "grafana.com/rollout-downscale-leader";
/// Annotation on a follower: `"true"` scales up only once every leader replica is ready.
pub const ROLLOUT_UPSCALE_ONLY_WHEN_LEADER_READY: &str = "grafana.com/rollout-upscale-only-when-leader-ready";
pub const MIRROR_REPLICAS_FROM_RESOURCE_NAME: &str = "grafana.com/rollout-mirror-replicas-from-resource-name";
pub const MIRROR_REPLICAS_FROM_RESOURCE_KIND: &str = "grafana.com/rollout-mirror-replicas-from-resource-kind";
pub const MIRROR_REPLICAS_FROM_RESOURCE_API_VERSION: &str =
    "grafana.com/rollout-mirror-replicas-from-resource-api-version";
pub const MIRROR_REPLICAS_FROM_RESOURCE_WRITE_BACK: &str =
    "grafana.com/rollout-mirror-replicas-from-resource-write-back";
/// Annotation: Prometheus duration pods must have been preparing before a delayed downscale removes them.
pub const ROLLOUT_DELAYED_DOWNSCALE: &str = "grafana.com/rollout-delayed-downscale";
pub const ROLLOUT_PREPARE_DELAYED_DOWNSCALE_URL: &str = "grafana.com/rollout-prepare-delayed-downscale-url";
/// Annotation: base-10 int32 >= 0 overriding the desired replicas.
pub const ROLLOUT_FORCE_REPLICAS: &str = "grafana.com/rollout-force-replicas";

// Admission webhooks (reference section 1.2, 1.4).

/// Label on StatefulSets, Deployments, ReplicaSets: `"true"` makes the no-downscale webhook reject replica decreases.
pub const NO_DOWNSCALE: &str = "grafana.com/no-downscale";
/// Label on a StatefulSet: `"true"` makes the prepare-downscale webhook call pods before a downscale.
pub const PREPARE_DOWNSCALE: &str = "grafana.com/prepare-downscale";
pub const PREPARE_DOWNSCALE_HTTP_PATH: &str = "grafana.com/prepare-downscale-http-path";
pub const PREPARE_DOWNSCALE_HTTP_PORT: &str = "grafana.com/prepare-downscale-http-port";
/// Labels on webhook configurations selecting them for CA-bundle injection.
pub const INJECT_ROLLOUT_OPERATOR_CA: &str = "grafana.com/inject-rollout-operator-ca";
pub const NAMESPACE_LABEL: &str = "grafana.com/namespace";
/// Annotation on the zone tracker's ConfigMap: JSON map from StatefulSet name to the downscale being
/// prepared for it (`{"<sts>":{"group":"<group>","until":"<RFC 3339>"}}`). The rollout controller replaces no pod
/// of a group while one of its entries is live (no rollout step while a downscale is prepared).
pub const DOWNSCALES_IN_PROGRESS: &str = "grafana.com/downscales-in-progress";
/// Annotation on the zone tracker's ConfigMap: JSON map from rollout group to the rollout step the
/// controller is carrying out in it (`{"<group>":{"until":"<RFC 3339>"}}`). Written, conditional on the record
/// version the step was planned from, before the step's pod deletions; the prepare-downscale webhook claims no
/// downscale of a group while its entry is live (no downscale during a rollout).
pub const ROLLOUT_STEPS_IN_PROGRESS: &str = "grafana.com/rollout-steps-in-progress";

// ZoneAwarePodDisruptionBudgets (reference section 5).

/// Annotation on pods in scope of a ZoneAwarePodDisruptionBudget: RFC 3339 time the pod was first seen ready and
/// running (removed when it is seen otherwise); `crossZoneEvictionDelay` counts from it.
pub const READY_TIME: &str = "grafana.com/ready-time";
/// Annotation of ours on a pod whose eviction (or deletion by the controller) is being allowed: RFC 3339 time the
/// intent expires. Until then every other eviction decision counts the pod as unavailable (see `zpdb`'s module
/// docs for why this serialises decisions across replicas). Each decision writes its own key,
/// `grafana.com/eviction-intent.<decision>` ([`eviction_intent_key`]), so one that takes its intent back never takes
/// another's about the same pod; the bare key is read too. Where pods cannot be patched (older Helm charts grant no
/// `patch` on pods), the intent goes on the pod's StatefulSet instead, valued `<expiry> <pod name> <pod uid>` (see
/// [`crate::zpdb::pods::StatefulSetIntent`]).
pub const EVICTION_INTENT: &str = "grafana.com/eviction-intent";

/// The eviction intent key of one decision (`decider`: the AdmissionReview's uid, or the controller's name): a
/// valid annotation name (letters, digits, `-`, `_`, `.`; at most 63 characters with the prefix's name part).
pub fn eviction_intent_key(decider: &str) -> String {
    const ROOM: usize = 63 - "eviction-intent.".len();
    let cleaned: String = decider
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '-' })
        .take(ROOM)
        .collect();
    let cleaned = cleaned.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    if cleaned.is_empty() { EVICTION_INTENT.to_string() } else { format!("{EVICTION_INTENT}.{cleaned}") }
}

/// Whether `key` is an eviction intent (any decision's).
pub fn is_eviction_intent(key: &str) -> bool {
    key == EVICTION_INTENT || key.strip_prefix(EVICTION_INTENT).is_some_and(|rest| rest.starts_with('.'))
}

// Health-gated zone progression.

/// Annotation on a StatefulSet: the RolloutHealthCheck (in the operator's namespace) whose checks must pass before
/// the StatefulSet starts rolling after another zone of its group.
pub const ROLLOUT_HEALTH_CHECK: &str = "grafana.com/rollout-health-check";
/// Annotation the operator writes on a StatefulSet when it first sees pods needing its update revision:
/// `<updateRevision>=<RFC 3339 time>`. The group's earliest one for the current revisions is the checks' baseline
/// time; one for another revision is ignored.
pub const ROLLOUT_HEALTH_CHECK_STARTED_AT: &str = "grafana.com/rollout-health-check-started-at";
