//! One simulated run: builds the cluster (API server node, StatefulSet controller + kubelet node, controller node),
//! plays the user (template pushes, also mid-rollout; pauses) and the faults (partitions, message loss, latency and
//! watch-delay spikes, API server restarts, controller crashes, including right after a deletion, watch expiry and
//! "too old resource version", pod crash loops, pods that stay unready, refused pod creation) for the fault phase,
//! then heals everything and checks that the group converges in bounded simulated time. With a [`ScalingScenario`],
//! the group scales leader/follower and a user changes the leader's replicas through the webhook's record claim or
//! (with [`Admission::Webhook`]) through the real prepare-downscale webhook router on two simulated operator replicas.

use crate::apiserver::{self, Knobs, ServerEnv};
use crate::checker::Violation;
use crate::client::{BudgetFeed, SimCluster};
use crate::events::{EventStats, OperatorSetup};
use crate::kube::{self, KubeState};
use crate::objects::{self, revision_name};
use crate::rng::SimRng;
use crate::store::{SharedStore, Store};
use crate::trace::Trace;
use jiff::Timestamp;
use madsim::net::NetSim;
use madsim::runtime::{Handle, Runtime};
use rollout_core::downscale::ClaimEnd;
use rollout_core::downscale::Claimant;
use rollout_core::downscale::MarkedClaim;
use rollout_core::{Defences, GroupSnapshot, Planner, RolloutPlanner, StatefulSetView};
use rollout_operator::admission::no_downscale::{NO_DOWNSCALE_PATH, ParentLookups};
use rollout_operator::admission::prepare_downscale::PREPARE_DOWNSCALE_PATH;
use rollout_operator::admission::router::{WebhookSettings, Webhooks, router, system_clock};
use rollout_operator::cluster::zone_tracker::{claim_downscale_marked, finish_marked_claim};
use rollout_operator::operator::{BudgetSource, Operator, OperatorConfig};
use rollout_operator::ops::events::EventSettings;
use rollout_operator::ops::health::ReadyFlag;
use rollout_operator::ops::metrics::Metrics;
use rollout_operator::pods::client::{NoPodClient, PodCallError, PodHttpClient, PodMethod, PodRequest, PodResponse};
use rollout_operator::rollout::reconciler::ReconcilerConfig;
use rollout_operator::rollout::scaling::ScalingConfig;
use rollout_operator::zpdb::Zpdb;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tower::ServiceExt;

pub const GROUP: &str = "ingester";
/// After converging, the controller must make no write for this long.
const QUIET: Duration = Duration::from_secs(120);

/// Which planner the controller runs: the production one, or a test-only one re-introducing a known bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlannerKind {
    Real,
    StatusCountReadiness,
    PausedLetsOthersProceed,
    NoExpectations,
    TerminatingCountsAsReady,
    /// Leader/follower downscales without the min-time check and without claiming them in the downscale record.
    SkipsMinTimeCheck,
    /// Replaces pods while the prepare-downscale webhook's in-progress marker of the group is live.
    IgnoresDownscalesInProgress,
    /// Downscales followers while another StatefulSet of the group is rolling or has unavailable pods.
    DownscalesDuringRollouts,
    /// Reads a percentage `rollout-max-unavailable` as a count.
    PercentAsCount,
    /// Counts a pod as available as soon as it is Ready, ignoring `minReadySeconds`.
    IgnoresMinReadySeconds,
    /// Plans on a status that does not describe the latest spec (`status.observedGeneration` ignored).
    IgnoresObservedGeneration,
    /// The min time between zone downscales checked against last downscales dated a second early (an off-by-one
    /// in rounding to seconds).
    MinTimeSecondEarly,
    /// Missing pods spend no unavailability budget (model/known-bugs).
    MissingPodsSpendNoBudget,
    /// A Ready pod above `spec.replicas` (condemned by a scale-down) stands in for a missing kept pod, as readiness
    /// counted by number once did (sim seeds 62 and 112).
    CondemnedPodFillsMissingSlot,
    /// A pod counts as available on its Ready condition alone, whatever its containers say.
    IgnoresContainerReadiness,
    /// `grafana.com/rollout-upscale-only-when-leader-ready` ignored: followers scale up at once.
    UpscalesBeforeLeaderReady,
    /// The rollout step is finished after a deletion whose answer was lost, while it may still commit.
    FinishesStepWhileOutcomeUnknown,
}

impl PlannerKind {
    pub const ALL: [PlannerKind; 17] = [
        PlannerKind::Real,
        PlannerKind::StatusCountReadiness,
        PlannerKind::PausedLetsOthersProceed,
        PlannerKind::NoExpectations,
        PlannerKind::TerminatingCountsAsReady,
        PlannerKind::SkipsMinTimeCheck,
        PlannerKind::IgnoresDownscalesInProgress,
        PlannerKind::DownscalesDuringRollouts,
        PlannerKind::PercentAsCount,
        PlannerKind::IgnoresMinReadySeconds,
        PlannerKind::IgnoresObservedGeneration,
        PlannerKind::MinTimeSecondEarly,
        PlannerKind::MissingPodsSpendNoBudget,
        PlannerKind::CondemnedPodFillsMissingSlot,
        PlannerKind::IgnoresContainerReadiness,
        PlannerKind::UpscalesBeforeLeaderReady,
        PlannerKind::FinishesStepWhileOutcomeUnknown,
    ];

    pub fn name(self) -> &'static str {
        match self {
            PlannerKind::Real => "real",
            PlannerKind::StatusCountReadiness => "status-count-readiness",
            PlannerKind::PausedLetsOthersProceed => "paused-lets-others-proceed",
            PlannerKind::NoExpectations => "no-expectations",
            PlannerKind::TerminatingCountsAsReady => "terminating-counts-as-ready",
            PlannerKind::SkipsMinTimeCheck => "skips-min-time-check",
            PlannerKind::IgnoresDownscalesInProgress => "ignores-downscales-in-progress",
            PlannerKind::DownscalesDuringRollouts => "downscales-during-rollouts",
            PlannerKind::PercentAsCount => "percent-as-count",
            PlannerKind::IgnoresMinReadySeconds => "ignores-min-ready-seconds",
            PlannerKind::IgnoresObservedGeneration => "ignores-observed-generation",
            PlannerKind::MinTimeSecondEarly => "min-time-second-early",
            PlannerKind::MissingPodsSpendNoBudget => "missing-pods-spend-no-budget",
            PlannerKind::CondemnedPodFillsMissingSlot => "condemned-pod-fills-missing-slot",
            PlannerKind::IgnoresContainerReadiness => "ignores-container-readiness",
            PlannerKind::UpscalesBeforeLeaderReady => "upscales-before-leader-ready",
            PlannerKind::FinishesStepWhileOutcomeUnknown => "finishes-step-while-outcome-unknown",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == s)
    }
}

/// Which faults a run may inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultMix {
    pub partitions: bool,
    pub message_loss: bool,
    pub latency_spikes: bool,
    pub watch_delay_spikes: bool,
    pub apiserver_restarts: bool,
    pub controller_crashes: bool,
    pub crash_after_delete: bool,
    pub watch_expiry: bool,
    pub pod_crashes: bool,
    pub never_ready: bool,
    pub quota: bool,
    pub pauses: bool,
}

impl FaultMix {
    pub const ALL: FaultMix = FaultMix {
        partitions: true,
        message_loss: true,
        latency_spikes: true,
        watch_delay_spikes: true,
        apiserver_restarts: true,
        controller_crashes: true,
        crash_after_delete: true,
        watch_expiry: true,
        pod_crashes: true,
        never_ready: true,
        quota: true,
        pauses: true,
    };
    pub const NONE: FaultMix = FaultMix {
        partitions: false,
        message_loss: false,
        latency_spikes: false,
        watch_delay_spikes: false,
        apiserver_restarts: false,
        controller_crashes: false,
        crash_after_delete: false,
        watch_expiry: false,
        pod_crashes: false,
        never_ready: false,
        quota: false,
        pauses: false,
    };
}

impl FaultMix {
    /// `all`, `none`, or a comma-separated list of fault kinds (names as in `--help`).
    pub fn parse(s: &str) -> Result<FaultMix, String> {
        match s {
            "all" => return Ok(FaultMix::ALL),
            "none" => return Ok(FaultMix::NONE),
            _ => {}
        }
        let mut f = FaultMix::NONE;
        for name in s.split(',').map(str::trim) {
            let flag = match name {
                "partitions" => &mut f.partitions,
                "loss" => &mut f.message_loss,
                "latency" => &mut f.latency_spikes,
                "watch-delay" => &mut f.watch_delay_spikes,
                "apiserver-restarts" => &mut f.apiserver_restarts,
                "controller-crashes" => &mut f.controller_crashes,
                "crash-after-delete" => &mut f.crash_after_delete,
                "watch-expiry" => &mut f.watch_expiry,
                "pod-crashes" => &mut f.pod_crashes,
                "never-ready" => &mut f.never_ready,
                "quota" => &mut f.quota,
                "pauses" => &mut f.pauses,
                other => return Err(format!("unknown fault kind {other:?}")),
            };
            *flag = true;
        }
        Ok(f)
    }
}

#[derive(Debug, Clone)]
pub struct Scenario {
    pub zones: u32,
    pub replicas: u32,
    pub max_unavailable: u32,
    /// Template revisions the user pushes during the fault phase.
    pub revisions: u32,
    pub fault_phase: Duration,
    /// After the faults stop, the group must converge within this.
    pub settle_deadline: Duration,
    /// Faults injected over the fault phase (each of a kind chosen from the mix).
    pub fault_count: (u64, u64),
    pub faults: FaultMix,
    pub planner: PlannerKind,
    /// Leader/follower scaling in play (`None`: every StatefulSet keeps its replicas).
    pub scaling: Option<ScalingScenario>,
    /// Each template push changes one zone only (picked at random; a per-zone deploy), so the other zones stay
    /// updated while it rolls: the window in which the webhook may admit a downscale of the rolling zone.
    pub one_zone_pushes: bool,
    /// Run as a real deployment runs: its RBAC (the API server answers 403 to anything else) and its zone-tracker
    /// setting. `None`: every permission, with the zone tracker.
    pub deployment: Option<ReferenceDeployment>,
    /// Overrides the deployment's `-use-zone-tracker` (a misconfiguration: the tracker on where RBAC grants no
    /// configmaps).
    pub zone_tracker: Option<bool>,
    /// `rollout-max-unavailable` as written on the StatefulSets (e.g. `40%`), instead of `max_unavailable`.
    pub max_unavailable_annotation: Option<String>,
    /// `spec.minReadySeconds` of the StatefulSets.
    pub min_ready_seconds: u32,
    /// The webhook users send half their changes as `/scale` updates: half of those as `kubectl scale` does (a PATCH,
    /// which the API server re-applies after a conflict), half as an HPA does (a PUT carrying the resourceVersion it
    /// read, refused with 409 on a moved object and sent again after 15 s). See [`crate::webhook_user`].
    pub scale_requests: bool,
    /// The StatefulSet controller acts on a new generation only once it has observed it, and during the fault phase
    /// half the observations take 5-60 s instead of 0.2-3 s: the controller sees statuses that do not describe the
    /// latest spec for a while (`status.observedGeneration` behind `metadata.generation`).
    pub observe_lag: bool,
    /// Each template push comes at one of the leader's replica changes (from 5 s before to 40 s after it, when a
    /// follower's scaling is due), so rollouts and follower scaling interleave on the same StatefulSets.
    pub pushes_at_scaling: bool,
    /// Half the template pushes are reverted 2-20 s later (every zone taken back to the revision before, as a user
    /// undoing a bad deploy): a StatefulSet whose rollout had not finished is then back at `currentRevision =
    /// updateRevision` with pods on the reverted revision to replace.
    pub reverts: bool,
    /// Two or three times during the fault phase a user relabels a running pod out of its StatefulSet's selector for
    /// 10-40 s (to debug it out of service) and back: the StatefulSet controller releases it, cannot recreate its
    /// ordinal while the name is taken, and adopts it again once it matches. Until then it is not the StatefulSet's.
    pub relabels: bool,
    /// With `scaling` and the zone tracker: twice, while a rollout is under way, a user edits the zone tracker's
    /// record badly (a `lastDownscaled` that is no time) and repairs it 30-60 s later. The group's rollout does not
    /// need the record (no prepare-downscale webhook serves it), so it goes on while the record is unreadable.
    pub corrupt_record: bool,
    /// With followers: the last zone carries no `grafana.com/min-time-between-zones-downscale` (a forgotten
    /// annotation). As the reference, the controller then refuses to scale it down once another zone has a recorded
    /// downscale ("missing label on follower"); it still follows the leader up.
    pub follower_without_min_time: bool,
    /// `-events.enabled`: the controller records Events (off by default: every seed pinned before Events existed
    /// replays the world it was found in; the Event recorder's tasks and requests change the interleaving).
    pub events: bool,
    /// Someone else deletes pods during the fault phase (a node drain's evictions, `kubectl delete pod`): one every
    /// 5-30 s, a pod of a random zone below its `spec.replicas`; the StatefulSet controller recreates it under the
    /// same name. Drawn from a generator of its own, so the run's other draws are those of the world without it.
    pub evictions: bool,
    /// Every API request of the prepare-downscale webhook's admissions first waits 0.2-0.8 s (an operator replica on
    /// a busy node): the webhook's reads, its claim and its re-read spread over seconds, while the controller's
    /// rollout steps take milliseconds.
    pub slow_admissions: bool,
    /// During an API latency spike a request may wait 8-20 s before the API server carries it out, past the client's
    /// 10 s timeout: a write whose answer never came commits later (a slow etcd), as a deletion sent under a rollout
    /// step's claim may after its pass ended.
    pub slow_commits: bool,
    /// A second rollout group in the namespace (`store-gateway`, as many zones and pods as the first), pushed with
    /// every template push of the first: the cache, the work queue and the checker keep groups apart.
    pub second_group: bool,
    /// Every pod has a sidecar container, and during the fault phase one every 10-40 s crashes for 5-30 s while the
    /// kubelet still reports the pod Ready (the condition lags behind the container): a Ready pod that does not
    /// serve. Drawn from a generator of its own.
    pub sidecars: bool,
    /// With `--scaling`: the followers carry `grafana.com/rollout-upscale-only-when-leader-ready: "true"`.
    pub leader_ready_upscales: bool,
    /// With followers: at a random time of the fault phase the user sets `grafana.com/rollout-force-replicas` on
    /// zone-b (a follower) to one more or one less than the leader then has; zone-b must then be held at it (the
    /// reference applies it at once, without the min time). Drawn from a generator of its own.
    pub force_follower: bool,
    /// Without scaling annotations: at a random time of the fault phase the user sets
    /// `grafana.com/rollout-force-replicas` on the last zone to one more or one less than it has (a stale annotation,
    /// say, left from an earlier setup); as in the reference, it is ignored on a StatefulSet that is neither follower
    /// nor mirror, so the zone keeps its replicas ([`crate::checker::FORCE_IGNORED`]). Drawn from a generator of its
    /// own.
    pub force_plain: bool,
    /// With scaling: zone-b carries `grafana.com/last-downscale` dated at the start (a downscale just before the
    /// operator started, or before the zone tracker was switched on), and zone-a's user asks for a downscale within
    /// the min time of it: the record must be bootstrapped from the annotation.
    pub recent_downscale: bool,
    /// The namespace also holds a Deployment and a StatefulSet labelled `grafana.com/no-downscale: "true"` and an
    /// unlabelled ReplicaSet, and a user changes their replicas 8-20 times during the fault phase through the real
    /// no-downscale webhook, as object UPDATEs and as `/scale` updates (the webhook then reads the parent live).
    pub no_downscale: bool,
    /// Every zone mirrors its replicas from a ReplicaTemplate (`grafana.com/rollout-mirror-replicas-from-resource-*`:
    /// API discovery, the `scale` subresource, the status write-back), whose `spec.replicas` a user (an HPA) changes
    /// 6-14 times in the fault phase.
    pub mirror: bool,
    /// With `mirror`: the StatefulSets' `grafana.com/rollout-mirror-replicas-from-resource-write-back` as written
    /// (absent: write back, as in the reference). The checker reads it as Go's `strconv.ParseBool` does, an
    /// unparsable value meaning no write-back.
    pub mirror_write_back: Option<&'static str>,
    /// With `mirror`: `grafana.com/rollout-delayed-downscale: 20s` and the pods' prepare URL; the simulated pods
    /// answer the controller's POST (prepare) and DELETE (cancel), a few failing.
    pub delayed_downscale: bool,
    /// With `delayed_downscale`: each zone's annotations are written one of [`DELAY_TEXTS`]' ways (a valid delay, a
    /// zero that turns the feature off, or a malformed delay or URL that a user corrects 20-120 s in).
    pub delay_annotations: bool,
    /// With `delayed_downscale`: delays far longer than the run, written in weeks and years (`1w`, `1y`), and a user
    /// who began the reference's downscale three days before the run, its pods preparing since; or a delay beyond
    /// what Prometheus can hold (`300y`), which the reference refuses until a user corrects it. Such a delay never
    /// elapses within the run, so no pod of those zones may go (the unit lengths, read wrong, would let them).
    pub long_delays: bool,
    /// The defences in depth the controller and the webhooks run with (all of them but in the tests that show each
    /// layer alone, `rollout_core::defences`).
    pub defences: Defences,
    /// A ZoneAwarePodDisruptionBudget over the group, operator replicas serving the real pod-eviction
    /// webhook, and node drains evicting pods through the API server during the fault phase. Drawn from a generator
    /// of its own.
    pub drains: Option<crate::drains::Drains>,
    /// Operator replicas on nodes of their own electing a leader (`crate::ha`), instead of the one
    /// controller node; the faults hit the replicas, which are also paused longer than the lease, killed while
    /// leading, and run clocks with offsets and rates of their own. Drawn from a generator of its own.
    pub ha: Option<crate::ha::Ha>,
}

