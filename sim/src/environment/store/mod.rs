//! The API server's storage ("etcd"): objects, one global resourceVersion counter, the event log watches are served
//! from (compacted, so a watch resuming too far back gets "too old resource version"), and the trace. It outlives
//! API server restarts. Writes by the cluster's own components (StatefulSet controller, kubelet, users) go straight
//! here; the operator's writes arrive through the API server node.
//!
//! Every commit is told to the oracle ([`Oracle::committed`]) with who wrote it and a read-only view of the objects;
//! the store itself judges nothing. The oracle and the world's record live beside the objects, under the same lock,
//! so that a commit and its judgement are one step; neither is part of what the API server serves.

pub mod api;

use crate::Kind;
use crate::actors::world_record::WorldRecord;
use crate::oracle::Oracle;
use crate::oracle::commit_rules::{Change, Commit, Objects, Writer};
use crate::trace::Trace;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use rollout_operator::cluster::{ApiResourceRef, WebhookConfiguration, WebhookKind};

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::Duration;
use tokio::time::Instant;

#[derive(Debug, Clone)]
pub enum Obj {
    Sts(Box<StatefulSet>),
    Pod(Box<Pod>),
    Budget(Box<serde_json::Value>),
    Webhook(Box<WebhookConfiguration>),
}

impl Obj {
    fn as_pod(&self) -> Option<&Pod> {
        match self {
            Obj::Pod(p) => Some(p),
            _ => None,
        }
    }

    fn as_statefulset(&self) -> Option<&StatefulSet> {
        match self {
            Obj::Sts(s) => Some(s),
            _ => None,
        }
    }

    fn kind(&self) -> Kind {
        match self {
            Obj::Sts(_) => Kind::StatefulSets,
            Obj::Pod(_) => Kind::Pods,
            Obj::Budget(_) => Kind::Budgets,
            Obj::Webhook(c) => match c.kind() {
                WebhookKind::Validating => Kind::ValidatingWebhooks,
                WebhookKind::Mutating => Kind::MutatingWebhooks,
            },
        }
    }
}

#[derive(Debug, Clone)]
pub struct LogEntry {
    pub rv: u64,
    pub at: Instant,
    pub deleted: bool,
    pub obj: Obj,
}

impl LogEntry {
    pub fn kind(&self) -> Kind {
        self.obj.kind()
    }
}

/// Change notification for tasks that follow the store. Deliberately not `tokio::sync::watch`: its notifier picks
/// one of several internal queues at random from a thread-local generator madsim does not control, which made runs
/// of one seed wake tasks in different orders. Wakers here are woken in the order they registered.
#[derive(Debug, Default)]
pub struct Changes {
    inner: Mutex<(u64, Vec<Waker>)>,
}

impl Changes {
    fn bump(&self) {
        let wakers = {
            let mut g = self.inner.lock().unwrap();
            g.0 += 1;
            std::mem::take(&mut g.1)
        };
        for w in wakers {
            w.wake();
        }
    }

    pub fn version(&self) -> u64 {
        self.inner.lock().unwrap().0
    }

    /// Resolves once something changed after `version`.
    pub fn changed_since(&self, version: u64) -> impl Future<Output = ()> + '_ {
        std::future::poll_fn(move |cx| {
            let mut g = self.inner.lock().unwrap();
            if g.0 > version {
                Poll::Ready(())
            } else {
                g.1.push(cx.waker().clone());
                Poll::Pending
            }
        })
    }
}

