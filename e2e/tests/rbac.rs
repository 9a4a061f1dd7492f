#![cfg(not(madsim))]
//! RBAC coverage: the permissions the deploy overlays grant the operator's ServiceAccount, compared in both
//! directions with what the kube adapter declares it uses (`rollout_operator::kube_adapter::RBAC_REQUIREMENTS`,
//! itself checked against the adapter's real requests by the adapter's mock-server tests).
//!
//! - every requirement must be granted (else the operator gets 403 in a real cluster);
//! - every granted (group, resource, verb) must be required by something (least privilege);
//! - cluster-scoped resources are granted through a ClusterRole bound by a ClusterRoleBinding, namespaced ones
//!   through a Role in the operator's namespace (the operator is namespace-scoped);
//! - only roles actually bound to the Deployment's ServiceAccount count.
//!
//! Nothing here needs editing when the adapter or the YAML changes: both sides are read from their sources.

use rollout_e2e::manifests::{KubeObject, kustomize_build, parse_kube_object, repo_root};
use rollout_operator::kube_adapter::{ApiPermission, RBAC_REQUIREMENTS, REPLICA_TEMPLATE_PERMISSIONS};
use std::collections::{BTreeMap, BTreeSet};

/// (API group, resource, verb).
type Perm = (String, String, String);

/// Permissions only the webhooks and the TLS certificate use: the controller-only overlay must not grant them.
/// (group, resource, verb); an empty verb means every verb.
const WEBHOOK_ONLY: &[(&str, &str, &str)] = &[
    ("", "secrets", ""),
    ("apps", "statefulsets", "get"),
    ("apps", "deployments", ""),
    ("apps", "replicasets", ""),
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations", ""),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations", ""),
];

fn webhook_only((g, r, v): &Perm) -> bool {
    WEBHOOK_ONLY.iter().any(|(wg, wr, wv)| wg == g && wr == r && (wv.is_empty() || wv == v))
}

/// Cluster-scoped resources the operator may touch (a Role cannot grant them).
const CLUSTER_SCOPED: &[(&str, &str)] = &[
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
];

fn perm(group: &str, resource: &str, verb: &str) -> Perm {
    (group.to_string(), resource.to_string(), verb.to_string())
}

/// What the adapter uses, with mirror targets instantiated for the shipped ReplicaTemplate CRD (the only mirror
/// target the deploy RBAC can know; users add grants for their own kinds).
fn requirements() -> BTreeSet<Perm> {
    RBAC_REQUIREMENTS
        .iter()
        .chain(REPLICA_TEMPLATE_PERMISSIONS)
        .map(|ApiPermission { group, resource, verb }| perm(group, resource, verb))
        .collect()
}

/// What an overlay grants the operator's ServiceAccount, by where it is granted.
#[derive(Debug, Default)]
struct Grants {
    namespaced: BTreeSet<Perm>,
    cluster: BTreeSet<Perm>,
}

impl Grants {
    fn all(&self) -> BTreeSet<Perm> {
        self.namespaced.union(&self.cluster).cloned().collect()
    }
}

fn grants(overlay: &str) -> Grants {
    let dir = repo_root().join("deploy/overlays").join(overlay);
    let objects: Vec<KubeObject> = kustomize_build(&dir)
        .unwrap_or_else(|e| panic!("{e}"))
        .iter()
        .map(|d| parse_kube_object(d).unwrap_or_else(|e| panic!("{overlay}: {e}")))
        .collect();
    let (sa, ns) = objects
        .iter()
        .find_map(|o| match o {
            KubeObject::Deployment(d) => Some((
                d.spec.as_ref()?.template.spec.as_ref()?.service_account_name.clone()?,
                d.metadata.namespace.clone()?,
            )),
            _ => None,
        })
        .expect("a Deployment with a serviceAccountName and a namespace");
    let binds_sa = |subjects: &Option<Vec<k8s_openapi::api::rbac::v1::Subject>>| {
        subjects
            .iter()
            .flatten()
            .any(|s| s.kind == "ServiceAccount" && s.name == sa && s.namespace.as_deref() == Some(ns.as_str()))
    };
    let mut bound_roles = BTreeSet::new();
    let mut bound_cluster_roles = BTreeSet::new();
    for o in &objects {
        match o {
            KubeObject::RoleBinding(b) if binds_sa(&b.subjects) => {
                assert_eq!(b.metadata.namespace.as_deref(), Some(ns.as_str()), "RoleBinding outside the namespace");
                assert_eq!(b.role_ref.kind, "Role", "{overlay}: bind Roles, not ClusterRoles, in the namespace");
                bound_roles.insert(b.role_ref.name.clone());
            }
            KubeObject::ClusterRoleBinding(b) if binds_sa(&b.subjects) => {
                bound_cluster_roles.insert(b.role_ref.name.clone());
            }
            _ => {}
        }
    }
    let mut out = Grants::default();
    let expand = |rules: &Option<Vec<k8s_openapi::api::rbac::v1::PolicyRule>>, into: &mut BTreeSet<Perm>| {
        for rule in rules.iter().flatten() {
            assert!(rule.non_resource_urls.is_none(), "{overlay}: no non-resource URLs (discovery is granted to all)");
            for g in rule.api_groups.iter().flatten() {
                for r in rule.resources.iter().flatten() {
                    for v in &rule.verbs {
                        assert!(g != "*" && r != "*" && v != "*", "{overlay}: wildcard in {rule:?}");
                        into.insert(perm(g, r, v));
                    }
                }
            }
        }
    };
    for o in &objects {
        match o {
            KubeObject::Role(r) if bound_roles.contains(r.metadata.name.as_deref().unwrap_or_default()) => {
                expand(&r.rules, &mut out.namespaced)
            }
            KubeObject::ClusterRole(r)
                if bound_cluster_roles.contains(r.metadata.name.as_deref().unwrap_or_default()) =>
            {
                expand(&r.rules, &mut out.cluster)
            }
            _ => {}
        }
    }
    let found_roles: BTreeSet<String> = objects
        .iter()
        .filter_map(|o| match o {
            KubeObject::Role(r) => r.metadata.name.clone(),
            _ => None,
        })
        .collect();
    assert_eq!(found_roles, bound_roles, "{overlay}: every Role is bound to the operator, and every binding resolves");
    out
}

