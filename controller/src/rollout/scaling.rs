//! The shell side of scaling coordination: fetching what `rollout_core::scaling` decides on, and carrying out its
//! decisions.
//!
//! Owns: resolving a mirror StatefulSet's reference resource (API discovery over every version of its group, then
//! the `scale` subresource), the delayed-downscale pod calls (DELETE to cancel, POST to prepare) through the pod
//! HTTP client port, the status write-back to the reference, and claiming leader/follower downscales in the group
//! downscale record before patching. It decides nothing itself: what to scale, to what and whether to wait all come
//! from `rollout_core::scaling`. It never deletes pods and never patches more than the one StatefulSet it is given.

use crate::cluster::zone_tracker::{ZoneTrackerError, claim_downscale_marked, finish_marked_claim};
use crate::cluster::{ApiError, ApiResourceRef, ScaleTargets, ZoneTrackerStore};
use crate::pods::client::{DEFAULT_CONCURRENCY, PodCallError, PodHttpClient, PodRequest, call_all};
use jiff::Timestamp;
use rollout_core::MirrorFindings;
use rollout_core::downscale::ClaimEnd;
use rollout_core::downscale::Claimant;
use rollout_core::downscale::MarkedClaim;
use rollout_core::group::GroupSnapshot;
use rollout_core::mirror_flow::{
    Endpoints, MirrorFlow, MirrorFlowSettings, MirrorNeed, MirrorObserved, MirrorResult, PodAnswer,
};
use rollout_core::scaling::ReferenceScale;
use rollout_core::{Defences, Failure};

/// Settings of the scaling shell, from the command line.
#[derive(Debug, Clone)]
pub struct ScalingConfig {
    /// `-kubernetes.namespace`: pod DNS names are `<pod>.<service>.<namespace>.svc.<cluster-domain>`.
    pub namespace: String,
    /// `-kubernetes.cluster-domain`.
    pub cluster_domain: String,
    /// `-zone-tracker.config-map-name` when `-use-zone-tracker` is true: the zone tracker's ConfigMap (the group
    /// downscale record) shared with the prepare-downscale webhook. `None` (the flag's default, as in the
    /// reference): no ConfigMap is read or written; downscales are recorded in each StatefulSet's
    /// `grafana.com/last-downscale` annotation.
    pub zone_tracker_config_map: Option<String>,
    /// Pod calls in flight per StatefulSet.
    pub pod_concurrency: usize,
}

impl Default for ScalingConfig {
    fn default() -> Self {
        ScalingConfig {
            namespace: "default".to_string(),
            cluster_domain: "cluster.local.".to_string(),
            zone_tracker_config_map: Some(crate::cluster::zone_tracker::DEFAULT_CONFIG_MAP.to_string()),
            pod_concurrency: DEFAULT_CONCURRENCY,
        }
    }
}

/// What the mirror step found for a group: the core's findings (applied to the pass with
/// [`rollout_core::Pass::with_mirror`]) and, for the replica change due if any, where to write it back.
#[derive(Debug, Clone, Default)]
pub struct MirrorOutcome {
    pub findings: MirrorFindings,
    /// Write the new replicas back into this reference's `status.replicas` once the patch succeeded.
    pub write_back: Option<(ApiResourceRef, String)>,
}

/// Why a mirror StatefulSet's reference resource could not be read (the reference's messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceLookupError {
    #[error("unable to find custom resource mapping for reference resource {kind}/{name}: {source}")]
    Discovery { kind: String, name: String, source: ApiError },
    #[error(
        "unable to find custom resource mapping for reference resource {kind}/{name}: no {kind} in API group {group:?}"
    )]
    NoMapping { kind: String, name: String, group: String },
    /// Every mapping's `scale` GET failed; the first error.
    #[error("failed to query scale subresource for {kind}/{name}: {source}")]
    Scale { kind: String, name: String, source: ApiError },
}

/// The core's classification, with the reference's wording.
impl From<&ReferenceLookupError> for Failure {
    fn from(error: &ReferenceLookupError) -> Failure {
        let message = error.to_string();
        match error {
            ReferenceLookupError::Discovery { source, .. } | ReferenceLookupError::Scale { source, .. } => {
                Failure::from(source).map_message(|_| message)
            }
            ReferenceLookupError::NoMapping { .. } => Failure::NotFound(message),
        }
    }
}

