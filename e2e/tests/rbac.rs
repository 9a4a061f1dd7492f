#![cfg(not(madsim))]
//! RBAC coverage: the permissions the deploy overlays grant the operator's ServiceAccount, compared in both
//! directions with what the kube adapter declares it uses (`rollout_operator::kube::rbac::RBAC_REQUIREMENTS`,
//! itself checked against the adapter's real requests by the adapter's mock-server tests).
//!
//! - every requirement must be granted (else the operator gets 403 in a real cluster);
//! - every granted (group, resource, verb) must be required by something (least privilege);
//! - each overlay grants the rules `rollout-operator rbac` generates for the args its Deployment passes
//!   (`rollout_operator::kube::rbac::rules_for`, resourceNames included), and the full overlay exactly those;
//! - cluster-scoped resources are granted through a ClusterRole bound by a ClusterRoleBinding, namespaced ones
//!   through a Role in the operator's namespace (the operator is namespace-scoped);
//! - only roles actually bound to the Deployment's ServiceAccount count.
//!
//! Nothing here needs editing when the adapter or the YAML changes: both sides are read from their sources.

use k8s_openapi::api::rbac::v1::PolicyRule;
use rollout_e2e::manifests::{KubeObject, kustomize_build, overlays, parse_kube_object, repo_root};
use rollout_operator::cli::{self, Command, OperatorFlags};
use rollout_operator::kube::rbac::{
    Access, ApiPermission, RBAC_REQUIREMENTS, REPLICA_TEMPLATE_PERMISSIONS, Rules, not_granted, rules_for,
};
use std::collections::{BTreeMap, BTreeSet};

/// (API group, resource, verb).
type Perm = (String, String, String);

/// The flags of a Deployment's args, parsed by `rollout-operator rbac` (which accepts exactly what the controller
/// accepts).
fn flags_of(what: &str, args: &[String]) -> OperatorFlags {
    let argv = ["rollout-operator", "rbac"].into_iter().map(String::from).chain(args.iter().cloned());
    match cli::parse(argv) {
        Ok(Command::Rbac(rbac)) => rbac.flags,
        Ok(other) => panic!("{what}: expected the rbac subcommand, got {other:?}"),
        Err(e) => panic!("{what}: the operator does not accept the Deployment's args {args:?}: {e}"),
    }
}

fn rules_of(what: &str, args: &[String]) -> Rules {
    rules_for(&flags_of(what, args).rbac_settings()).unwrap_or_else(|e| panic!("{what}: no rules for {args:?}: {e}"))
}

/// Permissions only the webhooks and the TLS certificate use: the controller-only overlay must not grant them.
/// Derived from the table: what every feature needs, less what every feature but TLS needs.
fn webhook_only() -> BTreeSet<Perm> {
    let perms = |args: &[&str]| -> BTreeSet<Perm> {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let rules = rules_of("webhook-only permissions", &args);
        rules.role.iter().chain(&rules.cluster_role).flat_map(expand_rule).collect()
    };
    let everything = perms(&["-kubernetes.namespace=ns", "-server-tls.enabled=true", "-use-zone-tracker=true"]);
    let without_tls = perms(&["-kubernetes.namespace=ns", "-use-zone-tracker=true"]);
    everything.difference(&without_tls).cloned().collect()
}

/// The (group, resource, verb) combinations of a rule, whatever its resourceNames.
fn expand_rule(rule: &PolicyRule) -> Vec<Perm> {
    let mut out = Vec::new();
    for g in rule.api_groups.iter().flatten() {
        for r in rule.resources.iter().flatten() {
            for v in &rule.verbs {
                out.push(perm(g, r, v));
            }
        }
    }
    out
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
        .map(|ApiPermission { group, resource, verb, .. }| perm(group, resource, verb))
        .collect()
}

