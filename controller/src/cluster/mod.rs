//! The cluster port: the only way the controller reads and writes the cluster.
//!
//! Shaped like the Kubernetes API (watch, delete with preconditions, merge-patch of the status subresource), not
//! like our use cases, so that the simulated API server can implement it faithfully. Two implementations: the
//! kube-rs adapter (`kube::adapter`, production) and the simulator's API server. Everything is scoped to the one
//! namespace the operator manages.

pub mod memory;
pub mod zone_tracker;

use futures::stream::BoxStream;
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use rollout_core::Failure;
use std::future::Future;
use thiserror::Error;

/// One step of a watch, with the semantics of kube-runtime's watcher: a (re)list is `Init`, zero or more
/// `InitApply`, then `InitDone` (objects not re-applied since `Init` are gone); afterwards `Apply` and `Delete`.
#[derive(Debug, Clone, PartialEq)]
pub enum WatchEvent<K> {
    Init,
    InitApply(K),
    InitDone,
    Apply(K),
    Delete(K),
}

/// The two kinds of admission webhook configuration (cluster-scoped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WebhookKind {
    Validating,
    Mutating,
}

impl WebhookKind {
    pub fn as_str(self) -> &'static str {
        match self {
            WebhookKind::Validating => "ValidatingWebhookConfiguration",
            WebhookKind::Mutating => "MutatingWebhookConfiguration",
        }
    }
}

/// A Validating- or MutatingWebhookConfiguration.
#[derive(Debug, Clone, PartialEq)]
pub enum WebhookConfiguration {
    Validating(ValidatingWebhookConfiguration),
    Mutating(MutatingWebhookConfiguration),
}

impl WebhookConfiguration {
    pub fn kind(&self) -> WebhookKind {
        match self {
            WebhookConfiguration::Validating(_) => WebhookKind::Validating,
            WebhookConfiguration::Mutating(_) => WebhookKind::Mutating,
        }
    }

    pub fn metadata(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        match self {
            WebhookConfiguration::Validating(c) => &c.metadata,
            WebhookConfiguration::Mutating(c) => &c.metadata,
        }
    }

    /// `(webhook name, clientConfig.caBundle)` of every entry of `webhooks[]`.
    pub fn ca_bundles(&self) -> Vec<(String, Option<Vec<u8>>)> {
        match self {
            WebhookConfiguration::Validating(c) => c
                .webhooks
                .iter()
                .flatten()
                .map(|w| (w.name.clone(), w.client_config.ca_bundle.as_ref().map(|b| b.0.clone())))
                .collect(),
            WebhookConfiguration::Mutating(c) => c
                .webhooks
                .iter()
                .flatten()
                .map(|w| (w.name.clone(), w.client_config.ca_bundle.as_ref().map(|b| b.0.clone())))
                .collect(),
        }
    }
}

/// Errors from the API, classified by what the caller should do about them.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ApiError {
    /// A precondition (uid, resourceVersion) failed: our view was stale. Re-plan on fresher data; never retry blindly.
    #[error("conflict: {0}")]
    Conflict(String),
    #[error("not found: {0}")]
    NotFound(String),
    /// RBAC refused the request (403, reason `Forbidden`): the permission is not granted. Retrying helps only once
    /// it is; an optional feature turns itself off.
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// The API server judged the request and said no: an admission webhook's denial (whatever its code, 403 by
    /// default) or a validation error. Retrying the same request will not help.
    #[error("rejected ({code}): {message}")]
    Rejected { code: u16, message: String },
    /// The API could not be reached or did not answer in time; retry with backoff.
    #[error("API unavailable: {0}")]
    Unavailable(String),
    /// The request could not be built, so it was never sent; retrying the same request will not help.
    #[error("invalid request, not sent: {0}")]
    InvalidRequest(String),
}

impl ApiError {
    /// Short, stable label for metrics and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            ApiError::Conflict(_) => "conflict",
            ApiError::NotFound(_) => "not_found",
            ApiError::Forbidden(_) => "forbidden",
            ApiError::Rejected { .. } => "rejected",
            ApiError::Unavailable(_) => "unavailable",
            ApiError::InvalidRequest(_) => "invalid_request",
        }
    }
}

