//! Leader/follower scaling and how the users' replica changes are admitted.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Leader/follower scaling: zone-a leads, zone-b and zone-c follow it (`grafana.com/rollout-downscale-leader`), every
/// StatefulSet carries `grafana.com/min-time-between-zones-downscale`, and a user (or HPA) changes the leader's
/// replicas at random times of the fault phase, each change admitted by the real prepare-downscale webhook (unless
/// [`Admission::Direct`]). No `grafana.com/rollout-force-replicas` (exempt from the min time by design; the checker
/// would exempt it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScalingScenario {
    #[serde(with = "super::line::duration")]
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
    /// With followers and [`Admission::Webhook`]: after each follower downscale, the user also asks for a
    /// downscale of the leader at that commit plus the min time (give or take 1.5 s), so the min-time check is asked
    /// right at its boundary.
    pub boundary_probes: bool,
}

/// How the user's (or HPA's) replica changes are admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Admission {
    /// Every change is an AdmissionReview (StatefulSet UPDATE) sent to the real `webhooks` router of one of two
    /// simulated operator replicas; the StatefulSets carry `grafana.com/prepare-downscale` and its path/port
    /// annotations, so a downscale prepares pods (simulated, sometimes slow, sometimes failing) and writes its
    /// in-progress marker into the record. The change is applied only if allowed.
    Webhook,
    /// Every change is applied as asked, with no claim and no min-time check: the leader is not served by the
    /// prepare-downscale webhook (not labelled for it, or the webhook not installed). Its followers' downscales are
    /// still the controller's to coordinate. Nothing records the leader's own downscales then, so no min time between
    /// them and the followers' is promised and the checker judges none (the followers' among themselves it does): the
    /// worlds use it where rollouts or drains interleave with scaling, or where the followers' claims are refused.
    Direct,
}

impl Default for ScalingScenario {
    fn default() -> Self {
        ScalingScenario {
            min_time: Duration::from_secs(30),
            changes: (6, 14),
            replicas: (1, 5),
            admission: Admission::Webhook,
            followers: true,
            boundary_probes: false,
        }
    }
}
