//! The judge: the invariant checker over the committed write history, the rules run on every commit, the
//! reaction, heal-to-write and Event figures, the webhooks' certificate rule, the HA ledger of the Lease's truth (with its failover figures), and which
//! guarantees a world judges.
//!
//! Must not act on the world: it reads commits and records violations.

pub mod activity;
pub mod certificates;
pub mod checker;
pub mod commit_rules;
pub mod election;
pub mod events;
pub mod guarantees;
pub mod needs;
pub mod reaction;

use jiff::Timestamp;
use std::collections::{BTreeMap, BTreeSet};
use tokio::time::Instant;

/// The pods a denied downscale had prepared (each with when its POST succeeded), owed a DELETE after that.
#[derive(Debug, Clone)]
pub struct UndoOwed {
    pub what: String,
    pub pods: Vec<(String, Instant)>,
    pub denied_at: Instant,
}

/// The judge of a run: told of every commit by the API server's storage ([`Oracle::committed`]) and of the answers
/// the operator gives (admissions, evictions), it records violations, figures and the activity ledger. It holds no
/// object of the API server's: what it needs of the cluster's state it reads from the commit and a read-only view.
pub struct Oracle {
    pub checker: checker::Checker,
    /// The controller's reaction times and request counts.
    pub reactions: reaction::Reactions,
    /// What the world did, for tests to count.
    pub activity: activity::Activity,
    /// The HA world: the replica processes and the Lease's truth, by which their controllers' writes are judged.
    pub ha: election::Ledger,
    /// The certificate world's TLS checks and CA injections.
    pub certificates: certificates::CertificateLedger,
    /// How the webhook users' downscale requests ended.
    pub scale_requests: crate::environment::guaranteed_update::ScaleRequestStats,
    /// Replica changes by the controller that committed (rollout steps, for the Event counts).
    pub controller_replica_changes: u64,
    /// Requests the API server refused for lack of a permission (RBAC profile), as `who: access`.
    pub forbidden: Vec<String>,
    /// Per StatefulSet: when its `spec.replicas` last changed (for the interleaving statistics).
    pub(crate) replicas_changed: BTreeMap<String, Instant>,
    /// Downscales being prepared (invariant 5): StatefulSet -> (its group, the admission, its marker's `until`),
    /// from the commit of a record write carrying its in-progress marker until the world receives the webhook's
    /// answer ([`Oracle::end_preparing`]), or until the admission gives the downscale up first: its own record write
    /// removes the marker (an undo), or the marker expires. An admitted downscale commits before its marker expires
    /// (the webhook allows only with half the commit margin left on the marker), so neither ends the window of a
    /// downscale that happens; they end that of one being denied, whose answer may take seconds more to arrive.
    /// Only markers written by an admission still waiting for its answer count: a claim that commits after the
    /// webhook gave up on it (a delayed request) opens no window; the controller still honours its marker.
    pub preparing: BTreeMap<String, (String, u64, Timestamp)>,
    /// Admissions answered so far.
    pub answered: BTreeSet<u64>,
    /// Admissions (webhook client incarnations) that recorded their downscale in the StatefulSet's
    /// `grafana.com/last-downscale` annotation (a `/scale` downscale without the zone tracker).
    pub recorded_by_admission: BTreeSet<u64>,
    /// The last in-progress marker seen per StatefulSet (its `until`).
    pub(crate) markers_seen: BTreeMap<String, Timestamp>,
    /// Denied downscales that had prepared pods: each pod is owed a DELETE (the undo), judged at the end of the run.
    pub undos_owed: Vec<UndoOwed>,
    /// Whether the controller's pod deletions must commit under a live rollout-step claim
    /// ([`checker::ROLLOUT_STEP_CLAIMED`]).
    pub step_claims_required: bool,
    /// Whether the deployment's RBAC refuses the controller's replica changes (no `patch` on StatefulSets):
    /// followers and mirrors then keep their replicas, and only the rollout must converge.
    pub replica_changes_refused: bool,
    /// Whether the zone tracker is on but its record may not be written (RBAC): the followers' downscales, which
    /// must be claimed there, cannot happen, so a follower may end above its leader.
    pub follower_downscales_refused: bool,
    /// Wall-clock time at the start of the run, to place the record's timestamps on the simulated timeline.
    pub(crate) start_wall: Timestamp,
}

impl Default for Oracle {
    fn default() -> Self {
        Oracle {
            checker: Default::default(),
            reactions: Default::default(),
            activity: Default::default(),
            ha: Default::default(),
            certificates: Default::default(),
            scale_requests: Default::default(),
            controller_replica_changes: 0,
            forbidden: Vec::new(),
            replicas_changed: BTreeMap::new(),
            preparing: BTreeMap::new(),
            answered: BTreeSet::new(),
            recorded_by_admission: BTreeSet::new(),
            markers_seen: BTreeMap::new(),
            undos_owed: Vec::new(),
            step_claims_required: false,
            replica_changes_refused: false,
            follower_downscales_refused: false,
            start_wall: Timestamp::now(),
        }
    }
}

impl Oracle {
    /// The webhook answered the admission of a downscale of `sts`: it is no longer being prepared.
    pub fn end_preparing(&mut self, sts: &str, admission: u64) {
        self.answered.insert(admission);
        if self.preparing.get(sts).is_some_and(|(_, a, _)| *a == admission) {
            self.preparing.remove(sts);
        }
    }
}
