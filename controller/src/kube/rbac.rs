//! The operator's Kubernetes API permissions, and the RBAC rules a set of flags needs.
//!
//! This module owns the requirement table ([`RBAC_REQUIREMENTS`], [`REPLICA_TEMPLATE_PERMISSIONS`] and the wildcard
//! [`MIRROR_TARGET_PERMISSIONS`]): every permission the kube adapter's requests need, the features that use it (each
//! switched on by flags), whether it is namespaced or cluster-scoped, and whether RBAC can restrict it to one object
//! named by a flag. One table serves three checks, so they cannot drift apart: the adapter's mock-server tests check
//! every request the adapter sends against it, [`rules_for`] turns it into the Role and ClusterRole a set of flags
//! needs (`rollout-operator rbac`), and the deploy/ and reference-deployment tests compare grants with those rules
//! ([`not_granted`]).
//!
//! It is data and pure functions, built in both builds (the simulator's too). It does not decide what the operator
//! does; when the code starts using a permission for another feature, the feature list of that row changes here.

use k8s_openapi::api::rbac::v1::PolicyRule;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use thiserror::Error;

/// What the operator uses a permission for. A permission is needed when any of its features is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Feature {
    /// Rollouts and scaling: watching pods and StatefulSets, deleting pods, live reads, writing status and replicas.
    /// Always on.
    Rollout,
    /// Mirroring replicas from the shipped `ReplicaTemplate` CRD. Always on: whether a StatefulSet mirrors is set by
    /// its annotations, not by a flag, so the rules cannot know whether it will be used. Optional: without it a
    /// mirror StatefulSet gets a scaling error (logged, counted) and the rest rolls on.
    MirrorTargets,
    /// Changing replicas (leader/follower, mirror, force-replicas annotations) and recording downscales in
    /// `grafana.com/last-downscale` without the zone tracker. Optional: a refused write is a scaling error of that
    /// StatefulSet, or, for a `/scale` downscale the webhook cannot record, a denial naming the verb to grant.
    Scaling,
    /// The no-downscale webhook's parent lookups of `/scale` requests for Deployments and ReplicaSets (with TLS).
    /// Optional: a refused lookup allows the request with a warning, as the reference does; every request still
    /// reads, and the refusal is logged once per kind (and `rollout_operator_feature_disabled`).
    ParentLookups,
    /// The admission webhooks (`-server-tls.enabled`): parent lookups of `/scale` requests and live reads of the
    /// rollout group.
    Webhooks,
    /// The group downscale record in a ConfigMap (`-use-zone-tracker`).
    ZoneTracker,
    /// The self-signed certificate, kept in a Secret (`-server-tls.enabled` with
    /// `-server-tls.self-signed-cert.enabled`, the default).
    Certificate,
    /// Injecting the self-signed CA into the labelled webhook configurations (`-webhooks.update-ca-bundle`, the
    /// default; only with TLS and the self-signed certificate).
    CaInjection,
    /// The `kube_validating_webhook_failure_policy` gauge: watches the namespace's webhook configurations whenever
    /// the TLS server runs, whether or not CA bundles are injected.
    FailurePolicyMetric,
    /// The ZoneAwarePodDisruptionBudgets the operator knows (watched always, as the reference does). Optional:
    /// without it the eviction webhook denies evictions of pods a budget may cover, saying what to grant, and
    /// rollouts go on.
    DisruptionBudgets,
    /// Annotations of pods: eviction intents (serialising eviction decisions across replicas) and
    /// `grafana.com/ready-time` stamps. Optional: refused, the intents go on the pods' StatefulSets (`patch` on
    /// statefulsets; refused too, decisions are serialised per replica only) and the stamps are not written, each
    /// said once in the log and in `rollout_operator_feature_disabled`.
    PodAnnotations,
    /// Kubernetes Events about rollouts and admissions (`-events.enabled`). Optional: a refusal turns Events off
    /// with one log line and `rollout_operator_feature_disabled{feature="events"}`; nothing else changes.
    Events,
    /// The RolloutHealthChecks that gate zones (watched always: StatefulSets opt in by annotation). Optional:
    /// without them gated StatefulSets roll as without a gate, said once in the log and in
    /// `rollout_operator_feature_disabled`.
    HealthChecks,
    /// Leader election over a Lease (`-leader-election.enabled`). Not optional: refused, no replica can lead, so no
    /// rollout progresses (each replica logs the refusal on every attempt).
    LeaderElection,
}

