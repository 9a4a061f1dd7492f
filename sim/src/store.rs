//! The API server's storage ("etcd"): objects, one global resourceVersion counter, the event log watches are served
//! from (compacted, so a watch resuming too far back gets "too old resource version"), the checker's history, and
//! the trace. It outlives API server restarts. Writes by the cluster's own components (StatefulSet controller,
//! kubelet, users) go straight here; the rollout controller's writes arrive through the API server node and are
//! judged by the checker before they commit.

use crate::checker::{BudgetRule, Checker, Knowledge};
use crate::objects::{self, PodSum, StsSum};
use crate::trace::Trace;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use rollout_operator::cluster::{ApiError, ApiResourceRef, Preconditions};
use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::Duration;
use tokio::time::Instant;

use crate::Kind;

#[derive(Debug, Clone)]
pub enum Obj {
    Sts(Box<StatefulSet>),
    Pod(Box<Pod>),
    Budget(Box<serde_json::Value>),
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
        match self.obj {
            Obj::Sts(_) => Kind::StatefulSets,
            Obj::Pod(_) => Kind::Pods,
            Obj::Budget(_) => Kind::Budgets,
        }
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
    pub reactions: crate::reaction::Reactions,
    /// The readiness (`/ready`) of the latest single controller process: it must say it is ready once its caches
    /// have synced, or a real deployment's webhook Service never sends it a request.
    pub controller_ready: Option<rollout_operator::ops::health::ReadyFlag>,
    /// Per StatefulSet: when its `spec.replicas` last changed (for the interleaving statistics).
    replicas_changed: BTreeMap<String, Instant>,
    pub rv: u64,
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
    /// The zone tracker's ConfigMap name (the controller's `-zone-tracker.config-map-name`).
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
    start_wall: Timestamp,
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
    markers_seen: BTreeMap<String, Timestamp>,
    /// Requests the API server refused for lack of a permission (RBAC profile), as `who: access`.
    pub forbidden: Vec<String>,
    /// Where the history stood when the writer of the replica change now being committed decided it (its
    /// review's arrival, or the controller's watch position); set around such writes, like `writer`.
    pub writer_basis: Option<u64>,
    /// Events the operator wrote (not watched; counted per run).
    pub events: crate::events::EventLog,
    /// How the webhook users' downscale requests ended ([`crate::webhook_user`]).
    pub scale_requests: crate::guaranteed_update::ScaleRequestStats,
    /// Replica changes by the controller that committed (rollout steps, for the Event counts).
    pub controller_replica_changes: u64,
    /// ZoneAwarePodDisruptionBudgets, as the API server serves them (the drains worlds; changed during the run only
    /// by the budget editor of `--budget-edits`, through [`Store::put_budget`] and [`Store::delete_budget`]).
    pub budgets: Vec<serde_json::Value>,
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
    /// the controller never changes their replicas ([`crate::checker::FORCE_IGNORED`]).
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
    pub ha: crate::ha::Ledger,
}

pub type SharedStore = Arc<Mutex<Store>>;

/// A downscale marker as the checker reads it.
struct Marker {
    statefulset: String,
    group: String,
    until: Timestamp,
}

/// The in-progress markers of the record's annotation, read by the checker itself (a JSON object of
/// `{"<statefulset>": {"group": "<group>", "until": "<RFC 3339>"}}`), not by the operator's parser: a
/// parser that lost markers would otherwise hide them from the operator and the checker alike (`until` is read by
/// jiff's timestamp parser, a little broader than RFC 3339). The entries it cannot read come second (the whole
/// annotation, when it is not such an object), for `RECORD_MARKERS_READABLE`.
fn markers_in(raw: Option<&str>) -> (Vec<Marker>, Vec<String>) {
    let Some(raw) = raw else { return (Vec::new(), Vec::new()) };
    let Ok(serde_json::Value::Object(map)) = serde_json::from_str(raw) else {
        return (Vec::new(), vec![format!("the annotation {raw:?}")]);
    };
    let mut unreadable = Vec::new();
    let markers = map
        .into_iter()
        .filter_map(|(statefulset, marker)| {
            let read = || {
                let group = marker.get("group")?.as_str()?.to_string();
                let until = marker.get("until")?.as_str()?.parse::<Timestamp>().ok()?;
                Some((group, until))
            };
            match read() {
                Some((group, until)) => Some(Marker { statefulset, group, until }),
                None => {
                    unreadable.push(format!("{statefulset}: {marker}"));
                    None
                }
            }
        })
        .collect();
    (markers, unreadable)
}

