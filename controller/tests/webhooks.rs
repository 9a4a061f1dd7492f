//! The admission webhook router over the fake API server and a fake pod client: HTTP handling, both endpoints,
//! the record claim, pod calls and their undo, dry runs, concurrent admissions, and arbitrary input.

mod support;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::StatefulSet;
use proptest::prelude::*;
use rollout_core::downscale::DownscaleRecord;
use rollout_core::keys;
use rollout_operator::admission::webhooks::{COMMIT_MARGIN, ParentLookups, WebhookSettings, Webhooks, router};
use rollout_operator::cluster::ApiError;
use rollout_operator::pods::client::{PodCallError, PodHttpClient, PodMethod, PodRequest, PodResponse};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{Call, FakeCluster, pod, sts};
use tower::ServiceExt;

const CM: &str = "rollout-operator-zone-tracker";
const NOW: &str = "2026-01-01T12:00:00Z";

/// Pods that answer 200, except the URLs told to fail; records every call.
#[derive(Clone, Default)]
struct FakePods {
    calls: Arc<Mutex<Vec<PodRequest>>>,
    failing: Arc<Mutex<BTreeSet<String>>>,
    /// POSTs to these never answer.
    hanging: Arc<Mutex<BTreeSet<String>>>,
}

impl FakePods {
    fn calls(&self) -> Vec<(PodMethod, String)> {
        self.calls.lock().unwrap().iter().map(|r| (r.method, r.url.clone())).collect()
    }
}

impl PodHttpClient for FakePods {
    async fn call(&self, request: PodRequest) -> Result<PodResponse, PodCallError> {
        tokio::task::yield_now().await;
        self.calls.lock().unwrap().push(request.clone());
        let hangs = self.hanging.lock().unwrap().iter().any(|f| request.url.contains(f.as_str()));
        if hangs && request.method == PodMethod::Post {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        if self.failing.lock().unwrap().iter().any(|f| request.url.contains(f.as_str())) {
            return Err(PodCallError::Connect {
                method: request.method.as_str(),
                url: request.url,
                message: "connection refused".into(),
            });
        }
        Ok(PodResponse { status: 200, body: Vec::new() })
    }
}

fn app(cluster: &FakeCluster, pods: &FakePods) -> axum::Router {
    app_at(cluster, pods, NOW)
}

fn app_at(cluster: &FakeCluster, pods: &FakePods, now: &str) -> axum::Router {
    let now: Timestamp = now.parse().unwrap();
    router(Webhooks {
        api: cluster.clone(),
        pods: pods.clone(),
        settings: WebhookSettings::new("ns", "cluster.local.", Some(CM), Duration::from_secs(10)),
        clock: Arc::new(move || now),
    })
}

async fn post(app: &axum::Router, path: &str, content_type: Option<&str>, body: Vec<u8>) -> (StatusCode, Vec<u8>) {
    let mut request = Request::post(path);
    if let Some(ct) = content_type {
        request = request.header("content-type", ct);
    }
    let response = app.clone().oneshot(request.body(Body::from(body)).unwrap()).await.expect("infallible");
    let status = response.status();
    (status, response.into_body().collect().await.unwrap().to_bytes().to_vec())
}

async fn admit(app: &axum::Router, path: &str, review: &Value) -> Value {
    let (status, body) = post(app, path, Some("application/json"), serde_json::to_vec(review).unwrap()).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    let out: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(out["response"]["uid"], review["request"]["uid"]);
    out["response"].clone()
}

fn review(resource: &str, name: &str, old: Value, new: Value, dry_run: bool) -> Value {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": format!("uid-{name}"), "kind": {"group": "apps", "version": "v1", "kind": "StatefulSet"},
        "resource": {"group": "apps", "version": "v1", "resource": resource},
        "name": name, "namespace": "ns", "operation": "UPDATE", "userInfo": {"username": "hpa"},
        "object": new, "oldObject": old, "dryRun": dry_run,
    }})
}

/// A zone of group `ingester` with prepare-downscale settings and a 12 h min time between zone downscales.
fn zone(name: &str, replicas: i32) -> StatefulSet {
    let mut s = sts("ingester", name, replicas, "r1", "r1");
    let meta = &mut s.metadata;
    meta.labels.get_or_insert_default().insert(keys::PREPARE_DOWNSCALE.into(), "true".into());
    let annotations = meta.annotations.get_or_insert_default();
    annotations.insert(keys::PREPARE_DOWNSCALE_HTTP_PORT.into(), "8080".into());
    annotations.insert(keys::PREPARE_DOWNSCALE_HTTP_PATH.into(), "ingester/prepare-shutdown".into());
    annotations.insert(keys::MIN_TIME_BETWEEN_ZONES_DOWNSCALE.into(), "12h".into());
    s
}

fn with_replicas(mut s: StatefulSet, replicas: i32) -> Value {
    s.spec.as_mut().unwrap().replicas = Some(replicas);
    let mut v = serde_json::to_value(s).unwrap();
    v["apiVersion"] = json!("apps/v1");
    v["kind"] = json!("StatefulSet");
    v
}

fn cluster_with_zones() -> FakeCluster {
    let zones = ["ingester-zone-a", "ingester-zone-b", "ingester-zone-c"];
    let statefulsets = zones.iter().map(|z| zone(z, 3)).collect();
    let pods = zones.iter().flat_map(|z| (0..3).map(move |i| pod(z, i, "r1", true, 1))).collect();
    FakeCluster::new(statefulsets, pods)
}

fn downscale_review(name: &str, dry_run: bool) -> Value {
    review("statefulsets", name, with_replicas(zone(name, 3), 3), with_replicas(zone(name, 1), 1), dry_run)
}