/// The core's classification of an API answer, made here once for every step machine: RBAC's refusal (only it turns
/// a feature off), the API server's judgement (a webhook's denial or a validation error), and the rest by what they
/// say of the outcome.
impl From<&ApiError> for Failure {
    fn from(error: &ApiError) -> Failure {
        let message = error.to_string();
        match error {
            ApiError::Conflict(_) => Failure::Conflict(message),
            ApiError::NotFound(_) => Failure::NotFound(message),
            ApiError::Forbidden(_) => Failure::Forbidden(message),
            ApiError::Rejected { .. } => Failure::Denied(message),
            ApiError::Unavailable(_) => Failure::Unavailable(message),
            ApiError::InvalidRequest(_) => Failure::Failed(message),
        }
    }
}

/// Conditions the API server checks before deleting.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preconditions {
    pub uid: Option<String>,
    pub resource_version: Option<String>,
}

/// The cluster port, split by role: each consumer asks for the roles it uses (the webhooks for live reads, the
/// zone tracker and pod annotations, the budget watch for disruption budgets, the TLS manager for the certificate
/// store, ...), and an implementation that serves only some
/// consumers (`review`'s dump) implements only their roles. [`ClusterApi`] is all of them, what the controller's
/// wiring and the simulator's client provide.
/// What the reconcile loop watches and writes: StatefulSets and pods.
pub trait RolloutApi: Clone + Send + Sync + 'static {
    /// Watches StatefulSets that carry the `rollout-group` label. The stream never ends by itself; transient errors
    /// are yielded as `Err` items and the watch resumes (relisting when needed).
    fn watch_statefulsets(&self) -> BoxStream<'static, Result<WatchEvent<StatefulSet>, ApiError>>;

    /// Watches all pods of the namespace, with the same semantics.
    fn watch_pods(&self) -> BoxStream<'static, Result<WatchEvent<Pod>, ApiError>>;

    /// Deletes a pod; fails with [`ApiError::Conflict`] if a precondition does not hold.
    fn delete_pod(
        &self,
        name: &str,
        preconditions: &Preconditions,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;

    /// Replaces a StatefulSet's `status` subresource (an UPDATE: `PUT .../statefulsets/{name}/status`, the verb every
    /// real deployment grants). `metadata.resourceVersion` of `statefulset` is a precondition: the API answers
    /// [`ApiError::Conflict`] if the object has moved on. Only the status is changed.
    fn replace_statefulset_status(
        &self,
        statefulset: &StatefulSet,
    ) -> impl Future<Output = Result<StatefulSet, ApiError>> + Send;
}

/// Live (uncached) reads: a decision about safety is never taken on a cache (the webhooks, the controller's
/// checks of its own writes).
pub trait LiveReads: Clone + Send + Sync + 'static {
    /// Reads a StatefulSet of the namespace (live, not from a cache); `None` when it does not exist.
    fn get_statefulset(&self, name: &str) -> impl Future<Output = Result<Option<StatefulSet>, ApiError>> + Send;

    fn get_deployment(&self, name: &str) -> impl Future<Output = Result<Option<Deployment>, ApiError>> + Send;

    fn get_replicaset(&self, name: &str) -> impl Future<Output = Result<Option<ReplicaSet>, ApiError>> + Send;

    /// Lists StatefulSets of the namespace matching a label selector (e.g. `rollout-group=ingester`).
    fn list_statefulsets(
        &self,
        label_selector: &str,
    ) -> impl Future<Output = Result<Vec<StatefulSet>, ApiError>> + Send;

    /// Lists pods of the namespace matching a label selector (`""` lists all).
    fn list_pods(&self, label_selector: &str) -> impl Future<Output = Result<Vec<Pod>, ApiError>> + Send;

    /// Reads a pod of the namespace (live); `None` when it does not exist.
    fn get_pod(&self, name: &str) -> impl Future<Output = Result<Option<Pod>, ApiError>> + Send;
}

/// Annotations of pods: the eviction intents of ZoneAwarePodDisruptionBudget decisions and the
/// `grafana.com/ready-time` stamps (`patch` on pods; deployments that do not grant it lose only these).
pub trait PodAnnotations: Clone + Send + Sync + 'static {
    /// Sets (`Some`) or removes (`None`) annotations of a pod, keeping the others (a merge patch). `uid` is a
    /// precondition: [`ApiError::Conflict`] when the pod of that name is another one, [`ApiError::NotFound`] when
    /// there is none.
    fn patch_pod_annotations(
        &self,
        name: &str,
        uid: &str,
        changes: &std::collections::BTreeMap<String, Option<String>>,
    ) -> impl Future<Output = Result<Pod, ApiError>> + Send;
}

