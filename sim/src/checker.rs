//! Invariant checker over the API server's committed write history.
//!
//! Every controller write is judged when it commits, against what the controller knew when it planned it: the
//! committed state as of the last watch events the controller had consumed (one resourceVersion per watch, sent by the
//! client with every write), plus the writes this controller process had itself committed since (its own writes its
//! cache had not shown yet). Changes the controller could not have seen (a pod crashing after its cache was read) are
//! not held against it; forgetting its own writes is. This is the model's rule, made concrete: sound for the real
//! controller, which plans on exactly that cache and blocks on expectations of its own writes.
//!
//! Invariants (numbered as in docs/contributing/design.md): 1 one zone at a time (no deletion in one StatefulSet while
//! another of the group has a pod missing, unready or terminating), 2 max unavailable (deleting an available pod must
//! not take the StatefulSet beyond `rollout-max-unavailable`), 4 no zero-pod ready (currentRevision is advanced only
//! when every pod exists, is Ready and is on that revision), and "paused is left alone" (no deletions in a paused
//! StatefulSet). Liveness is checked by the world at the end of the run.
//!
//! Invariant 3 (min time between zone downscales) is judged on every committed decrease of a StatefulSet's
//! `spec.replicas`, whoever made it (the controller's leader/follower scaling, or the user's change admitted by the
//! prepare-downscale webhook), by commit times alone: two decreases of different StatefulSets of a group subject to
//! a min time must commit at least that long apart. What the code wrote into the downscale record plays no part
//! (see [`Checker::record_downscale`]). A decrease of a follower or mirror carrying
//! `grafana.com/rollout-force-replicas` is exempt by design (force replicas applies at once there); only
//! `--force-follower` sets it on one. Elsewhere the annotation is ignored ([`FORCE_IGNORED`]).
//!
//! Invariant 5 (no downscale during a rollout, no rollout step while one is prepared), judged on the committed
//! history too: a controller deletion committed while a downscale of its group is being prepared (see
//! `Store::preparing`); an admitted downscale, on the state at its commit ([`Checker::judge_admitted`]); a
//! controller downscale, against what the controller knew ([`Checker::judge_controller_downscale`]).
//!
//! Pods are told apart by uid, never by name alone: a pod recreated under the same name is another pod.

use crate::objects::{PodSum, StsSum};
use std::collections::BTreeMap;
use std::time::Duration;

/// What the controller process knew when it wrote: its incarnation and the resourceVersion up to which each of its
/// watches had been consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Knowledge {
    pub incarnation: u64,
    pub sts_rv: u64,
    pub pod_rv: u64,
}

#[derive(Debug, Clone)]
enum OwnWrite {
    Deleted { incarnation: u64, rv: u64, pod: String, uid: String },
    Revision { incarnation: u64, rv: u64, sts: String, revision: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub at: Duration,
    pub invariant: &'static str,
    pub detail: String,
}

pub const ONE_ZONE: &str = "one zone at a time";
pub const MAX_UNAVAILABLE: &str = "max unavailable";
pub const NO_ZERO_POD_READY: &str = "no zero-pod ready";
pub const PAUSED: &str = "paused is left alone";
pub const LIVENESS: &str = "liveness";
pub const MIN_TIME: &str = "min time between zone downscales";
pub const NO_DOWNSCALE_DURING_ROLLOUT: &str = "no downscale during a rollout, no rollout step while preparing one";
/// The prepare-downscale webhook reads the downscaled StatefulSet's own rollout group only: no denial names a
/// StatefulSet of another group.
pub const PREPARE_SCOPE: &str = "a downscale is judged on its own rollout group only";
/// Invariant 5's controller side judged on its own (where the prepare-downscale webhook serves the group, the zone
/// tracker is on and RBAC grants its ConfigMap): every pod deletion of the controller commits while the record holds
/// a live rollout-step claim of the pod's group (`grafana.com/rollout-steps-in-progress`). The webhook's checks
/// back the claim up, so invariant 5 alone rarely shows a deletion made without one.
pub const ROLLOUT_STEP_CLAIMED: &str =
    "a controller deletion in a webhook-served group commits under a live step claim";
/// Under a real deployment's RBAC, the operator asks for nothing it is not granted (a feature that needs more is
/// off for that deployment, not failing on 403s).
pub const FORBIDDEN: &str = "no request outside the deployment's RBAC";
/// A controller deletion deletes the pod it was planned on: a pod (uid) it never saw is one it knew nothing about, so
/// deleting it cannot have been decided safely (the uid precondition refuses it).
pub const ONLY_SEEN_PODS: &str = "only pods the controller has seen are deleted";
/// A follower without `grafana.com/min-time-between-zones-downscale` is not scaled down by the controller once
/// another zone of its group has a recorded downscale (the reference's "missing label on follower" error).
pub const FOLLOWER_WITHOUT_MIN_TIME: &str = "a follower without a min time is not scaled down after a recorded one";
/// The controller deletes only pods of its StatefulSets: owned by one and matching its selector, as it knew them
/// (a pod relabelled out of service for debugging is not the StatefulSet's any more).
pub const ONLY_MEMBER_PODS: &str = "only pods of a managed StatefulSet are deleted";
/// The no-downscale webhook: a decrease of the replicas of an object labelled `grafana.com/no-downscale: "true"`
/// is denied (unless the webhook could not read the object's parent and says so: the reference's fail-open policy),
/// and every other change (upscales, unlabelled objects) is allowed.
pub const NO_DOWNSCALE_LABEL: &str = "no-downscale objects are not scaled down, others are";
/// The prepare-downscale webhook's purpose (reference 4.3, steps 9-12): every pod an admitted downscale of a labelled
/// StatefulSet removes was told to prepare for shutdown (its endpoint answered the POST with success) before the
/// webhook allowed the downscale.
pub const PREPARED_FOR_SHUTDOWN: &str = "an admitted downscale's removed pods were prepared for shutdown";
/// The API server re-applies and re-admits a PATCH when the stored object changed during its admission
/// ([`crate::guaranteed_update`]). The prepare-downscale webhook's own write (the parent's `grafana.com/last-downscale`,
/// recording a `/scale` downscale without the zone tracker) must not keep that going: a PATCH (`kubectl scale`) is
/// not refused with 409 when every conflict it met was that write alone.
pub const OWN_WRITE_CONFLICT: &str = "a PATCH is not refused for the webhook's own write";
/// A downscale the prepare-downscale webhook recorded in its StatefulSet's `grafana.com/last-downscale` annotation (a
/// `/scale` downscale without the zone tracker) is allowed by that admission: denying it after the record asks its
/// client to retry although nothing refused it, and leaves the other zones held for a downscale that did not happen.
/// (Unless the webhook never saw its write succeed, an answer lost to its deadline: it denies then, as its policy
/// says, and its denial says the record failed.)
pub const PREPARE_RECORDED_ALLOWED: &str = "a downscale the webhook recorded is allowed";
/// A downscale the webhook denied after preparing pods cancels them: each prepared pod is sent a DELETE after its
/// POST (reference 4.3, steps 10-11: the undo).
pub const PREPARE_UNDONE: &str = "a denied downscale cancels the pods it prepared";
/// The prepare-downscale webhook sent what is not a StatefulSet (a configuration broader than the shipped rules: a
/// Deployment, a ReplicaSet, a `deployments/scale`) lets it through with a warning and reads nothing for it
/// (reference 4.3: an unsupported type or resource fails open); an unlabelled StatefulSet is let through unless
/// reading it failed.
pub const PREPARE_FOREIGN: &str = "the prepare-downscale webhook lets through what it does not serve, unread";
/// The zone tracker's in-progress markers (`{"<statefulset>": {"group": "<group>", "until": "<RFC
/// 3339>"}}` in the record's annotation) are written only by the operator, and every one committed reads in that
/// format, by the checker's own reader: a marker it could not read would drop out of every judgement of preparation
/// (and, read by as lenient a parser, out of the operator's own coordination).
pub const RECORD_MARKERS_READABLE: &str = "every downscale marker committed to the record is readable";
/// Mirror replicas: the controller scales a mirror StatefulSet only to values its reference resource asked for.
pub const MIRROR: &str = "mirror StatefulSets follow their reference";
/// `grafana.com/rollout-force-replicas` on a StatefulSet that is neither follower nor mirror is ignored, as in the
/// reference: the controller never changes the replicas of one the world annotated so (`--force-plain`).
pub const FORCE_IGNORED: &str = "force replicas on a StatefulSet that is neither follower nor mirror is ignored";
/// Delayed downscale: a pod is removed only after it has been preparing for the delay.
pub const DELAYED_DOWNSCALE: &str = "delayed downscale removes only pods prepared for the delay";
/// A follower with `grafana.com/rollout-upscale-only-when-leader-ready: "true"` is scaled up by the controller only
/// while its leader reports every replica ready (`status.readyReplicas` = `spec.replicas`), as the controller knew.
pub const LEADER_READY_UPSCALE: &str = "upscale only when the leader is ready";
/// An eviction the pod-eviction webhook allowed keeps every ZoneAwarePodDisruptionBudget, judged on the
/// committed state at its commit (see [`Checker::judge_disruption`]).
pub const ZPDB_EVICTIONS: &str = "allowed evictions keep the ZoneAwarePodDisruptionBudgets";
/// The controller's own pod deletions keep them too.
pub const ZPDB_CONTROLLER: &str = "controller deletions keep the ZoneAwarePodDisruptionBudgets";
/// The budget-edits worlds: an eviction of a pod that no budget has covered for [`BUDGET_CHANGE_GRACE`] is not
/// denied for a budget (a deleted budget stops holding drains once the operator could have seen the deletion).
pub const ZPDB_OUT_OF_SCOPE: &str = "an eviction no budget covers is not denied by one";
/// A budget judges an eviction on the StatefulSets of the pods it selects: no denial names a StatefulSet of another
/// rollout group (the worlds' second group, which no budget selects).
pub const ZPDB_SCOPE: &str = "an eviction is judged on its budget's StatefulSets only";
/// The budget-edits worlds: `/admission/zpdb-validation` admits every valid budget edit and refuses every invalid
/// one (failure policy Fail: an invalid budget never reaches the operator).
pub const ZPDB_VALIDATION: &str = "the validation webhook admits exactly the valid budgets";
/// How long after a budget change the operator may still decide on what it knew before: its watch's delay, a
/// resumed watch told "too old" and relisting, a replica restarting. A change judges decisions only from then on.
pub const BUDGET_CHANGE_GRACE: Duration = Duration::from_secs(30);
/// The same for the controller's own deletions: its process may be cut off for up to 60 s by a partition, and its
/// budget watch reconnects apart from its pod watch (backoff up to 10 s, a silent watch given up after 30 s), so it
/// may delete on fresh pods and an old budget for longer.
pub const BUDGET_CHANGE_GRACE_CONTROLLER: Duration = Duration::from_secs(120);
/// The reference's step 3: evicting a pod that is already terminating takes nothing away, so no budget denies it
/// (judged when the same pod, by uid, was terminating from the eviction's arrival to its denial: the webhook's live
/// read between saw it so).
pub const ZPDB_TERMINATING: &str = "an eviction of a terminating pod is not denied by a budget";
/// The documented eviction intent key of a decision, before the decision's name.
const EVICTION_INTENT_PREFIX: &str = "grafana.com/eviction-intent.";

/// Whether an annotation is an eviction intent, by the documented key (the world's own reading, not the operator's).
pub fn is_intent_key(key: &str) -> bool {
    key.starts_with(EVICTION_INTENT_PREFIX) || key == &EVICTION_INTENT_PREFIX[..EVICTION_INTENT_PREFIX.len() - 1]
}

/// Where pods may not be patched, the eviction intents live on the StatefulSets, several decisions' in one object:
/// each write of an intent (which also removes the stale ones there) is judged on its own, not only through the
/// budget it protects, since the re-reads after it hide a lost intent almost always. It removes no annotation but
/// intents, no intent still live (another decision relies on it until it expires), and leaves none that expired
/// [`STALE_INTENT_GRACE`] before it committed (what was stale at the writer's read goes with the write; the grace
/// covers that read's age at the commit, delays and retries included), nor one it cannot read.
pub const ZPDB_INTENT_STORE: &str = "an intent write on a StatefulSet removes exactly the stale intents";
pub const STALE_INTENT_GRACE: Duration = Duration::from_secs(60);
/// A budget allowing at least one unavailable pod of the evicted pod's StatefulSet (a count, or a percentage of
/// replicas it has) never denies an eviction as `max unavailable = 0`.
pub const ZPDB_ZERO_BUDGET: &str = "no eviction is denied for a zero budget while the budget allows one";
/// Partition mode: an eviction counts a peer in another zone ready only once it has been ready for the budget's
/// `crossZoneEvictionDelay` (see `Checker::peers_under_delay`).
pub const ZPDB_CROSS_ZONE_DELAY: &str = "partition peers count as ready only after crossZoneEvictionDelay";
/// The ready-time tracker stamps only pods some budget selects (the reference's pod observer).
pub const ZPDB_READY_TIME_SCOPE: &str = "ready-time is written only on pods a budget covers";
/// A dry-run eviction has no side effect: the webhook writes nothing for it.
pub const DRY_RUN_WRITES: &str = "a dry-run eviction writes nothing";

/// A ZoneAwarePodDisruptionBudget as the checker reads it (its own reading of the documented rules, not the
/// core's): which group's pods it covers, its `maxUnavailable`, and whether it counts per partition (the pod's
/// ordinal) across zones or per zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetRule {
    pub name: String,
    pub group: String,
    pub limit: BudgetLimit,
    pub partitions: bool,
    /// Partition mode's `crossZoneEvictionDelay` (zero: none).
    pub cross_zone_delay: Duration,
    /// Committed at this resourceVersion and time; `None`: in force from the start of the run.
    pub since: Option<(u64, Duration)>,
    /// Replaced or deleted at this resourceVersion and time; `None`: still in force.
    pub until: Option<(u64, Duration)>,
}