fn record(cluster: &FakeCluster) -> Option<DownscaleRecord> {
    cluster.config_map(CM).map(|cm| DownscaleRecord::from_config_map_data(&cm.data.unwrap_or_default()).unwrap())
}

// ---- HTTP handling ----------------------------------------------------------------------------------------------

#[tokio::test]
async fn malformed_requests_get_400_with_a_reason() {
    let app = app(&FakeCluster::default(), &FakePods::default());
    for path in ["/admission/no-downscale", "/admission/prepare-downscale"] {
        let (status, body) = post(&app, path, Some("text/plain"), b"{}".to_vec()).await;
        assert_eq!((status, body.as_slice()), (StatusCode::BAD_REQUEST, b"wrong content type".as_slice()));
        let (status, body) = post(&app, path, None, b"{}".to_vec()).await;
        assert_eq!((status, body.as_slice()), (StatusCode::BAD_REQUEST, b"wrong content type".as_slice()));
        let (status, body) = post(&app, path, Some("application/json"), b"{".to_vec()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(String::from_utf8_lossy(&body).starts_with("Request could not be decoded: "));
        let no_request = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#.to_vec();
        let (status, body) = post(&app, path, Some("application/json"), no_request).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(String::from_utf8_lossy(&body), "Request could not be decoded: the AdmissionReview has no request");
    }
    let (status, _) = post(&app, "/admission/other", Some("application/json"), b"{}".to_vec()).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn v1beta1_reviews_are_answered_in_v1beta1() {
    let app = app(&FakeCluster::default(), &FakePods::default());
    let mut r = review("statefulsets", "a", Value::Null, Value::Null, false);
    r["apiVersion"] = json!("admission.k8s.io/v1beta1");
    let (status, body) =
        post(&app, "/admission/no-downscale", Some("application/json"), serde_json::to_vec(&r).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    let out: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(out["apiVersion"], "admission.k8s.io/v1beta1");
    assert_eq!(out["kind"], "AdmissionReview");
    assert_eq!(out["response"]["uid"], "uid-a");
    assert_eq!(out["response"]["allowed"], true);
}

// ---- no-downscale -----------------------------------------------------------------------------------------------

fn no_downscale_sts(replicas: i32) -> StatefulSet {
    let mut s = sts("ingester", "ingester-zone-a", replicas, "r1", "r1");
    s.metadata.labels.get_or_insert_default().insert(keys::NO_DOWNSCALE.into(), "true".into());
    s
}

fn scale(replicas: i32) -> Value {
    json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "ingester-zone-a"}, "spec": {"replicas": replicas}})
}

#[tokio::test]
async fn no_downscale_denies_a_labelled_statefulset_and_its_scale_subresource() {
    let cluster = FakeCluster::new(vec![no_downscale_sts(3)], vec![]);
    let app = app(&cluster, &FakePods::default());
    let message = "downscale of statefulsets/ingester-zone-a in ns from 3 to 2 replicas is not allowed because it has \
                   the label 'grafana.com/no-downscale=true'";
    let r = review(
        "statefulsets",
        "ingester-zone-a",
        with_replicas(no_downscale_sts(3), 3),
        with_replicas(no_downscale_sts(2), 2),
        false,
    );
    let response = admit(&app, "/admission/no-downscale", &r).await;
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["message"], message);
    // The /scale subresource: labels come from the live parent.
    let r = review("statefulsets", "ingester-zone-a", scale(3), scale(2), false);
    let response = admit(&app, "/admission/no-downscale", &r).await;
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["message"], message);
    // Upscale through /scale: allowed without a lookup.
    let response =
        admit(&app, "/admission/no-downscale", &review("statefulsets", "ingester-zone-a", scale(2), scale(3), false))
            .await;
    assert_eq!(response["allowed"], true);
}

#[tokio::test]
async fn no_downscale_fails_open_when_the_parent_cannot_be_read() {
    let cluster = FakeCluster::default();
    let app = app(&cluster, &FakePods::default());
    let r = review("statefulsets", "ingester-zone-a", scale(3), scale(2), false);
    let response = admit(&app, "/admission/no-downscale", &r).await;
    assert_eq!(response["allowed"], true);
    assert_eq!(
        response["warnings"][0],
        "can't get statefulsets/ingester-zone-a in namespace ns, allowing the change: statefulsets.apps \"ingester-zone-a\" not found"
    );
    cluster.fail_reads(Some(ApiError::Unavailable("connection refused".into())));
    let response = admit(&app, "/admission/no-downscale", &r).await;
    assert_eq!(response["allowed"], true);
    assert!(
        response["warnings"][0].as_str().unwrap().ends_with("allowing the change: API unavailable: connection refused")
    );
}

