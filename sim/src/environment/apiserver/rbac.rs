//! The API server's authorisation: which access each request needs, the 403 a deployment's RBAC answers, and which
//! refused requests are optional features the operator may probe again later.

use crate::environment::apiserver::{Op, Reply};
use rollout_operator::cluster::{ApiError, WebhookKind};
use rollout_operator::kube::rbac::Access;
use std::time::Duration;

/// The permission `op` needs, as the real API server's authorizer sees it: API group, resource (with subresource),
/// verb, object name; and whether the resource is cluster-scoped. `None`: not subject to RBAC here (discovery).
pub(crate) fn access_of(op: &Op) -> Option<(Access, bool)> {
    let access = |group: &str, resource: &str, verb: &str, name: Option<&str>| {
        Some((
            Access {
                group: group.to_string(),
                resource: resource.to_string(),
                verb: verb.to_string(),
                resource_name: name.map(str::to_string),
            },
            false,
        ))
    };
    let name_of =
        |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| meta.name.clone().unwrap_or_default();
    match op {
        Op::DeletePod { name, .. } => access("", "pods", "delete", Some(name)),
        Op::UpdateStatus { statefulset } => {
            access("apps", "statefulsets/status", "update", Some(&name_of(&statefulset.metadata)))
        }
        Op::GetConfigMap { name } => access("", "configmaps", "get", Some(name)),
        // RBAC cannot restrict a create by name.
        Op::CreateConfigMap { .. } => access("", "configmaps", "create", None),
        Op::ReplaceConfigMap { config_map } => access("", "configmaps", "update", Some(&name_of(&config_map.metadata))),
        Op::PatchReplicas { name, .. }
        | Op::PatchAnnotations { name, .. }
        | Op::MergeStatefulSetAnnotations { name, .. } => access("apps", "statefulsets", "patch", Some(name)),
        Op::Discover { .. } => None,
        Op::GetScale { plural, name } => {
            access("rollout-operator.grafana.com", &format!("{plural}/scale"), "get", Some(name))
        }
        Op::PatchResourceStatus { plural, name, .. } => {
            access("rollout-operator.grafana.com", &format!("{plural}/status"), "patch", Some(name))
        }
        Op::GetStatefulSet { name } => access("apps", "statefulsets", "get", Some(name)),
        Op::ListStatefulSets { .. } => access("apps", "statefulsets", "list", None),
        Op::ListPods { .. } => access("", "pods", "list", None),
        Op::GetPod { name } => access("", "pods", "get", Some(name)),
        Op::PatchPodAnnotations { name, .. } => access("", "pods", "patch", Some(name)),
        Op::GetSecret { name } => access("", "secrets", "get", Some(name)),
        Op::GetDeployment { name } => access("apps", "deployments", "get", Some(name)),
        Op::GetReplicaSet { name } => access("apps", "replicasets", "get", Some(name)),
        Op::CreateSecret { .. } => access("", "secrets", "create", None),
        Op::ReplaceSecret { secret } => access("", "secrets", "update", Some(&name_of(&secret.metadata))),
        // RBAC cannot restrict a create by name.
        Op::CreateEvent { .. } => access("events.k8s.io", "events", "create", None),
        Op::PatchEvent { name, .. } => access("events.k8s.io", "events", "patch", Some(name)),
        // Cluster-scoped: only a ClusterRole grants it.
        Op::PatchWebhookConfiguration { kind, name, .. } => {
            access("admissionregistration.k8s.io", webhook_resource(*kind), "patch", Some(name)).map(|(a, _)| (a, true))
        }
        Op::ListBudgets => access("rollout-operator.grafana.com", "zoneawarepoddisruptionbudgets", "list", None),
        Op::ListHealthChecks => access("rollout-operator.grafana.com", "rollouthealthchecks", "list", None),
        Op::GetLease { name } => access("coordination.k8s.io", "leases", "get", Some(name)),
        // RBAC cannot restrict a create by name.
        Op::CreateLease { .. } => access("coordination.k8s.io", "leases", "create", None),
        Op::ReplaceLease { lease } => {
            access("coordination.k8s.io", "leases", "update", Some(&name_of(&lease.metadata)))
        }
        // The drain's own request: not the operator's ServiceAccount (the pod's deletion that follows is the API
        // server's own).
        Op::Evict { .. } => None,
    }
}

/// The controller's replica changes (leader/follower and mirror scaling, opt-in by annotations): refused, the
/// controller goes on rolling without them and asks again once a resync period later, in case the permission was
/// granted meanwhile.
pub(crate) const COORDINATED_SCALING: &str = "coordinated scaling";

/// Writes of the zone tracker's record (`-use-zone-tracker`, opt-in): refused (where RBAC grants only reads), the
/// controller stops claiming in it, rolls on without claims and claims again a resync period after its last refusal.
/// Only the controller's writes are probes: the prepare-downscale webhook asks at every admission it must claim,
/// and each refusal it meets is reported. Refused reads are reported too: the controller reads the record at every
/// pass even while its writes are refused, so as to see a downscale in progress the moment RBAC lets the webhook
/// claim one (a refused read still tells the process, see [`told_by_refusal`]).
pub(crate) const ZONE_TRACKER: &str = "zone tracker";