/// How the reference is really deployed (its Helm charts' and jsonnet's RBAC and zone-tracker setting), as far as
/// the simulation is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReferenceDeployment {
    /// Grafana's Helm chart 0.50.1: no configmaps, so no zone tracker (`-use-zone-tracker` left at false).
    HelmChart,
    /// The reference's jsonnet v0.38.1: `-use-zone-tracker=true`, configmaps granted.
    Jsonnet,
    /// The older chart mimir-distributed pins (0.37.1 / 0.40.0): pods without `patch`, no configmaps, no zone
    /// tracker. Eviction intents on pods are refused, so they go on the StatefulSets (which it lets us patch);
    /// ready-time stamps are refused.
    HelmOld,
    /// The chart mimir-distributed pins without `patch` on StatefulSets either: the pod and StatefulSet verbs of
    /// Loki's chart 0.24.0, with the ZoneAwarePodDisruptionBudget and webhook grants Loki's chart lacks (so no
    /// reference deployment as a whole; a hand-written Role may grant this). Eviction intents have nowhere to go, so each operator replica serialises its
    /// own eviction decisions in process and remembers the pods it let go (the degraded mode of the optional
    /// "pod annotations" feature); with one replica serving the webhook that still keeps the budget.
    NoPatch,
    /// The reference's jsonnet with the zone tracker's ConfigMaps readable only (`get`, the one read the tracker
    /// makes; a read-only grant such as the built-in `view` ClusterRole's, which adds list and watch): the record is
    /// read, every write of it (a claim, a rollout step) is refused. No reference deployment; the misconfiguration in
    /// which a refused write, not a refused read, must switch the tracker's coordination off.
    TrackerReadOnly,
}

impl ReferenceDeployment {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "helm" => Some(ReferenceDeployment::HelmChart),
            "jsonnet" => Some(ReferenceDeployment::Jsonnet),
            "helm-old" => Some(ReferenceDeployment::HelmOld),
            "no-patch" => Some(ReferenceDeployment::NoPatch),
            "tracker-read-only" => Some(ReferenceDeployment::TrackerReadOnly),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ReferenceDeployment::HelmChart => "helm",
            ReferenceDeployment::Jsonnet => "jsonnet",
            ReferenceDeployment::HelmOld => "helm-old",
            ReferenceDeployment::NoPatch => "no-patch",
            ReferenceDeployment::TrackerReadOnly => "tracker-read-only",
        }
    }

    pub fn grants(self) -> rollout_operator::kube::reference_deployments::Grants {
        match self {
            ReferenceDeployment::HelmChart => rollout_operator::kube::reference_deployments::hc_0_50_1(),
            ReferenceDeployment::Jsonnet => rollout_operator::kube::reference_deployments::js_v0_38_1(),
            ReferenceDeployment::HelmOld => rollout_operator::kube::reference_deployments::hc_old_mh(),
            ReferenceDeployment::NoPatch => {
                with_verbs(rollout_operator::kube::reference_deployments::hc_old_mh(), "statefulsets", |verb| {
                    verb != "patch"
                })
            }
            ReferenceDeployment::TrackerReadOnly => {
                with_verbs(rollout_operator::kube::reference_deployments::js_v0_38_1(), "configmaps", |verb| {
                    verb == "get"
                })
            }
        }
    }

    pub fn zone_tracker(self) -> bool {
        matches!(self, ReferenceDeployment::Jsonnet | ReferenceDeployment::TrackerReadOnly)
    }
}

/// `grants` with the Role's rule for `resource` alone keeping only the verbs `keep` accepts.
fn with_verbs(
    mut grants: rollout_operator::kube::reference_deployments::Grants,
    resource: &str,
    keep: impl Fn(&str) -> bool,
) -> rollout_operator::kube::reference_deployments::Grants {
    for rule in &mut grants.role {
        if rule.resources.as_deref() == Some(&[resource.to_string()][..]) {
            rule.verbs.retain(|verb| keep(verb));
        }
    }
    grants
}

impl Scenario {
    /// The zone tracker's ConfigMap, when this world runs with the zone tracker.
    pub fn zone_tracker_config_map(&self) -> Option<String> {
        let tracker = self.zone_tracker.unwrap_or(self.deployment.is_none_or(ReferenceDeployment::zone_tracker));
        tracker.then(|| ScalingConfig::default().zone_tracker_config_map.unwrap_or_default())
    }
}

/// Leader/follower scaling: zone-a leads, zone-b and zone-c follow it (`grafana.com/rollout-downscale-leader`), every
/// StatefulSet carries `grafana.com/min-time-between-zones-downscale`, and a user (or HPA) changes the leader's
/// replicas at random times of the fault phase. The user's downscales go through the prepare-downscale webhook's
/// claim in the group downscale record (`claim_downscale_marked` over a cluster client of its own); a refused or failed
/// claim denies the change. Upscales are applied as asked. No `grafana.com/rollout-force-replicas` (exempt from the
/// min time by design; the checker would exempt it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalingScenario {
    pub min_time: Duration,
    /// How many replica changes of the leader the user asks for (a range, inclusive).
    pub changes: (u64, u64),
    /// The replicas the user asks for (inclusive).
    pub replicas: (u32, u32),
    /// How the user's replica changes are admitted.
    pub admission: Admission,
    /// zone-b and zone-c follow zone-a (the user scales the leader only); otherwise every zone is scaled by a user
    /// (an HPA per zone) of its own, concurrently, and `changes` counts per zone.
    pub followers: bool,
    /// With followers and [`Admission::RecordClaim`]: after each follower downscale, the user also asks for a
    /// downscale of the leader at that commit plus the min time (give or take 1.5 s), so the min-time check is asked
    /// right at its boundary.
    pub boundary_probes: bool,
}

/// How the user's (or HPA's) replica changes are admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// A downscale is claimed in the group downscale record (`claim_downscale_marked`), as the webhook does.
    RecordClaim,
    /// Every change is an AdmissionReview (StatefulSet UPDATE) sent to the real admission router of one of two
    /// simulated operator replicas; the StatefulSets carry `grafana.com/prepare-downscale` and its path/port
    /// annotations, so a downscale prepares pods (simulated, sometimes slow, sometimes failing) and writes its
    /// in-progress marker into the record. The change is applied only if allowed.
    Webhook,
    /// Every change is applied as asked, with no claim and no min-time check: the leader is not served by the
    /// prepare-downscale webhook (not labelled for it, or the webhook not installed). Its followers' downscales are
    /// still the controller's to coordinate. Nothing records the leader's own downscales then, so no min time between
    /// them and the followers' is promised: the worlds use it only where the followers' claims are refused.
    Direct,
}

impl Default for ScalingScenario {
    fn default() -> Self {
        ScalingScenario {
            min_time: Duration::from_secs(30),
            changes: (6, 14),
            replicas: (1, 5),
            admission: Admission::RecordClaim,
            followers: true,
            boundary_probes: false,
        }
    }
}

impl Scenario {
    /// The scaling scenario: leader/follower scaling with the user changing the leader's replicas, the default
    /// fault mix, no template pushes (the controller only scales; invariant 3 and follower convergence are judged).
    pub fn scaling() -> Self {
        Scenario { scaling: Some(ScalingScenario::default()), revisions: 0, ..Scenario::default() }
    }

    /// Scaling while the user also pushes a template revision: scale-downs interleave with the rollout.
    pub fn scaling_during_rollout() -> Self {
        Scenario { revisions: 1, ..Scenario::scaling() }
    }

    /// The scaling scenario with the user's changes of the leader admitted by the real prepare-downscale webhook.
    pub fn scaling_admitted() -> Self {
        let scaling = ScalingScenario { admission: Admission::Webhook, ..ScalingScenario::default() };
        Scenario { scaling: Some(scaling), revisions: 0, ..Scenario::default() }
    }

    /// Rollouts with `spec.minReadySeconds: 10`: a pod counts as available only ten seconds after it became Ready.
    pub fn min_ready() -> Self {
        let base = Scenario::default();
        // Every pod replacement waits out the ten seconds once more: a longer liveness deadline.
        Scenario { min_ready_seconds: 10, settle_deadline: base.settle_deadline + Duration::from_secs(600), ..base }
    }

    /// Scaling during rollouts (two template revisions) with the StatefulSet controller slow to observe new
    /// generations: a push (or a replica change) stays unobserved for up to a minute, so the controller reads
    /// statuses behind their specs while it decides follower downscales and rollout steps.
    pub fn observe_lag() -> Self {
        Scenario { observe_lag: true, revisions: 2, ..Scenario::scaling() }
    }

    /// The min time's boundary in reach: leader/follower scaling with a 15 s min time, and after each follower
    /// downscale the user asks for a leader downscale at that commit plus 13.5-16.5 s.
    pub fn min_time_boundary() -> Self {
        let scaling =
            ScalingScenario { min_time: Duration::from_secs(15), boundary_probes: true, ..ScalingScenario::default() };
        Scenario { scaling: Some(scaling), ..Scenario::scaling() }
    }

    /// Followers rolled while they are scaled: three template revisions, each pushed to every zone at one of the
    /// leader's replica changes (from 5 s before to 40 s after it), so a follower's pods are being replaced while
    /// its replicas follow the leader's up or down.
    pub fn follower_rollouts_while_scaling() -> Self {
        Scenario { pushes_at_scaling: true, revisions: 3, ..Scenario::scaling() }
    }

    /// Rollouts of five pods per zone with `rollout-max-unavailable: 40%` (two pods at a time), so the percentage
    /// rule and pods replaced in parallel are in play.
    pub fn percentages() -> Self {
        Scenario { replicas: 5, max_unavailable_annotation: Some("40%".to_string()), ..Scenario::default() }
    }

    /// Rollouts (two template revisions) mixed with downscales admitted by the real prepare-downscale webhook: an
    /// HPA per zone changes its zone's replicas concurrently (no leader/follower), so admissions race each other
    /// and the controller's passes (the min time between zone downscales; no downscale during a rollout and no
    /// rollout step while a downscale is prepared).
    pub fn rollout_with_admitted_downscales() -> Self {
        let scaling = ScalingScenario {
            admission: Admission::Webhook,
            followers: false,
            min_time: Duration::from_secs(10),
            changes: (10, 20),
            ..ScalingScenario::default()
        };
        Scenario { scaling: Some(scaling), revisions: 4, one_zone_pushes: true, ..Scenario::default() }
    }
}

impl Scenario {
    /// The large rollout: 3 zones of 100 pods, max-unavailable 1, one template push, no faults; the pods'
    /// own replacement times are the kubelet's usual (termination 1-15 s, recreation 0.5-3 s, ready 2-15 s, one in
    /// seven 30-90 s). The controller's share of the rollout's duration is what the pods' own times do not explain.
    pub fn large() -> Self {
        Scenario {
            replicas: 100,
            revisions: 1,
            fault_phase: Duration::from_secs(60),
            settle_deadline: Duration::from_secs(4 * 3600),
            fault_count: (0, 0),
            faults: FaultMix::NONE,
            ..Scenario::default()
        }
    }

    /// Admitted downscales during rollouts (`--webhook`) with a 60 s min time and zone-b downscaled just before the
    /// start (its `grafana.com/last-downscale`), the annotation dropped once the record exists: the record's
    /// bootstrap from the annotations is what keeps zone-a and zone-c's early downscales waiting.
    pub fn recent_downscale() -> Self {
        let base = Scenario::rollout_with_admitted_downscales();
        let scaling = base.scaling.clone().map(|s| ScalingScenario { min_time: Duration::from_secs(60), ..s });
        Scenario { scaling, recent_downscale: true, ..base }
    }
}

