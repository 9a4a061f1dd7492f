//! Downscale coordination shared by every actor that downscales a zone: the group downscale record and the rule
//! "two StatefulSets of a group are never downscaled closer together than the min time between zone downscales"
//! (guarantee 3 of docs/contributing/design.md).
//!
//! Owns: the per-StatefulSet downscale settings (min time, last-downscale annotation), the record's data format
//! (the reference's zone-tracker ConfigMap: key = StatefulSet name, value = `{"lastDownscaled":"<RFC 3339>"}`), and
//! the min-time verdict. It does no I/O: the shell reads the record, asks [`check_min_time`], and claims the
//! downscale by writing the record back with a resourceVersion compare-and-swap, so two actors (the controller's
//! leader/follower scaling, the prepare-downscale webhook, several operator replicas) cannot both pass the check
//! for different zones of one group.
//!
//! Differences from the reference, on purpose: the min time is read from the annotation first and from the label
//! for compatibility; both the downscaled StatefulSet's and the other StatefulSet's min time apply (the larger wins),
//! so the rule holds whichever side carries it; a StatefulSet's last downscale is the later of the record and its
//! `grafana.com/last-downscale` annotation; and a record bootstrapped from annotations never stamps "now" for zones
//! that were not downscaled.

use crate::duration::format_go_duration;
use crate::group::GroupSnapshot;
use crate::keys;
pub use crate::settings::{AnnotationError, DownscaleSettings, TimestampError, parse_timestamp};
use jiff::Timestamp;
use std::collections::BTreeMap;
use std::time::Duration;
use thiserror::Error;

/// Formats a time as the reference writes it: UTC, second precision, e.g. `2024-05-01T12:00:00Z`.
pub fn format_timestamp(t: Timestamp) -> String {
    Timestamp::from_second(t.as_second()).unwrap_or(t).to_string()
}

/// `t` rounded up to the whole second, as every time in the record is stored: a stored downscale is never earlier
/// than the real one, a stored deadline never earlier than the intended one, and a writer can find its own entries
/// again by comparing with this value.
pub fn round_up_to_second(t: Timestamp) -> Timestamp {
    let whole = t.as_second().saturating_add(i64::from(t.subsec_nanosecond() > 0));
    Timestamp::from_second(whole).unwrap_or(t)
}

/// A record entry that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("downscale record entry {key:?} = {value:?} is not valid: {reason}")]
pub struct RecordError {
    pub key: String,
    pub value: String,
    pub reason: String,
}

/// When each StatefulSet was last downscaled, as stored in the group downscale record. One record serves a
/// namespace (keys are StatefulSet names), as the reference's zone-tracker ConfigMap does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DownscaleRecord {
    pub last_downscaled: BTreeMap<String, Timestamp>,
}

impl DownscaleRecord {
    /// Reads the ConfigMap's `data`. Field names are matched case-insensitively, as the reference's JSON decoder
    /// does. Any unreadable entry fails the whole read: a record we cannot fully read must not allow a downscale.
    pub fn from_config_map_data(data: &BTreeMap<String, String>) -> Result<Self, RecordError> {
        let mut last_downscaled = BTreeMap::new();
        for (key, value) in data {
            let err = |reason: String| RecordError { key: key.clone(), value: value.clone(), reason };
            let json: serde_json::Value = serde_json::from_str(value).map_err(|e| err(format!("not JSON: {e}")))?;
            let obj = json.as_object().ok_or_else(|| err("expected a JSON object".to_string()))?;
            let field = obj
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("lastDownscaled"))
                .map(|(_, v)| v)
                .ok_or_else(|| err("no lastDownscaled field".to_string()))?;
            let raw = field.as_str().ok_or_else(|| err("lastDownscaled is not a string".to_string()))?;
            last_downscaled.insert(key.clone(), parse_timestamp(raw).map_err(|e| err(e.to_string()))?);
        }
        Ok(DownscaleRecord { last_downscaled })
    }

    /// The ConfigMap `data` for this record, in the reference's format.
    pub fn to_config_map_data(&self) -> BTreeMap<String, String> {
        self.last_downscaled
            .iter()
            .map(|(name, at)| {
                (name.clone(), serde_json::json!({ "lastDownscaled": format_timestamp(*at) }).to_string())
            })
            .collect()
    }

    /// The record to create when none exists: the `grafana.com/last-downscale` annotations of the group's
    /// StatefulSets that have a readable one, and nothing for the others (the reference stamped every zone with
    /// "now", which denied the first downscale after creation for a whole min-time window).
    pub fn bootstrap(group: &GroupSnapshot) -> Self {
        let last_downscaled = group
            .members
            .iter()
            .filter_map(|m| match &m.sts.downscale.last_downscale {
                Some(Ok(at)) => Some((m.sts.name.clone(), *at)),
                _ => None,
            })
            .collect();
        DownscaleRecord { last_downscaled }
    }

    /// Records a downscale of `statefulset` at `at`, rounded up to the whole second the format stores: rounding
    /// down would let the next zone go up to a second early.
    pub fn record_downscale(&mut self, statefulset: &str, at: Timestamp) {
        let at = round_up_to_second(at);
        self.last_downscaled.insert(statefulset.to_string(), at);
    }
}

