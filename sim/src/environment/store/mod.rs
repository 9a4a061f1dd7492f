//! The API server's storage ("etcd"): objects, one global resourceVersion counter, the event log watches are served
//! from (compacted, so a watch resuming too far back gets "too old resource version"), and the trace. It outlives
//! API server restarts. Writes by the cluster's own components (StatefulSet controller, kubelet, users) go straight
//! here; the operator's writes arrive through the API server node.

pub mod api;

use crate::Kind;
use crate::environment::objects::{PodSum, StsSum};
use crate::oracle::checker::Checker;
use crate::oracle::checker::budgets::BudgetRule;
use crate::trace::Trace;
use jiff::Timestamp;
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

/// A call to a pod's prepare-shutdown endpoint that got an answer (a call the webhook abandoned has none).
#[derive(Debug, Clone)]
pub struct PodCall {
    pub pod: String,
    /// POST (prepare); otherwise DELETE (cancel).
    pub post: bool,
    /// A 2xx answer.
    pub ok: bool,
    pub at: Instant,
}

/// The pods a denied downscale had prepared (each with when its POST succeeded), owed a DELETE after that.
#[derive(Debug, Clone)]
pub struct UndoOwed {
    pub what: String,
    pub pods: Vec<(String, Instant)>,
    pub denied_at: Instant,
}

impl Store {
    /// The pods' POSTs answered with success since `since` (each told to prepare for shutdown then).
    fn prepared_calls_since(&self, since: Instant) -> impl Iterator<Item = &PodCall> {
        self.pod_calls.iter().filter(move |c| c.post && c.ok && c.at >= since)
    }

    /// Whether `pod` answered a POST with success since `since`.
    pub fn prepared_since(&self, pod: &str, since: Instant) -> bool {
        self.prepared_calls_since(since).any(|c| c.pod == pod)
    }

    /// The pods of `sts` (`<sts>-<ordinal>`) that answered a POST with success since `since`, with when.
    pub fn prepared_pods_of(&self, sts: &str, since: Instant) -> Vec<(String, Instant)> {
        let prefix = format!("{sts}-");
        self.prepared_calls_since(since)
            .filter(|c| c.pod.strip_prefix(&prefix).is_some_and(|o| o.parse::<u32>().is_ok()))
            .map(|c| (c.pod.clone(), c.at))
            .collect()
    }
}