impl Default for Scenario {
    fn default() -> Self {
        Scenario {
            zones: 3,
            replicas: 3,
            max_unavailable: 1,
            revisions: 2,
            fault_phase: Duration::from_secs(300),
            settle_deadline: Duration::from_secs(900),
            fault_count: (4, 12),
            faults: FaultMix::ALL,
            planner: PlannerKind::Real,
            scaling: None,
            one_zone_pushes: false,
            deployment: None,
            zone_tracker: None,
            max_unavailable_annotation: None,
            min_ready_seconds: 0,
            scale_requests: false,
            observe_lag: false,
            pushes_at_scaling: false,
            reverts: false,
            relabels: false,
            corrupt_record: false,
            follower_without_min_time: false,
            events: false,
            defences: Defences::ALL,
            evictions: false,
            slow_admissions: false,
            slow_commits: false,
            second_group: false,
            sidecars: false,
            leader_ready_upscales: false,
            force_follower: false,
            force_plain: false,
            recent_downscale: false,
            no_downscale: false,
            mirror: false,
            mirror_write_back: None,
            delayed_downscale: false,
            delay_annotations: false,
            long_delays: false,
            drains: None,
            ha: None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Outcome {
    pub seed: u64,
    pub violations: Vec<Violation>,
    pub converged_at: Option<Duration>,
    pub sim_time: Duration,
    pub writes_judged: u64,
    pub trace: Trace,
    /// Committed decreases of `spec.replicas` (scaling scenario).
    pub downscales: u64,
    /// The shortest time between commits of decreases of two StatefulSets of the group.
    pub min_downscale_gap: Option<Duration>,
    /// Pairs of two zones' downscales committed less than a second more than the min time apart, by who made the
    /// later one: (the controller, the webhook or user).
    pub near_min_time: (u64, u64),
    /// Controller deletions in a StatefulSet being scaled, controller replica changes of one being rolled.
    pub rolled_while_scaling: u64,
    pub scaled_while_rolling: u64,
    /// Of those, decreases (a StatefulSet scaled down during its own rollout).
    pub downscaled_while_rolling: u64,
    /// Generations the StatefulSet controller took 5-60 s to observe.
    pub slow_observations: u64,
    /// The controller's reaction times and request counts.
    pub reactions: crate::reaction::Reactions,
    /// The Events the operator wrote.
    pub events: EventStats,
    /// No-downscale webhook answers judged: (denied, allowed).
    pub no_downscale_admissions: (u64, u64),
    /// The prepare-downscale webhook's answers to the no-downscale world's objects judged.
    pub prepare_foreign_admissions: u64,
    /// Pods removed by admitted downscales that the webhook must have prepared for shutdown, judged.
    pub prepared_pods: u64,
    /// How late each delayed downscale of the controller came once its pods had been preparing for the delay.
    pub delayed_downscale_lateness: Vec<Duration>,
    /// Denied downscales that had prepared pods, judged for their cancels.
    pub undos_judged: u64,
    /// How the webhook users' downscale requests ended (PATCH, or an HPA's PUT).
    pub scale_requests: crate::guaranteed_update::ScaleRequestStats,
    /// The drains world's evictions.
    pub drains: crate::checker::DrainStats,
    /// The HA world's Lease judgements and failovers.
    pub ha: crate::ha::HaStats,
}

impl Outcome {
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }
}

/// Seeds the evictions' own generator (with the run's seed), so the world's other draws do not move.
const EVICTIONS_STREAM: u64 = 0x6576_6963_7469_6f6e;

/// The API group of the mirror worlds' reference resource (the ReplicaTemplate CRD of `deploy/base`).
const MIRROR_GROUP: &str = "rollout-operator.grafana.com";
/// Seeds the reference user's own generator, and the delayed-downscale pods'.
const MIRROR_STREAM: u64 = 0x6d69_7272_6f72_7321;
const DELAYED_PODS_STREAM: u64 = 0x6465_6c61_7965_6421;
/// Seeds the user who corrects malformed delayed-downscale annotations.
const DELAY_FIX_STREAM: u64 = 0x6465_6c61_7966_6978;

/// A zone's `grafana.com/rollout-delayed-downscale` and prepare URL as the delay-annotations world writes them, and
/// what the world means by them (the checker judges by that, never by what the operator's parsers make of the text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DelayText {
    /// 20 s, in two units.
    Valid,
    /// A zero delay: no delayed downscale (no prepare or cancel call; the mirror follows its reference at once).
    Off(&'static str),
    /// Malformed (Prometheus' durations take each unit once, in descending order; a URL's host has no space, which
    /// Go's `url.Parse` refuses as the reference reads it): the
    /// reference refuses to scale the StatefulSet until a user corrects it to [`DelayText::Valid`].
    Malformed { delay: &'static str, url: &'static str },
    /// A delay of `days` days, longer than any run.
    Long { delay: &'static str, days: u64 },
}

const VALID_DELAY: &str = "15s5000ms";
const VALID_DELAY_URL: &str = "http://pod:8080/ingester/prepare-delayed-downscale";
/// The same endpoint with an IPv6 literal as host (the operator keeps the port and path and replaces the host with
/// the pod's DNS name), as the long-delays world's user writes it when correcting a zone.
const IPV6_DELAY_URL: &str = "http://[fd00::1]:8080/ingester/prepare-delayed-downscale";
/// Where the simulated pods answer the delayed-downscale calls (port and path of [`VALID_DELAY_URL`]).
const DELAY_ENDPOINT: &str = ":8080/ingester/prepare-delayed-downscale";

/// The ways a zone's delayed-downscale annotations are written in the delay-annotations world (zone `z` of seed `s`
/// gets `(s + z) % 6`).
const DELAY_TEXTS: [DelayText; 6] = [
    DelayText::Valid,
    DelayText::Off("0s"),
    DelayText::Off("0"),
    DelayText::Malformed { delay: "10s10s", url: VALID_DELAY_URL },
    DelayText::Malformed { delay: "5s1m", url: VALID_DELAY_URL },
    DelayText::Malformed { delay: VALID_DELAY, url: "http://pod :8080/ingester/prepare-delayed-downscale" },
];

/// The long-delays world's texts (zone `z` of seed `s` gets `(s + z) % 5`): a week, a year, four days, 300 years
/// (beyond Prometheus' int64 of nanoseconds, about 292 years, hence malformed), and a URL whose scheme Go's
/// `url.Parse` refuses (an underscore in it).
const LONG_DELAY_TEXTS: [DelayText; 5] = [
    DelayText::Long { delay: "1w", days: 7 },
    DelayText::Long { delay: "1y", days: 365 },
    DelayText::Long { delay: "4d", days: 4 },
    DelayText::Malformed { delay: "300y", url: VALID_DELAY_URL },
    DelayText::Malformed { delay: "1w", url: "h_ttp://pod:8080/ingester/prepare-delayed-downscale" },
];

/// How long the long-delays world's pods above the reference have been preparing when the run starts.
const PREPARING_BEFORE_THE_RUN: Duration = Duration::from_secs(3 * 24 * 3600);

/// How zone `z` of `seed` writes its delayed-downscale annotations.
/// `rollout-max-unavailable` as users write it, valid or not, each meaning what the reference's `strconv.Atoi`
/// reading makes of it (the checker's own reading of the documented rule, `StsSum::of`, judges by that): with five
/// pods a zone, two (a sign, spaces), every pod (a count beyond 32 bits), or the default of one (out of range,
/// zero, negative, not an integer).
const MAX_UNAVAILABLE_TEXTS: [&str; 9] = ["+40%", "+2", " 2 ", "99999999999", "140%", "0", "-2", "2.0", "40.5%"];

/// Zone-a keeps the scenario's value as written; the other zones take a spelling by seed when it is a percentage.
fn max_unavailable_text(value: &str, seed: u64, z: u32) -> &str {
    if z == 0 || !value.ends_with('%') {
        return value;
    }
    MAX_UNAVAILABLE_TEXTS[((seed * 2 + u64::from(z)) % MAX_UNAVAILABLE_TEXTS.len() as u64) as usize]
}

fn delay_text(sc: &Scenario, seed: u64, z: u32) -> DelayText {
    if sc.long_delays {
        LONG_DELAY_TEXTS[((seed + u64::from(z)) % LONG_DELAY_TEXTS.len() as u64) as usize]
    } else if sc.delay_annotations {
        DELAY_TEXTS[((seed + u64::from(z)) % 6) as usize]
    } else {
        DelayText::Valid
    }
}

/// The corrupt-record world's edit, made only while a StatefulSet rolls and the record exists: one zone's entry
/// (or a new one) made unreadable. The record's name, the key and what it held before.
fn corrupt_record(st: &mut Store) -> Option<(String, String, Option<String>)> {
    let record = st.zone_tracker_config_map.clone();
    let rolling = st.statefulsets.values().any(|s| {
        let status = s.status.as_ref();
        status.and_then(|s| s.update_revision.as_ref()) != status.and_then(|s| s.current_revision.as_ref())
    });
    let mut cm = st.config_maps.get(&record).cloned().filter(|_| rolling)?;
    let data = cm.data.get_or_insert_default();
    let key = data.keys().next().cloned().unwrap_or_else(|| zone_name(0));
    let original = data.insert(key.clone(), CORRUPT_RECORD_VALUE.to_string());
    st.api_replace_config_map(&cm).ok()?;
    st.trace("user", format!("corrupts the zone tracker's record {record}: {key} = {CORRUPT_RECORD_VALUE}"));
    Some((record, key, original))
}

/// A denial of `what` (a change to `sts`) must name only StatefulSets of `sts`'s own rollout group: one that names
/// a StatefulSet of another group (the worlds' second group) judged on the wrong group, a violation of `invariant`.
/// The names are read as the message's words, not through the core.
pub(crate) fn judge_denial_scope(st: &mut Store, sts: &str, message: &str, invariant: &'static str, what: &str) {
    let group = st.group_of_statefulset(sts);
    judge_denial_scope_of(st, group, message, invariant, what);
}

/// [`judge_denial_scope`] for a denial of an object of `group`.
pub(crate) fn judge_denial_scope_of(
    st: &mut Store,
    group: Option<String>,
    message: &str,
    invariant: &'static str,
    what: &str,
) {
    let named: Vec<&str> = message
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|word| st.statefulsets.contains_key(*word) && st.group_of_statefulset(word) != group)
        .collect();
    if !named.is_empty() {
        let at = st.elapsed();
        let detail = format!("{what} was denied for {} of another rollout group: {message}", named.join(", "));
        st.checker.violate(at, invariant, detail);
    }
}

/// Puts the corrupted entry back as it was (or removes it); whether that is done (or the record is gone).
fn repair_record(st: &mut Store, record: &str, key: &str, original: Option<&str>) -> bool {
    let Some(mut cm) = st.config_maps.get(record).cloned() else { return true };
    let data = cm.data.get_or_insert_default();
    match original {
        Some(value) => data.insert(key.to_string(), value.to_string()),
        None => data.remove(key),
    };
    let repaired = st.api_replace_config_map(&cm).is_ok();
    if repaired {
        st.trace("user", format!("repairs the zone tracker's record {record}"));
    }
    repaired
}

/// Sets the mirror worlds' reference resource's `spec.replicas` (the user's, or an HPA's, change).
fn set_reference(st: &mut Store, replicas: u32) {
    let key = ("replicatemplates".to_string(), GROUP.to_string());
    let at = st.elapsed();
    let object = st.scale_targets.entry(key).or_insert_with(|| serde_json::json!({"spec": {}, "status": {}}));
    object["spec"]["replicas"] = serde_json::json!(replicas);
    st.reference_history.push((at, replicas));
    st.trace("user", format!("ReplicaTemplate {GROUP}: spec.replicas = {replicas}"));
}

/// The reference resource's `spec.replicas` and `status.replicas`, in the mirror worlds.
fn reference_replicas(st: &Store) -> Option<(Option<i64>, Option<i64>)> {
    let object = st.scale_targets.get(&("replicatemplates".to_string(), GROUP.to_string()))?;
    Some((object.pointer("/spec/replicas")?.as_i64(), object.pointer("/status/replicas").and_then(|v| v.as_i64())))
}

/// The pods' delayed-downscale endpoints (the URL's host is `<pod>.<service>...`): POST starts preparing (and
/// answers when it started, in whole seconds, as a pod does), DELETE cancels. Most answer within 50 ms; during the
/// fault phase 3 % answer HTTP 500 and 2 % cannot be reached. What they answered is kept in the store for the checker.
#[derive(Clone)]
struct DelayedDownscalePods {
    store: SharedStore,
    rng: Arc<Mutex<SimRng>>,
    failing_until: Instant,
}

impl PodHttpClient for DelayedDownscalePods {
    async fn call(&self, request: PodRequest) -> Result<PodResponse, PodCallError> {
        let (delay, roll) = {
            let mut r = self.rng.lock().unwrap();
            (r.millis(1, 50), r.range(0..100))
        };
        tokio::time::sleep(delay).await;
        let method = if request.method == PodMethod::Post { "POST" } else { "DELETE" };
        let host = request.url.split("://").nth(1).unwrap_or_default();
        let pod = host.split(['.', ':', '/']).next().unwrap_or_default().to_string();
        let mut st = self.store.lock().unwrap();
        // Only a StatefulSet whose delayed downscale is on (as the world meant its annotations) is ever called. The
        // StatefulSet addressed is the governing Service in the host (`<pod>.<service>.<namespace>.svc...`; each
        // world's Service is named after its StatefulSet), not the pod's owner: a pod relabelled out of its
        // StatefulSet's selector is released, and is still that StatefulSet's ordinal.
        let service = host.split(['.', ':', '/']).nth(1).unwrap_or_default().to_string();
        let addressed = st.pods.contains_key(&pod).then_some(service);
        if let Some(sts) = addressed.filter(|sts| !st.delayed_downscale_delays.contains_key(sts)) {
            let at = st.elapsed();
            let detail = format!("{method} {} to {pod}, whose StatefulSet {sts} has no delayed downscale", request.url);
            st.checker.record_delayed_violation(at, detail);
        }
        let faulty = Instant::now() < self.failing_until;
        // The pods listen on port 8080 only: another port (or scheme) is refused, another path is not found.
        let (listens, path_found) = match host.split_once(':') {
            Some((_, port_path)) => {
                (request.url.starts_with("http://") && port_path.starts_with("8080/"), host.ends_with(DELAY_ENDPOINT))
            }
            None => (false, false),
        };
        if (faulty && roll < 2) || !st.pods.contains_key(&pod) || !listens {
            return Err(PodCallError::Transport { method, url: request.url, message: "connection refused".into() });
        }
        if !path_found {
            return Ok(PodResponse { status: 404, body: b"404 page not found".to_vec() });
        }
        if faulty && roll < 5 {
            return Ok(PodResponse { status: 500, body: b"not now".to_vec() });
        }
        match request.method {
            PodMethod::Post => {
                let now = Timestamp::from_second(Timestamp::now().as_second()).unwrap_or_else(|_| Timestamp::now());
                let since = *st.prepared.entry(pod.clone()).or_insert(now);
                if since == now {
                    st.trace("pods", format!("{pod} prepares for a delayed downscale"));
                }
                let body = serde_json::json!({ "timestamp": since.as_second() }).to_string().into_bytes();
                Ok(PodResponse { status: 200, body })
            }
            _ => {
                if st.prepared.remove(&pod).is_some() {
                    st.trace("pods", format!("{pod} cancels its delayed downscale"));
                }
                Ok(PodResponse { status: 200, body: Vec::new() })
            }
        }
    }
}

/// The drains world's actors: the operator replicas serving the pod-eviction webhook (restarted now and
/// then during the fault phase; replica 0 is the controller's node when `hosted` names it), and the node-drain actor
/// on a node of its own. Everything is drawn from the drains' own generator.
#[allow(clippy::too_many_arguments)]
fn start_drains(
    handle: &Handle,
    store: &SharedStore,
    seed: u64,
    sc: &Scenario,
    drains: crate::drains::Drains,
    hosted: Option<Arc<Nodes>>,
    start: Instant,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) {
    use crate::drains;
    let mut r = SimRng::new(seed ^ drains::DRAINS_STREAM);
    let incarnations = Arc::new(AtomicU64::new(drains::REPLICA_INCARNATION_BASE));
    let mut replicas = Vec::new();
    for i in 0..drains.replicas {
        // Replica 0 may be the controller's process (`hosted`): its crashes are that node's.
        if let (0, Some(nodes)) = (i, &hosted) {
            replicas.push(nodes.controllers[0]);
            continue;
        }
        let (store, incarnations, evictor, feed) = (store.clone(), incarnations.clone(), drains.evictor, drains.feed());
        let node = handle
            .create_node()
            .name(format!("operator-replica-{i}"))
            .ip(drains::replica_ip(i))
            .init(move || {
                let incarnation = incarnations.fetch_add(1, Ordering::Relaxed);
                drains::serve_replica(store.clone(), i, incarnation, evictor, feed)
            })
            .build();
        replicas.push(node.id());
    }
    for (at, replica, down) in drains::replica_restarts(&mut r, drains.replicas, sc.fault_phase) {
        let (store, id) = (store.clone(), replicas[replica]);
        // The controller's node too: flagged down as its own crashes are, so that the end of the fault phase brings
        // it back if this restart is cut short.
        let controller = hosted.clone().filter(|_| replica == 0);
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep_until(start + at).await;
            store
                .lock()
                .unwrap()
                .trace("fault", format!("operator-{replica} crashes, restarted in {:.1}s", down.as_secs_f64()));
            if let Some(nodes) = &controller {
                nodes.set_controller_killed(0, true);
            }
            Handle::current().kill(id);
            tokio::time::sleep(down).await;
            restart(id);
            if let Some(nodes) = &controller {
                nodes.set_controller_killed(0, false);
            }
        }));
    }
    let node = handle.create_node().name("drain").ip(IpAddr::from([10, 0, 0, 12])).build();
    let (store, zones, phase) = (store.clone(), sc.zones, sc.fault_phase);
    let groups: &'static [&'static str] = if sc.second_group { &[GROUP, SECOND_GROUP] } else { &[GROUP] };
    let drainer = SimRng::new(r.next_u64());
    if drains.intent_wipes {
        let (store, mut wiper, phase) = (store.clone(), SimRng::new(seed ^ INTENT_WIPES_STREAM), sc.fault_phase);
        tasks.push(tokio::spawn(async move {
            while start.elapsed() < phase {
                tokio::time::sleep(wiper.millis(2_000, 10_000)).await;
                let mut st = store.lock().unwrap();
                let carrying: Vec<k8s_openapi::api::apps::v1::StatefulSet> = st
                    .statefulsets
                    .values()
                    .filter(|s| {
                        s.metadata
                            .annotations
                            .as_ref()
                            .is_some_and(|a| a.keys().any(|k| crate::checker::is_intent_key(k)))
                    })
                    .cloned()
                    .collect();
                for mut sts in carrying {
                    if let Some(a) = sts.metadata.annotations.as_mut() {
                        a.retain(|k, _| !crate::checker::is_intent_key(k));
                    }
                    let name = sts.metadata.name.clone().unwrap_or_default();
                    st.put_statefulset(sts);
                    st.trace("user", format!("re-applied {name} from its manifest (its eviction intents dropped)"));
                }
            }
        }));
    }
    if drains.budget_edits {
        // Drawn after everything the world without edits draws, so those draws stay the same.
        let (editor, store, drains, node) = (SimRng::new(r.next_u64()), store.clone(), drains.clone(), node.clone());
        tasks.push(tokio::spawn(async move {
            let _ = node.spawn(drains::edit_budgets(store, editor, drains, start, phase)).await;
        }));
    }
    tasks.push(tokio::spawn(async move {
        let _ = node.spawn(drains::drain_nodes(store, drainer, drains, groups, zones, start, phase)).await;
    }));
}

/// Seeds the forced follower's own generator.
/// Seeds the template reverts (`Scenario::reverts`).
const REVERTS_STREAM: u64 = 0x7265_7665_7274_7321;
const FORCE_FOLLOWER_STREAM: u64 = 0x666f_7263_6521_2121;
/// Seeds the user who forces a StatefulSet without scaling annotations.
const FORCE_PLAIN_STREAM: u64 = 0x666f_7263_6570_6c61;

/// Seeds the sidecar crashes' own generator.
const SIDECARS_STREAM: u64 = 0x7369_6465_6361_7273;
/// Seeds the user who corrupts the zone tracker's record.
const CORRUPT_RECORD_STREAM: u64 = 0x636f_7272_7570_7421;
/// What the corrupt-record world's user writes for a zone in the record: JSON, but no time.
const CORRUPT_RECORD_VALUE: &str = r#"{"lastDownscaled":"yesterday"}"#;

/// Seeds the user who re-applies the StatefulSets during drains.
const INTENT_WIPES_STREAM: u64 = 0x7769_7065_696e_7473;

/// Seeds the second group's HPA users in the webhook world.
const SECOND_GROUP_USERS_STREAM: u64 = 0x7365_636f_6e64_6870;

/// Seeds the relabelling user's own generator.
const RELABELS_STREAM: u64 = 0x7265_6c61_6265_6c73;

/// Relabels `pod` out of its StatefulSet's selector (`out`) or back; the pod's uid if that changed anything (a
/// running pod, not terminating, is relabelled out).
fn relabel(st: &mut Store, pod: &str, out: bool) -> Option<String> {
    let mut p = st.pods.get(pod).cloned()?;
    if out != objects::in_selector(&p) || (out && p.metadata.deletion_timestamp.is_some()) {
        return None;
    }
    let labels = p.metadata.labels.get_or_insert_default();
    if out {
        labels.insert(objects::DEBUG_LABEL.to_string(), "debug".to_string());
    } else {
        labels.remove(objects::DEBUG_LABEL);
    }
    let uid = p.metadata.uid.clone().unwrap_or_default();
    st.put_pod(p);
    let what = if out { "out of its StatefulSet's selector" } else { "back into its StatefulSet's selector" };
    st.trace("user", format!("relabelled pod {pod} {what}"));
    Some(uid)
}

/// Sets `pod`'s sidecar ready or crashed, leaving its Ready condition; the pod's uid if that changed anything.
fn set_sidecar(st: &mut Store, pod: &str, ready: bool) -> Option<String> {
    let mut p = st.pods.get(pod).cloned()?;
    let ready_now = p
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.iter().find(|c| c.name == objects::SIDECAR))
        .map(|c| c.ready)?;
    if ready_now == ready || p.metadata.deletion_timestamp.is_some() || (!ready && !objects::is_ready(&p)) {
        return None;
    }
    // Pods of odd ordinals keep their sidecar running while its readiness probe fails; the others' crashes.
    let still_running = pod.rsplit('-').next().and_then(|o| o.parse::<u32>().ok()).is_some_and(|o| o % 2 == 1);
    objects::set_sidecar_ready(&mut p, ready, still_running, Timestamp::now());
    let uid = p.metadata.uid.clone().unwrap_or_default();
    st.put_pod(p);
    let what = match (ready, still_running) {
        (true, _) => "recovered",
        (false, false) => "crashed (the pod still reports Ready)",
        (false, true) => "fails its readiness probe, running (the pod still reports Ready)",
    };
    st.trace("kubelet", format!("sidecar of pod {pod} {what}"));
    Some(uid)
}

/// Someone else deletes `pod` (an eviction): it becomes terminating, and the kubelet and the StatefulSet controller
/// replace it as after any deletion. A pod already terminating or gone is left alone.
fn evict(st: &mut Store, pod: &str) {
    let Some(mut p) = st.pods.get(pod).cloned() else { return };
    if p.metadata.deletion_timestamp.is_some() {
        return;
    }
    p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::now()));
    st.put_pod(p);
    st.trace("user", format!("evicted pod {pod}"));
}

fn zone_name(i: u32) -> String {
    group_zone_name(GROUP, i)
}

/// The second rollout group of `Scenario::second_group`.
pub const SECOND_GROUP: &str = "store-gateway";

fn group_zone_name(group: &str, i: u32) -> String {
    format!("{group}-zone-{}", (b'a' + i as u8) as char)
}

/// Runs one seed to completion.
pub fn run(seed: u64, scenario: &Scenario, echo: bool) -> Outcome {
    // Each run gets a fresh thread, so thread-local state of earlier runs (std's HashMap keys, which madsim seeds
    // from the simulation when they are first needed inside it; tokio's thread-local generator) cannot leak into it.
    let scenario = scenario.clone();
    std::thread::spawn(move || {
        let rt = Runtime::with_seed_and_config(seed, madsim::Config::default());
        rt.block_on(world(seed, scenario, echo))
    })
    .join()
    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// What the controller process is started with besides its planner.
#[derive(Clone)]
struct ControllerSetup {
    /// The zone tracker's ConfigMap and whether Events are on.
    operator: OperatorSetup,
    defences: Defences,
    /// The pods' delayed-downscale endpoints.
    pods: DelayedDownscalePods,
    /// The drains worlds: the controller honours the ZoneAwarePodDisruptionBudgets before its deletions, with a
    /// budget cache of its own fed by the real watch task (as `main` runs it). Other worlds leave it out, so their
    /// controller runs no extra task and their pinned seeds replay the same interleaving.
    budgets: BudgetFeed,
    /// This process's readiness (`/ready`), which the world keeps to judge (each process starts unready).
    ready: ReadyFlag,
    /// The ZPDB state of the eviction webhook this process also serves (the `no-patch` drains world: one operator
    /// process, as `main` runs it, whose in-process serialisation covers its controller's deletions and its
    /// evictions alike). `None`: a controller process of its own.
    zpdb: Option<Zpdb>,
}

/// The operator process's configuration for this world, as `main` makes it from its flags: the flags' defaults
/// but for the namespace, the zone tracker, Events, the progress deadline and the defences in force. The operator
/// replicas of the drains worlds stamp the ready times, so the controller process runs no tracker of its own.
fn operator_config(setup: &ControllerSetup) -> OperatorConfig {
    OperatorConfig {
        namespace: objects::NAMESPACE.to_string(),
        reconciler: ReconcilerConfig { defences: setup.defences, ..ReconcilerConfig::default() },
        scaling: ScalingConfig {
            namespace: objects::NAMESPACE.to_string(),
            zone_tracker_config_map: setup.operator.record.clone(),
            ..ScalingConfig::default()
        },
        progress_deadline: crate::events::PROGRESS_DEADLINE,
        events: setup.operator.events.then(|| EventSettings::new(objects::NAMESPACE, "rollout-operator-0")),
        budgets: match (&setup.zpdb, setup.budgets) {
            (Some(zpdb), _) => BudgetSource::Shared(zpdb.clone()),
            (None, BudgetFeed::None) => BudgetSource::Off,
            (None, _) => BudgetSource::Watched,
        },
        ready_time_patch_timeout: None,
    }
}

/// The controller process, built by the operator's own builder over `api`, run until the node is killed.
async fn run_controller<P: Planner + Clone + Send + 'static>(api: SimCluster, setup: ControllerSetup, planner: P) {
    // Never set: a process ends only by being killed, as a crashed pod does.
    let (_stop, stopped) = tokio::sync::watch::channel(false);
    let metrics = Arc::new(Metrics::new());
    let operator = Operator::build(operator_config(&setup), api, setup.pods.clone(), planner, metrics, stopped.clone());
    operator.run(setup.ready.clone(), stopped, None).await
}

