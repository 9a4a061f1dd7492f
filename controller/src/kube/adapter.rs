//! The production implementation of the cluster port ([`ClusterApi`]) on kube-rs.
//!
//! This module owns: building the Kubernetes client (kubeconfig or in-cluster config, API URL override, client
//! timeout, the `X-Cluster: <namespace>` header on every request), translating the port's calls into Kubernetes API
//! requests (watches via kube-runtime's watcher with its default backoff, pod deletion with preconditions, merge
//! patches of the StatefulSet status subresource), classifying API failures into [`ApiError`], and declaring every
//! API permission it uses ([`RBAC_REQUIREMENTS`]).
//!
//! It must not make decisions: it never retries writes, never re-plans, never filters or reorders watch events and
//! never interprets objects. Anything that depends on what an object means belongs to `rollout-core`; when to act
//! belongs to the reconcile loop. Not built under `--cfg madsim` (kube's client cannot run inside the simulator),
//! where the simulated API server implements the port instead.

use crate::cluster::{
    ApiError, ApiResourceRef, CertificateStore, DisruptionBudgets, EventsApi, Leases, LiveReads, PodAnnotations,
    Preconditions, RolloutApi, ScaleTargets, StatefulSetAnnotations, WatchEvent, WebhookConfiguration, WebhookKind,
    ZoneTrackerStore,
};
use crate::kube::layers::{ApiMetricsLayer, ApiServerLayer, RateLimitLayer, RateLimits};
use crate::kube::repeats;
use crate::ops::metrics::KubeClientMetrics;
use futures::StreamExt;
use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue, Request};
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::client::{Body, ClientBuilder};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Config};
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::task::{Context, Poll};
use std::time::Duration;
use thiserror::Error;
use tower::{Layer, Service};

/// Label that marks a StatefulSet as part of a rollout group; only those are watched.
const ROLLOUT_GROUP_LABEL: &str = "rollout-group";

/// Header that carries the cluster validation label (reference 7.3, client side).
pub const CLUSTER_HEADER: &str = "X-Cluster";

/// Why the Kubernetes client could not be built. Each message says what was wrong and what to do about it.
#[derive(Debug, Error)]
pub enum AdapterError {
    #[error(
        "cannot load kubeconfig {}: {source}; check that -kubernetes.config-file names a readable, valid \
         kubeconfig with a current context",
        path.display()
    )]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("invalid -kubernetes.api-url {url:?}: {source}; give the API server URL, e.g. https://10.0.0.1:6443")]
    ApiUrl {
        url: String,
        #[source]
        source: http::uri::InvalidUri,
    },
    #[error(
        "cannot load in-cluster Kubernetes config ({source}); inside a pod, check that the service account token \
         is mounted and KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT are set; outside a cluster, set \
         -kubernetes.config-file (and optionally -kubernetes.api-url)"
    )]
    InCluster {
        #[source]
        source: kube::config::InClusterError,
    },
    #[error(
        "-kubernetes.namespace {namespace:?} cannot be sent as the {CLUSTER_HEADER} header: {source}; use a valid \
         namespace name"
    )]
    ClusterHeader {
        namespace: String,
        #[source]
        source: http::header::InvalidHeaderValue,
    },
    #[error("cannot build the Kubernetes API client: {source}; check the TLS and credential settings of the config")]
    Client {
        #[source]
        source: kube::Error,
    },
    #[error(
        "cannot use kubeconfig context {context:?}: {source}; `kubectl config get-contexts` lists the contexts of \
         the kubeconfig (-kubernetes.config-file, else KUBECONFIG or ~/.kube/config)"
    )]
    Context {
        context: String,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error(
        "cannot find a Kubernetes configuration ({source}); set -kubernetes.config-file or KUBECONFIG, or run inside \
         a cluster"
    )]
    Infer {
        #[source]
        source: kube::config::InferConfigError,
    },
}

/// Builds the Kubernetes client: from the kubeconfig at `config_file` if given, else from the in-cluster
/// environment; `api_url` replaces the config's server URL. `client_timeout` becomes the read and write timeout
/// (see [`apply_client_timeout`]). Layers, innermost first: the API server's URL in transport errors; then, as in
/// the reference, request metrics, the per-API-group rate limiter (`limits`), `X-Cluster: <namespace>` on every
/// request.
pub async fn build_client(
    config_file: Option<&Path>,
    api_url: Option<&str>,
    client_timeout: Duration,
    namespace: &str,
    limits: RateLimits,
    metrics: KubeClientMetrics,
) -> Result<Client, AdapterError> {
    let config = load_config(config_file, api_url, client_timeout).await?;
    client_from_config(config, namespace, limits, metrics)
}

