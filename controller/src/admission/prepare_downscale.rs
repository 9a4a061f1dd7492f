//! The prepare-downscale webhook, `/admission/prepare-downscale` (reference 4.3): drives the core's step machine
//! ([`PrepareDownscale`]) within the handler's deadline, carrying out the I/O its steps ask for: live reads through
//! the cluster port, the zone tracker's compare-and-swap claim (or without it the `last-downscale` annotation), and
//! the pod calls through the pod HTTP client, undone on failure with their own deadline.
//!
//! Must not decide: every verdict and message comes from `rollout_core::admission::prepare_flow`. It never writes to
//! the object under admission, and a dry-run request causes no write and no pod call.

use super::router::{AdmissionApi, Late, Webhooks, before, remaining, respond, tell_verdict};
use crate::cluster::ApiError;
use crate::cluster::zone_tracker::{claim_downscale_marked, finish_marked_claim, read_markers, read_record};
use crate::pods::client::{DEFAULT_CONCURRENCY, PodCallError, PodHttpClient, PodRequest, PodResponse, call_all};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use jiff::Timestamp;
use rollout_core::admission::prepare::PreparePlan;
use rollout_core::admission::prepare_flow::{FlowSettings, Need, Observed, PrepareDownscale, StatefulSetLookup};
use rollout_core::admission::{AdmissionRequest, Verdict};
use rollout_core::downscale::{ClaimEnd, Claimant};
use rollout_core::{Failure, PodView, StatefulSetView, keys};
use std::sync::Arc;
use tokio::time::Instant;

pub const PREPARE_DOWNSCALE_PATH: &str = "/admission/prepare-downscale";

pub(super) async fn handler<C: AdmissionApi, P: PodHttpClient>(
    State(webhooks): State<Arc<Webhooks<C, P>>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    respond(&headers, &body, |request| async move {
        let deadline = Instant::now() + webhooks.settings.handler_deadline;
        decide_prepare_downscale(&webhooks, &request, deadline).await
    })
    .await
}

/// The prepare-downscale webhook: drives the core's step machine ([`PrepareDownscale`]), carrying out each need
/// within the handler's deadline (a need not met in time is observed as a failure, and the machine applies its
/// policy) and feeding back what it saw, until the machine answers.
pub async fn decide_prepare_downscale<C: AdmissionApi, P: PodHttpClient>(
    webhooks: &Webhooks<C, P>,
    request: &AdmissionRequest,
    deadline: Instant,
) -> Verdict {
    let settings = &webhooks.settings;
    let mut flow = PrepareDownscale::new(
        request.clone(),
        FlowSettings {
            namespace: settings.namespace.clone(),
            cluster_domain: settings.cluster_domain.clone(),
            zone_tracker: settings.zone_tracker_config_map.is_some(),
            marker_lifetime: settings.handler_deadline + settings.undo_deadline,
            commit_margin: settings.commit_margin,
            defences: settings.defences,
        },
    );
    let mut observed = Observed::Start;
    let mut prepared = Vec::new();
    loop {
        match flow.step(observed, (webhooks.clock)()) {
            Need::Answer(verdict) => {
                tell_verdict(&settings.events, request, &verdict, &prepared);
                return verdict;
            }
            need => {
                if let Need::PreparePods { plan } = &need {
                    prepared = plan.endpoints.iter().map(|e| e.pod.clone()).collect();
                }
                let kind = need.kind();
                observed = carry_out(webhooks, need, deadline).await;
                crate::ops::needs::failed("prepare-downscale", kind, observed.failure_kind());
            }
        }
    }
}

