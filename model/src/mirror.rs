//! A stateright model of mirror scaling with delayed downscale in one rollout group: `zone-a` takes its replicas
//! from a reference resource (an HPA-driven `ReplicaTemplate`), optionally removing replicas only once each has been
//! preparing for the downscale delay; `zone-b` is an ordinary StatefulSet of the group that users roll.
//!
//! The controller runs the real pass ([`rollout_core::plan_pass`]), the real mirror step machine
//! ([`rollout_core::mirror_flow::MirrorFlow`]) one need at a time, and [`rollout_core::Pass::with_mirror`], and
//! carries the replica change out with the core's execution machine; each need is one model step, so users, time, pods and crashes interleave with every call. The model owns only the
//! environment: the reference's `spec.replicas` (changed by an HPA, possibly absent), the pods' own preparation state
//! (a pod asked to prepare keeps the time it started until cancelled or removed), a controller cache that may lag,
//! rollouts of `zone-b`, and the StatefulSet's resourceVersion precondition on the patch.
//!
//! Properties, judged on the truth at the patch's commit (or, for invariant 5, on what the pass knew):
//! - a delayed downscale removes only replicas that have been preparing for at least the delay;
//! - the mirror is never scaled below the lowest `spec.replicas` the reference had since the pass read it (a
//!   reference without `spec.replicas` allows no downscale);
//! - no downscale during a rollout: no mirror downscale while, as the pass knew it, another StatefulSet of the group
//!   was being rolled.
//!
//! The machine is rebuilt at each step by replaying the observations it was fed (it is pure, so the replay is
//! exact); that keeps the model's state small, hashable data.

use rollout_core::execution::{Execution, ExecutionSettings, Need as ExecutionNeed, Observed as ExecutionObserved};
use rollout_core::fixture;
use rollout_core::keys;
use rollout_core::mirror_flow::{MirrorFlow, MirrorFlowSettings, MirrorNeed, MirrorObserved, PodAnswer};
use rollout_core::scaling::ReferenceScale;
use rollout_core::{Action, Defences, Failure, GroupSnapshot, PassInput, plan_pass};
use stateright::{Model, Property};

/// Replicas of the mirror StatefulSet never exceed this (the HPA's bounds).
pub const MAX_REPLICAS: u8 = 3;
const MIRROR: &str = "zone-a";
const OTHER: &str = "zone-b";

/// A test-only fault in the controller's handling, showing what each property catches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MirrorBug {
    /// Takes every prepared pod for ready to go (the pods' preparation times are not compared with the delay).
    NoDelayCheck,
    /// Reads a reference without `spec.replicas` as 1 (the reference operator's behaviour).
    MissingReplicasAsOne,
    /// Plans the mirror on a view that leaves out the group's other StatefulSets.
    IgnoresOtherZones,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorModelConfig {
    /// `grafana.com/rollout-delayed-downscale` in minutes (`None`: downscales are immediate).
    pub delay: Option<u8>,
    /// Changes of the reference's `spec.replicas` over a run.
    pub reference_changes: u8,
    /// The reference may lose its `spec.replicas` (one of the changes sets it absent).
    pub reference_may_vanish: bool,
    /// Rollouts of `zone-b` started over a run.
    pub pushes: u8,
    /// Prepare calls a pod may fail (HTTP 500).
    pub prepare_failures: u8,
    /// Controller crashes in the middle of a mirror step.
    pub restarts: u8,
    /// The controller's cache of the mirror StatefulSet may lag one write behind.
    pub stale: bool,
    /// The clock (minutes) stops here.
    pub max_time: u8,
    pub bug: Option<MirrorBug>,
}

impl Default for MirrorModelConfig {
    fn default() -> Self {
        MirrorModelConfig {
            delay: Some(2),
            reference_changes: 2,
            reference_may_vanish: false,
            pushes: 0,
            prepare_failures: 0,
            restarts: 0,
            stale: false,
            max_time: 5,
            bug: None,
        }
    }
}