/// Whether a StatefulSet of a group may be downscaled now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MinTimeVerdict {
    /// No other StatefulSet of the group was downscaled within the min time.
    Elapsed,
    /// `other` was downscaled at `at`; the min time `min_time` has not passed (it passes strictly after `until`).
    Wait { other: String, at: Timestamp, min_time: Duration, until: Timestamp },
    /// A value the decision depends on is unusable; refuse and say which.
    Invalid(String),
}

impl MinTimeVerdict {
    /// Human-readable reason, for plans, logs and denials.
    pub fn describe(&self) -> String {
        match self {
            MinTimeVerdict::Elapsed => "the min time between zone downscales has passed".to_string(),
            MinTimeVerdict::Wait { other, at, min_time, until } => format!(
                "statefulset {other} was downscaled at {} and the group waits {} between zone downscales (until after {})",
                format_timestamp(*at),
                format_go_duration(*min_time),
                format_timestamp(*until)
            ),
            MinTimeVerdict::Invalid(reason) => reason.clone(),
        }
    }
}

/// The last downscale of `statefulset`: the later of the record's entry and its annotation. An unreadable
/// annotation is an error: that StatefulSet's downscale history is unknown until the user fixes it.
fn last_downscale_of<'a>(
    group: &'a GroupSnapshot,
    record: Option<&DownscaleRecord>,
    statefulset: &str,
) -> Result<Option<Timestamp>, &'a AnnotationError> {
    let from_record = record.and_then(|r| r.last_downscaled.get(statefulset).copied());
    let from_annotation = match group.member(statefulset).and_then(|m| m.sts.downscale.last_downscale.as_ref()) {
        Some(Ok(at)) => Some(*at),
        Some(Err(e)) => return Err(e),
        None => None,
    };
    Ok(from_record.max(from_annotation))
}

/// The min-time rule for downscaling `candidate` at `now`: for every other StatefulSet of the group with a known
/// last downscale, the time since then must be strictly greater than the larger of the two StatefulSets' min times.
/// A StatefulSet the group no longer has, but the record remembers, is ignored (its group is unknown).
/// Neither side carrying a min time means no constraint between them.
pub fn check_min_time(
    group: &GroupSnapshot,
    record: Option<&DownscaleRecord>,
    candidate: &str,
    now: Timestamp,
) -> MinTimeVerdict {
    let min_time_of = |name: &str| -> Result<Option<Duration>, &AnnotationError> {
        match group.member(name).and_then(|m| m.sts.downscale.min_time_between_zones.as_ref()) {
            Some(Ok(d)) => Ok(Some(*d)),
            Some(Err(e)) => Err(e),
            None => Ok(None),
        }
    };
    let own_min = match min_time_of(candidate) {
        Ok(d) => d,
        Err(e) => return MinTimeVerdict::Invalid(e.to_string()),
    };
    let mut verdict = MinTimeVerdict::Elapsed;
    for other in group.members.iter().map(|m| m.sts.name.as_str()).filter(|n| *n != candidate) {
        let at = match last_downscale_of(group, record, other) {
            Ok(Some(at)) => at,
            Ok(None) => continue,
            Err(e) => return MinTimeVerdict::Invalid(e.to_string()),
        };
        let other_min = match min_time_of(other) {
            Ok(d) => d,
            Err(e) => return MinTimeVerdict::Invalid(e.to_string()),
        };
        let Some(min_time) = own_min.max(other_min) else {
            continue;
        };
        let until = time_after(at, min_time);
        // Strictly greater: at exactly `at + min_time` the downscale still waits.
        if now <= until {
            let later = match &verdict {
                MinTimeVerdict::Wait { until: u, .. } => until > *u,
                _ => true,
            };
            if later {
                verdict = MinTimeVerdict::Wait { other: other.to_string(), at, min_time, until };
            }
        }
    }
    verdict
}