/// The log lines written while the guard lives, for tests of what is said (on this thread).
#[derive(Clone, Default)]
struct CapturedLog(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for CapturedLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl CapturedLog {
    fn count(&self, needle: &str) -> usize {
        String::from_utf8_lossy(&self.0.lock().unwrap()).lines().filter(|l| l.contains(needle)).count()
    }
}

/// None of the reference's deployments grants `get` on Deployments: every `/scale` of one reads its parent, is
/// refused and let through with the reference's warning, but the refusal is said once (one error, the metric) and
/// not at every request; a read answered after a grant decides at once and clears the metric, and a refusal after
/// that is said again.
#[tokio::test]
async fn a_refused_parent_kind_is_said_once_and_read_at_every_request() {
    let log = CapturedLog::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let cluster = FakeCluster::new(vec![no_downscale_sts(3)], vec![]);
    let mut deployment = k8s_openapi::api::apps::v1::Deployment::default();
    deployment.metadata.name = Some("ingester-zone-a".into());
    deployment.metadata.labels = Some([(keys::NO_DOWNSCALE.to_string(), "true".to_string())].into());
    cluster.put_deployment(deployment);
    let metrics = Arc::new(rollout_operator::ops::metrics::Metrics::new());
    let app = router(Webhooks {
        api: cluster.clone(),
        pods: FakePods::default(),
        settings: WebhookSettings::new("ns", "cluster.local.", Some(CM), Duration::from_secs(10))
            .with_parent_lookups(ParentLookups::reporting_to(metrics.clone())),
        clock: Arc::new(|| NOW.parse().unwrap()),
    });
    let deployment_scale = review("deployments", "ingester-zone-a", scale(3), scale(2), false);
    let forbidden = "deployments.apps \"ingester-zone-a\" is forbidden: cannot get resource \"deployments\"";
    let said = "the no-downscale webhook may not read apps deployments: /scale downscales";
    cluster.fail_reads(Some(ApiError::Forbidden(forbidden.into())));
    for _ in 0..3 {
        let response = admit(&app, "/admission/no-downscale", &deployment_scale).await;
        assert_eq!(response["allowed"], true);
        assert!(response["warnings"][0].as_str().unwrap().ends_with(forbidden), "{response}");
    }
    assert_eq!(log.count(said), 1);
    assert!(metrics.is_feature_disabled("no-downscale-parent-lookups", "deployments get"));
    // Granted: the next request reads the labelled Deployment and is denied.
    cluster.fail_reads(None);
    let response = admit(&app, "/admission/no-downscale", &deployment_scale).await;
    assert_eq!(response["allowed"], false, "{response}");
    assert!(!metrics.is_feature_disabled("no-downscale-parent-lookups", "deployments get"));
    // Refused again (the grant taken back): said again.
    cluster.fail_reads(Some(ApiError::Forbidden(forbidden.into())));
    assert_eq!(admit(&app, "/admission/no-downscale", &deployment_scale).await["allowed"], true);
    assert_eq!(log.count(said), 2);
}

// ---- prepare-downscale ------------------------------------------------------------------------------------------

const ALLOWED: &str = "downscale of statefulsets/ingester-zone-a in ns from 3 to 1 replicas is allowed -- all pods successfully prepared for shutdown.";
const DENIED: &str = "downscale of statefulsets/ingester-zone-a in ns from 3 to 1 replicas is not allowed because";

#[tokio::test]
async fn prepare_calls_the_leaving_pods_records_the_downscale_and_does_not_touch_the_statefulset() {
    let cluster = cluster_with_zones();
    let pods = FakePods::default();
    let app = app(&cluster, &pods);
    let response = admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-a", false)).await;
    assert_eq!(response["allowed"], true, "{response}");
    assert_eq!(response["status"]["message"], ALLOWED);
    let mut calls = pods.calls();
    calls.sort_by(|a, b| a.1.cmp(&b.1));
    assert_eq!(
        calls,
        [
            (
                PodMethod::Post,
                "http://ingester-zone-a-1.ingester-zone-a.ns.svc.cluster.local.:8080/ingester/prepare-shutdown".into()
            ),
            (
                PodMethod::Post,
                "http://ingester-zone-a-2.ingester-zone-a.ns.svc.cluster.local.:8080/ingester/prepare-shutdown".into()
            ),
        ]
    );
    assert!(pods.calls.lock().unwrap().iter().all(|r| r.json_content_type));
    let record = record(&cluster).expect("the record was created");
    // Dated when the replica change will have committed: the answer (NOW) plus the commit margin.
    let committed_by = NOW.parse::<Timestamp>().unwrap() + jiff::SignedDuration::try_from(COMMIT_MARGIN).unwrap();
    assert_eq!(record.last_downscaled.get("ingester-zone-a"), Some(&committed_by));
    let cm = cluster.config_map(CM).unwrap();
    let markers = rollout_core::downscale::parse_in_progress(
        cm.metadata.annotations.unwrap_or_default().get(keys::DOWNSCALES_IN_PROGRESS).map(String::as_str),
    )
    .unwrap();
    assert_eq!(markers.len(), 1);
    assert_eq!(markers[0].until, committed_by, "the marker now lasts only until the change has committed");
    assert!(
        cluster.calls().iter().all(|c| !matches!(c, Call::UpdateStatus { .. })),
        "nothing is written to the object under admission"
    );

    // Another zone while zone-a's change may still be committing: denied as in progress.
    let before = pods.calls().len();
    let mut r = downscale_review("ingester-zone-b", false);
    r["request"]["name"] = json!("ingester-zone-b");
    let response = admit(&app, "/admission/prepare-downscale", &r).await;
    assert_eq!(response["allowed"], false);
    assert!(response["status"]["message"].as_str().unwrap().ends_with("already in process of updating replicas"));
    // Later, within 12 h: denied by the min time, no pod called.
    let later = app_at(&cluster, &pods, "2026-01-01T12:01:00Z");
    let response = admit(&later, "/admission/prepare-downscale", &r).await;
    assert_eq!(response["allowed"], false);
    assert_eq!(
        response["status"]["message"],
        "downscale of statefulsets/ingester-zone-b in ns from 3 to 1 replicas is not allowed because statefulset \
         ingester-zone-a was downscaled at 2026-01-01 12:00:10 +0000 UTC and is labelled to wait 12h0m0s between zone downscales"
    );
    assert_eq!(pods.calls().len(), before);
}

#[tokio::test]
async fn a_failed_prepare_is_undone_and_denied() {
    let cluster = cluster_with_zones();
    let pods = FakePods::default();
    pods.failing.lock().unwrap().insert("ingester-zone-a-1.".into());
    let app = app(&cluster, &pods);
    let response = admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-a", false)).await;
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["message"], format!("{DENIED} one or more pods failed to prepare for shutdown."));
    assert!(response["warnings"][0].as_str().unwrap().contains("connection refused"), "{response}");
    let deletes: BTreeSet<String> =
        pods.calls().into_iter().filter(|(m, _)| *m == PodMethod::Delete).map(|(_, u)| u).collect();
    assert_eq!(deletes.len(), 2, "DELETE to every endpoint: {:?}", pods.calls());
    let record = record(&cluster).expect("record");
    assert!(!record.last_downscaled.contains_key("ingester-zone-a"), "the claim is undone: {record:?}");
    // So another zone may go at once.
    let mut r = downscale_review("ingester-zone-b", false);
    r["request"]["name"] = json!("ingester-zone-b");
    pods.failing.lock().unwrap().clear();
    assert_eq!(admit(&app, "/admission/prepare-downscale", &r).await["allowed"], true);
}