impl Feature {
    /// Every feature, in the order the table uses them.
    pub const ALL: [Feature; 14] = [
        Feature::Rollout,
        Feature::MirrorTargets,
        Feature::Scaling,
        Feature::ParentLookups,
        Feature::Webhooks,
        Feature::ZoneTracker,
        Feature::Certificate,
        Feature::CaInjection,
        Feature::FailurePolicyMetric,
        Feature::DisruptionBudgets,
        Feature::PodAnnotations,
        Feature::Events,
        Feature::HealthChecks,
        Feature::LeaderElection,
    ];

    /// A feature that, refused by RBAC, degrades with a clear message (what it says above) instead of stopping
    /// rollouts or admissions; a deployment may leave it out.
    pub fn is_optional(self) -> bool {
        matches!(
            self,
            Feature::MirrorTargets
                | Feature::Scaling
                | Feature::ParentLookups
                | Feature::DisruptionBudgets
                | Feature::PodAnnotations
                | Feature::Events
                | Feature::HealthChecks
        )
    }

    /// The feature's name, as `rollout-operator rbac` marks the rules with it.
    pub fn name(self) -> &'static str {
        match self {
            Feature::Rollout => "rollouts",
            Feature::MirrorTargets => "mirror-targets",
            Feature::Scaling => "scaling",
            Feature::ParentLookups => "no-downscale-parent-lookups",
            Feature::Webhooks => "webhooks",
            Feature::ZoneTracker => "zone-tracker",
            Feature::Certificate => "self-signed-certificate",
            Feature::CaInjection => "ca-injection",
            Feature::FailurePolicyMetric => "failure-policy-metric",
            Feature::DisruptionBudgets => "zpdb",
            Feature::PodAnnotations => "pod-annotations",
            Feature::Events => "events",
            Feature::HealthChecks => "health-checks",
            Feature::LeaderElection => "leader-election",
        }
    }

    /// The flags that switch the feature on (see [`Feature::enabled`]), in words.
    pub fn switched_on_by(self) -> &'static str {
        match self {
            Feature::Rollout
            | Feature::MirrorTargets
            | Feature::Scaling
            | Feature::DisruptionBudgets
            | Feature::PodAnnotations
            | Feature::HealthChecks => "always on",
            Feature::Webhooks | Feature::FailurePolicyMetric | Feature::ParentLookups => "-server-tls.enabled",
            Feature::ZoneTracker => "-use-zone-tracker",
            Feature::Certificate => "-server-tls.enabled, -server-tls.self-signed-cert.enabled",
            Feature::CaInjection => {
                "-server-tls.enabled, -server-tls.self-signed-cert.enabled, -webhooks.update-ca-bundle"
            }
            Feature::Events => "-events.enabled",
            Feature::LeaderElection => "-leader-election.enabled",
        }
    }

    /// Whether these flags switch the feature on, exactly as the binary's startup decides it (`main.rs`,
    /// `admission::server::start`).
    pub fn enabled(self, settings: &RbacSettings) -> bool {
        let tls = settings.webhooks;
        match self {
            Feature::Rollout
            | Feature::MirrorTargets
            | Feature::Scaling
            | Feature::DisruptionBudgets
            | Feature::PodAnnotations
            | Feature::HealthChecks => true,
            Feature::Webhooks | Feature::FailurePolicyMetric | Feature::ParentLookups => tls,
            Feature::ZoneTracker => settings.zone_tracker,
            Feature::Certificate => tls && settings.self_signed_certificate,
            Feature::CaInjection => tls && settings.self_signed_certificate && settings.update_ca_bundle,
            Feature::Events => settings.events,
            Feature::LeaderElection => settings.leader_election,
        }
    }
}