/// `spec.crossZoneEvictionDelay` as the worlds write it (absent, or whole seconds such as `10s`); `None` for any
/// other form, so the budget is not read at all rather than judged without its delay.
fn cross_zone_delay(spec: &serde_json::Value) -> Option<Duration> {
    let Some(delay) = spec.get("crossZoneEvictionDelay") else { return Some(Duration::ZERO) };
    delay.as_str()?.strip_suffix('s')?.parse::<u64>().ok().map(Duration::from_secs)
}

/// A budget's `maxUnavailable` (a count) or `maxUnavailablePercentage` (of the evicted pod's StatefulSet's
/// replicas).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetLimit {
    Count(u32),
    Percent(u32),
}

impl BudgetLimit {
    /// The most a decision may count against, for a StatefulSet whose `spec.replicas` was at most `replicas`: the
    /// documented rule takes the percentage of `min(spec, status)` replicas, rounded down and at least 1.
    pub fn at_most(self, replicas: u32) -> u32 {
        match self {
            BudgetLimit::Count(n) => n,
            BudgetLimit::Percent(p) => (replicas * p / 100).max(1),
        }
    }

    /// The least a decision may count against, for a StatefulSet whose `spec.replicas` and `status.replicas` were
    /// never below `replicas` (a percentage of none is none).
    pub fn at_least(self, replicas: u32) -> u32 {
        match self {
            BudgetLimit::Count(n) => n,
            BudgetLimit::Percent(_) if replicas == 0 => 0,
            BudgetLimit::Percent(p) => (replicas * p / 100).max(u32::from(p > 0)),
        }
    }
}

impl std::fmt::Display for BudgetLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BudgetLimit::Count(n) => write!(f, "{n}"),
            BudgetLimit::Percent(p) => write!(f, "{p}%"),
        }
    }
}

impl BudgetRule {
    /// The checker's own reading of a budget object: the group its selector names by `rollout-group`, an integer
    /// `maxUnavailable` or `maxUnavailablePercentage` (exactly one of them), and partition mode if it has a
    /// partition regex. `None` for a budget outside what the worlds write (no such group label, both limits or
    /// neither).
    pub fn read(budget: &serde_json::Value) -> Option<BudgetRule> {
        let spec = budget.get("spec")?;
        let count = spec.get("maxUnavailable").map(|n| n.as_u64().and_then(|n| u32::try_from(n).ok()));
        let percent = spec.get("maxUnavailablePercentage").map(|n| n.as_u64().and_then(|n| u32::try_from(n).ok()));
        let limit = match (count, percent) {
            (Some(n), None) => BudgetLimit::Count(n?),
            (None, Some(p)) => BudgetLimit::Percent(p?),
            _ => return None,
        };
        Some(BudgetRule {
            name: budget.pointer("/metadata/name")?.as_str()?.to_string(),
            group: spec.pointer("/selector/matchLabels")?.get(rollout_core::keys::ROLLOUT_GROUP)?.as_str()?.to_string(),
            limit,
            // An empty regex is none (zone mode).
            partitions: spec.get("podNamePartitionRegex").and_then(|r| r.as_str()).is_some_and(|r| !r.is_empty()),
            cross_zone_delay: cross_zone_delay(spec)?,
            since: None,
            until: None,
        })
    }

