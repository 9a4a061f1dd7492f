//! `rollout-model`: a stateright model of one rollout group whose controller is the real `rollout-core` planner.
//!
//! The model owns only the environment: the truth (what the API server holds), the controller's cache (a prefix
//! of the truth's write history, lagging by up to `stale` writes), the StatefulSet controller, the kubelet, users
//! and crashes. Every controller step converts its cached view into a `GroupSnapshot`, calls the injected
//! [`Planner`] (in production: [`rollout_core::RolloutPlanner`]) and executes the plan one write at a time, with the
//! same preconditions and expectations as the real reconcile loop. It never decides anything itself.
//!
//! Safety is judged at the moment of each controller write, against what the controller knew: its cached view plus
//! its own writes that the view has not caught up with yet (the "believed" state). Changes it could not have seen
//! (a pod crashing after the cache was read) are not held against it; forgetting its own writes is.

pub mod checked;
pub mod election;
pub mod mirror;
pub mod scaling;
pub mod zpdb;

use rollout_core::Failure;
use rollout_core::execution::{Execution, ExecutionSettings, Need, Observed, StepClaimed};
use rollout_core::fixture;
use rollout_core::natural::pod_ordinal;
use rollout_core::{
    Action, Defences, DownscaleRecord, Expectation, ExpectationLifetimes, GroupSnapshot, MaxUnavailable, PassInput,
    PendingExpectation, Planner, RecordRead, StatefulSetView, ZoneTracker, downscale::DownscaleInProgress, keys,
    plan_pass_with,
};
use stateright::{Model, Property};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub const ZONES: [&str; 4] = ["zone-a", "zone-b", "zone-c", "zone-d"];
const REVISIONS: [&str; 4] = ["r0", "r1", "r2", "r3"];
const GROUP: &str = "ingester";

/// The environment's bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelConfig {
    pub zones: u8,
    pub pods: u8,
    pub max_unavailable: u8,
    /// How many writes the controller's cache may lag behind the truth (0 = always fresh).
    pub stale: u8,
    /// Pods that may crash (become unready) over a run.
    pub crashes: u8,
    /// Pods that may be deleted by someone else (evicted; terminating but still Ready for a while).
    pub evictions: u8,
    /// Revisions the user rolls out: 1 = one rollout, 2 = a second revision pushed at any point (superseding).
    pub revisions: u8,
    /// StatefulSets the user may pause (each pause can be undone at any time).
    pub pauses: u8,
    /// Controller crashes (expectations and in-flight writes lost, cache rebuilt from the truth).
    pub restarts: u8,
    /// Model the StatefulSet status counts (`readyReplicas`) lagging behind the pods.
    pub status_lag: bool,
    /// Downscales the prepare-downscale webhook prepares over a run (each: its in-progress marker is written into
    /// the group downscale record, later removed). Non-zero makes the group served by the webhook, with the zone
    /// tracker on: the controller's pass reads the record, and claims its rollout steps in it.
    pub downscales: u8,
    /// Times the record becomes unreadable (and later readable again) over a run.
    pub record_outages: u8,
    /// Deletions whose answer is lost over a run: the controller sees no answer (outcome unknown) while the
    /// request stays in flight and commits later, at any point (the rollout step's claim outlives it).
    pub lost_answers: u8,
    /// The defences in depth the controller runs with (test-only switches, `rollout_core::defences`): all of them
    /// but in the configurations that show what one layer holds off on its own. The model carries the uid
    /// precondition, the expectations, the record failing closed and the rollout-step claim.
    pub defences: Defences,
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            zones: 3,
            pods: 2,
            max_unavailable: 1,
            stale: 0,
            crashes: 0,
            evictions: 0,
            revisions: 1,
            pauses: 0,
            restarts: 0,
            status_lag: false,
            downscales: 0,
            record_outages: 0,
            lost_answers: 0,
            defences: Defences::ALL,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PodState {
    pub exists: bool,
    pub revision: u8,
    pub ready: bool,
    pub terminating: bool,
    /// Incarnation of the pod name: part of its uid, bumped when the pod is recreated.
    pub generation: u8,
}