fn rv_string(rv: u64) -> Option<String> {
    Some(rv.to_string())
}

impl Store {
    pub fn new(trace: Trace, log_capacity: usize) -> Self {
        Store {
            controller_ready: None,
            rv: 0,
            statefulsets: BTreeMap::new(),
            pods: BTreeMap::new(),
            config_maps: BTreeMap::new(),
            api_resources: Vec::new(),
            scale_targets: BTreeMap::new(),
            secrets: BTreeMap::new(),
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
        }
        if let Obj::Pod(p) = &obj
            && !deleted
            && p.metadata.deletion_timestamp.is_none()
            && crate::objects::is_ready(p)
        {
            let at = self.elapsed();
            self.reactions.pod_ready(p.metadata.name.as_deref().unwrap_or_default(), at);
        }
        let group = match &obj {
            Obj::Sts(s) => s.metadata.labels.as_ref().and_then(|l| l.get(rollout_core::keys::ROLLOUT_GROUP).cloned()),
            Obj::Pod(p) => self.group_of_pod(p),
            // The controller does not react to budgets.
            Obj::Budget(_) => None,
        };
        if let Some(group) = group {
            let actionable = self.has_work(&group);
            let kind = match &obj {
                Obj::Sts(_) => Kind::StatefulSets,
                Obj::Pod(_) => Kind::Pods,
                Obj::Budget(_) => Kind::Budgets,
            };
            let commit = crate::reaction::Wait { since: self.elapsed(), kind, rv };
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

    /// Hands a decrease of `sts`'s replicas (about to commit) to the checker, with the record's entry for it (for the
    /// trace).
    fn note_downscale(&mut self, sts: &StatefulSet, from: u32, to: u32) {
        let name = sts.metadata.name.clone().unwrap_or_default();
        // The min time the world wrote, as it meant it: the operator's parser must not judge itself.
        let min_time = self.min_times.get(&name).copied();
        let group = sts
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(rollout_core::keys::ROLLOUT_GROUP).cloned())
            .unwrap_or_default();
        let follower = sts
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(rollout_core::keys::ROLLOUT_DOWNSCALE_LEADER));
        // Force replicas is read on followers and mirrors only (elsewhere it is ignored, and so not exempt).
        let exempt = (follower || self.mirrors.contains(&name))
            && sts
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(rollout_core::keys::ROLLOUT_FORCE_REPLICAS));
        let entry = self
            .config_maps
            .get(&self.zone_tracker_config_map)
            .and_then(|cm| {
                rollout_core::DownscaleRecord::from_config_map_data(&cm.data.clone().unwrap_or_default()).ok()
            })
            .and_then(|r| r.last_downscaled.get(&name).copied());
        let recorded_at = entry.map(|e| {
            let since = e.duration_since(self.start_wall);
            Duration::try_from(since).unwrap_or(Duration::ZERO)
        });
        let d = crate::checker::Downscale {
            commit_rv: self.rv + 1,
            basis_rv: self.writer_basis,
            at: self.elapsed(),
            sts: name,
            group,
            from,
            to,
            by: self.writer.clone(),
            min_time,
            recorded_at,
            exempt,
            follower,
        };
        self.trace("scaling", format!("downscale {}", d.describe()));
        self.checker.record_downscale(d);
    }

    /// Whether the production planner, run on the committed truth of `group`, has a pod to delete or replicas to
    /// change (for the reaction measurement).
    fn has_work(&self, group: &str) -> bool {
        let members: Vec<_> = self
            .statefulsets
            .values()
            .filter(|s| {
                s.metadata.labels.as_ref().and_then(|l| l.get(rollout_core::keys::ROLLOUT_GROUP)).map(String::as_str)
                    == Some(group)
            })
            .filter_map(|s| rollout_core::StatefulSetView::from_k8s(s).ok())
            .collect();
        let pods: Vec<_> = self.pods.values().filter_map(|p| rollout_core::PodView::from_k8s(p).ok()).collect();
        let now = self.start_wall + jiff::SignedDuration::try_from(self.elapsed()).unwrap_or_default();
        rollout_core::build_groups(members, &pods).iter().any(|g| {
            let plan = rollout_core::plan_group(g, &rollout_core::PlanContext::new(now, &[]));
            plan.actions
                .iter()
                .any(|a| matches!(a, rollout_core::Action::DeletePod { .. } | rollout_core::Action::Scale { .. }))
        })
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

    /// [`ROLLOUT_STEP_CLAIMED`]: the record's `{"<group>":{"until":"<RFC 3339>"}}`, read here as documented.
    fn judge_step_claimed(&mut self, at: Duration, pod: &Pod, k: Knowledge) {
        let Some(group) = self.group_of_pod(pod) else { return };
        let now = Timestamp::now();
        let steps = self.config_maps.get(&self.zone_tracker_config_map).and_then(|cm| {
            cm.metadata.annotations.as_ref()?.get(rollout_core::keys::ROLLOUT_STEPS_IN_PROGRESS).cloned()
        });
        let until = steps
            .as_deref()
            .and_then(|raw| serde_json::from_str::<serde_json::Value>(raw).ok())
            .and_then(|v| v.pointer(&format!("/{group}/until"))?.as_str()?.parse::<Timestamp>().ok());
        if until.is_none_or(|until| until <= now) {
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            let claim = until.map_or("none".to_string(), |u| format!("expired at {u}"));
            let detail = format!(
                "controller#{} deleted {name} of group {group} at {now}; its step claim: {claim}",
                k.incarnation
            );
            self.checker.violate(at, crate::checker::ROLLOUT_STEP_CLAIMED, detail);
        }
    }

    pub fn remove_pod(&mut self, name: &str) {
        self.prepared.remove(name);
        if let Some(mut pod) = self.pods.remove(name) {
            self.rv += 1;
            pod.metadata.resource_version = rv_string(self.rv);
            self.commit(true, Obj::Pod(Box::new(pod)));
        }
    }

    /// `DELETE pods/{name}` with preconditions: the pod becomes terminating (the kubelet removes it later).
    pub fn api_delete_pod(&mut self, name: &str, pre: &Preconditions, k: Knowledge) -> Result<(), ApiError> {
        let Some(pod) = self.pods.get(name).cloned() else {
            return Err(ApiError::NotFound(format!("pods \"{name}\" not found")));
        };
        // An empty uid is taken as no uid precondition (the test-only NoExpectations planner clears uids to model
        // the reference, which sent none; a real API server would refuse "" as a mismatch).
        if pre.uid.as_ref().is_some_and(|u| !u.is_empty() && Some(u) != pod.metadata.uid.as_ref()) {
            return Err(ApiError::Conflict(format!("pods \"{name}\": precondition failed: UID")));
        }
        if pre.resource_version.as_ref().is_some_and(|v| Some(v) != pod.metadata.resource_version.as_ref()) {
            return Err(ApiError::Conflict(format!("pods \"{name}\": precondition failed: ResourceVersion")));
        }
        if pod.metadata.deletion_timestamp.is_some() {
            // Deleting a terminating pod again changes nothing.
            return Ok(());
        }
        let at = self.elapsed();
        self.checker.judge_delete(at, k, self.rv + 1, &PodSum::of(&pod));
        if self.step_claims_required {
            self.judge_step_claimed(at, &pod, k);
        }
        if !self.checker.budgets.is_empty() {
            let by = format!("controller#{} deletion", k.incarnation);
            self.checker.judge_disruption(at, k.pod_rv.min(k.sts_rv), self.rv, &PodSum::of(&pod), &by);
        }
        if self.being_scaled(&objects::owner_of(&pod)) {
            self.checker.rolled_while_scaling += 1;
        }
        let group = self
            .statefulsets
            .get(&objects::owner_of(&pod))
            .and_then(|s| s.metadata.labels.as_ref().and_then(|l| l.get(rollout_core::keys::ROLLOUT_GROUP)).cloned());
        let now = Timestamp::now();
        let preparing: Vec<String> = self
            .preparing
            .iter()
            .filter(|(_, (g, _, until))| Some(g) == group.as_ref() && now < *until)
            .map(|(s, _)| s.clone())
            .collect();
        for sts in preparing {
            self.checker.judge_delete_while_preparing(at, k, name, &sts);
        }
        let mut pod = pod;
        pod.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
        self.put_pod(pod);
        Ok(())
    }

    /// `sts` is being scaled: its replicas differ from its leader's, a pod above `spec.replicas` is still there, or
    /// its `spec.replicas` changed less than 30 s ago (new pods may still be on their way).
    fn being_scaled(&self, sts: &str) -> bool {
        let Some(s) = self.statefulsets.get(sts) else { return false };
        let replicas = |s: &StatefulSet| s.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1).max(0);
        let leader = s.metadata.annotations.as_ref().and_then(|a| a.get(rollout_core::keys::ROLLOUT_DOWNSCALE_LEADER));
        let unlike_leader = leader.and_then(|l| self.statefulsets.get(l)).is_some_and(|l| replicas(l) != replicas(s));
        let prefix = format!("{sts}-");
        let condemned =
            self.pods.keys().filter_map(|n| n.strip_prefix(&prefix)?.parse::<i32>().ok()).any(|o| o >= replicas(s));
        let recent = self.replicas_changed.get(sts).is_some_and(|at| Instant::now() < *at + Duration::from_secs(30));
        unlike_leader || condemned || recent
    }

    /// `sts` is being rolled: a pod not on its update revision or its template's, or currentRevision behind.
    fn being_rolled(&self, sts: &str) -> bool {
        let Some(s) = self.statefulsets.get(sts) else { return false };
        let status = s.status.clone().unwrap_or_default();
        let update = status.update_revision.clone().unwrap_or_default();
        let template = objects::template_revision(s);
        status.current_revision != status.update_revision
            || update != template
            || self.pods.values().any(|p| objects::owner_of(p) == sts && objects::pod_revision(p) != template)
    }

    /// `PUT statefulsets/{name}/status`: replaces the status; `metadata.resourceVersion`, when given, is a
    /// precondition. Only the status is changed (as the API server's status strategy does).
    pub fn api_update_status(&mut self, statefulset: &StatefulSet, k: Knowledge) -> Result<StatefulSet, ApiError> {
        let name = statefulset.metadata.name.clone().unwrap_or_default();
        let Some(sts) = self.statefulsets.get(&name).cloned() else {
            return Err(ApiError::NotFound(format!("statefulsets.apps \"{name}\" not found")));
        };
        if statefulset.metadata.resource_version.is_some()
            && statefulset.metadata.resource_version != sts.metadata.resource_version
        {
            return Err(ApiError::Conflict(format!(
                "Operation cannot be fulfilled on statefulsets.apps \"{name}\": the object has been modified"
            )));
        }
        let mut new = sts.clone();
        new.status = statefulset.status.clone();
        let old_rev = sts.status.as_ref().and_then(|s| s.current_revision.clone()).unwrap_or_default();
        let new_rev = new.status.as_ref().and_then(|s| s.current_revision.clone()).unwrap_or_default();
        if new_rev != old_rev {
            let at = self.elapsed();
            self.checker.judge_revision(at, k, self.rv + 1, &name, &new_rev);
        }
        Ok(self.put_statefulset(new))
    }

    /// `POST configmaps`: fails with a conflict when the name is taken.
    pub fn api_create_config_map(&mut self, cm: &ConfigMap) -> Result<ConfigMap, ApiError> {
        let cm = memory::create(&mut self.config_maps, &mut self.rv, "configmaps", cm)?;
        self.note_markers(&cm);
        Ok(cm)
    }

    /// A committed record write: every StatefulSet with an in-progress marker in it is being prepared from now on.
    /// Every marker it carries must be readable, whoever wrote it (only the operator writes markers).
    fn note_markers(&mut self, cm: &ConfigMap) {
        if cm.metadata.name.as_deref() != Some(self.zone_tracker_config_map.as_str()) {
            return;
        }
        let raw = cm.metadata.annotations.as_ref().and_then(|a| a.get(rollout_core::keys::DOWNSCALES_IN_PROGRESS));
        let (markers, unreadable) = markers_in(raw.map(String::as_str));
        if !unreadable.is_empty() {
            let at = self.elapsed();
            let record = self.zone_tracker_config_map.clone();
            self.checker.judge_record_markers(at, &record, &unreadable);
        }
        let Some(admission) = self.admission_writing else { return };
        let now = Timestamp::now();
        let mut live_groups: Vec<&str> = markers.iter().filter(|m| now < m.until).map(|m| m.group.as_str()).collect();
        live_groups.sort_unstable();
        live_groups.dedup();
        if live_groups.len() > 1 {
            let line = format!("the record holds live downscale markers of {} groups", live_groups.len());
            self.trace("checker", line);
        }
        // This admission's own write without its marker (an undo), or with it re-dated (the downscale dated).
        let own: Vec<String> =
            self.preparing.iter().filter(|(_, (_, a, _))| *a == admission).map(|(s, _)| s.clone()).collect();
        for sts in own {
            match markers.iter().find(|m| m.statefulset == sts) {
                Some(m) => {
                    if let Some(entry) = self.preparing.get_mut(&sts) {
                        entry.2 = m.until;
                    }
                }
                None => {
                    self.trace("checker", format!("downscale of {sts} given up (its marker removed by its admission)"));
                    self.preparing.remove(&sts);
                }
            }
        }
        for m in markers {
            // A marker counts once, when first written: a later record write that merely carries it along (or a
            // marker whose clear failed, left to expire) does not start a new preparation.
            if self.markers_seen.insert(m.statefulset.clone(), m.until) == Some(m.until) {
                continue;
            }
            if self.answered.contains(&admission) {
                let line = format!("marker of {} committed after its admission was answered", m.statefulset);
                self.trace("checker", line);
            } else if !self.preparing.contains_key(&m.statefulset) {
                self.trace("checker", format!("downscale of {} being prepared (marker committed)", m.statefulset));
                self.preparing.insert(m.statefulset, (m.group, admission, m.until));
            }
        }
    }

    /// The webhook answered the admission of a downscale of `sts`: it is no longer being prepared.
    pub fn end_preparing(&mut self, sts: &str, admission: u64) {
        self.answered.insert(admission);
        if self.preparing.get(sts).is_some_and(|(_, a, _)| *a == admission) {
            self.preparing.remove(sts);
        }
    }

    /// `PUT configmaps/{name}`: `metadata.resourceVersion`, when given, is a precondition.
    pub fn api_replace_config_map(&mut self, cm: &ConfigMap) -> Result<ConfigMap, ApiError> {
        let cm = memory::replace(&mut self.config_maps, &mut self.rv, "configmaps", cm)?;
        self.note_markers(&cm);
        Ok(cm)
    }

    /// `PATCH statefulsets/{name}` with `{"spec":{"replicas":N}}`; a non-empty `resource_version` is a precondition.
    /// A spec change bumps `metadata.generation`, as the API server does. `controller`: the knowledge of the
    /// rollout controller making the change, whose downscales the checker judges (invariant 5).
    pub fn api_patch_replicas(
        &mut self,
        name: &str,
        replicas: u32,
        resource_version: &str,
        annotations: &BTreeMap<String, String>,
        controller: Option<Knowledge>,
    ) -> Result<StatefulSet, ApiError> {
        let Some(sts) = self.statefulsets.get(name).cloned() else {
            return Err(ApiError::NotFound(format!("statefulsets.apps \"{name}\" not found")));
        };
        if !resource_version.is_empty() && Some(resource_version) != sts.metadata.resource_version.as_deref() {
            return Err(ApiError::Conflict(format!(
                "Operation cannot be fulfilled on statefulsets.apps \"{name}\": the object has been modified"
            )));
        }
        let replicas = i32::try_from(replicas)
            .map_err(|_| ApiError::Rejected { code: 422, message: format!("spec.replicas {replicas} out of range") })?;
        let mut new = sts.clone();
        let spec = new.spec.get_or_insert_with(Default::default);
        if spec.replicas == Some(replicas) {
            return Ok(sts);
        }
        let decrease = spec.replicas.is_some_and(|r| replicas < r);
        let increase = spec.replicas.is_some_and(|r| replicas > r);
        spec.replicas = Some(replicas);
        new.metadata.annotations.get_or_insert_with(Default::default).extend(annotations.clone());
        new.metadata.generation = Some(new.metadata.generation.unwrap_or(1) + 1);
        if controller.is_some() {
            self.controller_replica_changes += 1;
        }
        if let (Some(k), Some(had)) = (controller, self.force_ignored.get(name)) {
            let from = sts.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            let detail = format!(
                "scaled {name} {from} -> {replicas}; it had {had} when given an ignored {} (process #{})",
                rollout_core::keys::ROLLOUT_FORCE_REPLICAS,
                k.incarnation
            );
            let at = self.elapsed();
            self.checker.violate(at, crate::checker::FORCE_IGNORED, detail);
        }
        if controller.is_some() && self.being_rolled(name) {
            self.checker.scaled_while_rolling += 1;
            self.checker.downscaled_while_rolling += u64::from(decrease);
        }
        if let Some(k) = controller.filter(|_| increase || decrease) {
            self.judge_mirror_scale(&sts, replicas.max(0) as u32, k);
        }
        if let (true, Some(k)) = (increase, controller) {
            let at = self.elapsed();
            self.checker.judge_controller_upscale(at, k, name);
        }
        if let (true, Some(k)) = (decrease, controller) {
            let at = self.elapsed();
            let group = StsSum::of(&new).group;
            self.checker.judge_controller_downscale(at, k, name, &group);
        }
        self.writer_basis = controller.map(|k| k.sts_rv);
        let committed = self.put_statefulset(new);
        self.writer_basis = None;
        Ok(committed)
    }

    /// A controller's replica change of `sts` to `to`, about to commit: a mirror StatefulSet goes only to values its
    /// reference held over the last 30 s (longer than a pass can take from its read to its write), and a delayed
    /// downscale removes only pods that have been preparing for the delay.
    fn judge_mirror_scale(&mut self, sts: &StatefulSet, to: u32, k: Knowledge) {
        // By the world's own record, before any parsing: a StatefulSet whose annotations it wrote malformed.
        let name = sts.metadata.name.clone().unwrap_or_default();
        if self.delayed_downscale_malformed.contains(&name) {
            let from = sts.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
            let detail = format!(
                "scaled {name} {from} -> {to} while its delayed-downscale annotations are malformed (process #{})",
                k.incarnation
            );
            let at = self.elapsed();
            self.checker.record_delayed_violation(at, detail);
        }
        if !self.mirrors.contains(&name) {
            return;
        }
        // An unset `spec.replicas` is Kubernetes' default of 1, as `StsSum` reads it.
        let from = sts.spec.as_ref().and_then(|s| s.replicas).map_or(1, |r| r.max(0) as u32);
        let at = self.elapsed();
        let since = at.saturating_sub(Duration::from_secs(30));
        let held_before = self.reference_history.iter().rev().find(|(t, _)| *t <= since).map(|(_, n)| *n);
        let recent: Vec<u32> = held_before
            .into_iter()
            .chain(self.reference_history.iter().filter(|(t, _)| *t > since).map(|(_, n)| *n))
            .collect();
        // A delayed downscale may stop short of the reference (only the tail of pods prepared long enough goes);
        // any other change goes exactly to a value the reference held.
        // The delay as the world meant what it wrote, not as the operator's parser reads it.
        let delay = self.delayed_downscale_delays.get(&name).copied();
        let partial = to < from && delay.is_some();
        let followed = match partial {
            true => recent.iter().any(|low| *low <= to),
            false => recent.contains(&to),
        };
        if !followed {
            let detail = format!(
                "scaled mirror {name} {from} -> {to}; its reference's spec.replicas over the last 30 s: {recent:?} (process #{})",
                k.incarnation
            );
            self.checker.record_mirror_violation(at, detail);
        }
        let Some(delay) = delay else { return };
        let now = Timestamp::now();
        let delay = jiff::SignedDuration::try_from(delay).unwrap_or_default();
        // When the last of the removed pods had been preparing for the delay, and whether every one was preparing.
        let (mut due, mut all_preparing) = (None::<Timestamp>, true);
        for ordinal in to..from {
            let pod = format!("{name}-{ordinal}");
            // A pod already gone or on its way out loses nothing to the downscale.
            if self.pods.get(&pod).is_none_or(|p| p.metadata.deletion_timestamp.is_some()) {
                continue;
            }
            let prepared = self.prepared.get(&pod).copied();
            match prepared {
                Some(since) => due = due.max(Some(since + delay)),
                None => all_preparing = false,
            }
            let long_enough = prepared.is_some_and(|since| now.duration_since(since) >= delay);
            if !long_enough {
                let how = match prepared {
                    Some(since) => format!("preparing only since {:.1}s ago", now.duration_since(since).as_secs_f64()),
                    None => "not preparing".to_string(),
                };
                let detail = format!(
                    "scaled {name} {from} -> {to} while {pod} was {how} (delay {}s, process #{})",
                    delay.as_secs(),
                    k.incarnation
                );
                self.checker.record_delayed_violation(at, detail);
            }
        }
        if let (Some(due), true) = (due, all_preparing)
            && now > due
        {
            let late = Duration::try_from(now.duration_since(due)).unwrap_or_default();
            self.checker.delayed_downscale_lateness.push(late);
        }
    }

    /// `PATCH statefulsets/{name}` of `metadata.annotations`; a non-empty `resource_version` is a precondition.
    pub fn api_patch_annotations(
        &mut self,
        name: &str,
        resource_version: &str,
        annotations: &BTreeMap<String, String>,
    ) -> Result<StatefulSet, ApiError> {
        memory::check_version(&self.statefulsets, "statefulsets.apps", name, Some(resource_version))?;
        let mut sts = self.statefulsets[name].clone();
        sts.metadata.annotations.get_or_insert_with(Default::default).extend(annotations.clone());
        Ok(self.put_statefulset(sts))
    }

    /// `PATCH statefulsets/{name}` of `metadata.annotations` (`None` removes), a merge patch without precondition.
    pub fn api_merge_statefulset_annotations(
        &mut self,
        name: &str,
        changes: &BTreeMap<String, Option<String>>,
    ) -> Result<StatefulSet, ApiError> {
        let Some(sts) = self.statefulsets.get(name) else {
            return Err(ApiError::NotFound(format!("statefulsets.apps \"{name}\" not found")));
        };
        let mut sts = sts.clone();
        memory::apply_annotation_changes(&mut sts.metadata, changes);
        Ok(self.put_statefulset(sts))
    }

    /// `PATCH pods/{name}` of `metadata.annotations` (`None` removes), conditional on the pod's uid.
    pub fn api_patch_pod_annotations(
        &mut self,
        name: &str,
        uid: &str,
        changes: &BTreeMap<String, Option<String>>,
    ) -> Result<Pod, ApiError> {
        let Some(pod) = self.pods.get(name) else {
            return Err(ApiError::NotFound(format!("pods \"{name}\" not found")));
        };
        let stored = pod.metadata.uid.clone().unwrap_or_default();
        if !uid.is_empty() && stored != uid {
            return Err(ApiError::Conflict(format!(
                "Operation cannot be fulfilled on pods \"{name}\": Precondition failed: UID in precondition: {uid}, \
                 UID in object meta: {stored}"
            )));
        }
        let mut pod = pod.clone();
        memory::apply_annotation_changes(&mut pod.metadata, changes);
        Ok(self.put_pod(pod))
    }

    /// API discovery: resources of `group` with kind `kind`.
    pub fn api_discover(&self, group: &str, kind: &str) -> Vec<ApiResourceRef> {
        self.api_resources.iter().filter(|r| r.group == group && r.kind == kind).cloned().collect()
    }

    /// `GET <plural>/{name}/scale`: an autoscaling/v1 Scale built from the object.
    pub fn api_get_scale(&self, plural: &str, name: &str) -> Result<serde_json::Value, ApiError> {
        let Some(obj) = self.scale_targets.get(&(plural.to_string(), name.to_string())) else {
            return Err(ApiError::NotFound(format!("{plural} \"{name}\" not found")));
        };
        let mut scale = serde_json::json!({
            "apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": name},
            "spec": {}, "status": {"replicas": obj.pointer("/status/replicas").cloned().unwrap_or(0.into())},
        });
        if let Some(r) = obj.pointer("/spec/replicas") {
            scale["spec"]["replicas"] = r.clone();
        }
        Ok(scale)
    }

    /// `PATCH <plural>/{name}/status` (JSON merge patch): only `status` changes.
    pub fn api_patch_resource_status(
        &mut self,
        plural: &str,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<(), ApiError> {
        let Some(obj) = self.scale_targets.get_mut(&(plural.to_string(), name.to_string())) else {
            return Err(ApiError::NotFound(format!("{plural} \"{name}\" not found")));
        };
        if let (Some(status), Some(obj)) = (patch.get("status"), obj.as_object_mut()) {
            merge(obj.entry("status").or_insert(serde_json::Value::Null), status);
        }
        Ok(())
    }

    /// `POST secrets`.
    pub fn api_create_secret(&mut self, secret: &Secret) -> Result<Secret, ApiError> {
        memory::create(&mut self.secrets, &mut self.rv, "secrets", secret)
    }

    /// `PUT secrets/{name}`: `metadata.resourceVersion`, when given, is a precondition.
    pub fn api_replace_secret(&mut self, secret: &Secret) -> Result<Secret, ApiError> {
        memory::replace(&mut self.secrets, &mut self.rv, "secrets", secret)
    }

    /// `POST leases`: a name already taken is a conflict (409 AlreadyExists).
    pub fn api_create_lease(
        &mut self,
        lease: &k8s_openapi::api::coordination::v1::Lease,
    ) -> Result<k8s_openapi::api::coordination::v1::Lease, ApiError> {
        let lease = memory::create(&mut self.leases, &mut self.rv, "leases.coordination.k8s.io", lease)?;
        self.lease_committed(&lease);
        Ok(lease)
    }

    /// `PUT leases/{name}`: `metadata.resourceVersion` is a precondition (409 Conflict when the Lease moved on), so
    /// every renewal and takeover is a compare-and-swap.
    pub fn api_replace_lease(
        &mut self,
        lease: &k8s_openapi::api::coordination::v1::Lease,
    ) -> Result<k8s_openapi::api::coordination::v1::Lease, ApiError> {
        let lease = memory::replace(&mut self.leases, &mut self.rv, "leases.coordination.k8s.io", lease)?;
        self.lease_committed(&lease);
        Ok(lease)
    }

    /// The Lease's truth moves on with each committed write, on the API server's clock.
    fn lease_committed(&mut self, lease: &k8s_openapi::api::coordination::v1::Lease) {
        let at = self.elapsed();
        if let Some(line) = self.ha.lease_committed(at, lease) {
            self.trace("apiserver", line);
        }
    }

    /// Objects of one kind, as a list response.
    pub fn list(&self, kind: Kind) -> Vec<Obj> {
        match kind {
            Kind::StatefulSets => self.statefulsets.values().map(|s| Obj::Sts(Box::new(s.clone()))).collect(),
            Kind::Pods => self.pods.values().map(|p| Obj::Pod(Box::new(p.clone()))).collect(),
            Kind::Budgets => self.budgets.iter().map(|b| Obj::Budget(Box::new(b.clone()))).collect(),
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
                        rev_of(&objects::pod_revision(p)),
                        if objects::is_ready(p) { "R" } else { "r" },
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

use rollout_operator::cluster::memory::{self, json_merge_patch as merge};
