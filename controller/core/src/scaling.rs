//! Scaling coordination (reference section 3): which StatefulSet of a group gets new `spec.replicas`, and why.
//!
//! Owns (the typed scaling settings are parsed once into the view, by [`crate::settings`]): the
//! leader/follower and force-replicas decisions (made from the snapshot alone, so `plan` can show them offline); and,
//! as pure functions over what the shell fetched, the mirror decision (the reference resource's `scale`), the
//! delayed-downscale arithmetic (pods' returned preparation timestamps), pod endpoint URLs and the status
//! write-back. It does no I/O: the shell reads the `scale` subresource, calls pods and patches.
//!
//! Differences from the reference, on purpose:
//! - one StatefulSet's scaling error (missing leader, bad annotation) is reported for that StatefulSet and does not
//!   stop the others (the reference aborted all scaling of the group);
//! - a mirror reference whose `scale` has no `spec.replicas` is never read as 1: the StatefulSet is not scaled;
//! - `grafana.com/rollout-force-replicas` on a StatefulSet that is neither follower nor mirror is ignored, as by the
//!   reference, but reported as a plan warning ([`ignored_force_replicas`]; the reference said nothing);
//! - a StatefulSet with both leader and mirror annotations is driven by the mirror only (the reference ran both,
//!   which could flap); the leader annotation is then reported as ignored;
//! - the controller downscales nothing while a rollout of the same group is in progress (guarantee 5 of
//!   docs/contributing/design.md);
//! - a follower's downscale is checked against the group downscale record as well as the `last-downscale`
//!   annotations (guarantee 3, the min time between zone downscales); the shell claims it in the record before
//!   patching.

use crate::actions::{Action, PlanContext};
use crate::downscale::{MinTimeVerdict, check_min_time};
use crate::group::GroupSnapshot;
use crate::keys;
pub use crate::settings::{
    ApiVersionError, DelayedDownscaleSettings, MirrorSettings, PodUrl, PodUrlError, ScalingSettings, api_group_of,
};
use crate::view::StatefulSetView;
use jiff::Timestamp;
use serde::Serialize;
use std::collections::BTreeMap;
use std::ops::Range;
use std::time::Duration;
use thiserror::Error;

/// A scaling problem of one StatefulSet. The rest of the group still scales and rolls.
#[derive(Debug, Clone, PartialEq, Eq, Error, Serialize)]
#[error("{statefulset}: {message}")]
pub struct ScalingError {
    #[serde(rename = "statefulSet")]
    pub statefulset: String,
    pub message: String,
}

impl ScalingError {
    pub fn new(statefulset: &str, message: impl Into<String>) -> Self {
        ScalingError { statefulset: statefulset.to_string(), message: message.into() }
    }
}

/// Why no rollout-time downscale may happen now (no downscale during a rollout): a StatefulSet of the group is being
/// rolled (its currentRevision is not its updateRevision, or a pod is not on the update revision), or may be about
/// to be (no status yet, or a status that does not describe its latest spec: a template push not yet seen by the
/// StatefulSet controller).
pub fn rollout_in_progress(group: &GroupSnapshot) -> Option<String> {
    group.members.iter().find_map(|m| {
        let Some(status) = m.sts.status.as_ref() else {
            return Some(format!("StatefulSet {} has not reported a status yet", m.sts.name));
        };
        if m.sts.generation.is_some_and(|g| status.observed_generation.is_none_or(|o| o < g)) {
            return Some(format!(
                "StatefulSet {}'s status does not describe its latest spec yet (a rollout may be starting)",
                m.sts.name
            ));
        }
        let outdated = m.pods.iter().filter(|p| p.revision() != Some(status.update_revision.as_str())).count();
        if status.current_revision != status.update_revision || outdated > 0 {
            Some(format!(
                "a rollout of StatefulSet {} is in progress ({outdated} pods not on update revision {})",
                m.sts.name, status.update_revision
            ))
        } else {
            None
        }
    })
}

/// Why no downscale of `candidate` may happen now (no downscale during a rollout): another StatefulSet of the group is
/// being rolled or may be about to be ([`rollout_in_progress`] of it), or has unavailable or missing pods (the rule the
/// prepare-downscale webhook applies to a user's downscale, [`crate::admission::prepare::rollout_in_progress`]).
/// The candidate's own rollout does not hold it, as in the reference: it is scaled first (pods about to be removed
/// are not worth rolling) and its rollout goes on in later passes.
pub fn downscale_held(group: &GroupSnapshot, candidate: &str, now: Timestamp) -> Option<String> {
    let others = GroupSnapshot {
        members: group.members.iter().filter(|m| m.sts.name != candidate).cloned().collect(),
        ..group.clone()
    };
    rollout_in_progress(&others)
        .or_else(|| others.members.iter().find_map(|m| crate::admission::prepare::rollout_in_progress(m, now)))
}

