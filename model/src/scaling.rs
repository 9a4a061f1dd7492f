//! A stateright model of leader/follower scaling in one rollout group, checking guarantee 3 of
//! docs/contributing/design.md: two StatefulSets of a group are never downscaled closer together than the min time
//! between zone downscales, whoever asks.
//!
//! The environment: three zones (`zone-a` leads; `zone-b` and `zone-c` follow it, or follow in a chain a→b→c), a
//! discrete clock (one tick = one minute; the min time is `min_time` minutes), a user changing the leader's replicas
//! (upscales directly; downscales through the prepare-downscale webhook, which claims them in the group downscale
//! record), and one or more controller replicas. Each controller step does what the reconcile loop does: plan with the
//! injected [`Planner`] on the current cluster and record, claim a coordinated downscale in the record (read, decide
//! with the core's `record_claims::claim_marked`, the function the zone tracker's swap loop runs, then
//! compare-and-swap: two steps other actors can interleave with), and patch replicas with a resourceVersion
//! precondition. The webhook's claims of the user's downscales are the same function. The model decides nothing
//! itself.
//!
//! Simplification: the clock does not advance while a claim is between its read and its replica change (in a real
//! cluster that is milliseconds), so a claim's deadline is its start, its in-progress marker is over by the next
//! tick, and a downscale is dated by its claim. Markers and rollout steps are the rollout model's.

use rollout_core::downscale::Claimant;
use rollout_core::fixture;
use rollout_core::keys;
use rollout_core::record_claims::{Transition, claim_marked};
use rollout_core::{
    Action, Defences, DownscaleRecord, GroupSnapshot, PassInput, Planner, RecordRead, ZoneTracker, plan_pass_with,
};
use stateright::{Model, Property};
use std::sync::Arc;

pub const SCALING_ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];
const MAX_REPLICAS: u8 = 3;

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
}

impl Default for ScalingModelConfig {
    fn default() -> Self {
        ScalingModelConfig { controllers: 2, user_changes: 2, min_time: 2, max_time: 7, chain: false }
    }
}

