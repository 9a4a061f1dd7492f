//! The admission webhook router: `/admission/no-downscale` and `/admission/prepare-downscale`.
//!
//! Owns the HTTP side of admission (reference 4.1): content type and body checks (HTTP 400 with a reason for
//! anything that is not an AdmissionReview we can answer), the handler deadline (90 % of
//! `-server-tls.request-timeout`, bounding every API and pod call a handler makes), and the I/O the core's steps ask
//! for: live reads through the cluster port, the downscale record's compare-and-swap claim, and the pod calls
//! through the pod HTTP client, undone on failure with their own deadline.
//!
//! Must not decide: every verdict and message comes from `rollout_core::admission`. It never writes to the object
//! under admission, and a dry-run request causes no write and no pod call. Transport (TLS, listener) is
//! `webhook_server`'s business; this router is also what the simulator and the load benchmark drive.

use crate::cluster::{ApiError, ClusterApi};
use crate::downscale_record::{
    ClaimEnd, MarkedClaim, RecordStoreError, claim_downscale_marked, finish_marked_claim, read_markers, read_record,
};
use crate::pod_client::{DEFAULT_CONCURRENCY, PodCallError, PodHttpClient, PodRequest, PodResponse, call_all};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use jiff::Timestamp;
use rollout_core::admission::no_downscale::{self, ParentResource, Step};
use rollout_core::admission::prepare::{self, PlanInput, Precheck, PreparePlan, Target};
use rollout_core::admission::{self, AdmissionRequest, Verdict, check_content_type, parse_review, render_response};
use rollout_core::{GroupSnapshot, MemberSnapshot, PodView, StatefulSetView, keys};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

pub const NO_DOWNSCALE_PATH: &str = "/admission/no-downscale";
pub const PREPARE_DOWNSCALE_PATH: &str = "/admission/prepare-downscale";

/// What the handlers need to know besides the request.
#[derive(Debug, Clone)]
pub struct WebhookSettings {
    pub namespace: String,
    /// `-kubernetes.cluster-domain`, for pod FQDNs.
    pub cluster_domain: String,
    /// `-zone-tracker.config-map-name` with `-use-zone-tracker=true`: the group downscale record. `None` (the
    /// default): no ConfigMap; downscales are recorded in the StatefulSets' `grafana.com/last-downscale`.
    pub record_config_map: Option<String>,
    /// 90 % of `-server-tls.request-timeout`.
    pub handler_deadline: Duration,
    /// Deadline of the undo (DELETE) calls after a failed prepare: their own, not what is left of the request's.
    pub undo_deadline: Duration,
    /// How long after its answer an admitted downscale is taken to have committed: the record dates it that much
    /// after the webhook finished, and the webhook denies (and undoes) a downscale it could not finish that early.
    pub commit_margin: Duration,
}

impl WebhookSettings {
    pub fn new(
        namespace: &str,
        cluster_domain: &str,
        record_config_map: Option<&str>,
        request_timeout: Duration,
    ) -> Self {
        WebhookSettings {
            namespace: namespace.to_string(),
            cluster_domain: cluster_domain.to_string(),
            record_config_map: record_config_map.map(str::to_string),
            handler_deadline: request_timeout.mul_f64(0.9),
            undo_deadline: request_timeout,
            commit_margin: COMMIT_MARGIN,
        }
    }
}

pub use crate::downscale_record::COMMIT_MARGIN;

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

/// The router with every path the reference's webhook configurations call. Unknown paths get 404, other methods
/// 405.
pub fn router<C: ClusterApi, P: PodHttpClient>(webhooks: Webhooks<C, P>) -> Router {
    Router::new()
        .route(NO_DOWNSCALE_PATH, post(no_downscale_handler::<C, P>))
        .route(PREPARE_DOWNSCALE_PATH, post(prepare_downscale_handler::<C, P>))
        .route(POD_EVICTION_PATH, post(not_yet_served_handler))
        .route(ZPDB_VALIDATION_PATH, post(not_yet_served_handler))
        .with_state(Arc::new(webhooks))
}

/// Configured by the reference's Helm chart and jsonnet (`pod-eviction-<ns>`, failurePolicy Fail): served once
/// ZoneAwarePodDisruptionBudgets are implemented.
pub const POD_EVICTION_PATH: &str = "/admission/pod-eviction";
/// Configured by the reference's Helm chart and jsonnet (`zpdb-validation-<ns>`, failurePolicy Fail).
pub const ZPDB_VALIDATION_PATH: &str = "/admission/zpdb-validation";