impl PodState {
    fn available(&self) -> bool {
        self.exists && self.ready && !self.terminating
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ZoneState {
    /// Revision of the pod template in the spec (what the user last pushed).
    pub target: u8,
    /// `status.updateRevision`: the template revision the StatefulSet controller has observed.
    pub update: u8,
    /// `status.currentRevision`.
    pub current: u8,
    pub paused: bool,
    pub resource_version: u8,
    /// `status.readyReplicas` as last reported (only lags when `status_lag`).
    pub ready_replicas: u8,
    pub pods: Vec<PodState>,
}

impl ZoneState {
    fn unavailable(&self) -> usize {
        self.pods.iter().filter(|p| !p.available()).count()
    }

    fn all_available(&self) -> bool {
        self.pods.iter().all(PodState::available)
    }

    fn actual_ready(&self) -> u8 {
        self.pods.iter().filter(|p| p.available()).count() as u8
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct World {
    pub zones: Vec<ZoneState>,
}

/// The group downscale record (the zone tracker's ConfigMap), as far as rollouts are concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Record {
    /// Its resourceVersion: every write bumps it, so a claim conditional on it fails after any other write.
    pub version: u8,
    /// A downscale is being prepared (the webhook's in-progress marker).
    pub marker: bool,
    /// A rollout step of the controller is live (its claim).
    pub step: bool,
    /// Reads and writes of the record fail.
    pub unreadable: bool,
}

/// A controller write, compactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// Delete pod `pod` of zone `zone`; with `generation`, only that incarnation (uid precondition).
    DeletePod { zone: u8, pod: u8, generation: Option<u8> },
    /// Set currentRevision, conditional on the resourceVersion the plan was made from.
    SetCurrentRevision { zone: u8, revision: u8, resource_version: u8 },
    /// Claim the rollout step in the record, conditional on the record version the pass read (`None`: the read
    /// failed, so the claim is a create of the record, which fails since the record exists).
    ClaimStep { version: Option<u8> },
    /// End the rollout step (every deletion answered).
    FinishStep,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Exp {
    PodDeleted { zone: u8, pod: u8, generation: u8 },
    ZoneWritten { zone: u8, resource_version: u8 },
}

/// Violated invariants, as bits of [`State::violations`].
pub mod violation {
    pub const ONE_ZONE_AT_A_TIME: u8 = 1;
    pub const MAX_UNAVAILABLE: u8 = 2;
    pub const ONLY_READY_COUNTS_AS_READY: u8 = 4;
    pub const PAUSED_IS_LEFT_ALONE: u8 = 8;
    pub const NO_REPLACEMENT_LOOP: u8 = 16;
    pub const NO_ROLLOUT_DURING_DOWNSCALE: u8 = 32;
    pub const ONLY_SEEN_PODS_DELETED: u8 = 64;
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    pub truth: World,
    /// The controller's cache.
    pub view: World,
    /// Writes the cache has not seen yet, oldest first: the truth after each, and the controller's own op if it was
    /// the controller's.
    pub pending: Vec<(World, Option<Op>)>,
    pub expectations: Vec<Exp>,
    /// The execution of the plan in flight: the core's machine, the record version its pass read, and its next
    /// need as a write of this model (`None`: no plan in flight).
    pub exec: Option<Box<(Execution, Option<u8>)>>,
    pub need: Option<Op>,
    /// The execution of what the planner decides on the current view, not started (derived; `None` while a plan
    /// is in flight or when there is nothing to do).
    pub next_plan: Option<Box<Execution>>,
    /// What the controller knew when it made the plan in flight (its cache plus its own unobserved writes), updated
    /// with the plan's writes as they are made. Writes are judged against this.
    pub plan_basis: Option<World>,
    pub crashes_left: u8,
    pub evictions_left: u8,
    pub pushes_left: u8,
    pub pauses_left: u8,
    pub restarts_left: u8,
    pub record: Record,
    pub downscales_left: u8,
    pub outages_left: u8,
    pub lost_answers_left: u8,
    /// A deletion whose answer was lost, still in flight: it commits later (its preconditions checked then).
    pub in_flight: Option<Op>,
    pub violations: u8,
    /// A plan deleted two or more pods of one zone at once.
    pub parallel_replacement: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Step {
    /// The controller plans on its cache (the plan's writes are then executed one by one).
    ControllerPlans,
    /// The controller executes the next write of its plan.
    ControllerWrites,
    /// The controller sends the next deletion of its plan and its answer is lost: the request stays in flight.
    ControllerWritesAnswerLost,
    /// The deletion in flight reaches the API server.
    InFlightDeletionCommits,
    /// The cache receives the next watch event.
    CacheCatchesUp,
    /// The controller process crashes and restarts.
    ControllerRestarts,
    /// The StatefulSet controller observes a new template: `updateRevision` moves.
    StatefulSetObservesSpec(u8),
    /// The StatefulSet controller recreates a missing pod at the update revision.
    StatefulSetRecreatesPod(u8, u8),
    /// The StatefulSet controller refreshes `readyReplicas`.
    StatefulSetReportsStatus(u8),
    PodTerminates(u8, u8),
    PodBecomesReady(u8, u8),
    PodCrashes(u8, u8),
    PodIsEvicted(u8, u8),
    UserPushesRevision,
    UserPauses(u8),
    UserUnpauses(u8),
    /// The prepare-downscale webhook writes its in-progress marker (compare-and-swap: refused while a rollout step
    /// is live).
    WebhookMarksDownscale,
    /// The downscale is done (committed or denied): the marker is removed.
    WebhookEndsDownscale,
    /// A rollout step whose deletions are all answered (or abandoned by a crash) expires.
    RolloutStepExpires,
    RecordBecomesUnreadable,
    RecordBecomesReadable,
}

/// The model, with the planner under test.
#[derive(Clone)]
pub struct RolloutModel {
    pub config: ModelConfig,
    pub planner: Arc<dyn Planner + Send + Sync>,
    /// Memo of [`RolloutModel::decide`]; the planner is pure, so its answer for a view never changes.
    decisions: Arc<Mutex<HashMap<DecisionKey, Decision>>>,
}

/// The controller's view, its expectations, whether it may plan (no plan in flight), and the record as it reads
/// it (marker, unreadable).
type DecisionKey = (World, Vec<Exp>, bool, (bool, bool));
/// The expectations it still holds, its plan, and whether the plan's deletions are claimed as a rollout step.
type Decision = (Vec<Exp>, Vec<Action>, bool);

impl RolloutModel {
    pub fn new(config: ModelConfig, planner: Arc<dyn Planner + Send + Sync>) -> Self {
        assert!(config.zones as usize <= ZONES.len() && config.zones > 0, "1 to {} zones", ZONES.len());
        assert!((config.revisions as usize) < REVISIONS.len() && config.revisions > 0, "1 to 3 revisions");
        RolloutModel { config, planner, decisions: Arc::default() }
    }

    /// The planner's input for a world, built like the production cache builds it.
    pub fn snapshot(&self, w: &World) -> GroupSnapshot {
        let mut statefulsets = Vec::with_capacity(w.zones.len());
        let mut pods = Vec::new();
        for (z, zone) in w.zones.iter().enumerate() {
            let mut s: StatefulSetView =
                fixture::statefulset(GROUP, ZONES[z], self.config.pods as u32, REVISIONS[zone.current as usize]);
            s.resource_version = zone.resource_version.to_string();
            s.generation = Some(i64::from(zone.target) + 1);
            s.settings.paused = zone.paused;
            s.settings.max_unavailable = MaxUnavailable::Count(u32::from(self.config.max_unavailable));
            if self.uses_record() {
                s.labels.insert(keys::PREPARE_DOWNSCALE.to_string(), "true".to_string());
            }
            if let Some(status) = s.status.as_mut() {
                status.update_revision = REVISIONS[zone.update as usize].to_string();
                status.observed_generation = Some(i64::from(zone.update) + 1);
                status.ready_replicas = u32::from(zone.ready_replicas);
            }
            for (i, p) in zone.pods.iter().enumerate() {
                if !p.exists {
                    continue;
                }
                let mut v = fixture::pod(&s, i as u32, REVISIONS[p.revision as usize]);
                v.uid = format!("{}@{}", v.name, p.generation);
                if !p.ready {
                    v = fixture::not_ready(v);
                }
                if p.terminating {
                    v = fixture::terminating(v);
                }
                pods.push(v);
            }
            statefulsets.push(s);
        }
        GroupSnapshot::assemble(GROUP, statefulsets, &pods)
    }

    /// Whether the group is served by the prepare-downscale webhook, with the zone tracker on.
    fn uses_record(&self) -> bool {
        self.config.downscales > 0 || self.config.record_outages > 0
    }

    /// What the controller does with its cache, its expectations and the record it reads live: drop the
    /// expectations the cache shows, then run the whole pass (only when no plan is in flight). Memoised: many
    /// states share the controller's view.
    fn decide(&self, view: &World, expectations: &[Exp], planning: bool, record: Record) -> Decision {
        let key = (view.clone(), expectations.to_vec(), planning, (record.marker, record.unreadable));
        if let Some(hit) = self.decisions.lock().ok().and_then(|m| m.get(&key).cloned()) {
            return hit;
        }
        let snapshot = self.snapshot(view);
        let retained: Vec<Exp> =
            expectations.iter().copied().filter(|e| !to_core_expectation(*e).is_observed(&snapshot)).collect();
        let (plan, claims) = if planning {
            let pending: Vec<PendingExpectation> = retained
                .iter()
                .map(|e| PendingExpectation { expectation: to_core_expectation(*e), expires_at: jiff::Timestamp::MAX })
                .collect();
            let markers: Vec<DownscaleInProgress> = if record.marker {
                // Another zone's downscale, live for longer than the run (the model has no clock).
                vec![DownscaleInProgress {
                    statefulset: ZONES[0].to_string(),
                    group: GROUP.to_string(),
                    until: jiff::Timestamp::MAX,
                }]
            } else {
                Vec::new()
            };
            let empty = DownscaleRecord::default();
            let mut input = PassInput::new(jiff::Timestamp::UNIX_EPOCH, &pending);
            input.defences = self.config.defences;
            if self.uses_record() {
                input.zone_tracker = ZoneTracker::On;
                input.record = if record.unreadable {
                    RecordRead::Unreadable { error: "the record cannot be read" }
                } else {
                    RecordRead::Read { record: &empty, markers: &markers }
                };
            }
            let pass = plan_pass_with(&*self.planner, &snapshot, &input);
            // This model's zones carry no scaling annotations, so the planner never scales them; replica changes
            // are the scaling model's.
            let actions = pass.plan.actions.into_iter().filter(|a| !matches!(a, Action::Scale { .. })).collect();
            (actions, pass.claims_rollout_step)
        } else {
            (Vec::new(), false)
        };
        let decision = (retained, plan, claims);
        if let Ok(mut m) = self.decisions.lock() {
            m.insert(key, decision.clone());
        }
        decision
    }

    /// The next plan as the controller would execute it: the core's execution machine over the pass's actions.
    fn next_plan(&self, s: &State) -> (Vec<Exp>, Option<Box<Execution>>) {
        let (retained, actions, claims) = self.decide(&s.view, &s.expectations, s.exec.is_none(), s.record);
        let exec = (!actions.is_empty()).then(|| Box::new(Execution::new(actions, claims, self.execution_settings())));
        (retained, exec)
    }

    /// The controller's execution settings (production's durations; this model has no budgets and no replica
    /// changes, and no clock: every need is answered at the same instant).
    fn execution_settings(&self) -> ExecutionSettings {
        ExecutionSettings {
            defences: self.config.defences,
            zone_tracker: self.uses_record(),
            budgets: false,
            claim_ttl: Duration::from_secs(90),
            commit_margin: Duration::from_secs(10),
            request_bound: Duration::from_secs(60),
            lifetimes: ExpectationLifetimes { applied: Duration::from_secs(300), unknown: Duration::from_secs(70) },
        }
    }

    /// Moves the execution on to `need`: the expectations its writes left join the controller's, needs with no
    /// effect on this model's world are acknowledged at once, and the next write becomes the state's `need`.
    fn advance(&self, s: &mut State, mut exec: Execution, read_version: Option<u8>, mut need: Need) {
        loop {
            s.expectations.extend(exec.take_expectations().into_iter().filter_map(|e| to_model_expectation(&e)));
            let observed = match &need {
                Need::Done(_) => {
                    s.exec = None;
                    s.need = None;
                    return;
                }
                Need::DeletePod { statefulset, pod, uid } => {
                    s.need = pod_op(statefulset, pod, uid.as_deref());
                    break;
                }
                Need::SetCurrentRevision { statefulset, revision, resource_version } => {
                    s.need = revision_op(statefulset, revision, resource_version);
                    break;
                }
                Need::ClaimStep { .. } => {
                    s.need = Some(Op::ClaimStep { version: read_version });
                    break;
                }
                Need::FinishStep { .. } => {
                    s.need = Some(Op::FinishStep);
                    break;
                }
                Need::JudgeDeletion { .. } => Observed::Judged(None),
                Need::EndClaim { .. } | Need::TurnOff { .. } => Observed::Acknowledged,
                Need::ClaimDownscale { .. } | Need::PatchReplicas { .. } => {
                    Observed::Written(Err(Failure::Failed("not modelled".to_string())))
                }
            };
            need = self.planner.next_need(&mut exec, observed, jiff::Timestamp::UNIX_EPOCH);
        }
        if s.need.is_none() {
            // A write this model cannot express: the execution is abandoned (never reached with this model's plans).
            s.exec = None;
            return;
        }
        s.exec = Some(Box::new((exec, read_version)));
    }

    /// A controller's deletion reaches the truth (its preconditions held). Judged on the truth: no deletion commits
    /// while a downscale is being prepared.
    fn commit_deletion(&self, s: &mut State, op: Op) {
        let Op::DeletePod { zone, pod, .. } = op else { return };
        if s.record.marker {
            s.violations |= violation::NO_ROLLOUT_DURING_DOWNSCALE;
        }
        let p = &mut s.truth.zones[zone as usize].pods[pod as usize];
        if !p.terminating {
            p.terminating = true;
            self.record_write(s, Some(op));
        }
    }

    /// The controller's knowledge: its cache plus its own writes the cache has not shown yet.
    pub fn believed(&self, s: &State) -> World {
        let mut w = s.view.clone();
        for op in s.pending.iter().filter_map(|(_, op)| *op) {
            apply_own_write(&mut w, op);
        }
        w
    }

    /// Records a change of the truth: the cache sees it at once when fresh, else it queues (forcing the oldest
    /// queued write into the cache when the lag bound is reached).
    fn record_write(&self, s: &mut State, op: Option<Op>) {
        if !self.config.status_lag {
            for z in &mut s.truth.zones {
                z.ready_replicas = z.actual_ready();
            }
        }
        if self.config.stale == 0 {
            s.view = s.truth.clone();
        } else {
            s.pending.push((s.truth.clone(), op));
            if s.pending.len() > self.config.stale as usize {
                s.view = s.pending.remove(0).0;
            }
        }
    }

    /// Checks a controller write against what the controller knew when it planned, before it is applied, then
    /// adds the write to that knowledge.
    fn check_write(&self, s: &mut State, op: Op) {
        let believed = s.plan_basis.clone().unwrap_or_else(|| self.believed(s));
        match op {
            Op::DeletePod { zone, pod, .. } => {
                let z = &believed.zones[zone as usize];
                // The pod deleted is another incarnation than the one the plan was made on: the decision was about
                // a pod the controller never saw.
                let known = z.pods[pod as usize];
                if !known.exists || known.generation != s.truth.zones[zone as usize].pods[pod as usize].generation {
                    s.violations |= violation::ONLY_SEEN_PODS_DELETED;
                }
                let others_ready =
                    believed.zones.iter().enumerate().all(|(i, o)| i == zone as usize || o.all_available());
                if !others_ready {
                    s.violations |= violation::ONE_ZONE_AT_A_TIME;
                }
                if z.pods[pod as usize].available() && z.unavailable() + 1 > self.config.max_unavailable as usize {
                    s.violations |= violation::MAX_UNAVAILABLE;
                }
                if z.paused {
                    s.violations |= violation::PAUSED_IS_LEFT_ALONE;
                }
            }
            Op::SetCurrentRevision { zone, revision, .. } => {
                let z = &believed.zones[zone as usize];
                if !z.pods.iter().all(|p| p.available() && p.revision == revision) {
                    s.violations |= violation::ONLY_READY_COUNTS_AS_READY;
                }
            }
            Op::ClaimStep { .. } | Op::FinishStep => {}
        }
    }

    /// How many times one pod name may be recreated: once per rolled-out revision, crash and eviction, plus one.
    /// More means pods are being replaced in a loop (and keeps the state space finite).
    pub fn max_generation(&self) -> u8 {
        self.config.revisions + self.config.crashes + self.config.evictions + 1
    }

    /// No step of any actor is possible.
    pub fn is_quiescent(&self, s: &State) -> bool {
        let mut steps = Vec::new();
        self.actions(s, &mut steps);
        steps.is_empty()
    }

    /// Every zone is on the latest revision, ready, with currentRevision advanced, and the cache has caught up.
    pub fn is_converged(s: &State) -> bool {
        s.pending.is_empty()
            && s.need.is_none()
            && s.in_flight.is_none()
            && s.truth.zones.iter().all(|z| {
                z.update == z.target
                    && z.current == z.update
                    && z.pods.iter().all(|p| p.available() && p.revision == z.update)
            })
    }

    /// One line per zone: `zone-a r1 [1R 1r 0R* -]` (revision + R ready / r not ready, * terminating, - missing).
    pub fn describe(&self, w: &World) -> String {
        let mut out = String::new();
        for (i, z) in w.zones.iter().enumerate() {
            let pods: Vec<String> = z
                .pods
                .iter()
                .map(|p| {
                    if !p.exists {
                        "-".to_string()
                    } else {
                        format!(
                            "{}{}{}",
                            p.revision,
                            if p.ready { "R" } else { "r" },
                            if p.terminating { "*" } else { "" }
                        )
                    }
                })
                .collect();
            let _ = write!(
                out,
                "{}{} spec r{} update r{} current r{}{} [{}]",
                if i > 0 { "; " } else { "" },
                ZONES[i],
                z.target,
                z.update,
                z.current,
                if z.paused { " paused" } else { "" },
                pods.join(" ")
            );
        }
        out
    }

    /// A counterexample path as a timeline for people: each step, then the truth (and the cache, when it differs).
    pub fn timeline(&self, path: &[(State, Option<Step>)]) -> String {
        let mut out = String::new();
        if let Some((first, _)) = path.first() {
            let _ = writeln!(out, "  0. initial\n       truth: {}", self.describe(&first.truth));
        }
        for (i, pair) in path.windows(2).enumerate() {
            let ((state, step), (next, _)) = (&pair[0], &pair[1]);
            let what = match step {
                Some(Step::ControllerPlans) => format!(
                    "controller plans on its cache: {:?}",
                    next.exec.as_ref().map(|e| e.0.actions().to_vec()).unwrap_or_default()
                ),
                Some(Step::ControllerWrites) => match state.need {
                    Some(op) => format!("controller writes {op:?}"),
                    None => "controller writes".to_string(),
                },
                Some(Step::ControllerWritesAnswerLost) => match state.need {
                    Some(op) => format!("controller sends {op:?}; its answer is lost, the request stays in flight"),
                    None => "controller sends a write whose answer is lost".to_string(),
                },
                Some(Step::InFlightDeletionCommits) => match state.in_flight {
                    Some(op) => format!("the request in flight commits: {op:?}"),
                    None => "the request in flight commits".to_string(),
                },
                Some(other) => format!("{other:?}"),
                None => "?".to_string(),
            };
            let _ = writeln!(out, "{:>3}. {what}\n       truth: {}", i + 1, self.describe(&next.truth));
            if next.view != next.truth {
                let _ = writeln!(out, "       cache: {}", self.describe(&next.view));
            }
            if next.record != state.record {
                let r = next.record;
                let _ = writeln!(
                    out,
                    "       record: version {}{}{}{}",
                    r.version,
                    if r.marker { ", a downscale being prepared" } else { "" },
                    if r.step { ", a rollout step claimed" } else { "" },
                    if r.unreadable { ", unreadable" } else { "" }
                );
            }
            if next.violations != state.violations {
                let _ = writeln!(out, "       VIOLATION: {}", violation_names(next.violations & !state.violations));
            }
        }
        out
    }
}

pub fn violation_names(bits: u8) -> String {
    let mut names = Vec::new();
    for (bit, name) in [
        (violation::ONE_ZONE_AT_A_TIME, "one zone at a time"),
        (violation::MAX_UNAVAILABLE, "max unavailable"),
        (violation::ONLY_READY_COUNTS_AS_READY, "no zero-pod ready"),
        (violation::PAUSED_IS_LEFT_ALONE, "paused StatefulSet left alone"),
        (violation::NO_REPLACEMENT_LOOP, "no replacement loop"),
        (violation::NO_ROLLOUT_DURING_DOWNSCALE, "no rollout step while a downscale is being prepared"),
        (violation::ONLY_SEEN_PODS_DELETED, "only pods the controller has seen are deleted"),
    ] {
        if bits & bit != 0 {
            names.push(name);
        }
    }
    names.join(", ")
}

/// What the controller learns from its own successful write.
fn apply_own_write(w: &mut World, op: Op) {
    match op {
        Op::DeletePod { zone, pod, .. } => w.zones[zone as usize].pods[pod as usize].terminating = true,
        Op::SetCurrentRevision { zone, revision, .. } => w.zones[zone as usize].current = revision,
        Op::ClaimStep { .. } | Op::FinishStep => {}
    }
}

fn to_core_expectation(e: Exp) -> Expectation {
    match e {
        Exp::PodDeleted { zone, pod, generation } => {
            let name = format!("{}-{pod}", ZONES[zone as usize]);
            Expectation::PodDeleted {
                statefulset: ZONES[zone as usize].to_string(),
                uid: format!("{name}@{generation}"),
                pod: name,
            }
        }
        Exp::ZoneWritten { zone, resource_version } => Expectation::StatefulSetWritten {
            statefulset: ZONES[zone as usize].to_string(),
            previous_resource_version: resource_version.to_string(),
        },
    }
}

fn zone_index(name: &str) -> Option<u8> {
    ZONES.iter().position(|z| *z == name).map(|i| i as u8)
}

/// The model's write for the execution's deletion of `pod` (with the uid precondition when given).
fn pod_op(statefulset: &str, pod: &str, uid: Option<&str>) -> Option<Op> {
    let zone = zone_index(statefulset)?;
    let ordinal = pod_ordinal(statefulset, pod)? as u8;
    let generation = uid.and_then(|uid| uid.rsplit_once('@')).and_then(|(_, g)| g.parse().ok());
    Some(Op::DeletePod { zone, pod: ordinal, generation })
}

/// The model's write for the execution's status update.
fn revision_op(statefulset: &str, revision: &str, resource_version: &str) -> Option<Op> {
    Some(Op::SetCurrentRevision {
        zone: zone_index(statefulset)?,
        revision: REVISIONS.iter().position(|r| *r == revision)? as u8,
        resource_version: resource_version.parse().ok()?,
    })
}

/// The model's form of an expectation the execution left (see [`to_core_expectation`]).
fn to_model_expectation(e: &PendingExpectation) -> Option<Exp> {
    match &e.expectation {
        Expectation::PodDeleted { statefulset, pod, uid } => {
            let (_, generation) = uid.rsplit_once('@')?;
            Some(Exp::PodDeleted {
                zone: zone_index(statefulset)?,
                pod: pod_ordinal(statefulset, pod)? as u8,
                generation: generation.parse().ok()?,
            })
        }
        Expectation::StatefulSetWritten { statefulset, previous_resource_version } => Some(Exp::ZoneWritten {
            zone: zone_index(statefulset)?,
            resource_version: previous_resource_version.parse().ok()?,
        }),
    }
}

impl Model for RolloutModel {
    type State = State;
    type Action = Step;

    fn init_states(&self) -> Vec<State> {
        // Revision 1 has just been pushed and observed; every pod still runs revision 0.
        let zone = ZoneState {
            target: 1,
            update: 1,
            current: 0,
            paused: false,
            resource_version: 0,
            ready_replicas: self.config.pods,
            pods: vec![
                PodState { exists: true, revision: 0, ready: true, terminating: false, generation: 0 };
                self.config.pods as usize
            ],
        };
        let truth = World { zones: vec![zone; self.config.zones as usize] };
        let mut s = State {
            view: truth.clone(),
            truth,
            pending: Vec::new(),
            expectations: Vec::new(),
            exec: None,
            need: None,
            next_plan: None,
            plan_basis: None,
            crashes_left: self.config.crashes,
            evictions_left: self.config.evictions,
            pushes_left: self.config.revisions - 1,
            pauses_left: self.config.pauses,
            restarts_left: self.config.restarts,
            record: Record::default(),
            downscales_left: self.config.downscales,
            outages_left: self.config.record_outages,
            lost_answers_left: self.config.lost_answers,
            in_flight: None,
            violations: 0,
            parallel_replacement: false,
        };
        s.next_plan = self.next_plan(&s).1;
        vec![s]
    }

    fn actions(&self, s: &State, steps: &mut Vec<Step>) {
        // A state that violates an invariant is reported, not explored further.
        if s.violations != 0 {
            return;
        }
        if s.next_plan.is_some() {
            steps.push(Step::ControllerPlans);
        }
        if s.need.is_some() {
            steps.push(Step::ControllerWrites);
        }
        if s.lost_answers_left > 0 && s.in_flight.is_none() && matches!(s.need, Some(Op::DeletePod { .. })) {
            steps.push(Step::ControllerWritesAnswerLost);
        }
        if s.in_flight.is_some() {
            steps.push(Step::InFlightDeletionCommits);
        }
        if !s.pending.is_empty() {
            steps.push(Step::CacheCatchesUp);
        }
        if s.restarts_left > 0 {
            steps.push(Step::ControllerRestarts);
        }
        if s.pushes_left > 0 {
            steps.push(Step::UserPushesRevision);
        }
        let r = s.record;
        if s.downscales_left > 0 && !r.marker && !r.step && !r.unreadable {
            steps.push(Step::WebhookMarksDownscale);
        }
        if r.marker && !r.unreadable {
            steps.push(Step::WebhookEndsDownscale);
        }
        // The claim outlives every deletion sent under it (the machine sends none that could outlive it).
        if r.step && s.in_flight.is_none() && !s.exec.as_ref().is_some_and(|e| e.0.deletions_to_come()) {
            steps.push(Step::RolloutStepExpires);
        }
        if r.unreadable {
            steps.push(Step::RecordBecomesReadable);
        } else if s.outages_left > 0 {
            steps.push(Step::RecordBecomesUnreadable);
        }
        for (zi, z) in s.truth.zones.iter().enumerate() {
            let zi = zi as u8;
            if z.target != z.update {
                steps.push(Step::StatefulSetObservesSpec(zi));
            }
            if self.config.status_lag && z.ready_replicas != z.actual_ready() {
                steps.push(Step::StatefulSetReportsStatus(zi));
            }
            if z.paused {
                steps.push(Step::UserUnpauses(zi));
            } else if s.pauses_left > 0 {
                steps.push(Step::UserPauses(zi));
            }
            for (pi, p) in z.pods.iter().enumerate() {
                let pi = pi as u8;
                if !p.exists {
                    steps.push(Step::StatefulSetRecreatesPod(zi, pi));
                    continue;
                }
                if p.terminating {
                    steps.push(Step::PodTerminates(zi, pi));
                } else {
                    if !p.ready {
                        steps.push(Step::PodBecomesReady(zi, pi));
                    } else if s.crashes_left > 0 {
                        steps.push(Step::PodCrashes(zi, pi));
                    }
                    if s.evictions_left > 0 {
                        steps.push(Step::PodIsEvicted(zi, pi));
                    }
                }
            }
        }
    }

    fn next_state(&self, last: &State, step: Step) -> Option<State> {
        let mut s = last.clone();
        match step {
            Step::ControllerPlans => {
                s.plan_basis = Some(self.believed(&s));
                let mut exec = *s.next_plan.take()?;
                let mut deletes_per_zone = [0u8; ZONES.len()];
                for action in exec.actions() {
                    if let Action::DeletePod { statefulset, .. } = action
                        && let Some(zone) = zone_index(statefulset)
                    {
                        deletes_per_zone[zone as usize] += 1;
                    }
                }
                s.parallel_replacement |= deletes_per_zone.iter().any(|n| *n >= 2);
                // A claimed step is conditional on the record version this pass read.
                let read_version = (!s.record.unreadable).then_some(s.record.version);
                let need = self.planner.next_need(&mut exec, Observed::Start, jiff::Timestamp::UNIX_EPOCH);
                self.advance(&mut s, exec, read_version, need);
            }
            Step::ControllerWrites => {
                let op = s.need.take()?;
                let (mut exec, read_version) = *s.exec.take()?;
                // Judged (`check_write`) against the controller's knowledge before this write, which joins it after.
                let observed = match op {
                    Op::DeletePod { zone, pod, generation } => {
                        let p = s.truth.zones[zone as usize].pods[pod as usize];
                        if !p.exists {
                            Observed::Written(Err(Failure::NotFound(format!("pod {zone}/{pod}"))))
                        } else if generation.is_some_and(|g| g != p.generation) {
                            Observed::Written(Err(Failure::Conflict(format!("pod {zone}/{pod}: uid"))))
                        } else {
                            if !p.terminating {
                                self.check_write(&mut s, op);
                            }
                            self.commit_deletion(&mut s, op);
                            Observed::Written(Ok(()))
                        }
                    }
                    Op::ClaimStep { version } => {
                        if s.record.unreadable {
                            Observed::StepClaimed(Err(Failure::Unavailable("the record cannot be written".into())))
                        } else if version != Some(s.record.version) {
                            // The record moved since the pass read it: plan again.
                            Observed::StepClaimed(Ok(StepClaimed::Stale))
                        } else {
                            s.record.step = true;
                            s.record.version = s.record.version.wrapping_add(1);
                            let until = jiff::Timestamp::UNIX_EPOCH + jiff::SignedDuration::from_secs(90);
                            Observed::StepClaimed(Ok(StepClaimed::Claimed { until }))
                        }
                    }
                    Op::FinishStep => {
                        // Unwritable, the step is left to expire.
                        if !s.record.unreadable {
                            s.record.step = false;
                            s.record.version = s.record.version.wrapping_add(1);
                        }
                        Observed::Acknowledged
                    }
                    Op::SetCurrentRevision { zone, revision, resource_version } => {
                        let z = &s.truth.zones[zone as usize];
                        if z.resource_version != resource_version {
                            Observed::Written(Err(Failure::Conflict(format!("zone {zone}: resourceVersion"))))
                        } else {
                            self.check_write(&mut s, op);
                            let z = &mut s.truth.zones[zone as usize];
                            z.current = revision;
                            z.resource_version += 1;
                            self.record_write(&mut s, Some(op));
                            Observed::Written(Ok(()))
                        }
                    }
                };
                if let Some(basis) = s.plan_basis.as_mut() {
                    apply_own_write(basis, op);
                }
                let need = self.planner.next_need(&mut exec, observed, jiff::Timestamp::UNIX_EPOCH);
                self.advance(&mut s, exec, read_version, need);
            }
            Step::ControllerWritesAnswerLost => {
                let op = s.need.take()?;
                let (mut exec, read_version) = *s.exec.take()?;
                s.lost_answers_left -= 1;
                // Judged when sent, against what the controller knew; it commits (or fails its preconditions) later.
                if let Op::DeletePod { zone, pod, .. } = op
                    && s.truth.zones[zone as usize].pods[pod as usize].exists
                {
                    self.check_write(&mut s, op);
                }
                s.in_flight = Some(op);
                if let Some(basis) = s.plan_basis.as_mut() {
                    apply_own_write(basis, op);
                }
                let lost = Observed::Written(Err(Failure::Unavailable("no answer: the request timed out".into())));
                let need = self.planner.next_need(&mut exec, lost, jiff::Timestamp::UNIX_EPOCH);
                self.advance(&mut s, exec, read_version, need);
            }
            Step::InFlightDeletionCommits => {
                if let Some(op @ Op::DeletePod { zone, pod, generation }) = s.in_flight.take() {
                    let p = s.truth.zones[zone as usize].pods[pod as usize];
                    if p.exists && generation.is_none_or(|g| g == p.generation) {
                        self.commit_deletion(&mut s, op);
                    }
                }
            }
            Step::CacheCatchesUp => {
                s.view = s.pending.remove(0).0;
            }
            Step::ControllerRestarts => {
                s.restarts_left -= 1;
                s.plan_basis = None;
                s.expectations.clear();
                s.exec = None;
                s.need = None;
                s.pending.clear();
                s.view = s.truth.clone();
            }
            Step::StatefulSetObservesSpec(z) => {
                let zone = &mut s.truth.zones[z as usize];
                zone.update = zone.target;
                zone.resource_version += 1;
                self.record_write(&mut s, None);
            }
            Step::StatefulSetRecreatesPod(z, p) => {
                let zone = &mut s.truth.zones[z as usize];
                let update = zone.update;
                let pod = &mut zone.pods[p as usize];
                *pod = PodState {
                    exists: true,
                    revision: update,
                    ready: false,
                    terminating: false,
                    generation: pod.generation.saturating_add(1),
                };
                if pod.generation > self.max_generation() {
                    s.violations |= violation::NO_REPLACEMENT_LOOP;
                }
                self.record_write(&mut s, None);
            }
            Step::StatefulSetReportsStatus(z) => {
                let zone = &mut s.truth.zones[z as usize];
                zone.ready_replicas = zone.actual_ready();
                zone.resource_version += 1;
                self.record_write(&mut s, None);
            }
            Step::PodTerminates(z, p) => {
                let pod = &mut s.truth.zones[z as usize].pods[p as usize];
                pod.exists = false;
                pod.ready = false;
                pod.terminating = false;
                self.record_write(&mut s, None);
            }
            Step::PodBecomesReady(z, p) => {
                s.truth.zones[z as usize].pods[p as usize].ready = true;
                self.record_write(&mut s, None);
            }
            Step::PodCrashes(z, p) => {
                s.crashes_left -= 1;
                s.truth.zones[z as usize].pods[p as usize].ready = false;
                self.record_write(&mut s, None);
            }
            Step::PodIsEvicted(z, p) => {
                s.evictions_left -= 1;
                s.truth.zones[z as usize].pods[p as usize].terminating = true;
                self.record_write(&mut s, None);
            }
            Step::UserPushesRevision => {
                s.pushes_left -= 1;
                for zone in &mut s.truth.zones {
                    zone.target += 1;
                    zone.resource_version += 1;
                }
                self.record_write(&mut s, None);
            }
            Step::UserPauses(z) => {
                s.pauses_left -= 1;
                let zone = &mut s.truth.zones[z as usize];
                zone.paused = true;
                zone.resource_version += 1;
                self.record_write(&mut s, None);
            }
            Step::WebhookMarksDownscale => {
                s.downscales_left -= 1;
                s.record.marker = true;
                s.record.version = s.record.version.wrapping_add(1);
            }
            Step::WebhookEndsDownscale => {
                s.record.marker = false;
                s.record.version = s.record.version.wrapping_add(1);
            }
            Step::RolloutStepExpires => s.record.step = false,
            Step::RecordBecomesUnreadable => {
                s.outages_left -= 1;
                s.record.unreadable = true;
            }
            Step::RecordBecomesReadable => s.record.unreadable = false,
            Step::UserUnpauses(z) => {
                let zone = &mut s.truth.zones[z as usize];
                zone.paused = false;
                zone.resource_version += 1;
                self.record_write(&mut s, None);
            }
        }
        if s.need.is_none() {
            s.plan_basis = None;
        }
        // Drop expectations the cache now shows (the reconcile loop does the same before planning), then plan.
        let (retained, plan) = self.next_plan(&s);
        s.expectations = retained;
        s.next_plan = plan;
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("one zone at a time", |_: &RolloutModel, s: &State| {
                s.violations & violation::ONE_ZONE_AT_A_TIME == 0
            }),
            Property::always("max unavailable", |_: &RolloutModel, s: &State| {
                s.violations & violation::MAX_UNAVAILABLE == 0
            }),
            Property::always("no zero-pod ready", |_: &RolloutModel, s: &State| {
                s.violations & violation::ONLY_READY_COUNTS_AS_READY == 0
            }),
            Property::always("paused StatefulSet left alone", |_: &RolloutModel, s: &State| {
                s.violations & violation::PAUSED_IS_LEFT_ALONE == 0
            }),
            Property::always("no replacement loop", |_: &RolloutModel, s: &State| {
                s.violations & violation::NO_REPLACEMENT_LOOP == 0
            }),
            Property::always("no rollout step while a downscale is being prepared", |_: &RolloutModel, s: &State| {
                s.violations & violation::NO_ROLLOUT_DURING_DOWNSCALE == 0
            }),
            Property::always("only pods the controller has seen are deleted", |_: &RolloutModel, s: &State| {
                s.violations & violation::ONLY_SEEN_PODS_DELETED == 0
            }),
            Property::always("quiescent states are converged", |m: &RolloutModel, s: &State| {
                s.violations != 0 || !m.is_quiescent(s) || Self::is_converged(s)
            }),
            Property::sometimes("a rollout completes", |_: &RolloutModel, s: &State| Self::is_converged(s)),
            Property::sometimes("pods are replaced in parallel", |_: &RolloutModel, s: &State| s.parallel_replacement),
        ]
    }

    /// Resource versions only grow with bounded environment actions, but a buggy planner could loop: keep the
    /// state space finite. (Violating states stay within the boundary, so they are checked; they have no actions.)
    fn within_boundary(&self, s: &State) -> bool {
        s.truth.zones.iter().all(|z| z.resource_version < u8::MAX - 2)
    }
}
