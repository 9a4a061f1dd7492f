//! Whether an eviction keeps a budget (reference 5.4 steps 7-11): the effective `maxUnavailable`, the zone-mode and
//! partition-mode validators, the denial messages, and the outcome of every answer (the
//! `rollout_operator_zpdb_eviction_requests_total{reason,status}` pair and the `status.code` of a denial).
//!
//! Pure: the flow ([`super::flow`]) gathers the inputs live and calls [`judge`] on them.

use super::config::ZpdbConfig;
use super::pods::BudgetPod;
use crate::admission::Verdict;
use crate::downscale::time_after;
use crate::natural::pod_ordinal;
use crate::settings::parse_timestamp;
use crate::view::StatefulSetView;
use jiff::Timestamp;

/// The label pair of `rollout_operator_zpdb_eviction_requests_total` for one answer; `status` is also the
/// `status.code` of a denial (the API server answers the evicting client with it: 429 makes `kubectl drain`
/// retry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Outcome {
    pub reason: &'static str,
    pub status: u16,
}

impl Outcome {
    /// Decoded, but not an eviction we can judge (not CREATE, not the eviction subresource, no name).
    pub const INVALID_REQUEST: Outcome = Outcome { reason: "invalid-request", status: 400 };
    pub const POD_NOT_FOUND: Outcome = Outcome { reason: "pod-not-found", status: 400 };
    /// The pod is not running (or already terminating): evicting it takes nothing away. Allowed.
    pub const POD_NOT_READY: Outcome = Outcome { reason: "pod-not-ready", status: 200 };
    /// Two or more budgets select the pod.
    pub const CFG_NOT_FOUND: Outcome = Outcome { reason: "cfg-not-found", status: 400 };
    /// No budget selects the pod (or it is outside the managed namespace). Allowed.
    pub const POD_NOT_IN_SCOPE: Outcome = Outcome { reason: "pod-not-in-scope", status: 200 };
    /// The pod's owner is missing, is not a StatefulSet, cannot be read, or is not selected by the budget.
    pub const STS_NOT_FOUND: Outcome = Outcome { reason: "sts-no-found", status: 500 };
    pub const MAX_UNAVAILABLE_0: Outcome = Outcome { reason: "max-unavailable-0", status: 403 };
    /// The budget selects fewer than two StatefulSets (or they could not be listed).
    pub const MIN_STS_NOT_FOUND: Outcome = Outcome { reason: "min-sts-not-found", status: 400 };
    pub const PARTITION_NOT_IDENTIFIED: Outcome = Outcome { reason: "partition-not-identified", status: 400 };
    /// The budget's pods could not be listed (the reference's label value, colon and all).
    pub const POD_STATUS_NOT_DETERMINED: Outcome =
        Outcome { reason: "err: sts-pod-status-not-determined", status: 500 };
    /// The eviction would break the budget (or lost a race for it): retry later.
    pub const DENIED: Outcome = Outcome { reason: "denied", status: 429 };
    pub const ALLOWED: Outcome = Outcome { reason: "allowed", status: 200 };
    /// Ours: the budgets are not known yet (the watch has not listed them) or cannot be read.
    pub const CFG_NOT_LOADED: Outcome = Outcome { reason: "cfg-not-loaded", status: 429 };
    pub const CFG_NOT_READABLE: Outcome = Outcome { reason: "cfg-not-loaded", status: 500 };
    /// Ours: the eviction intent could not be written on the pod (other than for lack of permission).
    pub const INTENT_NOT_RECORDED: Outcome = Outcome { reason: "intent-not-recorded", status: 500 };

    /// Every outcome the eviction decision can give, for metrics created up front and for tests.
    pub const ALL: [Outcome; 15] = [
        Outcome::INVALID_REQUEST,
        Outcome::POD_NOT_FOUND,
        Outcome::POD_NOT_READY,
        Outcome::CFG_NOT_FOUND,
        Outcome::POD_NOT_IN_SCOPE,
        Outcome::STS_NOT_FOUND,
        Outcome::MAX_UNAVAILABLE_0,
        Outcome::MIN_STS_NOT_FOUND,
        Outcome::PARTITION_NOT_IDENTIFIED,
        Outcome::POD_STATUS_NOT_DETERMINED,
        Outcome::DENIED,
        Outcome::ALLOWED,
        Outcome::CFG_NOT_LOADED,
        Outcome::CFG_NOT_READABLE,
        Outcome::INTENT_NOT_RECORDED,
    ];