/// A pod that never answers: the handler deadline (90 % of the 10 s request timeout) ends the wait, the prepare
/// calls are undone and the downscale is denied. Runs on a paused clock, so the 9 s pass instantly.
#[tokio::test(start_paused = true)]
async fn a_pod_that_never_answers_is_cut_off_by_the_handler_deadline() {
    let cluster = cluster_with_zones();
    let pods = FakePods::default();
    pods.hanging.lock().unwrap().insert("ingester-zone-a-2.".into());
    let app = app(&cluster, &pods);
    let started = tokio::time::Instant::now();
    let response = admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-a", false)).await;
    let took = started.elapsed();
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["message"], format!("{DENIED} one or more pods failed to prepare for shutdown."));
    assert!(response["warnings"][0].as_str().unwrap().contains("deadline"), "{response}");
    assert!(took >= Duration::from_secs(9) && took < Duration::from_secs(30), "answered after {took:?} (virtual time)");
    let deletes = pods.calls().into_iter().filter(|(m, _)| *m == PodMethod::Delete).count();
    assert_eq!(deletes, 2, "{:?}", pods.calls());
    assert!(!record(&cluster).unwrap().last_downscaled.contains_key("ingester-zone-a"));
}

#[tokio::test]
async fn dry_runs_have_no_side_effects_but_get_the_real_verdict() {
    let cluster = cluster_with_zones();
    let pods = FakePods::default();
    let app = app(&cluster, &pods);
    let response = admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-a", true)).await;
    assert_eq!(response["allowed"], true);
    assert!(response["status"]["message"].as_str().unwrap().contains("dry run: 2 pods would be prepared"));
    assert_eq!(pods.calls(), []);
    assert!(cluster.config_map(CM).is_none());
    assert!(cluster.calls().is_empty(), "{:?}", cluster.calls());
    // A dry run that would be denied is denied.
    cluster.set_pod_ready("ingester-zone-b-0", false);
    let response = admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-a", true)).await;
    assert_eq!(response["allowed"], false);
}

#[tokio::test]
async fn prepare_is_denied_while_another_zone_has_unavailable_pods_and_skips_missing_pods() {
    let cluster = cluster_with_zones();
    let pods = FakePods::default();
    let app = app(&cluster, &pods);
    cluster.set_pod_ready("ingester-zone-c-2", false);
    let response = admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-a", false)).await;
    assert_eq!(
        response["status"]["message"],
        format!("{DENIED} statefulset ingester-zone-c has 0 non-updated replicas and 1 non-ready replicas")
    );
    cluster.set_pod_ready("ingester-zone-c-2", true);

    // Zone a's pod 2 does not exist yet (still scaling up): only pod 1 is called.
    let remaining: Vec<_> =
        cluster.pods().into_iter().filter(|p| p.metadata.name.as_deref() != Some("ingester-zone-a-2")).collect();
    let statefulsets = ["ingester-zone-a", "ingester-zone-b", "ingester-zone-c"].iter().map(|z| zone(z, 3)).collect();
    let cluster = FakeCluster::new(statefulsets, remaining);
    let app = self::app(&cluster, &pods);
    pods.calls.lock().unwrap().clear();
    let response = admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-a", false)).await;
    assert_eq!(response["allowed"], true, "{response}");
    assert_eq!(response["warnings"][0], "pods that do not exist were not called: ingester-zone-a-2");
    assert_eq!(pods.calls().len(), 1);
}

#[tokio::test]
async fn listing_failures_deny() {
    let cluster = cluster_with_zones();
    let app = app(&cluster, &FakePods::default());
    cluster.fail_reads(Some(ApiError::Unavailable("etcd timeout".into())));
    let response = admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-a", false)).await;
    assert_eq!(response["status"]["message"], format!("{DENIED} finding other statefulsets failed."));
    assert!(response["warnings"][0].as_str().unwrap().contains("etcd timeout"));
}