fn show(set: &BTreeSet<Perm>) -> String {
    set.iter().map(|(g, r, v)| format!("  ({g:?}, {r:?}, {v:?})")).collect::<Vec<_>>().join("\n")
}

fn is_cluster_scoped((g, r, _): &Perm) -> bool {
    CLUSTER_SCOPED.iter().any(|(cg, cr)| cg == g && cr == r)
}

#[test]
fn the_full_deployment_grants_exactly_what_the_operator_uses() {
    let granted = grants("webhooks");
    let needed: BTreeSet<Perm> = requirements();
    let all = granted.all();
    let missing: BTreeSet<Perm> = needed.difference(&all).cloned().collect();
    assert!(missing.is_empty(), "the deploy RBAC does not grant (the operator would get 403):\n{}", show(&missing));
    let unused: BTreeSet<Perm> = all.difference(&needed).cloned().collect();
    assert!(
        unused.is_empty(),
        "the deploy RBAC grants what nothing uses (remove it, or declare it in RBAC_REQUIREMENTS):\n{}",
        show(&unused)
    );
    let misplaced_cluster: BTreeSet<Perm> = granted.cluster.iter().filter(|p| !is_cluster_scoped(p)).cloned().collect();
    assert!(misplaced_cluster.is_empty(), "namespaced resources granted cluster-wide:\n{}", show(&misplaced_cluster));
    let misplaced_ns: BTreeSet<Perm> = granted.namespaced.iter().filter(|p| is_cluster_scoped(p)).cloned().collect();
    assert!(misplaced_ns.is_empty(), "cluster-scoped resources in a Role have no effect:\n{}", show(&misplaced_ns));
}

#[test]
fn the_controller_only_deployment_grants_what_the_controller_uses() {
    let controller = grants("controller").all();
    let full = grants("webhooks").all();
    let extra: BTreeSet<Perm> = controller.difference(&full).cloned().collect();
    assert!(extra.is_empty(), "the controller overlay grants more than the full one:\n{}", show(&extra));
    let needed: BTreeSet<Perm> = requirements().into_iter().filter(|p| !webhook_only(p)).collect();
    let missing: BTreeSet<Perm> = needed.difference(&controller).cloned().collect();
    assert!(missing.is_empty(), "the controller overlay does not grant:\n{}", show(&missing));
    let webhook_grants: BTreeSet<Perm> = controller.iter().filter(|p| webhook_only(p)).cloned().collect();
    assert!(
        webhook_grants.is_empty(),
        "the controller overlay grants webhook-only permissions:\n{}",
        show(&webhook_grants)
    );
}

#[test]
fn the_coverage_check_catches_both_directions() {
    // The comparison above is plain set difference; show it fails on a missing and on an unused grant.
    let needed: BTreeSet<Perm> = [perm("", "pods", "list"), perm("", "pods", "delete")].into();
    let granted: BTreeSet<Perm> = [perm("", "pods", "list"), perm("", "pods", "get")].into();
    assert_eq!(needed.difference(&granted).collect::<Vec<_>>(), [&perm("", "pods", "delete")]);
    assert_eq!(granted.difference(&needed).collect::<Vec<_>>(), [&perm("", "pods", "get")]);
    // And the requirement list is the adapter's, not empty.
    let by_resource: BTreeMap<&str, usize> = RBAC_REQUIREMENTS.iter().fold(BTreeMap::new(), |mut m, p| {
        *m.entry(p.resource).or_default() += 1;
        m
    });
    assert!(by_resource.contains_key("pods") && by_resource.contains_key("statefulsets/status"), "{by_resource:?}");
}