/// The Kubernetes configuration of the command-line tools that read a cluster (`status`): the kubeconfig at
/// `config_file` if given, else whatever kubectl would use (`KUBECONFIG`, `~/.kube/config`, or the in-cluster
/// environment); `context` picks a context of the kubeconfig instead of its current one. `api_url` and
/// `client_timeout` as for [`build_client`]. Its `default_namespace` is the context's namespace (`default` when the
/// context has none).
pub async fn cli_config(
    config_file: Option<&Path>,
    api_url: Option<&str>,
    client_timeout: Duration,
    context: Option<&str>,
) -> Result<Config, AdapterError> {
    let options = KubeConfigOptions { context: context.map(str::to_string), ..KubeConfigOptions::default() };
    let context_error = |source| AdapterError::Context { context: context.unwrap_or_default().to_string(), source };
    let mut config = match (config_file, context) {
        (Some(_), None) => return load_config(config_file, api_url, client_timeout).await,
        (Some(path), Some(_)) => {
            let kubeconfig = Kubeconfig::read_from(path)
                .map_err(|source| AdapterError::Kubeconfig { path: path.to_path_buf(), source })?;
            Config::from_custom_kubeconfig(kubeconfig, &options).await.map_err(context_error)?
        }
        (None, Some(_)) => Config::from_kubeconfig(&options).await.map_err(context_error)?,
        (None, None) => Config::infer().await.map_err(|source| AdapterError::Infer { source })?,
    };
    if let Some(url) = api_url.filter(|url| !url.is_empty()) {
        config.cluster_url = url.parse().map_err(|source| AdapterError::ApiUrl { url: url.to_string(), source })?;
    }
    apply_client_timeout(&mut config, client_timeout);
    config.default_retry = false;
    Ok(config)
}

/// The client of the command-line tools, over a configuration from [`cli_config`], with [`build_client`]'s layers.
pub fn cli_client(
    config: Config,
    namespace: &str,
    limits: RateLimits,
    metrics: KubeClientMetrics,
) -> Result<Client, AdapterError> {
    client_from_config(config, namespace, limits, metrics)
}

/// The client over `config`: the API server's URL in transport errors, request metrics, the per-API-group rate
/// limiter (`limits`), `X-Cluster: <namespace>` on every request.
fn client_from_config(
    config: Config,
    namespace: &str,
    limits: RateLimits,
    metrics: KubeClientMetrics,
) -> Result<Client, AdapterError> {
    let server = ApiServerLayer::new(config.cluster_url.to_string());
    let builder = ClientBuilder::try_from(config).map_err(|source| AdapterError::Client { source })?;
    let builder = builder
        .with_layer(&server)
        .with_layer(&ApiMetricsLayer::new(metrics.clone()))
        .with_layer(&RateLimitLayer::new(limits, metrics));
    Ok(with_cluster_header(builder, namespace)?.build())
}

/// Builds a client over any HTTP service with the layers [`build_client`] adds. Tests use it with a mock API
/// server; it shares the layering code with [`build_client`].
pub fn client_with_layers<S>(service: S, namespace: &str) -> Result<Client, AdapterError>
where
    S: Service<Request<Body>, Response = http::Response<Body>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<tower::BoxError>,
{
    let unlimited = RateLimits { qps: 0.0, burst: 0, max_wait: Duration::ZERO };
    client_with_layers_and(service, namespace, unlimited, KubeClientMetrics::default())
}

/// [`client_with_layers`] with rate limits and metrics of the caller's.
pub fn client_with_layers_and<S>(
    service: S,
    namespace: &str,
    limits: RateLimits,
    metrics: KubeClientMetrics,
) -> Result<Client, AdapterError>
where
    S: Service<Request<Body>, Response = http::Response<Body>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<tower::BoxError>,
{
    let builder = ClientBuilder::new(service, namespace)
        .with_layer(&ApiMetricsLayer::new(metrics.clone()))
        .with_layer(&RateLimitLayer::new(limits, metrics));
    Ok(with_cluster_header(builder, namespace)?.build())
}