/// Many simultaneous downscale admissions for the zones of one group: exactly the ones the min-time rule allows
/// pass (every admission of the first zone to claim, no other), and only the admitted ones called pods.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_admissions_for_different_zones_let_exactly_one_zone_through() {
    for round in 0..10 {
        let cluster = cluster_with_zones();
        let pods = FakePods::default();
        let app = app(&cluster, &pods);
        let mut tasks = Vec::new();
        for i in 0..9 {
            let zone = ["ingester-zone-a", "ingester-zone-b", "ingester-zone-c"][(i + round) % 3];
            let mut r = downscale_review(zone, false);
            r["request"]["name"] = json!(zone);
            r["request"]["uid"] = json!(format!("uid-{i}"));
            let app = app.clone();
            tasks.push(tokio::spawn(async move { (zone, admit(&app, "/admission/prepare-downscale", &r).await) }));
        }
        let mut allowed = BTreeSet::new();
        let mut denied = 0;
        for task in tasks {
            let (zone, response) = task.await.unwrap();
            if response["allowed"] == true {
                allowed.insert(zone);
            } else {
                denied += 1;
                let message = response["status"]["message"].as_str().unwrap().to_string();
                assert!(
                    message.contains("between zone downscales")
                        || message.contains("already in process of updating replicas"),
                    "round {round}: {message}"
                );
            }
        }
        assert_eq!(allowed.len(), 1, "round {round}: exactly one zone passes, got {allowed:?}");
        // Exactly one request passes: concurrent requests for the winning zone are refused too while its downscale
        // is being prepared (a second claim of a StatefulSet would take over the first one's marker).
        assert_eq!(denied, 8, "round {round}");
        let winner = allowed.into_iter().next().unwrap();
        assert!(
            pods.calls().iter().all(|(_, url)| url.contains(&format!("{winner}-"))),
            "round {round}: {:?}",
            pods.calls()
        );
        assert_eq!(record(&cluster).unwrap().last_downscaled.keys().collect::<Vec<_>>(), [winner]);
    }
}

// ---- arbitrary input --------------------------------------------------------------------------------------------

fn check_http(app: &axum::Router, rt: &tokio::runtime::Runtime, body: Vec<u8>) {
    for path in ["/admission/no-downscale", "/admission/prepare-downscale"] {
        let (status, out) = rt.block_on(post(app, path, Some("application/json"), body.clone()));
        match status {
            StatusCode::BAD_REQUEST => assert!(!out.is_empty(), "a 400 says why"),
            StatusCode::OK => {
                let request: Value = serde_json::from_slice(&body).expect("a 200 answers a JSON request");
                let response: Value = serde_json::from_slice(&out).expect("a 200 carries JSON");
                assert_eq!(response["kind"], "AdmissionReview");
                assert_eq!(response["apiVersion"], request["apiVersion"]);
                assert_eq!(response["response"]["uid"], request["request"]["uid"]);
                assert!(response["response"]["allowed"].is_boolean());
            }
            other => panic!("unexpected status {other} for {}", String::from_utf8_lossy(&body)),
        }
    }
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-3i64..10).prop_map(|n| json!(n)),
        prop_oneof![
            Just("statefulsets"),
            Just("apps/v1"),
            Just("StatefulSet"),
            Just("autoscaling/v1"),
            Just("Scale"),
            Just("true"),
            Just("")
        ]
        .prop_map(|s| Value::String(s.to_string())),
    ];
    leaf.prop_recursive(4, 40, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("apiVersion"),
                    Just("kind"),
                    Just("uid"),
                    Just("object"),
                    Just("oldObject"),
                    Just("spec"),
                    Just("replicas"),
                    Just("metadata"),
                    Just("labels"),
                    Just("dryRun"),
                    Just("resource"),
                    Just("name"),
                ]
                .prop_map(String::from),
                inner,
                0..6
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_get_400_or_a_well_formed_review(body in prop::collection::vec(any::<u8>(), 0..200)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let app = app(&cluster_with_zones(), &FakePods::default());
        check_http(&app, &rt, body);
    }

    #[test]
    fn arbitrary_json_gets_400_or_a_well_formed_review(
        request in arb_json(), old in arb_json(), new in arb_json(), version in prop_oneof![Just("admission.k8s.io/v1"), Just("admission.k8s.io/v1beta1")]
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let app = app(&cluster_with_zones(), &FakePods::default());
        check_http(&app, &rt, serde_json::to_vec(&request).unwrap());
        let mut r = review("statefulsets", "ingester-zone-a", old, new, false);
        r["apiVersion"] = json!(version);
        check_http(&app, &rt, serde_json::to_vec(&r).unwrap());
        r["request"]["oldObject"] = with_replicas(zone("ingester-zone-a", 3), 3);
        if let Some(object) = r["request"]["object"].as_object_mut() {
            object.insert("apiVersion".into(), json!("apps/v1"));
        }
        check_http(&app, &rt, serde_json::to_vec(&r).unwrap());
        r["request"] = request;
        check_http(&app, &rt, serde_json::to_vec(&r).unwrap());
    }
}

/// Invariant 5, the window between the webhook's first live read and its claim: a rollout step that lands just as the
/// marker is written (here, zone b's pod 0 replaced by a not-yet-ready pod at a new revision) is seen by the re-read
/// after the claim: the downscale is denied, no pod is called, and the claim is rolled back.
#[tokio::test]
async fn a_rollout_step_racing_the_claim_is_seen_by_the_re_read_and_the_downscale_is_denied() {
    let cluster = cluster_with_zones();
    cluster.after_next_config_map_write(|c| {
        let mut s = c.statefulset("ingester-zone-b").unwrap();
        s.status.as_mut().unwrap().update_revision = Some("r2".into());
        c.put_statefulset(s);
        c.put_pod(pod("ingester-zone-b", 0, "r2", false, 2));
    });
    let pods = FakePods::default();
    let app = app(&cluster, &pods);
    let response = admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-a", false)).await;
    assert_eq!(response["allowed"], false, "{response}");
    let message = response["status"]["message"].as_str().unwrap();
    assert!(
        message.ends_with("statefulset ingester-zone-b has 2 non-updated replicas and 1 non-ready replicas"),
        "{message}"
    );
    assert!(pods.calls().iter().all(|(m, _)| *m == PodMethod::Delete), "no prepare call: {:?}", pods.calls());
    let record = record(&cluster).expect("record");
    assert!(!record.last_downscaled.contains_key("ingester-zone-a"), "the claim is rolled back: {record:?}");
    let cm = cluster.config_map(CM).unwrap();
    assert!(
        !cm.metadata.annotations.unwrap_or_default().contains_key(keys::DOWNSCALES_IN_PROGRESS),
        "the in-progress marker is cleared"
    );
}

