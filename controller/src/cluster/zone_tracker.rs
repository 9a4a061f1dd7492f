//! The zone tracker: the ConfigMap (named by `-zone-tracker.config-map-name`, in the reference's zone-tracker
//! format) that holds the group downscale record. Reading it, claiming a zone downscale or a rollout step in it, and
//! ending or undoing a claim.
//!
//! Owns the I/O around `rollout_core::downscale`: every write to the ConfigMap is a compare-and-swap on its resourceVersion
//! (create when absent, replace conditional on the version read). So two actors — the controller's
//! leader/follower scaling, the prepare-downscale webhook, several operator replicas — can never both pass the
//! min-time check for different zones of one group: the second writer's swap fails, it re-reads the record with the
//! first claim in it, and the core's [`record_claims`] refuses it.
//!
//! Must not decide anything itself: whether a downscale may happen is the verdict of [`record_claims`] on the record
//! read; this module only retries the read-check-swap cycle on conflicts, a bounded number of times.

use crate::cluster::{ApiError, ZoneTrackerStore};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rollout_core::downscale::{
    ClaimEnd, Claimant, DownscaleInProgress, DownscaleRecord, InProgressError, MarkedClaim, RecordError,
    RolloutStepInProgress, parse_in_progress, parse_rollout_steps, render_in_progress, render_rollout_steps,
};
use rollout_core::execution::StepClaimed;
use rollout_core::keys;
use rollout_core::record_claims::{self, Transition};
use rollout_core::{Defences, Failure, GroupSnapshot};
use thiserror::Error;

/// The zone tracker's ConfigMap when `-zone-tracker.config-map-name` is not given (the reference's default).
pub const DEFAULT_CONFIG_MAP: &str = "rollout-operator-zone-tracker";

/// How many read-check-swap rounds a claim or undo makes before giving up. Every conflict means another writer
/// succeeded, so this bounds the work under contention, not the chance of success of a lone writer.
pub const MAX_ATTEMPTS: u32 = 16;

/// The record as read, with the resourceVersion a write must be conditional on.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredRecord {
    pub record: DownscaleRecord,
    pub resource_version: String,
    /// The ConfigMap as read: a write keeps its other metadata (labels, annotations, owner references).
    pub config_map: ConfigMap,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ZoneTrackerError {
    #[error("downscale record configmap {config_map}: {source}")]
    Api {
        config_map: String,
        #[source]
        source: ApiError,
    },
    #[error(
        "downscale record configmap {config_map} cannot be read: {source}; fix or delete the entry (its data keys \
         are StatefulSet names, values {{\"lastDownscaled\":\"<RFC 3339 time>\"}})"
    )]
    Unreadable {
        config_map: String,
        #[source]
        source: RecordError,
    },
    #[error("downscale record configmap {config_map} has no resourceVersion; cannot update it safely")]
    NoResourceVersion { config_map: String },
    #[error(
        "downscale record configmap {config_map} kept changing under us: gave up after {attempts} conflicting \
         writes; retry later"
    )]
    Contended { config_map: String, attempts: u32 },
}

impl ZoneTrackerError {
    /// Short, stable label for metrics and logs, by what to do about it (as [`ApiError::kind`]).
    pub fn kind(&self) -> &'static str {
        match self {
            ZoneTrackerError::Api { source, .. } => source.kind(),
            ZoneTrackerError::Unreadable { .. } => "unreadable_record",
            ZoneTrackerError::NoResourceVersion { .. } => "rejected",
            ZoneTrackerError::Contended { .. } => "conflict",
        }
    }

    /// The API refused the record with 403: the operator may not use the zone tracker's ConfigMap.
    pub fn is_forbidden(&self) -> bool {
        matches!(self, ZoneTrackerError::Api { source: ApiError::Forbidden(_), .. })
    }
}

/// The core's classification, with this error's whole text.
impl From<&ZoneTrackerError> for Failure {
    fn from(error: &ZoneTrackerError) -> Failure {
        let message = error.to_string();
        match error {
            ZoneTrackerError::Api { source, .. } => Failure::from(source).map_message(|_| message),
            ZoneTrackerError::Unreadable { .. } | ZoneTrackerError::NoResourceVersion { .. } => {
                Failure::Unreadable(message)
            }
            // Nothing was written: another writer kept winning.
            ZoneTrackerError::Contended { .. } => Failure::Conflict(message),
        }
    }
}

fn api_error(config_map: &str) -> impl Fn(ApiError) -> ZoneTrackerError + '_ {
    move |source| ZoneTrackerError::Api { config_map: config_map.to_string(), source }
}

/// Reads the record; `None` when the ConfigMap does not exist.
pub async fn read_record<C: ZoneTrackerStore>(
    api: &C,
    config_map: &str,
) -> Result<Option<StoredRecord>, ZoneTrackerError> {
    let Some(cm) = api.get_config_map(config_map).await.map_err(api_error(config_map))? else {
        return Ok(None);
    };
    let data = cm.data.clone().unwrap_or_default();
    let record = DownscaleRecord::from_config_map_data(&data)
        .map_err(|source| ZoneTrackerError::Unreadable { config_map: config_map.to_string(), source })?;
    let resource_version = cm
        .metadata
        .resource_version
        .clone()
        .filter(|rv| !rv.is_empty())
        .ok_or_else(|| ZoneTrackerError::NoResourceVersion { config_map: config_map.to_string() })?;
    Ok(Some(StoredRecord { record, resource_version, config_map: cm }))
}

