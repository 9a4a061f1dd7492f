//! TEMPORARY STAND-IN, written on branch `shell` only so that `main.rs` compiles against the agreed signatures.
//! The real kube-rs adapter is being written on another branch and replaces this file entirely when merged.
//! Nothing here talks to a cluster: `build_client` always fails, so the binary exits 1 with a clear message.

use crate::cluster::{ApiError, ClusterApi, Preconditions, WatchEvent};
use futures::stream::{self, BoxStream, StreamExt};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use std::path::Path;
use std::time::Duration;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum AdapterError {
    #[error("the Kubernetes adapter is not part of this build yet")]
    NotAvailable,
}

pub fn build_client(
    _config_file: Option<&Path>,
    _api_url: Option<&str>,
    _client_timeout: Duration,
    _namespace: &str,
) -> Result<kube::Client, AdapterError> {
    Err(AdapterError::NotAvailable)
}

#[derive(Clone)]
pub struct KubeCluster {
    _client: kube::Client,
    _namespace: String,
}

impl KubeCluster {
    pub fn new(client: kube::Client, namespace: &str) -> Self {
        KubeCluster { _client: client, _namespace: namespace.to_string() }
    }
}

fn unavailable() -> ApiError {
    ApiError::Unavailable("the Kubernetes adapter is not part of this build yet".to_string())
}

impl ClusterApi for KubeCluster {
    fn watch_statefulsets(&self) -> BoxStream<'static, Result<WatchEvent<StatefulSet>, ApiError>> {
        stream::pending().boxed()
    }

    fn watch_pods(&self) -> BoxStream<'static, Result<WatchEvent<Pod>, ApiError>> {
        stream::pending().boxed()
    }

    async fn delete_pod(&self, _name: &str, _preconditions: &Preconditions) -> Result<(), ApiError> {
        Err(unavailable())
    }

    async fn patch_statefulset_status(&self, _name: &str, _patch: &serde_json::Value) -> Result<StatefulSet, ApiError> {
        Err(unavailable())
    }
}
