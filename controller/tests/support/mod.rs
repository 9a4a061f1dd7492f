//! Test support: Kubernetes objects as a cluster would hold them, and an in-memory API server implementing the
//! cluster port (watches, preconditions, resourceVersions), with knobs for holding back watch events and injecting
//! failures.

#![allow(dead_code)]

use futures::StreamExt;
use futures::channel::mpsc;
use futures::stream::BoxStream;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec, StatefulSetStatus, StatefulSetUpdateStrategy};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::core::v1::{
    ConfigMap, ContainerState, ContainerStateRunning, ContainerStatus, Pod, PodCondition, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference, Time};
use rollout_operator::cluster::{
    ApiError, ApiResourceRef, CertificateStore, DisruptionBudgets, Leases, LiveReads, PodAnnotations, Preconditions,
    RecordStore, RolloutApi, ScaleTargets, StatefulSetAnnotations, WatchEvent, WebhookConfiguration, WebhookKind,
};
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

pub fn sts(group: &str, name: &str, replicas: i32, current: &str, update: &str) -> StatefulSet {
    StatefulSet {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            uid: Some(format!("uid-{name}")),
            generation: Some(1),
            labels: Some(BTreeMap::from([("rollout-group".into(), group.into())])),
            ..Default::default()
        },
        spec: Some(StatefulSetSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(BTreeMap::from([("name".into(), name.into())])),
                ..Default::default()
            },
            service_name: Some(name.into()),
            update_strategy: Some(StatefulSetUpdateStrategy { type_: Some("OnDelete".into()), ..Default::default() }),
            ..Default::default()
        }),
        status: Some(StatefulSetStatus {
            replicas,
            ready_replicas: Some(replicas),
            current_revision: Some(current.into()),
            update_revision: Some(update.into()),
            observed_generation: Some(1),
            ..Default::default()
        }),
    }
}

