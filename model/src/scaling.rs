//! A stateright model of leader/follower scaling in one rollout group, checking guarantee 3 of
//! docs/contributing/design.md: two StatefulSets of a group are never downscaled closer together than the min time
//! between zone downscales, whoever asks.
//!
//! The environment: three zones (`zone-a` leads; `zone-b` and `zone-c` follow it, or follow in a chain a→b→c), a
//! discrete clock (one tick = one minute; the min time is `min_time` minutes), a user changing the leader's replicas
//! (upscales directly; downscales through the prepare-downscale webhook, which claims them in the group downscale
//! record), and one or more controller replicas. Each controller plans with the injected [`Planner`] on the current
//! cluster and record, then carries the plan out with the core's execution machine (through the planner's
//! `next_need`, so a known bug of the execution is checked like one of the plan): a coordinated downscale is claimed
//! in the record (read, decided with the core's `record_claims::claim_marked`, the function the zone tracker's swap
//! loop runs, then compare-and-swap: two steps other actors can interleave with), the replicas patched with a
//! resourceVersion precondition (its answer may be lost, applied or not), and the claim ended as the machine says
//! (`record_claims::finish_marked`: re-dated at the answer, given back, or left to its later date). The webhook's
//! claims of the user's downscales are the same function. The model decides nothing itself.
//!
//! Simplification: the clock does not advance while a claim is between its read and its end (in a real cluster
//! that is milliseconds), so a claim holds one tick: its marker is live until its end and over by the next tick.
//! Rollout steps are the rollout model's.

use rollout_core::downscale::{ClaimEnd, Claimant, DownscaleInProgress, MarkedClaim};
use rollout_core::execution::{DownscaleClaimed, Execution, ExecutionSettings, Need, Observed};
use rollout_core::fixture;
use rollout_core::keys;
use rollout_core::record_claims::{Transition, claim_marked, finish_marked};
use rollout_core::{
    Action, Defences, DownscaleRecord, Failure, GroupSnapshot, PassInput, Planner, RecordRead, ZoneTracker,
    plan_pass_with,
};
use stateright::{Model, Property};
use std::sync::Arc;
use std::time::Duration;

pub const SCALING_ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];
const MAX_REPLICAS: u8 = 3;
const GROUP: &str = "g";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalingModelConfig {
    /// Controller replicas acting concurrently.
    pub controllers: u8,
    /// Changes of the leader's replicas the user makes over a run.
    pub user_changes: u8,
    /// Minutes between zone downscales.
    pub min_time: u8,
    /// The clock stops here.
    pub max_time: u8,
    /// `zone-c` follows `zone-b` (a chain) instead of `zone-a`.
    pub chain: bool,
    /// Replica patches whose answer is lost over a run (applied or not, the controller cannot tell).
    pub lost_answers: u8,
}

impl Default for ScalingModelConfig {
    fn default() -> Self {
        ScalingModelConfig { controllers: 2, user_changes: 2, min_time: 2, max_time: 7, chain: false, lost_answers: 1 }
    }
}