/// What the snapshot-only scaling pass decided for a group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScalingPass {
    /// At most one [`Action::Scale`]: one StatefulSet per pass, so the next decision sees the result.
    pub scale: Option<Action>,
    /// Scaling that is due but must wait, with the reason.
    pub waits: Vec<String>,
    pub errors: Vec<ScalingError>,
    /// StatefulSets whose replicas come from a reference resource (the shell's mirror step handles them).
    pub mirrors: Vec<String>,
}

/// The warning for a `grafana.com/rollout-force-replicas` that nothing reads: on a StatefulSet that is neither a
/// follower nor a mirror, the reference ignores it, and so does [`plan_scaling`]. Reported so that a stale
/// annotation is seen; it does not hold the group.
pub fn ignored_force_replicas(sts: &StatefulSetView) -> Option<String> {
    let settings = &sts.scaling;
    let force = settings.force_replicas.filter(|_| settings.leader.is_none() && settings.mirror.is_none())?;
    Some(format!(
        "{}={force} on StatefulSet {} is ignored: it applies only to a follower ({}) or a mirror \
         (grafana.com/rollout-mirror-replicas-from-resource-*)",
        keys::ROLLOUT_FORCE_REPLICAS,
        sts.name,
        keys::ROLLOUT_DOWNSCALE_LEADER
    ))
}

/// The leader/follower and force-replicas pass over a group, in name order.
pub fn plan_scaling(group: &GroupSnapshot, ctx: &PlanContext<'_>) -> ScalingPass {
    let mut pass = ScalingPass::default();
    for member in &group.members {
        let sts = &member.sts;
        let settings = sts.scaling.clone();
        if let Some(mirror) = &settings.mirror {
            match mirror {
                Ok(_) => pass.mirrors.push(sts.name.clone()),
                Err(e) => pass.errors.push(ScalingError::new(&sts.name, e.to_string())),
            }
            if settings.leader.is_some() {
                pass.errors.push(ScalingError::new(
                    &sts.name,
                    format!(
                        "both {} and the mirror annotations are set; replicas follow the reference resource only",
                        keys::ROLLOUT_DOWNSCALE_LEADER
                    ),
                ));
            }
            continue;
        }
        let current = sts.replicas;
        let decision = match decide_replicas(group, ctx, sts, &settings) {
            Ok(d) => d,
            Err(refused) => {
                pass.errors.push(ScalingError::new(&sts.name, refused.to_string()));
                continue;
            }
        };
        let (to, reason, coordinated) = match decision {
            Decision::Keep => continue,
            Decision::Wait(reason) => {
                pass.waits.push(format!("{}: {reason}", sts.name));
                continue;
            }
            Decision::Scale { to, reason, coordinated } => (to, reason, coordinated),
        };
        if to < current
            && let Some(why) = downscale_held(group, &sts.name, ctx.now)
        {
            pass.waits.push(format!("{}: downscale from {current} to {to} waits: {why}", sts.name));
            continue;
        }
        if let (true, Some(why)) = (coordinated && to < current, ctx.coordinated_downscales_forbidden) {
            pass.errors.push(ScalingError::new(
                &sts.name,
                format!("downscale from {current} to {to} cannot be claimed: {why}"),
            ));
            continue;
        }
        if let Some(why) = ctx.scaling_forbidden {
            pass.errors
                .push(ScalingError::new(&sts.name, format!("scaling from {current} to {to} is not possible: {why}")));
            continue;
        }
        if pass.scale.is_some() {
            pass.waits.push(format!(
                "{}: scaling from {current} to {to} waits for a later pass (one StatefulSet per pass)",
                sts.name
            ));
            continue;
        }
        pass.scale = Some(Action::Scale {
            statefulset: sts.name.clone(),
            from: current,
            to,
            reason,
            resource_version: sts.resource_version.clone(),
            coordinated_downscale: coordinated,
        });
    }
    pass
}