    /// Whether this version of the budget judges a decision whose window runs from `basis_rv` to `before_rv`,
    /// committed at `at`: it was in force throughout the window, and (if committed during the run) long enough
    /// before for the operator to know it.
    fn judges(&self, basis_rv: u64, before_rv: u64, at: Duration, grace: Duration) -> bool {
        self.since.is_none_or(|(rv, since)| rv <= basis_rv && since + grace <= at)
            && self.until.is_none_or(|(rv, _)| rv > before_rv)
    }
}

/// What the drains world's evictions came to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DrainStats {
    /// Evictions the API server received for an existing pod (each asks the webhook).
    pub asked: u64,
    /// Denied by the webhook (429 mostly).
    pub denied: u64,
    /// The webhook could not be reached or did not answer in time (failure policy Fail).
    pub failed: u64,
    /// Dry runs the webhook allowed.
    pub dry_runs_allowed: u64,
    /// Evictions allowed and committed (the pod deleted).
    pub committed: u64,
    /// Committed evictions and controller deletions of an available pod, judged against the budgets.
    pub judged: u64,
    /// Runs that did not converge only because a pod to replace is the last of its partition (every other zone is
    /// scaled below it): the controller never leaves a partition without a pod, so the rollout waits for a person.
    pub held_by_last_pod: u64,
    /// Evictions of a pod already terminating when they arrived.
    pub of_terminating: u64,
    /// Partition peers of allowed evictions ready for less than twice `crossZoneEvictionDelay` when judged against it.
    pub peers_delay_judged: u64,
    /// Budget denials (429) of decisions whose eviction intent had been committed (on the pod or its StatefulSet).
    pub denied_after_intent: u64,
    /// Of those, the denials answered while the decision's intent was still there: each holds every other decision
    /// about its zone or partition until it expires, for nothing. Only a removal lost to a fault leaves one.
    pub denied_intent_left: u64,
    /// Evictions by drains, judged and within the budget, that made a second pod of their scope (the zone, or the
    /// partition) unavailable: only a budget allowing two lets them through.
    pub second_in_scope: u64,
    /// Intent writes on StatefulSets judged ([`ZPDB_INTENT_STORE`]), and the stale intents they removed.
    pub statefulset_intent_writes: u64,
    pub stale_intents_removed: u64,
}

impl DrainStats {
    pub fn add(&mut self, other: &DrainStats) {
        self.asked += other.asked;
        self.denied += other.denied;
        self.failed += other.failed;
        self.dry_runs_allowed += other.dry_runs_allowed;
        self.committed += other.committed;
        self.judged += other.judged;
        self.held_by_last_pod += other.held_by_last_pod;
        self.of_terminating += other.of_terminating;
        self.peers_delay_judged += other.peers_delay_judged;
        self.second_in_scope += other.second_in_scope;
        self.denied_after_intent += other.denied_after_intent;
        self.denied_intent_left += other.denied_intent_left;
        self.statefulset_intent_writes += other.statefulset_intent_writes;
        self.stale_intents_removed += other.stale_intents_removed;
    }
}

/// One committed decrease of a StatefulSet's `spec.replicas`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Downscale {
    /// The resourceVersion it committed at.
    pub commit_rv: u64,
    /// Where the history stood when its writer decided it (the review's arrival, the controller's watch position),
    /// when known.
    pub basis_rv: Option<u64>,
    /// Commit time (simulated time since the run started).
    pub at: Duration,
    pub sts: String,
    pub group: String,
    pub from: u32,
    pub to: u32,
    /// Who wrote it (`controller#N`, `webhook`, ...).
    pub by: String,
    /// `grafana.com/min-time-between-zones-downscale` of the StatefulSet, as the world meant what it wrote (never read
    /// back through the operator's parser).
    pub min_time: Option<Duration>,
    /// The StatefulSet's entry in the group downscale record when it committed (simulated time; information for
    /// the trace only: the checker judges by commit times).
    pub recorded_at: Option<Duration>,
    /// A follower or mirror carrying `grafana.com/rollout-force-replicas`: exempt from the min time by design.
    pub exempt: bool,
    /// A follower (`grafana.com/rollout-downscale-leader`).
    pub follower: bool,
}

impl Downscale {
    pub fn describe(&self) -> String {
        let claim = match self.recorded_at {
            Some(c) => format!("recorded at {:.0}s", c.as_secs_f64()),
            None => "not recorded".to_string(),
        };
        format!(
            "{} {} -> {} by {} committed at {:.3}s ({claim})",
            self.sts,
            self.from,
            self.to,
            self.by,
            self.at.as_secs_f64()
        )
    }
}

type History<T> = BTreeMap<String, Vec<(u64, Option<T>)>>;

#[derive(Debug, Default)]
pub struct Checker {
    pods: History<PodSum>,
    sts: History<StsSum>,
    own: Vec<OwnWrite>,
    pub violations: Vec<Violation>,
    pub writes_judged: u64,
    /// Every committed decrease of `spec.replicas`, in commit order.
    pub downscales: Vec<Downscale>,
    /// The shortest time between the commits of two decreases of different StatefulSets of one group that are
    /// subject to a min time.
    pub min_commit_gap: Option<Duration>,
    /// Without the zone tracker the operator promises the min time only between downscales that do not overlap (a
    /// pair whose later one was decided before the earlier one committed is not judged, counted here), and no
    /// serialisation of a rollout step with an admission (an admitted downscale is judged only on what held
    /// throughout its admission).
    pub concurrent_downscales_excused: bool,
    pub concurrent_pairs_not_judged: u64,
    /// Judged pairs whose commits came less than a second more than the min time apart, by who wrote the later
    /// one (the controller, anyone else): where a check off by a second would have broken the min time.
    pub near_min_time: (u64, u64),
    /// No-downscale admissions judged: (denied, allowed).
    pub no_downscale_admissions: (u64, u64),
    /// Denied downscales that had prepared pods, judged for [`PREPARE_UNDONE`].
    pub undos_judged: u64,
    /// Pods removed by admitted downscales of labelled StatefulSets, judged for [`PREPARED_FOR_SHUTDOWN`].
    pub prepared_pods: u64,
    /// Of each delayed downscale the controller committed, how long after the last of its pods had been preparing
    /// for the delay (how late the downscale came once it was due by its pods).
    pub delayed_downscale_lateness: Vec<Duration>,
    /// The prepare-downscale webhook's answers judged by [`Checker::judge_prepare_foreign`].
    pub prepare_foreign_admissions: u64,
    /// Controller pod deletions committed in a StatefulSet that was being scaled (replicas unlike its leader's,
    /// pods above `spec.replicas` still there, or a replica change in the last 30 s).
    pub rolled_while_scaling: u64,
    /// Controller replica changes committed on a StatefulSet that was being rolled (a pod not on its update or
    /// template revision, or currentRevision behind).
    pub scaled_while_rolling: u64,
    /// Of those, decreases: a StatefulSet scaled down during its own rollout (which only another StatefulSet's
    /// rollout holds back, as in the reference).
    pub downscaled_while_rolling: u64,
    /// The ZoneAwarePodDisruptionBudgets of the world (none but in the drains worlds), every version of each: one
    /// in force has no `until`.
    pub budgets: Vec<BudgetRule>,
    /// Eviction intent keys ever committed (each names its decision).
    pub intents_written: std::collections::BTreeSet<String>,
    /// The budget-edits worlds' outages of the operator's budget watches: from, until (`None`: still cut).
    pub budget_watch_outages: Vec<(Duration, Option<Duration>)>,
    /// Voluntary disruptions that spent a budget (an available pod evicted, or deleted by the controller): the
    /// resourceVersion they committed at, the pod's name, and by whom.
    spent: Vec<(u64, String, String)>,
    pub drains: DrainStats,
}

/// The state as the controller knew it.
struct Known {
    sts: BTreeMap<String, StsSum>,
    pods: BTreeMap<String, PodSum>,
    /// When the judged write commits: a pod counts as available only once Ready for its StatefulSet's
    /// `minReadySeconds` by then.
    now: jiff::Timestamp,
}

