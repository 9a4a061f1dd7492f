//! `/admission/pod-eviction` and `/admission/zpdb-validation` (reference 4.6, 5.2, 5.4).
//!
//! Owns the handlers: the eviction decision is the core's step machine ([`rollout_core::zpdb::EvictPod`]) driven
//! within the handler's deadline by [`crate::zpdb::decide`] (shared with the rollout controller's deletions), then
//! logged and, when denied, told as an Event. The validating webhook is one call into the core.
//!
//! Must not decide: every verdict, message and status code is the core's. A dry run writes nothing (the machine
//! asks for no write).

use super::router::{AdmissionApi, Webhooks, respond};
use crate::ops::events::{EventRecord, EventRecorder, EventType, ObjectRef};
use crate::pods::client::PodHttpClient;
use crate::zpdb::Zpdb;
use crate::zpdb::decide::decide;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use rollout_core::admission::{AdmissionRequest, Verdict};
use rollout_core::zpdb::{EvictPod, EvictionSettings, validation};
use std::sync::Arc;
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

/// The pod-eviction webhook: drives the core's step machine to its answer before `deadline`.
pub async fn decide_pod_eviction<C: AdmissionApi, P>(
    webhooks: &Webhooks<C, P>,
    zpdb: &Zpdb,
    request: &AdmissionRequest,
    deadline: Instant,
) -> Verdict {
    let settings = &webhooks.settings;
    let flow = EvictPod::from_admission(
        request,
        EvictionSettings {
            namespace: settings.namespace.clone(),
            serialisation: zpdb.serialisation_mode(),
            // The rest of this request, then the API server's commit of the eviction after our answer.
            intent_lifetime: settings.handler_deadline + settings.commit_margin,
        },
    );
    let answer = decide(&webhooks.api, zpdb, flow, &*webhooks.clock, deadline, settings.undo_deadline).await;
    tracing::info!(pod = %request.name, uid = %request.uid, user = %request.username,
        allowed = answer.allowed(), reason = answer.outcome.reason, status = answer.outcome.status,
        message = answer.message(), "eviction decided");
    tell_denial(&settings.events, request, &answer.verdict);
    answer.verdict
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