pub struct Store {
    /// The judge, told of every commit ([`Oracle::committed`]).
    pub oracle: Oracle,
    /// What the world meant by what it wrote, and what its pods said (never read by the API server).
    pub world: WorldRecord,
    /// Who the write now being committed comes from, set around a request by the API server and around the users'
    /// replica changes; everything else is the cluster's own components.
    pub writing: Writer,
    /// The readiness (`/ready`) of the latest single controller process: it must say it is ready once its caches
    /// have synced, or a real deployment's webhook Service never sends it a request.
    pub controller_ready: Option<rollout_operator::ops::health::ReadyFlag>,
    pub rv: u64,
    /// The API server is down (crashed, not started again), and how many times it crashed: a request whose
    /// admission a crash interrupted is lost, nothing of it stored.
    pub apiserver_down: bool,
    pub apiserver_crashes: u64,
    pub statefulsets: BTreeMap<String, StatefulSet>,
    pub pods: BTreeMap<String, Pod>,
    /// ConfigMaps (the group downscale record). Not watched, so their writes take a resourceVersion but make no
    /// watch event.
    pub config_maps: BTreeMap<String, ConfigMap>,
    /// Resources API discovery reports (mirror reference kinds).
    pub api_resources: Vec<ApiResourceRef>,
    /// Reference resources with `scale` and `status` subresources, by (plural, name): the object as JSON, with
    /// `spec.replicas` and `status.replicas`. Not watched.
    pub scale_targets: BTreeMap<(String, String), serde_json::Value>,
    /// Secrets (the webhook certificate). Not watched either.
    pub secrets: BTreeMap<String, Secret>,
    /// Validating- and MutatingWebhookConfigurations by kind and name (the certificate world's, each labelled for
    /// CA injection). Watched.
    pub webhook_configurations: BTreeMap<(WebhookKind, String), WebhookConfiguration>,
    /// The chasing drains' triggers (`Drains::chase`); `None` in every other world.
    pub chase: Option<ChaseTriggers>,
    /// Deployments and ReplicaSets (the no-downscale webhook's other kinds). Not watched.
    pub deployments: BTreeMap<String, k8s_openapi::api::apps::v1::Deployment>,
    pub replicasets: BTreeMap<String, k8s_openapi::api::apps::v1::ReplicaSet>,
    pub log: VecDeque<LogEntry>,
    /// Watches resuming from a resourceVersion below this get "too old resource version".
    pub compacted_to: u64,
    pub log_capacity: usize,
    pub trace: Trace,
    start: Instant,
    changes: Arc<Changes>,
    next_uid: u64,
    /// The group downscale record's ConfigMap name (the controller's `-zone-tracker.config-map-name`).
    pub zone_tracker_config_map: String,
    /// Events the operator wrote (not watched; counted per run).
    pub events: crate::oracle::events::EventLog,
    /// ZoneAwarePodDisruptionBudgets, as the API server serves them (the drains worlds; changed during the run only
    /// by the budget editor of `--budget-edits`, through [`Store::put_budget`] and [`Store::delete_budget`]).
    pub budgets: Vec<serde_json::Value>,
    /// RolloutHealthChecks, as the API server serves them (the health-gated worlds'; they never change in a run).
    pub health_checks: Vec<serde_json::Value>,
    /// Budget objects created so far (their uids).
    budgets_created: u64,
    /// The budget-edits worlds' outage of the budget watches (a network cut between the operator replicas and the
    /// API server's watches, as long as it lasts): open watches end and new ones are cut at once.
    pub budget_watches_down: bool,
    /// After such an outage, resuming a budget watch from before this resourceVersion is "too old" (the events of
    /// the outage were compacted): the watch relists, and what happened meanwhile is known only by the list.
    pub budget_resume_floor: u64,
    /// Leases (`coordination.k8s.io/v1`, the HA world's leader election). Not watched.
    pub leases: BTreeMap<String, k8s_openapi::api::coordination::v1::Lease>,
}

pub type SharedStore = Arc<Mutex<Store>>;

fn rv_string(rv: u64) -> Option<String> {
    Some(rv.to_string())
}