/// What the controller's cache shows of the mirror StatefulSet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cached {
    pub replicas: u8,
    pub resource_version: u8,
}

/// What one pass knew when it started, and what it has fed its mirror step since.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PassState {
    pub view: Cached,
    /// `zone-b` was being rolled (rollout `pushes` in progress) when the pass read the group.
    pub other_rolling: bool,
    pub pushes: u8,
    /// The observations fed to the mirror step, each with the minute it was fed at.
    pub history: Vec<(MirrorObserved<()>, u8)>,
    /// The lowest `spec.replicas` the reference has had since the pass read it (`None`: not read yet, or absent
    /// all along).
    pub lowest_reference: Option<u8>,
}

/// The reconciler's execution settings for this model's cluster: no zone tracker (a mirror's changes are not
/// coordinated downscales), no budgets.
fn execution_settings() -> ExecutionSettings {
    crate::execution_settings(Defences::ALL, false, false)
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Ctrl {
    Idle,
    Mirroring(PassState),
    /// Carrying out the pass's replica change with the core's execution machine, which asked to patch the mirror's
    /// replicas to `to`, conditional on `resource_version`.
    Patching {
        pass: PassState,
        exec: Box<Execution>,
        to: u8,
        resource_version: u8,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MirrorState {
    pub time: u8,
    /// The reference's `spec.replicas`.
    pub reference: Option<u8>,
    pub replicas: u8,
    pub resource_version: u8,
    pub cache: Cached,
    /// Each replica's own preparation state: the minute it started preparing.
    pub preparing_since: [Option<u8>; MAX_REPLICAS as usize],
    /// `zone-b` rollouts started, and whether one is in progress.
    pub pushes: u8,
    pub other_rolling: bool,
    pub ctrl: Ctrl,
    pub reference_changes_left: u8,
    pub prepare_failures_left: u8,
    pub restarts_left: u8,
    pub violations: Vec<&'static str>,
    pub removed_after_delay: bool,
    pub scaled_up: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MirrorAction {
    Tick,
    /// The HPA sets the reference's `spec.replicas` (`None`: absent).
    SetReference(Option<u8>),
    PushOther,
    OtherRolled,
    /// The controller's cache catches up.
    Sync,
    StartPass,
    /// Carry out the mirror step's current need; `fail` makes a prepare call answer 500.
    Carry {
        fail: bool,
    },
    Patch,
    Crash,
}

pub const DELAY_KEPT: &str = "a delayed downscale removes only replicas prepared for the delay";
pub const NOT_BELOW_REFERENCE: &str = "the mirror is never scaled below its reference";
pub const NO_DOWNSCALE_DURING_ROLLOUT: &str = "no mirror downscale during a rollout of the group";

#[derive(Clone)]
pub struct MirrorModel {
    pub config: MirrorModelConfig,
}

/// Minute `minute` of a run (a day after the epoch, so that no real preparation time reads as "long ago").
fn at(minute: u8) -> jiff::Timestamp {
    jiff::Timestamp::UNIX_EPOCH
        + jiff::SignedDuration::from_hours(24)
        + jiff::SignedDuration::from_mins(i64::from(minute))
}

impl MirrorModel {
    pub fn new(config: MirrorModelConfig) -> Self {
        MirrorModel { config }
    }

    /// The group as a pass sees it.
    fn snapshot(&self, view: Cached, other_rolling: bool, pushes: u8) -> GroupSnapshot {
        let mut mirror = fixture::statefulset("g", MIRROR, u32::from(view.replicas), "r1");
        mirror.resource_version = view.resource_version.to_string();
        for (key, value) in [
            (keys::MIRROR_REPLICAS_FROM_RESOURCE_NAME, "rt"),
            (keys::MIRROR_REPLICAS_FROM_RESOURCE_KIND, "ReplicaTemplate"),
            (keys::MIRROR_REPLICAS_FROM_RESOURCE_API_VERSION, "rollout-operator.grafana.com/v1"),
        ] {
            mirror = fixture::annotate(mirror, key, value);
        }
        if let Some(delay) = self.config.delay {
            mirror = fixture::annotate(mirror, keys::ROLLOUT_DELAYED_DOWNSCALE, &format!("{delay}m"));
            mirror = fixture::annotate(mirror, keys::ROLLOUT_PREPARE_DELAYED_DOWNSCALE_URL, "http://pod/prepare");
        }
        let mut pods: Vec<_> = (0..mirror.replicas).map(|i| fixture::pod(&mirror, i, "r1")).collect();
        let mut members = vec![mirror];
        if self.config.bug != Some(MirrorBug::IgnoresOtherZones) {
            // zone-b at revision `r<pushes>`; while a push rolls, its one pod is still on the previous revision.
            let update = format!("r{pushes}");
            let mut other = fixture::statefulset("g", OTHER, 1, &update);
            let pod_revision = if other_rolling { format!("r{}", pushes.saturating_sub(1)) } else { update.clone() };
            if let Some(status) = other.status.as_mut()
                && other_rolling
            {
                status.current_revision = pod_revision.clone();
            }
            pods.push(fixture::pod(&other, 0, &pod_revision));
            members.push(other);
        }
        GroupSnapshot::assemble("g", members, &pods)
    }

    /// The pass's mirror step, rebuilt from its observations, and what it needs now.
    fn replay(&self, pass: &PassState) -> MirrorNeed<()> {
        let group = self.snapshot(pass.view, pass.other_rolling, pass.pushes);
        let settings = MirrorFlowSettings { namespace: "ns".into(), cluster_domain: "cluster.local".into() };
        let mut flow = MirrorFlow::new(group, settings);
        let mut need = flow.step(MirrorObserved::Start, at(0));
        for (observed, minute) in &pass.history {
            need = flow.step(observed.clone(), at(*minute));
        }
        need
    }

    /// Applies a committed replica change of the mirror, judging it when it is a downscale.
    fn set_replicas(&self, s: &mut MirrorState, pass: &PassState, to: u8) {
        let from = s.replicas;
        if to < from {
            if let Some(delay) = self.config.delay {
                let early = (to..from).any(|o| s.preparing_since[usize::from(o)].is_none_or(|t| s.time - t < delay));
                if early {
                    s.violations.push(DELAY_KEPT);
                } else {
                    s.removed_after_delay = true;
                }
            }
            if pass.lowest_reference.is_none_or(|low| to < low) {
                s.violations.push(NOT_BELOW_REFERENCE);
            }
            if pass.other_rolling {
                s.violations.push(NO_DOWNSCALE_DURING_ROLLOUT);
            }
        } else if to > from {
            s.scaled_up = true;
        }
        // Removed replicas take their state with them; new ones start fresh.
        for o in to.min(from)..MAX_REPLICAS {
            s.preparing_since[usize::from(o)] = None;
        }
        s.replicas = to;
        s.resource_version = s.resource_version.wrapping_add(1);
        if !self.config.stale {
            s.cache = Cached { replicas: to, resource_version: s.resource_version };
        }
    }

    /// Carries out `need` against the environment and says what the mirror step observes.
    fn carry(&self, s: &mut MirrorState, need: &MirrorNeed<()>, fail: bool) -> MirrorObserved<()> {
        match need {
            MirrorNeed::Reference { .. } => {
                let spec = match (s.reference, self.config.bug) {
                    (None, Some(MirrorBug::MissingReplicasAsOne)) => Some(1),
                    (spec, _) => spec,
                };
                MirrorObserved::Reference(Ok((
                    (),
                    ReferenceScale { spec_replicas: spec.map(i64::from), status_replicas: None },
                )))
            }
            MirrorNeed::Cancel { endpoints, .. } => {
                for (o, _) in endpoints.iter().flatten() {
                    if *o < u32::from(s.replicas) {
                        s.preparing_since[*o as usize] = None;
                    }
                }
                MirrorObserved::Cancelled
            }
            MirrorNeed::Prepare { endpoints, .. } => {
                let mut answers = Vec::new();
                for (o, _) in endpoints {
                    let answer = if *o >= u32::from(s.replicas) {
                        PodAnswer::Failed("no such host".to_string())
                    } else if fail {
                        PodAnswer::Response { status: 500, body: b"not ready to prepare".to_vec() }
                    } else {
                        let since = *s.preparing_since[*o as usize].get_or_insert(s.time);
                        // The bug: every pod's preparation taken as long past.
                        let reported =
                            if self.config.bug == Some(MirrorBug::NoDelayCheck) { 1 } else { at(since).as_second() };
                        let body = format!("{{\"timestamp\": {reported}}}");
                        PodAnswer::Response { status: 200, body: body.into_bytes() }
                    };
                    answers.push((*o, answer));
                }
                if fail {
                    s.prepare_failures_left -= 1;
                }
                MirrorObserved::Prepared(answers)
            }
            MirrorNeed::WriteBack { .. } => MirrorObserved::WrittenBack,
            MirrorNeed::Done(_) => unreachable!("a finished step is not carried out"),
        }
    }
}

impl Model for MirrorModel {
    type State = MirrorState;
    type Action = MirrorAction;

    fn init_states(&self) -> Vec<MirrorState> {
        let cache = Cached { replicas: 3, resource_version: 1 };
        vec![MirrorState {
            time: 0,
            reference: Some(3),
            replicas: 3,
            resource_version: 1,
            cache,
            preparing_since: [None; MAX_REPLICAS as usize],
            pushes: 1,
            other_rolling: false,
            ctrl: Ctrl::Idle,
            reference_changes_left: self.config.reference_changes,
            prepare_failures_left: self.config.prepare_failures,
            restarts_left: self.config.restarts,
            violations: Vec::new(),
            removed_after_delay: false,
            scaled_up: false,
        }]
    }

    fn actions(&self, s: &MirrorState, actions: &mut Vec<MirrorAction>) {
        if !s.violations.is_empty() {
            return;
        }
        if s.time < self.config.max_time {
            actions.push(MirrorAction::Tick);
        }
        if s.reference_changes_left > 0 {
            for v in 0..=MAX_REPLICAS {
                if s.reference != Some(v) {
                    actions.push(MirrorAction::SetReference(Some(v)));
                }
            }
            if self.config.reference_may_vanish && s.reference.is_some() {
                actions.push(MirrorAction::SetReference(None));
            }
        }
        if !s.other_rolling && s.pushes <= self.config.pushes {
            actions.push(MirrorAction::PushOther);
        }
        if s.other_rolling {
            actions.push(MirrorAction::OtherRolled);
        }
        if s.cache != (Cached { replicas: s.replicas, resource_version: s.resource_version }) {
            actions.push(MirrorAction::Sync);
        }
        match &s.ctrl {
            Ctrl::Idle => actions.push(MirrorAction::StartPass),
            Ctrl::Mirroring(pass) => {
                actions.push(MirrorAction::Carry { fail: false });
                if s.prepare_failures_left > 0 && matches!(self.replay(pass), MirrorNeed::Prepare { .. }) {
                    actions.push(MirrorAction::Carry { fail: true });
                }
            }
            Ctrl::Patching { .. } => actions.push(MirrorAction::Patch),
        }
        if s.restarts_left > 0 && s.ctrl != Ctrl::Idle {
            actions.push(MirrorAction::Crash);
        }
    }

    fn next_state(&self, s: &MirrorState, action: MirrorAction) -> Option<MirrorState> {
        let mut n = s.clone();
        match action {
            MirrorAction::Tick => n.time += 1,
            MirrorAction::SetReference(v) => {
                n.reference = v;
                n.reference_changes_left -= 1;
                let lowered = |pass: &mut PassState| {
                    if let (Some(low), Some(v)) = (pass.lowest_reference, v) {
                        pass.lowest_reference = Some(low.min(v));
                    }
                };
                match &mut n.ctrl {
                    Ctrl::Mirroring(pass) | Ctrl::Patching { pass, .. } => lowered(pass),
                    Ctrl::Idle => {}
                }
            }
            MirrorAction::PushOther => {
                n.pushes += 1;
                n.other_rolling = true;
            }
            MirrorAction::OtherRolled => n.other_rolling = false,
            MirrorAction::Sync => n.cache = Cached { replicas: s.replicas, resource_version: s.resource_version },
            MirrorAction::StartPass => {
                let group = self.snapshot(s.cache, s.other_rolling, s.pushes);
                let pass = plan_pass(&group, &PassInput::new(at(s.time), &[]));
                if !pass.mirror_due {
                    return None;
                }
                n.ctrl = Ctrl::Mirroring(PassState {
                    view: s.cache,
                    other_rolling: s.other_rolling,
                    pushes: s.pushes,
                    history: Vec::new(),
                    lowest_reference: None,
                });
            }
            MirrorAction::Carry { fail } => {
                let Ctrl::Mirroring(mut pass) = n.ctrl.clone() else { return None };
                match self.replay(&pass) {
                    MirrorNeed::Done(result) => {
                        let group = self.snapshot(pass.view, pass.other_rolling, pass.pushes);
                        let planned = plan_pass(&group, &PassInput::new(at(s.time), &[])).with_mirror(result.findings);
                        let scales: Vec<Action> = planned
                            .plan
                            .actions
                            .into_iter()
                            .filter(|a| matches!(a, Action::Scale { statefulset, .. } if statefulset == MIRROR))
                            .collect();
                        let mut exec = Box::new(Execution::new(scales, false, execution_settings()));
                        n.ctrl = match exec.step(ExecutionObserved::Start, at(s.time)) {
                            ExecutionNeed::PatchReplicas { to, resource_version, .. } => Ctrl::Patching {
                                pass,
                                exec,
                                to: u8::try_from(to).ok()?,
                                resource_version: resource_version.parse().ok()?,
                            },
                            // Nothing to change (or a need this model has no world for): the pass is over.
                            _ => Ctrl::Idle,
                        };
                    }
                    need => {
                        let observed = self.carry(&mut n, &need, fail);
                        if matches!(need, MirrorNeed::Reference { .. }) {
                            pass.lowest_reference = s.reference;
                        }
                        pass.history.push((observed, s.time));
                        n.ctrl = Ctrl::Mirroring(pass);
                    }
                }
            }
            MirrorAction::Patch => {
                let Ctrl::Patching { pass, mut exec, to, resource_version } = n.ctrl.clone() else { return None };
                // The patch's resourceVersion precondition: a conflict changes nothing.
                let written = if resource_version == s.resource_version {
                    self.set_replicas(&mut n, &pass, to);
                    Ok(())
                } else {
                    Err(Failure::Conflict("the mirror changed since the pass read it".to_string()))
                };
                // A pass changes the mirror's replicas once: the execution is done after the patch's answer.
                let done = exec.step(ExecutionObserved::Written(written), at(s.time));
                debug_assert!(matches!(done, ExecutionNeed::Done(_)), "{done:?}");
                n.ctrl = Ctrl::Idle;
            }
            MirrorAction::Crash => {
                n.ctrl = Ctrl::Idle;
                n.restarts_left -= 1;
            }
        }
        Some(n)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(DELAY_KEPT, |_: &MirrorModel, s: &MirrorState| !s.violations.contains(&DELAY_KEPT)),
            Property::always(NOT_BELOW_REFERENCE, |_: &MirrorModel, s: &MirrorState| {
                !s.violations.contains(&NOT_BELOW_REFERENCE)
            }),
            Property::always(NO_DOWNSCALE_DURING_ROLLOUT, |_: &MirrorModel, s: &MirrorState| {
                !s.violations.contains(&NO_DOWNSCALE_DURING_ROLLOUT)
            }),
            Property::sometimes("a replica is removed after its delay", |_: &MirrorModel, s: &MirrorState| {
                s.removed_after_delay
            }),
            Property::sometimes("the mirror scales up", |_: &MirrorModel, s: &MirrorState| s.scaled_up),
        ]
    }
}