    pub fn allowed(self) -> bool {
        self.status == 200
    }
}

/// The answer to an eviction, with its outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvictionVerdict {
    pub verdict: Verdict,
    pub outcome: Outcome,
    /// A denial of the rollout controller's deletion: what holds it back, for people (`None` otherwise; boxed, as
    /// it is rare and the verdict travels in `Result`s).
    pub holder: Option<Box<Holder>>,
}

/// What holds back a deletion of the rollout controller's that the budgets denied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Holder {
    /// The budget that denied it, once found.
    pub budget: Option<String>,
    /// Denied by an exceeded budget: the pods it counted as unavailable.
    pub unavailable: Vec<String>,
}

impl EvictionVerdict {
    /// A denial: `message` in `status.message`, the outcome's status in `status.code`.
    pub fn deny(outcome: Outcome, message: impl Into<String>) -> Self {
        EvictionVerdict { verdict: Verdict::deny(message).with_code(outcome.status), outcome, holder: None }
    }

    pub fn allow(outcome: Outcome) -> Self {
        EvictionVerdict { verdict: Verdict::allow(), outcome, holder: None }
    }

    pub fn allow_with_message(outcome: Outcome, message: impl Into<String>) -> Self {
        EvictionVerdict { verdict: Verdict::allow_with_message(message), outcome, holder: None }
    }

    pub fn allow_with_warning(outcome: Outcome, warning: impl Into<String>) -> Self {
        EvictionVerdict { verdict: Verdict::allow_with_warning(warning), outcome, holder: None }
    }

    pub fn allowed(&self) -> bool {
        self.verdict.allowed
    }

    /// `status.message`, or `""`.
    pub fn message(&self) -> &str {
        self.verdict.message.as_deref().unwrap_or_default()
    }
}

/// The `maxUnavailable` an eviction is judged against (reference 5.4 step 7): the budget's count; else its
/// percentage of the owner's replicas (`min(spec, status)`, at least 1 unless there are none); when that is 0, the
/// controller's override (its `rollout-max-unavailable`, so rollouts go on under a budget that forbids voluntary
/// evictions).
pub fn max_unavailable(config: &ZpdbConfig, owner: &StatefulSetView, override_zero: Option<u32>) -> u32 {
    let value = if config.max_unavailable > 0 {
        u32::try_from(config.max_unavailable).unwrap_or(u32::MAX)
    } else if config.max_unavailable_percentage > 0 && owner.replicas > 0 {
        let replicas = owner.replicas.min(owner.status.as_ref().map_or(0, |s| s.replicas));
        if replicas == 0 {
            0
        } else {
            let share = u64::from(replicas) * config.max_unavailable_percentage.unsigned_abs() / 100;
            u32::try_from(share).unwrap_or(u32::MAX).max(1)
        }
    } else {
        0
    };
    if value == 0 { override_zero.unwrap_or(0) } else { value }
}

/// One StatefulSet's count: pods looked at, pods (other than the evicted one) not ready, expected pods missing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub tested: u32,
    pub not_ready: u32,
    pub unknown: u32,
}

impl Tally {
    pub fn disrupted(&self) -> u32 {
        self.not_ready.saturating_add(self.unknown)
    }
}

/// `1 pod not ready, 2 pods unknown in <span>` (reference 5.4): each part only when its count is not zero.
pub fn describe(not_ready: u32, unknown: u32, span: &str) -> String {
    let pods = |n: u32| if n > 1 { "pods" } else { "pod" };
    let mut parts = Vec::new();
    if not_ready > 0 {
        parts.push(format!("{not_ready} {} not ready", pods(not_ready)));
    }
    if unknown > 0 {
        parts.push(format!("{unknown} {} unknown", pods(unknown)));
    }
    format!("{} in {span}", parts.join(", "))
}

