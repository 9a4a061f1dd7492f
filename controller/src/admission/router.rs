//! The admission webhooks' router and what their handlers share: every path the reference's webhook
//! configurations call, each served by its webhook's module (`no_downscale`, `prepare_downscale`, `evictions`,
//! `health_checks`), the settings and clock the handlers read, the common HTTP handling (content type and body
//! checks: HTTP 400 with a reason for anything that is not an AdmissionReview we can answer), and the handler
//! deadline (90 % of `-server-tls.request-timeout`, bounding every API and pod call a handler makes).
//!
//! Must not decide: every verdict and message comes from `rollout_core::admission`. Transport (TLS, listener) is
//! `admission::server`'s business; this router is also what the simulator and the load benchmark drive.

use super::evictions::{self, POD_EVICTION_PATH, ZPDB_VALIDATION_PATH};
use super::health_checks::{self, HEALTH_CHECK_VALIDATION_PATH};
use super::no_downscale::{self, NO_DOWNSCALE_PATH, ParentLookups};
use super::prepare_downscale::{self, PREPARE_DOWNSCALE_PATH};
use crate::cluster::{LiveReads, PodAnnotations, StatefulSetAnnotations, ZoneTrackerStore};
use crate::ops::events::{EventRecord, EventRecorder, EventType, ObjectRef};
use crate::pods::client::PodHttpClient;
use axum::Router;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use jiff::Timestamp;
use rollout_core::admission::{AdmissionRequest, Verdict, check_content_type, parse_review, render_response};
use rollout_core::downscale::COMMIT_MARGIN;
use rollout_core::{Defences, Failure};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// The roles of the cluster port the webhooks use: live reads (a decision about safety is never taken on a cache),
/// the zone tracker (claims in its ConfigMap, or without it the `last-downscale` annotation) and pod
/// annotations (eviction intents).
pub trait AdmissionApi: LiveReads + ZoneTrackerStore + PodAnnotations + StatefulSetAnnotations {}

impl<T: LiveReads + ZoneTrackerStore + PodAnnotations + StatefulSetAnnotations> AdmissionApi for T {}

/// What the handlers need to know besides the request.
#[derive(Debug, Clone)]
pub struct WebhookSettings {
    pub namespace: String,
    /// `-kubernetes.cluster-domain`, for pod FQDNs.
    pub cluster_domain: String,
    /// `-zone-tracker.config-map-name` with `-use-zone-tracker=true`: the zone tracker's ConfigMap. `None` (the
    /// default): no ConfigMap; downscales are recorded in the StatefulSets' `grafana.com/last-downscale`.
    pub zone_tracker_config_map: Option<String>,
    /// 90 % of `-server-tls.request-timeout`.
    pub handler_deadline: Duration,
    /// Deadline of the undo (DELETE) calls after a failed prepare: their own, not what is left of the request's.
    pub undo_deadline: Duration,
    /// How long after its answer an admitted downscale is taken to have committed: the record dates it that much
    /// after the webhook finished, and the webhook denies (and undoes) a downscale it could not finish that early.
    pub commit_margin: Duration,
    /// Where denied and prepared downscales are told as Events (`-events.enabled`; disabled by default). Never for
    /// a dry run.
    pub events: EventRecorder,
    /// The defences in depth in force: all of them, but in the harness's tests of each layer alone.
    pub defences: Defences,
    /// The parent kinds this process was refused (shared by its requests), for the no-downscale webhook.
    pub parent_lookups: ParentLookups,
}

impl WebhookSettings {
    pub fn new(
        namespace: &str,
        cluster_domain: &str,
        zone_tracker_config_map: Option<&str>,
        request_timeout: Duration,
    ) -> Self {
        WebhookSettings {
            namespace: namespace.to_string(),
            cluster_domain: cluster_domain.to_string(),
            zone_tracker_config_map: zone_tracker_config_map.map(str::to_string),
            handler_deadline: request_timeout.mul_f64(0.9),
            undo_deadline: request_timeout,
            commit_margin: COMMIT_MARGIN,
            events: EventRecorder::disabled(),
            defences: Defences::ALL,
            parent_lookups: ParentLookups::default(),
        }
    }

    /// The same settings telling denied and prepared downscales to `events`.
    pub fn with_events(self, events: EventRecorder) -> Self {
        WebhookSettings { events, ..self }
    }

    /// The same settings keeping the refused parent kinds in `parent_lookups` (one per process, so a refusal is
    /// said once, not at every request).
    pub fn with_parent_lookups(self, parent_lookups: ParentLookups) -> Self {
        WebhookSettings { parent_lookups, ..self }
    }
}

/// Where the handlers read the time (the real clock in production; tests and the `review` command set it).
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

pub fn system_clock() -> Clock {
    Arc::new(Timestamp::now)
}

pub struct Webhooks<C, P> {
    pub api: C,
    pub pods: P,
    pub settings: WebhookSettings,
    pub clock: Clock,
}

impl<C: Clone, P: Clone> Clone for Webhooks<C, P> {
    fn clone(&self) -> Self {
        Webhooks {
            api: self.api.clone(),
            pods: self.pods.clone(),
            settings: self.settings.clone(),
            clock: self.clock.clone(),
        }
    }
}