pub struct Store {
    /// The controller's reaction times and request counts.
    pub reactions: crate::oracle::reaction::Reactions,
    /// The readiness (`/ready`) of the latest single controller process: it must say it is ready once its caches
    /// have synced, or a real deployment's webhook Service never sends it a request.
    pub controller_ready: Option<rollout_operator::ops::health::ReadyFlag>,
    /// Per StatefulSet: when its `spec.replicas` last changed (for the interleaving statistics).
    pub(crate) replicas_changed: BTreeMap<String, Instant>,
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
    /// The certificate world's TLS checks and CA injections.
    pub certificates: crate::oracle::certificates::CertificateLedger,
    /// What the world did, for tests to count (the oracle's activity ledger).
    pub activity: crate::oracle::activity::Activity,
    /// Deployments and ReplicaSets (the no-downscale webhook's other kinds). Not watched.
    pub deployments: BTreeMap<String, k8s_openapi::api::apps::v1::Deployment>,
    pub replicasets: BTreeMap<String, k8s_openapi::api::apps::v1::ReplicaSet>,
    /// Mirror worlds: every value the reference resource's `spec.replicas` took, from when.
    pub reference_history: Vec<(Duration, u32)>,
    /// Delayed downscale: per pod, when it says it started preparing (whole seconds, as it answers), since its last
    /// cancel. A pod that goes away forgets it.
    pub prepared: BTreeMap<String, Timestamp>,
    pub log: VecDeque<LogEntry>,
    /// Watches resuming from a resourceVersion below this get "too old resource version".
    pub compacted_to: u64,
    pub log_capacity: usize,
    pub checker: Checker,
    pub trace: Trace,
    start: Instant,
    changes: Arc<Changes>,
    next_uid: u64,
    /// Who the StatefulSet writes now being committed come from, for the checker's downscale events (set around a
    /// replica change by the API server and the user; everything else is the cluster's own components).
    pub writer: String,
    /// The group downscale record's ConfigMap name (the controller's `-zone-tracker.config-map-name`).
    pub zone_tracker_config_map: String,
    /// Whether the controller's pod deletions must commit under a live rollout-step claim ([`ROLLOUT_STEP_CLAIMED`]).
    pub step_claims_required: bool,
    /// Whether the deployment's RBAC refuses the controller's replica changes (no `patch` on StatefulSets):
    /// followers and mirrors then keep their replicas, and only the rollout must converge.
    pub replica_changes_refused: bool,
    /// Whether the zone tracker is on but its record may not be written (RBAC): the followers' downscales, which
    /// must be claimed there, cannot happen, so a follower may end above its leader.
    pub follower_downscales_refused: bool,
    /// The webhook worlds' calls to the pods' prepare-shutdown endpoints that got an answer, in answer order.
    pub pod_calls: Vec<PodCall>,
    /// Denied downscales that had prepared pods: each pod is owed a DELETE (the undo), judged at the end of the run.
    pub undos_owed: Vec<UndoOwed>,
    /// Wall-clock time at the start of the run, to place the record's timestamps on the simulated timeline.
    pub(crate) start_wall: Timestamp,
    /// Downscales being prepared (invariant 5): StatefulSet -> (its group, the admission, its marker's `until`),
    /// from the commit of a record write carrying its in-progress marker until the world receives the webhook's
    /// answer ([`Store::end_preparing`]), or until the admission gives the downscale up first: its own record write
    /// removes the marker (an undo), or the marker expires. An admitted downscale commits before its marker expires
    /// (the webhook allows only with half the commit margin left on the marker), so neither ends the window of a
    /// downscale that happens; they end that of one being denied, whose answer may take seconds more to arrive.
    /// Only markers written by an admission still waiting for its answer count: a claim that commits after the
    /// webhook gave up on it (a delayed request) opens no window; the controller still honours its marker.
    pub preparing: BTreeMap<String, (String, u64, Timestamp)>,
    /// The admission (webhook client incarnation) whose request is being served, set around its record writes.
    pub admission_writing: Option<u64>,
    /// Admissions answered so far.
    pub answered: std::collections::BTreeSet<u64>,
    /// Admissions (webhook client incarnations) that recorded their downscale in the StatefulSet's
    /// `grafana.com/last-downscale` annotation (a `/scale` downscale without the zone tracker).
    pub recorded_by_admission: std::collections::BTreeSet<u64>,
    /// The last in-progress marker seen per StatefulSet (its `until`).
    pub(crate) markers_seen: BTreeMap<String, Timestamp>,
    /// Requests the API server refused for lack of a permission (RBAC profile), as `who: access`.
    pub forbidden: Vec<String>,
    /// Where the history stood when the writer of the replica change now being committed decided it (its
    /// review's arrival, or the controller's watch position); set around such writes, like `writer`.
    pub writer_basis: Option<u64>,
    /// Events the operator wrote (not watched; counted per run).
    pub events: crate::oracle::events::EventLog,
    /// How the webhook users' downscale requests ended ([`crate::webhook_user`]).
    pub scale_requests: crate::environment::guaranteed_update::ScaleRequestStats,
    /// Replica changes by the controller that committed (rollout steps, for the Event counts).
    pub controller_replica_changes: u64,
    /// ZoneAwarePodDisruptionBudgets, as the API server serves them (the drains worlds; changed during the run only
    /// by the budget editor of `--budget-edits`, through [`Store::put_budget`] and [`Store::delete_budget`]).
    pub budgets: Vec<serde_json::Value>,
    /// RolloutHealthChecks, as the API server serves them (the health-gated worlds'; they never change in a run).
    pub health_checks: Vec<serde_json::Value>,
    /// The health-gated worlds' release is bad: a second zone must never be started on it
    /// ([`crate::oracle::checker::HEALTH_GATE`]).
    pub bad_release: bool,
    /// `grafana.com/min-time-between-zones-downscale` of each StatefulSet, as the world meant the text it wrote
    /// (the checker's min time: not read back through the operator's parser).
    pub min_times: BTreeMap<String, Duration>,
    /// `grafana.com/rollout-delayed-downscale` of each StatefulSet, as the world meant the text it wrote.
    pub delayed_downscale_delays: BTreeMap<String, Duration>,
    /// The StatefulSets the world made mirrors of its reference resource (by the annotations it wrote, not as the
    /// operator's parser reads them: a parser that lost a mirror would otherwise hide it from the checker too).
    pub mirrors: std::collections::BTreeSet<String>,
    /// StatefulSets the world gave `grafana.com/rollout-force-replicas` while neither follower nor mirror
    /// (`--force-plain`), with the replicas they had then: the annotation is ignored there, as in the reference, so
    /// the controller never changes their replicas ([`crate::oracle::checker::FORCE_IGNORED`]).
    pub force_ignored: BTreeMap<String, i32>,
    /// StatefulSets whose delayed-downscale annotations are malformed as the world wrote them (until a user corrects
    /// them): the reference scales such a StatefulSet in neither direction.
    pub delayed_downscale_malformed: std::collections::BTreeSet<String>,
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
    /// The HA world: the replica processes and the Lease's truth, by which their controllers' writes are judged.
    pub ha: crate::oracle::election::Ledger,
}