/// One HA replica node: every start of it is a new process, built by the operator's builder with
/// `-leader-election.enabled=true`, each term's controller on a client of its own (a new incarnation: the checker
/// judges each term's controller by what that controller knew).
fn start_replica(
    handle: &Handle,
    store: &SharedStore,
    index: u32,
    ha: crate::ha::Ha,
    drift: crate::ha::ClockDrift,
    setup: &ControllerSetup,
    incarnations: &Arc<AtomicU64>,
) -> madsim::task::NodeId {
    let (store, setup, incarnations) = (store.clone(), setup.clone(), incarnations.clone());
    handle
        .create_node()
        .name(crate::ha::identity(index))
        .ip(crate::ha::replica_ip(index))
        .init(move || {
            let (store, setup, incarnations) = (store.clone(), setup.clone(), incarnations.clone());
            async move {
                let incarnation = incarnations.fetch_add(1, Ordering::Relaxed) + 1;
                crate::ha::trace_start(&store, index, incarnation, drift);
                let api = SimCluster::connect(incarnation).await.expect("bind replica endpoint");
                // Never set: a replica ends only by being killed, as a crashed pod does (graceful release is tested
                // apart).
                let (_stop, stopped) = tokio::sync::watch::channel(false);
                let mut metrics = Metrics::new();
                let election = crate::ha::election_setup(index, ha.election, drift, metrics.register_leader_election());
                let (config, pods) = (operator_config(&setup), setup.pods.clone());
                let operator = Operator::build(config, api, pods, RolloutPlanner, Arc::new(metrics), stopped.clone());
                let gated = ha.election.gated();
                operator
                    .run_elected(election, ReadyFlag::new(), stopped, move |operator, gate, end| {
                        let (store, incarnations) = (store.clone(), incarnations.clone());
                        async move {
                            let term = incarnations.fetch_add(1, Ordering::Relaxed) + 1;
                            {
                                let mut st = store.lock().unwrap();
                                st.ha.process_started(term, crate::ha::identity(index));
                                st.trace(
                                    &format!("controller#{term}"),
                                    format!("term of {} begins: a new controller", crate::ha::identity(index)),
                                );
                            }
                            let Ok(api) = SimCluster::connect(term).await else { return };
                            let controller = operator.controller_over(api);
                            let controller = if gated { controller.with_leadership(gate) } else { controller };
                            let end: futures::future::BoxFuture<'static, ()> = match ha.election.late_stop() {
                                Some(late) => Box::pin(async move {
                                    end.await;
                                    tokio::time::sleep(late).await;
                                }),
                                None => end,
                            };
                            controller.run(ReadyFlag::new(), end).await;
                            store.lock().unwrap().trace(&format!("controller#{term}"), "term over: controller stopped");
                        }
                    })
                    .await
            }
        })
        .build()
        .id()
}

struct Nodes {
    apiserver: madsim::task::NodeId,
    /// The controller node, or the HA world's replica nodes.
    controllers: Vec<madsim::task::NodeId>,
    /// Currently killed by a fault: the API server, and each controller node.
    killed: Mutex<(bool, Vec<bool>)>,
    /// HA replica nodes currently frozen, since when (simulated time since the start).
    paused: Mutex<Vec<Option<Duration>>>,
}

impl Nodes {
    fn set_api_killed(&self, down: bool) {
        self.killed.lock().unwrap().0 = down;
    }

    fn set_controller_killed(&self, i: usize, down: bool) {
        self.killed.lock().unwrap().1[i] = down;
    }

    /// Which controller node a fault drawn with `pick` hits (the one controller node outside the HA world).
    fn pick_controller(&self, pick: u64) -> usize {
        ((pick >> 20) % self.controllers.len() as u64) as usize
    }

    /// How a fault names controller node `i` in the trace.
    fn controller_name(&self, i: usize) -> String {
        if self.controllers.len() == 1 { "controller".to_string() } else { crate::ha::identity(i as u32) }
    }
}

pub async fn world(seed: u64, sc: Scenario, echo: bool) -> Outcome {
    let handle = Handle::current();
    let rng = Arc::new(Mutex::new(SimRng::new(seed)));
    let store: SharedStore = Arc::new(Mutex::new(Store::new(Trace::new(echo), 400)));
    populate(&store, &sc, seed);
    let knobs = Arc::new(Mutex::new(Knobs::default()));
    let kube_rng = SimRng::new(rng.lock().unwrap().next_u64());
    let mut kube = KubeState::new(kube_rng);
    kube.sidecars = sc.sidecars;
    if sc.observe_lag {
        kube.observe_lag = true;
        kube.slow_observe_chance = 0.5;
    }
    let kube_state = Arc::new(Mutex::new(kube));
    let (crash_tx, mut crash_rx) = tokio::sync::mpsc::unbounded_channel();
    let (pause_tx, pause_rx) = tokio::sync::mpsc::unbounded_channel();
    let env = ServerEnv {
        store: store.clone(),
        knobs: knobs.clone(),
        rng: Arc::new(Mutex::new(SimRng::new(rng.lock().unwrap().next_u64()))),
        crash_tx,
        pause_tx,
        // The HA world runs the deployment's RBAC plus the HA overlay's Lease grants.
        grants: sc.deployment.map(|d| match sc.ha {
            Some(_) => Arc::new(crate::ha::with_ha_grants(d.grants())),
            None => Arc::new(d.grants()),
        }),
        eviction_webhooks: sc.drains.iter().flat_map(|d| (0..d.replicas).map(crate::drains::replica_address)).collect(),
    };
    let apiserver = handle
        .create_node()
        .name("apiserver")
        .ip(apiserver::address().ip())
        .init(move || apiserver::serve(env.clone()))
        .build();
    let (s, k) = (store.clone(), kube_state.clone());
    handle
        .create_node()
        .name("kube")
        .ip(IpAddr::from([10, 0, 0, 2]))
        .init(move || kube::run(s.clone(), k.clone()))
        .build();
    let incarnations = Arc::new(AtomicU64::new(0));
    let setup = ControllerSetup {
        operator: OperatorSetup::of(&sc),
        budgets: sc.drains.as_ref().map_or(BudgetFeed::None, crate::drains::Drains::feed),
        defences: sc.defences,
        pods: DelayedDownscalePods {
            store: store.clone(),
            rng: Arc::new(Mutex::new(SimRng::new(seed ^ DELAYED_PODS_STREAM))),
            failing_until: Instant::now() + sc.fault_phase,
        },
        ready: ReadyFlag::new(),
        zpdb: None,
    };
    // Without `patch` on pods or StatefulSets the operator serialises in process: its one process runs the
    // controller and serves the eviction webhook (replica 0), as `main` runs them, sharing that serialisation.
    let one_operator_process = sc.ha.is_none()
        && sc.drains.as_ref().is_some_and(|d| d.replicas == 1)
        && sc.deployment == Some(ReferenceDeployment::NoPatch);
    let mut ha_rng = SimRng::new(seed ^ crate::ha::HA_STREAM);
    let controllers: Vec<madsim::task::NodeId> = match sc.ha {
        Some(ha) => (0..ha.replicas)
            .map(|i| {
                let drift = crate::ha::ClockDrift::draw(&mut ha_rng);
                start_replica(&handle, &store, i, ha, drift, &setup, &incarnations)
            })
            .collect(),
        None => {
            let (s, planner) = (store.clone(), sc.planner);
            let evictor = sc.drains.as_ref().map_or(crate::drains::Evictor::Real, |d| d.evictor);
            let replica_incarnations = Arc::new(AtomicU64::new(crate::drains::REPLICA_INCARNATION_BASE));
            let ip = if one_operator_process { crate::drains::replica_ip(0) } else { IpAddr::from([10, 0, 0, 3]) };
            let controller = handle
                .create_node()
                .name("controller")
                .ip(ip)
                .init(move || {
                    let incarnation = incarnations.fetch_add(1, Ordering::Relaxed) + 1;
                    let replica = one_operator_process.then(|| replica_incarnations.fetch_add(1, Ordering::Relaxed));
                    let store = s.clone();
                    let mut setup = ControllerSetup { ready: ReadyFlag::new(), ..setup.clone() };
                    store.lock().unwrap().controller_ready = Some(setup.ready.clone());
                    async move {
                        store.lock().unwrap().trace(&format!("controller#{incarnation}"), "process started");
                        if let Some(replica) = replica {
                            let process = crate::drains::replica_process(0, replica);
                            store.lock().unwrap().trace(&process, "process started (it also runs the controller)");
                            let api = SimCluster::connect_operator(replica, setup.budgets)
                                .await
                                .expect("bind operator replica endpoint");
                            let zpdb = crate::drains::operator_zpdb(&api, evictor);
                            // The test-only evictor that knows no budget blinds only the webhook.
                            if evictor != crate::drains::Evictor::IgnoresBudget {
                                setup.zpdb = Some(zpdb.clone());
                            }
                            tokio::spawn(crate::drains::serve_admissions(0, api, zpdb, evictor));
                        }
                        let api = match setup.budgets {
                            BudgetFeed::None => SimCluster::connect(incarnation).await,
                            feed => SimCluster::connect_operator(incarnation, feed).await,
                        };
                        let api = api.expect("bind controller endpoint");
                        run_with_planner(planner, api, setup).await
                    }
                })
                .build();
            vec![controller.id()]
        }
    };
    let nodes = Arc::new(Nodes {
        apiserver: apiserver.id(),
        killed: Mutex::new((false, vec![false; controllers.len()])),
        paused: Mutex::new(vec![None; controllers.len()]),
        controllers,
    });
    let start = Instant::now();
    let fault_end = start + sc.fault_phase;

    // Users: template pushes, one deploy after the other, each StatefulSet a few seconds apart (as a deploy tool
    // would), possibly in the middle of the previous rollout.
    let mut tasks = Vec::new();
    // Users admitting changes through the webhook are not aborted when the fault phase ends: an admission in flight
    // runs to its answer (the prepare window it opened must close).
    let mut users = Vec::new();
    let leader_changes;
    {
        let mut r = rng.lock().unwrap();
        let mut pushes: Vec<(u64, Vec<Option<Duration>>)> = (0..sc.revisions)
            .map(|_| {
                let at = r.range(5_000..(sc.fault_phase.as_millis() as u64 * 4 / 5).max(5_001));
                let only = r.range(0..u64::from(sc.zones)) as usize;
                let gaps: Vec<Option<Duration>> = (0..sc.zones as usize)
                    .map(|z| Some(r.millis(0, 3_000)).filter(|_| !sc.one_zone_pushes || z == only))
                    .collect();
                (at, gaps)
            })
            .collect();
        drop(r);
        leader_changes = with_recent_downscale(&sc, seed, scaling_changes(&sc, &rng));
        if sc.pushes_at_scaling && !leader_changes.is_empty() {
            let mut r = rng.lock().unwrap();
            for (at, _) in &mut pushes {
                let (change, _) = leader_changes[r.range(0..leader_changes.len() as u64) as usize];
                let offset = r.millis(0, 45_000);
                let latest = sc.fault_phase.as_millis() as u64 - 10_000;
                *at =
                    ((change + offset).saturating_sub(Duration::from_secs(5)).as_millis() as u64).clamp(5_000, latest);
            }
        }
        pushes.sort_unstable();
        // Reverts draw from a stream of their own, so the worlds without them replay as before.
        let mut revert_rng = SimRng::new(seed ^ REVERTS_STREAM);
        let reverts: Vec<Option<Duration>> = (0..pushes.len())
            .map(|_| Some(revert_rng.millis(2_000, 20_000)).filter(|_| sc.reverts && revert_rng.chance(0.5)))
            .collect();
        let (store, second_group) = (store.clone(), sc.second_group);
        tasks.push(tokio::spawn(async move {
            let push_all = async |gaps: &[Option<Duration>], revision: u32| {
                for (z, gap) in gaps.iter().enumerate() {
                    let Some(gap) = gap else { continue };
                    tokio::time::sleep(*gap).await;
                    kube::push_revision(&mut store.lock().unwrap(), &zone_name(z as u32), revision);
                    if second_group {
                        kube::push_revision(
                            &mut store.lock().unwrap(),
                            &group_zone_name(SECOND_GROUP, z as u32),
                            revision,
                        );
                    }
                }
            };
            let mut live = 0;
            for (n, ((at, gaps), revert)) in pushes.into_iter().zip(reverts).enumerate() {
                tokio::time::sleep_until((start + Duration::from_millis(at)).max(Instant::now())).await;
                push_all(&gaps, n as u32 + 1).await;
                match revert {
                    // Back to the revision before this push (the same ControllerRevision name: the template is
                    // the same again).
                    Some(after) => {
                        tokio::time::sleep(after).await;
                        store.lock().unwrap().trace("user", format!("reverting the push of r{} to r{live}", n + 1));
                        push_all(&gaps, live).await;
                    }
                    None => live = n as u32 + 1,
                }
            }
        }));
    }

    if sc.force_follower && sc.scaling.as_ref().is_some_and(|s| s.followers) && sc.zones > 1 {
        let (store, phase) = (store.clone(), sc.fault_phase);
        let mut r = SimRng::new(seed ^ FORCE_FOLLOWER_STREAM);
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep_until(start + r.millis(10_000, phase.as_millis() as u64 * 4 / 5)).await;
            let up = r.chance(0.5);
            let mut st = store.lock().unwrap();
            let replicas = |s: &k8s_openapi::api::apps::v1::StatefulSet| s.spec.as_ref().and_then(|s| s.replicas);
            let leader = st.statefulsets.get(&group_zone_name(GROUP, 0)).and_then(replicas).unwrap_or(1);
            let force = if up || leader <= 1 { leader + 1 } else { leader - 1 };
            let follower = group_zone_name(GROUP, 1);
            let Some(mut sts) = st.statefulsets.get(&follower).cloned() else { return };
            objects::annotate(&mut sts, rollout_core::keys::ROLLOUT_FORCE_REPLICAS, &force.to_string());
            st.put_statefulset(sts);
            st.trace("user", format!("annotated {follower} {}={force}", rollout_core::keys::ROLLOUT_FORCE_REPLICAS));
        }));
    }

    if sc.force_plain && sc.scaling.is_none() && !sc.mirror {
        let (store, phase, zones) = (store.clone(), sc.fault_phase, sc.zones);
        let mut r = SimRng::new(seed ^ FORCE_PLAIN_STREAM);
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep_until(start + r.millis(10_000, phase.as_millis() as u64 * 4 / 5)).await;
            let up = r.chance(0.5);
            let mut st = store.lock().unwrap();
            let name = group_zone_name(GROUP, zones - 1);
            let Some(mut sts) = st.statefulsets.get(&name).cloned() else { return };
            let current = sts.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            let force = if up || current <= 1 { current + 1 } else { current - 1 };
            objects::annotate(&mut sts, rollout_core::keys::ROLLOUT_FORCE_REPLICAS, &force.to_string());
            st.force_ignored.insert(name.clone(), current);
            st.put_statefulset(sts);
            st.trace("user", format!("annotated {name} {}={force}", rollout_core::keys::ROLLOUT_FORCE_REPLICAS));
        }));
    }

    // The user (or HPA) scaling the leader: through the prepare-downscale webhook's record claim, through the real
    // webhook, or (`Admission::Direct`) as asked.
    if let Some(scaling) = &sc.scaling {
        let changes = leader_changes;
        match scaling.admission {
            Admission::RecordClaim | Admission::Direct => {
                let (s, tracker) = (store.clone(), sc.zone_tracker_config_map().is_some());
                let direct = scaling.admission == Admission::Direct;
                let probes = scaling.boundary_probes.then(|| Probes {
                    min_time: scaling.min_time,
                    until: start + sc.fault_phase * 9 / 10,
                    rng: SimRng::new(rng.lock().unwrap().next_u64()),
                });
                let (second_early, defences) = (sc.planner == PlannerKind::MinTimeSecondEarly, sc.defences);
                handle
                    .create_node()
                    .name("webhook")
                    .ip(IpAddr::from([10, 0, 0, 4]))
                    .init(move || {
                        let stand_in = StandIn { direct, tracker, second_early, defences };
                        scale_leader(s.clone(), changes.clone(), start, stand_in, probes.clone())
                    })
                    .build();
            }
            Admission::Webhook => {
                let operators: Arc<Vec<madsim::runtime::NodeHandle>> = Arc::new(
                    (0..2u8)
                        .map(|i| {
                            handle
                                .create_node()
                                .name(format!("operator-{i}"))
                                .ip(IpAddr::from([10, 0, 0, 4 + i]))
                                .build()
                        })
                        .collect(),
                );
                let pods = SimPods {
                    rng: Arc::new(Mutex::new(SimRng::new(rng.lock().unwrap().next_u64()))),
                    store: store.clone(),
                };
                let next = Arc::new(AtomicU64::new(apiserver::ADMISSION_INCARNATION_BASE));
                // One user per scaled StatefulSet: the leader's (its changes as drawn above), or one per zone.
                let mut per_sts: Vec<(String, Vec<(Duration, u32)>)> = Vec::new();
                if scaling.followers {
                    per_sts.push((zone_name(0), changes));
                } else {
                    let mut r = rng.lock().unwrap();
                    for z in 0..sc.zones {
                        let mut zone_changes = draw_changes(&sc, scaling, &mut r);
                        if z == 0 {
                            zone_changes = with_recent_downscale(&sc, seed, zone_changes);
                        }
                        zone_changes.sort_unstable();
                        per_sts.push((zone_name(z), zone_changes));
                    }
                    if sc.second_group {
                        // The second group's zones scaled too, from a generator of their own (the first group's
                        // draws stay as they were): its downscales are prepared while the first group's are, so
                        // the record holds both groups' markers at once.
                        let mut r = SimRng::new(seed ^ SECOND_GROUP_USERS_STREAM);
                        for z in 0..sc.zones {
                            let mut zone_changes = draw_changes(&sc, scaling, &mut r);
                            zone_changes.sort_unstable();
                            per_sts.push((group_zone_name(SECOND_GROUP, z), zone_changes));
                        }
                    }
                }
                for (sts, changes) in per_sts {
                    let user = crate::webhook_user::User {
                        store: store.clone(),
                        operators: operators.clone(),
                        pods: pods.clone(),
                        next: next.clone(),
                        pick: SimRng::new(rng.lock().unwrap().next_u64()),
                        record: sc.zone_tracker_config_map(),
                        scale_requests: sc.scale_requests,
                        defences: sc.defences,
                        slow: sc.slow_admissions,
                        events: sc.events,
                    };
                    users.push(tokio::spawn(user.scale_through_webhook(sts, changes, start)));
                }
            }
        }
    }

    if sc.no_downscale {
        let node = handle.create_node().name("no-downscale-user").ip(IpAddr::from([10, 0, 0, 8])).build();
        let (store, fault_phase) = (store.clone(), sc.fault_phase);
        let r = SimRng::new(seed ^ NO_DOWNSCALE_STREAM);
        users.push(tokio::spawn(async move {
            let _ = node.spawn(no_downscale_user(store, r, start, fault_phase)).await;
        }));
    }

    // Faults.
    let kinds = fault_kinds(&sc.faults);
    if !kinds.is_empty() {
        let count = rng.lock().unwrap().range(sc.fault_count.0..sc.fault_count.1 + 1);
        for _ in 0..count {
            let (kind, at, dur, pick) = {
                let mut r = rng.lock().unwrap();
                let kind = kinds[r.range(0..kinds.len() as u64) as usize];
                let at = r.millis(1_000, sc.fault_phase.as_millis() as u64 * 9 / 10);
                let dur = r.secs(2, 60);
                (kind, at, dur, r.next_u64())
            };
            let ctx = FaultCtx {
                store: store.clone(),
                knobs: knobs.clone(),
                kube: kube_state.clone(),
                nodes: nodes.clone(),
                zones: sc.zones,
                replicas: sc.replicas,
                slow_commits: sc.slow_commits,
            };
            tasks.push(tokio::spawn(async move {
                tokio::time::sleep_until(start + at).await;
                if Instant::now() + dur < fault_end {
                    inject(kind, dur, pick, &ctx).await;
                }
            }));
        }
    }
    if sc.faults.crash_after_delete {
        knobs.lock().unwrap().crash_after_delete = 0.05;
        let (store, nodes) = (store.clone(), nodes.clone());
        let delay = rng.lock().unwrap().millis(1_000, 10_000);
        tasks.push(tokio::spawn(async move {
            while let Some(writer) = crash_rx.recv().await {
                if Instant::now() + delay >= fault_end {
                    continue;
                }
                // The writer's node (the one controller node outside the HA world).
                let Some(i) = writer_node(&store, &nodes, writer) else { continue };
                let name = nodes.controller_name(i);
                store.lock().unwrap().trace("fault", format!("{name} crashes right after its deletion committed"));
                nodes.set_controller_killed(i, true);
                Handle::current().kill(nodes.controllers[i]);
                tokio::time::sleep(delay).await;
                restart(nodes.controllers[i]);
                nodes.set_controller_killed(i, false);
            }
        }));
    }
    if sc.mirror {
        let (store, fault_phase, mut r) = (store.clone(), sc.fault_phase, SimRng::new(seed ^ MIRROR_STREAM));
        tasks.push(tokio::spawn(async move {
            let count = r.range(6..15);
            let mut changes: Vec<(Duration, u32)> = (0..count)
                .map(|_| (r.millis(5_000, fault_phase.as_millis() as u64 * 9 / 10), r.range(1..6) as u32))
                .collect();
            changes.sort_unstable();
            for (at, to) in changes {
                tokio::time::sleep_until(start + at).await;
                set_reference(&mut store.lock().unwrap(), to);
            }
        }));
    }
    if sc.delay_annotations || sc.long_delays {
        // A user notices the StatefulSets the operator refuses to scale and corrects their annotations.
        let (store, mut r) = (store.clone(), SimRng::new(seed ^ DELAY_FIX_STREAM));
        let at = r.millis(20_000, 120_000);
        let url = if sc.long_delays { IPV6_DELAY_URL } else { VALID_DELAY_URL };
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep_until(start + at).await;
            let mut st = store.lock().unwrap();
            for name in st.delayed_downscale_malformed.clone() {
                let changes = std::collections::BTreeMap::from([
                    (rollout_core::keys::ROLLOUT_DELAYED_DOWNSCALE.to_string(), Some(VALID_DELAY.to_string())),
                    (rollout_core::keys::ROLLOUT_PREPARE_DELAYED_DOWNSCALE_URL.to_string(), Some(url.to_string())),
                ]);
                if st.api_merge_statefulset_annotations(&name, &changes).is_ok() {
                    st.delayed_downscale_malformed.remove(&name);
                    st.delayed_downscale_delays.insert(name.clone(), Duration::from_secs(20));
                    st.trace("user", format!("{name}: corrects its delayed-downscale annotations"));
                }
            }
        }));
    }
    if sc.corrupt_record {
        // The world's actors stop when the fault phase ends: a corruption starts no later than its longest hold
        // (60 s) before that, so its repair always runs.
        let (store, until) = (store.clone(), start + sc.fault_phase.saturating_sub(Duration::from_secs(60)));
        let mut r = SimRng::new(seed ^ CORRUPT_RECORD_STREAM);
        tasks.push(tokio::spawn(async move {
            let mut corruptions = 0;
            while corruptions < 2 && Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(500)).await;
                let Some((record, key, original)) = corrupt_record(&mut store.lock().unwrap()) else { continue };
                tokio::time::sleep(r.millis(30_000, 60_000)).await;
                // The operator cannot have written the record while it was unreadable; a conflict is retried.
                while !repair_record(&mut store.lock().unwrap(), &record, &key, original.as_deref()) {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                corruptions += 1;
                tokio::time::sleep(r.millis(20_000, 60_000)).await;
            }
        }));
    }
    if sc.recent_downscale {
        // Once the record exists, the StatefulSets are re-applied from manifests without the annotation (`kubectl
        // replace`): from then on only the record, bootstrapped from the annotation, remembers zone-b's downscale.
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(500)).await;
                let mut st = store.lock().unwrap();
                let record = st.zone_tracker_config_map.clone();
                if !st.config_maps.contains_key(&record) {
                    continue;
                }
                let annotated: Vec<String> = st
                    .statefulsets
                    .iter()
                    .filter(|(_, s)| {
                        s.metadata
                            .annotations
                            .as_ref()
                            .is_some_and(|a| a.contains_key(rollout_core::keys::LAST_DOWNSCALE))
                    })
                    .map(|(n, _)| n.clone())
                    .collect();
                for name in annotated {
                    let mut sts = st.statefulsets[&name].clone();
                    if let Some(a) = sts.metadata.annotations.as_mut() {
                        a.remove(rollout_core::keys::LAST_DOWNSCALE);
                    }
                    st.put_statefulset(sts);
                    st.trace(
                        "user",
                        format!("re-applied {name} from its manifest: {} dropped", rollout_core::keys::LAST_DOWNSCALE),
                    );
                }
                break;
            }
        }));
    }
    if sc.sidecars {
        let (store, zones, replicas) = (store.clone(), sc.zones, sc.replicas);
        let mut r = SimRng::new(seed ^ SIDECARS_STREAM);
        tasks.push(tokio::spawn(async move {
            loop {
                tokio::time::sleep(r.millis(10_000, 40_000)).await;
                let pod =
                    format!("{}-{}", zone_name(r.range(0..u64::from(zones)) as u32), r.range(0..u64::from(replicas)));
                let crashed = set_sidecar(&mut store.lock().unwrap(), &pod, false);
                let Some(uid) = crashed else { continue };
                tokio::time::sleep(r.millis(5_000, 30_000)).await;
                let mut st = store.lock().unwrap();
                if st.pods.get(&pod).and_then(|p| p.metadata.uid.as_ref()) == Some(&uid) {
                    set_sidecar(&mut st, &pod, true);
                }
            }
        }));
    }
    if sc.relabels {
        let (store, zones, replicas, phase) = (store.clone(), sc.zones, sc.replicas, sc.fault_phase);
        let mut r = SimRng::new(seed ^ RELABELS_STREAM);
        // A user, not aborted with the fault phase: every pod relabelled is relabelled back.
        users.push(tokio::spawn(async move {
            let latest = (phase.as_millis() as u64).saturating_sub(45_000).max(10_001);
            let mut starts: Vec<u64> = (0..r.range(2..4)).map(|_| r.range(10_000..latest)).collect();
            starts.sort_unstable();
            for at in starts {
                tokio::time::sleep_until((start + Duration::from_millis(at)).max(Instant::now())).await;
                let pod =
                    format!("{}-{}", zone_name(r.range(0..u64::from(zones)) as u32), r.range(0..u64::from(replicas)));
                let hold = r.millis(10_000, 40_000);
                let Some(uid) = relabel(&mut store.lock().unwrap(), &pod, true) else { continue };
                tokio::time::sleep(hold).await;
                let mut st = store.lock().unwrap();
                if st.pods.get(&pod).and_then(|p| p.metadata.uid.as_ref()) == Some(&uid) {
                    relabel(&mut st, &pod, false);
                }
            }
        }));
    }
    if sc.evictions {
        let (store, zones) = (store.clone(), sc.zones);
        let mut r = SimRng::new(seed ^ EVICTIONS_STREAM);
        tasks.push(tokio::spawn(async move {
            loop {
                tokio::time::sleep(r.millis(5_000, 30_000)).await;
                let sts = zone_name(r.range(0..u64::from(zones)) as u32);
                let mut st = store.lock().unwrap();
                let replicas = st.statefulsets.get(&sts).and_then(|s| s.spec.as_ref()?.replicas).unwrap_or(0).max(0);
                let pod = format!("{sts}-{}", r.range(0..replicas.max(1) as u64));
                evict(&mut st, &pod);
            }
        }));
    }
    if let Some(drains) = sc.drains.clone() {
        let hosted = one_operator_process.then(|| nodes.clone());
        start_drains(&handle, &store, seed, &sc, drains, hosted, start, &mut tasks);
    }
    if sc.faults.never_ready {
        kube_state.lock().unwrap().never_ready_chance = 0.1;
    }
    if sc.ha.is_some() {
        start_ha_faults(&store, &knobs, &nodes, ha_rng, start, sc.fault_phase, pause_rx, &mut tasks);
    }

    // The fault phase ends: heal everything.
    tokio::time::sleep_until(fault_end).await;
    for t in tasks {
        t.abort();
    }
    {
        *knobs.lock().unwrap() = Knobs::default();
        let net = NetSim::current();
        for (i, node) in nodes.controllers.iter().enumerate() {
            net.unclog_node(*node);
            let frozen_since = nodes.paused.lock().unwrap()[i].take();
            if let Some(from) = frozen_since {
                Handle::current().resume(*node);
                let mut st = store.lock().unwrap();
                let to = st.elapsed();
                st.ha.frozen(crate::ha::identity(i as u32), from, to);
            }
        }
        net.unclog_node(nodes.apiserver);
        st_ha_faults_over(&store);
        net.update_config(|c| *c = madsim::net::Config::default());
        kube_state.lock().unwrap().heal();
        let mut st = store.lock().unwrap();
        let pods: Vec<String> = st.pods.keys().cloned().collect();
        for pod in pods {
            set_sidecar(&mut st, &pod, true);
        }
        // The kubelet sleeps until its next deadline; the heal moved deadlines earlier.
        st.wake_followers();
        let names: Vec<String> = st.statefulsets.keys().cloned().collect();
        for name in names {
            let paused = st.statefulsets[&name]
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(rollout_core::keys::ROLLOUT_PAUSED));
            if paused {
                kube::set_paused(&mut st, &name, false);
            }
        }
        st.trace("sim", "fault phase over: network healed, nodes restarted, pods heal; checking liveness");
    }
    for u in users {
        let _ = u.await;
    }
    // Restarting a node that is running restarts it too: only bring back the ones that are down.
    let (apiserver_down, controllers_down) = nodes.killed.lock().unwrap().clone();
    if apiserver_down {
        restart(nodes.apiserver);
    }
    for (i, down) in controllers_down.into_iter().enumerate() {
        if down {
            restart(nodes.controllers[i]);
        }
    }

    let converged_at = await_convergence(&store, start, fault_end + sc.settle_deadline).await;
    let slow_observations = kube_state.lock().unwrap().slow_observations;
    judge(&store, &sc, seed, start, converged_at, slow_observations)
}

