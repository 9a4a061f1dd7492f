//! What a world is made of, as data: the [`Scenario`] (sizes, the actors in play, the fault mix, the planner, the
//! deployment whose RBAC the API server enforces) and its presets, and the names of the world's objects.
//!
//! Owns no behaviour: the harness builds the world a scenario describes, the actors play it.

use serde::{Deserialize, Serialize};
pub mod certificates;
pub mod deployment;
pub mod drains;
pub mod faults;
pub mod ha;
pub mod health;
pub mod line;
pub mod planner;
pub mod scaling;

use crate::scenario::deployment::ReferenceDeployment;
use crate::scenario::faults::FaultMix;
use crate::scenario::planner::PlannerKind;
use crate::scenario::scaling::{Admission, ScalingScenario};
use rollout_core::Defences;
use rollout_operator::rollout::scaling::ScalingConfig;

use std::time::Duration;

pub const GROUP: &str = "ingester";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scenario {
    pub zones: u32,
    pub replicas: u32,
    pub max_unavailable: u32,
    /// Template revisions the user pushes during the fault phase.
    pub revisions: u32,
    #[serde(with = "line::duration")]
    pub fault_phase: Duration,
    /// After the faults stop, the group must converge within this.
    #[serde(with = "line::duration")]
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
    /// During the fault phase the API server drops its answer to one in ten of the controller's committed writes
    /// (deletions, status updates, replica patches, record writes): the write stays, and the controller, timed out,
    /// cannot tell it from one that never arrived. Drawn from a generator of its own.
    pub lost_answers: bool,
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
    /// nor mirror, so the zone keeps its replicas ([`crate::oracle::checker::FORCE_IGNORED`]). Drawn from a generator of its
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
    pub mirror_write_back: Option<String>,
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
    #[serde(with = "line::defences")]
    pub defences: Defences,
    /// A ZoneAwarePodDisruptionBudget over the group, operator replicas serving the real pod-eviction
    /// webhook, and node drains evicting pods through the API server during the fault phase. Drawn from a generator
    /// of its own.
    pub drains: Option<crate::scenario::drains::Drains>,
    /// Operator replicas on nodes of their own electing a leader (`crate::ha`), instead of the one
    /// controller node; the faults hit the replicas, which are also paused longer than the lease, killed while
    /// leading, and run clocks with offsets and rates of their own. Drawn from a generator of its own.
    pub ha: Option<crate::scenario::ha::Ha>,
    /// Health-gated zones: the StatefulSets name a RolloutHealthCheck judged on a simulated Prometheus, and the
    /// release is good or bad (`crate::environment::prometheus`).
    pub health: Option<crate::scenario::health::HealthGated>,
    /// With the prepare-downscale webhook or the drains' eviction webhook: their replicas run the certificate
    /// lifecycle (`crate::scenario::certificates`) and the API server calls them over TLS checked against their
    /// configuration's CA bundle.
    pub certificates: Option<crate::scenario::certificates::Certificates>,
}

impl Scenario {
    /// The group downscale record's ConfigMap, when this world runs with the zone tracker.
    pub fn zone_tracker_config_map(&self) -> Option<String> {
        let tracker = self.zone_tracker.unwrap_or(self.deployment.is_none_or(ReferenceDeployment::zone_tracker));
        tracker.then(|| ScalingConfig::default().zone_tracker_config_map.unwrap_or_default())
    }
}

impl Scenario {
    /// The scaling scenario: leader/follower scaling with the user changing the leader's replicas, the default
    /// fault mix, no template pushes (the controller only scales; invariant 3 and follower convergence are judged).
    pub fn scaling() -> Self {
        Scenario { scaling: Some(ScalingScenario::default()), revisions: 0, ..Scenario::default() }
    }

    /// Scaling while the user also pushes a template revision: scale-downs interleave with the rollout. The leader
    /// is not served by the prepare-downscale webhook ([`Admission::Direct`]), as where the webhook is not installed:
    /// the webhook would deny its downscales while a zone rolls, and the interleaving is the point here.
    pub fn scaling_during_rollout() -> Self {
        let scaling = ScalingScenario { admission: Admission::Direct, ..ScalingScenario::default() };
        Scenario { scaling: Some(scaling), revisions: 1, ..Scenario::default() }
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
        Scenario { pushes_at_scaling: true, revisions: 3, ..Scenario::scaling_during_rollout() }
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

    /// Health-gated zones: one template push of a good or a bad release, under the default faults. A zone after the
    /// first starts only once the updated pods have served a minute (the check's `currentRange`) and their error
    /// ratio stays within twice the baseline's: the bad release must stop after its first zone, the good one
    /// converge (each later zone waits its soak, hence the longer deadline).
    pub fn health_gated(bad_release: bool) -> Self {
        let base = Scenario::default();
        Scenario {
            revisions: 1,
            health: Some(crate::scenario::health::HealthGated { bad_release, ..Default::default() }),
            settle_deadline: base.settle_deadline + Duration::from_secs(300),
            ..base
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
            lost_answers: false,
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
            health: None,
            certificates: None,
        }
    }
}

/// Seeds the second group's HPA users in the webhook world.
pub(crate) const SECOND_GROUP_USERS_STREAM: u64 = 0x7365_636f_6e64_6870;

pub(crate) fn zone_name(i: u32) -> String {
    group_zone_name(GROUP, i)
}

/// The second rollout group of `Scenario::second_group`.
pub const SECOND_GROUP: &str = "store-gateway";

pub(crate) fn group_zone_name(group: &str, i: u32) -> String {
    format!("{group}-zone-{}", (b'a' + i as u8) as char)
}

impl Scenario {
    /// Without `patch` on pods or StatefulSets the operator serialises in process: its one process runs the
    /// controller and serves the eviction webhook (replica 0), as `main` runs them, sharing that serialisation.
    pub fn one_operator_process(&self) -> bool {
        self.ha.is_none()
            && self.drains.as_ref().is_some_and(|d| d.replicas == 1)
            && self.deployment == Some(ReferenceDeployment::NoPatch)
    }
}