/// What one controller replica is in the middle of.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Ctrl {
    Idle,
    /// Carrying out a pass's plan with the core's execution machine, which asked for `need`; `seen` is the record
    /// version a downscale claim read, once read.
    Acting {
        exec: Box<Execution>,
        need: Need,
        seen: Option<u8>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ScalingState {
    pub time: u8,
    pub replicas: [u8; 3],
    pub resource_version: [u8; 3],
    /// The group downscale record: when each zone was last downscaled, its in-progress markers (until when), and
    /// the ConfigMap's version.
    pub record: [Option<u8>; 3],
    pub markers: [Option<u8>; 3],
    pub record_version: u8,
    /// When each zone's replicas actually went down last (the truth the invariant is judged on).
    pub downscaled_at: [Option<u8>; 3],
    pub controllers: Vec<Ctrl>,
    /// The webhook has read the record (at this version) for a user downscale of the leader.
    pub webhook: Option<u8>,
    pub user_changes_left: u8,
    pub lost_answers_left: u8,
    pub violation: bool,
    pub follower_downscaled: bool,
    /// A claim was given back after its patch definitely failed.
    pub claim_given_back: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScalingStep {
    Tick,
    UserUpscale,
    UserDownscaleRead,
    UserDownscaleCommit,
    Plan(u8),
    ClaimRead(u8),
    ClaimWrite(u8),
    /// The replica patch answers (applied, or refused by its precondition).
    Patch(u8),
    /// The replica patch's answer is lost, after it was applied (if its precondition held) or before.
    PatchLost {
        controller: u8,
        applied: bool,
    },
    /// The claim's end: read, decided and swapped at once (its failure is only logged, so its interleaving with
    /// other claims is the claim's own read and swap).
    EndClaim(u8),
}

#[derive(Clone)]
pub struct ScalingModel {
    pub config: ScalingModelConfig,
    pub planner: Arc<dyn Planner + Send + Sync>,
}

fn at(minute: u8) -> jiff::Timestamp {
    jiff::Timestamp::UNIX_EPOCH + jiff::SignedDuration::from_mins(i64::from(minute))
}

/// The minute a stored time falls in (every time this model writes is a whole minute).
fn minute(t: jiff::Timestamp) -> Option<u8> {
    u8::try_from(t.duration_since(at(0)).as_mins()).ok()
}

fn zone_of(statefulset: &str) -> Option<u8> {
    SCALING_ZONES.iter().position(|z| *z == statefulset).map(|z| z as u8)
}

/// The controller's execution settings: production's, except that a claim holds one tick (the clock does not
/// advance while one is in flight, so its marker is live until its end, and over by the next tick).
fn execution_settings() -> ExecutionSettings {
    ExecutionSettings { claim_ttl: Duration::from_secs(60), ..crate::execution_settings(Defences::ALL, true, false) }
}

impl ScalingModel {
    pub fn new(config: ScalingModelConfig, planner: Arc<dyn Planner + Send + Sync>) -> Self {
        ScalingModel { config, planner }
    }

    /// The cluster as the planner sees it: three OnDelete StatefulSets at one revision, every pod ready.
    pub fn snapshot(&self, s: &ScalingState) -> GroupSnapshot {
        let min_time = format!("{}m", self.config.min_time);
        let mut stss = Vec::new();
        let mut pods = Vec::new();
        for (i, name) in SCALING_ZONES.iter().enumerate() {
            let mut sts = fixture::statefulset(GROUP, name, u32::from(s.replicas[i]), "r1");
            sts.resource_version = s.resource_version[i].to_string();
            sts = fixture::annotate(sts, keys::MIN_TIME_BETWEEN_ZONES_DOWNSCALE, &min_time);
            let leader = match i {
                0 => None,
                2 if self.config.chain => Some(SCALING_ZONES[1]),
                _ => Some(SCALING_ZONES[0]),
            };
            if let Some(leader) = leader {
                sts = fixture::annotate(sts, keys::ROLLOUT_DOWNSCALE_LEADER, leader);
            }
            for ordinal in 0..sts.replicas {
                pods.push(fixture::pod(&sts, ordinal, "r1"));
            }
            stss.push(sts);
        }
        GroupSnapshot::assemble(GROUP, stss, &pods)
    }

    pub fn record(s: &ScalingState) -> DownscaleRecord {
        let mut record = DownscaleRecord::default();
        for (i, t) in s.record.iter().enumerate() {
            if let Some(t) = t {
                record.record_downscale(SCALING_ZONES[i], at(*t));
            }
        }
        record
    }

    fn markers(s: &ScalingState) -> Vec<DownscaleInProgress> {
        (0..3)
            .filter_map(|i| {
                let until = at(s.markers[i]?);
                Some(DownscaleInProgress { statefulset: SCALING_ZONES[i].to_string(), group: GROUP.to_string(), until })
            })
            .collect()
    }

    /// Swaps in what a transition wrote (the record's version moves on).
    fn write<T>(s: &mut ScalingState, transition: &Transition<T>) {
        let Transition::Write { record, markers, .. } = transition else { return };
        if let Some(record) = record {
            s.record = SCALING_ZONES.map(|z| minute(*record.last_downscaled.get(z)?));
        }
        if let Some(markers) = markers {
            s.markers =
                SCALING_ZONES.map(|z| markers.iter().find(|m| m.statefulset == z).and_then(|m| minute(m.until)));
        }
        s.record_version = s.record_version.wrapping_add(1);
    }

    fn claim_in_flight(s: &ScalingState) -> bool {
        s.webhook.is_some() || s.controllers.iter().any(|c| !matches!(c, Ctrl::Idle))
    }

    /// Applies a replica change of `zone`, judging the invariant when it is a downscale.
    fn set_replicas(&self, s: &mut ScalingState, zone: usize, to: u8) {
        let from = s.replicas[zone];
        s.replicas[zone] = to;
        s.resource_version[zone] = s.resource_version[zone].wrapping_add(1);
        if to < from {
            for (other, last) in s.downscaled_at.iter().enumerate() {
                if other != zone && last.is_some_and(|t| s.time - t <= self.config.min_time) {
                    s.violation = true;
                }
            }
            s.downscaled_at[zone] = Some(s.time);
            if zone != 0 {
                s.follower_downscaled = true;
            }
        }
    }

    /// A claim of a downscale of `zone` by `claimant`, decided by the core on the record as it stands.
    fn claim(&self, s: &ScalingState, zone: usize, claimant: Claimant, until: u8) -> Transition<MarkedClaim> {
        let (record, markers, now) = (Self::record(s), Self::markers(s), at(s.time));
        let snapshot = self.snapshot(s);
        claim_marked(
            Some(&record),
            &markers,
            &[],
            &snapshot,
            SCALING_ZONES[zone],
            claimant,
            now,
            at(until),
            Defences::ALL,
        )
    }

    /// Feeds what the controller saw to its execution (through the planner, which may be a known bug's) and moves
    /// on to its next need; needs this model's world does not have are acknowledged at once.
    fn advance(&self, s: &mut ScalingState, i: usize, mut exec: Box<Execution>, mut observed: Observed) {
        loop {
            let need = self.planner.next_need(&mut exec, observed, at(s.time));
            observed = match need {
                Need::Done(_) => {
                    s.controllers[i] = Ctrl::Idle;
                    return;
                }
                Need::ClaimDownscale { .. } | Need::PatchReplicas { .. } | Need::EndClaim { .. } => {
                    s.controllers[i] = Ctrl::Acting { exec, need, seen: None };
                    return;
                }
                Need::TurnOff { .. } | Need::FinishStep { .. } => Observed::Acknowledged,
                // This model's plans have no deletions and no revisions to set.
                Need::ClaimStep { .. }
                | Need::JudgeDeletion { .. }
                | Need::DeletePod { .. }
                | Need::SetCurrentRevision { .. } => {
                    s.controllers[i] = Ctrl::Idle;
                    return;
                }
            };
        }
    }
}

impl Model for ScalingModel {
    type State = ScalingState;
    type Action = ScalingStep;

    fn init_states(&self) -> Vec<ScalingState> {
        vec![ScalingState {
            time: 0,
            replicas: [2, 2, 2],
            resource_version: [1, 1, 1],
            record: [None; 3],
            markers: [None; 3],
            record_version: 0,
            downscaled_at: [None; 3],
            controllers: vec![Ctrl::Idle; usize::from(self.config.controllers)],
            webhook: None,
            user_changes_left: self.config.user_changes,
            lost_answers_left: self.config.lost_answers,
            violation: false,
            follower_downscaled: false,
            claim_given_back: false,
        }]
    }

    fn actions(&self, s: &ScalingState, actions: &mut Vec<ScalingStep>) {
        if s.violation {
            return;
        }
        if s.time < self.config.max_time && !Self::claim_in_flight(s) {
            actions.push(ScalingStep::Tick);
        }
        if s.user_changes_left > 0 && s.webhook.is_none() {
            if s.replicas[0] < MAX_REPLICAS {
                actions.push(ScalingStep::UserUpscale);
            }
            if s.replicas[0] > 0 {
                actions.push(ScalingStep::UserDownscaleRead);
            }
        }
        if s.webhook.is_some() {
            actions.push(ScalingStep::UserDownscaleCommit);
        }
        for (i, c) in s.controllers.iter().enumerate() {
            let i = i as u8;
            match c {
                Ctrl::Idle => actions.push(ScalingStep::Plan(i)),
                Ctrl::Acting { need: Need::ClaimDownscale { .. }, seen: None, .. } => {
                    actions.push(ScalingStep::ClaimRead(i))
                }
                Ctrl::Acting { need: Need::ClaimDownscale { .. }, .. } => actions.push(ScalingStep::ClaimWrite(i)),
                Ctrl::Acting { need: Need::PatchReplicas { .. }, .. } => {
                    actions.push(ScalingStep::Patch(i));
                    if s.lost_answers_left > 0 {
                        actions.push(ScalingStep::PatchLost { controller: i, applied: true });
                        actions.push(ScalingStep::PatchLost { controller: i, applied: false });
                    }
                }
                Ctrl::Acting { .. } => actions.push(ScalingStep::EndClaim(i)),
            }
        }
    }

    fn next_state(&self, s: &ScalingState, step: ScalingStep) -> Option<ScalingState> {
        let mut n = s.clone();
        let acting = |i: u8| match &s.controllers[usize::from(i)] {
            Ctrl::Acting { exec, need, seen } => Some((exec.clone(), need.clone(), *seen)),
            Ctrl::Idle => None,
        };
        match step {
            ScalingStep::Tick => n.time += 1,
            ScalingStep::UserUpscale => {
                n.user_changes_left -= 1;
                self.set_replicas(&mut n, 0, s.replicas[0] + 1);
            }
            ScalingStep::UserDownscaleRead => {
                n.user_changes_left -= 1;
                // The prepare-downscale webhook denies a downscale the record refuses.
                if !matches!(self.claim(s, 0, Claimant::Admission, s.time), Transition::Write { .. }) {
                    return Some(n);
                }
                n.webhook = Some(s.record_version);
            }
            ScalingStep::UserDownscaleCommit => {
                n.webhook = None;
                // The swap lands on the record the claim was decided on (same version, same minute); the webhook's
                // marker ends with its answer, within the minute.
                let claim = self.claim(s, 0, Claimant::Admission, s.time);
                if s.webhook == Some(s.record_version) && matches!(claim, Transition::Write { .. }) {
                    Self::write(&mut n, &claim);
                    self.set_replicas(&mut n, 0, s.replicas[0] - 1);
                }
                // Lost the compare-and-swap: the webhook denies; the user may try again.
            }
            ScalingStep::Plan(i) => {
                let (record, markers) = (Self::record(s), Self::markers(s));
                // The controller's whole pass, with the zone tracker on and the record as it stands.
                let input = PassInput {
                    zone_tracker: ZoneTracker::On,
                    record: RecordRead::Read { record: &record, markers: &markers },
                    ..PassInput::new(at(s.time), &[])
                };
                let pass = plan_pass_with(&*self.planner, &self.snapshot(s), &input);
                let scales: Vec<Action> =
                    pass.plan.actions.into_iter().filter(|a| matches!(a, Action::Scale { .. })).collect();
                if scales.is_empty() {
                    return None;
                }
                let exec = Box::new(Execution::new(scales, false, execution_settings()));
                self.advance(&mut n, usize::from(i), exec, Observed::Start);
            }
            ScalingStep::ClaimRead(i) => {
                let (exec, need, _) = acting(i)?;
                let Need::ClaimDownscale { statefulset, until, .. } = &need else { return None };
                let (zone, until) = (zone_of(statefulset)?, minute(*until)?);
                match self.claim(s, usize::from(zone), Claimant::FollowerScaling, until) {
                    Transition::Write { .. } => {
                        n.controllers[usize::from(i)] = Ctrl::Acting { exec, need, seen: Some(s.record_version) }
                    }
                    Transition::Answer(refused) => {
                        let refused = DownscaleClaimed::Refused(format!("{refused:?}"));
                        self.advance(&mut n, usize::from(i), exec, Observed::DownscaleClaimed(Ok(refused)));
                    }
                }
            }
            ScalingStep::ClaimWrite(i) => {
                let (exec, need, seen) = acting(i)?;
                let Need::ClaimDownscale { statefulset, until: until_at, .. } = &need else { return None };
                let (zone, until) = (zone_of(statefulset)?, minute(*until_at)?);
                let claim = self.claim(s, usize::from(zone), Claimant::FollowerScaling, until);
                match (&claim, seen == Some(s.record_version)) {
                    (Transition::Write { answer: MarkedClaim::Claimed { previous }, .. }, true) => {
                        Self::write(&mut n, &claim);
                        let claimed = DownscaleClaimed::Claimed { previous: *previous, until: *until_at };
                        self.advance(&mut n, usize::from(i), exec, Observed::DownscaleClaimed(Ok(claimed)));
                    }
                    // Conflict: read again and decide again.
                    _ => n.controllers[usize::from(i)] = Ctrl::Acting { exec, need, seen: None },
                }
            }
            ScalingStep::Patch(i) | ScalingStep::PatchLost { controller: i, .. } => {
                let (exec, need, _) = acting(i)?;
                let Need::PatchReplicas { statefulset, to, resource_version, .. } = &need else { return None };
                let zone = usize::from(zone_of(statefulset)?);
                let holds = resource_version.parse().ok() == Some(s.resource_version[zone]);
                let applied = holds && !matches!(step, ScalingStep::PatchLost { applied: false, .. });
                if applied {
                    self.set_replicas(&mut n, zone, u8::try_from(*to).ok()?);
                }
                let written = match step {
                    ScalingStep::PatchLost { .. } => {
                        n.lost_answers_left -= 1;
                        Err(Failure::Deadline("the patch's answer was lost".into()))
                    }
                    _ if holds => Ok(()),
                    _ => Err(Failure::Conflict("the StatefulSet changed since the plan".into())),
                };
                self.advance(&mut n, usize::from(i), exec, Observed::Written(written));
            }
            ScalingStep::EndClaim(i) => {
                let (exec, need, _) = acting(i)?;
                let Need::EndClaim { statefulset, until, end } = &need else { return None };
                n.claim_given_back |= matches!(end, ClaimEnd::Undone { .. });
                let ended = finish_marked(
                    &Self::record(s),
                    &Self::markers(s),
                    statefulset,
                    *until,
                    &[*until],
                    *end,
                    Defences::ALL,
                );
                Self::write(&mut n, &ended);
                self.advance(&mut n, usize::from(i), exec, Observed::Acknowledged);
            }
        }
        Some(n)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("min time between zone downscales", |_: &ScalingModel, s: &ScalingState| !s.violation),
            Property::sometimes("a follower is downscaled", |_: &ScalingModel, s: &ScalingState| s.follower_downscaled),
            Property::sometimes("a claim is given back", |_: &ScalingModel, s: &ScalingState| s.claim_given_back),
        ]
    }
}