/// What a read-check-swap round writes: the record's data (`None`: as stored) and, when given, the in-progress
/// markers and rollout steps annotations (removed when empty).
#[derive(Debug, Default)]
struct Write {
    record: Option<DownscaleRecord>,
    markers: Option<Vec<DownscaleInProgress>>,
    steps: Option<Vec<RolloutStepInProgress>>,
}

/// What one round decides on the record as read.
enum Round<T> {
    /// Write, then answer `T` if the swap lands (else read again).
    Write(Write, T),
    /// Answer `T` without writing.
    Answer(T),
}

impl<T> From<Transition<T>> for Round<T> {
    fn from(transition: Transition<T>) -> Self {
        match transition {
            Transition::Answer(answer) => Round::Answer(answer),
            Transition::Write { record, markers, steps, answer } => {
                Round::Write(Write { record, markers, steps }, answer)
            }
        }
    }
}

/// Writes `write` back: creates the ConfigMap when `stored` is `None`, else replaces it conditional on the
/// resourceVersion read, keeping its other metadata. `false`: someone else wrote first (created, replaced or
/// deleted it meanwhile).
async fn swap<C: ZoneTrackerStore>(
    api: &C,
    config_map: &str,
    stored: Option<&StoredRecord>,
    write: &Write,
) -> Result<bool, ZoneTrackerError> {
    let mut cm = match stored {
        None => ConfigMap {
            metadata: ObjectMeta { name: Some(config_map.to_string()), ..ObjectMeta::default() },
            ..ConfigMap::default()
        },
        Some(stored) => {
            let mut cm = stored.config_map.clone();
            cm.metadata.resource_version = Some(stored.resource_version.clone());
            cm
        }
    };
    if let Some(record) = &write.record {
        cm.data = Some(record.to_config_map_data());
    }
    let rendered = [
        (keys::DOWNSCALES_IN_PROGRESS, write.markers.as_deref().map(render_in_progress)),
        (keys::ROLLOUT_STEPS_IN_PROGRESS, write.steps.as_deref().map(render_rollout_steps)),
    ];
    for (key, value) in rendered {
        let Some(value) = value else { continue };
        let annotations = cm.metadata.annotations.get_or_insert_with(Default::default);
        match value {
            Some(value) => annotations.insert(key.to_string(), value),
            None => annotations.remove(key),
        };
    }
    let result = match stored {
        None => api.create_config_map(&cm).await,
        Some(_) => api.replace_config_map(&cm).await,
    };
    match result {
        Ok(_) => Ok(true),
        Err(ApiError::Conflict(_)) | Err(ApiError::NotFound(_)) => Ok(false),
        Err(other) => Err(api_error(config_map)(other)),
    }
}

/// The one read-check-swap loop: reads the record, lets `decide` answer or say what to write, and on a lost swap
/// starts over from a fresh read, so every decision is taken on the record it replaces. Bounded by
/// [`MAX_ATTEMPTS`].
async fn read_check_swap<C: ZoneTrackerStore, T>(
    api: &C,
    config_map: &str,
    mut decide: impl FnMut(Option<&StoredRecord>) -> Result<Round<T>, ZoneTrackerError>,
) -> Result<T, ZoneTrackerError> {
    for _ in 0..MAX_ATTEMPTS {
        let stored = read_record(api, config_map).await?;
        match decide(stored.as_ref())? {
            Round::Answer(answer) => return Ok(answer),
            Round::Write(write, answer) => {
                if swap(api, config_map, stored.as_ref(), &write).await? {
                    return Ok(answer);
                }
            }
        }
    }
    Err(ZoneTrackerError::Contended { config_map: config_map.to_string(), attempts: MAX_ATTEMPTS })
}

/// The in-progress markers of `stored`, or why they cannot be read.
pub fn markers_of(stored: &StoredRecord, config_map: &str) -> Result<Vec<DownscaleInProgress>, ZoneTrackerError> {
    read_markers(stored).map_err(|e| ZoneTrackerError::Unreadable {
        config_map: config_map.to_string(),
        source: RecordError {
            key: format!("metadata.annotations[{}]", e.annotation),
            value: String::new(),
            reason: e.to_string(),
        },
    })
}

/// The downscales in progress recorded with the record (see [`DownscaleInProgress`]).
pub fn read_markers(stored: &StoredRecord) -> Result<Vec<DownscaleInProgress>, InProgressError> {
    let annotations = stored.config_map.metadata.annotations.as_ref();
    parse_in_progress(annotations.and_then(|a| a.get(keys::DOWNSCALES_IN_PROGRESS)).map(String::as_str))
}