/// `at + d`, saturating at the largest representable time (a huge min time means "never"; an overflowing deadline
/// means "far away", never "already passed").
pub fn time_after(at: Timestamp, d: Duration) -> Timestamp {
    jiff::SignedDuration::try_from(d).ok().and_then(|d| at.checked_add(d).ok()).unwrap_or(Timestamp::MAX)
}

/// How a downscale's claim in the record ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClaimEnd {
    /// The replica change committed, or will before `at`: the entry is dated `at` (rounded up).
    Committed { at: Timestamp },
    /// The replica change will not happen: the entry goes back to `previous` (removed when `None`).
    Undone { previous: Option<Timestamp> },
}

/// A downscale being prepared by the prepare-downscale webhook: between its claim of the record and the end of its
/// pod calls. Stored in the record ConfigMap's [`keys::DOWNSCALES_IN_PROGRESS`] annotation, written in the same
/// compare-and-swap as the claim, removed when the webhook is done; `until` (the webhook's deadline) bounds it if
/// the webhook dies midway.
///
/// How the webhook and the controller see each other (no downscale during a rollout, no rollout step while a
/// downscale is prepared):
/// - the webhook denies a downscale while another StatefulSet of the group has non-updated or unavailable pods
///   ([`crate::admission::prepare`], on a live list), and while another StatefulSet's downscale is in progress;
/// - the controller's planner replaces no pod of a group while a marker of that group is live
///   ([`crate::plan::PlanContext::downscales_in_progress`], read from the record by the shell).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DownscaleInProgress {
    #[serde(skip)]
    pub statefulset: String,
    pub group: String,
    #[serde(with = "timestamp_rfc3339")]
    pub until: Timestamp,
}

impl DownscaleInProgress {
    /// Live at `now`: the webhook may still be calling pods.
    pub fn is_live(&self, now: Timestamp) -> bool {
        now < self.until
    }
}

mod timestamp_rfc3339 {
    use jiff::Timestamp;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(t: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format_timestamp(*t))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Timestamp, D::Error> {
        let raw = String::deserialize(d)?;
        super::parse_timestamp(&raw).map_err(serde::de::Error::custom)
    }
}

/// An in-progress annotation of the record ([`keys::DOWNSCALES_IN_PROGRESS`] or
/// [`keys::ROLLOUT_STEPS_IN_PROGRESS`]) that cannot be read: none of its entries is known then.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("annotation {annotation} is not valid: {reason}; expected {expected}")]
pub struct InProgressError {
    /// The annotation's key.
    pub annotation: &'static str,
    /// What the JSON decoder found wrong, with its line and column.
    pub reason: String,
    /// The form the annotation must have.
    pub expected: &'static str,
}

/// Reads the [`keys::DOWNSCALES_IN_PROGRESS`] annotation (absent means none).
pub fn parse_in_progress(raw: Option<&str>) -> Result<Vec<DownscaleInProgress>, InProgressError> {
    let Some(raw) = raw.filter(|r| !r.trim().is_empty()) else {
        return Ok(Vec::new());
    };
    let map: BTreeMap<String, DownscaleInProgress> = serde_json::from_str(raw).map_err(|e| InProgressError {
        annotation: keys::DOWNSCALES_IN_PROGRESS,
        reason: e.to_string(),
        expected: r#"{"<statefulset>":{"group":"<group>","until":"<RFC 3339>"}}"#,
    })?;
    Ok(map
        .into_iter()
        .map(|(statefulset, mut marker)| {
            marker.statefulset = statefulset;
            marker
        })
        .collect())
}

/// The annotation value for `markers`; `None` when there are none (the annotation is removed).
pub fn render_in_progress(markers: &[DownscaleInProgress]) -> Option<String> {
    if markers.is_empty() {
        return None;
    }
    let map: BTreeMap<&str, &DownscaleInProgress> = markers.iter().map(|m| (m.statefulset.as_str(), m)).collect();
    serde_json::to_string(&map).ok()
}

/// The live marker of `group` for a StatefulSet other than `except`, if any (the first by name).
pub fn live_in_progress<'a>(
    markers: &'a [DownscaleInProgress],
    group: &str,
    except: Option<&str>,
    now: Timestamp,
) -> Option<&'a DownscaleInProgress> {
    markers.iter().find(|m| m.group == group && Some(m.statefulset.as_str()) != except && m.is_live(now))
}

