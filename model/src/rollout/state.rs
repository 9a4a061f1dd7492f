//! The rollout model's state: the truth (zones and their pods, the downscale record), the controller's cache and
//! writes in flight, its expectations and execution, the bounds left, and the steps between states.

use super::*;

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
    pub(super) fn available(&self) -> bool {
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
    pub(super) fn unavailable(&self) -> usize {
        self.pods.iter().filter(|p| !p.available()).count()
    }

    pub(super) fn all_available(&self) -> bool {
        self.pods.iter().all(PodState::available)
    }

    pub(super) fn actual_ready(&self) -> u8 {
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
    pub const BAD_REVISION_STARTS_A_SECOND_ZONE: u8 = 128;
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
    /// The gate's last verdict the shell keeps for the gate its cache shows (with a health gate).
    pub gate: Option<GateMemo>,
    /// The zones (bits) the shell keeps cleared: a passing evaluation let the pass roll them and its execution
    /// completed (with a health gate).
    pub cleared: u8,
    /// The zones (bits) the plan in flight was let roll by a passing evaluation: cleared once it completes.
    pub clearing: u8,
    /// The zones (bits) the controller deleted a pod of while the revision was bad (ghost state, judged).
    pub rolled_bad: u8,
    pub query_faults_left: u8,
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
    /// The shell evaluates the gate its cache shows, with these answers, and keeps the verdict.
    GateEvaluated(Answers),
}