/// What decides the permissions a deployment needs: which optional features the controller's flags switch on, and
/// the names of the objects their permissions are restricted to. Built from the flags by the command line
/// (`OperatorFlags::rbac_settings`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RbacSettings {
    /// `-server-tls.enabled`: the webhooks are served.
    pub webhooks: bool,
    /// `-use-zone-tracker`.
    pub zone_tracker: bool,
    /// `-server-tls.self-signed-cert.enabled`.
    pub self_signed_certificate: bool,
    /// `-webhooks.update-ca-bundle`.
    pub update_ca_bundle: bool,
    /// `-events.enabled`.
    pub events: bool,
    /// `-leader-election.enabled`.
    pub leader_election: bool,
    /// The zone tracker's ConfigMap, resolved as the controller and the webhooks resolve it (an empty
    /// `-zone-tracker.config-map-name` means the default).
    pub zone_tracker_config_map: String,
    /// `-server-tls.self-signed-cert.secret-name`.
    pub certificate_secret: String,
    /// `-leader-election.lease-name`.
    pub leader_lease: String,
}

/// Namespaced permissions go in a Role in the operator's namespace; cluster-scoped ones need a ClusterRole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    Namespaced,
    Cluster,
}

/// The one object a permission is restricted to (RBAC `resourceNames`), named by a flag. Only requests for one named
/// object (get, update, patch, delete) can be restricted this way; `create` and `list` cannot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourceName {
    /// `-zone-tracker.config-map-name`.
    ZoneTrackerConfigMap,
    /// `-server-tls.self-signed-cert.secret-name`.
    CertificateSecret,
    /// `-leader-election.lease-name`.
    LeaderLease,
}

impl ResourceName {
    /// The flag that names the object.
    pub fn flag(self) -> &'static str {
        match self {
            ResourceName::ZoneTrackerConfigMap => "-zone-tracker.config-map-name",
            ResourceName::CertificateSecret => "-server-tls.self-signed-cert.secret-name",
            ResourceName::LeaderLease => "-leader-election.lease-name",
        }
    }

    /// The object's name under these flags, as the operator resolves it.
    pub fn resolve(self, settings: &RbacSettings) -> Result<&str, RbacError> {
        let name = match self {
            ResourceName::ZoneTrackerConfigMap => settings.zone_tracker_config_map.as_str(),
            ResourceName::CertificateSecret => settings.certificate_secret.as_str(),
            ResourceName::LeaderLease => settings.leader_lease.as_str(),
        };
        if name.is_empty() {
            return Err(RbacError::EmptyResourceName { flag: self.flag() });
        }
        Ok(name)
    }
}

/// Why no rules could be made for a set of flags.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RbacError {
    #[error("{flag} is empty, but the permission on that object is granted by name: give the object's name")]
    EmptyResourceName { flag: &'static str },
}

/// One permission on the Kubernetes API, in RBAC terms: API group (`""` is core), resource (`name/subresource` for
/// subresources) and verb; where it is granted, which features use it, and the named object it is restricted to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ApiPermission {
    pub group: &'static str,
    pub resource: &'static str,
    pub verb: &'static str,
    pub scope: Scope,
    /// Needed when any of these is on.
    pub features: &'static [Feature],
    /// `Some`: the operator only ever addresses the one object that flag names, so the grant can say so.
    pub resource_name: Option<ResourceName>,
}

impl ApiPermission {
    /// A permission in the operator's namespace, on any object.
    pub const fn namespaced(
        group: &'static str,
        resource: &'static str,
        verb: &'static str,
        features: &'static [Feature],
    ) -> Self {
        Self { group, resource, verb, scope: Scope::Namespaced, features, resource_name: None }
    }