/// Why a follower is not scaled (reported as its [`ScalingError`]).
#[derive(Debug, Error)]
enum FollowerError {
    #[error("could not find leader for {statefulset} using {}", keys::ROLLOUT_DOWNSCALE_LEADER)]
    NoLeader { statefulset: String },
    /// [`follower_without_min_time`].
    #[error("{0}")]
    WithoutMinTime(String),
    /// [`MinTimeVerdict::Invalid`].
    #[error("cannot check the min time between zone downscales: {0}")]
    MinTime(String),
}

enum Decision {
    Keep,
    Wait(String),
    /// `coordinated`: a leader/follower downscale that must be claimed in the group downscale record.
    Scale {
        to: u32,
        reason: String,
        coordinated: bool,
    },
}

fn decide_replicas(
    group: &GroupSnapshot,
    ctx: &PlanContext<'_>,
    sts: &StatefulSetView,
    settings: &ScalingSettings,
) -> Result<Decision, FollowerError> {
    let current = sts.replicas;
    // Neither follower nor mirror (mirrors do not get here): nothing scales it, force replicas included, as in the
    // reference; [`ignored_force_replicas`] reports the annotation.
    let Some(leader_name) = &settings.leader else {
        return Ok(Decision::Keep);
    };
    let leader = group
        .member(leader_name)
        .filter(|m| m.sts.name != sts.name)
        .ok_or_else(|| FollowerError::NoLeader { statefulset: sts.name.clone() })?;
    if let Some(force) = settings.force_replicas {
        return Ok(if force == current {
            Decision::Keep
        } else {
            Decision::Scale {
                to: force,
                reason: format!("{}={force} (applied immediately)", keys::ROLLOUT_FORCE_REPLICAS),
                coordinated: false,
            }
        });
    }
    let leader_replicas = leader.sts.replicas;
    if leader_replicas > current {
        let ready = leader.sts.status.as_ref().map_or(0, |s| s.ready_replicas);
        if settings.upscale_only_when_leader_ready && ready != leader_replicas {
            return Ok(Decision::Wait(format!(
                "upscale to {leader_replicas} waits: not all leader replicas are ready ({ready}/{leader_replicas} ready in {leader_name})"
            )));
        }
        return Ok(Decision::Scale {
            to: leader_replicas,
            reason: format!("scaling up statefulset to match leader {leader_name}"),
            coordinated: false,
        });
    }
    if leader_replicas < current {
        if let Some(error) = follower_without_min_time(group, ctx.downscale_record, &sts.name) {
            return Err(FollowerError::WithoutMinTime(error));
        }
        return match check_min_time(group, ctx.downscale_record, &sts.name, ctx.now) {
            MinTimeVerdict::Elapsed => Ok(Decision::Scale {
                to: leader_replicas,
                reason: format!(
                    "scaling down statefulset to match leader {leader_name}; the min time between zone downscales has passed"
                ),
                coordinated: true,
            }),
            wait @ MinTimeVerdict::Wait { .. } => {
                Ok(Decision::Wait(format!("downscale to {leader_replicas} waits: {}", wait.describe())))
            }
            MinTimeVerdict::Invalid(reason) => Err(FollowerError::MinTime(reason)),
        };
    }
    Ok(Decision::Keep)
}

/// The reference's follower rule: once another StatefulSet of the group has a recorded downscale (in `record` or
/// its `grafana.com/last-downscale` annotation), a follower without a min time is an error (not scaled down),
/// rather than a follower that may go down at once. Applied by the plan and again by the controller's claim, on the
/// fresh record (a plan made on an older one sees no recorded downscale yet).
pub fn follower_without_min_time(
    group: &GroupSnapshot,
    record: Option<&crate::downscale::DownscaleRecord>,
    candidate: &str,
) -> Option<String> {
    let has_min_time = group.member(candidate).is_some_and(|m| m.sts.downscale.min_time_between_zones.is_some());
    let others_recorded = group.members.iter().filter(|m| m.sts.name != candidate).any(|m| {
        m.sts.downscale.last_downscale.is_some() || record.is_some_and(|r| r.last_downscaled.contains_key(&m.sts.name))
    });
    (!has_min_time && others_recorded)
        .then(|| format!("missing label {} on follower", keys::MIN_TIME_BETWEEN_ZONES_DOWNSCALE))
}

// ----- Mirror replicas and delayed downscale (pure functions over what the shell fetched) -----

/// The parts of a reference resource's `scale` subresource that scaling reads. `None` = null or absent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ReferenceScale {
    pub spec_replicas: Option<i64>,
    pub status_replicas: Option<i64>,
}