/// The replica changes of the leader (or, without followers, of zone-a) the scaling scenario's user asks for, at
/// their times; none without scaling.
/// Liveness: waits until the group converges or `deadline` passes; a converged group must then stay quiet (no
/// controller write for a while). When it converged, counted from `start`.
async fn await_convergence(store: &SharedStore, start: Instant, deadline: Instant) -> Option<Duration> {
    let mut converged_at = None;
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if converged(&store.lock().unwrap()) {
            converged_at = Some(start.elapsed());
            break;
        }
    }
    // Converged: the controller must also go quiet (no further writes for a while).
    if converged_at.is_some() {
        let writes = store.lock().unwrap().checker.writes_judged;
        tokio::time::sleep(QUIET).await;
        let mut st = store.lock().unwrap();
        if st.checker.writes_judged != writes {
            let at = st.elapsed();
            let detail = format!("the controller kept writing after convergence: {}", st.describe());
            st.checker.record_liveness_failure(at, detail);
        }
        if st.controller_ready.as_ref().is_some_and(|ready| !ready.is_ready()) {
            let at = st.elapsed();
            st.checker
                .record_liveness_failure(at, "the controller converged the group but never reported ready".into());
        }
    }
    converged_at
}

/// The run's verdict: liveness, refused requests and every violation the checker recorded, traced and returned.
fn judge(
    store: &SharedStore,
    sc: &Scenario,
    seed: u64,
    start: Instant,
    converged_at: Option<Duration>,
    slow_observations: u64,
) -> Outcome {
    let mut st = store.lock().unwrap();
    match converged_at {
        Some(at) => st.trace("sim", format!("converged at {:.1}s", at.as_secs_f64())),
        None => match held_by_a_partitions_last_pod(&st) {
            Some(why) => {
                st.checker.drains.held_by_last_pod += 1;
                let line = format!("not converged, held by a partition budget as designed: {why}; {}", st.describe());
                st.trace("checker", line);
            }
            None => {
                let at = st.elapsed();
                let detail = format!(
                    "not converged {}s after the faults stopped: {}",
                    sc.settle_deadline.as_secs(),
                    st.describe()
                );
                st.checker.record_liveness_failure(at, detail);
            }
        },
    }
    for request in st.forbidden.clone() {
        let at = st.elapsed();
        st.checker.record_forbidden(at, format!("refused with 403: {request}"));
    }
    judge_undos(&mut st);
    let violations = st.checker.violations.clone();
    for v in &violations {
        let line = format!("VIOLATION {} at {:.3}s: {}", v.invariant, v.at.as_secs_f64(), v.detail);
        st.trace("checker", line);
    }
    let verdict = if violations.is_empty() {
        "all invariants held".to_string()
    } else {
        format!("{} violations", violations.len())
    };
    let judged = st.checker.writes_judged;
    let downscales = st.checker.downscales.len() as u64;
    let min_downscale_gap = st.checker.min_commit_gap;
    if sc.scaling.is_some() {
        let gap = min_downscale_gap.map_or("none".to_string(), |g| format!("{:.3}s", g.as_secs_f64()));
        st.trace("checker", format!("{downscales} downscales committed; closest two zones' commits {gap} apart"));
    }
    st.trace("checker", format!("{verdict}; {judged} controller writes judged"));
    let events = st.events.stats(judged + st.controller_replica_changes);
    if sc.events {
        st.trace("checker", events.describe());
    }
    Outcome {
        seed,
        violations,
        converged_at,
        sim_time: start.elapsed(),
        writes_judged: st.checker.writes_judged,
        trace: st.trace.clone(),
        downscales,
        min_downscale_gap,
        near_min_time: st.checker.near_min_time,
        rolled_while_scaling: st.checker.rolled_while_scaling,
        scaled_while_rolling: st.checker.scaled_while_rolling,
        downscaled_while_rolling: st.checker.downscaled_while_rolling,
        slow_observations,
        reactions: st.reactions.clone(),
        events,
        no_downscale_admissions: st.checker.no_downscale_admissions,
        prepare_foreign_admissions: st.checker.prepare_foreign_admissions,
        prepared_pods: st.checker.prepared_pods,
        delayed_downscale_lateness: st.checker.delayed_downscale_lateness.clone(),
        undos_judged: st.checker.undos_judged,
        scale_requests: st.scale_requests,
        drains: st.checker.drains,
        ha: st.ha.stats.clone(),
    }
}