impl Store {
    pub fn new(trace: Trace, log_capacity: usize) -> Self {
        Store {
            oracle: Oracle::default(),
            world: WorldRecord::default(),
            writing: Writer::cluster(),
            controller_ready: None,
            rv: 0,
            apiserver_down: false,
            apiserver_crashes: 0,
            statefulsets: BTreeMap::new(),
            pods: BTreeMap::new(),
            config_maps: BTreeMap::new(),
            api_resources: Vec::new(),
            scale_targets: BTreeMap::new(),
            secrets: BTreeMap::new(),
            webhook_configurations: BTreeMap::new(),
            chase: None,
            deployments: BTreeMap::new(),
            replicasets: BTreeMap::new(),
            log: VecDeque::new(),
            compacted_to: 0,
            log_capacity,
            trace,
            start: Instant::now(),
            changes: Arc::default(),
            next_uid: 0,
            zone_tracker_config_map: rollout_operator::rollout::scaling::ScalingConfig::default()
                .zone_tracker_config_map
                .unwrap_or_default(),
            events: Default::default(),
            budgets: Vec::new(),
            health_checks: Vec::new(),
            budgets_created: 0,
            budget_watches_down: false,
            budget_resume_floor: 0,
            leases: BTreeMap::new(),
        }
    }

    /// Simulated time since the run started.
    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// `at` as simulated time since the run started.
    pub fn since_start(&self, at: Instant) -> Duration {
        at.saturating_duration_since(self.start)
    }

    pub fn subscribe(&self) -> Arc<Changes> {
        self.changes.clone()
    }

    /// Wakes every task following the store, as a change would (for changes made outside the store, such as the
    /// kubelet's timers being shortened when faults heal).
    pub fn wake_followers(&self) {
        self.changes.bump();
    }

    pub fn trace(&mut self, who: &str, what: impl AsRef<str>) {
        let at = self.elapsed();
        self.trace.record(at, who, what);
    }

    pub fn new_uid(&mut self, pod: &str) -> String {
        self.next_uid += 1;
        format!("{pod}-{}", self.next_uid)
    }

