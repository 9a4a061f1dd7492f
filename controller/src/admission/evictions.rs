//! `/admission/pod-eviction` and `/admission/zpdb-validation` (reference 4.6, 5.2, 5.4).
//!
//! Owns the I/O of the eviction decision: the driver loop of the core's step machine
//! ([`rollout_core::zpdb::EvictPod`]), carrying out each need within the handler's deadline (live reads of the pod,
//! its StatefulSet and the budget's StatefulSets and pods; the eviction intent written and removed on the pod; the
//! in-process lock and memory where intents are refused), and the metrics of every answer. The validating webhook
//! is one call into the core.
//!
//! Must not decide: every verdict, message and status code is the core's. A dry run writes nothing (the machine
//! asks for no write).

use super::webhooks::{AdmissionApi, Webhooks, respond};
use crate::cluster::ApiError;
use crate::ops::events::{EventRecord, EventRecorder, EventType, ObjectRef};
use crate::pods::client::PodHttpClient;
use crate::zpdb::Zpdb;
use crate::zpdb::serialisation::INTENTS_FEATURE;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use rollout_core::StatefulSetView;
use rollout_core::admission::{AdmissionRequest, Verdict};
use rollout_core::downscale::format_timestamp;
use rollout_core::keys;
use rollout_core::zpdb::{BudgetPod, EvictPod, EvictionSettings, IntentFailure, Lookup, Need, Observed, validation};
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::OwnedMutexGuard;
use tokio::time::Instant;

pub const POD_EVICTION_PATH: &str = "/admission/pod-eviction";
pub const ZPDB_VALIDATION_PATH: &str = "/admission/zpdb-validation";

/// The router's state for the two paths.
pub struct EvictionState<C, P> {
    pub webhooks: Webhooks<C, P>,
    pub zpdb: Zpdb,
}

pub(super) async fn pod_eviction_handler<C: AdmissionApi, P: PodHttpClient>(
    State(state): State<Arc<EvictionState<C, P>>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    respond(&headers, &body, |request| async move {
        let deadline = Instant::now() + state.webhooks.settings.handler_deadline;
        decide_pod_eviction(&state.webhooks, &state.zpdb, &request, deadline).await
    })
    .await
}

pub(super) async fn zpdb_validation_handler(headers: HeaderMap, body: Bytes) -> Response {
    respond(&headers, &body, |request| async move { validation::validate(&request) }).await
}

/// The pod-eviction webhook: drives the core's step machine, carrying out each need before `deadline` (a need not
/// met in time is observed as a failure, and the machine applies its policy), until it answers.
pub async fn decide_pod_eviction<C: AdmissionApi, P>(
    webhooks: &Webhooks<C, P>,
    zpdb: &Zpdb,
    request: &AdmissionRequest,
    deadline: Instant,
) -> Verdict {
    let _inflight = zpdb.metrics.inflight();
    let settings = &webhooks.settings;
    let mut flow = EvictPod::from_admission(
        request,
        EvictionSettings {
            namespace: settings.namespace.clone(),
            serialisation: zpdb.serialisation.mode(),
            // The rest of this request, then the API server's commit of the eviction after our answer.
            intent_lifetime: settings.handler_deadline + settings.commit_margin,
        },
    );
    // This process's lock of the budget, when the machine asked for it; released when the decision is answered.
    let mut lock: Option<OwnedMutexGuard<()>> = None;
    let mut observed = Observed::Start;
    loop {
        match flow.step(observed, (webhooks.clock)()) {
            Need::Answer(answer) => {
                drop(lock);
                zpdb.metrics.eviction_decided(answer.outcome.reason, answer.outcome.status);
                tracing::info!(pod = %request.name, uid = %request.uid, user = %request.username,
                    allowed = answer.allowed(), reason = answer.outcome.reason, status = answer.outcome.status,
                    message = answer.message(), "eviction decided");
                tell_denial(&settings.events, request, &answer.verdict);
                return answer.verdict;
            }
            need => observed = carry_out(webhooks, zpdb, need, &mut lock, deadline).await,
        }
    }
}

/// Tells a denied eviction as a Warning Event on the pod (`-events.enabled`), so `kubectl describe pod` answers
/// "why was my eviction denied?". A dry run (by the request or by the Eviction's `deleteOptions`) tells nothing;
/// neither does a request that is not an eviction.
fn tell_denial(events: &EventRecorder, request: &AdmissionRequest, verdict: &Verdict) {
    if verdict.allowed || !events.is_enabled() {
        return;
    }
    let Ok(eviction) = rollout_core::zpdb::flow::EvictionRequest::from_admission(request) else { return };
    if eviction.dry_run {
        return;
    }
    let why = verdict.message.as_deref().unwrap_or("no reason given");
    events.record(EventRecord {
        regarding: ObjectRef { api_version: "v1", kind: "Pod", name: eviction.pod, uid: None },
        related: None,
        type_: EventType::Warning,
        reason: "EvictionDenied",
        action: "Evict",
        note: format!("eviction by {} denied: {why}", request.username),
    });
}

/// Runs `call` before `deadline`; a call still running then fails, saying what it was.
async fn before<T>(
    deadline: Instant,
    what: &str,
    call: impl Future<Output = Result<T, ApiError>>,
) -> Result<T, String> {
    match tokio::time::timeout(deadline.saturating_duration_since(Instant::now()), call).await {
        Ok(result) => result.map_err(|err| err.to_string()),
        Err(_) => Err(format!("API unavailable: {what}: the webhook's deadline passed")),
    }
}

