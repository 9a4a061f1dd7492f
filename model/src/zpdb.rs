//! A stateright model of one rollout group under a ZoneAwarePodDisruptionBudget: a drain evicting pods through the
//! pod-eviction webhook (two or more replicas deciding at once) while the rollout controller replaces pods, each of
//! its deletions asking the same decision first (reference 5.5).
//!
//! Every decision is the real code: each eviction, the drain's and the controller's, is the core's step machine
//! ([`rollout_core::zpdb::EvictPod`], or a test-only [`Evictor`] wrapping it) driven one need at a time, each read or
//! write of the API's truth a model step of its own, so decisions interleave with each other and with everything
//! else; the controller plans with the real pass ([`rollout_core::plan_pass`]) on a cache that may lag. The model
//! owns only the environment: the API server's truth (pods, their eviction-intent annotations, the StatefulSets), the
//! controller's cache, the API server committing an allowed eviction, the StatefulSet controller, the kubelet, pod
//! crashes, controller and webhook crashes, and intents expiring.
//!
//! Safety ("no budget is exceeded by voluntary disruptions") is judged when a decision commits, that is when the
//! machine answers "allowed" (its last live read is in the same step): on the truth at that moment, plus every other
//! allowed disruption that has not committed yet (their pods will go). A pod already unavailable costs nothing. Zone
//! mode: evicting an available pod is a breach when another zone has an unavailable pod, or when its own zone would
//! have more than `maxUnavailable`; partition mode: when the pods of its partition across the zones would have more
//! than `maxUnavailable` unavailable. A pod that crashes after the decision is not held against it. The controller's
//! deletions are judged the same way, against the budget or, where the budget's `maxUnavailable` is 0, against the
//! controller's override (its `rollout-max-unavailable`, 1 in partition mode).
//!
//! Simplifications, each an assumption the production code states:
//! - the clock does not move: every intent written is live until it is taken back, goes with its pod, or expires by
//!   the expiry step, which happens only to an intent no decision about that pod still relies on (an intent lives
//!   longer than the rest of its request plus the API server's commit of the eviction);
//! - needs whose answer no other actor changes in the model (the known budgets, the StatefulSets: their replicas and
//!   labels never change, and the decision reads nothing else of them) are carried out in the step of the read before
//!   them; every read of pods and every intent write or removal is a step of its own;
//! - the API server commits an allowed eviction on the pod incarnation the webhook judged (a pod replaced in between
//!   is left alone);
//! - the intents can always be written somewhere (on the pods, or with `pod_patch: false` on the StatefulSets), so
//!   the flow never falls back to its in-process lock; with intents on the StatefulSets, the first list of the
//!   StatefulSets is still carried out with the step before it (the claim rests on the list after the intent,
//!   which is a step of its own);
//! - every decision claims as if it were in a process of its own (no other decision under way there): the claims
//!   only make a first judgement deny sooner, never allow, so the model leaves them out for a smaller state space
//!   (the simulation runs them, two replicas deciding many evictions each);
//! - the controller, its pass held by a denial, runs again when someone else changes the cluster (during the pass
//!   or after it), as its work queue does on watch events; its own writes do not wake it (that would be a retry
//!   loop with no quiescent state to judge liveness on).
//!
//! `same_pod_races: false` keeps two decisions about the same pod from being in flight at once (a request waits
//! for the other), for a smaller state space; the model found the flow breaking its budget in that race once (one
//! intent annotation shared by both decisions; model/tests/zpdb.rs, `same_pod_race_*`), fixed by intents keyed per
//! decision.

use jiff::Timestamp;
use rollout_core::Failure;
use rollout_core::fixture;
use rollout_core::keys;
use rollout_core::natural::pod_ordinal;
use rollout_core::zpdb::{
    BudgetPod, EvictPod, EvictionRequest, EvictionSettings, KnownBudgets, Lookup, Need, Observed, Requester,
    Serialisation, StatefulSetIntent, ZpdbConfig,
};
use rollout_core::{
    Action, Expectation, GroupSnapshot, MaxUnavailable, PassInput, PendingExpectation, PodView, StatefulSetView,
    plan_pass,
};
use stateright::{Model, Property};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The group's StatefulSets, one per zone.
pub const STATEFULSETS: [&str; 3] = ["ingester-zone-a", "ingester-zone-b", "ingester-zone-c"];
const REVISIONS: [&str; 2] = ["r0", "r1"];
const GROUP: &str = "ingester";
const NAMESPACE: &str = "mimir";
const BUDGET: &str = "ingester-rollout";
/// Partition mode: a pod's ordinal is its partition.
const PARTITION_REGEX: &str = "ingester-zone-[a-z]-([0-9]+)";
/// The webhook's deadline plus the commit margin; the model's clock never gets there (see the module docs).
const INTENT_LIFETIME: Duration = Duration::from_secs(30);

/// The one moment of the model's clock.
fn now() -> Timestamp {
    Timestamp::UNIX_EPOCH + jiff::SignedDuration::from_hours(24)
}

/// One step of an eviction decision: the production machine's [`EvictPod::step`], or a test-only variant that
/// wraps it (model/known-bugs).
pub type Evictor = fn(&mut EvictPod, Observed, Timestamp) -> Need;

/// The production decision: the core's machine, unchanged.
pub fn production_evictor(flow: &mut EvictPod, observed: Observed, now: Timestamp) -> Need {
    flow.step(observed, now)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BudgetMode {
    /// `maxUnavailable` pods of one zone at a time.
    Zones,
    /// `podNamePartitionRegex`: `maxUnavailable` pods of one partition (ordinal) across the zones.
    Partitions,
}

/// The environment's bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZpdbModelConfig {
    /// StatefulSets of the group (2-3).
    pub zones: u8,
    /// Pods per StatefulSet (1-3).
    pub pods: u8,
    pub mode: BudgetMode,
    /// The budget's `maxUnavailable` (0: voluntary evictions disabled; the controller's override still applies).
    pub max_unavailable: u8,
    /// Webhook replicas deciding the drain's evictions at once.
    pub replicas: u8,
    /// Eviction requests the drain sends over a run (a retry is another request).
    pub evictions: u8,
    /// A rollout (every pod from r0 to r1) for the controller to carry out; without it the controller is idle.
    pub rollout: bool,
    /// Planner-visible writes the controller's cache may lag behind the truth.
    pub stale: u8,
    /// Pods that may crash (become unready: involuntary).
    pub crashes: u8,
    /// Controller crashes (its decision in flight, plan and expectations lost; its cache rebuilt).
    pub restarts: u8,
    /// Webhook replica crashes in the middle of a decision (its intent, if written, is left to expire).
    pub webhook_crashes: u8,
    /// Two decisions about the same pod may be in flight at once (a drain's retry while its first request is still
    /// being decided, two drains, the controller's deletion of a pod being drained). Off, a request about a pod
    /// waits while another decision about it is in flight (a smaller state space).
    pub same_pod_races: bool,
    /// Pods may be patched (current charts). Off, as under the charts that grant no `patch` on pods, every intent on
    /// a pod is refused and the decisions keep theirs on the StatefulSets.
    pub pod_patch: bool,
    /// The controller's process may patch pods (with `pod_patch`): off, its decisions keep their intents on the
    /// StatefulSets while the webhook replicas' go on pods (processes started before and after an RBAC change).
    pub controller_pod_patch: bool,
}