/// Carries out one need of the prepare-downscale flow and says what was observed.
async fn carry_out<C: AdmissionApi, P: PodHttpClient>(
    webhooks: &Webhooks<C, P>,
    need: Need,
    deadline: Instant,
) -> Observed {
    let api = &webhooks.api;
    let config_map = webhooks.settings.zone_tracker_config_map.as_deref().unwrap_or_default();
    match need {
        Need::StatefulSet { name } => {
            Observed::StatefulSet(match before(deadline, "get statefulset", api.get_statefulset(&name)).await {
                Ok(Some(live)) => match StatefulSetView::from_k8s(&live) {
                    Ok(view) => StatefulSetLookup::Found(Box::new(view)),
                    Err(err) => StatefulSetLookup::Invalid(err.to_string()),
                },
                Ok(None) => StatefulSetLookup::NotFound,
                Err(err) => StatefulSetLookup::Failed(err.failure()),
            })
        }
        Need::GroupStatefulSets { selector } => Observed::GroupStatefulSets(
            before(deadline, "list statefulsets", api.list_statefulsets(&selector))
                .await
                .map(|list| list.iter().filter_map(|s| StatefulSetView::from_k8s(s).ok()).collect())
                .map_err(|err| err.failure()),
        ),
        Need::Pods => Observed::Pods(
            before(deadline, "list pods", api.list_pods(""))
                .await
                .map(|list| list.iter().filter_map(|p| PodView::from_k8s(p).ok()).collect())
                .map_err(|err| err.failure()),
        ),
        Need::Record => {
            let read = before(deadline, "read record", read_record(api, config_map)).await;
            Observed::Record(match read {
                Ok(Some(stored)) => read_markers(&stored)
                    .map(|markers| Some((stored.record, markers)))
                    .map_err(|err| Failure::Unreadable(err.to_string())),
                Ok(None) => Ok(None),
                // Say which verbs are missing.
                Err(err @ Late::Failed(_)) if err.failure().is_forbidden() => Err(err.failure().map_message(|m| {
                    format!("{m}; grant the operator get, update and create on configmaps, or drop -use-zone-tracker")
                })),
                Err(err) => Err(err.failure()),
            })
        }
        Need::Claim { group, statefulset, now, until } => Observed::Claim(
            before(
                deadline,
                "claim downscale",
                claim_downscale_marked(
                    api,
                    config_map,
                    &group,
                    &statefulset,
                    Claimant::Admission,
                    now,
                    until,
                    webhooks.settings.defences,
                ),
            )
            .await
            .map_err(|err| err.failure()),
        ),
        Need::GroupAgain { selector } => {
            let read = async {
                let members = api.list_statefulsets(&selector).await?;
                let pods = api.list_pods("").await?;
                Ok::<_, ApiError>((members, pods))
            };
            Observed::GroupAgain(
                before(deadline, "re-read the group after the claim", read)
                    .await
                    .map(|(members, pods)| {
                        (
                            members.iter().filter_map(|s| StatefulSetView::from_k8s(s).ok()).collect(),
                            pods.iter().filter_map(|p| PodView::from_k8s(p).ok()).collect(),
                        )
                    })
                    .map_err(|err| err.failure()),
            )
        }
        Need::PreparePods { plan } => Observed::PodsPrepared(prepare_pods(&webhooks.pods, &plan, deadline).await),
        Need::DateInRecord { statefulset, until, committed_by } => {
            let end = ClaimEnd::Committed { at: committed_by };
            let dated = before(
                deadline,
                "date the downscale and clear the downscale-in-progress marker",
                finish_marked_claim(api, config_map, &statefulset, until, &[until], end, webhooks.settings.defences),
            )
            .await;
            if let Err(err) = &dated {
                // The entry keeps the claim's date (`until`, later still) and the marker expires by itself.
                tracing::warn!(statefulset = %statefulset, error = %err, "could not date the downscale or clear its in-progress marker; the marker expires by itself");
            }
            Observed::DatedInRecord(dated.map(|_| ()).map_err(|err| err.failure()))
        }
        Need::PatchLastDownscale { statefulset, resource_version, at } => {
            let annotations = std::collections::BTreeMap::from([(
                keys::LAST_DOWNSCALE.to_string(),
                rollout_core::downscale::format_timestamp(at),
            )]);
            let written = before(
                deadline,
                "record the downscale",
                api.patch_statefulset_annotations(&statefulset, &resource_version, &annotations),
            )
            .await;
            Observed::LastDownscalePatched(written.map(|_| ()).map_err(|err| err.failure()))
        }
        Need::Undo(what) => {
            undo(webhooks, &what.statefulset, &what.plan, what.claim, &what.dated_since).await;
            Observed::Undone
        }
        // The driver returns answers itself.
        Need::Answer(_) => Observed::Undone,
    }
}

