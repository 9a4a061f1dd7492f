pub mod admission;
pub mod budgets;
pub mod health;
pub mod rollout;
pub mod scaling;

use crate::environment::objects::{PodSum, StsSum};
use crate::oracle::checker::budgets::{BudgetRule, DrainStats};
use crate::oracle::checker::scaling::Downscale;
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
pub(crate) enum OwnWrite {
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

/// Health-gated zones: a release whose pods serve errors is rolled to one zone only (the gate before each later
/// zone finds the updated pods' error ratio above the baseline's).
pub const HEALTH_GATE: &str = "a bad release starts no second zone";

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
    /// The budget-edits worlds' admissions, as the editor knows them.
    pub budget_edits: Vec<(crate::actors::budget_editors::EditKind, crate::actors::budget_editors::EditResult)>,
    /// Voluntary disruptions that spent a budget (an available pod evicted, or deleted by the controller): the
    /// resourceVersion they committed at, the pod's name, and by whom.
    spent: Vec<(u64, String, String)>,
    pub drains: DrainStats,
    /// Health-gated worlds with a bad release: per rollout group and push (its revision number), the StatefulSets
    /// the controller deleted pods of to roll it.
    pub bad_release_zones: BTreeMap<String, std::collections::BTreeSet<String>>,
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

    /// A voluntary disruption of `target` (an eviction the webhook allowed, or a controller deletion),
    /// about to commit on top of the committed state at `before_rv`, judged against every budget that covers its
    /// pod, on the committed history: a target that was not available throughout the decision's window may have
    /// been replaced as unavailable, which takes nothing away (not judged);
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