/// Whether a pod's eviction is being allowed elsewhere (a live intent on it, or this process's memory), so it
/// counts as not ready. A test of the pod itself rather than a set of uids: a drain burst judges every pod of the
/// group against hundreds of pending evictions.
pub type Pending<'a> = &'a dyn Fn(&BudgetPod) -> bool;

/// Partition mode: how a zone with no pod of the evicted pod's partition counts, when the zone has every pod it is
/// expected to have (else the missing ones count as unknown anyway): it is scaled below the partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AbsentPeer {
    /// One unknown (the reference's rule since v0.35.0): a drain waits until the zones are scaled alike. Evictions.
    Unknown,
    /// Nothing, as long as another pod of the partition stays available in some other zone; else one unknown, as
    /// the reference. The controller's deletions: a rollout holds the other zones' downscales (no downscale while a
    /// zone has non-updated replicas), so waiting for the zones to be scaled alike would wait for good, while a
    /// partition is never left without an available pod by a restart.
    UnknownForTheLastPod,
}

/// Everything an eviction is judged on.
#[derive(Clone, Copy)]
pub struct Judged<'a> {
    pub config: &'a ZpdbConfig,
    /// The evicted pod's StatefulSet, read live.
    pub owner: &'a StatefulSetView,
    /// The StatefulSets the budget selects, in the order the API lists them (by name).
    pub statefulsets: &'a [StatefulSetView],
    /// The pods the budget selects.
    pub pods: &'a [BudgetPod],
    pub evicted: &'a BudgetPod,
    /// Partition mode: the evicted pod's partition.
    pub partition: Option<&'a str>,
    pub max_unavailable: u32,
    /// Pods whose eviction is being allowed elsewhere: they count as not ready (the evicted pod itself is never
    /// asked about).
    pub pending: Pending<'a>,
    /// Partition mode: how a zone with no pod of the partition counts.
    pub absent_peer: AbsentPeer,
    pub now: Timestamp,
}

/// Where a budget is exceeded: the zone (StatefulSet) or the partition whose pods it counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Span {
    Zone(String),
    Partition(String),
}

/// Why the budget does not allow the eviction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Breach {
    /// The budget would be exceeded: the message is the reference's (`1 pod not ready in ingester-zone-b`).
    Exceeded { message: String, span: Span },
    /// Zone mode, the pod's StatefulSet is not among those the budget selects (the reference crashes here).
    OwnerNotSelected(String),
}

impl Breach {
    pub fn verdict(self) -> EvictionVerdict {
        match self {
            Breach::Exceeded { message, .. } => EvictionVerdict::deny(Outcome::DENIED, message),
            Breach::OwnerNotSelected(message) => EvictionVerdict::deny(Outcome::STS_NOT_FOUND, message),
        }
    }
}

/// Judges an eviction (reference 5.4 steps 10-11): `Ok` with the success message, or the breach.
pub fn judge(input: &Judged<'_>) -> Result<String, Breach> {
    match (&input.config.partition, input.partition) {
        (Some(_), Some(partition)) => judge_partition(input, partition),
        _ => judge_zones(input),
    }
}

pub(super) fn same_statefulset(a: &StatefulSetView, b: &StatefulSetView) -> bool {
    if a.uid.is_empty() || b.uid.is_empty() { a.name == b.name } else { a.uid == b.uid }
}

/// Counts one StatefulSet's pods: those `counted` are tested and, unless they are the evicted pod, not ready when
/// `ready` says so; expected ordinals without a pod are unknown (whatever `counted` says: missing pods cannot be
/// told apart by partition, so they all count).
fn tally(
    input: &Judged<'_>,
    sts: &StatefulSetView,
    counted: impl Fn(&BudgetPod) -> bool,
    ready: impl Fn(&BudgetPod, &StatefulSetView) -> bool,
) -> Tally {
    tally_naming(input, sts, counted, ready, None)
}

/// Most missing pods [`tally_naming`] names one by one (a StatefulSet may claim up to 2^31 - 1 replicas); the rest
/// are counted in one more name.
const MAX_NAMED_MISSING: u32 = 1000;