/// Finds the reference resource: every mapping of `(group, kind)`; the first whose `scale` GET succeeds wins; if all
/// fail, the first error.
async fn resolve_scale<C: ScaleTargets>(
    api: &C,
    group: &str,
    kind: &str,
    name: &str,
) -> Result<(ApiResourceRef, ReferenceScale), ReferenceLookupError> {
    let (kind_, name_) = (kind.to_string(), name.to_string());
    let resources = api.discover_resources(group, kind).await.map_err(|source| ReferenceLookupError::Discovery {
        kind: kind_.clone(),
        name: name_.clone(),
        source,
    })?;
    let mut first_error = None;
    for resource in resources {
        match api.get_scale(&resource, name).await {
            Ok(scale) => {
                let reference = ReferenceScale {
                    spec_replicas: scale.pointer("/spec/replicas").and_then(serde_json::Value::as_i64),
                    status_replicas: scale.pointer("/status/replicas").and_then(serde_json::Value::as_i64),
                };
                return Ok((resource, reference));
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    Err(match first_error {
        Some(source) => ReferenceLookupError::Scale { kind: kind_, name: name_, source },
        None => ReferenceLookupError::NoMapping { kind: kind_, name: name_, group: group.to_string() },
    })
}

/// Writes `value` into the reference's `status.replicas` (JSON merge patch). Errors are only logged.
pub async fn write_back<C: ScaleTargets>(api: &C, resource: &ApiResourceRef, name: &str, value: u32) {
    let patch = serde_json::json!({ "status": { "replicas": value } });
    match api.patch_resource_status(resource, name, &patch).await {
        Ok(()) => {
            tracing::debug!(reference = %name, replicas = value, "updated status.replicas of the reference resource")
        }
        Err(error) => {
            tracing::warn!(reference = %name, %error, "failed to update status.replicas of the reference resource")
        }
    }
}

/// Cancels delayed downscale (DELETE) on `endpoints`. Never fails: 409 means the pod's partition state is locked
/// (fine); other failures are logged.
async fn cancel<H: PodHttpClient>(pods: &H, cfg: &ScalingConfig, statefulset: &str, endpoints: &Endpoints) {
    let requests = endpoints.iter().map(|(_, url)| PodRequest::delete(url.clone())).collect();
    for ((_, url), result) in endpoints.iter().zip(call_all(pods, requests, cfg.pod_concurrency, false).await) {
        match result {
            Ok(r) if r.is_success() => {}
            Ok(r) if r.status == 409 => {
                tracing::info!(%statefulset, %url, "delayed downscale not cancelled: partition state locked")
            }
            Ok(r) => tracing::error!(%statefulset, %url, status = r.status, body = %r.body_text(),
                "failed to cancel delayed downscale"),
            Err(error) => tracing::error!(%statefulset, %url, %error, "failed to cancel delayed downscale"),
        }
    }
}

/// Asks `endpoints` to prepare (POST); the first failure abandons the calls not yet answered.
async fn prepare<H: PodHttpClient>(pods: &H, cfg: &ScalingConfig, endpoints: &Endpoints) -> Vec<(u32, PodAnswer)> {
    let requests = endpoints.iter().map(|(_, url)| PodRequest::post(url.clone())).collect();
    let results = call_all(pods, requests, cfg.pod_concurrency, true).await;
    endpoints
        .iter()
        .zip(results)
        .map(|((ordinal, _), result)| {
            let answer = match result {
                Ok(response) => PodAnswer::Response { status: response.status, body: response.body },
                Err(PodCallError::Cancelled { .. }) => PodAnswer::Abandoned,
                Err(error) => PodAnswer::Failed(error.to_string()),
            };
            (*ordinal, answer)
        })
        .collect()
}

/// The mirror step over a group ([`MirrorFlow`]): carries out each need the core names (reference reads, delayed
/// downscale pod calls, status write-backs) and returns what it found.
pub async fn mirror_group<C: ScaleTargets, H: PodHttpClient>(
    api: &C,
    pods: &H,
    cfg: &ScalingConfig,
    group: &GroupSnapshot,
    now: Timestamp,
) -> MirrorOutcome {
    let settings = MirrorFlowSettings { namespace: cfg.namespace.clone(), cluster_domain: cfg.cluster_domain.clone() };
    let mut flow = MirrorFlow::new(group.clone(), settings);
    let mut observed = MirrorObserved::Start;
    loop {
        let need = flow.step(observed, now);
        let kind = need.kind();
        observed = match need {
            MirrorNeed::Reference { mirror, .. } => {
                let read = resolve_scale(api, &mirror.api_group, &mirror.kind, &mirror.name).await;
                MirrorObserved::Reference(read.map_err(|e| Failure::from(&e)))
            }
            MirrorNeed::Cancel { statefulset, endpoints } => {
                match endpoints {
                    Ok(endpoints) => cancel(pods, cfg, &statefulset, &endpoints).await,
                    Err(error) => tracing::warn!(%statefulset, %error, "cannot cancel delayed downscale"),
                }
                MirrorObserved::Cancelled
            }
            MirrorNeed::Prepare { endpoints, .. } => MirrorObserved::Prepared(prepare(pods, cfg, &endpoints).await),
            MirrorNeed::WriteBack { reference, name, replicas, .. } => {
                write_back(api, &reference, &name, replicas).await;
                MirrorObserved::WrittenBack
            }
            MirrorNeed::Done(MirrorResult { findings, write_back }) => return MirrorOutcome { findings, write_back },
        };
        crate::ops::needs::failed("mirror", kind, observed.failure_kind());
    }
}

/// Whether a leader/follower downscale may go ahead, claimed in the group downscale record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DownscaleClaim {
    /// Recorded, dated `until` (the latest the replica write can commit) with an in-progress marker until then;
    /// `previous` is the entry before the claim. End it with [`end_claim`].
    Claimed { previous: Option<Timestamp>, until: Timestamp },
    /// Another actor downscaled a zone within the min time, a downscale or a rollout step of the group is in
    /// progress, or a value the decision depends on is unusable.
    Refused(String),
}

/// Claims a follower's downscale at `now` in the record `config_map` (see [`claim_downscale_marked`]), holding until
/// `until`.
pub async fn claim<C: ZoneTrackerStore>(
    api: &C,
    config_map: &str,
    group: &GroupSnapshot,
    statefulset: &str,
    now: Timestamp,
    until: Timestamp,
    defences: Defences,
) -> Result<DownscaleClaim, ZoneTrackerError> {
    Ok(
        match claim_downscale_marked(
            api,
            config_map,
            group,
            statefulset,
            Claimant::FollowerScaling,
            now,
            until,
            defences,
        )
        .await?
        {
            MarkedClaim::Claimed { previous } => DownscaleClaim::Claimed { previous, until },
            MarkedClaim::Refused(verdict) => DownscaleClaim::Refused(verdict.describe()),
            MarkedClaim::Busy(holder) => DownscaleClaim::Refused(format!(
                "a downscale of StatefulSet {} is being prepared (until {} at the latest)",
                holder.statefulset,
                rollout_core::downscale::format_timestamp(holder.until)
            )),
            MarkedClaim::Stepping(step) => DownscaleClaim::Refused(format!(
                "pods of rollout group {} are being replaced (until {} at the latest)",
                step.group,
                rollout_core::downscale::format_timestamp(step.until)
            )),
        },
    )
}

/// Ends a claim once the replica write's outcome is known: dated at its reply when it was applied, given back
/// when it definitely was not. (A write with no answer ends nothing: its claim keeps the date `until` and its
/// marker expires then.)
pub async fn end_claim<C: ZoneTrackerStore>(
    api: &C,
    config_map: &str,
    statefulset: &str,
    until: Timestamp,
    end: ClaimEnd,
    defences: Defences,
) {
    if let Err(error) = finish_marked_claim(api, config_map, statefulset, until, &[until], end, defences).await {
        tracing::warn!(%statefulset, %error,
            "could not end the downscale claim; it keeps its later date and its marker expires by itself");
    }
}