pub fn pod(sts_name: &str, ordinal: u32, revision: &str, ready: bool, generation: u32) -> Pod {
    let name = format!("{sts_name}-{ordinal}");
    let t = Time("2026-01-01T00:00:00Z".parse().unwrap());
    Pod {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some("ns".into()),
            uid: Some(format!("uid-{name}-{generation}")),
            labels: Some(BTreeMap::from([
                ("name".into(), sts_name.into()),
                ("controller-revision-hash".into(), revision.into()),
            ])),
            owner_references: Some(vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: "StatefulSet".into(),
                name: sts_name.into(),
                uid: format!("uid-{sts_name}"),
                controller: Some(true),
                ..Default::default()
            }]),
            ..Default::default()
        },
        spec: None,
        status: Some(PodStatus {
            phase: Some("Running".into()),
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: if ready { "True" } else { "False" }.into(),
                last_transition_time: Some(t),
                ..Default::default()
            }]),
            container_statuses: Some(vec![ContainerStatus {
                name: "main".into(),
                ready,
                state: Some(ContainerState {
                    running: Some(ContainerStateRunning {
                        started_at: Some(Time("2026-01-01T00:00:00Z".parse().unwrap())),
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

fn set_ready(pod: &mut Pod, ready: bool) {
    let status = pod.status.as_mut().unwrap();
    for c in status.conditions.iter_mut().flatten() {
        c.status = if ready { "True" } else { "False" }.into();
    }
    for c in status.container_statuses.iter_mut().flatten() {
        c.ready = ready;
    }
}

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

/// A rollout group `ingester` of three zones of three ready pods, zone a done on `rev-new`, zones b and c still on
/// `rev-old`, every StatefulSet with `rollout-max-unavailable: <max_unavailable>`, every pod labelled with its
/// rollout group (as ZoneAwarePodDisruptionBudgets select them).
pub fn three_zones(max_unavailable: &str) -> FakeCluster {
    let (old, new) = ("rev-old", "rev-new");
    let mut pods = Vec::new();
    for (zone, rev) in [("a", new), ("b", old), ("c", old)] {
        for i in 0..3 {
            let mut p = pod(&format!("ingester-zone-{zone}"), i, rev, true, 0);
            p.metadata.labels.get_or_insert_default().insert("rollout-group".into(), "ingester".into());
            pods.push(p);
        }
    }
    let with_max_unavailable = |mut s: StatefulSet| {
        s.metadata.annotations.get_or_insert_default().insert("rollout-max-unavailable".into(), max_unavailable.into());
        s
    };
    FakeCluster::new(
        vec![
            with_max_unavailable(sts("ingester", "ingester-zone-a", 3, new, new)),
            with_max_unavailable(sts("ingester", "ingester-zone-b", 3, old, new)),
            with_max_unavailable(sts("ingester", "ingester-zone-c", 3, old, new)),
        ],
        pods,
    )
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

    /// Stores a ConfigMap as another client would (new resourceVersion).
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

    /// Every live read fails with `err` until cleared with `None`.
    /// Every ConfigMap read fails with `err` (a Role that grants no configmaps), other reads do not.
    pub fn fail_config_map_reads(&self, err: Option<ApiError>) {
        self.state.lock().unwrap().config_map_read_failure = err;
    }

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

    /// The next write fails with `err`.
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

impl RolloutApi for FakeCluster {
    fn watch_statefulsets(&self) -> BoxStream<'static, Result<WatchEvent<StatefulSet>, ApiError>> {
        let (tx, rx) = mpsc::unbounded();
        let mut st = self.state.lock().unwrap();
        let _ = tx.unbounded_send(Ok(WatchEvent::Init));
        for s in st.statefulsets.values() {
            let _ = tx.unbounded_send(Ok(WatchEvent::InitApply(s.clone())));
        }
        let _ = tx.unbounded_send(Ok(WatchEvent::InitDone));
        st.sts_watchers.push(tx);
        rx.boxed()
    }

    fn watch_pods(&self) -> BoxStream<'static, Result<WatchEvent<Pod>, ApiError>> {
        let (tx, rx) = mpsc::unbounded();
        let mut st = self.state.lock().unwrap();
        let _ = tx.unbounded_send(Ok(WatchEvent::Init));
        for p in st.pods.values() {
            let _ = tx.unbounded_send(Ok(WatchEvent::InitApply(p.clone())));
        }
        let _ = tx.unbounded_send(Ok(WatchEvent::InitDone));
        st.pod_watchers.push(tx);
        rx.boxed()
    }

    async fn delete_pod(&self, name: &str, preconditions: &Preconditions) -> Result<(), ApiError> {
        let mut st = self.state.lock().unwrap();
        st.calls.push(Call::DeletePod { name: name.into(), uid: preconditions.uid.clone() });
        if let Some(err) = st.failures.pop_front() {
            return Err(err);
        }
        let Some(p) = st.pods.get(name).cloned() else { return Err(ApiError::NotFound(format!("pods {name}"))) };
        if preconditions.uid.is_some() && preconditions.uid != p.metadata.uid {
            return Err(ApiError::Conflict(format!("pods {name}: precondition failed: uid")));
        }
        st.pods.remove(name);
        let owner = p.metadata.owner_references.as_ref().unwrap()[0].name.clone();
        let statefulsets: Vec<StatefulSet> = st.statefulsets.values().cloned().collect();
        for s in &statefulsets {
            let unavailable = st.unavailable(s);
            let sname = s.metadata.name.clone().unwrap();
            if sname == owner {
                let max = st.max_unavailable_after_delete.entry(sname).or_insert(0);
                *max = (*max).max(unavailable);
            } else if unavailable > 0 {
                st.cross_zone_violations.push(format!("deleted {name} while {sname} had {unavailable} unavailable"));
            }
        }
        st.emit_pod(WatchEvent::Delete(p));
        if std::mem::take(&mut st.lose_next_reply) {
            return Err(ApiError::Unavailable(format!("delete pod {name}: connection reset")));
        }
        Ok(())
    }

    async fn replace_statefulset_status(&self, statefulset: &StatefulSet) -> Result<StatefulSet, ApiError> {
        let mut st = self.state.lock().unwrap();
        let name = statefulset.metadata.name.clone().unwrap_or_default();
        let wanted = statefulset.metadata.resource_version.clone();
        st.calls.push(Call::UpdateStatus {
            name: name.clone(),
            resource_version: wanted.clone(),
            current_revision: statefulset.status.as_ref().and_then(|s| s.current_revision.clone()),
        });
        if let Some(err) = st.failures.pop_front() {
            return Err(err);
        }
        let Some(mut s) = st.statefulsets.get(&name).cloned() else {
            return Err(ApiError::NotFound(format!("statefulsets {name}")));
        };
        if wanted.is_some() && wanted != s.metadata.resource_version {
            return Err(ApiError::Conflict(format!("statefulsets {name}: the object has been modified")));
        }
        // Only the status subresource changes.
        s.status = statefulset.status.clone();
        s.metadata.resource_version = Some(st.next_rv());
        st.statefulsets.insert(name, s.clone());
        st.emit_sts(WatchEvent::Apply(s.clone()));
        Ok(s)
    }
}

impl LiveReads for FakeCluster {
    async fn get_statefulset(&self, name: &str) -> Result<Option<StatefulSet>, ApiError> {
        let st = self.state.lock().unwrap();
        st.read()?;
        Ok(st.statefulsets.get(name).cloned())
    }

    async fn get_deployment(&self, name: &str) -> Result<Option<Deployment>, ApiError> {
        let st = self.state.lock().unwrap();
        st.read()?;
        Ok(st.deployments.get(name).cloned())
    }

    async fn get_replicaset(&self, name: &str) -> Result<Option<ReplicaSet>, ApiError> {
        let st = self.state.lock().unwrap();
        st.read()?;
        Ok(st.replicasets.get(name).cloned())
    }

    async fn list_statefulsets(&self, label_selector: &str) -> Result<Vec<StatefulSet>, ApiError> {
        let st = self.state.lock().unwrap();
        st.read()?;
        Ok(memory::list(&st.statefulsets, label_selector))
    }

    async fn list_pods(&self, label_selector: &str) -> Result<Vec<Pod>, ApiError> {
        // Let concurrent callers interleave between reads and writes, as over a network.
        tokio::task::yield_now().await;
        let st = self.state.lock().unwrap();
        st.read()?;
        Ok(memory::list(&st.pods, label_selector))
    }

    async fn get_pod(&self, name: &str) -> Result<Option<Pod>, ApiError> {
        // Let concurrent callers interleave between reads and writes, as over a network.
        tokio::task::yield_now().await;
        let st = self.state.lock().unwrap();
        st.read()?;
        Ok(st.pods.get(name).cloned())
    }
}

impl PodAnnotations for FakeCluster {
    async fn patch_pod_annotations(
        &self,
        name: &str,
        uid: &str,
        changes: &BTreeMap<String, Option<String>>,
    ) -> Result<Pod, ApiError> {
        tokio::task::yield_now().await;
        let mut st = self.state.lock().unwrap();
        st.calls.push(Call::PatchPodAnnotations { name: name.into(), uid: uid.into(), changes: changes.clone() });
        if let Some(err) = st.pod_patch_failure.clone().or_else(|| st.failures.pop_front()) {
            return Err(err);
        }
        let state = &mut *st;
        let pod = memory::patch_annotations_of_uid(&mut state.pods, &mut state.rv, "pods", name, uid, changes)?;
        st.emit_pod(WatchEvent::Apply(pod.clone()));
        Ok(pod)
    }
}

impl StatefulSetAnnotations for FakeCluster {
    async fn merge_statefulset_annotations(
        &self,
        name: &str,
        changes: &BTreeMap<String, Option<String>>,
    ) -> Result<StatefulSet, ApiError> {
        tokio::task::yield_now().await;
        let mut st = self.state.lock().unwrap();
        st.calls.push(Call::MergeStatefulSetAnnotations { name: name.into(), changes: changes.clone() });
        if let Some(err) = st.statefulset_patch_failure.clone().or_else(|| st.failures.pop_front()) {
            return Err(err);
        }
        let state = &mut *st;
        let sts = memory::patch_annotations_of_uid(
            &mut state.statefulsets,
            &mut state.rv,
            "statefulsets.apps",
            name,
            "",
            changes,
        )?;
        st.emit_sts(WatchEvent::Apply(sts.clone()));
        Ok(sts)
    }
}

impl DisruptionBudgets for FakeCluster {
    fn watch_disruption_budgets(&self) -> BoxStream<'static, Result<WatchEvent<serde_json::Value>, ApiError>> {
        let (tx, rx) = mpsc::unbounded();
        let mut st = self.state.lock().unwrap();
        let _ = tx.unbounded_send(Ok(WatchEvent::Init));
        for b in st.budgets.values() {
            let _ = tx.unbounded_send(Ok(WatchEvent::InitApply(b.clone())));
        }
        let _ = tx.unbounded_send(Ok(WatchEvent::InitDone));
        st.budget_watchers.push(tx);
        rx.boxed()
    }
}

impl Leases for FakeCluster {
    async fn get_lease(&self, name: &str) -> Result<Option<k8s_openapi::api::coordination::v1::Lease>, ApiError> {
        self.leases.get_lease(name).await
    }

    async fn create_lease(
        &self,
        lease: &k8s_openapi::api::coordination::v1::Lease,
    ) -> Result<k8s_openapi::api::coordination::v1::Lease, ApiError> {
        self.leases.create_lease(lease).await
    }

    async fn replace_lease(
        &self,
        lease: &k8s_openapi::api::coordination::v1::Lease,
    ) -> Result<k8s_openapi::api::coordination::v1::Lease, ApiError> {
        self.leases.replace_lease(lease).await
    }
}

impl RecordStore for FakeCluster {
    async fn get_config_map(&self, name: &str) -> Result<Option<ConfigMap>, ApiError> {
        // Let concurrent callers interleave between a read and a write, as over a network.
        tokio::task::yield_now().await;
        let (read, hook) = {
            let mut st = self.state.lock().unwrap();
            st.read()?;
            if let Some(err) = &st.config_map_read_failure {
                return Err(err.clone());
            }
            (st.config_maps.get(name).cloned(), st.after_config_map_read.take())
        };
        if let Some(hook) = hook {
            hook(self);
        }
        Ok(read)
    }

    async fn create_config_map(&self, config_map: &ConfigMap) -> Result<ConfigMap, ApiError> {
        // Let concurrent callers interleave between a read and a write, as over a network.
        tokio::task::yield_now().await;
        let mut st = self.state.lock().unwrap();
        let name = config_map.metadata.name.clone().unwrap_or_default();
        st.calls.push(Call::CreateConfigMap { name: name.clone() });
        if let Some(err) = st.failures.pop_front() {
            return Err(err);
        }
        let state = &mut *st;
        let cm = memory::create(&mut state.config_maps, &mut state.rv, "configmaps", config_map)?;
        drop(st);
        self.run_config_map_hook();
        Ok(cm)
    }

    async fn replace_config_map(&self, config_map: &ConfigMap) -> Result<ConfigMap, ApiError> {
        // Let concurrent callers interleave between a read and a write, as over a network.
        tokio::task::yield_now().await;
        let mut st = self.state.lock().unwrap();
        let name = config_map.metadata.name.clone().unwrap_or_default();
        let resource_version = config_map.metadata.resource_version.clone();
        st.calls.push(Call::ReplaceConfigMap { name: name.clone(), resource_version: resource_version.clone() });
        if let Some(err) = st.failures.pop_front() {
            return Err(err);
        }
        let state = &mut *st;
        let cm = memory::replace(&mut state.config_maps, &mut state.rv, "configmaps", config_map)?;
        let lost = std::mem::take(&mut st.lose_next_reply);
        drop(st);
        self.run_config_map_hook();
        if lost {
            return Err(ApiError::Unavailable(format!("replace configmap {name}: connection reset")));
        }
        Ok(cm)
    }

    async fn patch_statefulset_annotations(
        &self,
        name: &str,
        resource_version: &str,
        annotations: &BTreeMap<String, String>,
    ) -> Result<StatefulSet, ApiError> {
        let mut st = self.state.lock().unwrap();
        st.calls.push(Call::PatchAnnotations {
            name: name.into(),
            resource_version: resource_version.into(),
            annotations: annotations.clone(),
        });
        if let Some(err) = st.failures.pop_front() {
            return Err(err);
        }
        let state = &mut *st;
        let s = memory::patch_annotations(
            &mut state.statefulsets,
            &mut state.rv,
            "statefulsets.apps",
            name,
            resource_version,
            annotations,
        )?;
        st.emit_sts(WatchEvent::Apply(s.clone()));
        Ok(s)
    }
}

impl ScaleTargets for FakeCluster {
    async fn patch_statefulset_replicas(
        &self,
        name: &str,
        replicas: u32,
        resource_version: &str,
        annotations: &BTreeMap<String, String>,
    ) -> Result<StatefulSet, ApiError> {
        let mut st = self.state.lock().unwrap();
        st.calls.push(Call::PatchReplicas { name: name.into(), replicas, resource_version: resource_version.into() });
        if !annotations.is_empty() {
            st.calls.push(Call::PatchAnnotations {
                name: name.into(),
                resource_version: resource_version.into(),
                annotations: annotations.clone(),
            });
        }
        if let Some(err) = st.failures.pop_front().or_else(|| st.replica_patch_failures.pop_front()) {
            return Err(err);
        }
        let Some(mut s) = st.statefulsets.get(name).cloned() else {
            return Err(ApiError::NotFound(format!("statefulsets {name}")));
        };
        if !resource_version.is_empty() && Some(resource_version) != s.metadata.resource_version.as_deref() {
            return Err(ApiError::Conflict(format!("statefulsets {name}: the object has been modified")));
        }
        s.spec.as_mut().unwrap().replicas = Some(replicas as i32);
        s.metadata.annotations.get_or_insert_default().extend(annotations.clone());
        s.metadata.generation = Some(s.metadata.generation.unwrap_or(1) + 1);
        s.metadata.resource_version = Some(st.next_rv());
        st.statefulsets.insert(name.into(), s.clone());
        st.emit_sts(WatchEvent::Apply(s.clone()));
        if std::mem::take(&mut st.lose_next_reply) {
            return Err(ApiError::Unavailable(format!("patch statefulset {name}: connection reset")));
        }
        Ok(s)
    }

    async fn discover_resources(&self, group: &str, kind: &str) -> Result<Vec<ApiResourceRef>, ApiError> {
        let st = self.state.lock().unwrap();
        Ok(st.discovery.iter().filter(|r| r.group == group && r.kind == kind).cloned().collect())
    }

    async fn get_scale(&self, resource: &ApiResourceRef, name: &str) -> Result<serde_json::Value, ApiError> {
        let mut st = self.state.lock().unwrap();
        st.calls.push(Call::GetScale { plural: resource.plural.clone(), name: name.into() });
        let Some((spec, status)) = st.scale_targets.get(&(resource.plural.clone(), name.to_string())).copied() else {
            return Err(ApiError::NotFound(format!("{} \"{name}\" not found", resource.plural)));
        };
        let mut scale = serde_json::json!({
            "apiVersion": "autoscaling/v1", "kind": "Scale",
            "metadata": {"name": name}, "spec": {}, "status": {"replicas": status},
        });
        if let Some(spec) = spec {
            scale["spec"]["replicas"] = spec.into();
        }
        Ok(scale)
    }

    async fn patch_resource_status(
        &self,
        resource: &ApiResourceRef,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<(), ApiError> {
        let mut st = self.state.lock().unwrap();
        st.calls.push(Call::PatchResourceStatus {
            plural: resource.plural.clone(),
            name: name.into(),
            patch: patch.clone(),
        });
        let key = (resource.plural.clone(), name.to_string());
        let Some(target) = st.scale_targets.get_mut(&key) else {
            return Err(ApiError::NotFound(format!("{} \"{name}\" not found", resource.plural)));
        };
        if let Some(replicas) = patch.pointer("/status/replicas").and_then(|v| v.as_i64()) {
            target.1 = replicas;
        }
        Ok(())
    }
}

impl CertificateStore for FakeCluster {
    async fn get_secret(&self, name: &str) -> Result<Option<Secret>, ApiError> {
        let st = self.state.lock().unwrap();
        st.read()?;
        Ok(st.secrets.get(name).cloned())
    }

    async fn create_secret(&self, secret: &Secret) -> Result<Secret, ApiError> {
        let mut st = self.state.lock().unwrap();
        let name = secret.metadata.name.clone().unwrap_or_default();
        st.calls.push(Call::CreateSecret { name: name.clone() });
        if let Some(err) = st.failures.pop_front() {
            return Err(err);
        }
        if st.secrets.contains_key(&name) {
            return Err(ApiError::Conflict(format!("secrets \"{name}\" already exists")));
        }
        let mut secret = secret.clone();
        secret.metadata.resource_version = Some(st.next_rv());
        st.secrets.insert(name, secret.clone());
        Ok(secret)
    }

    async fn replace_secret(&self, secret: &Secret) -> Result<Secret, ApiError> {
        let mut st = self.state.lock().unwrap();
        let name = secret.metadata.name.clone().unwrap_or_default();
        st.calls.push(Call::ReplaceSecret { name: name.clone() });
        if let Some(err) = st.failures.pop_front() {
            return Err(err);
        }
        let Some(current) = st.secrets.get(&name) else {
            return Err(ApiError::NotFound(format!("secrets \"{name}\" not found")));
        };
        if secret.metadata.resource_version.is_some()
            && secret.metadata.resource_version != current.metadata.resource_version
        {
            return Err(ApiError::Conflict(format!("secrets \"{name}\": the object has been modified")));
        }
        let mut secret = secret.clone();
        secret.metadata.resource_version = Some(st.next_rv());
        st.secrets.insert(name, secret.clone());
        Ok(secret)
    }

    fn watch_webhook_configurations(
        &self,
        kind: WebhookKind,
        label_selector: &str,
    ) -> BoxStream<'static, Result<WatchEvent<WebhookConfiguration>, ApiError>> {
        let (tx, rx) = mpsc::unbounded();
        let mut st = self.state.lock().unwrap();
        let _ = tx.unbounded_send(Ok(WatchEvent::Init));
        for c in st.webhooks.values() {
            if c.kind() == kind && selector_matches(label_selector, c.metadata().labels.as_ref()) {
                let _ = tx.unbounded_send(Ok(WatchEvent::InitApply(c.clone())));
            }
        }
        let _ = tx.unbounded_send(Ok(WatchEvent::InitDone));
        st.webhook_watchers.push((kind, label_selector.to_string(), tx));
        rx.boxed()
    }

    async fn patch_webhook_configuration(
        &self,
        kind: WebhookKind,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<WebhookConfiguration, ApiError> {
        let current = {
            let mut st = self.state.lock().unwrap();
            st.calls.push(Call::PatchWebhook { kind, name: name.into(), patch: patch.clone() });
            if let Some(err) = st.failures.pop_front() {
                return Err(err);
            }
            let Some(current) = st.webhooks.get(&(kind.as_str().to_string(), name.to_string())).cloned() else {
                return Err(ApiError::NotFound(format!("{} {name}", kind.as_str())));
            };
            current
        };
        if let Some(rv) = patch.pointer("/metadata/resourceVersion").and_then(|v| v.as_str())
            && Some(rv) != current.metadata().resource_version.as_deref()
        {
            return Err(ApiError::Conflict(format!("{} {name}: the object has been modified", kind.as_str())));
        }
        let mut value = match &current {
            WebhookConfiguration::Validating(c) => serde_json::to_value(c),
            WebhookConfiguration::Mutating(c) => serde_json::to_value(c),
        }
        .expect("serialisable");
        merge(&mut value, patch);
        let invalid = |e: serde_json::Error| ApiError::Rejected { code: 422, message: e.to_string() };
        let updated = match kind {
            WebhookKind::Validating => {
                WebhookConfiguration::Validating(serde_json::from_value(value).map_err(invalid)?)
            }
            WebhookKind::Mutating => WebhookConfiguration::Mutating(serde_json::from_value(value).map_err(invalid)?),
        };
        self.put_webhook_configuration(updated);
        Ok(self.webhook_configuration(kind, name).expect("just stored"))
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

pub use rollout_operator::cluster::memory::{self, json_merge_patch as merge, selector_matches};

/// The fake cluster's watch streams, delivered to a controller's cache only when a test says so.
pub struct WatchFeed {
    statefulsets: BoxStream<'static, Result<WatchEvent<StatefulSet>, ApiError>>,
    pods: BoxStream<'static, Result<WatchEvent<Pod>, ApiError>>,
}

impl WatchFeed {
    pub fn new(cluster: &FakeCluster) -> Self {
        WatchFeed { statefulsets: cluster.watch_statefulsets(), pods: cluster.watch_pods() }
    }

    /// Applies every event delivered so far.
    pub fn pump(&mut self, cache: &mut rollout_operator::controller::cache::ClusterCache) {
        use futures::FutureExt;
        while let Some(Some(Ok(e))) = self.statefulsets.next().now_or_never() {
            cache.apply_statefulset_event(e);
        }
        while let Some(Some(Ok(e))) = self.pods.next().now_or_never() {
            cache.apply_pod_event(e);
        }
    }
}