/// The budget's pods from a list shared with concurrent decisions (`fresh`: issued after this call), before
/// `deadline`.
async fn shared_pods<C: AdmissionApi, P>(
    webhooks: &Webhooks<C, P>,
    zpdb: &Zpdb,
    selector: &str,
    fresh: bool,
    deadline: Instant,
) -> Result<Vec<BudgetPod>, String> {
    let listed = zpdb.pod_lists.list(&webhooks.api, selector, fresh, webhooks.settings.handler_deadline);
    match tokio::time::timeout(deadline.saturating_duration_since(Instant::now()), listed).await {
        Ok(listed) => listed.as_ref().clone(),
        Err(_) => Err("API unavailable: list pods: the webhook's deadline passed".to_string()),
    }
}

async fn carry_out<C: AdmissionApi, P>(
    webhooks: &Webhooks<C, P>,
    zpdb: &Zpdb,
    need: Need,
    lock: &mut Option<OwnedMutexGuard<()>>,
    deadline: Instant,
) -> Observed {
    let api = &webhooks.api;
    match need {
        Need::Pod { name } => Observed::Pod(match before(deadline, "get pod", api.get_pod(&name)).await {
            Ok(Some(pod)) => match BudgetPod::from_k8s(&pod) {
                Ok(pod) => Lookup::Found(Box::new(pod)),
                Err(err) => Lookup::Failed(err.to_string()),
            },
            Ok(None) => Lookup::NotFound,
            Err(err) => Lookup::Failed(err),
        }),
        Need::Budgets => Observed::Budgets(zpdb.budgets.snapshot()),
        Need::StatefulSet { name } => {
            Observed::StatefulSet(match before(deadline, "get statefulset", api.get_statefulset(&name)).await {
                Ok(Some(sts)) => match StatefulSetView::from_k8s(&sts) {
                    Ok(view) => Lookup::Found(Box::new(view)),
                    Err(err) => Lookup::Failed(err.to_string()),
                },
                Ok(None) => Lookup::NotFound,
                Err(err) => Lookup::Failed(err),
            })
        }
        Need::Lock { budget } => {
            let wait = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(wait, zpdb.serialisation.lock(&budget)).await {
                Ok(guard) => {
                    *lock = Some(guard);
                    Observed::Locked { remembered: zpdb.serialisation.remembered((webhooks.clock)()) }
                }
                Err(_) => Observed::NotLocked,
            }
        }
        Need::StatefulSets { selector } => Observed::StatefulSets(
            before(deadline, "list statefulsets", api.list_statefulsets(&selector))
                .await
                .map(|list| list.iter().filter_map(|s| StatefulSetView::from_k8s(s).ok()).collect()),
        ),
        // Shared with the decisions of the same budget in flight (`zpdb::reads`): the first read may join the list
        // in flight; the read again, after the intent was written, only a list issued after now.
        Need::Pods { selector } => Observed::Pods(shared_pods(webhooks, zpdb, &selector, false, deadline).await),
        Need::PodsAgain { selector, after } => {
            tokio::time::sleep(after.min(deadline.saturating_duration_since(Instant::now()))).await;
            Observed::Pods(shared_pods(webhooks, zpdb, &selector, true, deadline).await)
        }
        Need::WriteIntent { pod, uid, until } => {
            let changes = BTreeMap::from([(keys::EVICTION_INTENT.to_string(), Some(format_timestamp(until)))]);
            let written = tokio::time::timeout(
                deadline.saturating_duration_since(Instant::now()),
                api.patch_pod_annotations(&pod, &uid, &changes),
            )
            .await;
            Observed::IntentWritten(match written {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(err @ ApiError::Rejected { code: 403, .. })) => {
                    if zpdb.serialisation.forbid_intents() {
                        zpdb.metrics.feature_disabled(INTENTS_FEATURE, "patch pods");
                        tracing::error!(error = %err, "cannot write eviction intents on pods: eviction decisions are \
                            serialised per replica only (as the reference does), so two operator replicas or a \
                            restart can break a ZoneAwarePodDisruptionBudget; grant patch on pods");
                    }
                    Err(IntentFailure::Forbidden(err.to_string()))
                }
                Ok(Err(err @ (ApiError::Conflict(_) | ApiError::NotFound(_)))) => {
                    Err(IntentFailure::Changed(err.to_string()))
                }
                Ok(Err(err)) => Err(IntentFailure::Failed(err.to_string())),
                Err(_) => Err(IntentFailure::Failed("the webhook's deadline passed".to_string())),
            })
        }
        Need::RemoveIntent { pod, uid } => {
            // With its own deadline: the request's may have passed, and a left intent blocks others until it expires.
            let changes = BTreeMap::from([(keys::EVICTION_INTENT.to_string(), None)]);
            let removal = tokio::time::timeout(
                webhooks.settings.undo_deadline.min(Duration::from_secs(5)),
                api.patch_pod_annotations(&pod, &uid, &changes),
            )
            .await;
            match removal {
                Ok(Ok(_)) | Ok(Err(ApiError::NotFound(_) | ApiError::Conflict(_))) => {}
                Ok(Err(err)) => {
                    tracing::warn!(pod = %pod, error = %err, "could not remove the eviction intent; it expires")
                }
                Err(_) => tracing::warn!(pod = %pod, "removing the eviction intent timed out; it expires"),
            }
            Observed::IntentRemoved
        }
        Need::Remember { uid, until } => {
            zpdb.serialisation.remember(&uid, until);
            Observed::Remembered
        }
        // The driver returns answers itself.
        Need::Answer(_) => Observed::IntentRemoved,
    }
}