fn with_cluster_header<S>(
    builder: ClientBuilder<S>,
    namespace: &str,
) -> Result<ClientBuilder<ClusterHeader<S>>, AdapterError> {
    let layer = ClusterHeaderLayer::new(namespace)?;
    Ok(builder.with_layer(&layer))
}

async fn load_config(
    config_file: Option<&Path>,
    api_url: Option<&str>,
    client_timeout: Duration,
) -> Result<Config, AdapterError> {
    let mut config = match config_file {
        Some(path) => {
            let kubeconfig_error = |source| AdapterError::Kubeconfig { path: path.to_path_buf(), source };
            let kubeconfig = Kubeconfig::read_from(path).map_err(kubeconfig_error)?;
            Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await.map_err(kubeconfig_error)?
        }
        None => Config::incluster().map_err(|source| AdapterError::InCluster { source })?,
    };
    if let Some(url) = api_url.filter(|url| !url.is_empty()) {
        config.cluster_url = url.parse().map_err(|source| AdapterError::ApiUrl { url: url.to_string(), source })?;
    }
    apply_client_timeout(&mut config, client_timeout);
    // kube would retry 429/503/504 answers up to 15 times with growing pauses, holding a write planned on data that
    // ages meanwhile. Fail fast instead: the reconcile loop requeues with backoff and re-plans on fresh data, and
    // watches have their own backoff.
    config.default_retry = false;
    Ok(config)
}

/// Applies `-kubernetes.client-timeout`. Neither a kubeconfig nor the in-cluster environment can carry a timeout,
/// so the values present are kube's library defaults (no read timeout, a 295 s write timeout): the flag replaces
/// them, keeping only a read timeout someone set explicitly. kube's read timeout bounds each wait for response bytes
/// rather than the whole exchange; a quiet watch that hits it simply ends and the watcher resumes it from the last
/// resourceVersion. Resetting the read timer on writes keeps a pooled connection's idle time from counting.
fn apply_client_timeout(config: &mut Config, client_timeout: Duration) {
    // Zero means "no timeout", as in Go's http.Client.
    if client_timeout.is_zero() {
        return;
    }
    config.read_timeout.get_or_insert(client_timeout);
    config.write_timeout = Some(client_timeout);
    config.reset_reader_on_write = true;
}

/// Tower layer that sets `X-Cluster: <namespace>` on every request (replacing any value already there, so exactly
/// one is sent).
#[derive(Debug, Clone)]
pub struct ClusterHeaderLayer {
    value: HeaderValue,
}

impl ClusterHeaderLayer {
    pub fn new(namespace: &str) -> Result<Self, AdapterError> {
        let value = HeaderValue::from_str(namespace)
            .map_err(|source| AdapterError::ClusterHeader { namespace: namespace.to_string(), source })?;
        Ok(Self { value })
    }
}

impl<S> Layer<S> for ClusterHeaderLayer {
    type Service = ClusterHeader<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ClusterHeader { inner, value: self.value.clone() }
    }
}

/// The service made by [`ClusterHeaderLayer`].
#[derive(Debug, Clone)]
pub struct ClusterHeader<S> {
    inner: S,
    value: HeaderValue,
}

impl<S, B> Service<Request<B>> for ClusterHeader<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        request.headers_mut().insert(HeaderName::from_static("x-cluster"), self.value.clone());
        self.inner.call(request)
    }
}

/// The cluster port on a kube [`Client`], scoped to one namespace.
#[derive(Clone)]
pub struct KubeCluster {
    namespace: String,
    pods: Api<Pod>,
    statefulsets: Api<StatefulSet>,
    config_maps: Api<ConfigMap>,
    /// For discovery and the dynamic requests of mirror scaling.
    client: Client,
    deployments: Api<Deployment>,
    replicasets: Api<ReplicaSet>,
    secrets: Api<Secret>,
    validating: Api<ValidatingWebhookConfiguration>,
    mutating: Api<MutatingWebhookConfiguration>,
    budgets: Api<kube::core::DynamicObject>,
    events: Api<k8s_openapi::api::events::v1::Event>,
    leases: Api<k8s_openapi::api::coordination::v1::Lease>,
}

