//! The admission webhook router: `/admission/no-downscale` and `/admission/prepare-downscale` here,
//! `/admission/pod-eviction` and `/admission/zpdb-validation` in `admission::evictions`.
//!
//! Owns the HTTP side of admission (reference 4.1): content type and body checks (HTTP 400 with a reason for
//! anything that is not an AdmissionReview we can answer), the handler deadline (90 % of
//! `-server-tls.request-timeout`, bounding every API and pod call a handler makes), and the I/O the core's steps ask
//! for: live reads through the cluster port, the downscale record's compare-and-swap claim, and the pod calls
//! through the pod HTTP client, undone on failure with their own deadline.
//!
//! Must not decide: every verdict and message comes from `rollout_core::admission`. It never writes to the object
//! under admission, and a dry-run request causes no write and no pod call. Transport (TLS, listener) is
//! `admission::server`'s business; this router is also what the simulator and the load benchmark drive.

use crate::cluster::zone_tracker::{claim_downscale_marked, finish_marked_claim, read_markers, read_record};
use crate::cluster::{ApiError, LiveReads, PodAnnotations, ZoneTrackerStore, StatefulSetAnnotations};
use crate::ops::events::{EventRecord, EventRecorder, EventType, ObjectRef};
use crate::ops::feature_gate::{FeatureGates, Gate};
use crate::ops::metrics::Metrics;
use crate::pods::client::{DEFAULT_CONCURRENCY, PodCallError, PodHttpClient, PodRequest, PodResponse, call_all};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use jiff::Timestamp;
use rollout_core::admission::no_downscale::{self, ParentResource, Step};
use rollout_core::admission::prepare::PreparePlan;
use rollout_core::admission::prepare_flow::{FlowSettings, Need, Observed, PrepareDownscale, StatefulSetLookup};
use rollout_core::admission::{self, AdmissionRequest, Verdict, check_content_type, parse_review, render_response};
use rollout_core::downscale::Claimant;
use rollout_core::downscale::{COMMIT_MARGIN, ClaimEnd};
use rollout_core::{Defences, Failure, PodView, StatefulSetView, keys};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// The roles of the cluster port the webhooks use: live reads (a decision about safety is never taken on a cache),
/// the zone tracker (claims in its ConfigMap, or without it the `last-downscale` annotation) and pod
/// annotations (eviction intents).
pub trait AdmissionApi: LiveReads + ZoneTrackerStore + PodAnnotations + StatefulSetAnnotations {}

impl<T: LiveReads + ZoneTrackerStore + PodAnnotations + StatefulSetAnnotations> AdmissionApi for T {}

pub const NO_DOWNSCALE_PATH: &str = "/admission/no-downscale";
pub const PREPARE_DOWNSCALE_PATH: &str = "/admission/prepare-downscale";

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

/// The parent kinds of `/scale` requests this process was refused (403) on its last read of them, kept in their
/// feature gates. None of the reference's deployments grants `get` on Deployments or ReplicaSets, though they send
/// those kinds' `/scale` requests to the no-downscale webhook, so each such request is refused and let through with
/// the reference's warning. Every request still reads its parent (a grant, or a Role restricted by name, takes
/// effect at once, and a refused kind is never taken for one that can be read); only the saying is once, by the
/// kind's gate ([`Gate::DeploymentLookups`], [`Gate::ReplicaSetLookups`]): an error naming the grant and
/// `rollout_operator_feature_disabled` until a read succeeds.
#[derive(Clone, Debug, Default)]
pub struct ParentLookups {
    gates: FeatureGates,
}

impl ParentLookups {
    /// Lookups reporting through the process's feature gates (in `metrics`).
    pub fn reporting_to(metrics: Arc<Metrics>) -> Self {
        ParentLookups { gates: metrics.gates().clone() }
    }

    /// The optional lookups' gates; StatefulSets are read under a required permission.
    fn gate(resource: ParentResource) -> Option<Gate> {
        match resource {
            ParentResource::Deployments => Some(Gate::DeploymentLookups),
            ParentResource::ReplicaSets => Some(Gate::ReplicaSetLookups),
            ParentResource::StatefulSets => None,
        }
    }

    fn refused(&self, resource: ParentResource, message: &str) {
        match Self::gate(resource) {
            Some(gate) => {
                self.gates.refused(gate, &message);
            }
            None => tracing::error!(%message, "the no-downscale webhook may not read apps statefulsets: /scale \
                downscales of StatefulSets are allowed with a warning; grant get on statefulsets (a required permission)"),
        }
    }

    fn answered(&self, resource: ParentResource) {
        if let Some(gate) = Self::gate(resource) {
            self.gates.granted(gate);
        }
    }
}