    /// A permission on a cluster-scoped resource.
    pub const fn cluster(
        group: &'static str,
        resource: &'static str,
        verb: &'static str,
        features: &'static [Feature],
    ) -> Self {
        Self { group, resource, verb, scope: Scope::Cluster, features, resource_name: None }
    }

    /// The same permission, restricted to the object `name` names.
    pub const fn named(self, name: ResourceName) -> Self {
        Self { resource_name: Some(name), ..self }
    }

    /// Whether these flags switch on a feature that uses this permission.
    pub fn needed(&self, settings: &RbacSettings) -> bool {
        self.features.iter().any(|feature| feature.enabled(settings))
    }

    /// Whether these flags switch on a feature that uses this permission and is not optional: without the
    /// permission the operator cannot do its job.
    pub fn required(&self, settings: &RbacSettings) -> bool {
        self.features.iter().any(|feature| !feature.is_optional() && feature.enabled(settings))
    }

    /// The features using this permission that these flags switch on.
    pub fn enabled_features(&self, settings: &RbacSettings) -> Vec<Feature> {
        let mut features: Vec<Feature> = self.features.iter().copied().filter(|f| f.enabled(settings)).collect();
        features.sort();
        features.dedup();
        features
    }
}

use Feature::{
    CaInjection, Certificate, DisruptionBudgets, Events, FailurePolicyMetric, HealthChecks, LeaderElection,
    MirrorTargets, ParentLookups, PodAnnotations, Rollout, Scaling, Webhooks, ZoneTracker,
};

