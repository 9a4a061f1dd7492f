//! The fake cluster: an in-memory API server for one namespace, what it records of the controller's calls, and
//! the knobs tests turn (events held back, failures injected, hooks run between a read and a write). It serves
//! the cluster port's traits in [`ports`].

mod ports;

use super::objects::{pod, set_ready};
use futures::StreamExt;
use futures::channel::mpsc;
use futures::stream::BoxStream;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use rollout_operator::cluster::memory::{self, selector_matches};
use rollout_operator::cluster::{
    ApiError, ApiResourceRef, CertificateStore, DisruptionBudgets, Leases, LiveReads, PodAnnotations, Preconditions,
    RolloutApi, ScaleTargets, StatefulSetAnnotations, WatchEvent, WebhookConfiguration, WebhookKind, ZoneTrackerStore,
};
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

/// A call the controller made, as the API server saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    DeletePod {
        name: String,
        uid: Option<String>,
    },
    /// `PATCH statefulsets/{name}` of annotations (alone, or with a replica change: then right after its
    /// `PatchReplicas`).
    PatchAnnotations {
        name: String,
        resource_version: String,
        annotations: BTreeMap<String, String>,
    },
    /// `PUT statefulsets/{name}/status`: the resourceVersion it was conditional on and the currentRevision it set.
    UpdateStatus {
        name: String,
        resource_version: Option<String>,
        current_revision: Option<String>,
    },
    CreateConfigMap {
        name: String,
    },
    ReplaceConfigMap {
        name: String,
        resource_version: Option<String>,
    },
    PatchReplicas {
        name: String,
        replicas: u32,
        resource_version: String,
    },
    GetScale {
        plural: String,
        name: String,
    },
    PatchResourceStatus {
        plural: String,
        name: String,
        patch: serde_json::Value,
    },
    CreateSecret {
        name: String,
    },
    ReplaceSecret {
        name: String,
    },
    PatchWebhook {
        kind: WebhookKind,
        name: String,
        patch: serde_json::Value,
    },
    /// `PATCH pods/{name}` of annotations (`None` removes), conditional on the uid.
    PatchPodAnnotations {
        name: String,
        uid: String,
        changes: BTreeMap<String, Option<String>>,
    },
    /// `PATCH statefulsets/{name}` of annotations (`None` removes).
    MergeStatefulSetAnnotations {
        name: String,
        changes: BTreeMap<String, Option<String>>,
    },
}

type WebhookWatcher = mpsc::UnboundedSender<Result<WatchEvent<WebhookConfiguration>, ApiError>>;

/// Something that happens in the cluster at a chosen moment of a test.
type ClusterHook = Box<dyn FnOnce(&FakeCluster) + Send>;

#[derive(Default)]
struct State {
    rv: u64,
    statefulsets: BTreeMap<String, StatefulSet>,
    pods: BTreeMap<String, Pod>,
    config_maps: BTreeMap<String, ConfigMap>,
    /// Resources that API discovery reports (mirror reference kinds).
    discovery: Vec<ApiResourceRef>,
    /// Reference resources with a scale subresource: (plural, name) -> (spec.replicas, status.replicas).
    scale_targets: BTreeMap<(String, String), (Option<i64>, i64)>,
    /// Failures for the next replica patches only (other writes unaffected).
    replica_patch_failures: VecDeque<ApiError>,
    deployments: BTreeMap<String, Deployment>,
    replicasets: BTreeMap<String, ReplicaSet>,
    secrets: BTreeMap<String, Secret>,
    webhooks: BTreeMap<(String, String), WebhookConfiguration>,
    webhook_watchers: Vec<(WebhookKind, String, WebhookWatcher)>,
    /// Reads fail with this while set (an unreachable API for the webhooks' live reads).
    fail_reads: Option<ApiError>,
    /// Runs once, right after the next successful ConfigMap write (something happening in the cluster at that moment).
    after_config_map_write: Option<ClusterHook>,
    after_config_map_read: Option<ClusterHook>,
    config_map_read_failure: Option<ApiError>,
    pod_generation: BTreeMap<String, u32>,
    /// ZoneAwarePodDisruptionBudgets, as generic objects, and their watchers.
    budgets: BTreeMap<String, serde_json::Value>,
    budget_watchers: Vec<mpsc::UnboundedSender<Result<WatchEvent<serde_json::Value>, ApiError>>>,
    /// Every pod patch fails with this while set (a Role without `patch` on pods).
    pod_patch_failure: Option<ApiError>,
    /// Every StatefulSet annotation patch fails with this while set (a Role without `patch` on statefulsets).
    statefulset_patch_failure: Option<ApiError>,
    sts_watchers: Vec<mpsc::UnboundedSender<Result<WatchEvent<StatefulSet>, ApiError>>>,
    pod_watchers: Vec<mpsc::UnboundedSender<Result<WatchEvent<Pod>, ApiError>>>,
    /// While true, watch events are queued here instead of delivered (a lagging cache).
    hold_events: bool,
    held_sts: Vec<WatchEvent<StatefulSet>>,
    held_pods: Vec<WatchEvent<Pod>>,
    calls: Vec<Call>,
    failures: VecDeque<ApiError>,
    /// The next write commits, but its reply is lost (the caller sees `Unavailable`).
    lose_next_reply: bool,
    /// Per StatefulSet: the most pods ever unavailable right after one of our deletions.
    max_unavailable_after_delete: BTreeMap<String, u32>,
    /// Deletions made while another StatefulSet of the namespace had unavailable pods.
    cross_zone_violations: Vec<String>,
}