/// How long after its last refusal a process may ask for an optional feature again: its feature gate's retry period,
/// less a second for the timers' rounding.
pub(crate) const REPROBE_AFTER: Duration =
    rollout_operator::ops::feature_gate::RETRY_REFUSED_AFTER.saturating_sub(Duration::from_secs(1));

/// The optional feature a request serves, when a real deployment may refuse it and the operator then turns that
/// feature off through its feature gate, with one log line, and asks again only after the gate's retry period
/// (docs/install.md, "RBAC"): pod annotations, which the chart mimir-distributed pins does not grant (`patch pods`),
/// for ready-time stamps and for eviction intents; the controller's replica changes; the zone tracker's record
/// writes; Events. A refused request of a feature that left its
/// process before the process received a refusal of that feature is the probe the design allows (the process could
/// not know yet: an earlier refusal may have been lost on the way back); one sent after means the feature did not
/// turn itself off.
pub(crate) fn optional_probe(op: &Op) -> Option<&'static str> {
    if let Op::PatchReplicas { .. } = op {
        return Some(COORDINATED_SCALING);
    }
    if let Op::CreateEvent { .. } | Op::PatchEvent { .. } = op {
        return Some("events");
    }
    if let Op::CreateConfigMap { .. } | Op::ReplaceConfigMap { .. } = op {
        return Some(ZONE_TRACKER);
    }
    if let Op::MergeStatefulSetAnnotations { changes, .. } = op {
        if changes.contains_key(rollout_core::keys::ROLLOUT_HEALTH_CHECK_STARTED_AT) {
            return Some("health-check started-at");
        }
        let intents = changes.keys().any(|k| crate::oracle::checker::is_intent_key(k));
        return intents.then_some("eviction intents on statefulsets");
    }
    let Op::PatchPodAnnotations { changes, .. } = op else { return None };
    if changes.keys().any(|k| k == rollout_core::keys::READY_TIME) {
        Some("ready-time stamps")
    } else if changes.keys().any(|k| crate::oracle::checker::is_intent_key(k)) {
        Some("eviction intents")
    } else {
        None
    }
}

/// The feature whose refusal `op`'s process is told when `op` is refused: its optional feature, or, for a read of
/// the zone tracker's record, the tracker (a refused read tells the controller to stop writing the record too).
pub(crate) fn told_by_refusal(op: &Op) -> Option<&'static str> {
    optional_probe(op).or_else(|| matches!(op, Op::GetConfigMap { .. }).then_some(ZONE_TRACKER))
}

/// The real API server's answer to a request RBAC does not allow, in the variant `op` expects.
pub(crate) fn forbidden_reply(op: &Op, access: &Access) -> Reply {
    let on = access.resource_name.as_deref().map(|n| format!(" \"{n}\"")).unwrap_or_default();
    let err = ApiError::Forbidden(format!(
        "{}{on} is forbidden: User \"system:serviceaccount:{}:rollout-operator\" cannot {} resource \"{}\" in API group \"{}\"",
        access.resource,
        crate::environment::objects::NAMESPACE,
        access.verb,
        access.resource,
        access.group
    ));
    match op {
        Op::DeletePod { .. } => Reply::Deleted(Err(err)),
        Op::UpdateStatus { .. }
        | Op::PatchReplicas { .. }
        | Op::PatchAnnotations { .. }
        | Op::MergeStatefulSetAnnotations { .. } => Reply::Patched(Err(err)),
        Op::GetConfigMap { .. } | Op::CreateConfigMap { .. } | Op::ReplaceConfigMap { .. } => {
            Reply::ConfigMap(Err(err))
        }
        Op::Discover { .. } => Reply::Discovered(Err(err)),
        Op::GetScale { .. } => Reply::Value(Err(err)),
        Op::PatchResourceStatus { .. } | Op::CreateEvent { .. } | Op::PatchEvent { .. } => Reply::Done(Err(err)),
        Op::GetStatefulSet { .. } => Reply::StatefulSet(Err(err)),
        Op::ListStatefulSets { .. } => Reply::StatefulSets(Err(err)),
        Op::ListPods { .. } => Reply::Pods(Err(err)),
        Op::GetPod { .. } | Op::PatchPodAnnotations { .. } => Reply::Pod(Err(err)),
        Op::GetSecret { .. } | Op::CreateSecret { .. } | Op::ReplaceSecret { .. } => Reply::Secret(Err(err)),
        Op::GetDeployment { .. } => Reply::Deployment(Err(err)),
        Op::GetReplicaSet { .. } => Reply::ReplicaSet(Err(err)),
        Op::ListBudgets | Op::ListHealthChecks => Reply::Values(Err(err)),
        Op::PatchWebhookConfiguration { .. } => Reply::Webhook(Err(err)),
        Op::Evict { .. } => Reply::Done(Err(err)),
        Op::GetLease { .. } | Op::CreateLease { .. } | Op::ReplaceLease { .. } => Reply::Lease(Err(err)),
    }
}

/// The resource of a webhook configuration kind, as RBAC names it.
pub(crate) fn webhook_resource(kind: WebhookKind) -> &'static str {
    match kind {
        WebhookKind::Validating => "validatingwebhookconfigurations",
        WebhookKind::Mutating => "mutatingwebhookconfigurations",
    }
}