fn as_of<T: Clone>(history: &History<T>, rv: u64) -> BTreeMap<String, T> {
    let mut out = BTreeMap::new();
    for (name, versions) in history {
        let idx = versions.partition_point(|(v, _)| *v <= rv);
        if idx > 0
            && let Some(obj) = &versions[idx - 1].1
        {
            out.insert(name.clone(), obj.clone());
        }
    }
    out
}

/// What keeps pod slot `ordinal` of StatefulSet `sts` from counting as rolled out and available in `state`: missing,
/// terminating, not Ready, or not on the StatefulSet's update revision, nor on its template's revision (a template
/// push the StatefulSet controller has not observed yet is a rollout about to start: its status still names the old
/// revision, but the object the writer read already carries the new template).
fn slot_problem(state: &Known, sts: &str, ordinal: u32) -> Option<String> {
    let s = state.sts.get(sts)?;
    if ordinal >= s.replicas {
        return None;
    }
    let name = format!("{sts}-{ordinal}");
    match state.pods.get(&name) {
        None => Some(format!("{name} missing")),
        Some(p) if p.terminating => Some(format!("{name} terminating")),
        Some(p) if !p.ready || !state.min_ready(p) => Some(format!("{name} not ready")),
        Some(p) if p.revision != s.update_revision => {
            Some(format!("{name} on {} (update revision {})", p.revision, s.update_revision))
        }
        Some(p) if !s.template_revision.is_empty() && p.revision != s.template_revision => Some(format!(
            "{name} on {} (template revision {}, not yet observed by the StatefulSet controller)",
            p.revision, s.template_revision
        )),
        Some(_) => None,
    }
}

/// What makes pod slot `ordinal` of `sts` unavailable in `state` (a budget's sense: missing, terminating, or not
/// Ready for its `minReadySeconds`), if anything; `None` also for a slot at or above `spec.replicas`.
fn unavailable_slot(state: &Known, sts: &str, ordinal: u32) -> Option<String> {
    let s = state.sts.get(sts)?;
    if ordinal >= s.replicas {
        return None;
    }
    let name = format!("{sts}-{ordinal}");
    match state.pods.get(&name) {
        None => Some(format!("{name} missing")),
        Some(p) if p.terminating => Some(format!("{name} terminating")),
        Some(p) if !state.available(p) => Some(format!("{name} not ready")),
        Some(_) => None,
    }
}

fn ordinal(sts: &str, pod: &str) -> Option<u32> {
    pod.strip_prefix(sts)?.strip_prefix('-')?.parse().ok()
}

impl Known {
    /// Ready (for its StatefulSet's `minReadySeconds`) and not terminating.
    fn available(&self, p: &PodSum) -> bool {
        p.available() && self.min_ready(p)
    }

    /// Ready for at least its StatefulSet's `minReadySeconds`.
    fn min_ready(&self, p: &PodSum) -> bool {
        let min = self.sts.get(&p.sts).map_or(0, |s| s.min_ready_seconds);
        min == 0
            || p.ready_since
                .is_some_and(|since| self.now.duration_since(since) >= jiff::SignedDuration::from_secs(i64::from(min)))
    }

    /// The pods of `sts` with ordinals below its replicas, by ordinal (`None` = missing).
    fn members(&self, sts: &StsSum) -> Vec<(u32, Option<&PodSum>)> {
        (0..sts.replicas)
            .map(|i| {
                let member = |p: &&PodSum| p.sts == sts.name && p.in_selector && ordinal(&sts.name, &p.name) == Some(i);
                (i, self.pods.values().find(member))
            })
            .collect()
    }

    fn describe_unready(&self, sts: &StsSum) -> Option<String> {
        let bad: Vec<String> = self
            .members(sts)
            .into_iter()
            .filter_map(|(i, p)| match p {
                None => Some(format!("{}-{i} missing", sts.name)),
                Some(p) if p.terminating => Some(format!("{} terminating", p.name)),
                Some(p) if !p.ready || !self.min_ready(p) => Some(format!("{} not ready", p.name)),
                Some(_) => None,
            })
            .collect();
        if bad.is_empty() { None } else { Some(bad.join(", ")) }
    }
}

impl Checker {
    pub fn record_pod(&mut self, rv: u64, name: &str, pod: Option<PodSum>) {
        self.pods.entry(name.to_string()).or_default().push((rv, pod));
    }

    /// A budget committed (`Some`: created or updated, as the checker reads it) or deleted at `rv`, at `at`: the
    /// version in force until now ends there.
    pub fn record_budget(&mut self, rv: u64, at: Duration, name: &str, budget: Option<BudgetRule>) {
        // The same rule again (a metadata-only update): the version in force goes on, with no blind window.
        let same = |open: &BudgetRule, new: &BudgetRule| {
            (&open.group, open.limit, open.partitions, open.cross_zone_delay)
                == (&new.group, new.limit, new.partitions, new.cross_zone_delay)
        };
        if let Some(new) = &budget
            && self.budgets.iter().any(|b| b.name == name && b.until.is_none() && same(b, new))
        {
            return;
        }
        for open in self.budgets.iter_mut().filter(|b| b.name == name && b.until.is_none()) {
            open.until = Some((rv, at));
        }
        if let Some(budget) = budget {
            self.budgets.push(BudgetRule { since: Some((rv, at)), until: None, ..budget });
        }
    }

    /// Whether some budget covered `group`'s pods at some time within [`BUDGET_CHANGE_GRACE`] before `at`, or the
    /// operator could not watch the budgets then (it may not know yet that the budget is gone).
    pub fn covered_recently(&self, group: &str, at: Duration) -> bool {
        let recent = |until: Option<Duration>| until.is_none_or(|until| until + BUDGET_CHANGE_GRACE > at);
        self.budgets.iter().any(|b| b.group == group && recent(b.until.map(|(_, until)| until)))
            || self.budget_watch_outages.iter().any(|(_, until)| recent(*until))
    }

    /// A denied eviction (`code`, `message`) of a pod of `group`, at `at`: with no budget over the group for the
    /// grace, only a refusal that is not a budget's (budgets not loaded yet, the webhook failing) is right.
    pub fn judge_eviction_denial(&mut self, at: Duration, group: &str, pod: &str, code: u16, message: &str) {
        if code == 429 && !message.contains("not loaded") && !self.covered_recently(group, at) {
            let detail = format!("eviction of {pod} denied ({code}: {message}), but no budget covers group {group}");
            self.violate(at, ZPDB_OUT_OF_SCOPE, detail);
        }
    }

    /// A write of `grafana.com/ready-time` on `pod` (of `group`): only pods a budget selects are tracked, so the
    /// write is wrong once no budget has covered the pod's group for the grace (the watches not cut).
    pub fn judge_ready_time_write(&mut self, at: Duration, pod: &str, group: Option<&str>) {
        if !group.is_some_and(|g| self.covered_recently(g, at)) {
            let detail = match group {
                Some(group) => {
                    format!("ready-time written on {pod}, though no budget has covered group {group} for 30 s")
                }
                None => format!("ready-time written on {pod}, which is in no rollout group a budget covers"),
            };
            self.violate(at, ZPDB_READY_TIME_SCOPE, detail);
        }
    }

    /// A denial of an eviction of `pod` (arrived at `arrival_rv`, denied at `denial_rv`) because the budget allows
    /// no unavailable pod (`max unavailable = 0`): wrong when every budget version in force over the window (and
    /// known for the grace) allows at least one for the pod's StatefulSet, as read at any time until the denial
    /// (a percentage of its fewest replicas so far).
    pub fn judge_zero_budget_denial(
        &mut self,
        at: Duration,
        arrival_rv: u64,
        denial_rv: u64,
        pod: &str,
        message: &str,
    ) {
        let arrival = self.state_at(arrival_rv);
        let Some(sts) = arrival.pods.get(pod).and_then(|p| arrival.sts.get(&p.sts)).cloned() else { return };
        let rules: Vec<&BudgetRule> = self
            .budgets
            .iter()
            .filter(|b| b.group == sts.group && b.judges(arrival_rv, denial_rv, at, BUDGET_CHANGE_GRACE))
            .collect();
        let replicas = self.replicas_least(&sts.name, denial_rv);
        if !rules.is_empty() && rules.iter().all(|r| r.limit.at_least(replicas) > 0) {
            let limits: Vec<String> = rules.iter().map(|r| format!("{} ({})", r.name, r.limit)).collect();
            let detail = format!(
                "eviction of {pod} denied ({message}), though {} allow(s) at least one unavailable pod of {} (never \
                 fewer than {replicas} replicas)",
                limits.join(", "),
                sts.name
            );
            self.violate(at, ZPDB_ZERO_BUDGET, detail);
        }
    }