impl State {
    fn next_rv(&mut self) -> String {
        self.rv += 1;
        self.rv.to_string()
    }

    /// Pods of `sts` that are missing or not ready.
    fn unavailable(&self, sts: &StatefulSet) -> u32 {
        let name = sts.metadata.name.as_deref().unwrap();
        let replicas = sts.spec.as_ref().unwrap().replicas.unwrap() as u32;
        let ready = self
            .pods
            .values()
            .filter(|p| p.metadata.owner_references.as_ref().unwrap()[0].name == name)
            .filter(|p| p.status.as_ref().unwrap().conditions.as_ref().unwrap()[0].status == "True")
            .count() as u32;
        replicas.saturating_sub(ready)
    }

    fn emit_sts(&mut self, e: WatchEvent<StatefulSet>) {
        if self.hold_events {
            self.held_sts.push(e);
        } else {
            self.sts_watchers.retain(|w| w.unbounded_send(Ok(e.clone())).is_ok());
        }
    }

    fn emit_pod(&mut self, e: WatchEvent<Pod>) {
        if self.hold_events {
            self.held_pods.push(e);
        } else {
            self.pod_watchers.retain(|w| w.unbounded_send(Ok(e.clone())).is_ok());
        }
    }
}

impl State {
    fn read(&self) -> Result<(), ApiError> {
        match &self.fail_reads {
            Some(err) => Err(err.clone()),
            None => Ok(()),
        }
    }
}

/// An in-memory API server for one namespace.
#[derive(Clone, Default)]
pub struct FakeCluster {
    state: Arc<Mutex<State>>,
    /// The leader election's Lease (the shared in-memory store; cut off with `leases.set_unreachable`).
    pub leases: memory::LeaseStore,
}

impl FakeCluster {
    pub fn new(statefulsets: Vec<StatefulSet>, pods: Vec<Pod>) -> Self {
        let c = FakeCluster::default();
        for s in statefulsets {
            c.put_statefulset(s);
        }
        for p in pods {
            c.put_pod(p);
        }
        c
    }

    pub fn put_statefulset(&self, mut s: StatefulSet) {
        let mut st = self.state.lock().unwrap();
        s.metadata.resource_version = Some(st.next_rv());
        st.statefulsets.insert(s.metadata.name.clone().unwrap(), s.clone());
        st.emit_sts(WatchEvent::Apply(s));
    }

    pub fn put_pod(&self, mut p: Pod) {
        let mut st = self.state.lock().unwrap();
        p.metadata.resource_version = Some(st.next_rv());
        st.pods.insert(p.metadata.name.clone().unwrap(), p.clone());
        st.emit_pod(WatchEvent::Apply(p));
    }

    pub fn set_pod_ready(&self, name: &str, ready: bool) {
        let mut p = self.pod(name).expect("pod exists");
        set_ready(&mut p, ready);
        self.put_pod(p);
    }