/// Every permission the kube adapter needs on the operator's own resources. The deploy RBAC must grant at least
/// those its flags need; the adapter's tests check that this list equals what the adapter actually requests (each
/// (group, resource, verb) once, with the request's scope, and a named request where a row is restricted by name).
pub const RBAC_REQUIREMENTS: &[ApiPermission] = &[
    // Rollouts watch pods (list + watch) and replace them one zone at a time (uid-preconditioned deletes); the
    // controller checks a deletion it got no answer for with a live list, the prepare-downscale webhook lists the
    // group's pods live.
    ApiPermission::namespaced("", "pods", "list", &[Rollout, Webhooks]),
    ApiPermission::namespaced("", "pods", "watch", &[Rollout]),
    ApiPermission::namespaced("", "pods", "delete", &[Rollout]),
    // The StatefulSets of rollout groups: watched by the controller, listed live by the prepare-downscale webhook.
    ApiPermission::namespaced("apps", "statefulsets", "list", &[Rollout, Webhooks]),
    ApiPermission::namespaced("apps", "statefulsets", "watch", &[Rollout]),
    // status.currentRevision is written with an UPDATE of the status subresource (what every real deployment
    // grants), after a live read of the object.
    ApiPermission::namespaced("apps", "statefulsets/status", "update", &[Rollout]),
    // The group downscale record. `create` cannot be restricted by name in RBAC.
    ApiPermission::namespaced("", "configmaps", "get", &[ZoneTracker]).named(ResourceName::ZoneTrackerConfigMap),
    ApiPermission::namespaced("", "configmaps", "create", &[ZoneTracker]),
    ApiPermission::namespaced("", "configmaps", "update", &[ZoneTracker]).named(ResourceName::ZoneTrackerConfigMap),
    // Live reads: the controller's before a status write and to check a write it got no answer for; the webhooks'
    // parent lookups of /scale requests (no-downscale: StatefulSets, Deployments, ReplicaSets; prepare-downscale:
    // StatefulSets).
    ApiPermission::namespaced("apps", "statefulsets", "get", &[Rollout, Webhooks]),
    ApiPermission::namespaced("apps", "deployments", "get", &[ParentLookups]),
    ApiPermission::namespaced("apps", "replicasets", "get", &[ParentLookups]),
    // TLS: the self-signed certificate's Secret. `create` cannot be restricted by name in RBAC.
    ApiPermission::namespaced("", "secrets", "get", &[Certificate]).named(ResourceName::CertificateSecret),
    ApiPermission::namespaced("", "secrets", "create", &[Certificate]),
    ApiPermission::namespaced("", "secrets", "update", &[Certificate]).named(ResourceName::CertificateSecret),
    // Webhook configurations (cluster-scoped: a ClusterRole): watched for CA injection and for the failure-policy
    // gauge, patched by CA injection.
    ApiPermission::cluster(
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
        "list",
        &[CaInjection, FailurePolicyMetric],
    ),
    ApiPermission::cluster(
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
        "watch",
        &[CaInjection, FailurePolicyMetric],
    ),
    ApiPermission::cluster("admissionregistration.k8s.io", "validatingwebhookconfigurations", "patch", &[CaInjection]),
    ApiPermission::cluster(
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
        "list",
        &[CaInjection, FailurePolicyMetric],
    ),
    ApiPermission::cluster(
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
        "watch",
        &[CaInjection, FailurePolicyMetric],
    ),
    ApiPermission::cluster("admissionregistration.k8s.io", "mutatingwebhookconfigurations", "patch", &[CaInjection]),
    // Scaling sets spec.replicas of a follower or mirror StatefulSet (with grafana.com/last-downscale when there is
    // no zone tracker); without the tracker the webhooks record a /scale downscale on the parent the same way.
    // Eviction intents go on the pod's StatefulSet where pods cannot be patched.
    ApiPermission::namespaced("apps", "statefulsets", "patch", &[Scaling, PodAnnotations, HealthChecks]),
    // The eviction webhook reads the evicted pod live; so does the controller before each deletion while budgets
    // exist, judging it as an eviction under them (reference 5.5).
    ApiPermission::namespaced("", "pods", "get", &[Webhooks, DisruptionBudgets]),
    // Eviction intents and grafana.com/ready-time stamps (merge patches of pod annotations).
    ApiPermission::namespaced("", "pods", "patch", &[PodAnnotations]),
    // The budgets, watched (as generic objects).
    ApiPermission::namespaced(
        "rollout-operator.grafana.com",
        "zoneawarepoddisruptionbudgets",
        "list",
        &[DisruptionBudgets],
    ),
    ApiPermission::namespaced(
        "rollout-operator.grafana.com",
        "zoneawarepoddisruptionbudgets",
        "watch",
        &[DisruptionBudgets],
    ),
    // The RolloutHealthChecks, watched (as generic objects).
    ApiPermission::namespaced("rollout-operator.grafana.com", "rollouthealthchecks", "list", &[HealthChecks]),
    ApiPermission::namespaced("rollout-operator.grafana.com", "rollouthealthchecks", "watch", &[HealthChecks]),
    // Events (`events.k8s.io/v1`) on the StatefulSets: created, and patched when they repeat (their series).
    ApiPermission::namespaced("events.k8s.io", "events", "create", &[Events]),
    ApiPermission::namespaced("events.k8s.io", "events", "patch", &[Events]),
    // Leader election: the one Lease, read, created when missing (`create` cannot be restricted by name) and
    // replaced with a resourceVersion precondition (renewal, takeover, release).
    ApiPermission::namespaced("coordination.k8s.io", "leases", "get", &[LeaderElection])
        .named(ResourceName::LeaderLease),
    ApiPermission::namespaced("coordination.k8s.io", "leases", "create", &[LeaderElection]),
    ApiPermission::namespaced("coordination.k8s.io", "leases", "update", &[LeaderElection])
        .named(ResourceName::LeaderLease),
];

/// Wildcard in [`MIRROR_TARGET_PERMISSIONS`]: stands for the API group / plural resource of each reference resource
/// that a StatefulSet mirrors (`grafana.com/rollout-mirror-replicas-from-resource-*`). Those are user resources, not
/// known in advance, so they are listed apart from [`RBAC_REQUIREMENTS`]; the deploy RBAC grants them for the
/// shipped `ReplicaTemplate` CRD (`rollout-operator.grafana.com`, `replicatemplates`), see
/// [`REPLICA_TEMPLATE_PERMISSIONS`]. Resolving the kind uses API discovery (`GET /api`, `/apis/<group>`,
/// `/apis/<group>/<version>`), non-resource URLs every authenticated user may read (`system:discovery`).
pub const MIRROR_TARGET: &str = "*";