/// POSTs to every endpoint (concurrency 32, the first failure stops the rest); the failures, described.
async fn prepare_pods<P: PodHttpClient>(pods: &P, plan: &PreparePlan, deadline: Instant) -> Vec<String> {
    let requests: Vec<PodRequest> = plan
        .endpoints
        .iter()
        .map(|e| PodRequest { json_content_type: true, ..PodRequest::post(e.url.clone()) })
        .collect();
    match tokio::time::timeout(remaining(deadline), call_all(pods, requests, DEFAULT_CONCURRENCY, true)).await {
        Ok(results) => results.into_iter().filter_map(describe_failure).collect(),
        Err(_) => vec!["the webhook's deadline passed while pods were being prepared".to_string()],
    }
}

fn describe_failure(result: Result<PodResponse, PodCallError>) -> Option<String> {
    match result {
        Ok(response) if response.is_success() => None,
        Ok(response) => Some(format!("pod answered HTTP {}: {}", response.status, response.body_text())),
        // Calls abandoned because another failed first say nothing new.
        Err(PodCallError::Cancelled { .. }) => None,
        Err(err) => Some(err.to_string()),
    }
}

/// Undoes a failed prepare: DELETE to every endpoint (errors only logged) and the record claim, on a task of its
/// own with its own deadline, so it completes even if the API server has given up on this request.
async fn undo<C: AdmissionApi, P: PodHttpClient>(
    webhooks: &Webhooks<C, P>,
    statefulset: &str,
    plan: &PreparePlan,
    claim: Option<(Option<Timestamp>, Timestamp)>,
    dated_since: &[Timestamp],
) {
    let pods = webhooks.pods.clone();
    let api = webhooks.api.clone();
    let config_map = webhooks.settings.zone_tracker_config_map.clone().unwrap_or_default();
    let statefulset = statefulset.to_string();
    let deadline = webhooks.settings.undo_deadline;
    let defences = webhooks.settings.defences;
    let requests: Vec<PodRequest> = plan.endpoints.iter().map(|e| PodRequest::delete(e.url.clone())).collect();
    // The entry as the claim dated it, or as this request dated it since.
    let ours: Vec<Timestamp> = claim.iter().map(|(_, until)| *until).chain(dated_since.iter().copied()).collect();
    let task = tokio::spawn(async move {
        let undo_calls = async {
            for result in call_all(&pods, requests, DEFAULT_CONCURRENCY, false).await {
                if let Some(failure) = describe_failure(result) {
                    tracing::warn!(statefulset = %statefulset, error = %failure, "undoing a prepare-shutdown call failed");
                }
            }
            if let Some((previous, until)) = claim
                && let Err(err) = finish_marked_claim(
                    &api,
                    &config_map,
                    &statefulset,
                    until,
                    &ours,
                    ClaimEnd::Undone { previous },
                    defences,
                )
                .await
            {
                tracing::warn!(statefulset = %statefulset, error = %err, "could not undo the downscale claim");
            }
        };
        if tokio::time::timeout(deadline, undo_calls).await.is_err() {
            tracing::warn!(statefulset = %statefulset, "undoing a failed prepare-downscale did not finish in time");
        }
    });
    let _ = task.await;
}