/// What an overlay grants the operator's ServiceAccount, by where it is granted, and the args its Deployment passes.
#[derive(Debug, Default)]
struct Grants {
    namespaced: BTreeSet<Perm>,
    cluster: BTreeSet<Perm>,
    /// The rules of the bound Roles and ClusterRoles as written (resourceNames included).
    role_rules: Vec<PolicyRule>,
    cluster_rules: Vec<PolicyRule>,
    /// The operator container's args.
    args: Vec<String>,
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
    let args = objects
        .iter()
        .find_map(|o| match o {
            KubeObject::Deployment(d) => d.spec.as_ref()?.template.spec.as_ref()?.containers.first()?.args.clone(),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{overlay}: the Deployment's container has args"));
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
    let mut out = Grants { args, ..Grants::default() };
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
                expand(&r.rules, &mut out.namespaced);
                out.role_rules.extend(r.rules.iter().flatten().cloned());
            }
            KubeObject::ClusterRole(r)
                if bound_cluster_roles.contains(r.metadata.name.as_deref().unwrap_or_default()) =>
            {
                expand(&r.rules, &mut out.cluster);
                out.cluster_rules.extend(r.rules.iter().flatten().cloned());
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
    // The ha overlay is the webhooks overlay with leader election: every feature on.
    let granted = grants("ha");
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

fn show_accesses(accesses: &[Access]) -> String {
    if accesses.is_empty() {
        return "    nothing".to_string();
    }
    accesses.iter().map(|a| format!("    {a}")).collect::<Vec<_>>().join("\n")
}

/// What the rules generated for the overlay's own args need and its bound roles do not grant, by kind of role.
fn not_granted_for_its_flags(overlay: &str, granted: &Grants) -> Option<String> {
    let rules = rules_of(overlay, &granted.args);
    let role = not_granted(&rules.role, &granted.role_rules);
    let cluster = not_granted(&rules.cluster_role, &granted.cluster_rules);
    (!role.is_empty() || !cluster.is_empty()).then(|| {
        format!(
            "{overlay} (args {:?}):\n  Role:\n{}\n  ClusterRole:\n{}",
            granted.args,
            show_accesses(&role),
            show_accesses(&cluster)
        )
    })
}

#[test]
fn every_overlay_grants_what_the_args_of_its_deployment_need() {
    let overlays = overlays().unwrap_or_else(|e| panic!("{e}"));
    assert!(overlays.len() >= 2, "{overlays:?}");
    let failures: Vec<String> =
        overlays.iter().filter_map(|(name, _)| not_granted_for_its_flags(name, &grants(name))).collect();
    assert!(
        failures.is_empty(),
        "overlays that do not grant what `rollout-operator rbac` generates for their Deployment's args (the operator \
         would get 403):\n{}",
        failures.join("\n")
    );
}

#[test]
fn the_full_deployment_grants_exactly_the_rules_its_args_need() {
    for overlay in ["webhooks", "ha"] {
        let granted = grants(overlay);
        let rules = rules_of(overlay, &granted.args);
        // Both directions, resourceNames included: a grant by name is "used" only by a need on that name.
        let unused_role = not_granted(&granted.role_rules, &rules.role);
        let unused_cluster = not_granted(&granted.cluster_rules, &rules.cluster_role);
        assert!(
            unused_role.is_empty() && unused_cluster.is_empty(),
            "{overlay}: grants more than `rollout-operator rbac` generates for its args:\n  Role:\n{}\n  \
         ClusterRole:\n{}",
            show_accesses(&unused_role),
            show_accesses(&unused_cluster)
        );
        assert_eq!(not_granted_for_its_flags(overlay, &granted), None);
    }
}

#[test]
fn the_controller_only_deployment_grants_what_the_controller_uses() {
    let granted = grants("controller");
    let controller = granted.all();
    let full = grants("webhooks").all();
    let extra: BTreeSet<Perm> = controller.difference(&full).cloned().collect();
    assert!(extra.is_empty(), "the controller overlay grants more than the full one:\n{}", show(&extra));
    // What the controller uses with the args this overlay passes, as generated.
    if let Some(missing) = not_granted_for_its_flags("controller", &granted) {
        panic!("the controller overlay does not grant:\n{missing}");
    }
    let webhook_only = webhook_only();
    assert!(webhook_only.contains(&perm("", "secrets", "create")), "{webhook_only:?}");
    let webhook_grants: BTreeSet<Perm> = controller.intersection(&webhook_only).cloned().collect();
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