    /// A committed write of annotation `changes` on StatefulSet `sts` (its annotations `before` and `after`), at wall
    /// time `now`: see [`ZPDB_INTENT_STORE`]. Only writes that set an intent are judged (a decider removing its own
    /// intent writes nothing else).
    pub fn judge_statefulset_intent_write(
        &mut self,
        at: Duration,
        sts: &str,
        before: &BTreeMap<String, String>,
        changes: &BTreeMap<String, Option<String>>,
        after: &BTreeMap<String, String>,
        now: jiff::Timestamp,
    ) {
        if !changes.iter().any(|(k, v)| v.is_some() && is_intent_key(k)) {
            return;
        }
        self.drains.statefulset_intent_writes += 1;
        // `<expiry> <pod> <uid>`, as documented; the expiry in RFC 3339.
        let expiry = |value: &str| value.split_whitespace().next().and_then(|t| t.parse::<jiff::Timestamp>().ok());
        for (key, _) in changes.iter().filter(|(_, v)| v.is_none()) {
            let Some(value) = before.get(key) else { continue };
            self.drains.stale_intents_removed += u64::from(is_intent_key(key));
            if !is_intent_key(key) {
                let detail = format!("an intent write on {sts} removed annotation {key} (\"{value}\"), not an intent");
                self.violate(at, ZPDB_INTENT_STORE, detail);
            } else if let Some(until) = expiry(value).filter(|until| *until > now) {
                let detail = format!("an intent write on {sts} removed {key}, live until {until} (now {now})");
                self.violate(at, ZPDB_INTENT_STORE, detail);
            }
        }
        let grace = jiff::SignedDuration::try_from(STALE_INTENT_GRACE).unwrap_or_default();
        for (key, value) in after.iter().filter(|(k, _)| is_intent_key(k)) {
            let stale = match expiry(value) {
                Some(until) => until + grace < now,
                None => true,
            };
            if stale {
                let detail = format!("an intent write on {sts} left {key} (\"{value}\") behind, stale (now {now})");
                self.violate(at, ZPDB_INTENT_STORE, detail);
            }
        }
    }

    /// Eviction intents set by a committed annotation write (their keys name the decision).
    pub fn record_intents_written(&mut self, changes: &BTreeMap<String, Option<String>>) {
        let set = changes.iter().filter(|(k, v)| v.is_some() && k.starts_with(EVICTION_INTENT_PREFIX));
        self.intents_written.extend(set.map(|(k, _)| k.clone()));
    }

    /// An eviction decision (`decision`, its AdmissionReview's uid) was denied with `code`: for a budget's denial
    /// (429: its reads succeeded, so its removal is expected to), whether it had committed an intent, and whether
    /// `present` (its intent still on the pod or a StatefulSet as the answer arrives).
    pub fn record_denied_decision(&mut self, decision: &str, code: u16, present: bool) {
        if code == 429 && self.intents_written.contains(&format!("{EVICTION_INTENT_PREFIX}{decision}")) {
            self.drains.denied_after_intent += 1;
            self.drains.denied_intent_left += u64::from(present);
        }
    }

    /// A 429 denial of an eviction of `pod`, which was terminating (the same uid) from its arrival to the denial.
    pub fn judge_terminating_denial(&mut self, at: Duration, pod: &str, message: &str) {
        let detail = format!("eviction of {pod} denied (429: {message}), though the pod was terminating throughout");
        self.violate(at, ZPDB_TERMINATING, detail);
    }

    /// The validation webhook's answer on a budget edit the editor knows to be `valid` or not.
    pub fn judge_budget_admission(&mut self, at: Duration, what: &str, valid: bool, allowed: bool, message: &str) {
        if valid != allowed {
            let verdict = if allowed { "admitted".to_string() } else { format!("refused ({message})") };
            let expected = if valid { "a valid" } else { "an invalid" };
            self.violate(at, ZPDB_VALIDATION, format!("{expected} budget edit ({what}) was {verdict}"));
        }
    }

    pub fn record_sts(&mut self, rv: u64, name: &str, sts: Option<StsSum>) {
        self.sts.entry(name.to_string()).or_default().push((rv, sts));
    }

    fn known(&self, k: Knowledge) -> Known {
        let mut known =
            Known { sts: as_of(&self.sts, k.sts_rv), pods: as_of(&self.pods, k.pod_rv), now: jiff::Timestamp::now() };
        for w in &self.own {
            match w {
                OwnWrite::Deleted { incarnation, rv, pod, uid } if *incarnation == k.incarnation && *rv > k.pod_rv => {
                    if let Some(p) = known.pods.get_mut(pod).filter(|p| p.uid == *uid) {
                        p.terminating = true;
                    }
                }
                OwnWrite::Revision { incarnation, rv, sts, revision }
                    if *incarnation == k.incarnation && *rv > k.sts_rv =>
                {
                    if let Some(s) = known.sts.get_mut(sts) {
                        s.current_revision = revision.clone();
                    }
                }
                _ => {}
            }
        }
        known
    }

    /// Records a violation of `invariant`; also used by the store and the worlds for the rules whose facts they
    /// hold.
    pub fn violate(&mut self, at: Duration, invariant: &'static str, detail: String) {
        self.violations.push(Violation { at, invariant, detail });
    }

    /// Judges a controller deletion of `target` (as committed) that is about to commit at `rv`.
    pub fn judge_delete(&mut self, at: Duration, k: Knowledge, rv: u64, target: &PodSum) {
        self.writes_judged += 1;
        let known = self.known(k);
        // The pod as the controller knew it, if it knew this very pod (same uid); else as committed: a deletion of
        // a pod the controller never saw is judged on that pod, not on an earlier one of the same name.
        let seen = known.pods.get(&target.name).filter(|p| p.uid == target.uid).cloned();
        let basis = format!("(known: sts rv {}, pod rv {}, process #{})", k.sts_rv, k.pod_rv, k.incarnation);
        if seen.is_none() {
            let knew = match known.pods.get(&target.name) {
                Some(p) => format!("it knew {} as uid {}", p.name, p.uid),
                None => format!("it knew no pod {}", target.name),
            };
            let detail = format!("deleted {} (uid {}), a pod it had not seen: {knew} {basis}", target.name, target.uid);
            self.violate(at, ONLY_SEEN_PODS, detail);
        }
        let pod = seen.unwrap_or_else(|| target.clone());
        if pod.sts.is_empty() || !pod.in_selector {
            let why = if pod.sts.is_empty() { "no StatefulSet's" } else { "relabelled out of its selector" };
            self.violate(at, ONLY_MEMBER_PODS, format!("deleted {} (uid {}), {why} {basis}", pod.name, pod.uid));
        }
        if let Some(sts) = known.sts.get(&pod.sts).cloned() {
            for other in known.sts.values().filter(|o| o.group == sts.group && o.name != sts.name) {
                if let Some(why) = known.describe_unready(other) {
                    self.violate(at, ONE_ZONE, format!("deleted {} while {}: {why} {basis}", pod.name, other.name));
                }
            }
            if sts.paused {
                self.violate(at, PAUSED, format!("deleted {} of paused {} {basis}", pod.name, sts.name));
            }
            if known.available(&pod) {
                let members = known.members(&sts);
                let available = members.iter().filter(|(_, p)| p.is_some_and(|p| known.available(p))).count() as u32;
                let unavailable = sts.replicas.saturating_sub(available);
                if unavailable + 1 > sts.max_unavailable {
                    self.violate(
                        at,
                        MAX_UNAVAILABLE,
                        format!(
                            "deleted available {} while {unavailable} of {} unavailable (max {}) {basis}",
                            pod.name, sts.name, sts.max_unavailable
                        ),
                    );
                }
            }
        }
        self.own.push(OwnWrite::Deleted {
            incarnation: k.incarnation,
            rv,
            pod: target.name.clone(),
            uid: target.uid.clone(),
        });
    }