/// The ZoneAwarePodDisruptionBudget resource, read as generic objects.
fn budget_resource() -> kube::core::ApiResource {
    use rollout_core::zpdb::config::{GROUP, KIND, PLURAL, VERSION};
    kube::core::ApiResource {
        group: GROUP.to_string(),
        version: VERSION.to_string(),
        api_version: format!("{GROUP}/{VERSION}"),
        kind: KIND.to_string(),
        plural: PLURAL.to_string(),
    }
}

impl KubeCluster {
    pub fn new(client: Client, namespace: impl Into<String>) -> Self {
        let namespace = namespace.into();
        Self {
            pods: Api::namespaced(client.clone(), &namespace),
            config_maps: Api::namespaced(client.clone(), &namespace),
            deployments: Api::namespaced(client.clone(), &namespace),
            replicasets: Api::namespaced(client.clone(), &namespace),
            secrets: Api::namespaced(client.clone(), &namespace),
            validating: Api::all(client.clone()),
            mutating: Api::all(client.clone()),
            budgets: Api::namespaced_with(client.clone(), &namespace, &budget_resource()),
            events: Api::namespaced(client.clone(), &namespace),
            leases: Api::namespaced(client.clone(), &namespace),
            statefulsets: Api::namespaced(client.clone(), &namespace),
            client,
            namespace,
        }
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }
}

impl RolloutApi for KubeCluster {
    fn watch_statefulsets(&self) -> BoxStream<'static, Result<WatchEvent<StatefulSet>, ApiError>> {
        let what = format!("watch statefulsets with label {ROLLOUT_GROUP_LABEL} in namespace {}", self.namespace);
        watch(self.statefulsets.clone(), watcher::Config::default().labels(ROLLOUT_GROUP_LABEL), what)
    }

    fn watch_pods(&self) -> BoxStream<'static, Result<WatchEvent<Pod>, ApiError>> {
        let what = format!("watch pods in namespace {}", self.namespace);
        watch(self.pods.clone(), watcher::Config::default(), what)
    }

    async fn delete_pod(&self, name: &str, preconditions: &Preconditions) -> Result<(), ApiError> {
        let params = DeleteParams { preconditions: to_kube_preconditions(preconditions), ..DeleteParams::default() };
        // Success is either the pod (now terminating) or a Status; both mean the API accepted the deletion.
        self.pods
            .delete(name, &params)
            .await
            .map(|_| ())
            .map_err(|err| classify(&err, &format!("delete pod {}/{name}", self.namespace)))
    }

    async fn replace_statefulset_status(&self, statefulset: &StatefulSet) -> Result<StatefulSet, ApiError> {
        let name = statefulset.metadata.name.clone().unwrap_or_default();
        self.statefulsets
            .replace_status(&name, &PostParams::default(), statefulset)
            .await
            .map_err(|err| classify(&err, &format!("update status of statefulset {}/{name}", self.namespace)))
    }
}

impl LiveReads for KubeCluster {
    async fn get_statefulset(&self, name: &str) -> Result<Option<StatefulSet>, ApiError> {
        self.statefulsets
            .get_opt(name)
            .await
            .map_err(|err| classify(&err, &format!("get statefulset {}/{name}", self.namespace)))
    }

    async fn get_deployment(&self, name: &str) -> Result<Option<Deployment>, ApiError> {
        self.deployments
            .get_opt(name)
            .await
            .map_err(|err| classify(&err, &format!("get deployment {}/{name}", self.namespace)))
    }

    async fn get_replicaset(&self, name: &str) -> Result<Option<ReplicaSet>, ApiError> {
        self.replicasets
            .get_opt(name)
            .await
            .map_err(|err| classify(&err, &format!("get replicaset {}/{name}", self.namespace)))
    }

    async fn list_statefulsets(&self, label_selector: &str) -> Result<Vec<StatefulSet>, ApiError> {
        list_all(&self.statefulsets, label_selector)
            .await
            .map_err(|err| classify(&err, &format!("list statefulsets {label_selector:?} in {}", self.namespace)))
    }

    async fn list_pods(&self, label_selector: &str) -> Result<Vec<Pod>, ApiError> {
        list_all(&self.pods, label_selector)
            .await
            .map_err(|err| classify(&err, &format!("list pods {label_selector:?} in {}", self.namespace)))
    }

    async fn get_pod(&self, name: &str) -> Result<Option<Pod>, ApiError> {
        self.pods.get_opt(name).await.map_err(|err| classify(&err, &format!("get pod {}/{name}", self.namespace)))
    }
}