/// What mirroring needs on each reference resource type: read its `scale` subresource, merge-patch its `status`.
pub const MIRROR_TARGET_PERMISSIONS: &[ApiPermission] = &[
    ApiPermission::namespaced(MIRROR_TARGET, "*/scale", "get", &[MirrorTargets]),
    ApiPermission::namespaced(MIRROR_TARGET, "*/status", "patch", &[MirrorTargets]),
];

/// [`MIRROR_TARGET_PERMISSIONS`] for the shipped `ReplicaTemplate` CRD: the mirror target [`rules_for`] includes.
pub const REPLICA_TEMPLATE_PERMISSIONS: &[ApiPermission] = &[
    ApiPermission::namespaced("rollout-operator.grafana.com", "replicatemplates/scale", "get", &[MirrorTargets]),
    ApiPermission::namespaced("rollout-operator.grafana.com", "replicatemplates/status", "patch", &[MirrorTargets]),
];

/// The rules a set of flags needs: for a Role in the operator's namespace, and for a ClusterRole.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rules {
    pub role: Vec<PolicyRule>,
    pub cluster_role: Vec<PolicyRule>,
}

/// Verbs in the order Kubernetes documents them; rules list their verbs in this order.
const VERB_ORDER: [&str; 8] = ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"];

fn verb_rank(verb: &str) -> (usize, &str) {
    (VERB_ORDER.iter().position(|v| *v == verb).unwrap_or(VERB_ORDER.len()), verb)
}

/// (API group, resource, resourceName) -> verbs.
type Merged<'a> = BTreeMap<(&'static str, &'static str, Option<&'a str>), BTreeSet<(usize, &'static str)>>;

/// The Role and ClusterRole rules these flags need: the rows of [`RBAC_REQUIREMENTS`] and
/// [`REPLICA_TEMPLATE_PERMISSIONS`] whose features the flags switch on, with resource names resolved from the flags.
/// One rule per (API group, resource, resource name) with its verbs merged; rules sorted by group, resource and
/// name (unrestricted first), verbs in Kubernetes' order, so the output is the same for the same flags. A verb a
/// rule grants on every object is not repeated in the rule restricted to one object.
pub fn rules_for(settings: &RbacSettings) -> Result<Rules, RbacError> {
    rules_where(settings, |_| true)
}

/// [`rules_for`] without the optional features' permissions ([`Feature::is_optional`]): what a deployment must
/// grant for these flags (the rest degrades with a clear message when refused).
pub fn required_rules_for(settings: &RbacSettings) -> Result<Rules, RbacError> {
    rules_where(settings, |p| p.required(settings))
}

/// A rule of [`marked_rules_for`]: whether a deployment must grant it, and the features these flags switch on that
/// use it.
#[derive(Debug, Clone, PartialEq)]
pub struct MarkedRule {
    pub rule: PolicyRule,
    /// Needed by a feature that is not optional ([`Feature::is_optional`]).
    pub required: bool,
    /// Every feature switched on that uses the rule (some may be optional in a required rule), in table order.
    pub features: Vec<Feature>,
}

/// The Role's and the ClusterRole's rules, each marked required or optional.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MarkedRules {
    pub role: Vec<MarkedRule>,
    pub cluster_role: Vec<MarkedRule>,
}