    /// The API server's objects, read-only (as the oracle sees them).
    pub fn objects(&self) -> Objects<'_> {
        Objects {
            statefulsets: &self.statefulsets,
            pods: &self.pods,
            config_maps: &self.config_maps,
            record: &self.zone_tracker_config_map,
        }
    }

    /// Runs `write` with the writer `set` describes (who writes, what it knew, what it asked), for the oracle's
    /// rules of the commits it makes; the writer before it is restored afterwards, so writers nest.
    pub fn writing_as<T>(&mut self, set: impl FnOnce(&mut Writer), write: impl FnOnce(&mut Store) -> T) -> T {
        let before = self.writing.clone();
        set(&mut self.writing);
        let written = write(self);
        self.writing = before;
        written
    }

    /// Tells the oracle of a commit at the current resourceVersion (before any watch hears of it).
    pub(crate) fn judge(&mut self, change: Change<'_>) {
        let commit = Commit { rv: self.rv, at: self.elapsed(), by: &self.writing, change };
        let objects = Objects {
            statefulsets: &self.statefulsets,
            pods: &self.pods,
            config_maps: &self.config_maps,
            record: &self.zone_tracker_config_map,
        };
        self.oracle.committed(&commit, &objects, &self.world, &mut self.trace);
    }

    /// A watched object committed: judged, then appended to the event log watches are served from. `before` is the
    /// version it replaced.
    fn commit(&mut self, deleted: bool, obj: Obj, before: Option<Obj>) {
        let change = match (&obj, before.as_ref()) {
            (Obj::Pod(p), b) => Change::Pod { before: b.and_then(Obj::as_pod), after: p.as_ref(), removed: deleted },
            (Obj::Sts(s), b) => Change::StatefulSet { before: b.and_then(Obj::as_statefulset), after: s.as_ref() },
            (Obj::Budget(b), _) => Change::Budget { object: b.as_ref(), deleted },
            (Obj::Webhook(_), _) => Change::WebhookConfiguration,
        };
        self.judge(change);
        if let Obj::Pod(p) = &obj
            && !deleted
            && p.metadata.deletion_timestamp.is_none()
            && crate::environment::objects::is_ready(p)
            && let Some(chase) = self.chase.as_mut()
        {
            chase.first_ready(p);
        }
        let rv = self.rv;
        self.log.push_back(LogEntry { rv, at: Instant::now(), deleted, obj });
        while self.log.len() > self.log_capacity {
            if let Some(e) = self.log.pop_front() {
                self.compacted_to = e.rv;
            }
        }
        self.changes.bump();
    }

    /// Creates or updates a ZoneAwarePodDisruptionBudget, as the API server commits one (after its admission): a new
    /// object gets a new uid and generation 1; an update of a live one keeps its uid and raises the generation only
    /// when the spec changed (a metadata-only update keeps it). Returns the object stored.
    pub fn put_budget(&mut self, mut budget: serde_json::Value) -> serde_json::Value {
        let name = budget.pointer("/metadata/name").and_then(serde_json::Value::as_str).unwrap_or_default().to_string();
        let known = self.budgets.iter().position(|b| b.pointer("/metadata/name") == budget.pointer("/metadata/name"));
        let (uid, generation) = match known.map(|i| &self.budgets[i]) {
            Some(old) => {
                let generation = old.pointer("/metadata/generation").and_then(serde_json::Value::as_i64).unwrap_or(1);
                let changed = old.get("spec") != budget.get("spec");
                (old.pointer("/metadata/uid").cloned(), generation + i64::from(changed))
            }
            None => {
                self.budgets_created += 1;
                (Some(serde_json::json!(format!("uid-{name}-{}", self.budgets_created))), 1)
            }
        };
        self.rv += 1;
        let metadata = &mut budget["metadata"];
        metadata["uid"] = uid.unwrap_or_default();
        metadata["generation"] = serde_json::json!(generation);
        metadata["resourceVersion"] = serde_json::json!(self.rv.to_string());
        match known {
            Some(i) => self.budgets[i] = budget.clone(),
            None => self.budgets.push(budget.clone()),
        }
        self.commit(false, Obj::Budget(Box::new(budget.clone())), None);
        budget
    }

    /// Creates or replaces a webhook configuration with a new resourceVersion, as an install or a patch commits it.
    pub fn put_webhook_configuration(&mut self, mut config: WebhookConfiguration) -> WebhookConfiguration {
        self.rv += 1;
        let meta = match &mut config {
            WebhookConfiguration::Validating(c) => &mut c.metadata,
            WebhookConfiguration::Mutating(c) => &mut c.metadata,
        };
        meta.resource_version = Some(self.rv.to_string());
        let name = meta.name.clone().unwrap_or_default();
        let key = (config.kind(), name);
        self.webhook_configurations.insert(key, config.clone());
        self.commit(false, Obj::Webhook(Box::new(config.clone())), None);
        config
    }

    /// Deletes a ZoneAwarePodDisruptionBudget; whether it existed.
    pub fn delete_budget(&mut self, name: &str) -> bool {
        let Some(i) =
            self.budgets.iter().position(|b| b.pointer("/metadata/name").and_then(|n| n.as_str()) == Some(name))
        else {
            return false;
        };
        let mut budget = self.budgets.remove(i);
        self.rv += 1;
        budget["metadata"]["resourceVersion"] = serde_json::json!(self.rv.to_string());
        self.commit(true, Obj::Budget(Box::new(budget)), None);
        true
    }

    pub fn put_statefulset(&mut self, mut sts: StatefulSet) -> StatefulSet {
        self.rv += 1;
        sts.metadata.resource_version = rv_string(self.rv);
        let name = sts.metadata.name.clone().unwrap_or_default();
        let before = self.statefulsets.insert(name, sts.clone());
        self.commit(false, Obj::Sts(Box::new(sts.clone())), before.map(|b| Obj::Sts(Box::new(b))));
        sts
    }

    /// The rollout group of `sts`, if it has one.
    pub fn group_of_statefulset(&self, sts: &str) -> Option<String> {
        self.objects().group_of_statefulset(sts)
    }

    /// The rollout group of the StatefulSet that owns `pod`.
    pub fn group_of_pod(&self, pod: &Pod) -> Option<String> {
        self.objects().group_of_pod(pod)
    }

    pub fn put_pod(&mut self, mut pod: Pod) -> Pod {
        self.rv += 1;
        pod.metadata.resource_version = rv_string(self.rv);
        let name = pod.metadata.name.clone().unwrap_or_default();
        let before = self.pods.insert(name, pod.clone());
        self.commit(false, Obj::Pod(Box::new(pod.clone())), before.map(|b| Obj::Pod(Box::new(b))));
        pod
    }

    pub fn remove_pod(&mut self, name: &str) {
        self.world.prepared.remove(name);
        if let Some(mut pod) = self.pods.remove(name) {
            self.rv += 1;
            pod.metadata.resource_version = rv_string(self.rv);
            self.commit(true, Obj::Pod(Box::new(pod)), None);
        }
    }

    /// Objects of one kind, as a list response.
    pub fn list(&self, kind: Kind) -> Vec<Obj> {
        match kind {
            Kind::StatefulSets => self.statefulsets.values().map(|s| Obj::Sts(Box::new(s.clone()))).collect(),
            Kind::Pods => self.pods.values().map(|p| Obj::Pod(Box::new(p.clone()))).collect(),
            Kind::Budgets => self.budgets.iter().map(|b| Obj::Budget(Box::new(b.clone()))).collect(),
            Kind::ValidatingWebhooks | Kind::MutatingWebhooks => self
                .webhook_configurations
                .values()
                .map(|c| Obj::Webhook(Box::new(c.clone())))
                .filter(|o| o.kind() == kind)
                .collect(),
        }
    }

    /// The StatefulSets of `sts`'s pods, by ordinal, for the timeline: `r1R r1r r0R* -`.
    pub fn describe(&self) -> String {
        let mut out = Vec::new();
        for (name, sts) in &self.statefulsets {
            let status = sts.status.clone().unwrap_or_default();
            let replicas = sts.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
            let rev_of = |r: &str| r.rsplit('-').next().unwrap_or("").to_string();
            let pods: Vec<String> = (0..replicas)
                .map(|i| match self.pods.get(&format!("{name}-{i}")) {
                    None => "-".to_string(),
                    Some(p) => format!(
                        "{}{}{}",
                        rev_of(&crate::environment::objects::pod_revision(p)),
                        if crate::environment::objects::is_ready(p) { "R" } else { "r" },
                        if p.metadata.deletion_timestamp.is_some() { "*" } else { "" }
                    ),
                })
                .collect();
            let paused = sts
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.get(rollout_core::keys::ROLLOUT_PAUSED).is_some_and(|v| v == "true"));
            out.push(format!(
                "{} cur={} upd={}{} [{}]",
                name.rsplit('-').next().unwrap_or(name),
                rev_of(status.current_revision.as_deref().unwrap_or("")),
                rev_of(status.update_revision.as_deref().unwrap_or("")),
                if paused { " PAUSED" } else { "" },
                pods.join(" ")
            ));
        }
        out.join(" | ")
    }
}

/// When evictions chase the controller (`Drains::chase`): the StatefulSets whose pods to evict next, queued at the
/// instants the controller's next step is decided or made: a pod of theirs first showing Ready (the controller's
/// next deletion follows it) and a controller's deletion of one of their pods reaching the API server.
#[derive(Debug, Default)]
pub struct ChaseTriggers {
    pub queue: VecDeque<String>,
    ready_seen: std::collections::BTreeSet<String>,
}

impl ChaseTriggers {
    fn first_ready(&mut self, pod: &Pod) {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        if self.ready_seen.insert(uid) {
            self.queue.push_back(crate::environment::objects::owner_of(pod));
        }
    }

    pub fn controller_deletes(&mut self, statefulset: String) {
        self.queue.push_back(statefulset);
    }
}
