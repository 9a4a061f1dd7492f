//! The model's state: the API server's truth (pods with their eviction intents, the zones), the controller's
//! writes and expectations, the decisions in flight, each actor's progress, and the steps between states.

use super::*;

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
    pub(super) fn available(&self) -> bool {
        self.exists && self.ready && !self.terminating
    }

    pub(super) fn has_intent(&self) -> bool {
        self.intents.iter().chain(&self.kept_on_statefulset).any(Option::is_some)
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
    pub(super) fn planner_view(&self) -> World {
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
    pub(super) machine: Arc<EvictPod>,
    pub(super) next: Need,
    /// The decision's identity for the checker: a hash of the machine and its need as their derived `Debug` prints
    /// them (every field), so two states whose machines are in the same state are one state.
    pub(super) fingerprint: u64,
}

impl Decision {
    pub(super) fn new(zone: u8, pod: u8, machine: EvictPod, next: Need) -> Self {
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
    pub(super) fn answer(&self) -> Option<bool> {
        match &self.next {
            Need::Answer(verdict) => Some(verdict.allowed()),
            _ => None,
        }
    }

    pub(super) fn is_about(&self, zone: u8, pod: u8) -> bool {
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
    /// Executing a plan with the core's execution machine (`exec`), which asked for `need`: to judge a deletion by
    /// the budgets (`deciding` it, once the decision started), or to send a write (a deletion the budgets allowed,
    /// a status update). `heard`: someone else changed the cluster meanwhile (the work queue then runs the group
    /// again).
    Acting { exec: Box<Execution>, need: ExecutionNeed, deciding: Option<Box<Decision>>, heard: bool },
}

impl Ctrl {
    /// The deletion the controller is cleared to send (the budgets allowed it; the machine asked for it).
    pub fn cleared(&self) -> Option<Op> {
        match self {
            Ctrl::Acting { exec, need: ExecutionNeed::DeletePod { .. }, .. } => exec.current_action().and_then(to_op),
            _ => None,
        }
    }

    /// The deletion the machine asked to judge, before its decision started.
    pub fn to_judge(&self) -> Option<Op> {
        match self {
            Ctrl::Acting { exec, need: ExecutionNeed::JudgeDeletion { .. }, deciding: None, .. } => {
                exec.current_action().and_then(to_op)
            }
            _ => None,
        }
    }
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