/// Regression (review): with a clock that is not on a whole second, the in-progress marker was stored rounded down
/// but looked up rounded up, so it was never cleared and held the group for the whole marker lifetime. Both the
/// success and the undo path must clear it.
#[tokio::test]
async fn the_in_progress_marker_is_cleared_when_the_clock_is_between_seconds() {
    let in_progress = |cluster: &FakeCluster| {
        cluster
            .config_map(CM)
            .and_then(|cm| cm.metadata.annotations)
            .and_then(|a| a.get(keys::DOWNSCALES_IN_PROGRESS).cloned())
            .filter(|v| v != "{}")
    };
    let cluster = cluster_with_zones();
    let pods = FakePods::default();
    let app = app_at(&cluster, &pods, "2026-01-01T12:00:00.5Z");
    let response = admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-a", false)).await;
    assert_eq!(response["allowed"], true, "{response}");
    // After a successful prepare the marker is found and shortened to the commit (12:00:10.5, rounded up).
    let left = in_progress(&cluster).expect("shortened, not left at its claim deadline");
    assert!(left.contains("\"until\":\"2026-01-01T12:00:11Z\""), "{left}");

    let cluster = cluster_with_zones();
    let pods = FakePods::default();
    pods.failing.lock().unwrap().insert("ingester-zone-a-1.".into());
    let app = app_at(&cluster, &pods, "2026-01-01T12:00:00.5Z");
    let response = admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-a", false)).await;
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(in_progress(&cluster), None, "marker left after an undone prepare");
}

/// Review finding: a `/scale` downscale (HPA, `kubectl scale`) whose StatefulSet cannot be read must not pass
/// unprepared and unchecked; only a StatefulSet that is really gone is let through (nothing to prepare).
#[tokio::test]
async fn prepare_downscale_denies_a_scale_request_when_the_statefulset_cannot_be_read() {
    let cluster = cluster_with_zones();
    let pods = FakePods::default();
    let app = app(&cluster, &pods);
    let r = review("statefulsets", "ingester-zone-a", scale(3), scale(1), false);
    cluster.fail_reads(Some(ApiError::Unavailable("connection refused".into())));
    let response = admit(&app, "/admission/prepare-downscale", &r).await;
    assert_eq!(response["allowed"], false, "{response}");
    let message = response["status"]["message"].as_str().unwrap();
    assert!(message.starts_with(DENIED) && message.contains("connection refused"), "{message}");
    assert!(pods.calls().is_empty());
    cluster.fail_reads(None);
    // Readable again: the normal path prepares the leaving pods.
    let response = admit(&app, "/admission/prepare-downscale", &r).await;
    assert_eq!(response["allowed"], true, "{response}");
    assert_eq!(pods.calls().len(), 2);
    // Gone: nothing to prepare, allowed with a warning.
    let r = review("statefulsets", "ingester-zone-x", scale(3), scale(1), false);
    let response = admit(&app, "/admission/prepare-downscale", &r).await;
    assert_eq!(response["allowed"], true, "{response}");
    assert!(response["warnings"][0].as_str().unwrap().contains("not found"), "{response}");
}

/// Review finding: requests for another namespace are not decided on the objects of the operator's namespace that
/// happen to have the same name: allowed with a warning, no read, no pod call, no record.
#[tokio::test]
async fn requests_for_another_namespace_are_allowed_with_a_warning_and_touch_nothing() {
    let cluster = cluster_with_zones();
    let pods = FakePods::default();
    let app = app(&cluster, &pods);
    for path in ["/admission/prepare-downscale", "/admission/no-downscale"] {
        let mut r = downscale_review("ingester-zone-a", false);
        r["request"]["namespace"] = json!("elsewhere");
        let response = admit(&app, path, &r).await;
        assert_eq!(response["allowed"], true, "{path}: {response}");
        assert!(response["warnings"][0].as_str().unwrap().contains("\"elsewhere\" is not managed"), "{response}");
    }
    assert!(pods.calls().is_empty());
    assert!(cluster.config_map(CM).is_none(), "no record written");
}

/// The record must date an admitted downscale no earlier than its commit, which follows the webhook's answer. When
/// finishing the claim takes so long that the date it wrote has already passed, the downscale is denied instead and
/// everything is undone (pods told to cancel, the record's entry restored).
#[tokio::test]
async fn a_downscale_whose_record_date_passed_before_the_answer_is_denied_and_undone() {
    let cluster = cluster_with_zones();
    let pods = FakePods::default();
    // A clock that moves 6 s at every reading: the date written (a reading + the 5 s margin) has passed at the
    // next reading.
    let start: Timestamp = NOW.parse().unwrap();
    let readings = Arc::new(std::sync::atomic::AtomicI64::new(0));
    let app = router(Webhooks {
        api: cluster.clone(),
        pods: pods.clone(),
        settings: WebhookSettings::new("ns", "cluster.local.", Some(CM), Duration::from_secs(10)),
        clock: Arc::new(move || {
            let n = readings.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            start + jiff::SignedDuration::from_secs(6 * n)
        }),
    });
    let response = admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-a", false)).await;
    assert_eq!(response["allowed"], false, "{response}");
    let message = response["status"]["message"].as_str().unwrap();
    assert!(message.starts_with(DENIED) && message.contains("took longer than 10s"), "{message}");
    let deletes = pods.calls().into_iter().filter(|(m, _)| *m == PodMethod::Delete).count();
    assert_eq!(deletes, 2, "the prepared pods are told to cancel: {:?}", pods.calls());
    let record = record(&cluster).expect("the record exists");
    assert_eq!(record.last_downscaled.get("ingester-zone-a"), None, "the entry is restored (there was none)");
}