    /// Judges a controller write of `status.currentRevision` of `sts` to `revision`, about to commit at `rv`.
    pub fn judge_revision(&mut self, at: Duration, k: Knowledge, rv: u64, sts: &str, revision: &str) {
        self.writes_judged += 1;
        let known = self.known(k);
        if let Some(s) = known.sts.get(sts) {
            let bad: Vec<String> = known
                .members(s)
                .into_iter()
                .filter_map(|(i, p)| match p {
                    None => Some(format!("{sts}-{i} missing")),
                    Some(p) if !known.available(p) => Some(format!("{} not available", p.name)),
                    Some(p) if p.revision != revision => Some(format!("{} on {}", p.name, p.revision)),
                    Some(_) => None,
                })
                .collect();
            if !bad.is_empty() {
                let detail = format!(
                    "set currentRevision of {sts} to {revision} while {} (known: sts rv {}, pod rv {}, process #{})",
                    bad.join(", "),
                    k.sts_rv,
                    k.pod_rv,
                    k.incarnation
                );
                self.violate(at, NO_ZERO_POD_READY, detail);
            }
        }
        self.own.push(OwnWrite::Revision {
            incarnation: k.incarnation,
            rv,
            sts: sts.to_string(),
            revision: revision.to_string(),
        });
    }

    /// Judges a committed decrease of a StatefulSet's replicas against every earlier one of another StatefulSet of its
    /// group (the min time between zone downscales): the later must commit at least the min time (the larger of both
    /// StatefulSets') after the earlier. Force-replicas decreases are exempt, as is a pair where neither side has a min
    /// time.
    pub fn record_downscale(&mut self, d: Downscale) {
        // A follower the world wrote without a min time, scaled down by the controller after another zone's
        // downscale was recorded (committed before the controller's basis).
        if d.follower && !d.exempt && d.min_time.is_none() && d.by.starts_with("controller") {
            let recorded = self.downscales.iter().find(|p| {
                p.group == d.group
                    && p.sts != d.sts
                    && p.recorded_at.is_some()
                    && d.basis_rv.is_some_and(|basis| p.commit_rv <= basis)
            });
            if let Some(prev) = recorded {
                let detail = format!("{}; earlier, recorded: {}", d.describe(), prev.describe());
                self.violate(d.at, FOLLOWER_WITHOUT_MIN_TIME, detail);
            }
        }
        if !d.exempt {
            let mut found = Vec::new();
            for prev in self.downscales.iter().filter(|p| p.group == d.group && p.sts != d.sts && !p.exempt) {
                let Some(min) = prev.min_time.max(d.min_time) else { continue };
                if self.concurrent_downscales_excused && d.basis_rv.is_some_and(|basis| basis < prev.commit_rv) {
                    self.concurrent_pairs_not_judged += 1;
                    continue;
                }
                let gap = d.at.saturating_sub(prev.at);
                self.min_commit_gap = Some(self.min_commit_gap.map_or(gap, |g| g.min(gap)));
                if gap < min + Duration::from_secs(1) {
                    match d.by.starts_with("controller") {
                        true => self.near_min_time.0 += 1,
                        false => self.near_min_time.1 += 1,
                    }
                }
                if gap < min {
                    found.push(format!(
                        "{} committed only {:.3}s after {} (min time {}s): {}; earlier: {}",
                        d.sts,
                        gap.as_secs_f64(),
                        prev.sts,
                        min.as_secs(),
                        d.describe(),
                        prev.describe()
                    ));
                }
            }
            for detail in found {
                self.violate(d.at, MIN_TIME, detail);
            }
        }
        self.downscales.push(d);
    }

    /// Invariant 5, webhook side: a downscale of `sts` (group `group`) admitted by the prepare-downscale webhook
    /// committed at `commit_rv`; its AdmissionReview was sent at `arrival_rv`. Judged on the committed history, not
    /// on what the webhook read: every pod slot (ordinal below `spec.replicas`) of every other StatefulSet of the
    /// group that is missing, terminating, unready or not on its update revision at the commit is a violation if it
    /// was so throughout the admission (from `arrival_rv` on: any correct read had to see it), or if a controller
    /// deletion during the admission made it so (the rollout step and the downscale overlapped). A slot that turned
    /// bad during the admission for reasons no actor of ours controls (a pod crash, a user's template push) is not
    /// held against the webhook.
    pub fn judge_admitted(&mut self, at: Duration, arrival_rv: u64, commit_rv: u64, sts: &str, group: &str) {
        let committed =
            Known { sts: as_of(&self.sts, commit_rv), pods: as_of(&self.pods, commit_rv), now: jiff::Timestamp::now() };
        let mut found = Vec::new();
        for other in committed.sts.values().filter(|o| o.group == group && o.name != sts) {
            let mut bad = Vec::new();
            for ordinal in 0..other.replicas {
                let pod_name = format!("{}-{ordinal}", other.name);
                let Some(why) = slot_problem(&committed, &other.name, ordinal) else { continue };
                let deleted_by_controller = self.own.iter().any(|w| {
                    matches!(w, OwnWrite::Deleted { rv, pod, .. } if *pod == pod_name && *rv > arrival_rv && *rv <= commit_rv)
                });
                // Every committed version of the slot's StatefulSet and pod within the admission.
                let mut versions: Vec<u64> = vec![arrival_rv];
                let in_window = |v: &u64| *v > arrival_rv && *v <= commit_rv;
                let sts_versions = self.sts.get(&other.name).into_iter().flatten().map(|(v, _)| *v);
                let pod_versions = self.pods.get(&pod_name).into_iter().flatten().map(|(v, _)| *v);
                versions.extend(sts_versions.chain(pod_versions).filter(in_window));
                let throughout = versions.iter().all(|v| {
                    let state =
                        Known { sts: as_of(&self.sts, *v), pods: as_of(&self.pods, *v), now: jiff::Timestamp::now() };
                    slot_problem(&state, &other.name, ordinal).is_some()
                });
                // Without the zone tracker nothing serialises the controller's steps with an admission (no marker,
                // no step claim): that mode promises only what the webhook can see, conditions that held throughout.
                let judged_deletion = deleted_by_controller && !self.concurrent_downscales_excused;
                if throughout || judged_deletion {
                    let how = if deleted_by_controller {
                        "deleted by the controller during the admission"
                    } else {
                        "since before the admission"
                    };
                    bad.push(format!("{why} ({how})"));
                }
            }
            if !bad.is_empty() {
                found.push(format!(
                    "admitted a downscale of {sts} while {}: {} (committed at rv {commit_rv}, review sent at rv {arrival_rv})",
                    other.name,
                    bad.join(", ")
                ));
            }
        }
        for detail in found {
            self.violate(at, NO_DOWNSCALE_DURING_ROLLOUT, detail);
        }
    }

    /// Invariant 5, controller side: a controller's decrease of `sts`'s replicas (a follower following its leader),
    /// about to commit, judged on what the controller knew: every other StatefulSet of the group must have each pod
    /// slot below its `spec.replicas` present, Ready, not terminating and on its update revision.
    pub fn judge_controller_downscale(&mut self, at: Duration, k: Knowledge, sts: &str, group: &str) {
        let known = self.known(k);
        let mut found = Vec::new();
        for other in known.sts.values().filter(|o| o.group == group && o.name != sts) {
            let bad: Vec<String> = (0..other.replicas).filter_map(|i| slot_problem(&known, &other.name, i)).collect();
            if !bad.is_empty() {
                found.push(format!(
                    "scaled {sts} down while {}: {} (known: sts rv {}, pod rv {}, process #{})",
                    other.name,
                    bad.join(", "),
                    k.sts_rv,
                    k.pod_rv,
                    k.incarnation
                ));
            }
        }
        for detail in found {
            self.violate(at, NO_DOWNSCALE_DURING_ROLLOUT, detail);
        }
    }

    /// A controller's increase of `sts`'s replicas, about to commit, judged on what the controller knew: a follower
    /// that waits for its leader's readiness is scaled up only while the leader reports every replica ready.
    pub fn judge_controller_upscale(&mut self, at: Duration, k: Knowledge, sts: &str) {
        let known = self.known(k);
        let Some(s) = known.sts.get(sts) else { return };
        if !s.upscale_only_when_leader_ready {
            return;
        }
        let Some(leader) = s.leader.as_ref().and_then(|l| known.sts.get(l)) else { return };
        if leader.ready_replicas != leader.replicas {
            let detail = format!(
                "scaled {sts} up while its leader {} had {}/{} replicas ready (known: sts rv {}, process #{})",
                leader.name, leader.ready_replicas, leader.replicas, k.sts_rv, k.incarnation
            );
            self.violate(at, LEADER_READY_UPSCALE, detail);
        }
    }