/// [`rules_for`] with each rule marked: first exactly the rules of [`required_rules_for`], then the optional rest,
/// split so that each optional rule serves one set of optional features (what is left out without them is then
/// plain). Together they grant what [`rules_for`] grants.
pub fn marked_rules_for(settings: &RbacSettings) -> Result<MarkedRules, RbacError> {
    let required = required_rules_for(settings)?;
    let mut optional_sets: Vec<Vec<Feature>> =
        table().filter(|p| p.needed(settings) && !p.required(settings)).map(|p| p.enabled_features(settings)).collect();
    optional_sets.sort();
    optional_sets.dedup();
    let (mut optional_role, mut optional_cluster_role) = (Vec::new(), Vec::new());
    for set in &optional_sets {
        let rules = rules_where(settings, |p| !p.required(settings) && p.enabled_features(settings) == *set)?;
        optional_role.extend(rules.role.into_iter().map(|rule| (rule, set.clone())));
        optional_cluster_role.extend(rules.cluster_role.into_iter().map(|rule| (rule, set.clone())));
    }
    let mark = |required_rules: Vec<PolicyRule>, optional_rules: Vec<(PolicyRule, Vec<Feature>)>, scope| {
        let mut marked: Vec<MarkedRule> = required_rules
            .iter()
            .map(|rule| MarkedRule { rule: rule.clone(), required: true, features: features_of(rule, settings, scope) })
            .collect();
        let mut rest: Vec<MarkedRule> = optional_rules
            .into_iter()
            .filter_map(|(rule, features)| {
                let rule = without_granted(rule, &required_rules)?;
                Some(MarkedRule { rule, required: false, features })
            })
            .collect();
        rest.sort_by(|a, b| {
            let key =
                |m: &MarkedRule| (m.rule.api_groups.clone(), m.rule.resources.clone(), m.rule.resource_names.clone());
            key(a).cmp(&key(b)).then_with(|| a.features.cmp(&b.features))
        });
        marked.extend(rest);
        marked
    };
    Ok(MarkedRules {
        role: mark(required.role, optional_role, Scope::Namespaced),
        cluster_role: mark(required.cluster_role, optional_cluster_role, Scope::Cluster),
    })
}

/// Every row [`rules_for`] draws from.
fn table() -> impl Iterator<Item = &'static ApiPermission> {
    RBAC_REQUIREMENTS.iter().chain(REPLICA_TEMPLATE_PERMISSIONS)
}

/// The enabled features of the rows behind a rule of [`required_rules_for`]: those of the required rows of its
/// group and resource with one of its verbs, on its object (or on any, for a rule on any object, which also grants
/// the verbs named rows need).
fn features_of(rule: &PolicyRule, settings: &RbacSettings, scope: Scope) -> Vec<Feature> {
    let has = |list: &Option<Vec<String>>, value: &str| list.as_deref().is_some_and(|l| l.iter().any(|v| v == value));
    let mut features: Vec<Feature> = table()
        .filter(|p| p.scope == scope && p.required(settings))
        .filter(|p| has(&rule.api_groups, p.group) && has(&rule.resources, p.resource))
        .filter(|p| rule.verbs.iter().any(|v| v == p.verb))
        .filter(|p| match &rule.resource_names {
            None => true,
            Some(names) => p
                .resource_name
                .and_then(|name| name.resolve(settings).ok())
                .is_some_and(|n| names.iter().any(|x| x == n)),
        })
        .flat_map(|p| p.enabled_features(settings))
        .collect();
    features.sort();
    features.dedup();
    features
}

/// `rule` without the verbs `granted` already allows; `None` when nothing is left.
fn without_granted(rule: PolicyRule, granted: &[PolicyRule]) -> Option<PolicyRule> {
    let verbs: Vec<String> = rule
        .verbs
        .iter()
        .filter(|verb| {
            !not_granted(&[PolicyRule { verbs: vec![verb.to_string()], ..rule.clone() }], granted).is_empty()
        })
        .cloned()
        .collect();
    (!verbs.is_empty()).then_some(PolicyRule { verbs, ..rule })
}

fn rules_where(settings: &RbacSettings, keep: impl Fn(&ApiPermission) -> bool) -> Result<Rules, RbacError> {
    let mut namespaced = Merged::new();
    let mut cluster = Merged::new();
    for permission in table().filter(|p| p.needed(settings) && keep(p)) {
        let name = permission.resource_name.map(|name| name.resolve(settings)).transpose()?;
        let merged = match permission.scope {
            Scope::Namespaced => &mut namespaced,
            Scope::Cluster => &mut cluster,
        };
        merged.entry((permission.group, permission.resource, name)).or_default().insert(verb_rank(permission.verb));
    }
    Ok(Rules { role: to_rules(namespaced), cluster_role: to_rules(cluster) })
}