/// What to do for one mirror StatefulSet, before any pod is called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MirrorStep {
    /// Replicas already match: write back `write_back` (if any) and cancel delayed downscale on `cancel`.
    Steady { replicas: u32, cancel: Range<u32>, write_back: Option<u32> },
    /// Patch to `to` (upscale, or downscale without a configured delay); cancel on `cancel` first.
    Scale { from: u32, to: u32, cancel: Range<u32>, reason: String },
    /// Delayed downscale: cancel on `cancel`, ask `prepare` to prepare, then [`delayed_downscale_target`].
    DelayedDownscale { from: u32, desired: u32, cancel: Range<u32>, prepare: Range<u32>, delay: Duration },
    /// Nothing may change now; write back the current replicas (if any).
    Wait { reason: String, write_back: Option<u32> },
}

/// The replica count to write into the reference's `status.replicas`, if it differs and write-back is on.
pub fn write_back_value(mirror: &MirrorSettings, scale: &ReferenceScale, value: u32) -> Option<u32> {
    (mirror.write_back && scale.status_replicas != Some(i64::from(value))).then_some(value)
}

/// The mirror decision for `sts` given its reference's `scale`. `rollout` is [`downscale_held`] for `sts`.
pub fn plan_mirror(
    sts: &StatefulSetView,
    settings: &ScalingSettings,
    scale: &ReferenceScale,
    rollout: Option<&str>,
) -> Result<MirrorStep, ScalingError> {
    let err = |m: String| ScalingError::new(&sts.name, m);
    let mirror = match &settings.mirror {
        Some(Ok(m)) => m,
        Some(Err(e)) => return Err(err(e.to_string())),
        None => return Err(err("no mirror annotations".to_string())),
    };
    let current = sts.replicas;
    let desired = match (settings.force_replicas, scale.spec_replicas) {
        (Some(force), _) => force,
        (None, None) => {
            return Ok(MirrorStep::Wait {
                reason: format!(
                    "{}/{} has no spec.replicas in its scale subresource; not scaling (a missing replica count is never read as 1)",
                    mirror.kind, mirror.name
                ),
                write_back: None,
            });
        }
        (None, Some(n)) => u32::try_from(n)
            .map_err(|_| err(format!("{}/{} scale spec.replicas {n} is out of range", mirror.kind, mirror.name)))?,
    };
    let delayed = match &settings.delayed_downscale {
        Some(Ok(d)) => Some(d),
        Some(Err(e)) if desired != current => {
            return Err(err(format!("not scaling statefulset due to failed scaling delay check: {e}")));
        }
        _ => None,
    };
    if desired == current {
        return Ok(MirrorStep::Steady {
            replicas: current,
            cancel: if delayed.is_some() { 0..current } else { 0..0 },
            write_back: write_back_value(mirror, scale, current),
        });
    }
    if desired > current {
        return Ok(MirrorStep::Scale {
            from: current,
            to: desired,
            cancel: if delayed.is_some() { 0..current } else { 0..0 },
            reason: format!(
                "scaling up statefulset to match replicas in the reference resource {}/{}",
                mirror.kind, mirror.name
            ),
        });
    }
    if let Some(why) = rollout {
        return Ok(MirrorStep::Wait {
            reason: format!("downscale from {current} to {desired} waits: {why}"),
            write_back: write_back_value(mirror, scale, current),
        });
    }
    Ok(match delayed {
        None => MirrorStep::Scale {
            from: current,
            to: desired,
            cancel: 0..0,
            reason: format!(
                "scaling down statefulset to match replicas in the reference resource {}/{}",
                mirror.kind, mirror.name
            ),
        },
        Some(d) => MirrorStep::DelayedDownscale {
            from: current,
            desired,
            cancel: 0..desired,
            prepare: desired..current,
            delay: d.delay,
        },
    })
}

/// Why a delayed downscale does not happen (yet).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DelayedDownscaleError {
    #[error("failed prepare pods for delayed downscale: {0}")]
    Prepare(String),
    #[error(
        "configured downscale delay {} has not been reached for any pods at the end of statefulset replicas range",
        crate::duration::format_go_duration(*delay)
    )]
    NotReached { delay: Duration },
}