/// A rollout step the controller is carrying out in a group: from its claim in the record (written before the
/// step's first pod deletion, conditional on the record version the step was planned from) until its deletions
/// have all been answered. Stored in the record ConfigMap's [`keys::ROLLOUT_STEPS_IN_PROGRESS`] annotation;
/// `until` bounds it if the controller dies midway.
///
/// It closes the window the webhook's in-progress marker alone leaves open: a pass that read the record before a
/// downscale's marker committed would otherwise delete pods after it. With both markers in one compare-and-swap
/// object, either the step's claim fails (the record moved since the pass read it: re-plan, and the new plan sees
/// the downscale's marker) or the downscale's claim sees the step's marker and is refused.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RolloutStepInProgress {
    #[serde(skip)]
    pub group: String,
    #[serde(with = "timestamp_rfc3339")]
    pub until: Timestamp,
}

impl RolloutStepInProgress {
    /// Live at `now`: deletions of the step may still be in flight.
    pub fn is_live(&self, now: Timestamp) -> bool {
        now < self.until
    }
}

/// Reads the [`keys::ROLLOUT_STEPS_IN_PROGRESS`] annotation (absent means none).
pub fn parse_rollout_steps(raw: Option<&str>) -> Result<Vec<RolloutStepInProgress>, InProgressError> {
    let Some(raw) = raw.filter(|r| !r.trim().is_empty()) else {
        return Ok(Vec::new());
    };
    let map: BTreeMap<String, RolloutStepInProgress> = serde_json::from_str(raw).map_err(|e| InProgressError {
        annotation: keys::ROLLOUT_STEPS_IN_PROGRESS,
        reason: e.to_string(),
        expected: r#"{"<rollout group>":{"until":"<RFC 3339>"}}"#,
    })?;
    Ok(map
        .into_iter()
        .map(|(group, mut step)| {
            step.group = group;
            step
        })
        .collect())
}

/// The annotation value for `steps`; `None` when there are none (the annotation is removed).
pub fn render_rollout_steps(steps: &[RolloutStepInProgress]) -> Option<String> {
    if steps.is_empty() {
        return None;
    }
    let map: BTreeMap<&str, &RolloutStepInProgress> = steps.iter().map(|s| (s.group.as_str(), s)).collect();
    serde_json::to_string(&map).ok()
}

/// The live rollout step of `group`, if any.
pub fn live_rollout_step<'a>(
    steps: &'a [RolloutStepInProgress],
    group: &str,
    now: Timestamp,
) -> Option<&'a RolloutStepInProgress> {
    steps.iter().find(|s| s.group == group && s.is_live(now))
}

/// Whether the prepare-downscale webhook serves a member of `group` (labelled [`keys::PREPARE_DOWNSCALE`]): then its
/// downscales must not be prepared while pods of the group are being replaced (no downscale during a rollout), so a
/// pass that deletes pods claims its step in the record first, and a pass that cannot read the record fails closed.
pub fn served_by_prepare_downscale(group: &GroupSnapshot) -> bool {
    group.members.iter().any(|m| m.sts.labels.get(keys::PREPARE_DOWNSCALE).is_some_and(|v| v == "true"))
}

/// Who claims a downscale in the record: the controller's claim for a follower also applies the reference's
/// follower rule ([`crate::scaling::follower_without_min_time`]); an admitted change does not (the reference's
/// webhook skips a StatefulSet without a min time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claimant {
    /// The prepare-downscale webhook, for a user's (or an autoscaler's) change.
    Admission,
    /// The controller, scaling a follower down after its leader.
    FollowerScaling,
}

/// The outcome of a claim in the record made with an in-progress marker (the prepare-downscale webhook's, a
/// follower's downscale by the controller).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MarkedClaim {
    /// Recorded, with an in-progress marker for `statefulset` until `until`.
    Claimed {
        previous: Option<Timestamp>,
    },
    Refused(MinTimeVerdict),
    /// Another StatefulSet of the group has a downscale in progress.
    Busy(DownscaleInProgress),
    /// The controller is carrying out a rollout step in the group (pod deletions may be in flight).
    Stepping(RolloutStepInProgress),
}

/// How long after an answer (the webhook's) or a write (the controller's) a replica change is taken to have
/// committed: a downscale is dated that much later than known, so the min time between zone downscales runs from
/// no earlier than the commit. The API server commits an admitted change milliseconds after the last webhook
/// answers; seconds leave room for a slow write.
pub const COMMIT_MARGIN: Duration = Duration::from_secs(10);

/// When a downscale admitted or written at `now` is taken to have committed: `now` plus the commit margin, rounded
/// up to the second the record and the annotation keep (never earlier than the commit).
pub fn downscale_committed_by(now: Timestamp, commit_margin: Duration) -> Timestamp {
    round_up_to_second(time_after(now, commit_margin))
}