fn to_rules(mut merged: Merged<'_>) -> Vec<PolicyRule> {
    let unrestricted: BTreeMap<(&str, &str), BTreeSet<(usize, &str)>> = merged
        .iter()
        .filter(|((_, _, name), _)| name.is_none())
        .map(|((group, resource, _), verbs)| ((*group, *resource), verbs.clone()))
        .collect();
    for ((group, resource, name), verbs) in &mut merged {
        if name.is_some()
            && let Some(everywhere) = unrestricted.get(&(*group, *resource))
        {
            verbs.retain(|verb| !everywhere.contains(verb));
        }
    }
    merged
        .into_iter()
        .filter(|(_, verbs)| !verbs.is_empty())
        .map(|((group, resource, name), verbs)| PolicyRule {
            api_groups: Some(vec![group.to_string()]),
            resources: Some(vec![resource.to_string()]),
            resource_names: name.map(|name| vec![name.to_string()]),
            verbs: verbs.into_iter().map(|(_, verb)| verb.to_string()).collect(),
            non_resource_urls: None,
        })
        .collect()
}

/// One verb on one resource, possibly on one named object only: the unit [`not_granted`] compares.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Access {
    pub group: String,
    pub resource: String,
    pub verb: String,
    /// `None`: on every object of the resource.
    pub resource_name: Option<String>,
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} (apiGroup {:?})", self.verb, self.resource, self.group)?;
        if let Some(name) = &self.resource_name {
            write!(f, " resourceNames [{name}]")?;
        }
        Ok(())
    }
}

/// Every (group, resource, verb, resource name) a list of rules grants, one per combination.
pub fn accesses(rules: &[PolicyRule]) -> BTreeSet<Access> {
    let mut out = BTreeSet::new();
    for rule in rules {
        let names: Vec<Option<&String>> = match rule.resource_names.as_deref() {
            None | Some([]) => vec![None],
            Some(names) => names.iter().map(Some).collect(),
        };
        for group in rule.api_groups.iter().flatten() {
            for resource in rule.resources.iter().flatten() {
                for verb in &rule.verbs {
                    for name in &names {
                        out.insert(Access {
                            group: group.clone(),
                            resource: resource.clone(),
                            verb: verb.clone(),
                            resource_name: name.cloned(),
                        });
                    }
                }
            }
        }
    }
    out
}

/// What of `needed` the rules `granted` (of the same kind: Role with Role, ClusterRole with ClusterRole) do not
/// allow. A grant restricted by resourceNames covers a need on one of those names; an unrestricted grant covers
/// any; `*` in a grant's groups, resources or verbs covers anything there, and `*/sub` any resource's `sub`.
pub fn not_granted(needed: &[PolicyRule], granted: &[PolicyRule]) -> Vec<Access> {
    let granted = accesses(granted);
    accesses(needed).into_iter().filter(|need| !granted.iter().any(|grant| covers(grant, need))).collect()
}

/// Whether the granted `grant` covers `need` (wildcards, subresource wildcards, resource names).
pub fn covers(grant: &Access, need: &Access) -> bool {
    let group = grant.group == "*" || grant.group == need.group;
    let resource = grant.resource == "*"
        || grant.resource == need.resource
        || grant
            .resource
            .strip_prefix("*/")
            .is_some_and(|sub| need.resource.split_once('/').is_some_and(|(_, need_sub)| need_sub == sub));
    let verb = grant.verb == "*" || grant.verb == need.verb;
    let name = match (&grant.resource_name, &need.resource_name) {
        (None, _) => true,
        (Some(granted), Some(needed)) => granted == needed,
        (Some(_), None) => false,
    };
    group && resource && verb && name
}

#[cfg(test)]
#[path = "rbac_tests.rs"]
mod tests;
