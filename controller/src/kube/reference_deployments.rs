//! How the reference operator is really deployed (Grafana's Helm charts, the Go operator's jsonnet), as far as RBAC
//! goes: what each deployment grants its ServiceAccount, as data. The `rbac` tests check that each deployment's args
//! need no more than it grants; the simulation runs the operator under these grants (its API server answers 403 to
//! anything else).
//!
//! Data only: changing it to make a test pass is changing the world the operator must drop into.

use crate::kube::rbac::{Access, accesses, covers};
use k8s_openapi::api::rbac::v1::PolicyRule;

/// What a deployment grants the operator: a Role in its namespace and a ClusterRole.
pub struct Grants {
    pub role: Vec<PolicyRule>,
    pub cluster_role: Vec<PolicyRule>,
}

pub fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.to_string()]),
        resources: Some(resources.iter().map(|r| r.to_string()).collect()),
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        resource_names: None,
        non_resource_urls: None,
    }
}

pub fn by_name(group: &str, resources: &[&str], names: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule { resource_names: Some(names.iter().map(|n| n.to_string()).collect()), ..rule(group, resources, verbs) }
}

const GRAFANA: &str = "rollout-operator.grafana.com";
const ADMISSION: &str = "admissionregistration.k8s.io";

/// The parts of the reference deployments' RBAC that HC 0.50.1, HC-old/MH and JS share; `pods` differ, and so does the
/// certificate Secret's name (the one the deployment's args use: `resourceNames: the certificate Secret`).
pub fn helm_and_jsonnet(pod_verbs: &[&str], certificate_secret: &str) -> Grants {
    Grants {
        role: vec![
            rule("", &["pods"], pod_verbs),
            rule("apps", &["statefulsets"], &["list", "get", "watch", "patch"]),
            rule("apps", &["statefulsets/status"], &["update"]),
            rule(GRAFANA, &["zoneawarepoddisruptionbudgets"], &["get", "list", "watch"]),
            rule(GRAFANA, &["replicatemplates/scale", "replicatemplates/status"], &["get", "patch"]),
            rule("", &["secrets"], &["create"]),
            by_name("", &["secrets"], &[certificate_secret], &["get", "update"]),
        ],
        cluster_role: vec![rule(
            ADMISSION,
            &["validatingwebhookconfigurations", "mutatingwebhookconfigurations"],
            &["list", "patch", "watch"],
        )],
    }
}

/// HC 0.50.1: Grafana's Helm chart, default values (no configmaps). Its args name the Secret `certificate`.
pub fn hc_0_50_1() -> Grants {
    helm_and_jsonnet(&["list", "get", "watch", "delete", "patch"], "certificate")
}

/// HC-old 0.37.1 / 0.40.0, as mimir-distributed (MH) pins it: pods without patch, no configmaps. MH's args name the
/// Secret `certificate`.
pub fn hc_old_mh() -> Grants {
    helm_and_jsonnet(&["list", "get", "watch", "delete"], "certificate")
}

/// JS v0.38.1: the reference's jsonnet library, with the zone tracker's configmaps (not restricted by name). Its
/// args leave `-server-tls.self-signed-cert.secret-name` at the reference's default, which is the Secret it grants.
pub fn js_v0_38_1() -> Grants {
    let mut grants =
        helm_and_jsonnet(&["list", "get", "watch", "delete", "patch"], "rollout-operator-self-signed-certificate");
    grants.role.push(rule("", &["configmaps"], &["get", "update", "create"]));
    grants
}

/// LJ: Loki's jsonnet. No ClusterRole.
pub fn lj_grants() -> Grants {
    Grants {
        role: vec![
            rule("", &["pods"], &["list", "get", "watch", "delete"]),
            rule("apps", &["statefulsets"], &["list", "get", "watch", "update", "patch"]),
            rule("apps", &["statefulsets/status"], &["update"]),
        ],
        cluster_role: vec![],
    }
}

/// Loki's Helm chart (rollout-operator chart 0.24.0), which deploys with LJ's args: "grants only pods
/// list/get/watch/delete, statefulsets list/get/watch and statefulsets/status update".
pub fn loki_helm_0_24_0() -> Grants {
    Grants {
        role: vec![
            rule("", &["pods"], &["list", "get", "watch", "delete"]),
            rule("apps", &["statefulsets"], &["list", "get", "watch"]),
            rule("apps", &["statefulsets/status"], &["update"]),
        ],
        cluster_role: vec![],
    }
}

impl Grants {
    /// Whether these grants allow `need` (namespaced requests against the Role, cluster-scoped ones against the
    /// ClusterRole).
    pub fn allows(&self, need: &Access, cluster_scoped: bool) -> bool {
        let rules = if cluster_scoped { &self.cluster_role } else { &self.role };
        accesses(rules).iter().any(|grant| covers(grant, need))
    }
}