/// A path the reference's configurations call but this operator does not decide yet (ZoneAwarePodDisruptionBudget).
/// Policy: allow, with a warning and a log line. A 404 would make the API server, under the configurations'
/// `failurePolicy: Fail`, reject every eviction in the namespace and so block node drains; allowing gives the
/// cluster exactly what it has without these webhooks (plain PodDisruptionBudgets still apply). Malformed requests
/// still get 400.
async fn not_yet_served_handler(uri: axum::http::Uri, headers: HeaderMap, body: Bytes) -> Response {
    let path = uri.path().to_string();
    respond(&headers, &body, |request| async move {
        let what = if path == POD_EVICTION_PATH {
            "evictions are not checked against ZoneAwarePodDisruptionBudgets"
        } else {
            "ZoneAwarePodDisruptionBudgets are not validated"
        };
        tracing::warn!(path = %path, kind = %request.kind, namespace = %request.namespace, name = %request.name,
            "{what} by this version of the rollout operator; allowing");
        Verdict::allow_with_warning(format!("rollout-operator: {what} by this version; allowed (path {path})"))
    })
    .await
}

async fn no_downscale_handler<C: ClusterApi, P: PodHttpClient>(
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

async fn prepare_downscale_handler<C: ClusterApi, P: PodHttpClient>(
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
async fn respond<F, Fut>(headers: &HeaderMap, body: &[u8], decide: F) -> Response
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

/// Runs `call` before `deadline`; a call still running then fails as unavailable.
async fn before<T>(
    deadline: Instant,
    what: &str,
    call: impl Future<Output = Result<T, ApiError>>,
) -> Result<T, ApiError> {
    match tokio::time::timeout(remaining(deadline), call).await {
        Ok(result) => result,
        Err(_) => Err(ApiError::Unavailable(format!("{what}: the webhook's deadline passed"))),
    }
}

pub async fn decide_no_downscale<C: ClusterApi, P: PodHttpClient>(
    webhooks: &Webhooks<C, P>,
    request: &AdmissionRequest,
    deadline: Instant,
) -> Verdict {
    if let Some(verdict) = admission::foreign_namespace(request, &webhooks.settings.namespace) {
        return verdict;
    }
    match no_downscale::evaluate(request) {
        Step::Decided(verdict) => verdict,
        Step::LookupParent { resource, name, old, new } => {
            let labels = parent_labels(&webhooks.api, resource, &name, deadline).await;
            no_downscale::decide_with_parent(request, old, new, labels.as_ref().map_err(Clone::clone))
        }
    }
}

async fn parent_labels<C: ClusterApi>(
    api: &C,
    resource: ParentResource,
    name: &str,
    deadline: Instant,
) -> Result<std::collections::BTreeMap<String, String>, String> {
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
    match metadata {
        Ok(Some(meta)) => Ok(meta.labels.unwrap_or_default()),
        Ok(None) => Err(format!("{}.apps \"{name}\" not found", resource.as_str())),
        Err(err) => Err(err.to_string()),
    }
}

pub async fn decide_prepare_downscale<C: ClusterApi, P: PodHttpClient>(
    webhooks: &Webhooks<C, P>,
    request: &AdmissionRequest,
    deadline: Instant,
) -> Verdict {
    let api = &webhooks.api;
    let settings = &webhooks.settings;
    if let Some(verdict) = admission::foreign_namespace(request, &settings.namespace) {
        return verdict;
    }
    // `via_scale`: a `/scale` request; its parent StatefulSet is read live.
    let (sts, old, new, via_scale) = match prepare::evaluate(request) {
        Target::Decided(verdict) => return verdict,
        Target::StatefulSet { sts, old, new } => (*sts, old, new, false),
        Target::LookupStatefulSet { name, old, new } => {
            match before(deadline, "get statefulset", api.get_statefulset(&name)).await {
                Ok(Some(live)) => match StatefulSetView::from_k8s(&live) {
                    Ok(view) => (view, old, new, true),
                    Err(err) => return prepare::lookup_failed(&err.to_string()),
                },
                // Gone: nothing to prepare (fail open, as the reference).
                Ok(None) => return prepare::lookup_failed(&format!("statefulsets.apps \"{name}\" not found")),
                // Unknown (API error or deadline): deny. Allowing would let a `/scale` downscale (HPA, kubectl
                // scale) through with no preparation and no min-time check; the client retries.
                Err(err) => {
                    return prepare::deny(request, old, new, &format!("reading statefulset {name} failed: {err}"));
                }
            }
        }
    };
    let group_name = match prepare::precheck(request, old, new, &sts) {
        Precheck::Decided(verdict) => return verdict,
        Precheck::Continue { group } => group,
    };

    // Live reads: a decision about safety is never taken on a cache.
    let members = match &group_name {
        Some(group) => {
            let selector = format!("{}={group}", keys::ROLLOUT_GROUP);
            match before(deadline, "list statefulsets", api.list_statefulsets(&selector)).await {
                Ok(list) => list.iter().filter_map(|s| StatefulSetView::from_k8s(s).ok()).collect::<Vec<_>>(),
                Err(err) => return prepare::deny_list_statefulsets(request, old, new, &err.to_string()),
            }
        }
        None => Vec::new(),
    };
    let pods = match before(deadline, "list pods", api.list_pods("")).await {
        Ok(list) => list.iter().filter_map(|p| PodView::from_k8s(p).ok()).collect::<Vec<_>>(),
        Err(err) => return prepare::deny_list_pods(request, old, new, &err.to_string()),
    };
    let mut statefulsets = members;
    if !statefulsets.iter().any(|s| s.name == sts.name) {
        statefulsets.push(sts.clone());
    }
    let group = GroupSnapshot::assemble(group_name.clone().unwrap_or_default(), statefulsets, pods.iter());
    let target =
        group.member(&sts.name).cloned().unwrap_or_else(|| MemberSnapshot { sts: sts.clone(), pods: Vec::new() });

    let tracker = settings.record_config_map.as_deref();
    let (record, markers) = if let (Some(_), Some(config_map)) = (&group_name, tracker) {
        match before(deadline, "read record", async {
            read_record(api, config_map).await.map_err(|e| {
                // Policy: deny (the min time cannot be checked), saying which verbs are missing.
                let forbidden =
                    matches!(&e, RecordStoreError::Api { source: ApiError::Rejected { code: 403, .. }, .. });
                let hint = if forbidden {
                    "; grant the operator get, update and create on configmaps, or drop -use-zone-tracker"
                } else {
                    ""
                };
                ApiError::Unavailable(format!("{e}{hint}"))
            })
        })
        .await
        {
            Ok(Some(stored)) => match read_markers(&stored) {
                Ok(markers) => (Some(stored.record), markers),
                Err(err) => return prepare::deny_load_record(request, old, new, &err),
            },
            Ok(None) => (None, Vec::new()),
            Err(err) => return prepare::deny_load_record(request, old, new, &err.to_string()),
        }
    } else {
        (None, Vec::new())
    };
    let now = (webhooks.clock)();
    let input = PlanInput {
        request,
        old,
        new,
        sts: &sts,
        target: &target,
        group: group_name.as_ref().map(|_| &group),
        record: record.as_ref(),
        in_progress: &markers,
        cluster_domain: &settings.cluster_domain,
        now,
    };
    let plan = match prepare::plan(&input) {
        Ok(plan) => plan,
        Err(verdict) => return verdict,
    };
    if request.dry_run {
        return prepare::allowed(request, old, new, &plan);
    }

    // Claim the downscale in the record (serialises zone downscales of the group across actors and replicas).
    let claim = match (&group_name, tracker) {
        (None, _) | (_, None) => None,
        (Some(_), Some(config_map)) => {
            // The marker must outlive everything this request may still do to the pods: the handler's own
            // deadline, then an undo with its own deadline.
            let until = add(now, settings.handler_deadline + settings.undo_deadline);
            let claimed = before(deadline, "claim downscale", async {
                claim_downscale_marked(api, config_map, &group, &sts.name, now, until)
                    .await
                    .map_err(|e| ApiError::Unavailable(e.to_string()))
            })
            .await;
            match claimed {
                Ok(MarkedClaim::Claimed { previous }) => Some((previous, until)),
                Ok(MarkedClaim::Refused(verdict)) => return prepare::deny_min_time(request, old, new, &verdict),
                Ok(MarkedClaim::Busy(holder)) => return prepare::deny_in_progress(request, old, new, &holder),
                Ok(MarkedClaim::Stepping(step)) => return prepare::deny_rollout_step(request, old, new, &step),
                Err(err) => return prepare::deny_claim_failed(request, old, new, &err.to_string()),
            }
        }
    };

    // Read the group again now that the marker is in the record: from here on the controller replaces no pod of
    // the group, so if every other StatefulSet is still updated and available it stays so until the marker goes.
    // (Checking only before the claim would leave a window: a rollout step planned between that read and the
    // marker's write would go ahead together with this downscale.)
    if let (Some(group_name), Some(_)) = (&group_name, &claim) {
        let recheck = async {
            let selector = format!("{}={group_name}", keys::ROLLOUT_GROUP);
            let members = api.list_statefulsets(&selector).await?;
            let pods = api.list_pods("").await?;
            Ok::<_, ApiError>((members, pods))
        };
        let reason = match before(deadline, "re-read the group after the claim", recheck).await {
            Ok((members, pods)) => {
                let members: Vec<StatefulSetView> =
                    members.iter().filter_map(|s| StatefulSetView::from_k8s(s).ok()).collect();
                let pods: Vec<PodView> = pods.iter().filter_map(|p| PodView::from_k8s(p).ok()).collect();
                let group = GroupSnapshot::assemble(group_name.clone(), members, pods.iter());
                group
                    .members
                    .iter()
                    .filter(|m| m.sts.name != sts.name)
                    .find_map(|m| prepare::rollout_in_progress(m, (webhooks.clock)()))
            }
            Err(err) => Some(format!("re-reading the group after claiming the downscale failed: {err}")),
        };
        if let Some(reason) = reason {
            let nothing_prepared = PreparePlan { endpoints: Vec::new(), skipped: Vec::new() };
            undo(webhooks, &sts.name, &nothing_prepared, claim, &[]).await;
            return prepare::deny(request, old, new, &reason);
        }
    }

    let failures = prepare_pods(&webhooks.pods, &plan, deadline).await;
    if !failures.is_empty() {
        undo(webhooks, &sts.name, &plan, claim, &[]).await;
        return prepare::deny_prepare_failed(request, old, new, &failures);
    }
    let (Some((_, until)), Some(config_map)) = (claim, tracker) else {
        if group_name.is_none() {
            return prepare::allowed(request, old, new, &plan);
        }
        return record_in_annotation(webhooks, request, (old, new), &sts, via_scale, &plan, deadline).await;
    };
    // The downscale stays recorded, dated when it will have committed (the API server commits right after our
    // answer; DESIGN.md invariant 3 runs from the commit), and the in-progress marker goes.
    let committed_by = rollout_core::downscale::round_up_to_second(add((webhooks.clock)(), settings.commit_margin));
    let finished = before(deadline, "date the downscale and clear the downscale-in-progress marker", async {
        finish_marked_claim(api, config_map, &sts.name, until, &[until], ClaimEnd::Committed { at: committed_by })
            .await
            .map_err(|e| ApiError::Unavailable(e.to_string()))
    })
    .await;
    // Half the margin must be left for the answer, the admission chain after us and the API server's commit.
    if add((webhooks.clock)(), settings.commit_margin / 2) < committed_by {
        if let Err(err) = finished {
            // The entry keeps the claim's date (`until`, later still) and the marker expires by itself.
            tracing::warn!(statefulset = %sts.name, error = %err, "could not date the downscale or clear its in-progress marker; the marker expires by itself");
        }
        return prepare::allowed(request, old, new, &plan);
    }
    // Too late: the record may now date the downscale before it would commit. Deny it instead.
    undo(webhooks, &sts.name, &plan, claim, &[committed_by]).await;
    prepare::deny(
        request,
        old,
        new,
        &format!(
            "recording the downscale in the zone ConfigMap took longer than {}s; retry",
            settings.commit_margin.as_secs()
        ),
    )
}

/// How far ahead a `/scale` downscale that carries a resourceVersion (an HPA's) is dated when recorded in its
/// StatefulSet's annotation: writing the annotation moves the StatefulSet's resourceVersion, so that request fails
/// with a conflict and its client retries (an HPA, on its next sync, 15 s later by default); the retry finds the
/// date still ahead, writes nothing and goes through. The date stays later than the commit.
pub const SCALE_RETRY_WINDOW: Duration = Duration::from_secs(60);

/// Without the zone tracker: records an admitted downscale of `sts` in its `grafana.com/last-downscale`
/// annotation, dated when it will have committed. A StatefulSet UPDATE gets the annotation through this mutating
/// webhook's JSONPatch (no write of ours: nothing for the request to conflict with). A `/scale` request cannot carry
/// it, so the parent is patched, conditional on the resourceVersion read; a date already ahead of now (a retry of
/// a downscale recorded moments ago) is left as is. If that write fails, the downscale is denied and the pods told
/// to cancel: a downscale the other zones cannot see must not happen.
async fn record_in_annotation<C: ClusterApi, P: PodHttpClient>(
    webhooks: &Webhooks<C, P>,
    request: &AdmissionRequest,
    (old, new): (i32, i32),
    sts: &StatefulSetView,
    via_scale: bool,
    plan: &PreparePlan,
    deadline: Instant,
) -> Verdict {
    let now = (webhooks.clock)();
    let margin = webhooks.settings.commit_margin;
    if !via_scale {
        let at = rollout_core::downscale::round_up_to_second(add(now, margin));
        let patch = prepare::last_downscale_patch(&request.object, at);
        return prepare::allowed(request, old, new, plan).with_json_patch(patch);
    }
    // Dated far enough ahead by an earlier attempt of this downscale (see below): its commit falls before that date.
    if let Some(Ok(at)) = &sts.downscale.last_downscale
        && *at > add(now, margin)
    {
        return prepare::allowed(request, old, new, plan);
    }
    let carries_version = request.object.pointer("/metadata/resourceVersion").is_some_and(|v| v.as_str() != Some(""));
    let ahead = if carries_version { SCALE_RETRY_WINDOW } else { margin };
    let at = rollout_core::downscale::round_up_to_second(add(now, ahead));
    let annotations = std::collections::BTreeMap::from([(
        keys::LAST_DOWNSCALE.to_string(),
        rollout_core::downscale::format_timestamp(at),
    )]);
    let written = before(
        deadline,
        "record the downscale",
        webhooks.api.patch_statefulset_annotations(&sts.name, &sts.resource_version, &annotations),
    )
    .await;
    match written {
        // The write moved the parent's resourceVersion, so this request would fail with a conflict anyway: deny it
        // now and tell the pods to cancel, rather than leave them prepared for a retry that may never come. The
        // retry finds the date ahead and goes through.
        Ok(_) if carries_version => {
            undo(webhooks, &sts.name, plan, None, &[]).await;
            prepare::deny(
                request,
                old,
                new,
                &format!(
                    "the downscale is recorded in statefulset {}'s {} annotation, which changed its resourceVersion; \
                     retry",
                    sts.name,
                    keys::LAST_DOWNSCALE
                ),
            )
        }
        Ok(_) => prepare::allowed(request, old, new, plan),
        Err(err) => {
            undo(webhooks, &sts.name, plan, None, &[]).await;
            let hint = if matches!(err, ApiError::Rejected { code: 403, .. }) {
                " (grant the operator `patch` on apps statefulsets)"
            } else {
                ""
            };
            prepare::deny(
                request,
                old,
                new,
                &format!(
                    "recording the downscale in statefulset {}'s {} annotation failed{hint}: {err}; retry",
                    sts.name,
                    keys::LAST_DOWNSCALE
                ),
            )
        }
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
async fn undo<C: ClusterApi, P: PodHttpClient>(
    webhooks: &Webhooks<C, P>,
    statefulset: &str,
    plan: &PreparePlan,
    claim: Option<(Option<Timestamp>, Timestamp)>,
    dated_since: &[Timestamp],
) {
    let pods = webhooks.pods.clone();
    let api = webhooks.api.clone();
    let config_map = webhooks.settings.record_config_map.clone().unwrap_or_default();
    let statefulset = statefulset.to_string();
    let deadline = webhooks.settings.undo_deadline;
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
                && let Err(err) =
                    finish_marked_claim(&api, &config_map, &statefulset, until, &ours, ClaimEnd::Undone { previous })
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

/// `t + d`, saturating: an overflowing deadline must mean "far away", never "already passed".
fn add(t: Timestamp, d: Duration) -> Timestamp {
    jiff::SignedDuration::try_from(d).ok().and_then(|d| t.checked_add(d).ok()).unwrap_or(Timestamp::MAX)
}
