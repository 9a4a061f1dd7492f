//! The real deployments of the reference whose RBAC the simulated API server enforces, and their zone-tracker
//! setting.

use crate::oracle::election::LEASE;

/// How the reference is really deployed (its Helm charts' and jsonnet's RBAC and zone-tracker setting), as far as
/// the simulation is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReferenceDeployment {
    /// Grafana's Helm chart 0.50.1: no configmaps, so no zone tracker (`-use-zone-tracker` left at false).
    HelmChart,
    /// The reference's jsonnet v0.38.1: `-use-zone-tracker=true`, configmaps granted.
    Jsonnet,
    /// The older chart mimir-distributed pins (0.37.1 / 0.40.0): pods without `patch`, no configmaps, no zone
    /// tracker. Eviction intents on pods are refused, so they go on the StatefulSets (which it lets us patch);
    /// ready-time stamps are refused.
    HelmOld,
    /// The chart mimir-distributed pins without `patch` on StatefulSets either: the pod and StatefulSet verbs of
    /// Loki's chart 0.24.0, with the ZoneAwarePodDisruptionBudget and webhook grants Loki's chart lacks (so no
    /// reference deployment as a whole; a hand-written Role may grant this). Eviction intents have nowhere to go, so each operator replica serialises its
    /// own eviction decisions in process and remembers the pods it let go (the degraded mode of the optional
    /// "pod annotations" feature); with one replica serving the webhook that still keeps the budget.
    NoPatch,
    /// The reference's jsonnet with the zone tracker's ConfigMaps readable only (`get`, the one read the tracker
    /// makes; a read-only grant such as the built-in `view` ClusterRole's, which adds list and watch): the record is
    /// read, every write of it (a claim, a rollout step) is refused. No reference deployment; the misconfiguration in
    /// which a refused write, not a refused read, must switch the tracker's coordination off.
    TrackerReadOnly,
}

impl ReferenceDeployment {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "helm" => Some(ReferenceDeployment::HelmChart),
            "jsonnet" => Some(ReferenceDeployment::Jsonnet),
            "helm-old" => Some(ReferenceDeployment::HelmOld),
            "no-patch" => Some(ReferenceDeployment::NoPatch),
            "tracker-read-only" => Some(ReferenceDeployment::TrackerReadOnly),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ReferenceDeployment::HelmChart => "helm",
            ReferenceDeployment::Jsonnet => "jsonnet",
            ReferenceDeployment::HelmOld => "helm-old",
            ReferenceDeployment::NoPatch => "no-patch",
            ReferenceDeployment::TrackerReadOnly => "tracker-read-only",
        }
    }

    pub fn grants(self) -> rollout_operator::kube::reference_deployments::Grants {
        match self {
            ReferenceDeployment::HelmChart => rollout_operator::kube::reference_deployments::hc_0_50_1(),
            ReferenceDeployment::Jsonnet => rollout_operator::kube::reference_deployments::js_v0_38_1(),
            ReferenceDeployment::HelmOld => rollout_operator::kube::reference_deployments::hc_old_mh(),
            ReferenceDeployment::NoPatch => {
                with_verbs(rollout_operator::kube::reference_deployments::hc_old_mh(), "statefulsets", |verb| {
                    verb != "patch"
                })
            }
            ReferenceDeployment::TrackerReadOnly => {
                with_verbs(rollout_operator::kube::reference_deployments::js_v0_38_1(), "configmaps", |verb| {
                    verb == "get"
                })
            }
        }
    }

    pub fn zone_tracker(self) -> bool {
        matches!(self, ReferenceDeployment::Jsonnet | ReferenceDeployment::TrackerReadOnly)
    }
}

/// `grants` with the Role's rule for `resource` alone keeping only the verbs `keep` accepts.
pub(crate) fn with_verbs(
    mut grants: rollout_operator::kube::reference_deployments::Grants,
    resource: &str,
    keep: impl Fn(&str) -> bool,
) -> rollout_operator::kube::reference_deployments::Grants {
    for rule in &mut grants.role {
        if rule.resources.as_deref() == Some(&[resource.to_string()][..]) {
            rule.verbs.retain(|verb| keep(verb));
        }
    }
    grants
}

/// The health-gated worlds' grants under a real deployment's RBAC: the deployment's own, plus the Role's rule a user
/// who opts into health-gated zones adds (`list` and `watch` on RolloutHealthChecks, as `deploy/base/role.yaml`).
pub fn with_health_check_grants(
    mut grants: rollout_operator::kube::reference_deployments::Grants,
) -> rollout_operator::kube::reference_deployments::Grants {
    use rollout_operator::kube::reference_deployments::rule;
    grants.role.push(rule("rollout-operator.grafana.com", &["rollouthealthchecks"], &["list", "watch"]));
    grants
}

/// The HA world's grants under a real deployment's RBAC: the deployment's own, plus `deploy/overlays/ha`'s Role
/// (Lease `create`, and `get`, `update` on the one Lease by name), which the controller crate's tests check
/// against what the adapter needs.
pub fn with_ha_grants(
    mut grants: rollout_operator::kube::reference_deployments::Grants,
) -> rollout_operator::kube::reference_deployments::Grants {
    use rollout_operator::kube::reference_deployments::{by_name, rule};
    grants.role.push(rule("coordination.k8s.io", &["leases"], &["create"]));
    grants.role.push(by_name("coordination.k8s.io", &["leases"], &[LEASE], &["get", "update"]));
    grants
}