/// The cluster at the start: the group's StatefulSets, annotated as the scenario says, each with its pods at the
/// first revision, all Ready.
fn populate(store: &SharedStore, sc: &Scenario, seed: u64) {
    let mut st = store.lock().unwrap();
    st.checker.concurrent_downscales_excused = sc.zone_tracker_config_map().is_none();
    // Where the webhook serves the group and the tracker's ConfigMap may be used, every rollout step is claimed.
    st.step_claims_required = sc.scaling.as_ref().is_some_and(|s| s.admission == Admission::Webhook)
        && sc.zone_tracker_config_map().is_some()
        && sc.deployment.is_none_or(|d| d == ReferenceDeployment::Jsonnet)
        && sc.defences.has(rollout_core::defences::Layer::RolloutStepClaims);
    st.replica_changes_refused = sc.deployment == Some(ReferenceDeployment::NoPatch);
    // Only where the leader goes down unclaimed: elsewhere its downscales are denied with the followers' (the same
    // claim is refused), so the followers must still match it.
    st.follower_downscales_refused = sc.scaling.as_ref().is_some_and(|s| s.admission == Admission::Direct)
        && sc.zone_tracker_config_map().is_some()
        && sc.deployment.is_some_and(|d| d != ReferenceDeployment::Jsonnet);
    if sc.no_downscale {
        populate_no_downscale(&mut st);
    }
    if sc.mirror {
        st.api_resources.push(rollout_operator::cluster::ApiResourceRef {
            group: MIRROR_GROUP.into(),
            version: "v1".into(),
            kind: "ReplicaTemplate".into(),
            plural: "replicatemplates".into(),
        });
        // In the long-delays world the user asked for one replica fewer three days ago (pods prepare below).
        let reference = if sc.long_delays { sc.replicas - 1 } else { sc.replicas };
        set_reference(&mut st, reference);
    }
    if let Some(d) = sc.deployment {
        let tracker = if d.zone_tracker() { "with" } else { "without" };
        st.trace("sim", format!("RBAC of the {} deployment, {tracker} the zone tracker", d.name()));
    }
    st.trace(
        "sim",
        format!(
            "seed {seed}: {} zones x {} pods, max unavailable {}, planner {}",
            sc.zones,
            sc.replicas,
            sc.max_unavailable,
            sc.planner.name()
        ),
    );
    let groups: &[&str] = if sc.second_group { &[GROUP, SECOND_GROUP] } else { &[GROUP] };
    for (group, z) in groups.iter().flat_map(|g| (0..sc.zones).map(move |z| (*g, z))) {
        let name = group_zone_name(group, z);
        let mut sts = objects::statefulset(group, &name, sc.replicas, sc.max_unavailable);
        if sc.min_ready_seconds > 0
            && let Some(spec) = sts.spec.as_mut()
        {
            spec.min_ready_seconds = Some(sc.min_ready_seconds as i32);
        }
        if sc.mirror && group == GROUP {
            st.mirrors.insert(name.clone());
            objects::annotate(&mut sts, rollout_core::keys::MIRROR_REPLICAS_FROM_RESOURCE_NAME, GROUP);
            objects::annotate(&mut sts, rollout_core::keys::MIRROR_REPLICAS_FROM_RESOURCE_KIND, "ReplicaTemplate");
            // Zone-b writes the group without a version, which Go's `schema.ParseGroupVersion` accepts (only the
            // group is used to find the resource).
            let api_version = if z == 1 { format!("{MIRROR_GROUP}/") } else { format!("{MIRROR_GROUP}/v1") };
            objects::annotate(&mut sts, rollout_core::keys::MIRROR_REPLICAS_FROM_RESOURCE_API_VERSION, &api_version);
            if let Some(value) = sc.mirror_write_back {
                objects::annotate(&mut sts, rollout_core::keys::MIRROR_REPLICAS_FROM_RESOURCE_WRITE_BACK, value);
            }
            if sc.delayed_downscale {
                // 20 s, in two units (Prometheus' duration format): the checker judges by the 20 s it meant.
                let (delay, url) = match delay_text(sc, seed, z) {
                    DelayText::Valid => {
                        st.delayed_downscale_delays.insert(name.clone(), Duration::from_secs(20));
                        (VALID_DELAY, VALID_DELAY_URL)
                    }
                    DelayText::Off(delay) => (delay, VALID_DELAY_URL),
                    DelayText::Malformed { delay, url } => {
                        st.delayed_downscale_malformed.insert(name.clone());
                        (delay, url)
                    }
                    DelayText::Long { delay, days } => {
                        st.delayed_downscale_delays.insert(name.clone(), Duration::from_secs(days * 24 * 3600));
                        // The pod above the reference has been preparing since the user's downscale (whole seconds,
                        // as a pod answers).
                        let pod = format!("{name}-{}", sc.replicas - 1);
                        let now =
                            Timestamp::from_second(Timestamp::now().as_second()).unwrap_or_else(|_| Timestamp::now());
                        let since = now - jiff::SignedDuration::try_from(PREPARING_BEFORE_THE_RUN).unwrap_or_default();
                        st.prepared.insert(pod.clone(), since);
                        st.trace(
                            "sim",
                            format!("{pod} has been preparing for a delayed downscale ({delay}) for 3 days"),
                        );
                        (delay, VALID_DELAY_URL)
                    }
                };
                objects::annotate(&mut sts, rollout_core::keys::ROLLOUT_DELAYED_DOWNSCALE, delay);
                objects::annotate(&mut sts, rollout_core::keys::ROLLOUT_PREPARE_DELAYED_DOWNSCALE_URL, url);
            }
        }
        if let Some(value) = &sc.max_unavailable_annotation {
            let spelled = max_unavailable_text(value, seed, z);
            objects::annotate(&mut sts, rollout_core::keys::ROLLOUT_MAX_UNAVAILABLE, spelled);
        }
        if let Some(scaling) = &sc.scaling {
            let forgotten = sc.follower_without_min_time && scaling.followers && z + 1 == sc.zones && z > 0;
            if !forgotten {
                let min_time = go_duration_text(scaling.min_time);
                objects::annotate(&mut sts, rollout_core::keys::MIN_TIME_BETWEEN_ZONES_DOWNSCALE, &min_time);
                st.min_times.insert(sts.metadata.name.clone().unwrap_or_default(), scaling.min_time);
            }
            if scaling.admission == Admission::Webhook {
                sts.metadata
                    .labels
                    .get_or_insert_default()
                    .insert(rollout_core::keys::PREPARE_DOWNSCALE.into(), "true".into());
                objects::annotate(&mut sts, rollout_core::keys::PREPARE_DOWNSCALE_HTTP_PORT, "8080");
                objects::annotate(&mut sts, rollout_core::keys::PREPARE_DOWNSCALE_HTTP_PATH, "prepare-shutdown");
            }
            if z > 0 && scaling.followers {
                objects::annotate(&mut sts, rollout_core::keys::ROLLOUT_DOWNSCALE_LEADER, &group_zone_name(group, 0));
                if sc.leader_ready_upscales {
                    objects::annotate(&mut sts, rollout_core::keys::ROLLOUT_UPSCALE_ONLY_WHEN_LEADER_READY, "true");
                }
            }
            if sc.recent_downscale && z == 1 {
                let at = rollout_core::downscale::round_up_to_second(Timestamp::now());
                objects::annotate(
                    &mut sts,
                    rollout_core::keys::LAST_DOWNSCALE,
                    &rollout_core::downscale::format_timestamp(at),
                );
                let min_time = Some(scaling.min_time);
                st.checker.record_downscale(crate::checker::Downscale {
                    commit_rv: 0,
                    basis_rv: None,
                    at: Duration::ZERO,
                    sts: name.clone(),
                    group: group.to_string(),
                    from: sc.replicas + 1,
                    to: sc.replicas,
                    by: "someone before the operator started".to_string(),
                    min_time,
                    recorded_at: Some(Duration::ZERO),
                    exempt: false,
                    follower: false,
                });
            }
        }
        // The budget selects the group's pods by the group's label, which their template then carries.
        let budget_labels = (sc.drains.is_some() && group == GROUP).then(|| {
            std::collections::BTreeMap::from([(rollout_core::keys::ROLLOUT_GROUP.to_string(), GROUP.to_string())])
        });
        if let (Some(labels), Some(spec)) = (&budget_labels, sts.spec.as_mut()) {
            spec.template.metadata.get_or_insert_default().labels = Some(labels.clone());
        }
        st.put_statefulset(sts);
        for i in 0..sc.replicas {
            let pod_name = format!("{name}-{i}");
            let uid = st.new_uid(&pod_name);
            let mut pod = objects::pod(&name, i, &revision_name(&name, 0), uid, true, Timestamp::now());
            if sc.sidecars {
                objects::add_sidecar(&mut pod);
            }
            if let Some(labels) = &budget_labels {
                pod.metadata.labels.get_or_insert_default().extend(labels.clone());
            }
            st.put_pod(pod);
        }
    }
    if let Some(drains) = &sc.drains {
        let budget = crate::drains::budget_object(GROUP, drains);
        // The checker reads the world's budget as it reads every later version (in force from the start).
        let rule =
            crate::checker::BudgetRule::read(&budget).expect("the drains world's budget is one the checker reads");
        st.budgets.push(budget);
        st.checker.budgets.push(rule);
        let mode = match drains.mode {
            crate::drains::BudgetMode::Zones => "zone mode",
            crate::drains::BudgetMode::Partitions => "partition mode",
        };
        st.trace(
            "sim",
            format!(
                "ZoneAwarePodDisruptionBudget {} ({mode}, max unavailable {}), {} operator replicas serving the {} \
                 eviction webhook",
                crate::drains::BUDGET,
                drains.max_unavailable,
                drains.replicas,
                drains.evictor.name()
            ),
        );
    }
    let snapshot = st.describe();
    st.trace("cluster", snapshot);
}

/// Runs the controller with the scenario's planner (the production one, or a test-only one with a known bug).
async fn run_with_planner(planner: PlannerKind, api: SimCluster, setup: ControllerSetup) {
    match planner {
        PlannerKind::Real => run_controller(api, setup, RolloutPlanner).await,
        PlannerKind::StatusCountReadiness => run_controller(api, setup, rollout_known_bugs::StatusCountReadiness).await,
        PlannerKind::PausedLetsOthersProceed => {
            run_controller(api, setup, rollout_known_bugs::PausedLetsOthersProceed).await
        }
        PlannerKind::NoExpectations => run_controller(api, setup, rollout_known_bugs::NoExpectations).await,
        PlannerKind::TerminatingCountsAsReady => {
            run_controller(api, setup, rollout_known_bugs::TerminatingCountsAsReady).await
        }
        PlannerKind::SkipsMinTimeCheck => run_controller(api, setup, rollout_known_bugs::SkipsMinTimeCheck).await,
        PlannerKind::IgnoresDownscalesInProgress => {
            run_controller(api, setup, rollout_known_bugs::IgnoresDownscalesInProgress).await
        }
        PlannerKind::DownscalesDuringRollouts => {
            run_controller(api, setup, rollout_known_bugs::DownscalesDuringRollouts).await
        }
        PlannerKind::PercentAsCount => run_controller(api, setup, rollout_known_bugs::PercentAsCount).await,
        PlannerKind::IgnoresMinReadySeconds => {
            run_controller(api, setup, rollout_known_bugs::IgnoresMinReadySeconds).await
        }
        PlannerKind::IgnoresObservedGeneration => {
            run_controller(api, setup, rollout_known_bugs::IgnoresObservedGeneration).await
        }
        PlannerKind::MinTimeSecondEarly => run_controller(api, setup, rollout_known_bugs::MinTimeSecondEarly).await,
        PlannerKind::MissingPodsSpendNoBudget => {
            run_controller(api, setup, rollout_known_bugs::MissingPodsSpendNoBudget).await
        }
        PlannerKind::CondemnedPodFillsMissingSlot => {
            run_controller(api, setup, rollout_known_bugs::CondemnedPodFillsMissingSlot).await
        }
        PlannerKind::IgnoresContainerReadiness => {
            run_controller(api, setup, rollout_known_bugs::IgnoresContainerReadiness).await
        }
        PlannerKind::UpscalesBeforeLeaderReady => {
            run_controller(api, setup, rollout_known_bugs::UpscalesBeforeLeaderReady).await
        }
        PlannerKind::FinishesStepWhileOutcomeUnknown => {
            run_controller(api, setup, rollout_known_bugs::FinishesStepWhileOutcomeUnknown).await
        }
    }
}

/// With `recent_downscale`: a downscale of zone-a asked between a quarter and three quarters of the min time into
/// the run, from a generator of its own (the run's other draws do not move).
fn with_recent_downscale(sc: &Scenario, seed: u64, mut changes: Vec<(Duration, u32)>) -> Vec<(Duration, u32)> {
    let Some(scaling) = sc.scaling.as_ref().filter(|_| sc.recent_downscale) else { return changes };
    let min = scaling.min_time.as_millis() as u64;
    let at = SimRng::new(seed ^ RECENT_DOWNSCALE_STREAM).millis(min / 4, min * 3 / 4);
    changes.insert(0, (at, sc.replicas.saturating_sub(1).max(1)));
    changes.sort_unstable();
    changes
}

const RECENT_DOWNSCALE_STREAM: u64 = 0x7265_6365_6e74_6473;

fn scaling_changes(sc: &Scenario, rng: &Mutex<SimRng>) -> Vec<(Duration, u32)> {
    let Some(scaling) = &sc.scaling else { return Vec::new() };
    let mut changes = draw_changes(sc, scaling, &mut rng.lock().unwrap());
    changes.sort_unstable();
    changes
}

/// One user's replica changes, in the order drawn: how many (within `scaling.changes`), then each one's time in the
/// fault phase and target (within `scaling.replicas`).
fn draw_changes(sc: &Scenario, scaling: &ScalingScenario, r: &mut SimRng) -> Vec<(Duration, u32)> {
    let count = r.range(scaling.changes.0..scaling.changes.1 + 1);
    (0..count)
        .map(|_| {
            let at = r.millis(5_000, sc.fault_phase.as_millis() as u64 * 9 / 10);
            let to = r.range(u64::from(scaling.replicas.0)..u64::from(scaling.replicas.1) + 1) as u32;
            (at, to)
        })
        .collect()
}

/// Probing the min time's boundary: after each follower downscale the controller commits, the user asks for a
/// downscale of the leader at that commit plus the min time, from 1.5 s before to 1.5 s after, so the webhook's
/// min-time check is asked again and again right at its boundary.
#[derive(Debug, Clone)]
struct Probes {
    min_time: Duration,
    /// No probe is sent after this (the fault phase's scaling window).
    until: Instant,
    rng: SimRng,
}

/// How the webhook's stand-in of the record-claim worlds claims: with the zone tracker or not, its min-time check a
/// second late (`min-time-second-early`), and the defences of the zone tracker's claims in force.
#[derive(Debug, Clone, Copy)]
struct StandIn {
    /// The leader's changes are applied as asked ([`Admission::Direct`]).
    direct: bool,
    tracker: bool,
    second_early: bool,
    defences: Defences,
}

/// The user's replica changes of the leader, at their times (and, with `probes`, the boundary probes): upscales are
/// applied; a downscale is first claimed in the group downscale record, as the prepare-downscale webhook does on
/// admission, and denied when the claim is refused or fails (the webhook's failure policy is Fail); with
/// [`Admission::Direct`] every change is applied as asked.
/// `second_early`: the min-time check is asked a second late (as an off-by-one of a second in the check would).
async fn scale_leader(
    store: SharedStore,
    changes: Vec<(Duration, u32)>,
    start: Instant,
    stand_in: StandIn,
    mut probes: Option<Probes>,
) {
    let leader = zone_name(0);
    let api = SimCluster::connect(apiserver::WEBHOOK_INCARNATION).await.expect("bind webhook endpoint");
    let mut changes: std::collections::VecDeque<(Instant, u32)> =
        changes.into_iter().map(|(at, to)| (start + at, to)).collect();
    let (mut probe_at, mut seen) = (Vec::<Instant>::new(), 0usize);
    loop {
        let Some(p) = probes.as_mut() else {
            let Some((at, to)) = changes.pop_front() else { break };
            tokio::time::sleep_until(at).await;
            change_leader(&store, &api, &leader, to, stand_in).await;
            continue;
        };
        {
            let st = store.lock().unwrap();
            for d in &st.checker.downscales[seen..] {
                if d.by.starts_with("controller") {
                    let at = (start + d.at + p.min_time + p.rng.millis(0, 3_000)) - Duration::from_millis(1_500);
                    if at < p.until {
                        probe_at.push(at);
                    }
                }
            }
            seen = st.checker.downscales.len();
        }
        probe_at.sort_unstable();
        let now = Instant::now();
        if changes.is_empty() && probe_at.is_empty() && now >= p.until {
            break;
        }
        let next_change = changes.front().map(|(at, _)| *at);
        let next_probe = probe_at.first().copied();
        let next = [next_change, next_probe].into_iter().flatten().min();
        match next {
            Some(at) if at <= now => {
                if next_probe == Some(at) {
                    probe_at.remove(0);
                    let from = {
                        let st = store.lock().unwrap();
                        st.statefulsets[&leader].spec.as_ref().and_then(|s| s.replicas).unwrap_or(1).max(0) as u32
                    };
                    if from > 1 {
                        store
                            .lock()
                            .unwrap()
                            .trace("user", format!("probes the min time: {leader} {from} -> {}", from - 1));
                        change_leader(&store, &api, &leader, from - 1, stand_in).await;
                    }
                } else if let Some((_, to)) = changes.pop_front() {
                    change_leader(&store, &api, &leader, to, stand_in).await;
                }
            }
            // Followers' downscales are noticed within a second (a probe comes at least 28 s after one).
            Some(at) => tokio::time::sleep_until(at.min(now + Duration::from_secs(1))).await,
            None => tokio::time::sleep(Duration::from_secs(1)).await,
        }
    }
}

/// One change of the leader's replicas to `to`, as [`scale_leader`] describes.
async fn change_leader(store: &SharedStore, api: &SimCluster, leader: &str, to: u32, stand_in: StandIn) {
    let StandIn { direct, tracker, second_early, defences } = stand_in;
    let leader = leader.to_string();
    // The time the min-time check is asked at.
    let checked = |now: Timestamp| if second_early { now + jiff::SignedDuration::from_secs(1) } else { now };
    {
        let (from, group, record, read_at) = {
            let st = store.lock().unwrap();
            let from = st.statefulsets[&leader].spec.as_ref().and_then(|s| s.replicas).unwrap_or(1).max(0) as u32;
            let views = st.statefulsets.values().filter_map(|s| StatefulSetView::from_k8s(s).ok()).collect();
            (from, GroupSnapshot::assemble(GROUP, views, &[]), st.zone_tracker_config_map.clone(), st.rv)
        };
        if to >= from || direct {
            if to != from {
                kube::set_replicas(&mut store.lock().unwrap(), &leader, to, "user");
            }
            return;
        }
        if !tracker {
            // Without the zone tracker, as the webhook does: the min time against the other zones' annotations,
            // the downscale recorded in the leader's own annotation (through the admission's JSONPatch), dated at
            // the answer plus the commit margin.
            let mut st = store.lock().unwrap();
            let now = Timestamp::now();
            match rollout_core::check_min_time(&group, None, &leader, checked(now)) {
                rollout_core::MinTimeVerdict::Elapsed => {
                    let at =
                        rollout_core::downscale::downscale_committed_by(now, rollout_core::downscale::COMMIT_MARGIN);
                    let patch = rollout_core::admission::prepare::last_downscale_patch(&serde_json::json!({}), at);
                    if let Err(e) = crate::guaranteed_update::apply_annotation_patch(&mut st, &leader, &patch) {
                        st.trace("webhook", format!("cannot record the downscale: {e}"));
                        return;
                    }
                    st.writer_basis = Some(read_at);
                    kube::set_replicas(&mut st, &leader, to, "webhook");
                    st.writer_basis = None;
                }
                refused => st.trace("webhook", format!("denied {leader} {from} -> {to}: {}", refused.describe())),
            }
            return;
        }
        let now = Timestamp::now();
        let until = now + jiff::SignedDuration::from_secs(60);
        let claim =
            claim_downscale_marked(api, &record, &group, &leader, Claimant::Admission, checked(now), until, defences)
                .await;
        let committed = {
            let mut st = store.lock().unwrap();
            match claim {
                Ok(MarkedClaim::Claimed { .. }) => {
                    kube::set_replicas(&mut st, &leader, to, "webhook");
                    true
                }
                Ok(refused) => {
                    st.trace("webhook", format!("denied {leader} {from} -> {to}: {refused:?}"));
                    false
                }
                Err(e) => {
                    st.trace("webhook", format!("denied {leader} {from} -> {to}: {e}"));
                    false
                }
            }
        };
        if committed {
            // Dated after the commit, as the webhook does; a failure leaves the later claim date.
            let end = ClaimEnd::Committed { at: Timestamp::now() };
            let _ = finish_marked_claim(api, &record, &leader, until, &[until], end, defences).await;
        }
    }
}