/// Annotations of a StatefulSet, set and removed (eviction intents where pods cannot be patched).
pub trait StatefulSetAnnotations: Clone + Send + Sync + 'static {
    /// Sets (`Some`) or removes (`None`) annotations of a StatefulSet, keeping the others (a merge patch, the
    /// `patch` verb on statefulsets); [`ApiError::NotFound`] when there is none.
    fn merge_statefulset_annotations(
        &self,
        name: &str,
        changes: &std::collections::BTreeMap<String, Option<String>>,
    ) -> impl Future<Output = Result<StatefulSet, ApiError>> + Send;
}

/// The namespace's ZoneAwarePodDisruptionBudgets (a custom resource, read as generic JSON: the core parses it).
pub trait DisruptionBudgets: Clone + Send + Sync + 'static {
    /// Watches them, with the same semantics as the other watches. A missing CRD yields
    /// [`ApiError::NotFound`], missing permissions a 403 [`ApiError::Rejected`]; the watch retries either way.
    fn watch_disruption_budgets(&self) -> BoxStream<'static, Result<WatchEvent<serde_json::Value>, ApiError>>;
}

/// Where downscales are recorded: the zone tracker's ConfigMap (compare-and-swap), or without a zone tracker the
/// StatefulSets' `grafana.com/last-downscale` annotation.
pub trait ZoneTrackerStore: Clone + Send + Sync + 'static {
    /// Reads a ConfigMap of the namespace; `None` when it does not exist.
    fn get_config_map(&self, name: &str) -> impl Future<Output = Result<Option<ConfigMap>, ApiError>> + Send;

    /// Creates a ConfigMap; [`ApiError::Conflict`] when one of that name already exists.
    fn create_config_map(&self, config_map: &ConfigMap) -> impl Future<Output = Result<ConfigMap, ApiError>> + Send;

    /// Replaces a ConfigMap (HTTP PUT). A `metadata.resourceVersion` is a precondition: the API answers
    /// [`ApiError::Conflict`] if the object has moved on, so this is a compare-and-swap.
    fn replace_config_map(&self, config_map: &ConfigMap) -> impl Future<Output = Result<ConfigMap, ApiError>> + Send;

    /// Sets `metadata.annotations` of a StatefulSet (a strategic merge patch: other annotations are kept);
    /// `resource_version` is a precondition as above.
    fn patch_statefulset_annotations(
        &self,
        name: &str,
        resource_version: &str,
        annotations: &std::collections::BTreeMap<String, String>,
    ) -> impl Future<Output = Result<StatefulSet, ApiError>> + Send;
}

/// Replica changes and mirror reference resources (reference section 3).
pub trait ScaleTargets: Clone + Send + Sync + 'static {
    /// Sets `spec.replicas` of a StatefulSet, and the given `metadata.annotations` in the same write, with the patch
    /// `{"spec":{"replicas":N},"metadata":{"annotations":{...}}}`; `resource_version` (when non-empty) is a
    /// precondition: [`ApiError::Conflict`] if the StatefulSet has moved on since it was read.
    fn patch_statefulset_replicas(
        &self,
        name: &str,
        replicas: u32,
        resource_version: &str,
        annotations: &std::collections::BTreeMap<String, String>,
    ) -> impl Future<Output = Result<StatefulSet, ApiError>> + Send;

    /// API discovery: every resource of `group` (all its served versions, preferred version first) whose kind is
    /// `kind`. An unknown group yields an empty list.
    fn discover_resources(
        &self,
        group: &str,
        kind: &str,
    ) -> impl Future<Output = Result<Vec<ApiResourceRef>, ApiError>> + Send;

    /// GET the `scale` subresource of `resource`/`name` in the namespace, as the API returns it (an
    /// `autoscaling/v1` Scale; `spec.replicas` may be absent).
    fn get_scale(
        &self,
        resource: &ApiResourceRef,
        name: &str,
    ) -> impl Future<Output = Result<serde_json::Value, ApiError>> + Send;

    /// Applies a JSON merge patch to the `status` subresource of `resource`/`name` (mirror write-back).
    fn patch_resource_status(
        &self,
        resource: &ApiResourceRef,
        name: &str,
        patch: &serde_json::Value,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
}