/// Claims a downscale of `statefulset` (a member of `group`) whose replica change commits some time after the claim
/// (the webhook's, after its pod calls and its answer; the controller's, after its replica write). Reads the record
/// (bootstrapped from the group's `grafana.com/last-downscale` annotations when absent) and decides at `now` with
/// [`record_claims::claim_marked`]: refused by the min-time rule, or while another StatefulSet of the group has a live
/// in-progress marker or the group a live rollout step; otherwise recorded, with this StatefulSet's marker (live
/// until `until`, keeping the controller from replacing pods of the group meanwhile), by compare-and-swap. On a
/// conflict it starts over from a fresh read, so the verdict is always taken on the record it replaces.
///
/// The entry is dated `until`, the latest the replica change can commit under this claim, not `now`: the min time runs
/// from the commit, and a claimant that dies midway leaves a date that is still late enough. [`finish_marked_claim`]
/// moves it back to the actual time once the commit is known to be before it.
// One argument per fact the claim is decided on; a struct of them would only be unpacked again here.
#[allow(clippy::too_many_arguments)]
pub async fn claim_downscale_marked<C: ZoneTrackerStore>(
    api: &C,
    config_map: &str,
    group: &GroupSnapshot,
    statefulset: &str,
    claimant: Claimant,
    now: Timestamp,
    until: Timestamp,
    defences: Defences,
) -> Result<MarkedClaim, ZoneTrackerError> {
    read_check_swap(api, config_map, |stored| {
        let (record, markers, steps) = match stored {
            Some(s) => (Some(&s.record), markers_of(s, config_map)?, read_rollout_steps(s)?),
            None => (None, Vec::new(), Vec::new()),
        };
        let transition =
            record_claims::claim_marked(record, &markers, &steps, group, statefulset, claimant, now, until, defences);
        Ok(Round::from(transition))
    })
    .await
}

/// Ends a marked claim made until `until`: removes its in-progress marker and, while the StatefulSet's entry is
/// still one this claimant wrote (`ours`: `until`, or a date it wrote since), applies `end` to it. A later claim of
/// the same StatefulSet has another marker and entry and is never touched.
pub async fn finish_marked_claim<C: ZoneTrackerStore>(
    api: &C,
    config_map: &str,
    statefulset: &str,
    until: Timestamp,
    ours: &[Timestamp],
    end: ClaimEnd,
    defences: Defences,
) -> Result<(), ZoneTrackerError> {
    read_check_swap(api, config_map, |stored| {
        let Some(stored) = stored else { return Ok(Round::Answer(())) };
        // Unreadable markers are not this claimant's to keep: ending the claim goes on without them.
        let markers = read_markers(stored).unwrap_or_default();
        let transition =
            record_claims::finish_marked(&stored.record, &markers, statefulset, until, ours, end, defences);
        Ok(Round::from(transition))
    })
    .await
}

/// The rollout steps in progress recorded with the record (see [`RolloutStepInProgress`]).
pub fn read_rollout_steps(stored: &StoredRecord) -> Result<Vec<RolloutStepInProgress>, ZoneTrackerError> {
    let annotations = stored.config_map.metadata.annotations.as_ref();
    let raw = annotations.and_then(|a| a.get(keys::ROLLOUT_STEPS_IN_PROGRESS)).map(String::as_str);
    parse_rollout_steps(raw).map_err(|e| ZoneTrackerError::Unreadable {
        config_map: stored.config_map.metadata.name.clone().unwrap_or_default(),
        source: RecordError {
            key: format!("metadata.annotations[{}]", e.annotation),
            value: raw.unwrap_or_default().to_string(),
            reason: e.to_string(),
        },
    })
}

/// Claims a rollout step of `group` before its pod deletions: one compare-and-swap on `stored`, the record as the
/// pass that planned the step read it (`None`: it did not exist; it is created). Never retried on a conflict: a
/// record that moved may now hold a downscale's in-progress marker the plan did not see.
pub async fn claim_rollout_step<C: ZoneTrackerStore>(
    api: &C,
    config_map: &str,
    stored: Option<&StoredRecord>,
    group: &GroupSnapshot,
    now: Timestamp,
    until: Timestamp,
) -> Result<StepClaimed, ZoneTrackerError> {
    let steps = match stored {
        Some(stored) => read_rollout_steps(stored)?,
        None => Vec::new(),
    };
    match record_claims::claim_step(&steps, stored.is_some(), group, now, until) {
        Transition::Answer(answer) => Ok(answer),
        Transition::Write { record, markers, steps, answer } => {
            let write = Write { record, markers, steps };
            Ok(if swap(api, config_map, stored, &write).await? { answer } else { StepClaimed::Stale })
        }
    }
}

/// Ends a rollout step claimed until `until`: removes its entry (only that one: a later step of the group has
/// another `until`) by compare-and-swap. An entry left behind by a failure expires by itself.
pub async fn finish_rollout_step<C: ZoneTrackerStore>(
    api: &C,
    config_map: &str,
    group: &str,
    until: Timestamp,
) -> Result<(), ZoneTrackerError> {
    read_check_swap(api, config_map, |stored| {
        let Some(stored) = stored else { return Ok(Round::Answer(())) };
        Ok(Round::from(record_claims::finish_step(&read_rollout_steps(stored)?, group, until)))
    })
    .await
}
