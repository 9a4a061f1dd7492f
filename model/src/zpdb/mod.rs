//! A stateright model of one rollout group under a ZoneAwarePodDisruptionBudget: a drain evicting pods through the
//! pod-eviction webhook (two or more replicas deciding at once) while the rollout controller replaces pods, each of
//! its deletions asking the same decision first (reference 5.5).
//!
//! Every decision is the real code: each eviction, the drain's and the controller's, is the core's step machine
//! ([`rollout_core::zpdb::EvictPod`], or a test-only [`Evictor`] wrapping it) driven one need at a time, each read or
//! write of the API's truth a model step of its own, so decisions interleave with each other and with everything
//! else; the controller plans with the real pass ([`rollout_core::plan_pass`]) on a cache that may lag and carries
//! the plan out with the core's execution machine ([`rollout_core::execution::Execution`]), as the reconciler does:
//! each deletion judged by that decision first, the pass's other deletions held once one is held back. The model
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
//!
//! The model is cut along its seams: its state, what the API server holds and each actor's progress ([`state`]);
//! the decisions, the core's machine driven against the truth one need at a time ([`decisions`]); the controller,
//! its cache, its pass and the execution of its writes ([`controller`]); and the safety judgement with the reading of a state for
//! people ([`judgement`]). This module owns the configuration, the model itself and its steps.

mod controller;
mod decisions;
mod judgement;
mod state;

use controller::to_op;
use decisions::{need_name, statefulset_key};
pub use judgement::violation_names;
pub use state::{Ctrl, Decision, Drain, Exp, Op, Pod, World, Zone, ZpdbState, ZpdbStep, violation};

use jiff::Timestamp;
use rollout_core::Failure;
use rollout_core::execution::{Execution, ExecutionSettings, Need as ExecutionNeed, Observed as ExecutionObserved};
use rollout_core::fixture;
use rollout_core::keys;
use rollout_core::natural::pod_ordinal;
use rollout_core::zpdb::{
    BudgetPod, EvictPod, EvictionRequest, EvictionSettings, KnownBudgets, Lookup, Need, Observed, Requester,
    Serialisation, StatefulSetIntent, ZpdbConfig,
};
use rollout_core::{
    Action, Defences, Expectation, GroupSnapshot, MaxUnavailable, PassInput, PendingExpectation, PodView,
    StatefulSetView, plan_pass,
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

/// Deciders an intent can name: the controller and up to `DECIDERS - 1` drain requests.
const DECIDERS: usize = 8;

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
type PlanMemo = (Vec<Exp>, Vec<Action>);

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
            ctrl if !self.config.same_pod_races
                && matches!(ctrl.to_judge(), Some(Op::Delete { zone, pod, .. }) if Self::being_decided(s, zone, pod)) =>
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
                let (retained, actions) = self.plan(&s.view, &s.expectations);
                s.expectations = retained;
                self.execute(&mut s, actions);
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