/// The pods' prepare-shutdown endpoints: most answer within 40 ms, some take seconds, a few refuse (HTTP 500) or are
/// unreachable. Deterministic: the delays and failures come from the run's generator.
#[derive(Clone)]
pub(crate) struct SimPods {
    rng: Arc<Mutex<SimRng>>,
    /// Where the answered calls are logged ([`Store::pod_calls`]).
    store: SharedStore,
}

/// [`crate::checker::PREPARE_UNDONE`], at the end of the run: each pod a denied downscale had prepared was sent a
/// DELETE after its POST (the undo runs on a task of its own, so it may end after the answer; a denial in the last
/// minute is not judged).
fn judge_undos(st: &mut Store) {
    let now = Instant::now();
    let mut missing = Vec::new();
    let mut judged = 0;
    for owed in &st.undos_owed {
        if owed.denied_at + Duration::from_secs(60) > now {
            continue;
        }
        judged += 1;
        for (pod, prepared_at) in &owed.pods {
            if !st.pod_calls.iter().any(|c| !c.post && c.pod == *pod && c.at >= *prepared_at) {
                missing.push(format!("{}: {pod} was prepared and never cancelled", owed.what));
            }
        }
    }
    st.checker.undos_judged += judged;
    let at = st.elapsed();
    for detail in missing {
        st.checker.violate(at, crate::checker::PREPARE_UNDONE, detail);
    }
}

/// The pod a URL built as `<pod>.<service>.<namespace>.svc.<domain>` addresses.
fn pod_of_url(url: &str) -> &str {
    let host = url.split_once("://").map_or(url, |(_, rest)| rest);
    host.split(['.', ':', '/']).next().unwrap_or_default()
}

impl PodHttpClient for SimPods {
    async fn call(&self, request: PodRequest) -> Result<PodResponse, PodCallError> {
        let (delay, roll) = {
            let mut r = self.rng.lock().unwrap();
            let slow = r.chance(0.3);
            (if slow { r.millis(1_000, 6_000) } else { r.millis(1, 40) }, r.range(0..100))
        };
        tokio::time::sleep(delay).await;
        self.store.lock().unwrap().pod_calls.push(crate::store::PodCall {
            pod: pod_of_url(&request.url).to_string(),
            post: request.method == PodMethod::Post,
            ok: roll >= 5,
            at: Instant::now(),
        });
        match roll {
            0..3 => Ok(PodResponse { status: 500, body: b"not now".to_vec() }),
            3..5 => Err(PodCallError::Transport {
                method: if request.method == PodMethod::Post { "POST" } else { "DELETE" },
                url: request.url.clone(),
                message: "connection refused".into(),
            }),
            _ => Ok(PodResponse { status: 200, body: Vec::new() }),
        }
    }
}

/// Under a partition budget, a pod still to be replaced whose partition has no slot in any other zone of its group
/// (each other StatefulSet's replicas, spec and status, at most its ordinal): replacing it would leave the
/// partition with no pod at all, which the controller never does (`rollout_core::zpdb::decision::AbsentPeer`), so
/// the rollout waits for a person or for the zones to be scaled alike (the per-zone HPAs of `--webhook` leave them
/// different). Such a run is reported, not failed; any other way of not converging still fails.
fn held_by_a_partitions_last_pod(st: &Store) -> Option<String> {
    let replicas = |s: &k8s_openapi::api::apps::v1::StatefulSet| {
        let spec = s.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0).max(0) as u32;
        let status = s.status.as_ref().map_or(0, |s| s.replicas.max(0) as u32);
        spec.max(status)
    };
    let group_of = |s: &k8s_openapi::api::apps::v1::StatefulSet| {
        s.metadata.labels.as_ref().and_then(|l| l.get(rollout_core::keys::ROLLOUT_GROUP).cloned()).unwrap_or_default()
    };
    for rule in st.checker.budgets.iter().filter(|b| b.partitions && b.until.is_none()) {
        let zones: Vec<(&String, &k8s_openapi::api::apps::v1::StatefulSet)> =
            st.statefulsets.iter().filter(|(_, s)| group_of(s) == rule.group).collect();
        for (name, sts) in &zones {
            let want = sts.status.as_ref().and_then(|s| s.update_revision.clone()).unwrap_or_default();
            for ordinal in 0..sts.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0).max(0) as u32 {
                let pod = format!("{name}-{ordinal}");
                let stale = st.pods.get(&pod).is_some_and(|p| objects::pod_revision(p) != want);
                let alone = zones.iter().filter(|(other, _)| other != name).all(|(_, s)| replicas(s) <= ordinal);
                if stale && alone {
                    return Some(format!(
                        "{pod} is the only pod of partition {ordinal} (every other zone of group {} has at most \
                         {ordinal} replicas), so it is never replaced",
                        rule.group
                    ));
                }
            }
        }
    }
    None
}

/// Every StatefulSet on its template's revision (the user's last word), status current, every pod there, Ready and
/// not terminating; followers and mirrors at their replicas, and a StatefulSet whose force replicas is ignored at
/// the replicas it had.
pub fn converged(st: &Store) -> bool {
    st.statefulsets.iter().all(|(name, sts)| {
        let want = objects::template_revision(sts);
        let status = sts.status.clone().unwrap_or_default();
        let replicas = sts.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0).max(0) as u32;
        status.update_revision.as_deref() == Some(want.as_str())
            && status.current_revision.as_deref() == Some(want.as_str())
            && status.observed_generation == sts.metadata.generation
            && (0..replicas).all(|i| {
                st.pods.get(&format!("{name}-{i}")).is_some_and(|p| {
                    objects::is_ready(p) && p.metadata.deletion_timestamp.is_none() && objects::pod_revision(p) == want
                })
            })
            && (st.replica_changes_refused || (followers_match_leader(st, sts) && mirrors_match_reference(st, sts)))
            && st.force_ignored.get(name).is_none_or(|had| sts.spec.as_ref().and_then(|s| s.replicas) == Some(*had))
            && !st.pods.values().any(|p| {
                objects::owner_of(p) == *name
                    && p.metadata
                        .name
                        .as_deref()
                        .and_then(|n| n.strip_prefix(&format!("{name}-")))
                        .and_then(|o| o.parse::<u32>().ok())
                        .is_some_and(|o| o >= replicas)
            })
    })
}

/// `d` as a user may write it in a Go duration annotation, in a different form for each of the worlds' min times
/// (a fraction of a minute, milliseconds, a fraction of an hour and seconds together), so the parser's every path is
/// read; the checker judges against `d` itself (the world hands it over: [`Store::min_times`]), never against what
/// the operator's parser makes of the text.
fn go_duration_text(d: Duration) -> String {
    match d.as_secs() {
        30 => "0.5m".to_string(),
        15 => "0.25m".to_string(),
        // Every sub-second unit, in no particular order (Go takes any): 4 s + 5 s + 1 s.
        10 => "4000ms5000000000ns1000000us".to_string(),
        // Hours too: 0.01 h is exactly 36 s.
        60 => "0.01h24s".to_string(),
        n => format!("{n}s"),
    }
}

/// A mirror StatefulSet has its reference's `spec.replicas`, written back into the reference's `status.replicas`
/// unless its write-back annotation says not to (then the reference's status is never written: it has none).
fn mirrors_match_reference(st: &Store, sts: &k8s_openapi::api::apps::v1::StatefulSet) -> bool {
    let annotations = sts.metadata.annotations.as_ref();
    let mirrors = annotations.is_some_and(|a| a.contains_key(rollout_core::keys::MIRROR_REPLICAS_FROM_RESOURCE_NAME));
    if !mirrors {
        return true;
    }
    // Go's strconv.ParseBool, written out here (the checker does not use the code it judges); anything else is no
    // write-back, as in the reference.
    let write_back = annotations
        .and_then(|a| a.get(rollout_core::keys::MIRROR_REPLICAS_FROM_RESOURCE_WRITE_BACK))
        .is_none_or(|v| ["1", "t", "T", "TRUE", "true", "True"].contains(&v.as_str()));
    let replicas = sts.spec.as_ref().and_then(|s| s.replicas).map(i64::from);
    let expected_status = if write_back { replicas } else { None };
    // A delay longer than a day never elapses within a run: such a mirror ends at its reference or above it (a
    // downscale still waiting), and writes back its own replicas, which other zones' write-backs overwrite.
    let name = sts.metadata.name.as_deref().unwrap_or_default();
    let never_elapses = st.delayed_downscale_delays.get(name).is_some_and(|d| *d > Duration::from_secs(24 * 3600));
    if never_elapses {
        return reference_replicas(st)
            .is_some_and(|(spec, status)| spec <= replicas && status.is_some() == expected_status.is_some());
    }
    reference_replicas(st).is_some_and(|(spec, status)| spec == replicas && status == expected_status)
}

/// A follower (`grafana.com/rollout-downscale-leader`) has its leader's replicas, or, while it carries
/// `grafana.com/rollout-force-replicas`, that many (read here as the user wrote it: a plain integer). Not a
/// follower: nothing to match (a force replicas there is ignored).
fn followers_match_leader(st: &Store, sts: &k8s_openapi::api::apps::v1::StatefulSet) -> bool {
    let replicas = |s: &k8s_openapi::api::apps::v1::StatefulSet| s.spec.as_ref().and_then(|s| s.replicas);
    let annotations = sts.metadata.annotations.as_ref();
    let leader = annotations.and_then(|a| a.get(rollout_core::keys::ROLLOUT_DOWNSCALE_LEADER));
    if let (Some(_), Some(force)) =
        (leader, annotations.and_then(|a| a.get(rollout_core::keys::ROLLOUT_FORCE_REPLICAS)))
    {
        return force.parse::<i32>().ok() == replicas(sts);
    }
    // A follower without a min time follows its leader up only, once another zone's downscale is recorded: it ends
    // at its leader's replicas or above.
    let no_min_time =
        !annotations.is_some_and(|a| a.contains_key(rollout_core::keys::MIN_TIME_BETWEEN_ZONES_DOWNSCALE));
    // Where the record's writes are refused, its followers' downscales (claimed there) cannot happen: they end at
    // their leader's replicas or above too.
    leader.is_none_or(|l| {
        st.statefulsets.get(l).is_some_and(|l| match no_min_time || st.follower_downscales_refused {
            true => replicas(l) <= replicas(sts),
            false => replicas(l) == replicas(sts),
        })
    })
}

/// The controller node whose process `writer` (an incarnation) is: the HA replica of that identity, or the one
/// controller node.
fn writer_node(store: &SharedStore, nodes: &Nodes, writer: u64) -> Option<usize> {
    if nodes.controllers.len() == 1 {
        return Some(0);
    }
    let st = store.lock().unwrap();
    let identity = st.ha.identity_of(writer)?;
    (0..nodes.controllers.len()).find(|i| crate::ha::identity(*i as u32) == identity)
}

/// The HA world's measurements close with the fault phase.
fn st_ha_faults_over(store: &SharedStore) {
    store.lock().unwrap().ha.faults_over();
}

/// Pauses HA replica `i` for `down` (unless it is down or paused already), then resumes it.
async fn pause_replica(store: &SharedStore, nodes: &Nodes, i: usize, down: Duration, why: &str) {
    let name = nodes.controller_name(i);
    {
        let mut paused = nodes.paused.lock().unwrap();
        if paused[i].is_some() || nodes.killed.lock().unwrap().1[i] {
            return;
        }
        let mut st = store.lock().unwrap();
        st.trace("fault", format!("{name} frozen {why} for {:.1}s", down.as_secs_f64()));
        paused[i] = Some(st.elapsed());
    }
    Handle::current().pause(nodes.controllers[i]);
    tokio::time::sleep(down).await;
    let frozen_since = nodes.paused.lock().unwrap()[i].take();
    if let Some(from) = frozen_since {
        Handle::current().resume(nodes.controllers[i]);
        let mut st = store.lock().unwrap();
        let to = st.elapsed();
        st.ha.frozen(crate::ha::identity(i as u32), from, to);
        st.trace("fault", format!("{name} resumes"));
    }
}

/// The HA world's own faults, from its own generator: replicas frozen for longer than the lease (at
/// random moments, and, through the API server, with a pass's live read in flight), and the leader killed while
/// its group has work (kept down 30-45 s, so another replica takes over; the failover is measured from the kill to
/// the first controller write another process commits).
#[allow(clippy::too_many_arguments)]
fn start_ha_faults(
    store: &SharedStore,
    knobs: &Arc<Mutex<Knobs>>,
    nodes: &Arc<Nodes>,
    mut r: SimRng,
    start: Instant,
    fault_phase: Duration,
    mut pause_rx: tokio::sync::mpsc::UnboundedReceiver<u64>,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) {
    let lease = rollout_core::election::ElectionConfig::new("").lease_duration;
    let latest = fault_phase.as_millis() as u64 * 9 / 10;
    knobs.lock().unwrap().pause_in_flight = 0.3;
    // A freeze of the leader with a request of its pass in flight (one at a time, 30 s apart at least), until
    // about when its Lease expires.
    let (s, n, mut pr) = (store.clone(), nodes.clone(), SimRng::new(r.next_u64()));
    tasks.push(tokio::spawn(async move {
        while let Some(writer) = pause_rx.recv().await {
            let Some(i) = writer_node(&s, &n, writer) else { continue };
            // Resumed from 2 s before its Lease expires by the API server's clock to 6 s after (before or after
            // another replica takes over, which takes at least the lease from its last renewal).
            let expires = s.lock().unwrap().ha.expires_at().unwrap_or_else(|| start.elapsed() + lease);
            let resume_at = (expires + pr.millis(0, 8_000)).saturating_sub(Duration::from_secs(2));
            let down = resume_at.saturating_sub(start.elapsed()).max(Duration::from_secs(1));
            if start.elapsed() + down + Duration::from_secs(5) >= fault_phase {
                continue;
            }
            {
                let mut st = s.lock().unwrap();
                st.ha.stats.paused_mid_pass += 1;
                st.ha.stats.long_pauses += u64::from(down > lease);
            }
            pause_replica(&s, &n, i, down, "with a request of its pass in flight").await;
            tokio::time::sleep(Duration::from_secs(30)).await;
        }
    }));
    // The leader frozen, while its group has work, until about when its Lease expires by the API server's clock
    // (from 1 s before to 0.5 s after): it resumes with work to do right at the edge of its lease. 1-2 a run.
    for _ in 0..r.range(1..3) {
        let from = r.millis(5_000, latest);
        let edge = Duration::from_millis(r.range(0..1_500));
        let (s, n) = (store.clone(), nodes.clone());
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep_until(start + from).await;
            loop {
                if start.elapsed() + lease + Duration::from_secs(5) >= fault_phase {
                    return;
                }
                let (leader, expires) = {
                    let st = s.lock().unwrap();
                    (st.ha.holder_process().filter(|_| st.reactions.has_work()), st.ha.expires_at())
                };
                let victim = leader.and_then(|p| writer_node(&s, &n, p));
                if let (Some(i), Some(expires)) = (victim, expires) {
                    // From 1 s before the expiry to 0.5 s after it.
                    let resume_at = (expires + edge).saturating_sub(Duration::from_secs(1));
                    let down = resume_at.saturating_sub(start.elapsed());
                    if !down.is_zero() {
                        pause_replica(&s, &n, i, down, "until the edge of its lease").await;
                        return;
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }));
    }
    // Freezes at random moments: 1-3 a run, each of the leader or another replica, some shorter than the lease.
    for _ in 0..r.range(1..4) {
        let at = r.millis(5_000, latest);
        let long = r.chance(0.7);
        let down = if long { lease + r.millis(1_000, 25_000) } else { r.millis(1_000, 10_000) };
        let (of_leader, other) = (r.chance(0.6), r.range(0..nodes.controllers.len() as u64) as usize);
        let (s, n) = (store.clone(), nodes.clone());
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep_until(start + at).await;
            if Instant::now() + down >= start + fault_phase {
                return;
            }
            let holder = s.lock().unwrap().ha.holder_process();
            let leader = holder.and_then(|p| writer_node(&s, &n, p));
            let i = leader.filter(|_| of_leader).unwrap_or(other);
            if long {
                s.lock().unwrap().ha.stats.long_pauses += 1;
            }
            pause_replica(&s, &n, i, down, "(a process pause)").await;
        }));
    }
    // The leader killed while its group has work: 1-2 a run.
    for _ in 0..r.range(1..3) {
        let from = r.millis(5_000, latest);
        let down = r.millis(30_000, 45_000);
        let (s, n) = (store.clone(), nodes.clone());
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep_until(start + from).await;
            loop {
                if start.elapsed() + down >= fault_phase {
                    return;
                }
                let leader = {
                    let st = s.lock().unwrap();
                    st.ha.holder_process().filter(|_| st.reactions.has_work())
                };
                let victim = leader.and_then(|p| Some((p, writer_node(&s, &n, p)?)));
                if let Some((process, i)) = victim
                    && !n.killed.lock().unwrap().1[i]
                    && n.paused.lock().unwrap()[i].is_none()
                {
                    let name = n.controller_name(i);
                    {
                        let mut st = s.lock().unwrap();
                        let at = st.elapsed();
                        st.ha.leader_killed(at, process);
                        st.trace(
                            "fault",
                            format!(
                                "the leader {name} is killed while its group has work; back in {:.1}s",
                                down.as_secs_f64()
                            ),
                        );
                    }
                    n.set_controller_killed(i, true);
                    Handle::current().kill(n.controllers[i]);
                    tokio::time::sleep(down).await;
                    restart(n.controllers[i]);
                    n.set_controller_killed(i, false);
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }));
    }
}

