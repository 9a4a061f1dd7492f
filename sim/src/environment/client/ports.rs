//! The product's cluster ports implemented by [`SimCluster`], each a request to the API server node.

use crate::Kind;
use crate::environment::apiserver::{Op, Reply};
use crate::environment::client::{BudgetFeed, SimCluster};
use crate::environment::store::Obj;
use futures::StreamExt;
use futures::channel::mpsc;
use futures::stream::BoxStream;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use rollout_operator::cluster::{
    ApiError, ApiResourceRef, CertificateStore, DisruptionBudgets, EventsApi, Leases, LiveReads, PodAnnotations,
    Preconditions, RolloutApi, ScaleTargets, StatefulSetAnnotations, WatchEvent, WebhookConfiguration, WebhookKind,
    ZoneTrackerStore,
};
use rollout_operator::health_check::feed::HealthCheckSource;

pub(crate) fn sts_of(obj: Obj) -> Option<StatefulSet> {
    match obj {
        Obj::Sts(s) => Some(*s),
        _ => None,
    }
}

pub(crate) fn pod_of(obj: Obj) -> Option<Pod> {
    match obj {
        Obj::Pod(p) => Some(*p),
        _ => None,
    }
}

pub(crate) fn webhook_of(obj: Obj) -> Option<WebhookConfiguration> {
    match obj {
        Obj::Webhook(c) => Some(*c),
        _ => None,
    }
}

pub(crate) fn budget_of(obj: Obj) -> Option<serde_json::Value> {
    match obj {
        Obj::Budget(b) => Some(*b),
        _ => None,
    }
}

