//! A stateright model of one rollout group whose controller is the real `rollout-core` planner.
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
//!
//! Cut along its seams: the state, what the API server holds and the controller's progress ([`state`]); the
//! controller, deciding with the planner on its cache, executing one write at a time and each write judged against
//! what it knew ([`controller`]); the health gate, with `health_check`: the shell's gate handed to the pass, its
//! evaluations against a Prometheus answering from the truth, and the start of a second zone by a bad revision
//! ([`health`]); and what the properties read of a state, with a state and a path told for people
//! ([`judgement`]). This module owns the configuration, the model itself and its steps.

mod controller;
mod health;
mod judgement;
mod state;

use controller::{apply_own_write, zone_index};
pub use health::{Answers, GateEvaluator, GateMemo, GateShell, GateTargeting, HEALTH_CHECK, Health, Verdict};
pub use judgement::violation_names;
pub use state::{Exp, Op, PodState, Record, State, Step, World, ZoneState, violation};

use rollout_core::Failure;
use rollout_core::execution::{Execution, ExecutionSettings, Need, Observed, StepClaimed};
use rollout_core::fixture;
use rollout_core::health_check::{ConfigError, HealthCheckConfig, HealthGating};
use rollout_core::natural::pod_ordinal;
use rollout_core::{
    Action, Defences, DownscaleRecord, Expectation, GroupSnapshot, MaxUnavailable, PassInput, PendingExpectation,
    Planner, RecordRead, StatefulSetView, WaitReason, ZoneTracker, downscale::DownscaleInProgress, keys,
    plan_pass_with,
};
use stateright::{Model, Property};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

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
    /// With a health gate: every StatefulSet names a RolloutHealthCheck, and the revision rolled out is good or bad
    /// (see [`health`]). Needs one revision.
    pub health_check: Option<Health>,
    /// Gate evaluations over a run whose answers are faulty (no data for the updated pods, or errors).
    pub query_faults: u8,
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
            health_check: None,
            query_faults: 0,
        }
    }
}

/// The model, with the planner under test.
#[derive(Clone)]
pub struct RolloutModel {
    pub config: ModelConfig,
    pub planner: Arc<dyn Planner + Send + Sync>,
    /// The health gate's seams in the shell (production's unless a known bug replaces one).
    pub gate: GateShell,
    /// The RolloutHealthCheck the shell's watch holds, with `health_check`.
    health: Option<Result<HealthCheckConfig, ConfigError>>,
    /// Memo of [`RolloutModel::decide`]; the planner is pure, so its answer for a view never changes.
    decisions: Arc<Mutex<HashMap<DecisionKey, Decision>>>,
    /// Memo of the gate each view shows.
    gate_targets: Arc<Mutex<HashMap<(World, u8), health::ViewGate>>>,
}

/// The controller's view, its expectations, whether it may plan (no plan in flight), the record as it reads it
/// (marker, unreadable), the gate's verdict the shell keeps and the zones it keeps cleared.
type DecisionKey = (World, Vec<Exp>, bool, (bool, bool), Option<GateMemo>, u8);
/// The expectations it still holds, its plan, whether the plan's deletions are claimed as a rollout step, whether
/// the pass holds a zone back on the gate, and the zones a passing gate let it roll.
type Decision = (Vec<Exp>, Vec<Action>, bool, bool, u8);

impl RolloutModel {
    pub fn new(config: ModelConfig, planner: Arc<dyn Planner + Send + Sync>) -> Self {
        assert!(config.zones as usize <= ZONES.len() && config.zones > 0, "1 to {} zones", ZONES.len());
        assert!((config.revisions as usize) < REVISIONS.len() && config.revisions > 0, "1 to 3 revisions");
        assert!(config.health_check.is_none() || config.revisions == 1, "a health gate with one revision");
        let health = config.health_check.map(|_| health::health_check_resource());
        RolloutModel {
            config,
            planner,
            gate: GateShell::PRODUCTION,
            health,
            decisions: Arc::default(),
            gate_targets: Arc::default(),
        }
    }

    /// The same model with the gate's seams of `gate` (a known bug's).
    pub fn with_gate(self, gate: GateShell) -> Self {
        RolloutModel { gate, decisions: Arc::default(), gate_targets: Arc::default(), ..self }
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
            self.gate_statefulset(&mut s, zone.update);
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
            gate: None,
            cleared: 0,
            clearing: 0,
            rolled_bad: 0,
            query_faults_left: self.config.query_faults,
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
        if self.health.is_some() {
            self.gate_steps(s, steps);
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
                s.clearing = self.decide(&s.view, &s.expectations, true, s.record, s.gate.as_ref(), s.cleared).4;
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
                // The shell's verdicts and clearances live in the process.
                s.gate = None;
                s.cleared = 0;
                s.clearing = 0;
            }
            Step::GateEvaluated(answers) => self.evaluate_gate(&mut s, answers),
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
        self.forget_stale_gate(&mut s);
        // Drop expectations the cache now shows (the reconcile loop does the same before planning), then plan.
        let (retained, plan) = self.next_plan(&s);
        s.expectations = retained;
        s.next_plan = plan;
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
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
            // A bad revision held after its first zone is where its rollout ends.
            Property::always("quiescent states are converged", |m: &RolloutModel, s: &State| {
                s.violations != 0
                    || !m.is_quiescent(s)
                    || Self::is_converged(s)
                    || (m.config.health_check == Some(Health::Bad) && m.held_by_the_gate(s))
            }),
            Property::sometimes("a rollout completes", |_: &RolloutModel, s: &State| Self::is_converged(s)),
            Property::sometimes("pods are replaced in parallel", |_: &RolloutModel, s: &State| s.parallel_replacement),
        ];
        if self.config.health_check.is_some() {
            properties.push(Property::always("a bad revision starts no second zone", |_: &RolloutModel, s: &State| {
                s.violations & violation::BAD_REVISION_STARTS_A_SECOND_ZONE == 0
            }));
            properties.push(Property::sometimes("the gate holds a zone back", |m: &RolloutModel, s: &State| {
                m.held_by_the_gate(s)
            }));
        }
        properties
    }

    /// Resource versions only grow with bounded environment actions, but a buggy planner could loop: keep the
    /// state space finite. (Violating states stay within the boundary, so they are checked; they have no actions.)
    fn within_boundary(&self, s: &State) -> bool {
        s.truth.zones.iter().all(|z| z.resource_version < u8::MAX - 2)
    }
}