impl Default for ZpdbModelConfig {
    fn default() -> Self {
        ZpdbModelConfig {
            zones: 2,
            pods: 2,
            mode: BudgetMode::Zones,
            max_unavailable: 1,
            replicas: 2,
            evictions: 2,
            rollout: true,
            stale: 0,
            crashes: 0,
            restarts: 0,
            webhook_crashes: 0,
            same_pod_races: true,
            pod_patch: true,
            controller_pod_patch: true,
        }
    }
}

/// A pod as the API server holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Pod {
    pub exists: bool,
    pub ready: bool,
    pub terminating: bool,
    pub revision: u8,
    /// Incarnation of the pod name (part of its uid), bumped when the StatefulSet controller recreates it.
    pub generation: u8,
    /// The eviction intent annotations (their expiry), one per decider: index 0 the controller's, `k` the drain's
    /// `k`-th request's.
    pub intents: [Option<Timestamp>; DECIDERS],
    /// The eviction intents about this incarnation kept on its StatefulSet (where pods cannot be patched), one per
    /// decider. They name the pod's uid, so they stop applying once it is gone or recreated.
    pub kept_on_statefulset: [Option<Timestamp>; DECIDERS],
}

impl Pod {
    fn available(&self) -> bool {
        self.exists && self.ready && !self.terminating
    }

    fn has_intent(&self) -> bool {
        self.intents.iter().chain(&self.kept_on_statefulset).any(Option::is_some)
    }
}

/// Deciders an intent can name: the controller and up to `DECIDERS - 1` drain requests.
const DECIDERS: usize = 8;

/// The name a decider gives its intent key: the controller's, or the drain's `k`-th request (its AdmissionReview's
/// uid, in a real cluster).
fn decider_name(decider: usize) -> String {
    if decider == 0 {
        rollout_core::zpdb::flow::ROLLOUT_CONTROLLER.to_string()
    } else {
        format!("drain-request-{decider}")
    }
}

fn decider_of_key(key: &str) -> Option<usize> {
    (0..DECIDERS).find(|d| keys::eviction_intent_key(&decider_name(*d)) == key)
}

/// The key of decider `decider`'s intent about the pod `uid`, expiring at `until`, on a StatefulSet (the
/// controller's names the pod and the expiry).
fn statefulset_key(decider: usize, uid: &str, until: Timestamp) -> String {
    match decider {
        0 => rollout_core::zpdb::flow::controller_statefulset_intent_key(uid, until),
        d => keys::eviction_intent_key(&decider_name(d)),
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Zone {
    /// `status.updateRevision`.
    pub update: u8,
    /// `status.currentRevision`.
    pub current: u8,
    pub resource_version: u8,
    pub pods: Vec<Pod>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct World {
    pub zones: Vec<Zone>,
}

impl World {
    /// What the rollout pass can see of it: the pass reads no pod annotations, so intents are left out.
    fn planner_view(&self) -> World {
        let mut w = self.clone();
        for p in w.zones.iter_mut().flat_map(|z| z.pods.iter_mut()) {
            p.intents = [None; DECIDERS];
        }
        w
    }
}

/// A controller write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// Delete a pod (uid precondition: this incarnation), once its eviction decision allows it.
    Delete { zone: u8, pod: u8, generation: u8 },
    /// Set currentRevision, conditional on the resourceVersion planned on.
    SetCurrent { zone: u8, revision: u8, resource_version: u8 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Exp {
    PodDeleted { zone: u8, pod: u8, generation: u8 },
    ZoneWritten { zone: u8, resource_version: u8 },
}

/// One eviction decision in flight: the step machine and the need it is waiting on.
#[derive(Clone)]
pub struct Decision {
    pub zone: u8,
    pub pod: u8,
    /// Shared by the states that hold it; replaced, never changed in place.
    machine: Arc<EvictPod>,
    next: Need,
    /// The decision's identity for the checker: a hash of the machine and its need as their derived `Debug` prints
    /// them (every field), so two states whose machines are in the same state are one state.
    fingerprint: u64,
}

impl Decision {
    fn new(zone: u8, pod: u8, machine: EvictPod, next: Need) -> Self {
        let mut d = Decision { zone, pod, machine: Arc::new(machine), next, fingerprint: 0 };
        d.fingerprint = d.identity();
        d
    }

    fn identity(&self) -> u64 {
        let mut h = HashWriter(DefaultHasher::new());
        let _ = write!(h, "{:?} {:?}", self.machine, self.next);
        h.0.finish()
    }

    /// The verdict, once the machine has answered.
    fn answer(&self) -> Option<bool> {
        match &self.next {
            Need::Answer(verdict) => Some(verdict.allowed()),
            _ => None,
        }
    }

    fn is_about(&self, zone: u8, pod: u8) -> bool {
        self.zone == zone && self.pod == pod
    }
}

/// Hashes what is written to it (a `Debug` print, without building the string).
struct HashWriter(DefaultHasher);

impl std::fmt::Write for HashWriter {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.write(s.as_bytes());
        Ok(())
    }
}

impl PartialEq for Decision {
    fn eq(&self, other: &Self) -> bool {
        (self.zone, self.pod, self.fingerprint) == (other.zone, other.pod, other.fingerprint)
    }
}

impl Eq for Decision {}

impl PartialOrd for Decision {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Decision {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.zone, self.pod, self.fingerprint).cmp(&(other.zone, other.pod, other.fingerprint))
    }
}

impl Hash for Decision {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (self.zone, self.pod, self.fingerprint).hash(state);
    }
}

impl std::fmt::Debug for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{} waiting on {}", STATEFULSETS[self.zone as usize], self.pod, need_name(&self.next))
    }
}