    /// What the StatefulSet controller does for an OnDelete StatefulSet: a missing pod comes back at the update
    /// revision (not ready yet).
    pub fn recreate_missing_pods(&self) -> Vec<String> {
        let statefulsets: Vec<StatefulSet> = self.state.lock().unwrap().statefulsets.values().cloned().collect();
        let mut created = Vec::new();
        for s in statefulsets {
            let name = s.metadata.name.clone().unwrap();
            let replicas = s.spec.as_ref().unwrap().replicas.unwrap() as u32;
            let update = s.status.as_ref().unwrap().update_revision.clone().unwrap();
            for i in 0..replicas {
                let pod_name = format!("{name}-{i}");
                if self.pod(&pod_name).is_none() {
                    let generation = {
                        let mut st = self.state.lock().unwrap();
                        let g = st.pod_generation.entry(pod_name.clone()).or_insert(0);
                        *g += 1;
                        *g
                    };
                    self.put_pod(pod(&name, i, &update, false, generation));
                    created.push(pod_name);
                }
            }
        }
        created
    }

    pub fn pod(&self, name: &str) -> Option<Pod> {
        self.state.lock().unwrap().pods.get(name).cloned()
    }

    pub fn pods(&self) -> Vec<Pod> {
        self.state.lock().unwrap().pods.values().cloned().collect()
    }

    pub fn statefulset(&self, name: &str) -> Option<StatefulSet> {
        self.state.lock().unwrap().statefulsets.get(name).cloned()
    }

    pub fn config_map(&self, name: &str) -> Option<ConfigMap> {
        self.state.lock().unwrap().config_maps.get(name).cloned()
    }

    /// The next replica patch fails with `err` (other writes are unaffected).
    pub fn fail_next_replica_patch(&self, err: ApiError) {
        self.state.lock().unwrap().replica_patch_failures.push_back(err);
    }

    /// Serves `resource` in API discovery.
    pub fn add_api_resource(&self, resource: ApiResourceRef) {
        self.state.lock().unwrap().discovery.push(resource);
    }

    /// Creates or updates a reference resource with a scale subresource (`plural`/`name`).
    pub fn put_scale_target(&self, plural: &str, name: &str, spec_replicas: Option<i64>, status_replicas: i64) {
        self.state.lock().unwrap().scale_targets.insert((plural.into(), name.into()), (spec_replicas, status_replicas));
    }

    /// `(spec.replicas, status.replicas)` of a reference resource.
    pub fn scale_target(&self, plural: &str, name: &str) -> Option<(Option<i64>, i64)> {
        self.state.lock().unwrap().scale_targets.get(&(plural.to_string(), name.to_string())).copied()
    }

    /// Stores a ConfigMap as another client would (new resourceVersion).
    pub fn put_config_map(&self, mut cm: ConfigMap) {
        let mut st = self.state.lock().unwrap();
        cm.metadata.resource_version = Some(st.next_rv());
        st.config_maps.insert(cm.metadata.name.clone().unwrap_or_default(), cm);
    }

    pub fn put_deployment(&self, d: Deployment) {
        self.state.lock().unwrap().deployments.insert(d.metadata.name.clone().unwrap_or_default(), d);
    }

    pub fn put_replicaset(&self, r: ReplicaSet) {
        self.state.lock().unwrap().replicasets.insert(r.metadata.name.clone().unwrap_or_default(), r);
    }

    pub fn secret(&self, name: &str) -> Option<Secret> {
        self.state.lock().unwrap().secrets.get(name).cloned()
    }

    /// Every ConfigMap read fails with `err` (a Role that grants no configmaps), other reads do not.
    pub fn fail_config_map_reads(&self, err: Option<ApiError>) {
        self.state.lock().unwrap().config_map_read_failure = err;
    }

    /// Every live read fails with `err` until cleared with `None`.
    pub fn fail_reads(&self, err: Option<ApiError>) {
        self.state.lock().unwrap().fail_reads = err;
    }