impl PodAnnotations for KubeCluster {
    async fn patch_pod_annotations(
        &self,
        name: &str,
        uid: &str,
        changes: &BTreeMap<String, Option<String>>,
    ) -> Result<Pod, ApiError> {
        // A merge patch: `null` removes an annotation; `metadata.uid` makes it fail (409) on another pod of the name.
        let mut patch = serde_json::json!({ "metadata": { "annotations": changes } });
        if !uid.is_empty() {
            patch["metadata"]["uid"] = serde_json::json!(uid);
        }
        self.pods
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|err| classify(&err, &format!("patch annotations of pod {}/{name}", self.namespace)))
    }
}

impl StatefulSetAnnotations for KubeCluster {
    async fn merge_statefulset_annotations(
        &self,
        name: &str,
        changes: &BTreeMap<String, Option<String>>,
    ) -> Result<StatefulSet, ApiError> {
        // A merge patch: `null` removes an annotation.
        let patch = serde_json::json!({ "metadata": { "annotations": changes } });
        self.statefulsets
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|err| classify(&err, &format!("patch annotations of statefulset {}/{name}", self.namespace)))
    }
}

impl DisruptionBudgets for KubeCluster {
    fn watch_disruption_budgets(&self) -> BoxStream<'static, Result<WatchEvent<serde_json::Value>, ApiError>> {
        let what = format!("watch zoneawarepoddisruptionbudgets in namespace {}", self.namespace);
        let types = kube::core::TypeMeta { api_version: budget_resource().api_version, kind: budget_resource().kind };
        watch(self.budgets.clone(), watcher::Config::default(), what)
            .map(move |item| {
                item.map(|event| {
                    map_event(event, |mut object: kube::core::DynamicObject| {
                        // List items may come without their type; the object as a GET would return it.
                        object.types.get_or_insert_with(|| types.clone());
                        serde_json::to_value(&object).unwrap_or_default()
                    })
                })
            })
            .boxed()
    }
}

impl ZoneTrackerStore for KubeCluster {
    async fn get_config_map(&self, name: &str) -> Result<Option<ConfigMap>, ApiError> {
        self.config_maps
            .get_opt(name)
            .await
            .map_err(|err| classify(&err, &format!("get configmap {}/{name}", self.namespace)))
    }

    async fn create_config_map(&self, config_map: &ConfigMap) -> Result<ConfigMap, ApiError> {
        let name = config_map.metadata.name.as_deref().unwrap_or_default();
        self.config_maps
            .create(&PostParams::default(), config_map)
            .await
            .map_err(|err| classify(&err, &format!("create configmap {}/{name}", self.namespace)))
    }

    async fn replace_config_map(&self, config_map: &ConfigMap) -> Result<ConfigMap, ApiError> {
        let name = config_map.metadata.name.as_deref().unwrap_or_default();
        self.config_maps
            .replace(name, &PostParams::default(), config_map)
            .await
            .map_err(|err| classify(&err, &format!("replace configmap {}/{name}", self.namespace)))
    }