// ---- prepare-downscale without the zone tracker (-use-zone-tracker=false, the default) --------------------------

fn app_without_tracker(cluster: &FakeCluster, pods: &FakePods) -> axum::Router {
    let now: Timestamp = NOW.parse().unwrap();
    router(Webhooks {
        api: cluster.clone(),
        pods: pods.clone(),
        settings: WebhookSettings::new("ns", "cluster.local.", None, Duration::from_secs(10)),
        clock: Arc::new(move || now),
    })
}

fn decoded_patch(response: &Value) -> Value {
    assert_eq!(response["patchType"], "JSONPatch", "{response}");
    let bytes: k8s_openapi::ByteString = serde_json::from_value(response["patch"].clone()).unwrap();
    serde_json::from_slice(&bytes.0).unwrap()
}

/// A StatefulSet UPDATE is recorded by the mutating response itself (JSONPatch adding
/// `grafana.com/last-downscale`, dated at the answer plus the commit margin): no ConfigMap, no write of ours.
#[tokio::test]
async fn without_the_tracker_an_update_gets_its_last_downscale_annotation_through_the_json_patch() {
    let cluster = cluster_with_zones();
    cluster.fail_reads(None);
    let pods = FakePods::default();
    let app = app_without_tracker(&cluster, &pods);
    let response = admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-a", false)).await;
    assert_eq!(response["allowed"], true, "{response}");
    assert_eq!(pods.calls().len(), 2, "the leaving pods are prepared");
    let patch = decoded_patch(&response);
    assert_eq!(
        patch,
        json!([{"op": "add", "path": "/metadata/annotations/grafana.com~1last-downscale", "value": "2026-01-01T12:00:10Z"}])
    );
    assert!(cluster.config_map(CM).is_none());
    assert!(
        cluster.calls().iter().all(|c| !matches!(c, Call::CreateConfigMap { .. } | Call::ReplaceConfigMap { .. })),
        "{:?}",
        cluster.calls()
    );
    // Dry runs: the verdict, no patch, no pod call.
    let before = pods.calls().len();
    let response = admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-a", true)).await;
    assert_eq!(response["allowed"], true);
    assert!(response.get("patch").is_none(), "{response}");
    assert_eq!(pods.calls().len(), before);
}

/// Another zone's annotation within its min time denies, as the reference does without the tracker.
#[tokio::test]
async fn without_the_tracker_another_zones_annotation_denies_within_the_min_time() {
    let cluster = cluster_with_zones();
    let mut b = cluster.statefulset("ingester-zone-b").unwrap();
    b.metadata.annotations.get_or_insert_default().insert(keys::LAST_DOWNSCALE.into(), "2026-01-01T11:00:00Z".into());
    cluster.put_statefulset(b);
    let pods = FakePods::default();
    let app = app_without_tracker(&cluster, &pods);
    let response = admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-a", false)).await;
    assert_eq!(response["allowed"], false, "{response}");
    assert!(response["status"]["message"].as_str().unwrap().contains("ingester-zone-b was downscaled at"));
    assert!(pods.calls().is_empty());
}

/// A `/scale` request cannot carry the annotation: the parent is patched, conditional on the resourceVersion read,
/// dated 30 s ahead, and the downscale allowed, whether the request carries a resourceVersion (an HPA's PUT) or not
/// (`kubectl scale`'s PATCH). The write moves the parent's resourceVersion, so the API server runs the request
/// again (re-admits the PATCH; refuses the PUT, which the HPA retries): that admission finds the date ahead, writes
/// nothing and is allowed.
#[tokio::test]
async fn without_the_tracker_a_scale_request_annotates_the_parent_conditionally_and_its_readmission_writes_nothing() {
    for carries_version in [true, false] {
        let cluster = cluster_with_zones();
        let pods = FakePods::default();
        let app = app_without_tracker(&cluster, &pods);
        let rv = cluster.statefulset("ingester-zone-a").unwrap().metadata.resource_version.unwrap();
        let mut object = scale(1);
        if carries_version {
            object["metadata"]["resourceVersion"] = json!(rv);
        }
        let r = review("statefulsets", "ingester-zone-a", scale(3), object, false);
        let response = admit(&app, "/admission/prepare-downscale", &r).await;
        assert_eq!(response["allowed"], true, "carrying a resourceVersion: {carries_version}: {response}");
        assert!(pods.calls().iter().all(|(m, _)| *m == PodMethod::Post), "no cancel: {:?}", pods.calls());
        let written: Vec<_> =
            cluster.calls().into_iter().filter(|c| matches!(c, Call::PatchAnnotations { .. })).collect();
        let expected = BTreeMap::from([(keys::LAST_DOWNSCALE.to_string(), "2026-01-01T12:00:30Z".to_string())]);
        assert_eq!(
            written,
            vec![Call::PatchAnnotations {
                name: "ingester-zone-a".into(),
                resource_version: rv,
                annotations: expected
            }]
        );
        // Admitted again, as the API server re-applies the PATCH to the object just written (or the HPA retries
        // its PUT with the resourceVersion it reads again): allowed, nothing written.
        cluster.take_calls();
        let rv = cluster.statefulset("ingester-zone-a").unwrap().metadata.resource_version.unwrap();
        let mut again = scale(1);
        again["metadata"]["resourceVersion"] = json!(rv);
        let r = review("statefulsets", "ingester-zone-a", scale(3), again, false);
        let response = admit(&app, "/admission/prepare-downscale", &r).await;
        assert_eq!(response["allowed"], true, "{response}");
        assert!(cluster.calls().iter().all(|c| !matches!(c, Call::PatchAnnotations { .. })), "{:?}", cluster.calls());
    }
}