/// Restarts a node from its init task. Killing first resets its sockets: madsim's `restart` alone leaves the old
/// process's bound addresses in place until its tasks are dropped, so the new process could not bind them.
fn restart(id: madsim::task::NodeId) {
    let handle = Handle::current();
    handle.kill(id);
    handle.restart(id);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FaultKind {
    Partition,
    MessageLoss,
    LatencySpike,
    WatchDelaySpike,
    ApiServerRestart,
    ControllerCrash,
    WatchExpiry,
    PodCrash,
    Quota,
    Pause,
}

fn fault_kinds(m: &FaultMix) -> Vec<FaultKind> {
    let mut v = Vec::new();
    let table = [
        (m.partitions, FaultKind::Partition),
        (m.message_loss, FaultKind::MessageLoss),
        (m.latency_spikes, FaultKind::LatencySpike),
        (m.watch_delay_spikes, FaultKind::WatchDelaySpike),
        (m.apiserver_restarts, FaultKind::ApiServerRestart),
        (m.controller_crashes, FaultKind::ControllerCrash),
        (m.watch_expiry, FaultKind::WatchExpiry),
        (m.pod_crashes, FaultKind::PodCrash),
        (m.quota, FaultKind::Quota),
        (m.pauses, FaultKind::Pause),
    ];
    for (on, k) in table {
        if on {
            v.push(k);
        }
    }
    v
}

struct FaultCtx {
    store: SharedStore,
    knobs: Arc<Mutex<Knobs>>,
    kube: kube::SharedKube,
    nodes: Arc<Nodes>,
    zones: u32,
    replicas: u32,
    slow_commits: bool,
}

impl FaultCtx {
    fn trace(&self, what: String) {
        self.store.lock().unwrap().trace("fault", what);
    }
}

async fn inject(kind: FaultKind, dur: Duration, pick: u64, ctx: &FaultCtx) {
    let secs = dur.as_secs_f64();
    let zone = zone_name((pick % u64::from(ctx.zones)) as u32);
    match kind {
        FaultKind::Partition => {
            let i = ctx.nodes.pick_controller(pick);
            let name = ctx.nodes.controller_name(i);
            ctx.trace(format!("partition: {name} cut off from the API server for {secs:.1}s"));
            NetSim::current().clog_node(ctx.nodes.controllers[i]);
            tokio::time::sleep(dur).await;
            NetSim::current().unclog_node(ctx.nodes.controllers[i]);
            ctx.trace("partition healed".into());
        }
        FaultKind::MessageLoss => {
            let rate = 0.05 + (pick % 30) as f64 / 100.0;
            ctx.trace(format!("message loss {:.0}% for {secs:.1}s", rate * 100.0));
            NetSim::current().update_config(|c| c.packet_loss_rate = rate);
            tokio::time::sleep(dur).await;
            NetSim::current().update_config(|c| c.packet_loss_rate = 0.0);
            ctx.trace("message loss over".into());
        }
        FaultKind::LatencySpike => {
            let delay_ms = if ctx.slow_commits { (500, 20_000) } else { (500, 4_000) };
            ctx.trace(format!(
                "API latency spike ({:.1}-{:.0}s per request) for {secs:.1}s",
                delay_ms.0 as f64 / 1000.0,
                delay_ms.1 as f64 / 1000.0
            ));
            ctx.knobs.lock().unwrap().api_delay_ms = delay_ms;
            NetSim::current().update_config(|c| c.send_latency = Duration::from_millis(50)..Duration::from_millis(500));
            tokio::time::sleep(dur).await;
            ctx.knobs.lock().unwrap().api_delay_ms = Knobs::default().api_delay_ms;
            NetSim::current().update_config(|c| c.send_latency = madsim::net::Config::default().send_latency);
            ctx.trace("latency back to normal".into());
        }
        FaultKind::WatchDelaySpike => {
            ctx.trace(format!("watch events delayed 2-12s for {secs:.1}s"));
            ctx.knobs.lock().unwrap().event_delay_ms = (2_000, 12_000);
            tokio::time::sleep(dur).await;
            ctx.knobs.lock().unwrap().event_delay_ms = Knobs::default().event_delay_ms;
            ctx.trace("watch delay back to normal".into());
        }
        FaultKind::ApiServerRestart => {
            let down = Duration::from_millis(500 + pick % 10_000);
            ctx.trace(format!("API server crashes, back in {:.1}s", down.as_secs_f64()));
            ctx.nodes.set_api_killed(true);
            Handle::current().kill(ctx.nodes.apiserver);
            tokio::time::sleep(down).await;
            restart(ctx.nodes.apiserver);
            ctx.nodes.set_api_killed(false);
        }
        FaultKind::ControllerCrash => {
            let down = Duration::from_millis(500 + pick % 20_000);
            let i = ctx.nodes.pick_controller(pick);
            let name = ctx.nodes.controller_name(i);
            ctx.trace(format!("{name} process crashes, restarted in {:.1}s", down.as_secs_f64()));
            ctx.nodes.set_controller_killed(i, true);
            Handle::current().kill(ctx.nodes.controllers[i]);
            tokio::time::sleep(down).await;
            restart(ctx.nodes.controllers[i]);
            ctx.nodes.set_controller_killed(i, false);
        }
        FaultKind::WatchExpiry => {
            ctx.trace(format!("watches expire every 1-10s and resumes are often too old, for {secs:.1}s"));
            {
                let mut k = ctx.knobs.lock().unwrap();
                k.watch_lifetime_s = (1, 10);
                k.gone_chance = 0.5;
            }
            tokio::time::sleep(dur).await;
            let mut k = ctx.knobs.lock().unwrap();
            k.watch_lifetime_s = Knobs::default().watch_lifetime_s;
            k.gone_chance = 0.0;
        }
        FaultKind::PodCrash => {
            let pod = format!("{zone}-{}", (pick >> 8) % u64::from(ctx.replicas));
            let until = Instant::now() + dur * 3;
            let mut st = ctx.store.lock().unwrap();
            ctx.kube.lock().unwrap().crash(&mut st, &pod, until);
        }
        FaultKind::Quota => {
            ctx.trace(format!("pod creation in {zone} refused (quota) for {secs:.1}s"));
            ctx.kube.lock().unwrap().quota_until.insert(zone, Instant::now() + dur);
        }
        FaultKind::Pause => {
            kube::set_paused(&mut ctx.store.lock().unwrap(), &zone, true);
            tokio::time::sleep(dur).await;
            kube::set_paused(&mut ctx.store.lock().unwrap(), &zone, false);
        }
    }
}

/// Seeds the no-downscale user's own generator.
const NO_DOWNSCALE_STREAM: u64 = 0x6e6f_2d64_6f77_6e73;

/// Another team's namespace, which the operator does not manage.
const FOREIGN_NAMESPACE: &str = "team-b";

/// The no-downscale world's objects: (kind, name, labelled `grafana.com/no-downscale: "true"`).
const NO_DOWNSCALE_OBJECTS: [(&str, &str, bool); 3] = [
    ("Deployment", "distributor", true),
    ("ReplicaSet", "query-frontend-7c9d", false),
    ("StatefulSet", "compactor", true),
];

fn no_downscale_labels(labelled: bool) -> std::collections::BTreeMap<String, String> {
    let mut labels = std::collections::BTreeMap::from([("name".to_string(), "other".to_string())]);
    if labelled {
        labels.insert(rollout_core::keys::NO_DOWNSCALE.to_string(), "true".to_string());
    }
    labels
}

/// The no-downscale world's Deployment, ReplicaSet and StatefulSet (in no rollout group; its pods Ready).
fn populate_no_downscale(st: &mut Store) {
    use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, ReplicaSet, ReplicaSetSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    for (kind, name, labelled) in NO_DOWNSCALE_OBJECTS {
        let metadata = ObjectMeta {
            name: Some(name.into()),
            namespace: Some(objects::NAMESPACE.into()),
            labels: Some(no_downscale_labels(labelled)),
            resource_version: Some("1".into()),
            ..Default::default()
        };
        match kind {
            "Deployment" => {
                let spec = DeploymentSpec { replicas: Some(3), ..Default::default() };
                st.deployments.insert(name.into(), Deployment { metadata, spec: Some(spec), status: None });
            }
            "ReplicaSet" => {
                let spec = ReplicaSetSpec { replicas: Some(3), ..Default::default() };
                st.replicasets.insert(name.into(), ReplicaSet { metadata, spec: Some(spec), status: None });
            }
            _ => {
                let mut sts = objects::statefulset(GROUP, name, 2, 1);
                sts.metadata.labels = Some(no_downscale_labels(labelled));
                st.put_statefulset(sts);
                for i in 0..2 {
                    let uid = st.new_uid(&format!("{name}-{i}"));
                    st.put_pod(objects::pod(name, i, &revision_name(name, 0), uid, true, Timestamp::now()));
                }
            }
        }
    }
}

/// The replicas of a no-downscale world object, and the object as an admission carries it.
fn no_downscale_object(st: &Store, kind: &str, name: &str) -> Option<(u32, serde_json::Value)> {
    let (replicas, mut value) = match kind {
        "Deployment" => {
            let d = st.deployments.get(name)?;
            (d.spec.as_ref()?.replicas?, serde_json::to_value(d).ok()?)
        }
        "ReplicaSet" => {
            let r = st.replicasets.get(name)?;
            (r.spec.as_ref()?.replicas?, serde_json::to_value(r).ok()?)
        }
        _ => {
            let s = st.statefulsets.get(name)?;
            (s.spec.as_ref()?.replicas?, serde_json::to_value(s).ok()?)
        }
    };
    value["apiVersion"] = serde_json::json!("apps/v1");
    value["kind"] = serde_json::json!(kind);
    Some((replicas.max(0) as u32, value))
}

/// Sends `review` to the operator's webhook at `path` (its real router, reading through `api`, with the process's
/// memory of refused parent kinds `lookups`) as the API server does: the answer's `response` once it passes
/// kube-apiserver's checks (an error otherwise: the failure policy applies), and the parent objects the webhook read
/// by name meanwhile, as (asked, answered).
async fn ask_webhook(
    path: &str,
    review: &serde_json::Value,
    api: &SimCluster,
    lookups: ParentLookups,
) -> (Result<serde_json::Value, String>, (u32, u32)) {
    let before = api.parent_reads();
    let app = router(Webhooks {
        api: api.clone(),
        pods: NoPodClient,
        settings: WebhookSettings::new(objects::NAMESPACE, "cluster.local.", None, Duration::from_secs(10))
            .with_parent_lookups(lookups),
        clock: system_clock(),
    });
    let answer = async {
        let request = http::Request::post(path)
            .header("content-type", "application/json")
            .body(axum::body::Body::from(serde_json::to_vec(review).map_err(|e| e.to_string())?))
            .map_err(|e| e.to_string())?;
        let response = app.oneshot(request).await.map_err(|e| e.to_string())?;
        let body = axum::body::to_bytes(response.into_body(), 1 << 20).await.map_err(|e| e.to_string())?;
        objects::admission_response(review, &body)
    }
    .await;
    let after = api.parent_reads();
    (answer, (after.0 - before.0, after.1 - before.1))
}

/// What the API server makes of an answer that failed its checks, under the failure policy Fail: a denial.
fn denied_for_no_usable_answer(st: &mut Store, webhook: &str, what: &str, error: &str) -> serde_json::Value {
    st.trace(webhook, format!("{what}: no usable answer ({error}): denied by the failure policy"));
    serde_json::json!({"allowed": false})
}

fn answer_warnings(response: &serde_json::Value) -> Vec<String> {
    response
        .get("warnings")
        .and_then(|w| w.as_array())
        .map(|w| w.iter().filter_map(|w| w.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// A user (or HPA) changing the no-downscale world's objects through the real no-downscale webhook: 8-20 changes at
/// random times of the fault phase, each an UPDATE of the whole object or (half of them) a `/scale` update, also
/// sent to the prepare-downscale webhook; a change both allow is applied. The checker judges every answer.
async fn no_downscale_user(store: SharedStore, mut r: SimRng, start: Instant, fault_phase: Duration) {
    // The no-downscale webhook runs in one operator process, as in a real deployment: it remembers a parent kind
    // refused by RBAC (none of the real deployments grants `get` on Deployments or ReplicaSets) only to say so once,
    // and still reads every parent (a webhook that stopped asking would answer "can't get" without a failed read,
    // which `NO_DOWNSCALE_LABEL` refuses).
    let webhook = match SimCluster::connect(apiserver::ADMISSION_INCARNATION_BASE + (1 << 20)).await {
        Ok(api) => api,
        Err(e) => {
            store.lock().unwrap().trace("no-downscale", format!("no webhook process: {e}"));
            return;
        }
    };
    let lookups = ParentLookups::default();
    let count = r.range(8..21);
    let mut times: Vec<Duration> =
        (0..count).map(|_| r.millis(5_000, fault_phase.as_millis() as u64 * 9 / 10)).collect();
    times.sort_unstable();
    for (n, at) in times.into_iter().enumerate() {
        tokio::time::sleep_until((start + at).max(Instant::now())).await;
        let (kind, name, labelled) = NO_DOWNSCALE_OBJECTS[r.range(0..3) as usize];
        let to = r.range(1..6) as u32;
        let via_scale = r.chance(0.5);
        let Some((from, old)) = no_downscale_object(&store.lock().unwrap(), kind, name) else { continue };
        if to == from {
            continue;
        }
        let resource = format!("{}s", kind.to_lowercase());
        // Every fourth change is of the object of the same name in another team's namespace, unlabelled there
        // (chosen by place, not by a draw: the world's draws stay as they were). A configuration without the
        // shipped `namespaceSelector` sends it; both webhooks must let it through unread, never decide it on the
        // object of that name in the operator's own namespace.
        let foreign = n % 4 == 3;
        let namespace = if foreign { FOREIGN_NAMESPACE } else { objects::NAMESPACE };
        let (labelled, mut old) = (labelled && !foreign, old);
        if foreign {
            old["metadata"]["namespace"] = serde_json::json!(FOREIGN_NAMESPACE);
            old["metadata"]["labels"] = serde_json::json!({"name": "other"});
        }
        // Every third change (by place) comes as an `admission.k8s.io/v1beta1` review, as an API server sends it to
        // a configuration that lists v1beta1 first: the answer must be of the same version, or it fails the call.
        let review_version = if n % 3 == 1 { "admission.k8s.io/v1beta1" } else { "admission.k8s.io/v1" };
        let review = if via_scale {
            let scale = |replicas: u32| {
                serde_json::json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                    "metadata": {"name": name, "namespace": namespace}, "spec": {"replicas": replicas}})
            };
            serde_json::json!({"apiVersion": review_version, "kind": "AdmissionReview", "request": {
                "uid": format!("no-downscale-{n}"),
                "kind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
                "resource": {"group": "apps", "version": "v1", "resource": resource},
                "subResource": "scale",
                "name": name, "namespace": namespace, "operation": "UPDATE",
                "oldObject": scale(from), "object": scale(to)}})
        } else {
            let mut new = old.clone();
            new["spec"]["replicas"] = serde_json::json!(to);
            serde_json::json!({"apiVersion": review_version, "kind": "AdmissionReview", "request": {
                "uid": format!("no-downscale-{n}"),
                "kind": {"group": "apps", "version": "v1", "kind": kind},
                "resource": {"group": "apps", "version": "v1", "resource": resource},
                "name": name, "namespace": namespace, "operation": "UPDATE",
                "oldObject": old, "object": new}})
        };
        let (answer, (asked, found)) = ask_webhook(NO_DOWNSCALE_PATH, &review, &webhook, lookups.clone()).await;
        // The prepare-downscale webhook reads no parent but a StatefulSet's, which every deployment grants: a process
        // of its own per request, as before.
        let incarnation = apiserver::ADMISSION_INCARNATION_BASE + (1 << 20) + 2 * n as u64 + 1;
        let (prepare_answer, prepare_reads) = match SimCluster::connect(incarnation).await {
            Ok(api) => ask_webhook(PREPARE_DOWNSCALE_PATH, &review, &api, ParentLookups::default()).await,
            Err(e) => (Err(e.to_string()), (0, 0)),
        };
        let how = if via_scale { "/scale" } else { "UPDATE" };
        let mut st = store.lock().unwrap();
        // The object as traced and judged: named with its namespace when it is another team's.
        let shown = if foreign { format!("{FOREIGN_NAMESPACE}/{name}") } else { name.to_string() };
        let beta = if review_version.ends_with("v1beta1") { " [v1beta1]" } else { "" };
        let what = format!("{kind} {shown} {from} -> {to} ({how}){beta}");
        let response = answer.unwrap_or_else(|e| denied_for_no_usable_answer(&mut st, "no-downscale", &what, &e));
        let allowed = objects::admitted(&response);
        let warnings = answer_warnings(&response);
        let verdict = if allowed { "admitted" } else { "denied" };
        st.trace("no-downscale", format!("{verdict} {what} {warnings:?}"));
        let at = st.elapsed();
        // Only a `/scale` request has a parent to read: an object's UPDATE carries its labels, so a "can't get"
        // answer to one is wrong whatever the webhook read.
        let read_failed = via_scale && asked > found;
        st.checker.judge_no_downscale(
            at,
            &format!("{kind} {shown}"),
            labelled,
            from,
            to,
            allowed,
            &warnings,
            read_failed,
        );
        // Both webhooks serve these objects (a hand-written configuration broader than the shipped rules); the API
        // server applies a change only if both allow it.
        let response =
            prepare_answer.unwrap_or_else(|e| denied_for_no_usable_answer(&mut st, "prepare-downscale", &what, &e));
        let prepare_allowed = objects::admitted(&response);
        let warnings = answer_warnings(&response);
        let message = response.pointer("/status/message").and_then(|m| m.as_str()).unwrap_or_default();
        let verdict = if prepare_allowed { "admitted".to_string() } else { format!("denied ({message})") };
        st.trace("prepare-downscale", format!("{verdict} {what} {warnings:?}"));
        match foreign {
            true => st.checker.judge_foreign_namespace(at, &what, prepare_allowed, &warnings, prepare_reads),
            false => {
                st.checker.judge_prepare_foreign(at, &what, kind, to < from, prepare_allowed, &warnings, prepare_reads)
            }
        }
        if allowed && prepare_allowed && !foreign {
            match kind {
                "Deployment" => {
                    if let Some(spec) = st.deployments.get_mut(name).and_then(|d| d.spec.as_mut()) {
                        spec.replicas = Some(to as i32);
                    }
                }
                "ReplicaSet" => {
                    if let Some(spec) = st.replicasets.get_mut(name).and_then(|d| d.spec.as_mut()) {
                        spec.replicas = Some(to as i32);
                    }
                }
                _ => kube::set_replicas(&mut st, name, to, "user"),
            }
        }
    }
}