/// Tells a denied downscale (either webhook) or one admitted after preparing `prepared` pods as an Event on the
/// object under admission; a dry run tells nothing.
fn tell_verdict(events: &EventRecorder, request: &AdmissionRequest, verdict: &Verdict, prepared: &[String]) {
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

pub use rollout_core::admission::prepare_flow::SCALE_RETRY_WINDOW;

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
        .route(HEALTH_CHECK_VALIDATION_PATH, post(super::health_checks::validation_handler))
        .with_state(Arc::new(evictions::EvictionState { webhooks: webhooks.clone(), zpdb }));
    Router::new()
        .route(NO_DOWNSCALE_PATH, post(no_downscale_handler::<C, P>))
        .route(PREPARE_DOWNSCALE_PATH, post(prepare_downscale_handler::<C, P>))
        .with_state(Arc::new(webhooks))
        .merge(evictions)
}

use super::evictions;
pub use super::evictions::{POD_EVICTION_PATH, ZPDB_VALIDATION_PATH};
pub use super::health_checks::HEALTH_CHECK_VALIDATION_PATH;

async fn no_downscale_handler<C: AdmissionApi, P: PodHttpClient>(
    State(webhooks): State<Arc<Webhooks<C, P>>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    respond(&headers, &body, |request| async move {
        let deadline = Instant::now() + webhooks.settings.handler_deadline;
        decide_no_downscale(&webhooks, &request, deadline).await
    })
    .await
}

async fn prepare_downscale_handler<C: AdmissionApi, P: PodHttpClient>(
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

/// A call of a handler that failed: by its own error, or by running into the handler's deadline.
#[derive(Debug, thiserror::Error)]
enum Late<E> {
    #[error("API unavailable: {0}: the webhook's deadline passed")]
    Deadline(String),
    #[error(transparent)]
    Failed(E),
}

/// Runs `call` before `deadline`; a call still running then fails with [`Late::Deadline`].
impl<E: std::fmt::Display> Late<E> {
    /// The core's classification of the late or failed call, with its whole text.
    fn failure(&self) -> Failure
    where
        for<'a> Failure: From<&'a E>,
    {
        match self {
            Late::Deadline(_) => Failure::Deadline(self.to_string()),
            Late::Failed(err) => Failure::from(err),
        }
    }
}

async fn before<T, E>(deadline: Instant, what: &str, call: impl Future<Output = Result<T, E>>) -> Result<T, Late<E>> {
    match tokio::time::timeout(remaining(deadline), call).await {
        Ok(result) => result.map_err(Late::Failed),
        Err(_) => Err(Late::Deadline(what.to_string())),
    }
}

pub async fn decide_no_downscale<C: AdmissionApi, P: PodHttpClient>(
    webhooks: &Webhooks<C, P>,
    request: &AdmissionRequest,
    deadline: Instant,
) -> Verdict {
    if let Some(verdict) = admission::foreign_namespace(request, &webhooks.settings.namespace) {
        return verdict;
    }
    let verdict = match no_downscale::evaluate(request) {
        Step::Decided(verdict) => verdict,
        Step::LookupParent { resource, name, old, new } => {
            let labels =
                parent_labels(&webhooks.api, &webhooks.settings.parent_lookups, resource, &name, deadline).await;
            no_downscale::decide_with_parent(request, old, new, labels.as_ref())
        }
    };
    tell_verdict(&webhooks.settings.events, request, &verdict, &[]);
    verdict
}

/// The labels of the parent `resource`/`name`, or why they could not be read; a refusal (403) or a read answered
/// goes to `lookups`.
async fn parent_labels<C: LiveReads>(
    api: &C,
    lookups: &ParentLookups,
    resource: ParentResource,
    name: &str,
    deadline: Instant,
) -> Result<std::collections::BTreeMap<String, String>, Failure> {
    let what = format!("get {}/{name}", resource.as_str());
    let metadata = match resource {
        ParentResource::StatefulSets => {
            before(deadline, &what, api.get_statefulset(name)).await.map(|o| o.map(|o| o.metadata))
        }
        ParentResource::Deployments => {
            before(deadline, &what, api.get_deployment(name)).await.map(|o| o.map(|o| o.metadata))
        }
        ParentResource::ReplicaSets => {
            before(deadline, &what, api.get_replicaset(name)).await.map(|o| o.map(|o| o.metadata))
        }
    };
    if let Err(Late::Failed(ApiError::Forbidden(message))) = &metadata {
        lookups.refused(resource, message);
    } else if metadata.is_ok() {
        lookups.answered(resource);
    }
    match metadata {
        Ok(Some(meta)) => Ok(meta.labels.unwrap_or_default()),
        Ok(None) => Err(Failure::NotFound(format!("{}.apps \"{name}\" not found", resource.as_str()))),
        Err(err) => Err(err.failure()),
    }
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
                observed = carry_out(webhooks, need, deadline).await
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

/// Time left until `deadline` (madsim's time module has no `timeout_at`).
fn remaining(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}
