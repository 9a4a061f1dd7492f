//! The cluster port: the only way the controller reads and writes the cluster.
//!
//! Shaped like the Kubernetes API (watch, delete with preconditions, merge-patch of the status subresource), not
//! like our use cases, so that the simulated API server can implement it faithfully. Two implementations: the
//! kube-rs adapter (`kube_adapter`, production) and the simulator's API server. Everything is scoped to the one
//! namespace the operator manages.

use futures::stream::BoxStream;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
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

/// Errors from the API, classified by what the caller should do about them.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ApiError {
    /// A precondition (uid, resourceVersion) failed: our view was stale. Re-plan on fresher data; never retry blindly.
    #[error("conflict: {0}")]
    Conflict(String),
    #[error("not found: {0}")]
    NotFound(String),
    /// The request was rejected as invalid or forbidden; retrying the same request will not help.
    #[error("rejected ({code}): {message}")]
    Rejected { code: u16, message: String },
    /// The API could not be reached or did not answer in time; retry with backoff.
    #[error("API unavailable: {0}")]
    Unavailable(String),
}

impl ApiError {
    /// Short, stable label for metrics and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            ApiError::Conflict(_) => "conflict",
            ApiError::NotFound(_) => "not_found",
            ApiError::Rejected { .. } => "rejected",
            ApiError::Unavailable(_) => "unavailable",
        }
    }
}

/// Conditions the API server checks before deleting.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preconditions {
    pub uid: Option<String>,
    pub resource_version: Option<String>,
}

/// Read and write access to the managed namespace.
pub trait ClusterApi: Clone + Send + Sync + 'static {
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

    /// Applies a JSON merge patch (RFC 7386) to a StatefulSet's `status` subresource. A `metadata.resourceVersion`
    /// in the patch is a precondition: the API answers [`ApiError::Conflict`] if the object has moved on.
    fn patch_statefulset_status(
        &self,
        name: &str,
        patch: &serde_json::Value,
    ) -> impl Future<Output = Result<StatefulSet, ApiError>> + Send;

    /// Reads a ConfigMap of the namespace; `None` when it does not exist.
    fn get_config_map(&self, name: &str) -> impl Future<Output = Result<Option<ConfigMap>, ApiError>> + Send;

    /// Creates a ConfigMap; [`ApiError::Conflict`] when one of that name already exists.
    fn create_config_map(&self, config_map: &ConfigMap) -> impl Future<Output = Result<ConfigMap, ApiError>> + Send;

    /// Replaces a ConfigMap (HTTP PUT). A `metadata.resourceVersion` is a precondition: the API answers
    /// [`ApiError::Conflict`] if the object has moved on, so this is a compare-and-swap.
    fn replace_config_map(&self, config_map: &ConfigMap) -> impl Future<Output = Result<ConfigMap, ApiError>> + Send;
}