/// The webhook certificate's Secret and the webhook configurations it is injected into.
pub trait CertificateStore: Clone + Send + Sync + 'static {
    fn get_secret(&self, name: &str) -> impl Future<Output = Result<Option<Secret>, ApiError>> + Send;

    /// Creates a Secret; [`ApiError::Conflict`] when one of that name already exists.
    fn create_secret(&self, secret: &Secret) -> impl Future<Output = Result<Secret, ApiError>> + Send;

    /// Replaces a Secret; a `metadata.resourceVersion` is a precondition ([`ApiError::Conflict`] when it moved).
    fn replace_secret(&self, secret: &Secret) -> impl Future<Output = Result<Secret, ApiError>> + Send;

    /// Watches the (cluster-scoped) webhook configurations of `kind` matching a label selector, with the same
    /// semantics as the other watches.
    fn watch_webhook_configurations(
        &self,
        kind: WebhookKind,
        label_selector: &str,
    ) -> BoxStream<'static, Result<WatchEvent<WebhookConfiguration>, ApiError>>;

    /// Applies a JSON merge patch to a webhook configuration; a `metadata.resourceVersion` in the patch is a
    /// precondition ([`ApiError::Conflict`] when it moved).
    fn patch_webhook_configuration(
        &self,
        kind: WebhookKind,
        name: &str,
        patch: &serde_json::Value,
    ) -> impl Future<Output = Result<WebhookConfiguration, ApiError>> + Send;
}

/// Kubernetes Events (`events.k8s.io/v1`) in the managed namespace: written only by the Event recorder
/// (`ops::events`), off the rollout's write path, and optional (`-events.enabled`). Not part of [`ClusterApi`]:
/// nothing that decides or acts on rollouts may depend on it.
pub trait EventsApi: Clone + Send + Sync + 'static {
    /// Creates an Event; [`ApiError::Conflict`] when one of that name already exists.
    fn create_event(
        &self,
        event: &k8s_openapi::api::events::v1::Event,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;

    /// Applies a JSON merge patch to an Event (its `series`); [`ApiError::NotFound`] once the Event has expired.
    fn patch_event(&self, name: &str, patch: &serde_json::Value) -> impl Future<Output = Result<(), ApiError>> + Send;
}

/// The leader election's Lease (`coordination.k8s.io/v1`) in the managed namespace: used only by the election
/// loop (`ops::election`), and only with `-leader-election.enabled`. Not part of [`ClusterApi`]: with election off
/// nothing needs it, and nothing that decides or acts on rollouts may depend on it.
pub trait Leases: Clone + Send + Sync + 'static {
    /// Reads a Lease of the namespace (live); `None` when it does not exist.
    fn get_lease(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<k8s_openapi::api::coordination::v1::Lease>, ApiError>> + Send;

    /// Creates a Lease; [`ApiError::Conflict`] when one of that name already exists.
    fn create_lease(
        &self,
        lease: &k8s_openapi::api::coordination::v1::Lease,
    ) -> impl Future<Output = Result<k8s_openapi::api::coordination::v1::Lease, ApiError>> + Send;

    /// Replaces a Lease (HTTP PUT); its `metadata.resourceVersion` is a precondition ([`ApiError::Conflict`] when
    /// the Lease has moved on), so this is a compare-and-swap.
    fn replace_lease(
        &self,
        lease: &k8s_openapi::api::coordination::v1::Lease,
    ) -> impl Future<Output = Result<k8s_openapi::api::coordination::v1::Lease, ApiError>> + Send;
}

/// Every role of the port: read and write access to the managed namespace.
pub trait ClusterApi:
    RolloutApi
    + LiveReads
    + ZoneTrackerStore
    + ScaleTargets
    + CertificateStore
    + PodAnnotations
    + StatefulSetAnnotations
    + DisruptionBudgets
{
}

impl<T> ClusterApi for T where
    T: RolloutApi
        + LiveReads
        + ZoneTrackerStore
        + ScaleTargets
        + CertificateStore
        + PodAnnotations
        + StatefulSetAnnotations
        + DisruptionBudgets
{
}

/// One REST resource of an API group version, as API discovery reports it (used for mirror reference resources).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ApiResourceRef {
    /// API group; `""` is the core group.
    pub group: String,
    pub version: String,
    pub kind: String,
    /// Plural resource name (URL segment), e.g. `replicatemplates`.
    pub plural: String,
}

impl ApiResourceRef {
    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }
}