pub type SharedStore = Arc<Mutex<Store>>;

fn rv_string(rv: u64) -> Option<String> {
    Some(rv.to_string())
}

impl Store {
    pub fn new(trace: Trace, log_capacity: usize) -> Self {
        Store {
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
            certificates: Default::default(),
            activity: Default::default(),
            chase: None,
            deployments: BTreeMap::new(),
            replicasets: BTreeMap::new(),
            reference_history: Vec::new(),
            prepared: BTreeMap::new(),
            log: VecDeque::new(),
            compacted_to: 0,
            log_capacity,
            checker: Checker::default(),
            trace,
            start: Instant::now(),
            changes: Arc::default(),
            next_uid: 0,
            writer: "cluster".to_string(),
            zone_tracker_config_map: rollout_operator::rollout::scaling::ScalingConfig::default()
                .zone_tracker_config_map
                .unwrap_or_default(),
            step_claims_required: false,
            replica_changes_refused: false,
            follower_downscales_refused: false,
            pod_calls: Vec::new(),
            undos_owed: Vec::new(),
            start_wall: Timestamp::now(),
            preparing: BTreeMap::new(),
            admission_writing: None,
            answered: Default::default(),
            recorded_by_admission: Default::default(),
            markers_seen: BTreeMap::new(),
            forbidden: Vec::new(),
            writer_basis: None,
            replicas_changed: BTreeMap::new(),
            reactions: Default::default(),
            events: Default::default(),
            scale_requests: Default::default(),
            controller_replica_changes: 0,
            budgets: Vec::new(),
            health_checks: Vec::new(),
            bad_release: false,
            min_times: BTreeMap::new(),
            delayed_downscale_delays: BTreeMap::new(),
            mirrors: std::collections::BTreeSet::new(),
            force_ignored: BTreeMap::new(),
            delayed_downscale_malformed: Default::default(),
            budgets_created: 0,
            budget_watches_down: false,
            budget_resume_floor: 0,
            leases: BTreeMap::new(),
            ha: Default::default(),
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

    fn commit(&mut self, deleted: bool, obj: Obj) {
        let rv = self.rv;
        match &obj {
            Obj::Sts(s) => {
                let name = s.metadata.name.clone().unwrap_or_default();
                self.checker.record_sts(rv, &name, (!deleted).then(|| StsSum::of(s)));
            }
            Obj::Pod(p) => {
                let name = p.metadata.name.clone().unwrap_or_default();
                self.checker.record_pod(rv, &name, (!deleted).then(|| PodSum::of(p)));
            }
            Obj::Budget(b) => {
                let at = self.elapsed();
                let name = b.pointer("/metadata/name").and_then(serde_json::Value::as_str).unwrap_or_default();
                self.checker.record_budget(rv, at, name, if deleted { None } else { BudgetRule::read(b) });
            }
            Obj::Webhook(_) => {}
        }
        if let Obj::Pod(p) = &obj
            && !deleted
            && p.metadata.deletion_timestamp.is_none()
            && crate::environment::objects::is_ready(p)
        {
            let at = self.elapsed();
            let revision = crate::environment::objects::pod_revision(p);
            self.reactions.pod_ready(p.metadata.name.as_deref().unwrap_or_default(), &revision, at);
            if let Some(chase) = self.chase.as_mut() {
                chase.first_ready(p);
            }
        }
        let group = match &obj {
            Obj::Sts(s) => s.metadata.labels.as_ref().and_then(|l| l.get(rollout_core::keys::ROLLOUT_GROUP).cloned()),
            Obj::Pod(p) => self.group_of_pod(p),
            // The controller does not react to budgets or webhook configurations.
            Obj::Budget(_) | Obj::Webhook(_) => None,
        };
        if let Some(group) = group {
            let actionable = self.has_work(&group);
            let kind = obj.kind();
            let commit = crate::oracle::reaction::Wait { since: self.elapsed(), kind, rv };
            self.reactions.group_committed(&group, actionable, commit);
        }
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
        self.commit(false, Obj::Budget(Box::new(budget.clone())));
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
        self.commit(false, Obj::Webhook(Box::new(config.clone())));
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
        self.commit(true, Obj::Budget(Box::new(budget)));
        true
    }

    pub fn put_statefulset(&mut self, mut sts: StatefulSet) -> StatefulSet {
        let replicas_of = |s: &StatefulSet| s.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1).max(0) as u32;
        if let Some(from) = sts.metadata.name.as_ref().and_then(|n| self.statefulsets.get(n)).map(replicas_of)
            && replicas_of(&sts) != from
        {
            self.replicas_changed.insert(sts.metadata.name.clone().unwrap_or_default(), Instant::now());
            if replicas_of(&sts) < from {
                self.note_downscale(&sts, from, replicas_of(&sts));
            }
        }
        self.rv += 1;
        sts.metadata.resource_version = rv_string(self.rv);
        let name = sts.metadata.name.clone().unwrap_or_default();
        self.statefulsets.insert(name, sts.clone());
        self.commit(false, Obj::Sts(Box::new(sts.clone())));
        sts
    }

    /// The rollout group of `sts`, if it has one.
    pub fn group_of_statefulset(&self, sts: &str) -> Option<String> {
        let labels = self.statefulsets.get(sts)?.metadata.labels.as_ref()?;
        labels.get(rollout_core::keys::ROLLOUT_GROUP).cloned()
    }

    /// The rollout group of the StatefulSet that owns `pod`.
    pub fn group_of_pod(&self, pod: &Pod) -> Option<String> {
        let owners = pod.metadata.owner_references.as_ref()?;
        let owner = owners.iter().find(|o| o.kind == "StatefulSet")?;
        self.group_of_statefulset(&owner.name)
    }

    pub fn put_pod(&mut self, mut pod: Pod) -> Pod {
        self.rv += 1;
        pod.metadata.resource_version = rv_string(self.rv);
        let name = pod.metadata.name.clone().unwrap_or_default();
        self.pods.insert(name, pod.clone());
        self.commit(false, Obj::Pod(Box::new(pod.clone())));
        pod
    }

    pub fn remove_pod(&mut self, name: &str) {
        self.prepared.remove(name);
        if let Some(mut pod) = self.pods.remove(name) {
            self.rv += 1;
            pod.metadata.resource_version = rv_string(self.rv);
            self.commit(true, Obj::Pod(Box::new(pod)));
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