/// [`tally`], also naming the pods counted (`<pod>`, or `<pod> (missing)` for an expected ordinal without one) when
/// `names` is given: only when a denial is told to people, never on the hot path of a drain burst.
fn tally_naming(
    input: &Judged<'_>,
    sts: &StatefulSetView,
    counted: impl Fn(&BudgetPod) -> bool,
    ready: impl Fn(&BudgetPod, &StatefulSetView) -> bool,
    mut names: Option<&mut Vec<String>>,
) -> Tally {
    let expected = sts.replicas.max(sts.status.as_ref().map_or(0, |s| s.replicas));
    // The expected ordinals seen, each once: sized by the pods there are, never by the replicas the StatefulSet claims
    // (an int32: a bitmap of them would be 256 MiB per decision).
    let mut seen = Vec::new();
    let mut tally = Tally::default();
    for pod in input.pods.iter().filter(|p| sts.owns(&p.pod)) {
        if let Some(ordinal) = pod_ordinal(&sts.name, pod.name()).filter(|o| *o < expected) {
            seen.push(ordinal);
        }
        if counted(pod) {
            tally.tested += 1;
            if pod.uid() != input.evicted.uid() && !ready(pod, sts) {
                tally.not_ready += 1;
                if let Some(names) = names.as_deref_mut() {
                    names.push(pod.name().to_string());
                }
            }
        }
    }
    seen.sort_unstable();
    seen.dedup();
    tally.unknown = expected.saturating_sub(seen.len() as u32);
    if let Some(names) = names.filter(|_| tally.unknown > 0) {
        // The missing ordinals in order, walking past the ones seen: at most MAX_NAMED_MISSING, then the count.
        let mut present = seen.iter().copied().peekable();
        let mut named = 0;
        let mut ordinal = 0;
        while ordinal < expected && named < MAX_NAMED_MISSING {
            if present.next_if_eq(&ordinal).is_none() {
                names.push(format!("{}-{ordinal} (missing)", sts.name));
                named += 1;
            }
            ordinal += 1;
        }
        if tally.unknown > named {
            names.push(format!("{} more missing pods up to {}-{}", tally.unknown - named, sts.name, expected - 1));
        }
    }
    tally
}

/// Zone mode: any disruption in another zone blocks; in the pod's own zone, the pods already unavailable plus this
/// one may not exceed `maxUnavailable`.
/// Zone mode's readiness: available, and not being evicted elsewhere.
fn zone_ready<'a>(input: &'a Judged<'a>) -> impl Fn(&BudgetPod, &StatefulSetView) -> bool + 'a {
    move |pod: &BudgetPod, sts: &StatefulSetView| {
        pod.pod.is_available(sts.min_ready_seconds, input.now) && !(input.pending)(pod)
    }
}

fn exceeded(counted: Tally, span: Span) -> Breach {
    let name = match &span {
        Span::Zone(sts) => sts.clone(),
        Span::Partition(partition) => format!("partition {partition}"),
    };
    Breach::Exceeded { message: describe(counted.not_ready, counted.unknown, &name), span }
}

/// The pods a breach counted as unavailable in its span (other than the evicted pod), for people: each pod's name,
/// or `<pod> (missing)` for an expected ordinal without a pod. A partition's zones without any pod of it are not
/// named.
pub fn unavailable_pods(input: &Judged<'_>, span: &Span) -> Vec<String> {
    let mut names = Vec::new();
    match span {
        Span::Zone(name) => {
            if let Some(sts) = input.statefulsets.iter().find(|s| &s.name == name) {
                tally_naming(input, sts, |_| true, zone_ready(input), Some(&mut names));
            }
        }
        Span::Partition(partition) => {
            let Some(rule) = &input.config.partition else { return names };
            let same = |pod: &BudgetPod| rule.partition_of(pod.name()).as_deref() == Some(partition.as_str());
            for sts in input.statefulsets.iter().filter(|s| !same_statefulset(s, input.owner)) {
                tally_naming(input, sts, same, partition_ready(input), Some(&mut names));
            }
        }
    }
    names
}