/// The router with every path the reference's webhook configurations call, with no ZoneAwarePodDisruptionBudget
/// known (every eviction is out of scope); [`router_with_zpdb`] gives it the operator's budgets. Unknown paths get
/// 404, other methods 405.
pub fn router<C: AdmissionApi, P: PodHttpClient>(webhooks: Webhooks<C, P>) -> Router {
    router_with_zpdb(webhooks, crate::zpdb::Zpdb::default())
}

/// [`router`], deciding evictions against `zpdb`'s budgets.
pub fn router_with_zpdb<C: AdmissionApi, P: PodHttpClient>(
    webhooks: Webhooks<C, P>,
    zpdb: crate::zpdb::Zpdb,
) -> Router {
    let evictions = Router::new()
        .route(POD_EVICTION_PATH, post(evictions::pod_eviction_handler::<C, P>))
        .route(ZPDB_VALIDATION_PATH, post(evictions::zpdb_validation_handler))
        .route(HEALTH_CHECK_VALIDATION_PATH, post(health_checks::validation_handler))
        .with_state(Arc::new(evictions::EvictionState { webhooks: webhooks.clone(), zpdb }));
    Router::new()
        .route(NO_DOWNSCALE_PATH, post(no_downscale::handler::<C, P>))
        .route(PREPARE_DOWNSCALE_PATH, post(prepare_downscale::handler::<C, P>))
        .with_state(Arc::new(webhooks))
        .merge(evictions)
}

/// Common HTTP handling: 400 with a reason for anything malformed, else 200 with the response review.
pub(super) async fn respond<F, Fut>(headers: &HeaderMap, body: &[u8], decide: F) -> Response
where
    F: FnOnce(Arc<AdmissionRequest>) -> Fut,
    Fut: Future<Output = Verdict>,
{
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
    let request = match check_content_type(content_type).and_then(|()| parse_review(body)) {
        Ok(request) => request,
        Err(err) => return (StatusCode::BAD_REQUEST, err.to_string()).into_response(),
    };
    tracing::debug!(
        uid = %request.uid, kind = %request.kind, namespace = %request.namespace, name = %request.name,
        username = %request.username, dry_run = request.dry_run, "admission request"
    );
    let request = Arc::new(request);
    let verdict = decide(request.clone()).await;
    tracing::debug!(uid = %request.uid, allowed = verdict.allowed, message = ?verdict.message, warnings = ?verdict.warnings, "admission response");
    let body = serde_json::to_vec(&render_response(&request, &verdict)).unwrap_or_default();
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// Tells a denied downscale (either webhook) or one admitted after preparing `prepared` pods as an Event on the
/// object under admission; a dry run tells nothing.
pub(super) fn tell_verdict(events: &EventRecorder, request: &AdmissionRequest, verdict: &Verdict, prepared: &[String]) {
    if request.dry_run || !events.is_enabled() {
        return;
    }
    let kind = match request.resource.as_str() {
        "statefulsets" => "StatefulSet",
        "deployments" => "Deployment",
        "replicasets" => "ReplicaSet",
        _ => return,
    };
    let regarding = ObjectRef { api_version: "apps/v1", kind, name: request.name.clone(), uid: None };
    let via = if request.sub_resource.is_empty() { String::new() } else { format!(" (/{})", request.sub_resource) };
    let (type_, reason, note) = if !verdict.allowed {
        let why = verdict.message.as_deref().unwrap_or("no reason given");
        (EventType::Warning, "DownscaleDenied", format!("downscale{via} by {} denied: {why}", request.username))
    } else if !prepared.is_empty() {
        let pods = prepared.join(", ");
        (
            EventType::Normal,
            "DownscalePrepared",
            format!("downscale{via} by {} admitted after preparing {pods}", request.username),
        )
    } else {
        return;
    };
    events.record(EventRecord { regarding, related: None, type_, reason, action: "Admit", note });
}

/// A call of a handler that failed: by its own error, or by running into the handler's deadline.
#[derive(Debug, thiserror::Error)]
pub(super) enum Late<E> {
    #[error("API unavailable: {0}: the webhook's deadline passed")]
    Deadline(String),
    #[error(transparent)]
    Failed(E),
}

/// Runs `call` before `deadline`; a call still running then fails with [`Late::Deadline`].
impl<E: std::fmt::Display> Late<E> {
    /// The core's classification of the late or failed call, with its whole text.
    pub(super) fn failure(&self) -> Failure
    where
        for<'a> Failure: From<&'a E>,
    {
        match self {
            Late::Deadline(_) => Failure::Deadline(self.to_string()),
            Late::Failed(err) => Failure::from(err),
        }
    }
}

pub(super) async fn before<T, E>(
    deadline: Instant,
    what: &str,
    call: impl Future<Output = Result<T, E>>,
) -> Result<T, Late<E>> {
    match tokio::time::timeout(remaining(deadline), call).await {
        Ok(result) => result.map_err(Late::Failed),
        Err(_) => Err(Late::Deadline(what.to_string())),
    }
}

/// Time left until `deadline` (madsim's time module has no `timeout_at`).
pub(super) fn remaining(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}