    async fn patch_statefulset_annotations(
        &self,
        name: &str,
        resource_version: &str,
        annotations: &BTreeMap<String, String>,
    ) -> Result<StatefulSet, ApiError> {
        let mut patch = serde_json::json!({ "metadata": { "annotations": annotations } });
        if !resource_version.is_empty() {
            patch["metadata"]["resourceVersion"] = serde_json::json!(resource_version);
        }
        self.statefulsets
            .patch(name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
            .map_err(|err| classify(&err, &format!("patch annotations of statefulset {}/{name}", self.namespace)))
    }
}

impl ScaleTargets for KubeCluster {
    async fn patch_statefulset_replicas(
        &self,
        name: &str,
        replicas: u32,
        resource_version: &str,
        annotations: &BTreeMap<String, String>,
    ) -> Result<StatefulSet, ApiError> {
        // The reference sends a strategic-merge patch; the resourceVersion makes it conditional on what we planned
        // from, so a decision taken on a stale view fails with a conflict.
        let mut patch = serde_json::json!({ "spec": { "replicas": replicas } });
        if !resource_version.is_empty() {
            patch["metadata"] = serde_json::json!({ "resourceVersion": resource_version });
        }
        if !annotations.is_empty() {
            patch["metadata"]["annotations"] = serde_json::json!(annotations);
        }
        self.statefulsets
            .patch(name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
            .map_err(|err| classify(&err, &format!("patch replicas of statefulset {}/{name}", self.namespace)))
    }

    async fn discover_resources(&self, group: &str, kind: &str) -> Result<Vec<ApiResourceRef>, ApiError> {
        let what = format!("discover resources of kind {kind} in API group {group:?}");
        let api_group = match kube::discovery::oneshot::group(&self.client, group).await {
            Ok(g) => g,
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(Vec::new()),
            // kube reports an unknown group as a missing group in the /apis list.
            Err(kube::Error::Discovery(_)) => return Ok(Vec::new()),
            Err(err) => return Err(classify(&err, &what)),
        };
        let mut found = Vec::new();
        for version in api_group.versions() {
            for (resource, _) in api_group.versioned_resources(version) {
                if resource.kind == kind {
                    found.push(ApiResourceRef {
                        group: resource.group,
                        version: resource.version,
                        kind: resource.kind,
                        plural: resource.plural,
                    });
                }
            }
        }
        Ok(found)
    }

    async fn get_scale(&self, resource: &ApiResourceRef, name: &str) -> Result<serde_json::Value, ApiError> {
        let what = format!("get scale of {}/{name} ({})", resource.plural, resource.api_version());
        let request = kube::core::Request::new(resource_path(resource, &self.namespace))
            .get_subresource("scale", name)
            .map_err(|err| ApiError::InvalidRequest(format!("{what}: {err}")))?;
        self.client.request::<serde_json::Value>(request).await.map_err(|err| classify(&err, &what))
    }

    async fn patch_resource_status(
        &self,
        resource: &ApiResourceRef,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<(), ApiError> {
        let what = format!("patch status of {}/{name} ({})", resource.plural, resource.api_version());
        let request = kube::core::Request::new(resource_path(resource, &self.namespace))
            .patch_subresource("status", name, &PatchParams::default(), &Patch::Merge(patch))
            .map_err(|err| ApiError::InvalidRequest(format!("{what}: {err}")))?;
        self.client.request::<serde_json::Value>(request).await.map(|_| ()).map_err(|err| classify(&err, &what))
    }
}

impl CertificateStore for KubeCluster {
    async fn get_secret(&self, name: &str) -> Result<Option<Secret>, ApiError> {
        self.secrets.get_opt(name).await.map_err(|err| classify(&err, &format!("get secret {}/{name}", self.namespace)))
    }

    async fn create_secret(&self, secret: &Secret) -> Result<Secret, ApiError> {
        let name = secret.metadata.name.as_deref().unwrap_or_default();
        self.secrets
            .create(&PostParams::default(), secret)
            .await
            .map_err(|err| classify(&err, &format!("create secret {}/{name}", self.namespace)))
    }

    async fn replace_secret(&self, secret: &Secret) -> Result<Secret, ApiError> {
        let name = secret.metadata.name.as_deref().unwrap_or_default();
        self.secrets
            .replace(name, &PostParams::default(), secret)
            .await
            .map_err(|err| classify(&err, &format!("replace secret {}/{name}", self.namespace)))
    }

    fn watch_webhook_configurations(
        &self,
        kind: WebhookKind,
        label_selector: &str,
    ) -> BoxStream<'static, Result<WatchEvent<WebhookConfiguration>, ApiError>> {
        let what = format!("watch {} with labels {label_selector}", kind.as_str());
        let config = watcher::Config::default().labels(label_selector);
        match kind {
            WebhookKind::Validating => watch(self.validating.clone(), config, what)
                .map(|item| item.map(|event| map_event(event, WebhookConfiguration::Validating)))
                .boxed(),
            WebhookKind::Mutating => watch(self.mutating.clone(), config, what)
                .map(|item| item.map(|event| map_event(event, WebhookConfiguration::Mutating)))
                .boxed(),
        }
    }

    async fn patch_webhook_configuration(
        &self,
        kind: WebhookKind,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<WebhookConfiguration, ApiError> {
        let what = format!("patch {} {name}", kind.as_str());
        let params = PatchParams::default();
        match kind {
            WebhookKind::Validating => {
                self.validating.patch(name, &params, &Patch::Merge(patch)).await.map(WebhookConfiguration::Validating)
            }
            WebhookKind::Mutating => {
                self.mutating.patch(name, &params, &Patch::Merge(patch)).await.map(WebhookConfiguration::Mutating)
            }
        }
        .map_err(|err| classify(&err, &what))
    }
}

impl EventsApi for KubeCluster {
    async fn create_event(&self, event: &k8s_openapi::api::events::v1::Event) -> Result<(), ApiError> {
        let name = event.metadata.name.as_deref().unwrap_or_default();
        self.events
            .create(&PostParams::default(), event)
            .await
            .map(|_| ())
            .map_err(|err| classify(&err, &format!("create event {}/{name}", self.namespace)))
    }

    async fn patch_event(&self, name: &str, patch: &serde_json::Value) -> Result<(), ApiError> {
        self.events
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map(|_| ())
            .map_err(|err| classify(&err, &format!("patch event {}/{name}", self.namespace)))
    }
}

impl Leases for KubeCluster {
    async fn get_lease(&self, name: &str) -> Result<Option<k8s_openapi::api::coordination::v1::Lease>, ApiError> {
        self.leases.get_opt(name).await.map_err(|err| classify(&err, &format!("get lease {}/{name}", self.namespace)))
    }

    async fn create_lease(
        &self,
        lease: &k8s_openapi::api::coordination::v1::Lease,
    ) -> Result<k8s_openapi::api::coordination::v1::Lease, ApiError> {
        let name = lease.metadata.name.as_deref().unwrap_or_default();
        self.leases
            .create(&PostParams::default(), lease)
            .await
            .map_err(|err| classify(&err, &format!("create lease {}/{name}", self.namespace)))
    }

    async fn replace_lease(
        &self,
        lease: &k8s_openapi::api::coordination::v1::Lease,
    ) -> Result<k8s_openapi::api::coordination::v1::Lease, ApiError> {
        let name = lease.metadata.name.as_deref().unwrap_or_default();
        self.leases
            .replace(name, &PostParams::default(), lease)
            .await
            .map_err(|err| classify(&err, &format!("replace lease {}/{name}", self.namespace)))
    }
}

/// The collection URL of a namespaced resource.
fn resource_path(resource: &ApiResourceRef, namespace: &str) -> String {
    if resource.group.is_empty() {
        format!("/api/{}/namespaces/{namespace}/{}", resource.version, resource.plural)
    } else {
        format!("/apis/{}/{}/namespaces/{namespace}/{}", resource.group, resource.version, resource.plural)
    }
}

/// Lists every page (500 objects at a time, as the watcher does).
async fn list_all<K>(api: &Api<K>, label_selector: &str) -> Result<Vec<K>, kube::Error>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug,
{
    let mut params = ListParams::default().limit(500);
    if !label_selector.is_empty() {
        params = params.labels(label_selector);
    }
    let mut items = Vec::new();
    loop {
        let page = api.list(&params).await?;
        items.extend(page.items);
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(items),
        }
    }
}

fn map_event<K, T>(event: WatchEvent<K>, f: impl Fn(K) -> T) -> WatchEvent<T> {
    match event {
        WatchEvent::Init => WatchEvent::Init,
        WatchEvent::InitApply(o) => WatchEvent::InitApply(f(o)),
        WatchEvent::InitDone => WatchEvent::InitDone,
        WatchEvent::Apply(o) => WatchEvent::Apply(f(o)),
        WatchEvent::Delete(o) => WatchEvent::Delete(f(o)),
    }
}

fn to_kube_preconditions(preconditions: &Preconditions) -> Option<kube::api::Preconditions> {
    if preconditions.uid.is_none() && preconditions.resource_version.is_none() {
        return None;
    }
    Some(kube::api::Preconditions {
        uid: preconditions.uid.clone(),
        resource_version: preconditions.resource_version.clone(),
    })
}

/// A kube-runtime watcher (list, then watch from the list's resourceVersion; relist when the watch expires) with
/// kube's default backoff after errors (800 ms doubling to 30 s), so an unreachable or refusing API is not hammered.
/// The list is a quorum read (kube's default `MostRecent` semantic, not a possibly stale API server cache): the
/// controller decides on it.
///
/// The watcher announces every (re)list with an `Init` before sending it, and kube's backoff starts again from its
/// shortest pause after any item that is not an error: a list that fails at every attempt would be retried every
/// second forever. So an `Init` is held back until its list yields something, and dropped when the list fails
/// (consumers would only start a relist that never comes). An error that repeats at every retry is passed on once
/// per [`repeats::REPORT_EVERY`], with its count ([`repeats::Repeats`]), so consumers that log errors do not log one
/// per retry.
fn watch<K>(api: Api<K>, config: watcher::Config, what: String) -> BoxStream<'static, Result<WatchEvent<K>, ApiError>>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let mut init_held = false;
    let mut repeats = repeats::Repeats::default();
    watcher(api, config)
        .flat_map(move |item| {
            let items = match item {
                Ok(watcher::Event::Init) => {
                    init_held = true;
                    Vec::new()
                }
                Ok(event) if std::mem::take(&mut init_held) => vec![Ok(watcher::Event::Init), Ok(event)],
                Ok(event) => vec![Ok(event)],
                Err(err) => {
                    init_held = false;
                    vec![Err(err)]
                }
            };
            futures::stream::iter(items)
        })
        .default_backoff()
        .filter_map(move |item| {
            let item = match item {
                Ok(event) => {
                    repeats.event();
                    Some(Ok(to_watch_event(event)))
                }
                Err(err) => repeats.error(classify_watch(&err, &what), tokio::time::Instant::now()).map(Err),
            };
            futures::future::ready(item)
        })
        .boxed()
}

fn to_watch_event<K>(event: watcher::Event<K>) -> WatchEvent<K> {
    match event {
        watcher::Event::Init => WatchEvent::Init,
        watcher::Event::InitApply(object) => WatchEvent::InitApply(object),
        watcher::Event::InitDone => WatchEvent::InitDone,
        watcher::Event::Apply(object) => WatchEvent::Apply(object),
        watcher::Event::Delete(object) => WatchEvent::Delete(object),
    }
}

fn classify_watch(err: &watcher::Error, what: &str) -> ApiError {
    match err {
        watcher::Error::InitialListFailed(err)
        | watcher::Error::WatchStartFailed(err)
        | watcher::Error::WatchFailed(err) => classify(err, what),
        // 410 Gone: the watch's resourceVersion expired. Routine: the watcher relists by itself.
        watcher::Error::WatchError(status) if status.code == 410 => {
            ApiError::Unavailable(format!("{what}: watch expired, relisting: {}", status_text(status)))
        }
        watcher::Error::WatchError(status) => classify_status(status, what),
        watcher::Error::NoResourceVersion => {
            ApiError::Unavailable(format!("{what}: the API returned no resourceVersion; relisting"))
        }
    }
}

/// Maps a kube error to what the caller should do about it. `what` names the operation and object.
fn classify(err: &kube::Error, what: &str) -> ApiError {
    match err {
        kube::Error::Api(status) => classify_status(status, what),
        // The request was never sent: retrying the same request cannot help.
        kube::Error::BuildRequest(err) => ApiError::InvalidRequest(format!("{what}: {err}")),
        // Transport failures, timeouts, unreadable responses, credential refresh failures: transient as far as we
        // can tell, so retry with backoff.
        other => ApiError::Unavailable(format!("{what}: {}", error_chain(other))),
    }
}

fn classify_status(status: &kube::core::Status, what: &str) -> ApiError {
    let text = status_text(status);
    match status.code {
        409 => ApiError::Conflict(format!("{what}: {text}")),
        404 => ApiError::NotFound(format!("{what}: {text}")),
        429 => ApiError::Unavailable(format!("{what}: HTTP 429: {text}")),
        // RBAC's refusal carries the reason `Forbidden`; an admission webhook's denial carries the reason its
        // webhook gave (usually none), whatever its code.
        403 if status.reason == "Forbidden" => ApiError::Forbidden(format!("{what}: {text}")),
        code @ 400..=499 => ApiError::Rejected { code, message: format!("{what}: {text}") },
        // kube reads any JSON error body as a Status; one that is not a Kubernetes Status (a proxy's) comes out
        // with no code. Its status code is lost, so treat it as transient.
        0 => ApiError::Unavailable(format!("{what}: error response that is not a Kubernetes Status")),
        code => ApiError::Unavailable(format!("{what}: HTTP {code}: {text}")),
    }
}

/// The API's own message, or its reason when the message is empty.
fn status_text(status: &kube::core::Status) -> String {
    if status.message.is_empty() { status.reason.clone() } else { status.message.clone() }
}

/// An error and its sources, so that e.g. "connection refused" below a generic "client error" is kept.
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

mod health_checks;

#[cfg(test)]
#[path = "adapter_tests/mod.rs"]
mod tests;