fn judge_zones(input: &Judged<'_>) -> Result<String, Breach> {
    let ready = zone_ready(input);
    // The other zones first, in the list's order, stopping at the first disrupted one (the usual answer during a
    // drain burst); the pod's own zone is counted only when they all are whole.
    for sts in input.statefulsets.iter().filter(|s| !same_statefulset(s, input.owner)) {
        let counted = tally(input, sts, |_| true, &ready);
        if counted.disrupted() > 0 {
            return Err(exceeded(counted, Span::Zone(sts.name.clone())));
        }
    }
    let own = input.statefulsets.iter().find(|s| same_statefulset(s, input.owner));
    let Some(own) = own.map(|sts| tally(input, sts, |_| true, &ready)) else {
        return Err(Breach::OwnerNotSelected(format!(
            "the pod's StatefulSet {} is not selected by ZoneAwarePodDisruptionBudget {} (selector {:?}), so its \
             zone cannot be judged; make the budget's selector match the StatefulSet's labels too",
            input.owner.name,
            input.config.name,
            input.config.label_selector()
        )));
    };
    if own.disrupted() >= input.max_unavailable {
        return Err(exceeded(own, Span::Zone(input.owner.name.clone())));
    }
    Ok(format!("zpdb met across {} zones", input.statefulsets.len()))
}

/// Partition mode: across the other zones, the pods of the same partition that are unavailable (a zone with no
/// pod of the partition counts one unknown) may not reach `maxUnavailable`. A pod counts as ready only once it has
/// been ready for `crossZoneEvictionDelay` by its `grafana.com/ready-time`, or without one by its Ready condition.
/// Partition mode's readiness: available, not being evicted elsewhere, and ready for `crossZoneEvictionDelay`.
fn partition_ready<'a>(input: &'a Judged<'a>) -> impl Fn(&BudgetPod, &StatefulSetView) -> bool + 'a {
    let delay = input.config.cross_zone_eviction_delay;
    move |pod: &BudgetPod, sts: &StatefulSetView| {
        if !pod.pod.is_available(sts.min_ready_seconds, input.now) || (input.pending)(pod) {
            return false;
        }
        if delay.is_zero() {
            return true;
        }
        // The stamp when there is one (the reference's rule). Without one, the Ready condition's last transition:
        // the kubelet's record of the same moment, so a pod the tracker cannot stamp (a chart without `patch` on
        // pods, a failing tracker) is not counted unready forever, which stalled every eviction and rollout
        // deletion of a partition budget with a delay. A stamp that is there but unreadable: not ready yet.
        let since = match pod.ready_time.as_deref() {
            Some(stamp) => parse_timestamp(stamp).ok(),
            None => pod.pod.ready_condition.as_ref().filter(|c| c.ready).and_then(|c| c.since),
        };
        since.is_some_and(|since| input.now > time_after(since, delay))
    }
}

fn judge_partition(input: &Judged<'_>, partition: &str) -> Result<String, Breach> {
    let Some(rule) = &input.config.partition else { return judge_zones(input) };
    let ready = partition_ready(input);
    // A partition is a capture of the pod's name, so a name that does not contain it cannot be of it: that test
    // spares most of the regular expression runs (a drain burst judges every pod of the group hundreds of times).
    let same_partition =
        |pod: &BudgetPod| pod.name().contains(partition) && rule.partition_of(pod.name()).as_deref() == Some(partition);
    let mut sum = Tally::default();
    // Zones with no peer of this partition at all (e.g. already scaled down past it).
    let mut absent = 0;
    for sts in input.statefulsets.iter().filter(|s| !same_statefulset(s, input.owner)) {
        let counted = tally(input, sts, same_partition, &ready);
        sum.tested += counted.tested;
        sum.not_ready += counted.not_ready;
        sum.unknown += counted.unknown;
        if counted == Tally::default() {
            absent += 1;
        }
    }
    let others_available = sum.tested.saturating_sub(sum.not_ready);
    if input.absent_peer == AbsentPeer::Unknown || others_available == 0 {
        sum.unknown += absent;
    }
    if sum.disrupted() >= input.max_unavailable {
        return Err(exceeded(sum, Span::Partition(partition.to_string())));
    }
    Ok(format!("zpdb met for partition {partition} across {} zones", input.statefulsets.len()))
}