/// The parent's annotation cannot be written (here: the operator may not patch StatefulSets): the downscale is
/// denied, saying which verb to grant, and the prepared pods are told to cancel.
#[tokio::test]
async fn without_the_tracker_a_scale_request_whose_record_fails_is_denied_and_undone() {
    let cluster = cluster_with_zones();
    let pods = FakePods::default();
    let app = app_without_tracker(&cluster, &pods);
    let r = review("statefulsets", "ingester-zone-a", scale(3), scale(1), false);
    // Reads do not take queued failures: the first write, the annotation patch, gets it.
    cluster.fail_next(ApiError::Forbidden("statefulsets.apps is forbidden".into()));
    let response = admit(&app, "/admission/prepare-downscale", &r).await;
    assert_eq!(response["allowed"], false, "{response}");
    let message = response["status"]["message"].as_str().unwrap();
    assert!(message.contains("grant the operator `patch` on apps statefulsets"), "{message}");
    let deletes = pods.calls().into_iter().filter(|(m, _)| *m == PodMethod::Delete).count();
    assert_eq!(deletes, 2, "{:?}", pods.calls());
}

/// With the zone tracker on but no configmaps permission, prepare-downscale denies (the min time cannot be
/// checked) and says which verbs to grant.
#[tokio::test]
async fn a_forbidden_zone_tracker_denies_and_names_the_missing_verbs() {
    let cluster = cluster_with_zones();
    let pods = FakePods::default();
    let app = app(&cluster, &pods);
    let forbidden = ApiError::Forbidden("configmaps \"x\" is forbidden".into());
    cluster.fail_config_map_reads(Some(forbidden));
    let response = admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-a", false)).await;
    assert_eq!(response["allowed"], false, "{response}");
    let warning = response["warnings"].to_string();
    assert!(warning.contains("grant the operator get, update and create on configmaps"), "{response}");
    assert!(pods.calls().is_empty());
}

// ---- Events -----------------------------------------------------------------------------------------------------

/// With Events on, a denied downscale and one admitted after preparing pods are told on the StatefulSet; a dry run
/// and a request that is not a downscale tell nothing.
#[tokio::test]
async fn denied_and_prepared_downscales_are_told_as_events_but_dry_runs_are_not() {
    use rollout_operator::ops::events::{EventRecorder, EventType};
    use rollout_operator::ops::metrics::Metrics;
    let cluster = cluster_with_zones();
    let (events, mut queue) = EventRecorder::new(16, Arc::new(Metrics::new()));
    let now: Timestamp = NOW.parse().unwrap();
    let app = router(Webhooks {
        api: cluster.clone(),
        pods: FakePods::default(),
        settings: WebhookSettings::new("ns", "cluster.local.", Some(CM), Duration::from_secs(10)).with_events(events),
        clock: Arc::new(move || now),
    });
    let mut told = || std::iter::from_fn(|| queue.try_recv()).collect::<Vec<_>>();

    assert_eq!(
        admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-b", true)).await["allowed"],
        true
    );
    assert!(told().is_empty(), "a dry run tells nothing");
    assert_eq!(
        admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-a", false)).await["allowed"],
        true
    );
    let events = told();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!((events[0].reason, events[0].type_), ("DownscalePrepared", EventType::Normal));
    assert_eq!((events[0].regarding.kind, events[0].regarding.name.as_str()), ("StatefulSet", "ingester-zone-a"));
    assert_eq!(events[0].note, "downscale by hpa admitted after preparing ingester-zone-a-2, ingester-zone-a-1");

    // Zone b within zone a's 12 h: denied, and told with the webhook's message.
    let response = admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-b", false)).await;
    assert_eq!(response["allowed"], false);
    let events = told();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!((events[0].reason, events[0].type_), ("DownscaleDenied", EventType::Warning));
    let message = response["status"]["message"].as_str().unwrap_or_default();
    assert_eq!(events[0].note, format!("downscale by hpa denied: {message}"));
    // An upscale is no news.
    let up = review(
        "statefulsets",
        "ingester-zone-c",
        with_replicas(zone("ingester-zone-c", 3), 3),
        with_replicas(zone("ingester-zone-c", 4), 4),
        false,
    );
    assert_eq!(admit(&app, "/admission/prepare-downscale", &up).await["allowed"], true);
    assert!(told().is_empty());
}

#[tokio::test]
async fn a_no_downscale_denial_is_told_on_its_object() {
    use rollout_operator::ops::events::{EventRecorder, EventType};
    use rollout_operator::ops::metrics::Metrics;
    let cluster = FakeCluster::new(vec![no_downscale_sts(3)], vec![]);
    let (events, mut queue) = EventRecorder::new(16, Arc::new(Metrics::new()));
    let app = router(Webhooks {
        api: cluster,
        pods: FakePods::default(),
        settings: WebhookSettings::new("ns", "cluster.local.", None, Duration::from_secs(10)).with_events(events),
        clock: Arc::new(Timestamp::now),
    });
    let r = review("statefulsets", "ingester-zone-a", scale(3), scale(2), false);
    assert_eq!(admit(&app, "/admission/no-downscale", &r).await["allowed"], false);
    let told = queue.try_recv().expect("an Event");
    assert_eq!(
        (told.reason, told.type_, told.regarding.name.as_str()),
        ("DownscaleDenied", EventType::Warning, "ingester-zone-a")
    );
    assert!(
        told.note.starts_with("downscale by hpa denied: downscale of statefulsets/ingester-zone-a"),
        "{}",
        told.note
    );
    assert!(queue.try_recv().is_none());
}