impl RolloutApi for SimCluster {
    fn watch_statefulsets(&self) -> BoxStream<'static, Result<WatchEvent<StatefulSet>, ApiError>> {
        self.watch(Kind::StatefulSets, sts_of)
    }

    fn watch_pods(&self) -> BoxStream<'static, Result<WatchEvent<Pod>, ApiError>> {
        self.watch(Kind::Pods, pod_of)
    }

    async fn delete_pod(&self, name: &str, preconditions: &Preconditions) -> Result<(), ApiError> {
        let op = Op::DeletePod { name: name.to_string(), preconditions: preconditions.clone() };
        match self.call(op).await? {
            Reply::Deleted(r) => r,
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }

    async fn replace_statefulset_status(&self, statefulset: &StatefulSet) -> Result<StatefulSet, ApiError> {
        let op = Op::UpdateStatus { statefulset: Box::new(statefulset.clone()) };
        match self.call(op).await? {
            Reply::Patched(r) => r.map(|s| *s),
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }
}

impl LiveReads for SimCluster {
    async fn get_statefulset(&self, name: &str) -> Result<Option<StatefulSet>, ApiError> {
        self.read_parent(async {
            match self.call(Op::GetStatefulSet { name: name.to_string() }).await? {
                Reply::StatefulSet(r) => r.map(|s| s.map(|s| *s)),
                _ => Err(ApiError::Unavailable("mismatched reply".into())),
            }
        })
        .await
    }

    async fn get_deployment(&self, name: &str) -> Result<Option<Deployment>, ApiError> {
        self.read_parent(async {
            match self.call(Op::GetDeployment { name: name.to_string() }).await? {
                Reply::Deployment(r) => r.map(|d| d.map(|d| *d)),
                _ => Err(ApiError::Unavailable("mismatched reply".into())),
            }
        })
        .await
    }

    async fn get_replicaset(&self, name: &str) -> Result<Option<ReplicaSet>, ApiError> {
        self.read_parent(async {
            match self.call(Op::GetReplicaSet { name: name.to_string() }).await? {
                Reply::ReplicaSet(r) => r.map(|d| d.map(|d| *d)),
                _ => Err(ApiError::Unavailable("mismatched reply".into())),
            }
        })
        .await
    }

    async fn list_statefulsets(&self, label_selector: &str) -> Result<Vec<StatefulSet>, ApiError> {
        match self.call(Op::ListStatefulSets { selector: label_selector.to_string() }).await? {
            Reply::StatefulSets(r) => r,
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }

    async fn list_pods(&self, label_selector: &str) -> Result<Vec<Pod>, ApiError> {
        match self.call(Op::ListPods { selector: label_selector.to_string() }).await? {
            Reply::Pods(r) => r,
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }

    async fn get_pod(&self, name: &str) -> Result<Option<Pod>, ApiError> {
        match self.call(Op::GetPod { name: name.to_string() }).await? {
            Reply::Pod(r) => r.map(|p| p.map(|p| *p)),
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }
}

impl PodAnnotations for SimCluster {
    async fn patch_pod_annotations(
        &self,
        name: &str,
        uid: &str,
        changes: &std::collections::BTreeMap<String, Option<String>>,
    ) -> Result<Pod, ApiError> {
        let op = Op::PatchPodAnnotations { name: name.to_string(), uid: uid.to_string(), changes: changes.clone() };
        match self.call_optional(op).await? {
            Reply::Pod(Ok(Some(p))) => Ok(*p),
            Reply::Pod(Err(e)) => Err(e),
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }
}

/// An operator replica's client learns the API server's budgets by its [`BudgetFeed`]; any other client's watch lists
/// none without asking.
impl DisruptionBudgets for SimCluster {
    fn watch_disruption_budgets(&self) -> BoxStream<'static, Result<WatchEvent<serde_json::Value>, ApiError>> {
        match self.inner.budgets {
            BudgetFeed::None => futures::stream::iter([Ok(WatchEvent::Init), Ok(WatchEvent::InitDone)])
                .chain(futures::stream::pending())
                .boxed(),
            BudgetFeed::ListOnce => {
                let (tx, rx) = mpsc::unbounded();
                tokio::spawn(self.clone().list_until_listed(|| Op::ListBudgets, tx));
                rx.chain(futures::stream::pending()).boxed()
            }
            BudgetFeed::Watch => self.watch(Kind::Budgets, budget_of),
        }
    }
}

/// The RolloutHealthChecks, listed once (they never change in a run). Only a process built with health checks asks.
impl HealthCheckSource for SimCluster {
    fn watch_health_checks(&self) -> BoxStream<'static, Result<WatchEvent<serde_json::Value>, ApiError>> {
        let (tx, rx) = mpsc::unbounded();
        tokio::spawn(self.clone().list_until_listed(|| Op::ListHealthChecks, tx));
        rx.chain(futures::stream::pending()).boxed()
    }
}

impl StatefulSetAnnotations for SimCluster {
    async fn merge_statefulset_annotations(
        &self,
        name: &str,
        changes: &std::collections::BTreeMap<String, Option<String>>,
    ) -> Result<StatefulSet, ApiError> {
        let op = Op::MergeStatefulSetAnnotations { name: name.to_string(), changes: changes.clone() };
        match self.call_optional(op).await? {
            Reply::Patched(Ok(s)) => Ok(*s),
            Reply::Patched(Err(e)) => Err(e),
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }
}

impl ZoneTrackerStore for SimCluster {
    async fn patch_statefulset_annotations(
        &self,
        name: &str,
        resource_version: &str,
        annotations: &std::collections::BTreeMap<String, String>,
    ) -> Result<StatefulSet, ApiError> {
        let op = Op::PatchAnnotations {
            name: name.to_string(),
            resource_version: resource_version.to_string(),
            annotations: annotations.clone(),
        };
        match self.call(op).await? {
            Reply::Patched(r) => r.map(|s| *s),
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }

    async fn get_config_map(&self, name: &str) -> Result<Option<ConfigMap>, ApiError> {
        match self.call_optional(Op::GetConfigMap { name: name.to_string() }).await? {
            Reply::ConfigMap(r) => r.map(|cm| cm.map(|cm| *cm)),
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }

    async fn create_config_map(&self, config_map: &ConfigMap) -> Result<ConfigMap, ApiError> {
        match self.call_optional(Op::CreateConfigMap { config_map: Box::new(config_map.clone()) }).await? {
            Reply::ConfigMap(Ok(Some(cm))) => Ok(*cm),
            Reply::ConfigMap(Err(e)) => Err(e),
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }

    async fn replace_config_map(&self, config_map: &ConfigMap) -> Result<ConfigMap, ApiError> {
        match self.call_optional(Op::ReplaceConfigMap { config_map: Box::new(config_map.clone()) }).await? {
            Reply::ConfigMap(Ok(Some(cm))) => Ok(*cm),
            Reply::ConfigMap(Err(e)) => Err(e),
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }
}

impl ScaleTargets for SimCluster {
    async fn patch_statefulset_replicas(
        &self,
        name: &str,
        replicas: u32,
        resource_version: &str,
        annotations: &std::collections::BTreeMap<String, String>,
    ) -> Result<StatefulSet, ApiError> {
        let op = Op::PatchReplicas {
            name: name.to_string(),
            replicas,
            resource_version: resource_version.to_string(),
            annotations: annotations.clone(),
        };
        match self.call(op).await? {
            Reply::Patched(r) => r.map(|s| *s),
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }

    async fn discover_resources(&self, group: &str, kind: &str) -> Result<Vec<ApiResourceRef>, ApiError> {
        match self.call(Op::Discover { group: group.to_string(), kind: kind.to_string() }).await? {
            Reply::Discovered(r) => r,
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }

    async fn get_scale(&self, resource: &ApiResourceRef, name: &str) -> Result<serde_json::Value, ApiError> {
        match self.call(Op::GetScale { plural: resource.plural.clone(), name: name.to_string() }).await? {
            Reply::Value(r) => r,
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }

    async fn patch_resource_status(
        &self,
        resource: &ApiResourceRef,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<(), ApiError> {
        let op =
            Op::PatchResourceStatus { plural: resource.plural.clone(), name: name.to_string(), patch: patch.clone() };
        match self.call(op).await? {
            Reply::Done(r) => r,
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }
}

impl EventsApi for SimCluster {
    async fn create_event(&self, event: &k8s_openapi::api::events::v1::Event) -> Result<(), ApiError> {
        match self.call_optional(Op::CreateEvent { event: Box::new(event.clone()) }).await? {
            Reply::Done(r) => r,
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }

    async fn patch_event(&self, name: &str, patch: &serde_json::Value) -> Result<(), ApiError> {
        match self.call_optional(Op::PatchEvent { name: name.to_string(), patch: patch.clone() }).await? {
            Reply::Done(r) => r,
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }
}

/// The leader election's Lease, over the same client (and so the same network) as the replica's controller.
impl Leases for SimCluster {
    async fn get_lease(&self, name: &str) -> Result<Option<Lease>, ApiError> {
        match self.call(Op::GetLease { name: name.to_string() }).await? {
            Reply::Lease(r) => r.map(|l| l.map(|l| *l)),
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }

    async fn create_lease(&self, lease: &Lease) -> Result<Lease, ApiError> {
        match self.call(Op::CreateLease { lease: Box::new(lease.clone()) }).await? {
            Reply::Lease(Ok(Some(l))) => Ok(*l),
            Reply::Lease(Err(e)) => Err(e),
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }

    async fn replace_lease(&self, lease: &Lease) -> Result<Lease, ApiError> {
        match self.call(Op::ReplaceLease { lease: Box::new(lease.clone()) }).await? {
            Reply::Lease(Ok(Some(l))) => Ok(*l),
            Reply::Lease(Err(e)) => Err(e),
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }
}

impl CertificateStore for SimCluster {
    async fn get_secret(&self, name: &str) -> Result<Option<Secret>, ApiError> {
        match self.call(Op::GetSecret { name: name.to_string() }).await? {
            Reply::Secret(r) => r.map(|s| s.map(|s| *s)),
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }

    async fn create_secret(&self, secret: &Secret) -> Result<Secret, ApiError> {
        match self.call(Op::CreateSecret { secret: Box::new(secret.clone()) }).await? {
            Reply::Secret(Ok(Some(s))) => Ok(*s),
            Reply::Secret(Err(e)) => Err(e),
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }

    async fn replace_secret(&self, secret: &Secret) -> Result<Secret, ApiError> {
        match self.call(Op::ReplaceSecret { secret: Box::new(secret.clone()) }).await? {
            Reply::Secret(Ok(Some(s))) => Ok(*s),
            Reply::Secret(Err(e)) => Err(e),
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }

    /// Every configuration of the simulated cluster is labelled for CA injection in the operator's namespace (the
    /// certificate world installs only such), so the selector matches them all.
    fn watch_webhook_configurations(
        &self,
        kind: WebhookKind,
        _label_selector: &str,
    ) -> BoxStream<'static, Result<WatchEvent<WebhookConfiguration>, ApiError>> {
        match kind {
            WebhookKind::Validating => self.watch(Kind::ValidatingWebhooks, webhook_of),
            WebhookKind::Mutating => self.watch(Kind::MutatingWebhooks, webhook_of),
        }
    }

    async fn patch_webhook_configuration(
        &self,
        kind: WebhookKind,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<WebhookConfiguration, ApiError> {
        let op = Op::PatchWebhookConfiguration { kind, name: name.to_string(), patch: patch.clone() };
        match self.call(op).await? {
            Reply::Webhook(r) => r.map(|c| *c),
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }
}