    /// Invariant 5, controller side: a controller deletion of `pod` committed while a downscale of `preparing` (a
    /// StatefulSet of the same group) was being prepared: from the commit of the record write carrying its
    /// in-progress marker until the downscale committed (or was denied).
    pub fn judge_delete_while_preparing(&mut self, at: Duration, k: Knowledge, pod: &str, preparing: &str) {
        let detail = format!(
            "deleted {pod} while a downscale of {preparing} was being prepared (process #{}, known: sts rv {}, pod rv {})",
            k.incarnation, k.sts_rv, k.pod_rv
        );
        self.violate(at, NO_DOWNSCALE_DURING_ROLLOUT, detail);
    }

    /// Judges the no-downscale webhook's answer to a change of `what` from `from` to `to` replicas.
    #[allow(clippy::too_many_arguments)]
    pub fn judge_no_downscale(
        &mut self,
        at: Duration,
        what: &str,
        labelled: bool,
        from: u32,
        to: u32,
        allowed: bool,
        warnings: &[String],
        read_failed: bool,
    ) {
        match allowed {
            true => self.no_downscale_admissions.1 += 1,
            false => self.no_downscale_admissions.0 += 1,
        }
        // The fail-open answer is the reference's policy for a parent it could not read, and only for that: the
        // world knows whether the webhook asked for the parent without getting it (a fault), and every object and
        // resource it sends is well formed and supported.
        let lookup_failed = warnings.iter().any(|w| w.starts_with("can't get"));
        if lookup_failed && !read_failed {
            let detail = format!(
                "{what} {from} -> {to} answered as a failed read ({}), but no read failed",
                warnings.join("; ")
            );
            self.violate(at, NO_DOWNSCALE_LABEL, detail);
        }
        if allowed && labelled && to < from && !lookup_failed {
            let why = if warnings.is_empty() { String::new() } else { format!(" (warnings: {})", warnings.join("; ")) };
            let detail = format!("admitted {what} {from} -> {to}, labelled {}{why}", rollout_core::keys::NO_DOWNSCALE);
            self.violate(at, NO_DOWNSCALE_LABEL, detail);
        }
        if !allowed && (!labelled || to > from) {
            self.violate(at, NO_DOWNSCALE_LABEL, format!("denied {what} {from} -> {to}, which must be allowed"));
        }
    }

    /// [`PREPARE_FOREIGN`]: the prepare-downscale webhook's answer to a change of `kind` (`reads`: the parent
    /// objects it read by name meanwhile, as (asked, answered)). Only a downscale needs the webhook to look at the
    /// object's type; an upscale is let through as it is.
    #[allow(clippy::too_many_arguments)]
    pub fn judge_prepare_foreign(
        &mut self,
        at: Duration,
        what: &str,
        kind: &str,
        downscale: bool,
        allowed: bool,
        warnings: &[String],
        reads: (u32, u32),
    ) {
        self.prepare_foreign_admissions += 1;
        // A `/scale` of a StatefulSet whose read failed (an API error, not "not found") is denied by design: the
        // StatefulSet may be one the webhook serves.
        let excused = kind == "StatefulSet" && reads.0 > reads.1;
        if !allowed && !excused {
            self.violate(at, PREPARE_FOREIGN, format!("denied {what}, which it does not serve"));
        }
        if kind != "StatefulSet" {
            if reads.0 > 0 {
                let detail = format!("read {} parent objects for {what}, which is no StatefulSet", reads.0);
                self.violate(at, PREPARE_FOREIGN, detail);
            }
            if allowed && downscale && !warnings.iter().any(|w| w.ends_with("allowing the change")) {
                let detail = format!("let {what} through without saying it is not served (warnings: {warnings:?})");
                self.violate(at, PREPARE_FOREIGN, detail);
            }
        }
    }

    /// [`PREPARE_FOREIGN`] for a change in a namespace the operator does not manage: the prepare-downscale webhook
    /// lets it through, says so, and reads nothing (deciding it on the object of that name in its own namespace
    /// would decide about the wrong object).
    pub fn judge_foreign_namespace(
        &mut self,
        at: Duration,
        what: &str,
        allowed: bool,
        warnings: &[String],
        reads: (u32, u32),
    ) {
        self.prepare_foreign_admissions += 1;
        if !allowed {
            self.violate(at, PREPARE_FOREIGN, format!("denied {what}, in a namespace it does not manage"));
        }
        if reads.0 > 0 {
            let detail = format!("read {} objects for {what}, in a namespace it does not manage", reads.0);
            self.violate(at, PREPARE_FOREIGN, detail);
        }
        if allowed && !warnings.iter().any(|w| w.contains("is not managed by this rollout-operator")) {
            let detail = format!("let {what} through without saying its namespace is not managed ({warnings:?})");
            self.violate(at, PREPARE_FOREIGN, detail);
        }
    }

    /// Issue 14: a voluntary disruption of `target` (an eviction the webhook allowed, or a controller deletion),
    /// about to commit on top of the committed state at `before_rv`, judged against every budget that covers its
    /// pod, on the committed history: a target that was not available throughout the decision's window may have
    /// been replaced as unavailable, which takes nothing away (not judged);
    /// otherwise, counting the target as unavailable, every pod slot (ordinal below `spec.replicas`) of the group's
    /// StatefulSets that is unavailable now counts when the decision could have known it: unavailable throughout
    /// its window (from `basis_rv`, the eviction's arrival or the controller's watch position, to the commit), or
    /// made so within the window by a voluntary disruption that spent the budget (which serialisation must have
    /// shown it). Zone mode: unavailable pods in one zone only, at most `maxUnavailable` there; partition mode: at
    /// most `maxUnavailable` unavailable pods of the target's partition across the zones. Unavailability that began
    /// in the window by itself (a crash, a pod not yet Ready again) is not held against the decision.
    pub fn judge_disruption(&mut self, at: Duration, basis_rv: u64, before_rv: u64, target: &PodSum, by: &str) {
        let before = self.state_at(before_rv);
        let Some(sts) = before.sts.get(&target.sts).cloned() else { return };
        let basis_rv = basis_rv.min(before_rv);
        let grace = if by.starts_with("controller") { BUDGET_CHANGE_GRACE_CONTROLLER } else { BUDGET_CHANGE_GRACE };
        let rules: Vec<BudgetRule> = self
            .budgets
            .iter()
            .filter(|b| b.group == sts.group && b.judges(basis_rv, before_rv, at, grace))
            .cloned()
            .collect();
        if rules.is_empty() || !self.available_throughout(target, basis_rv, before_rv) {
            return;
        }
        self.drains.judged += 1;
        let invariant = if by.starts_with("controller") { ZPDB_CONTROLLER } else { ZPDB_EVICTIONS };
        // Every counted unavailable slot, by StatefulSet and ordinal, with why.
        let mut counted: Vec<(String, u32, String)> = Vec::new();
        for zone in before.sts.values().filter(|s| s.group == sts.group) {
            for ordinal in 0..zone.replicas {
                let slot = format!("{}-{ordinal}", zone.name);
                if slot == target.name {
                    counted.push((zone.name.clone(), ordinal, format!("{slot} (this disruption)")));
                    continue;
                }
                let Some(why) = unavailable_slot(&before, &zone.name, ordinal) else { continue };
                let spent = self.spent.iter().find(|(rv, pod, _)| *pod == slot && *rv > basis_rv && *rv <= before_rv);
                if spent.is_some() || self.unavailable_throughout(&zone.name, ordinal, basis_rv, before_rv) {
                    let how = match spent {
                        Some((rv, _, by)) => format!("{by} at rv {rv}, in the window"),
                        None => "throughout the window".to_string(),
                    };
                    counted.push((zone.name.clone(), ordinal, format!("{why} ({how})")));
                }
            }
        }
        let target_ordinal = ordinal(&target.sts, &target.name);
        // A percentage is of the target's StatefulSet's replicas as the decision read them: at most the most it
        // ever had.
        let replicas = self.spec_replicas_most(&target.sts, before_rv);
        for rule in rules {
            let max = rule.limit.at_most(replicas);
            let young = match rule.partitions && !rule.cross_zone_delay.is_zero() && !by.starts_with("controller") {
                true => self.peers_under_delay(&before, basis_rv, target, &rule),
                false => Vec::new(),
            };
            let in_scope = match rule.partitions {
                true => counted.iter().filter(|(_, o, _)| Some(*o) == target_ordinal).count(),
                false => counted.iter().filter(|(z, _, _)| *z == target.sts).count(),
            };
            let breach = if rule.partitions {
                let same: Vec<&(String, u32, String)> =
                    counted.iter().filter(|(_, o, _)| Some(*o) == target_ordinal).collect();
                (same.len() as u32 > max).then(|| {
                    let what: Vec<&str> = same.iter().map(|(_, _, w)| w.as_str()).collect();
                    format!(
                        "partition {} has {} unavailable: {}",
                        target_ordinal.unwrap_or(0),
                        same.len(),
                        what.join(", ")
                    )
                })
            } else {
                let zones: std::collections::BTreeSet<&str> = counted.iter().map(|(z, _, _)| z.as_str()).collect();
                let own = counted.iter().filter(|(z, _, _)| *z == target.sts).count() as u32;
                (zones.len() > 1 || own > max).then(|| {
                    let what: Vec<&str> = counted.iter().map(|(_, _, w)| w.as_str()).collect();
                    format!("{} zones with unavailable pods, {own} in {}: {}", zones.len(), target.sts, what.join(", "))
                })
            };
            if let Some(breach) = breach {
                let detail = format!(
                    "{by} of {} (uid {}) breaks {} (max unavailable {max}, of {}): {breach} (window rv {basis_rv}..{before_rv})",
                    target.name, target.uid, rule.name, rule.limit
                );
                self.violate(at, invariant, detail);
                continue;
            }
            if in_scope >= 2 && !by.starts_with("controller") {
                self.drains.second_in_scope += 1;
            }
            if !young.is_empty() {
                // Peers ready for less than the delay count as not ready: only they can push it over.
                let same = counted.iter().filter(|(_, o, _)| Some(*o) == target_ordinal).count();
                if (same + young.len()) as u32 > max {
                    let detail = format!(
                        "eviction of {} allowed with {same} unavailable in its partition and {} (max unavailable {max} in {})",
                        target.name,
                        young.join(", "),
                        rule.name
                    );
                    self.violate(at, ZPDB_CROSS_ZONE_DELAY, detail);
                }
            }
        }
        self.spent.push((before_rv + 1, target.name.clone(), by.to_string()));
    }