/// What one controller replica is in the middle of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ctrl {
    Idle,
    /// Claiming a downscale of `zone` to `to`; `seen` is the record version read, once read.
    Claiming {
        zone: u8,
        to: u8,
        rv: u8,
        seen: Option<u8>,
    },
    /// Patching `zone` to `to`, conditional on `rv`.
    Patching {
        zone: u8,
        to: u8,
        rv: u8,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ScalingState {
    pub time: u8,
    pub replicas: [u8; 3],
    pub resource_version: [u8; 3],
    /// The group downscale record: when each zone was last downscaled, and the ConfigMap's version.
    pub record: [Option<u8>; 3],
    pub record_version: u8,
    /// When each zone's replicas actually went down last (the truth the invariant is judged on).
    pub downscaled_at: [Option<u8>; 3],
    pub controllers: Vec<Ctrl>,
    /// The webhook has read the record (at this version) for a user downscale of the leader.
    pub webhook: Option<u8>,
    pub user_changes_left: u8,
    pub violation: bool,
    pub follower_downscaled: bool,
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
    Patch(u8),
}

#[derive(Clone)]
pub struct ScalingModel {
    pub config: ScalingModelConfig,
    pub planner: Arc<dyn Planner + Send + Sync>,
}

fn at(minute: u8) -> jiff::Timestamp {
    jiff::Timestamp::UNIX_EPOCH + jiff::SignedDuration::from_mins(i64::from(minute))
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
            let mut sts = fixture::statefulset("g", name, u32::from(s.replicas[i]), "r1");
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
        GroupSnapshot::assemble("g", stss, &pods)
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

    /// The record a claim of a downscale of `zone` by `claimant` swaps in, decided by the core on the record as it
    /// stands; `None` when the claim is refused.
    fn claimed(&self, s: &ScalingState, zone: usize, claimant: Claimant) -> Option<[Option<u8>; 3]> {
        let (record, now) = (Self::record(s), at(s.time));
        let snapshot = self.snapshot(s);
        let sts = SCALING_ZONES[zone];
        match claim_marked(Some(&record), &[], &[], &snapshot, sts, claimant, now, now, Defences::ALL) {
            Transition::Write { record: Some(record), .. } => Some(SCALING_ZONES.map(|z| {
                let minutes = record.last_downscaled.get(z)?.duration_since(at(0)).as_mins();
                u8::try_from(minutes).ok()
            })),
            Transition::Write { record: None, .. } | Transition::Answer(_) => None,
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
            record_version: 0,
            downscaled_at: [None; 3],
            controllers: vec![Ctrl::Idle; usize::from(self.config.controllers)],
            webhook: None,
            user_changes_left: self.config.user_changes,
            violation: false,
            follower_downscaled: false,
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
            actions.push(match c {
                Ctrl::Idle => ScalingStep::Plan(i),
                Ctrl::Claiming { seen: None, .. } => ScalingStep::ClaimRead(i),
                Ctrl::Claiming { seen: Some(_), .. } => ScalingStep::ClaimWrite(i),
                Ctrl::Patching { .. } => ScalingStep::Patch(i),
            });
        }
    }

    fn next_state(&self, s: &ScalingState, step: ScalingStep) -> Option<ScalingState> {
        let mut n = s.clone();
        match step {
            ScalingStep::Tick => n.time += 1,
            ScalingStep::UserUpscale => {
                n.user_changes_left -= 1;
                self.set_replicas(&mut n, 0, s.replicas[0] + 1);
            }
            ScalingStep::UserDownscaleRead => {
                n.user_changes_left -= 1;
                // The prepare-downscale webhook denies a downscale the record refuses.
                if self.claimed(s, 0, Claimant::Admission).is_none() {
                    return Some(n);
                }
                n.webhook = Some(s.record_version);
            }
            ScalingStep::UserDownscaleCommit => {
                n.webhook = None;
                // The swap lands on the record the claim was decided on (same version, same minute).
                if s.webhook == Some(s.record_version)
                    && let Some(record) = self.claimed(s, 0, Claimant::Admission)
                {
                    n.record = record;
                    n.record_version = s.record_version.wrapping_add(1);
                    self.set_replicas(&mut n, 0, s.replicas[0] - 1);
                }
                // Lost the compare-and-swap: the webhook denies; the user may try again.
            }
            ScalingStep::Plan(i) => {
                let record = Self::record(s);
                // The controller's whole pass, with the zone tracker on and the record as it stands.
                let input = PassInput {
                    zone_tracker: ZoneTracker::On,
                    record: RecordRead::Read { record: &record, markers: &[] },
                    ..PassInput::new(at(s.time), &[])
                };
                let plan = plan_pass_with(&*self.planner, &self.snapshot(s), &input).plan;
                let scale = plan.actions.iter().find_map(|a| match a {
                    Action::Scale { statefulset, to, resource_version, coordinated_downscale, .. } => {
                        Some((statefulset.clone(), *to, resource_version.clone(), *coordinated_downscale))
                    }
                    _ => None,
                });
                let (name, to, rv, coordinated) = scale?;
                let zone = SCALING_ZONES.iter().position(|z| *z == name)? as u8;
                let to = u8::try_from(to).ok()?;
                let rv = rv.parse().ok()?;
                n.controllers[usize::from(i)] = if coordinated {
                    Ctrl::Claiming { zone, to, rv, seen: None }
                } else {
                    Ctrl::Patching { zone, to, rv }
                };
            }
            ScalingStep::ClaimRead(i) => {
                let Ctrl::Claiming { zone, to, rv, .. } = s.controllers[usize::from(i)] else { return None };
                n.controllers[usize::from(i)] =
                    if self.claimed(s, usize::from(zone), Claimant::FollowerScaling).is_some() {
                        Ctrl::Claiming { zone, to, rv, seen: Some(s.record_version) }
                    } else {
                        // Refused: the patch is skipped.
                        Ctrl::Idle
                    };
            }
            ScalingStep::ClaimWrite(i) => {
                let Ctrl::Claiming { zone, to, rv, seen: Some(v) } = s.controllers[usize::from(i)] else { return None };
                let claimed = self.claimed(s, usize::from(zone), Claimant::FollowerScaling);
                n.controllers[usize::from(i)] = if v == s.record_version
                    && let Some(record) = claimed
                {
                    n.record = record;
                    n.record_version = s.record_version.wrapping_add(1);
                    Ctrl::Patching { zone, to, rv }
                } else {
                    // Conflict: read again and re-check.
                    Ctrl::Claiming { zone, to, rv, seen: None }
                };
            }
            ScalingStep::Patch(i) => {
                let Ctrl::Patching { zone, to, rv } = s.controllers[usize::from(i)] else { return None };
                n.controllers[usize::from(i)] = Ctrl::Idle;
                if s.resource_version[usize::from(zone)] == rv {
                    self.set_replicas(&mut n, usize::from(zone), to);
                }
                // A conflict leaves the claim in place: the group waits the min time (safe side).
            }
        }
        Some(n)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("min time between zone downscales", |_: &ScalingModel, s: &ScalingState| !s.violation),
            Property::sometimes("a follower is downscaled", |_: &ScalingModel, s: &ScalingState| s.follower_downscaled),
        ]
    }
}