/// How far a delayed downscale from `from` towards `desired` may go now: walking down from the last replica, every
/// replica that has been preparing for at least `delay` (by its own timestamp in `prepared`) may go; the walk stops
/// at the first replica without a timestamp or not prepared long enough (only the tail is removed).
pub fn delayed_downscale_target(
    from: u32,
    desired: u32,
    delay: Duration,
    prepared: &BTreeMap<u32, Timestamp>,
    now: Timestamp,
) -> Result<u32, DelayedDownscaleError> {
    let mut allowed = from;
    for ordinal in (desired..from).rev() {
        let Some(at) = prepared.get(&ordinal) else { break };
        let elapsed = now.as_millisecond().saturating_sub(at.as_millisecond());
        if elapsed < 0 || (elapsed as u128) < delay.as_millis() {
            break;
        }
        allowed = ordinal;
    }
    if allowed == from { Err(DelayedDownscaleError::NotReached { delay }) } else { Ok(allowed) }
}

/// Why a pod's answer to a delayed-downscale POST does not confirm its preparation.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PrepareAnswerError {
    /// Not 2xx; `body` is the start of the answer (at most 200 characters).
    #[error("HTTP status {status}: {body}")]
    Status { status: u16, body: String },
    #[error("response is not JSON: {0}")]
    NotJson(String),
    /// No `timestamp`, or zero.
    #[error("no timestamp in response")]
    NoTimestamp,
    #[error("timestamp {timestamp} out of range: {reason}")]
    OutOfRange { timestamp: i64, reason: String },
}

/// Reads a pod's answer to a delayed-downscale POST: 2xx with JSON `{"timestamp": <unix seconds>}` (non-zero).
pub fn prepare_response_timestamp(status: u16, body: &[u8]) -> Result<Timestamp, PrepareAnswerError> {
    if !(200..300).contains(&status) {
        let body = String::from_utf8_lossy(body).chars().take(200).collect();
        return Err(PrepareAnswerError::Status { status, body });
    }
    #[derive(serde::Deserialize)]
    struct Answer {
        #[serde(default)]
        timestamp: i64,
    }
    let answer: Answer = serde_json::from_slice(body).map_err(|e| PrepareAnswerError::NotJson(e.to_string()))?;
    if answer.timestamp == 0 {
        return Err(PrepareAnswerError::NoTimestamp);
    }
    Timestamp::from_second(answer.timestamp)
        .map_err(|e| PrepareAnswerError::OutOfRange { timestamp: answer.timestamp, reason: e.to_string() })
}

/// The URL of replica `ordinal` of `sts`: host `<sts>-<ordinal>.<serviceName>.<namespace>.svc.<cluster-domain>`,
/// everything else from `url`. A StatefulSet without `spec.serviceName` gets an error, not a malformed host.
pub fn pod_endpoint(
    sts: &StatefulSetView,
    url: &PodUrl,
    ordinal: u32,
    namespace: &str,
    cluster_domain: &str,
) -> Result<String, ScalingError> {
    if sts.service_name.is_empty() {
        return Err(ScalingError::new(
            &sts.name,
            "spec.serviceName is empty; pod DNS names (and delayed downscale calls) need the StatefulSet's governing service",
        ));
    }
    let host = format!("{}-{ordinal}.{}.{namespace}.svc.{cluster_domain}", sts.name, sts.service_name);
    Ok(url.with_host(&host))
}

/// Most replicas one step calls (each cancel or prepare fan-out). A StatefulSet may claim up to 2^31 - 1 replicas:
/// an endpoint for each would exhaust memory before the first call.
pub const MAX_POD_CALLS: u32 = 10_000;

/// Endpoints of every replica in `ordinals`; more than [`MAX_POD_CALLS`] is an error.
pub fn pod_endpoints(
    sts: &StatefulSetView,
    url: &PodUrl,
    ordinals: Range<u32>,
    namespace: &str,
    cluster_domain: &str,
) -> Result<Vec<(u32, String)>, ScalingError> {
    if ordinals.len() > MAX_POD_CALLS as usize {
        return Err(ScalingError::new(
            &sts.name,
            format!(
                "{} replicas ({}-{} to {}-{}) to call for delayed downscale, more than the {MAX_POD_CALLS} allowed; \
                 check spec.replicas ({}) and the reference resource's",
                ordinals.len(),
                sts.name,
                ordinals.start,
                sts.name,
                ordinals.end - 1,
                sts.replicas
            ),
        ));
    }
    ordinals.map(|i| pod_endpoint(sts, url, i, namespace, cluster_domain).map(|u| (i, u))).collect()
}