    /// Partition mode's `crossZoneEvictionDelay`, for an eviction of `target` allowed on the committed state
    /// `before` (its window opening at `basis_rv`): the peers (the same partition in other zones) available at the commit that count as not ready,
    /// since they cannot have been ready for the delay: the same uid throughout the window, and first ready less
    /// than the delay before the commit (their ready-time stamp is no earlier; a second is allowed for the stamp's
    /// RFC 3339 seconds).
    fn peers_under_delay(&mut self, before: &Known, basis_rv: u64, target: &PodSum, rule: &BudgetRule) -> Vec<String> {
        let Some(partition) = ordinal(&target.sts, &target.name) else { return Vec::new() };
        let basis = self.state_at(basis_rv);
        let Some(group) = before.sts.get(&target.sts).map(|s| s.group.clone()) else { return Vec::new() };
        let margin = jiff::SignedDuration::try_from(rule.cross_zone_delay).unwrap_or_default()
            - jiff::SignedDuration::from_secs(1);
        let mut young = Vec::new();
        for zone in before.sts.values().filter(|s| s.group == group && s.name != target.sts && partition < s.replicas) {
            let peer = format!("{}-{partition}", zone.name);
            let Some(p) = before.pods.get(&peer).filter(|p| before.available(p)) else { continue };
            if basis.pods.get(&peer).is_none_or(|b| b.uid != p.uid) {
                continue;
            }
            let versions = self.pods.get(&peer).into_iter().flatten().filter_map(|(_, v)| v.as_ref());
            let Some(first_ready) = versions.filter(|v| v.uid == p.uid).find_map(|v| v.ready_since) else { continue };
            let ready_for = before.now.duration_since(first_ready);
            // Judged where it could matter: peers ready for less than twice the delay.
            if ready_for < margin * 2 {
                self.drains.peers_delay_judged += 1;
            }
            if ready_for < margin {
                young
                    .push(format!("{peer} (ready only {:.1}s, under crossZoneEvictionDelay)", ready_for.as_secs_f64()));
            }
        }
        young
    }

    /// The committed state at `rv`.
    /// The most `spec.replicas` StatefulSet `sts` had in any version up to `to_rv`.
    fn spec_replicas_most(&self, sts: &str, to_rv: u64) -> u32 {
        let versions = self.sts.get(sts).into_iter().flatten().filter(|(v, _)| *v <= to_rv);
        versions.filter_map(|(_, s)| s.as_ref().map(|s| s.replicas)).max().unwrap_or(0)
    }

    /// The least replicas StatefulSet `sts` had, by `spec.replicas` and `status.replicas`, in any version up to
    /// `to_rv` (none while it did not exist): any read of it until then gives at least this many.
    fn replicas_least(&self, sts: &str, to_rv: u64) -> u32 {
        let versions = self.sts.get(sts).into_iter().flatten().filter(|(v, _)| *v <= to_rv);
        versions.map(|(_, s)| s.as_ref().map_or(0, |s| s.replicas.min(s.status_replicas))).min().unwrap_or(0)
    }

    fn state_at(&self, rv: u64) -> Known {
        Known { sts: as_of(&self.sts, rv), pods: as_of(&self.pods, rv), now: jiff::Timestamp::now() }
    }

    /// Whether `target` (this very pod, by uid) was available in every committed version from `from_rv` to `to_rv`:
    /// a pod unavailable at some point of the window may have been read so by the decision, which then rightly
    /// replaced it without spending the budget (sim seed 18 of `--drains --webhook`: a pod Ready 11 ms before the
    /// controller's deletion of it, decided while it was not).
    fn available_throughout(&self, target: &PodSum, from_rv: u64, to_rv: u64) -> bool {
        let in_window = |v: &u64| *v > from_rv && *v <= to_rv;
        let sts_versions = self.sts.get(&target.sts).into_iter().flatten().map(|(v, _)| *v);
        let pod_versions = self.pods.get(&target.name).into_iter().flatten().map(|(v, _)| *v);
        std::iter::once(from_rv).chain(sts_versions.chain(pod_versions).filter(in_window)).all(|v| {
            let state = self.state_at(v);
            state.pods.get(&target.name).is_some_and(|p| p.uid == target.uid && state.available(p))
        })
    }

    /// Whether slot `ordinal` of `sts` was unavailable in every committed version from `from_rv` to `to_rv`.
    fn unavailable_throughout(&self, sts: &str, ordinal: u32, from_rv: u64, to_rv: u64) -> bool {
        let pod = format!("{sts}-{ordinal}");
        let in_window = |v: &u64| *v > from_rv && *v <= to_rv;
        let sts_versions = self.sts.get(sts).into_iter().flatten().map(|(v, _)| *v);
        let pod_versions = self.pods.get(&pod).into_iter().flatten().map(|(v, _)| *v);
        std::iter::once(from_rv)
            .chain(sts_versions.chain(pod_versions).filter(in_window))
            .all(|v| unavailable_slot(&self.state_at(v), sts, ordinal).is_some())
    }

    /// A dry-run eviction whose admission wrote something.
    pub fn record_dry_run_write(&mut self, at: Duration, detail: String) {
        self.violate(at, DRY_RUN_WRITES, detail);
    }

    pub fn record_mirror_violation(&mut self, at: Duration, detail: String) {
        self.violate(at, MIRROR, detail);
    }

    pub fn record_delayed_violation(&mut self, at: Duration, detail: String) {
        self.violate(at, DELAYED_DOWNSCALE, detail);
    }

    /// [`RECORD_MARKERS_READABLE`]: a committed write of `record` carries the `unreadable` markers.
    pub fn judge_record_markers(&mut self, at: Duration, record: &str, unreadable: &[String]) {
        let detail = format!("the record {record} was committed with unreadable markers: {}", unreadable.join("; "));
        self.violate(at, RECORD_MARKERS_READABLE, detail);
    }

    pub fn record_forbidden(&mut self, at: Duration, detail: String) {
        self.violate(at, FORBIDDEN, detail);
    }

    pub fn record_liveness_failure(&mut self, at: Duration, detail: String) {
        self.violate(at, LIVENESS, detail);
    }
}