/// A webhook replica serving the drain. The replicas are alike, so the model keeps them sorted (one state for every
/// assignment of the same decisions to replicas).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Drain {
    Idle,
    Deciding(Decision),
    /// Allowed: the API server has yet to commit the eviction of this incarnation.
    Committing {
        zone: u8,
        pod: u8,
        generation: u8,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Ctrl {
    /// `blocked`: its last eviction decision was denied; it plans again on the next change someone else makes.
    Idle { blocked: bool },
    /// Executing a plan: `deciding` the eviction of the front deletion, or `cleared` to delete it. `held`: a budget
    /// denied a deletion of this pass (its other deletions wait for the next pass; its other writes go on).
    /// `heard`: someone else changed the cluster meanwhile (the work queue then runs the group again).
    Acting { ops: Vec<Op>, deciding: Option<Decision>, cleared: bool, held: bool, heard: bool },
}

/// Violated invariants, as bits of [`ZpdbState::violations`].
pub mod violation {
    pub const BUDGET_EXCEEDED_BY_EVICTION: u8 = 1;
    pub const BUDGET_EXCEEDED_BY_CONTROLLER: u8 = 2;
    pub const REPLACEMENT_LOOP: u8 = 4;
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ZpdbState {
    pub truth: World,
    /// The controller's cache (as the pass sees it).
    pub view: World,
    /// Planner-visible truths the cache has not caught up with, oldest first.
    pub pending: Vec<World>,
    pub expectations: Vec<Exp>,
    pub ctrl: Ctrl,
    pub drains: Vec<Drain>,
    pub evictions_left: u8,
    pub crashes_left: u8,
    pub restarts_left: u8,
    pub webhook_crashes_left: u8,
    pub violations: u8,
    /// The drain got an available pod's eviction allowed.
    pub evicted: bool,
    /// Two decisions were in flight at once.
    pub overlapped: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ZpdbStep {
    /// The drain asks a webhook replica to evict a pod (the replica reads the pod, and what does not change).
    DrainRequests {
        replica: u8,
        zone: u8,
        pod: u8,
    },
    /// The replica carries out its decision's next need.
    WebhookDecides(u8),
    /// The API server commits an allowed eviction: the pod is terminating.
    EvictionCommits(u8),
    WebhookCrashes(u8),
    ControllerPlans,
    /// The controller carries out its next write, or the next need of the eviction decision before a deletion.
    ControllerActs,
    ControllerRestarts,
    CacheCatchesUp,
    PodTerminates(u8, u8),
    PodRecreated(u8, u8),
    PodBecomesReady(u8, u8),
    PodCrashes(u8, u8),
    IntentExpires(u8, u8),
}

/// Who a disruption is judged for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    /// The drain's `k`-th request.
    Drain(u8),
    Controller,
}

/// The view and expectations the controller plans on.
type PlanKey = (World, Vec<Exp>);
/// The expectations it still holds and its plan.
type PlanMemo = (Vec<Exp>, Vec<Op>);

#[derive(Clone)]
pub struct ZpdbModel {
    pub config: ZpdbModelConfig,
    pub evictor: Evictor,
    budget: ZpdbConfig,
    plans: Arc<Mutex<HashMap<PlanKey, PlanMemo>>>,
    /// Memo of [`ZpdbModel::step_decision`]: the machine is pure and the truth is all it reads, so the same decision
    /// on the same truth always goes the same way.
    decisions: Arc<Mutex<HashMap<DecisionKey, (Decision, World)>>>,
}

/// A decision's step: which decider starts it (`None`: a decision in flight, by its identity), about which pod, on
/// which truth.
type DecisionKey = (Option<u8>, u64, u8, u8, World);

/// A configuration the budget model cannot check.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ZpdbModelError {
    #[error("2 to 3 zones of 1 to 3 pods")]
    Shape,
    #[error("at least one webhook replica")]
    NoReplica,
    /// More eviction requests than the model has deciders for.
    #[error("at most {max} eviction requests", max = DECIDERS - 1)]
    TooManyEvictions,
    /// The budget object the model builds is refused by the operator's parser.
    #[error("the budget: {0}")]
    Budget(#[source] rollout_core::zpdb::ConfigError),
}

impl ZpdbModel {
    /// The model of `config`, deciding evictions with `evictor`.
    pub fn new(config: ZpdbModelConfig, evictor: Evictor) -> Result<Self, ZpdbModelError> {
        if !(2..=STATEFULSETS.len() as u8).contains(&config.zones) || !(1..=3).contains(&config.pods) {
            return Err(ZpdbModelError::Shape);
        }
        if config.replicas == 0 {
            return Err(ZpdbModelError::NoReplica);
        }
        if usize::from(config.evictions) >= DECIDERS {
            return Err(ZpdbModelError::TooManyEvictions);
        }
        let mut spec = serde_json::json!({
            "maxUnavailable": config.max_unavailable,
            "selector": {"matchLabels": {keys::ROLLOUT_GROUP: GROUP}},
        });
        if config.mode == BudgetMode::Partitions {
            spec["podNamePartitionRegex"] = PARTITION_REGEX.into();
        }
        let object = serde_json::json!({
            "apiVersion": "rollout-operator.grafana.com/v1",
            "kind": "ZoneAwarePodDisruptionBudget",
            "metadata": {"name": BUDGET, "uid": "uid-budget", "generation": 1},
            "spec": spec,
        });
        let budget = ZpdbConfig::parse(&object).map_err(ZpdbModelError::Budget)?;
        Ok(ZpdbModel { config, evictor, budget, plans: Arc::default(), decisions: Arc::default() })
    }

    fn statefulset(&self, w: &World, z: usize) -> StatefulSetView {
        let zone = &w.zones[z];
        let mut s =
            fixture::statefulset(GROUP, STATEFULSETS[z], u32::from(self.config.pods), REVISIONS[zone.current as usize]);
        s.resource_version = zone.resource_version.to_string();
        s.settings.max_unavailable = MaxUnavailable::Count(1);
        if let Some(status) = s.status.as_mut() {
            status.update_revision = REVISIONS[zone.update as usize].to_string();
            status.ready_replicas = zone.pods.iter().filter(|p| p.available()).count() as u32;
        }
        for (i, p) in zone.pods.iter().enumerate() {
            let uid = Self::pod_uid(STATEFULSETS[z], i, p);
            for (d, until) in p.kept_on_statefulset.iter().enumerate() {
                if let Some(until) = until {
                    let pod = format!("{}-{i}", STATEFULSETS[z]);
                    let intent = StatefulSetIntent { until: *until, pod, uid: uid.clone() };
                    s.annotations.insert(statefulset_key(d, &uid, *until), intent.value());
                }
            }
        }
        s
    }

    fn pod_uid(statefulset: &str, i: usize, p: &Pod) -> String {
        format!("{statefulset}-{i}@{}", p.generation)
    }

    fn pod_view(sts: &StatefulSetView, i: usize, p: &Pod) -> PodView {
        let mut v = fixture::pod(sts, i as u32, REVISIONS[p.revision as usize]);
        v.uid = Self::pod_uid(&sts.name, i, p);
        v.labels.insert(keys::ROLLOUT_GROUP.to_string(), GROUP.to_string());
        if !p.ready {
            v = fixture::not_ready(v);
        }
        if p.terminating {
            v = fixture::terminating(v);
        }
        v
    }

    fn budget_pod(sts: &StatefulSetView, i: usize, p: &Pod) -> BudgetPod {
        // As a pod is read from the API: the latest of its intents.
        let intent_until = p.intents.iter().flatten().max().copied();
        BudgetPod { intent_until, ..BudgetPod::plain(Self::pod_view(sts, i, p)) }
    }

    /// The pass's input for the controller's cache.
    fn snapshot(&self, w: &World) -> GroupSnapshot {
        let mut statefulsets = Vec::new();
        let mut pods = Vec::new();
        for (z, zone) in w.zones.iter().enumerate() {
            let s = self.statefulset(w, z);
            pods.extend(zone.pods.iter().enumerate().filter(|(_, p)| p.exists).map(|(i, p)| Self::pod_view(&s, i, p)));
            statefulsets.push(s);
        }
        GroupSnapshot::assemble(GROUP, statefulsets, &pods)
    }

    /// What the controller does on its cache: drop the expectations it shows, then run the whole pass. Memoised:
    /// the pass is pure.
    fn plan(&self, view: &World, expectations: &[Exp]) -> PlanMemo {
        let key = (view.clone(), expectations.to_vec());
        if let Some(hit) = self.plans.lock().ok().and_then(|m| m.get(&key).cloned()) {
            return hit;
        }
        let snapshot = self.snapshot(view);
        let retained: Vec<Exp> =
            expectations.iter().copied().filter(|e| !core_expectation(*e).is_observed(&snapshot)).collect();
        let pending: Vec<PendingExpectation> = retained
            .iter()
            .map(|e| PendingExpectation { expectation: core_expectation(*e), expires_at: Timestamp::MAX })
            .collect();
        let pass = plan_pass(&snapshot, &PassInput::new(now(), &pending));
        let ops = pass.plan.actions.iter().filter_map(to_op).collect();
        let memo = (retained, ops);
        if let Ok(mut m) = self.plans.lock() {
            m.insert(key, memo.clone());
        }
        memo
    }

    /// The `maxUnavailable` the controller's eviction requests carry for a budget that allows none (reference 5.5):
    /// the StatefulSet's `rollout-max-unavailable`, or 1 under a partition-aware budget.
    fn controller_override(&self) -> u32 {
        match self.config.mode {
            BudgetMode::Partitions => 1,
            BudgetMode::Zones => MaxUnavailable::Count(1).resolve(u32::from(self.config.pods)),
        }
    }

    fn settings() -> EvictionSettings {
        EvictionSettings {
            namespace: NAMESPACE.to_string(),
            serialisation: Serialisation::Intents,
            intent_lifetime: INTENT_LIFETIME,
        }
    }

    /// One step of a decision (started when `decision` is `None`) against the truth: the decision after it, and the
    /// truth after its writes. Memoised.
    fn step_decision(&self, decision: Option<&Decision>, truth: &mut World, target: (u8, u8), who: Who) -> Decision {
        let (zone, pod) = target;
        let decider = match who {
            Who::Controller => 0,
            // The drain's requests in order: each names its own intent.
            Who::Drain(request) => request,
        };
        let started = decision.is_none().then_some(decider);
        let key = (started, decision.map_or(0, |d| d.fingerprint), zone, pod, truth.clone());
        if let Some((d, after)) = self.decisions.lock().ok().and_then(|m| m.get(&key).cloned()) {
            *truth = after;
            return d;
        }
        let d = match decision {
            None => self.start(truth, zone, pod, who, decider),
            Some(d) => {
                let mut d = d.clone();
                self.advance(&mut d, truth);
                d
            }
        };
        if let Ok(mut m) = self.decisions.lock() {
            m.insert(key, (d.clone(), truth.clone()));
        }
        d
    }

    /// Starts a decision about pod `pod` of zone `zone`: the request arrives and the pod is read.
    fn start(&self, truth: &mut World, zone: u8, pod: u8, who: Who, decider: u8) -> Decision {
        let name = format!("{}-{pod}", STATEFULSETS[zone as usize]);
        let request = match who {
            // As the reconciler asks: its StatefulSet's `rollout-max-unavailable`, resolved (the model never
            // changes it, so the cache and the truth agree on it).
            Who::Controller => {
                let sts = self.statefulset(truth, zone as usize);
                EvictionRequest::for_rollout(&name, NAMESPACE, sts.settings.max_unavailable.resolve(sts.replicas))
            }
            // As the webhook reads an admission request for `pods/eviction`.
            Who::Drain(_) => EvictionRequest {
                pod: name,
                namespace: NAMESPACE.to_string(),
                dry_run: false,
                max_unavailable_override: None,
                requester: Requester::Webhook,
                decider: decider_name(usize::from(decider)),
            },
        };
        let mut machine = EvictPod::new(request, Self::settings());
        let next = (self.evictor)(&mut machine, Observed::Start, now());
        let mut d = Decision::new(zone, pod, machine, next);
        self.advance(&mut d, truth);
        d
    }

    /// Carries out the decision's next need against the truth, then every need after it that reads nothing another
    /// actor changes, until it waits on a read or write of pods, or answers.
    fn advance(&self, d: &mut Decision, truth: &mut World) {
        let mut machine = (*d.machine).clone();
        let mut need = d.next.clone();
        loop {
            if matches!(need, Need::Answer(_)) {
                break;
            }
            let observed = self.carry(&need, truth);
            need = (self.evictor)(&mut machine, observed, now());
            if !is_constant(&need) {
                break;
            }
        }
        *d = Decision::new(d.zone, d.pod, machine, need);
    }

    /// What a need observes of the truth (and the writes it makes there).
    fn carry(&self, need: &Need, truth: &mut World) -> Observed {
        match need {
            Need::Pod { name } => Observed::Pod(match self.locate(truth, name) {
                Some((z, i)) => {
                    let sts = self.statefulset(truth, z);
                    Lookup::Found(Box::new(Self::budget_pod(&sts, i, &truth.zones[z].pods[i])))
                }
                None => Lookup::NotFound,
            }),
            Need::Budgets => Observed::Budgets(KnownBudgets::Known(vec![self.budget.clone()])),
            Need::StatefulSet { name } => Observed::StatefulSet(match STATEFULSETS.iter().position(|s| s == name) {
                Some(z) if z < truth.zones.len() => Lookup::Found(Box::new(self.statefulset(truth, z))),
                _ => Lookup::NotFound,
            }),
            Need::StatefulSets { selector } => Observed::StatefulSets(Ok((0..truth.zones.len())
                .map(|z| self.statefulset(truth, z))
                .filter(|s| selects(selector, &s.labels))
                .collect())),
            Need::Pods { selector } | Need::PodsAgain { selector, .. } => {
                let mut pods = Vec::new();
                for (z, zone) in truth.zones.iter().enumerate() {
                    let sts = self.statefulset(truth, z);
                    for (i, p) in zone.pods.iter().enumerate().filter(|(_, p)| p.exists) {
                        let pod = Self::budget_pod(&sts, i, p);
                        if selects(selector, &pod.pod.labels) {
                            pods.push(pod);
                        }
                    }
                }
                Observed::Pods(Ok(pods.into()))
            }
            Need::WriteIntent { key, .. }
                if !self.config.pod_patch || (!self.config.controller_pod_patch && decider_of_key(key) == Some(0)) =>
            {
                Observed::IntentWritten(Err(Failure::Forbidden("pods is forbidden".into())))
            }
            Need::StatefulSetsAgain { selector, .. } => Observed::StatefulSets(Ok((0..truth.zones.len())
                .map(|z| self.statefulset(truth, z))
                .filter(|s| selects(selector, &s.labels))
                .collect())),
            // The clock does not move, so no intent is stale.
            Need::WriteStatefulSetIntent { key, value, .. } => {
                let Some(intent) = StatefulSetIntent::parse(value) else {
                    return Observed::IntentWritten(Err(Failure::Failed(format!("unreadable intent {value}"))));
                };
                let located = self.locate_incarnation(truth, &intent.pod, &intent.uid);
                let decider = (0..DECIDERS).find(|d| statefulset_key(*d, &intent.uid, intent.until) == *key);
                Observed::IntentWritten(match (located, decider) {
                    (Some((z, i)), Some(d)) => {
                        truth.zones[z].pods[i].kept_on_statefulset[d] = Some(intent.until);
                        Ok(())
                    }
                    // The intent would name a pod that is not there: it could hold nothing.
                    (None, _) => Err(Failure::Failed(format!("pod {} is not {} any more", intent.pod, intent.uid))),
                    (_, None) => Err(Failure::Failed(format!("no decider writes {key}"))),
                })
            }
            Need::RemoveStatefulSetIntent { statefulset, key } => {
                if let Some(z) = STATEFULSETS.iter().position(|s| s == statefulset).filter(|z| *z < truth.zones.len()) {
                    for i in 0..truth.zones[z].pods.len() {
                        let p = &mut truth.zones[z].pods[i];
                        let uid = Self::pod_uid(STATEFULSETS[z], i, p);
                        for d in 0..DECIDERS {
                            if p.kept_on_statefulset[d].is_some_and(|until| statefulset_key(d, &uid, until) == *key) {
                                p.kept_on_statefulset[d] = None;
                            }
                        }
                    }
                }
                Observed::IntentRemoved
            }
            Need::WriteIntent { pod, uid, key, until } => {
                Observed::IntentWritten(match (self.locate_incarnation(truth, pod, uid), decider_of_key(key)) {
                    (Some((z, i)), Some(d)) => {
                        truth.zones[z].pods[i].intents[d] = Some(*until);
                        Ok(())
                    }
                    (None, _) => Err(Failure::Conflict(format!("pod {pod} is not {uid} any more"))),
                    (_, None) => Err(Failure::Failed(format!("no decider writes {key}"))),
                })
            }
            Need::RemoveIntent { pod, uid, key } => {
                if let (Some((z, i)), Some(d)) = (self.locate_incarnation(truth, pod, uid), decider_of_key(key)) {
                    truth.zones[z].pods[i].intents[d] = None;
                }
                Observed::IntentRemoved
            }
            // Pods can always be patched here, so the flow has no reason to fall back to its in-process lock; if
            // it asks anyway, it does not get it (it denies).
            Need::Lock { .. } => Observed::NotLocked,
            Need::Remember { .. } => Observed::Remembered,
            // Every decision as if in a process of its own (see the module docs).
            Need::Claim { .. } => Observed::Claimed { others: Vec::new() },
            Need::Answer(_) => Observed::Start,
        }
    }

    fn locate(&self, truth: &World, name: &str) -> Option<(usize, usize)> {
        let z = (0..truth.zones.len()).find(|z| name.starts_with(STATEFULSETS[*z]))?;
        let i = pod_ordinal(STATEFULSETS[z], name)? as usize;
        truth.zones[z].pods.get(i).filter(|p| p.exists).map(|_| (z, i))
    }

    fn locate_incarnation(&self, truth: &World, name: &str, uid: &str) -> Option<(usize, usize)> {
        let (z, i) = self.locate(truth, name)?;
        (format!("{name}@{}", truth.zones[z].pods[i].generation) == uid).then_some((z, i))
    }

    /// Disruptions allowed and not committed yet, by incarnation.
    fn outstanding(s: &ZpdbState) -> Vec<(u8, u8, u8)> {
        let mut out: Vec<(u8, u8, u8)> = s
            .drains
            .iter()
            .filter_map(|d| match d {
                Drain::Committing { zone, pod, generation } => Some((*zone, *pod, *generation)),
                _ => None,
            })
            .collect();
        if let Ctrl::Acting { ops, cleared: true, .. } = &s.ctrl
            && let Some(Op::Delete { zone, pod, generation }) = ops.first()
        {
            out.push((*zone, *pod, *generation));
        }
        out
    }

    /// Whether disrupting the pod now (the truth, plus the disruptions allowed and not committed yet) exceeds the
    /// budget `max` (see the module docs).
    fn exceeds(&self, s: &ZpdbState, zone: u8, pod: u8, max: u32) -> bool {
        let mut unavailable: Vec<Vec<bool>> =
            s.truth.zones.iter().map(|z| z.pods.iter().map(|p| !p.available()).collect()).collect();
        for (z, i, generation) in Self::outstanding(s) {
            if s.truth.zones[z as usize].pods[i as usize].generation == generation {
                unavailable[z as usize][i as usize] = true;
            }
        }
        let (zone, pod) = (zone as usize, pod as usize);
        if unavailable[zone][pod] {
            return false;
        }
        match self.config.mode {
            BudgetMode::Zones => {
                let others = unavailable.iter().enumerate().any(|(z, pods)| z != zone && pods.contains(&true));
                let own = unavailable[zone].iter().filter(|u| **u).count() as u32;
                others || own + 1 > max
            }
            BudgetMode::Partitions => {
                let partition = unavailable.iter().enumerate().filter(|(z, pods)| *z != zone && pods[pod]).count();
                partition as u32 + 1 > max
            }
        }
    }

    /// Judges a decision that has just answered "allowed" for `who`.
    fn judge(&self, s: &mut ZpdbState, zone: u8, pod: u8, who: Who) {
        let budget = u32::from(self.config.max_unavailable);
        let (max, bit) = match who {
            Who::Drain(_) => (budget, violation::BUDGET_EXCEEDED_BY_EVICTION),
            Who::Controller if budget == 0 => (self.controller_override(), violation::BUDGET_EXCEEDED_BY_CONTROLLER),
            Who::Controller => (budget, violation::BUDGET_EXCEEDED_BY_CONTROLLER),
        };
        if self.exceeds(s, zone, pod, max) {
            s.violations |= bit;
        }
        if matches!(who, Who::Drain(_)) && s.truth.zones[zone as usize].pods[pod as usize].available() {
            s.evicted = true;
        }
    }

    /// Whether some decision (in flight, or allowed and not committed) is about this pod: its intent may be relied
    /// on, so it does not expire (the lifetime assumption).
    fn intent_relied_on(s: &ZpdbState, zone: u8, pod: u8) -> bool {
        let drains = s.drains.iter().any(|d| match d {
            Drain::Deciding(d) => d.is_about(zone, pod),
            Drain::Committing { zone: z, pod: p, .. } => (*z, *p) == (zone, pod),
            Drain::Idle => false,
        });
        let ctrl = match &s.ctrl {
            Ctrl::Acting { deciding: Some(d), .. } => d.is_about(zone, pod),
            Ctrl::Acting { ops, cleared: true, .. } => {
                matches!(ops.first(), Some(Op::Delete { zone: z, pod: p, .. }) if (*z, *p) == (zone, pod))
            }
            _ => false,
        };
        drains || ctrl
    }

    /// How many times one pod may be recreated: once for the rollout and once per eviction. More means pods are
    /// replaced in a loop (and keeps the state space finite).
    pub fn max_generation(&self) -> u8 {
        self.config.evictions.saturating_add(u8::from(self.config.rollout))
    }

    /// Whether a decision about the pod is in flight, or allowed and not committed, other than the controller's.
    fn being_decided(s: &ZpdbState, zone: u8, pod: u8) -> bool {
        let mut others = s.clone();
        others.ctrl = Ctrl::Idle { blocked: false };
        Self::intent_relied_on(&others, zone, pod)
    }

    fn decisions_in_flight(s: &ZpdbState) -> usize {
        let drains = s.drains.iter().filter(|d| matches!(d, Drain::Deciding(_))).count();
        drains + usize::from(matches!(s.ctrl, Ctrl::Acting { deciding: Some(_), .. }))
    }

    /// Every zone on its update revision with currentRevision advanced, every pod there and ready, nobody acting.
    pub fn is_converged(s: &ZpdbState) -> bool {
        s.pending.is_empty()
            && matches!(s.ctrl, Ctrl::Idle { .. })
            && s.drains.iter().all(|d| *d == Drain::Idle)
            && s.truth
                .zones
                .iter()
                .all(|z| z.current == z.update && z.pods.iter().all(|p| p.available() && p.revision == z.update))
    }

    pub fn is_quiescent(&self, s: &ZpdbState) -> bool {
        let mut steps = Vec::new();
        self.actions(s, &mut steps);
        steps.is_empty()
    }

    /// One line of the truth: `ingester-zone-a r1/r0 [1R 0r*! -]`: update/current revision; each pod's revision, R
    /// ready or r not, * terminating, ! an eviction intent; - missing.
    pub fn describe(w: &World) -> String {
        let mut out = String::new();
        for (z, zone) in w.zones.iter().enumerate() {
            let pods: Vec<String> = zone
                .pods
                .iter()
                .map(|p| {
                    if !p.exists {
                        return "-".to_string();
                    }
                    let ready = if p.ready { "R" } else { "r" };
                    let terminating = if p.terminating { "*" } else { "" };
                    let intent = if p.has_intent() { "!" } else { "" };
                    format!("{}{ready}{terminating}{intent}", p.revision)
                })
                .collect();
            let sep = if z > 0 { "; " } else { "" };
            let _ = write!(out, "{sep}{} r{}/r{} [{}]", STATEFULSETS[z], zone.update, zone.current, pods.join(" "));
        }
        out
    }

    /// A counterexample path for people: each step, what the deciders wait on, and the truth after it.
    pub fn timeline(&self, path: &[(ZpdbState, Option<ZpdbStep>)]) -> String {
        let mut out = String::new();
        if let Some((first, _)) = path.first() {
            let _ = writeln!(out, "  0. initial\n       truth: {}", Self::describe(&first.truth));
        }
        for (i, pair) in path.windows(2).enumerate() {
            let ((_, step), (next, _)) = (&pair[0], &pair[1]);
            let step = step.map(|s| format!("{s:?}")).unwrap_or_default();
            let _ = writeln!(out, "{:>3}. {step}\n       truth: {}", i + 1, Self::describe(&next.truth));
            let _ = writeln!(out, "       webhooks: {:?}; controller: {:?}", next.drains, next.ctrl);
            if next.view != next.truth.planner_view() {
                let _ = writeln!(out, "       cache: {}", Self::describe(&next.view));
            }
            if next.violations != pair[0].0.violations {
                let _ = writeln!(out, "       VIOLATION: {}", violation_names(next.violations & !pair[0].0.violations));
            }
        }
        out
    }

    /// A change of the truth: the controller hears of a change someone else made (a blocked controller plans
    /// again; one acting will run again), and its cache sees what the pass reads of it at once when fresh, else in
    /// order, lagging by at most `stale` writes.
    fn changed(&self, last: &World, s: &mut ZpdbState, own: bool) {
        if s.truth == *last {
            return;
        }
        match &mut s.ctrl {
            Ctrl::Idle { blocked } if !own => *blocked = false,
            Ctrl::Acting { heard, .. } if !own => *heard = true,
            _ => {}
        }
        let seen = s.truth.planner_view();
        if seen == last.planner_view() {
            return;
        }
        if self.config.stale == 0 {
            s.view = seen;
        } else {
            s.pending.push(seen);
            if s.pending.len() > self.config.stale as usize {
                s.view = s.pending.remove(0);
            }
        }
    }

    /// A decision of the drain's replica `r` has answered (or not yet).
    fn drain_answered(&self, s: &mut ZpdbState, r: usize) {
        let Drain::Deciding(d) = &s.drains[r] else { return };
        let (zone, pod) = (d.zone, d.pod);
        match d.answer() {
            None => {}
            Some(false) => s.drains[r] = Drain::Idle,
            Some(true) => {
                self.judge(s, zone, pod, Who::Drain(0));
                let p = s.truth.zones[zone as usize].pods[pod as usize];
                s.drains[r] = if p.exists && !p.terminating {
                    Drain::Committing { zone, pod, generation: p.generation }
                } else {
                    // Nothing left to evict (the pod is already going): the API server has nothing to commit.
                    Drain::Idle
                };
            }
        }
    }

    /// The controller's decision has answered (or not yet).
    fn controller_answered(&self, s: &mut ZpdbState) {
        let Ctrl::Acting { ops, deciding: Some(d), heard, .. } = &s.ctrl else { return };
        let (zone, pod, ops, heard) = (d.zone, d.pod, ops.clone(), *heard);
        match d.answer() {
            None => {}
            // As the reconciler: the pass's deletions wait for the next pass, its other writes go on; the group
            // runs again once something else changes (at once if something did meanwhile).
            Some(false) => {
                let rest: Vec<Op> = ops.into_iter().filter(|op| !matches!(op, Op::Delete { .. })).collect();
                s.ctrl = Ctrl::Acting { ops: rest, deciding: None, cleared: false, held: true, heard };
                self.finish_pass(s);
            }
            Some(true) => {
                self.judge(s, zone, pod, Who::Controller);
                s.ctrl = Ctrl::Acting { ops, deciding: None, cleared: true, held: false, heard };
            }
        }
    }

    /// A pass with nothing left to write ends: the controller waits for news if a budget held it back.
    fn finish_pass(&self, s: &mut ZpdbState) {
        if let Ctrl::Acting { ops, held, heard, .. } = &s.ctrl
            && ops.is_empty()
        {
            s.ctrl = Ctrl::Idle { blocked: *held && !*heard };
        }
    }

    fn controller_acts(&self, s: &mut ZpdbState) {
        let Ctrl::Acting { ops, deciding, cleared, held, heard } = s.ctrl.clone() else { return };
        let Some(op) = ops.first().copied() else {
            self.finish_pass(s);
            return;
        };
        match (op, deciding, cleared) {
            (Op::Delete { zone, pod, .. }, None, false) => {
                let d = self.step_decision(None, &mut s.truth, (zone, pod), Who::Controller);
                s.ctrl = Ctrl::Acting { ops, deciding: Some(d), cleared: false, held, heard };
                self.controller_answered(s);
            }
            (Op::Delete { .. }, Some(d), _) => {
                let d = self.step_decision(Some(&d), &mut s.truth, (d.zone, d.pod), Who::Controller);
                s.ctrl = Ctrl::Acting { ops, deciding: Some(d), cleared: false, held, heard };
                self.controller_answered(s);
            }
            (Op::Delete { zone, pod, generation }, None, true) => {
                let p = s.truth.zones[zone as usize].pods[pod as usize];
                if !p.exists || p.generation != generation {
                    // The uid precondition fails: the loop stops executing the plan.
                    s.ctrl = Ctrl::Idle { blocked: false };
                    return;
                }
                s.truth.zones[zone as usize].pods[pod as usize].terminating = true;
                s.expectations.push(Exp::PodDeleted { zone, pod, generation });
                s.ctrl = Ctrl::Acting { ops: ops[1..].to_vec(), deciding: None, cleared: false, held, heard };
            }
            (Op::SetCurrent { zone, revision, resource_version }, _, _) => {
                let z = &mut s.truth.zones[zone as usize];
                if z.resource_version != resource_version {
                    s.ctrl = Ctrl::Idle { blocked: false };
                    return;
                }
                z.current = revision;
                z.resource_version = z.resource_version.wrapping_add(1);
                s.expectations.push(Exp::ZoneWritten { zone, resource_version });
                s.ctrl = Ctrl::Acting { ops: ops[1..].to_vec(), deciding: None, cleared: false, held, heard };
            }
        }
        self.finish_pass(s);
    }
}

/// Needs the model answers without reading anything another actor changes (see the module docs).
fn is_constant(need: &Need) -> bool {
    matches!(
        need,
        Need::Budgets
            | Need::StatefulSet { .. }
            | Need::StatefulSets { .. }
            | Need::Lock { .. }
            | Need::Remember { .. }
            | Need::Claim { .. }
    )
}

fn need_name(need: &Need) -> &'static str {
    match need {
        Need::Pod { .. } => "reading the pod",
        Need::Budgets => "the budgets",
        Need::StatefulSet { .. } => "reading its StatefulSet",
        Need::Lock { .. } => "the lock",
        Need::StatefulSets { .. } => "listing StatefulSets",
        Need::Pods { .. } => "listing pods",
        Need::WriteIntent { .. } => "writing its intent",
        Need::PodsAgain { .. } => "listing pods again",
        Need::StatefulSetsAgain { .. } => "listing StatefulSets again",
        Need::WriteStatefulSetIntent { .. } => "writing its intent on the StatefulSet",
        Need::RemoveStatefulSetIntent { .. } => "removing its intent from the StatefulSet",
        Need::RemoveIntent { .. } => "removing its intent",
        Need::Remember { .. } => "remembering",
        Need::Claim { .. } => "claiming",
        Need::Answer(v) if v.allowed() => "nothing (allowed)",
        Need::Answer(_) => "nothing (denied)",
    }
}

/// Whether a label selector (`k=v,k2=v2`, as the flow asks) selects these labels.
fn selects(selector: &str, labels: &std::collections::BTreeMap<String, String>) -> bool {
    selector.split(',').filter(|t| !t.is_empty()).all(|term| match term.split_once('=') {
        Some((k, v)) => labels.get(k).is_some_and(|l| l == v),
        None => false,
    })
}

fn core_expectation(e: Exp) -> Expectation {
    match e {
        Exp::PodDeleted { zone, pod, generation } => {
            let statefulset = STATEFULSETS[zone as usize].to_string();
            let name = format!("{statefulset}-{pod}");
            Expectation::PodDeleted { uid: format!("{name}@{generation}"), pod: name, statefulset }
        }
        Exp::ZoneWritten { zone, resource_version } => Expectation::StatefulSetWritten {
            statefulset: STATEFULSETS[zone as usize].to_string(),
            previous_resource_version: resource_version.to_string(),
        },
    }
}

fn to_op(action: &Action) -> Option<Op> {
    let zone_of = |name: &str| STATEFULSETS.iter().position(|s| *s == name).map(|z| z as u8);
    match action {
        Action::DeletePod { statefulset, pod, uid, .. } => Some(Op::Delete {
            zone: zone_of(statefulset)?,
            pod: pod_ordinal(statefulset, pod)? as u8,
            generation: uid.rsplit_once('@').and_then(|(_, g)| g.parse().ok())?,
        }),
        Action::SetCurrentRevision { statefulset, revision, resource_version, .. } => Some(Op::SetCurrent {
            zone: zone_of(statefulset)?,
            revision: REVISIONS.iter().position(|r| r == revision)? as u8,
            resource_version: resource_version.parse().ok()?,
        }),
        // The model's StatefulSets carry no scaling annotations.
        Action::Scale { .. } => None,
    }
}

pub fn violation_names(bits: u8) -> String {
    let mut names = Vec::new();
    for (bit, name) in [
        (violation::BUDGET_EXCEEDED_BY_EVICTION, "an eviction exceeded the budget"),
        (violation::BUDGET_EXCEEDED_BY_CONTROLLER, "a controller deletion exceeded the budget"),
        (violation::REPLACEMENT_LOOP, "pods replaced in a loop"),
    ] {
        if bits & bit != 0 {
            names.push(name);
        }
    }
    names.join(", ")
}

/// The safety property's name.
pub const NO_BUDGET_EXCEEDED: &str = "no budget is exceeded by voluntary disruptions";

impl Model for ZpdbModel {
    type State = ZpdbState;
    type Action = ZpdbStep;

    fn init_states(&self) -> Vec<ZpdbState> {
        // With a rollout, revision r1 has been pushed and observed; every pod still runs r0.
        let update = u8::from(self.config.rollout);
        let pod = Pod {
            exists: true,
            ready: true,
            terminating: false,
            revision: 0,
            generation: 0,
            intents: [None; DECIDERS],
            kept_on_statefulset: [None; DECIDERS],
        };
        let zone = Zone { update, current: 0, resource_version: 0, pods: vec![pod; self.config.pods as usize] };
        let truth = World { zones: vec![zone; self.config.zones as usize] };
        vec![ZpdbState {
            view: truth.planner_view(),
            truth,
            pending: Vec::new(),
            expectations: Vec::new(),
            ctrl: Ctrl::Idle { blocked: false },
            drains: vec![Drain::Idle; self.config.replicas as usize],
            evictions_left: self.config.evictions,
            crashes_left: self.config.crashes,
            restarts_left: self.config.restarts,
            webhook_crashes_left: self.config.webhook_crashes,
            violations: 0,
            evicted: false,
            overlapped: false,
        }]
    }

    fn actions(&self, s: &ZpdbState, steps: &mut Vec<ZpdbStep>) {
        // A violating state is reported, not explored further.
        if s.violations != 0 {
            return;
        }
        // The replicas are alike: only the first idle one takes a new request.
        if s.evictions_left > 0
            && let Some(r) = s.drains.iter().position(|d| *d == Drain::Idle)
        {
            for (z, zone) in s.truth.zones.iter().enumerate() {
                for (i, p) in zone.pods.iter().enumerate() {
                    let waits = !self.config.same_pod_races && Self::intent_relied_on(s, z as u8, i as u8);
                    if p.exists && !p.terminating && !waits {
                        steps.push(ZpdbStep::DrainRequests { replica: r as u8, zone: z as u8, pod: i as u8 });
                    }
                }
            }
        }
        for (r, d) in s.drains.iter().enumerate() {
            match d {
                Drain::Idle => {}
                Drain::Deciding(_) => {
                    steps.push(ZpdbStep::WebhookDecides(r as u8));
                    if s.webhook_crashes_left > 0 {
                        steps.push(ZpdbStep::WebhookCrashes(r as u8));
                    }
                }
                Drain::Committing { .. } => steps.push(ZpdbStep::EvictionCommits(r as u8)),
            }
        }
        match &s.ctrl {
            Ctrl::Idle { blocked: false } => {
                if !self.plan(&s.view, &s.expectations).1.is_empty() {
                    steps.push(ZpdbStep::ControllerPlans);
                }
            }
            Ctrl::Idle { blocked: true } => {}
            Ctrl::Acting { ops, deciding: None, cleared: false, .. }
                if !self.config.same_pod_races
                    && matches!(ops.first(), Some(Op::Delete { zone, pod, .. }) if Self::being_decided(s, *zone, *pod)) =>
                {}
            Ctrl::Acting { .. } => steps.push(ZpdbStep::ControllerActs),
        }
        let idle = s.ctrl == (Ctrl::Idle { blocked: false }) && s.expectations.is_empty() && s.pending.is_empty();
        if s.restarts_left > 0 && !idle {
            steps.push(ZpdbStep::ControllerRestarts);
        }
        if !s.pending.is_empty() {
            steps.push(ZpdbStep::CacheCatchesUp);
        }
        for (z, zone) in s.truth.zones.iter().enumerate() {
            for (i, p) in zone.pods.iter().enumerate() {
                let (z, i) = (z as u8, i as u8);
                if !p.exists {
                    steps.push(ZpdbStep::PodRecreated(z, i));
                    continue;
                }
                if p.terminating {
                    steps.push(ZpdbStep::PodTerminates(z, i));
                } else if !p.ready {
                    steps.push(ZpdbStep::PodBecomesReady(z, i));
                } else if s.crashes_left > 0 {
                    steps.push(ZpdbStep::PodCrashes(z, i));
                }
                if p.has_intent() && !Self::intent_relied_on(s, z, i) {
                    steps.push(ZpdbStep::IntentExpires(z, i));
                }
            }
        }
    }

    fn next_state(&self, last: &ZpdbState, step: ZpdbStep) -> Option<ZpdbState> {
        let mut s = last.clone();
        match step {
            ZpdbStep::DrainRequests { replica, zone, pod } => {
                let request = self.config.evictions - s.evictions_left + 1;
                s.evictions_left -= 1;
                let d = self.step_decision(None, &mut s.truth, (zone, pod), Who::Drain(request));
                s.drains[replica as usize] = Drain::Deciding(d);
                self.drain_answered(&mut s, replica as usize);
            }
            ZpdbStep::WebhookDecides(r) => {
                let Drain::Deciding(d) = s.drains[r as usize].clone() else { return None };
                let d = self.step_decision(Some(&d), &mut s.truth, (d.zone, d.pod), Who::Drain(0));
                s.drains[r as usize] = Drain::Deciding(d);
                self.drain_answered(&mut s, r as usize);
            }
            ZpdbStep::EvictionCommits(r) => {
                let Drain::Committing { zone, pod, generation } = s.drains[r as usize] else { return None };
                let p = &mut s.truth.zones[zone as usize].pods[pod as usize];
                if p.exists && p.generation == generation {
                    p.terminating = true;
                }
                s.drains[r as usize] = Drain::Idle;
            }
            ZpdbStep::WebhookCrashes(r) => {
                s.webhook_crashes_left -= 1;
                s.drains[r as usize] = Drain::Idle;
            }
            ZpdbStep::ControllerPlans => {
                let (retained, ops) = self.plan(&s.view, &s.expectations);
                s.expectations = retained;
                s.ctrl = Ctrl::Acting { ops, deciding: None, cleared: false, held: false, heard: false };
            }
            ZpdbStep::ControllerActs => self.controller_acts(&mut s),
            ZpdbStep::ControllerRestarts => {
                s.restarts_left -= 1;
                s.ctrl = Ctrl::Idle { blocked: false };
                s.expectations.clear();
                s.pending.clear();
                s.view = s.truth.planner_view();
            }
            ZpdbStep::CacheCatchesUp => s.view = s.pending.remove(0),
            ZpdbStep::PodTerminates(z, i) => {
                let p = &mut s.truth.zones[z as usize].pods[i as usize];
                *p = Pod {
                    exists: false,
                    ready: false,
                    terminating: false,
                    intents: [None; DECIDERS],
                    kept_on_statefulset: [None; DECIDERS],
                    ..*p
                };
            }
            ZpdbStep::PodRecreated(z, i) => {
                let update = s.truth.zones[z as usize].update;
                let p = &mut s.truth.zones[z as usize].pods[i as usize];
                let generation = p.generation.saturating_add(1);
                *p = Pod {
                    exists: true,
                    ready: false,
                    terminating: false,
                    revision: update,
                    generation,
                    intents: [None; DECIDERS],
                    kept_on_statefulset: [None; DECIDERS],
                };
                if generation > self.max_generation() {
                    s.violations |= violation::REPLACEMENT_LOOP;
                }
            }
            ZpdbStep::PodBecomesReady(z, i) => s.truth.zones[z as usize].pods[i as usize].ready = true,
            ZpdbStep::PodCrashes(z, i) => {
                s.crashes_left -= 1;
                s.truth.zones[z as usize].pods[i as usize].ready = false;
            }
            ZpdbStep::IntentExpires(z, i) => {
                let p = &mut s.truth.zones[z as usize].pods[i as usize];
                p.intents = [None; DECIDERS];
                p.kept_on_statefulset = [None; DECIDERS];
            }
        }
        self.changed(&last.truth, &mut s, step == ZpdbStep::ControllerActs);
        s.drains.sort();
        s.overlapped |= Self::decisions_in_flight(&s) >= 2;
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(NO_BUDGET_EXCEEDED, |_: &ZpdbModel, s: &ZpdbState| {
                s.violations & (violation::BUDGET_EXCEEDED_BY_EVICTION | violation::BUDGET_EXCEEDED_BY_CONTROLLER) == 0
            }),
            Property::always("no replacement loop", |_: &ZpdbModel, s: &ZpdbState| {
                s.violations & violation::REPLACEMENT_LOOP == 0
            }),
            Property::always("quiescent states are converged", |m: &ZpdbModel, s: &ZpdbState| {
                s.violations != 0 || !m.is_quiescent(s) || Self::is_converged(s)
            }),
            Property::sometimes("an eviction is allowed", |_: &ZpdbModel, s: &ZpdbState| s.evicted),
            Property::sometimes("two decisions are in flight at once", |_: &ZpdbModel, s: &ZpdbState| s.overlapped),
            Property::sometimes("a rollout completes", |_: &ZpdbModel, s: &ZpdbState| {
                Self::is_converged(s) && s.truth.zones.iter().all(|z| z.current == 1)
            }),
        ]
    }
}