    /// Stores a webhook configuration as another client would, and tells the watchers.
    pub fn put_webhook_configuration(&self, mut config: WebhookConfiguration) {
        let mut st = self.state.lock().unwrap();
        let rv = st.next_rv();
        match &mut config {
            WebhookConfiguration::Validating(c) => c.metadata.resource_version = Some(rv),
            WebhookConfiguration::Mutating(c) => c.metadata.resource_version = Some(rv),
        }
        let name = config.metadata().name.clone().unwrap_or_default();
        st.webhooks.insert((config.kind().as_str().to_string(), name), config.clone());
        st.webhook_watchers.retain(|(kind, selector, tx)| {
            *kind != config.kind()
                || !selector_matches(selector, config.metadata().labels.as_ref())
                || tx.unbounded_send(Ok(WatchEvent::Apply(config.clone()))).is_ok()
        });
    }

    pub fn webhook_configuration(&self, kind: WebhookKind, name: &str) -> Option<WebhookConfiguration> {
        self.state.lock().unwrap().webhooks.get(&(kind.as_str().to_string(), name.to_string())).cloned()
    }

    /// Stores a ZoneAwarePodDisruptionBudget (generic JSON) as another client would, and tells the watchers.
    pub fn put_budget(&self, mut budget: serde_json::Value) {
        let mut st = self.state.lock().unwrap();
        budget["metadata"]["resourceVersion"] = serde_json::json!(st.next_rv());
        let name = budget.pointer("/metadata/name").and_then(|n| n.as_str()).unwrap_or_default().to_string();
        st.budgets.insert(name, budget.clone());
        st.budget_watchers.retain(|w| w.unbounded_send(Ok(WatchEvent::Apply(budget.clone()))).is_ok());
    }

    pub fn delete_budget(&self, name: &str) {
        let mut st = self.state.lock().unwrap();
        if let Some(budget) = st.budgets.remove(name) {
            st.budget_watchers.retain(|w| w.unbounded_send(Ok(WatchEvent::Delete(budget.clone()))).is_ok());
        }
    }

    /// Every pod patch fails with `err` until cleared with `None`.
    pub fn fail_pod_patches(&self, err: Option<ApiError>) {
        self.state.lock().unwrap().pod_patch_failure = err;
    }

    /// Every StatefulSet annotation patch fails with `err` until cleared with `None`.
    pub fn fail_statefulset_annotation_patches(&self, err: Option<ApiError>) {
        self.state.lock().unwrap().statefulset_patch_failure = err;
    }

    pub fn calls(&self) -> Vec<Call> {
        self.state.lock().unwrap().calls.clone()
    }

    pub fn take_calls(&self) -> Vec<Call> {
        std::mem::take(&mut self.state.lock().unwrap().calls)
    }

    pub fn max_unavailable_after_delete(&self) -> BTreeMap<String, u32> {
        self.state.lock().unwrap().max_unavailable_after_delete.clone()
    }

    pub fn cross_zone_violations(&self) -> Vec<String> {
        self.state.lock().unwrap().cross_zone_violations.clone()
    }

    /// The next write commits but the controller never hears back.
    pub fn lose_next_reply(&self) {
        self.state.lock().unwrap().lose_next_reply = true;
    }

    /// Runs `f` once, right after the next successful ConfigMap create or replace.
    pub fn after_next_config_map_write(&self, f: impl FnOnce(&FakeCluster) + Send + 'static) {
        self.state.lock().unwrap().after_config_map_write = Some(Box::new(f));
    }

    /// Runs `f` once, right after the next ConfigMap read has been answered (another writer acting between a
    /// reader's read and its write).
    pub fn after_next_config_map_read(&self, f: impl FnOnce(&FakeCluster) + Send + 'static) {
        self.state.lock().unwrap().after_config_map_read = Some(Box::new(f));
    }

    fn run_config_map_hook(&self) {
        let hook = self.state.lock().unwrap().after_config_map_write.take();
        if let Some(hook) = hook {
            hook(self);
        }
    }

    /// The next write fails with `err`.
    pub fn fail_next(&self, err: ApiError) {
        self.state.lock().unwrap().failures.push_back(err);
    }

    pub fn hold_events(&self, hold: bool) {
        let mut st = self.state.lock().unwrap();
        st.hold_events = hold;
        if !hold {
            for e in std::mem::take(&mut st.held_sts) {
                st.emit_sts(e);
            }
            for e in std::mem::take(&mut st.held_pods) {
                st.emit_pod(e);
            }
        }
    }
}
