//! Scaling in the reconcile loop, against the in-memory API server and a pod-endpoint server on 127.0.0.1:
//! leader/follower patches and downscale claims, mirror replicas with status write-back, and delayed downscale
//! over real HTTP (slow pods, 500s, non-JSON bodies, missing timestamps, 409 on DELETE).
#![cfg(not(madsim))]

mod support;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use rollout_core::{DownscaleRecord, RolloutPlanner, keys};
use rollout_operator::cluster::{ApiError, ApiResourceRef};
use rollout_operator::ops::metrics::Metrics;
use rollout_operator::pods::client::{PodCallError, PodHttpClient, PodRequest, PodResponse};
use rollout_operator::pods::hyper_client::HyperPodClient;
use rollout_operator::rollout::reconciler::{Controller, ReconcilerConfig};
use rollout_operator::rollout::scaling::ScalingConfig;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{Call, FakeCluster, pod, sts};

const REV: &str = "rev-1";
const GROUP: &str = "ingester";
const RECORD: &str = "rollout-operator-zone-tracker";
const URL: &str = "http://pod:8080/prepare-delayed-downscale";

fn annotate(mut s: StatefulSet, key: &str, value: &str) -> StatefulSet {
    s.metadata.annotations.get_or_insert_default().insert(key.into(), value.into());
    s
}

fn zone(name: &str, replicas: i32) -> StatefulSet {
    sts(GROUP, name, replicas, REV, REV)
}

fn pods_of(name: &str, replicas: u32) -> Vec<Pod> {
    (0..replicas).map(|i| pod(name, i, REV, true, 0)).collect()
}

fn replica_template() -> ApiResourceRef {
    ApiResourceRef {
        group: "rollout-operator.grafana.com".into(),
        version: "v1".into(),
        kind: "ReplicaTemplate".into(),
        plural: "replicatemplates".into(),
    }
}

fn mirrored(name: &str, replicas: i32, delayed: bool) -> StatefulSet {
    let mut s = zone(name, replicas);
    s = annotate(s, keys::MIRROR_REPLICAS_FROM_RESOURCE_NAME, "rt");
    s = annotate(s, keys::MIRROR_REPLICAS_FROM_RESOURCE_KIND, "ReplicaTemplate");
    s = annotate(s, keys::MIRROR_REPLICAS_FROM_RESOURCE_API_VERSION, "rollout-operator.grafana.com/v1");
    if delayed {
        s = annotate(s, keys::ROLLOUT_DELAYED_DOWNSCALE, "1h");
        s = annotate(s, keys::ROLLOUT_PREPARE_DELAYED_DOWNSCALE_URL, URL);
    }
    s
}

// ----- a pod-endpoint server on 127.0.0.1 -----

/// How one pod answers.
#[derive(Debug, Clone, Copy)]
enum Behaviour {
    /// 200 with the time it started preparing, this many minutes ago.
    PreparedMinutesAgo(i64),
    Status500,
    NotJson,
    NoTimestamp,
    /// Answers after 30 s (the client's timeout is much shorter).
    Slow,
    /// 409 on DELETE ("partition state locked").
    Locked,
}

#[derive(Clone, Default)]
struct Pods {
    behaviour: Arc<Mutex<BTreeMap<String, Behaviour>>>,
    /// (method, pod) in arrival order.
    seen: Arc<Mutex<Vec<(String, String)>>>,
}

impl Pods {
    fn set(&self, pod: &str, b: Behaviour) {
        self.behaviour.lock().unwrap().insert(pod.into(), b);
    }

    fn take_seen(&self) -> Vec<(String, String)> {
        let mut seen = std::mem::take(&mut *self.seen.lock().unwrap());
        seen.sort();
        seen
    }
}

async fn pod_endpoint(
    State(pods): State<Pods>,
    method: Method,
    Path((pod, _rest)): Path<(String, String)>,
) -> Response {
    pods.seen.lock().unwrap().push((method.to_string(), pod.clone()));
    let behaviour = pods.behaviour.lock().unwrap().get(&pod).copied();
    let now = jiff::Timestamp::now().as_second();
    match (method, behaviour) {
        (Method::DELETE, Some(Behaviour::Locked)) => (StatusCode::CONFLICT, "partition state locked").into_response(),
        (Method::DELETE, _) => StatusCode::OK.into_response(),
        (_, Some(Behaviour::PreparedMinutesAgo(m))) => format!(r#"{{"timestamp":{}}}"#, now - m * 60).into_response(),
        (_, Some(Behaviour::Status500)) => (StatusCode::INTERNAL_SERVER_ERROR, "boom").into_response(),
        (_, Some(Behaviour::NotJson)) => "<html>hello</html>".into_response(),
        (_, Some(Behaviour::NoTimestamp)) => "{}".into_response(),
        (_, Some(Behaviour::Slow)) => {
            tokio::time::sleep(Duration::from_secs(30)).await;
            "{}".into_response()
        }
        // A pod that has just been asked starts preparing now.
        (_, _) => format!(r#"{{"timestamp":{now}}}"#).into_response(),
    }
}

/// The pod client used by these tests: the real client, but every pod DNS name (which needs cluster DNS) is sent to
/// the local server as `/<pod>/<path>`. The original URLs are recorded.
#[derive(Clone)]
struct ToLocal {
    inner: HyperPodClient,
    base: String,
    urls: Arc<Mutex<Vec<String>>>,
}

impl PodHttpClient for ToLocal {
    async fn call(&self, mut request: PodRequest) -> Result<PodResponse, PodCallError> {
        self.urls.lock().unwrap().push(request.url.clone());
        let after = request.url.split_once("://").map(|(_, a)| a.to_string()).unwrap_or_default();
        let (host, path) = after.split_at(after.find('/').unwrap_or(after.len()));
        let pod = host.split('.').next().unwrap_or_default();
        request.url = format!("{}/{pod}{path}", self.base);
        self.inner.call(request).await
    }
}

async fn serve_pods() -> (Pods, String) {
    let pods = Pods::default();
    let router = Router::new()
        .route("/{pod}/{*rest}", axum::routing::post(pod_endpoint).delete(pod_endpoint))
        .with_state(pods.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (pods, base)
}

// ----- the harness -----

/// The shared harness, its controller calling the pods this test serves, and what they saw.
struct Harness {
    inner: support::Harness<ToLocal>,
    pods: Pods,
    urls: Arc<Mutex<Vec<String>>>,
}

impl std::ops::Deref for Harness {
    type Target = support::Harness<ToLocal>;

    fn deref(&self) -> &Self::Target {
        &self.inner
    }
}

impl std::ops::DerefMut for Harness {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.inner
    }
}

impl Harness {
    async fn new(cluster: FakeCluster) -> Self {
        Self::with_record(cluster, Some(RECORD)).await
    }

    /// `record`: the zone tracker's ConfigMap (`-use-zone-tracker=true`), or `None` (the default).
    async fn with_record(cluster: FakeCluster, record: Option<&str>) -> Self {
        let (pods, base) = serve_pods().await;
        let metrics = Arc::new(Metrics::new());
        let urls = Arc::new(Mutex::new(Vec::new()));
        let client = ToLocal {
            inner: HyperPodClient::new(Duration::from_millis(300), "ns", metrics.pod_http_client.clone()).unwrap(),
            base,
            urls: urls.clone(),
        };
        let scaling = ScalingConfig {
            namespace: "ns".into(),
            zone_tracker_config_map: record.map(str::to_string),
            ..ScalingConfig::default()
        };
        let ctrl = Controller::new(cluster.clone(), RolloutPlanner, ReconcilerConfig::default(), metrics.clone())
            .with_scaling(client, scaling);
        Harness { inner: support::Harness::with_controller(cluster, ctrl, metrics), pods, urls }
    }

    fn replica_patches(calls: &[Call]) -> Vec<(String, u32)> {
        calls
            .iter()
            .filter_map(|c| match c {
                Call::PatchReplicas { name, replicas, .. } => Some((name.clone(), *replicas)),
                _ => None,
            })
            .collect()
    }

    fn record(&self) -> DownscaleRecord {
        let cm: ConfigMap = self.cluster.config_map(RECORD).expect("record exists");
        DownscaleRecord::from_config_map_data(&cm.data.unwrap_or_default()).unwrap()
    }
}

fn seen(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut v: Vec<_> = pairs.iter().map(|(m, p)| (m.to_string(), p.to_string())).collect();
    v.sort();
    v
}

// ----- leader/follower -----

#[tokio::test]
async fn follower_upscale_is_patched_with_a_resource_version_precondition_and_nothing_else() {
    let mut pods = pods_of("ingester-zone-a", 5);
    pods.extend(pods_of("ingester-zone-b", 3));
    let follower = annotate(zone("ingester-zone-b", 3), keys::ROLLOUT_DOWNSCALE_LEADER, "ingester-zone-a");
    let mut h = Harness::new(FakeCluster::new(vec![zone("ingester-zone-a", 5), follower], pods)).await;
    let rv = h.cluster.statefulset("ingester-zone-b").unwrap().metadata.resource_version.unwrap();
    let calls = h.reconcile().await;
    assert_eq!(calls, vec![Call::PatchReplicas { name: "ingester-zone-b".into(), replicas: 5, resource_version: rv }]);
    assert_eq!(h.cluster.statefulset("ingester-zone-b").unwrap().spec.unwrap().replicas, Some(5));
    assert_eq!(h.ctrl.pending_expectations(GROUP).len(), 1, "the write is expected before the group is planned again");
    assert!(h.cluster.config_map(RECORD).is_none(), "upscales are not recorded");
}

#[tokio::test]
async fn follower_downscale_is_claimed_in_the_group_downscale_record_first() {
    let mut pods = pods_of("ingester-zone-a", 3);
    pods.extend(pods_of("ingester-zone-b", 5));
    let follower = annotate(
        annotate(zone("ingester-zone-b", 5), keys::ROLLOUT_DOWNSCALE_LEADER, "ingester-zone-a"),
        keys::MIN_TIME_BETWEEN_ZONES_DOWNSCALE,
        "1h",
    );
    let mut h = Harness::new(FakeCluster::new(vec![zone("ingester-zone-a", 3), follower], pods)).await;
    let calls = h.reconcile().await;
    assert!(matches!(calls.first(), Some(Call::CreateConfigMap { .. })), "{calls:?}");
    assert_eq!(Harness::replica_patches(&calls), [("ingester-zone-b".to_string(), 3)]);
    let record = h.record();
    assert!(record.last_downscaled.contains_key("ingester-zone-b"), "{record:?}");
}

/// Without the zone tracker (`-use-zone-tracker=false`, the default, what the Helm charts run, granting no
/// configmaps): no ConfigMap is read or written; the follower's downscale is recorded in its own
/// `grafana.com/last-downscale`, in the replica write itself, dated when it will have committed.
#[tokio::test]
async fn without_the_zone_tracker_a_follower_downscale_records_its_annotation_in_the_same_write() {
    let mut pods = pods_of("ingester-zone-a", 3);
    pods.extend(pods_of("ingester-zone-b", 5));
    let follower = annotate(
        annotate(zone("ingester-zone-b", 5), keys::ROLLOUT_DOWNSCALE_LEADER, "ingester-zone-a"),
        keys::MIN_TIME_BETWEEN_ZONES_DOWNSCALE,
        "1h",
    );
    let cluster = FakeCluster::new(vec![zone("ingester-zone-a", 3), follower], pods);
    cluster.fail_reads(None);
    let mut h = Harness::with_record(cluster, None).await;
    let before = jiff::Timestamp::now();
    let calls = h.reconcile().await;
    assert!(
        calls.iter().all(|c| !matches!(c, Call::CreateConfigMap { .. } | Call::ReplaceConfigMap { .. })),
        "{calls:?}"
    );
    assert_eq!(Harness::replica_patches(&calls), [("ingester-zone-b".to_string(), 3)]);
    let Some(Call::PatchAnnotations { annotations, .. }) = calls.get(1) else { panic!("{calls:?}") };
    let at: jiff::Timestamp = annotations[keys::LAST_DOWNSCALE].parse().unwrap();
    assert!(at >= before + jiff::SignedDuration::from_secs(5), "dated after the commit margin: {at}");
    let live = h.cluster.statefulset("ingester-zone-b").unwrap();
    assert!(live.metadata.annotations.unwrap().contains_key(keys::LAST_DOWNSCALE));
    assert!(h.cluster.config_map(RECORD).is_none());
}

/// Without the zone tracker, another zone's `grafana.com/last-downscale` holds the follower for the min time.
#[tokio::test]
async fn without_the_zone_tracker_another_zones_annotation_holds_the_follower() {
    let mut pods = pods_of("ingester-zone-a", 3);
    pods.extend(pods_of("ingester-zone-b", 5));
    pods.extend(pods_of("ingester-zone-c", 3));
    let follower = annotate(
        annotate(zone("ingester-zone-b", 5), keys::ROLLOUT_DOWNSCALE_LEADER, "ingester-zone-a"),
        keys::MIN_TIME_BETWEEN_ZONES_DOWNSCALE,
        "1h",
    );
    let recent = (jiff::Timestamp::now() - jiff::SignedDuration::from_mins(1)).to_string();
    let c = annotate(zone("ingester-zone-c", 3), keys::LAST_DOWNSCALE, &recent);
    let mut h = Harness::with_record(FakeCluster::new(vec![zone("ingester-zone-a", 3), follower, c], pods), None).await;
    let calls = h.reconcile().await;
    assert!(Harness::replica_patches(&calls).is_empty(), "{calls:?}");
}

#[tokio::test]
async fn a_refused_replica_patch_gives_the_claim_back_and_a_lost_reply_keeps_it() {
    let cluster = || {
        let mut pods = pods_of("ingester-zone-a", 3);
        pods.extend(pods_of("ingester-zone-b", 5));
        let follower = annotate(
            annotate(zone("ingester-zone-b", 5), keys::ROLLOUT_DOWNSCALE_LEADER, "ingester-zone-a"),
            keys::MIN_TIME_BETWEEN_ZONES_DOWNSCALE,
            "1h",
        );
        FakeCluster::new(vec![zone("ingester-zone-a", 3), follower], pods)
    };
    let mut h = Harness::new(cluster()).await;
    h.cluster.fail_next_replica_patch(ApiError::Conflict("statefulsets ingester-zone-b: modified".into()));
    let calls = h.reconcile().await;
    assert_eq!(Harness::replica_patches(&calls), [("ingester-zone-b".to_string(), 3)]);
    assert!(h.record().last_downscaled.is_empty(), "the claim was undone: {:?}", h.record());

    let mut h = Harness::new(cluster()).await;
    h.cluster.fail_next_replica_patch(ApiError::Unavailable("connection reset".into()));
    h.reconcile().await;
    assert!(h.record().last_downscaled.contains_key("ingester-zone-b"), "the patch may have happened: keep it");
}

#[tokio::test]
async fn a_downscale_recorded_by_another_actor_holds_the_follower() {
    let mut pods = pods_of("ingester-zone-a", 3);
    pods.extend(pods_of("ingester-zone-b", 5));
    pods.extend(pods_of("ingester-zone-c", 3));
    let follower = annotate(
        annotate(zone("ingester-zone-b", 5), keys::ROLLOUT_DOWNSCALE_LEADER, "ingester-zone-a"),
        keys::MIN_TIME_BETWEEN_ZONES_DOWNSCALE,
        "1h",
    );
    let cluster = FakeCluster::new(vec![zone("ingester-zone-a", 3), follower, zone("ingester-zone-c", 3)], pods);
    // The prepare-downscale webhook recorded a downscale of zone c a minute ago.
    let mut record = DownscaleRecord::default();
    record.record_downscale("ingester-zone-c", jiff::Timestamp::now() - jiff::SignedDuration::from_mins(1));
    cluster.put_config_map(ConfigMap {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(RECORD.into()),
            ..Default::default()
        },
        data: Some(record.to_config_map_data()),
        ..Default::default()
    });
    let mut h = Harness::new(cluster).await;
    let calls = h.reconcile().await;
    assert!(Harness::replica_patches(&calls).is_empty(), "{calls:?}");
}

#[tokio::test]
async fn a_missing_leader_is_a_scaling_error_of_that_statefulset_and_the_rollout_goes_on() {
    let mut pods = pods_of("ingester-zone-a", 3);
    pods.push(pod("ingester-zone-b", 0, "rev-0", true, 0));
    pods.extend((1..3).map(|i| pod("ingester-zone-b", i, REV, true, 0)));
    let mut b = sts(GROUP, "ingester-zone-b", 3, "rev-0", REV);
    b = annotate(b, keys::ROLLOUT_DOWNSCALE_LEADER, "ingester-zone-gone");
    let mut h = Harness::new(FakeCluster::new(vec![zone("ingester-zone-a", 3), b], pods)).await;
    let calls = h.reconcile().await;
    assert!(matches!(&calls[..], [Call::DeletePod { name, .. }] if name == "ingester-zone-b-0"), "{calls:?}");
    let text = h.metrics.encode();
    assert!(
        text.contains(
            r#"rollout_operator_scaling_errors_total{rollout_group="ingester",statefulset="ingester-zone-b"} 1"#
        ),
        "{text}"
    );
}

// ----- mirror -----

fn mirror_cluster(replicas: i32, delayed: bool, spec: Option<i64>) -> FakeCluster {
    let cluster = FakeCluster::new(
        vec![mirrored("ingester-zone-b", replicas, delayed)],
        pods_of("ingester-zone-b", replicas as u32),
    );
    cluster.add_api_resource(replica_template());
    cluster.put_scale_target("replicatemplates", "rt", spec, i64::from(replicas));
    cluster
}

#[tokio::test]
async fn mirror_upscale_patches_and_writes_status_back() {
    let mut h = Harness::new(mirror_cluster(3, false, Some(5))).await;
    let calls = h.reconcile().await;
    assert_eq!(Harness::replica_patches(&calls), [("ingester-zone-b".to_string(), 5)]);
    assert_eq!(h.cluster.scale_target("replicatemplates", "rt"), Some((Some(5), 5)), "status.replicas written back");
    assert!(calls.iter().any(|c| matches!(c, Call::PatchResourceStatus { patch, .. }
        if *patch == serde_json::json!({"status": {"replicas": 5}}))));
}

#[tokio::test]
async fn mirror_without_spec_replicas_scales_nothing() {
    let mut h = Harness::new(mirror_cluster(3, false, None)).await;
    let calls = h.reconcile().await;
    assert!(Harness::replica_patches(&calls).is_empty(), "{calls:?}");
    assert_eq!(h.cluster.statefulset("ingester-zone-b").unwrap().spec.unwrap().replicas, Some(3));
}

#[tokio::test]
async fn unresolvable_reference_is_a_scaling_error() {
    let cluster = mirror_cluster(3, false, Some(5));
    let mut h = Harness::new(cluster).await;
    // Another StatefulSet, first in name order, mirrors a kind nobody serves.
    let mut other = mirrored("ingester-zone-a", 2, false);
    other = annotate(other, keys::MIRROR_REPLICAS_FROM_RESOURCE_KIND, "Widget");
    h.cluster.put_statefulset(other);
    for p in pods_of("ingester-zone-a", 2) {
        h.cluster.put_pod(p);
    }
    let calls = h.reconcile().await;
    assert_eq!(Harness::replica_patches(&calls), [("ingester-zone-b".to_string(), 5)], "zone b still scales");
    assert!(h.metrics.encode().contains(r#"statefulset="ingester-zone-a"} 1"#));
}

// ----- delayed downscale over HTTP -----

#[tokio::test]
async fn delayed_downscale_removes_the_prepared_tail_after_cancelling_the_rest() {
    let mut h = Harness::new(mirror_cluster(5, true, Some(3))).await;
    h.pods.set("ingester-zone-b-3", Behaviour::PreparedMinutesAgo(70));
    h.pods.set("ingester-zone-b-4", Behaviour::PreparedMinutesAgo(70));
    let calls = h.reconcile().await;
    assert_eq!(Harness::replica_patches(&calls), [("ingester-zone-b".to_string(), 3)]);
    assert_eq!(
        h.pods.take_seen(),
        seen(&[
            ("DELETE", "ingester-zone-b-0"),
            ("DELETE", "ingester-zone-b-1"),
            ("DELETE", "ingester-zone-b-2"),
            ("POST", "ingester-zone-b-3"),
            ("POST", "ingester-zone-b-4"),
        ])
    );
    let urls = h.urls.lock().unwrap().clone();
    assert!(
        urls.contains(
            &"http://ingester-zone-b-3.ingester-zone-b.ns.svc.cluster.local.:8080/prepare-delayed-downscale"
                .to_string()
        ),
        "{urls:?}"
    );
}

#[tokio::test]
async fn delayed_downscale_waits_for_the_tail() {
    let mut h = Harness::new(mirror_cluster(5, true, Some(3))).await;
    h.pods.set("ingester-zone-b-3", Behaviour::PreparedMinutesAgo(70));
    h.pods.set("ingester-zone-b-4", Behaviour::PreparedMinutesAgo(30));
    let calls = h.reconcile().await;
    assert!(Harness::replica_patches(&calls).is_empty(), "{calls:?}");
}

#[tokio::test]
async fn failing_pods_stop_the_delayed_downscale() {
    for bad in [Behaviour::Status500, Behaviour::NotJson, Behaviour::NoTimestamp, Behaviour::Slow] {
        let mut h = Harness::new(mirror_cluster(5, true, Some(3))).await;
        h.pods.set("ingester-zone-b-3", Behaviour::PreparedMinutesAgo(70));
        h.pods.set("ingester-zone-b-4", bad);
        let calls = h.reconcile().await;
        assert!(Harness::replica_patches(&calls).is_empty(), "{bad:?}: {calls:?}");
        assert!(
            h.metrics.encode().contains(
                r#"rollout_operator_scaling_errors_total{rollout_group="ingester",statefulset="ingester-zone-b"} 1"#
            ),
            "{bad:?}"
        );
    }
}

#[tokio::test]
async fn steady_mirror_cancels_on_every_pod_and_a_locked_pod_is_fine() {
    let mut h = Harness::new(mirror_cluster(3, true, Some(3))).await;
    h.pods.set("ingester-zone-b-1", Behaviour::Locked);
    let calls = h.reconcile().await;
    assert!(Harness::replica_patches(&calls).is_empty());
    assert_eq!(
        h.pods.take_seen(),
        seen(&[("DELETE", "ingester-zone-b-0"), ("DELETE", "ingester-zone-b-1"), ("DELETE", "ingester-zone-b-2")])
    );
    assert!(!h.metrics.encode().contains("rollout_operator_scaling_errors_total{"), "a 409 on cancel is not an error");
    let text = h.metrics.encode();
    assert!(text.contains(r#"method="DELETE",status_code="409"} 1"#), "{text}");
}

#[tokio::test]
async fn upscale_cancels_delayed_downscale_on_existing_pods_first() {
    let mut h = Harness::new(mirror_cluster(2, true, Some(4))).await;
    let calls = h.reconcile().await;
    assert_eq!(Harness::replica_patches(&calls), [("ingester-zone-b".to_string(), 4)]);
    assert_eq!(h.pods.take_seen(), seen(&[("DELETE", "ingester-zone-b-0"), ("DELETE", "ingester-zone-b-1")]));
}

#[tokio::test]
async fn a_statefulset_without_service_name_gets_an_error_not_a_malformed_host() {
    let cluster = mirror_cluster(5, true, Some(3));
    let mut s = cluster.statefulset("ingester-zone-b").unwrap();
    s.spec.as_mut().unwrap().service_name = None;
    cluster.put_statefulset(s);
    let mut h = Harness::new(cluster).await;
    let calls = h.reconcile().await;
    assert!(Harness::replica_patches(&calls).is_empty());
    assert!(h.urls.lock().unwrap().is_empty(), "no pod was called");
    assert!(h.metrics.encode().contains(r#"statefulset="ingester-zone-b"} 1"#));
}

/// Deployments that do not grant `patch` on StatefulSets (Loki's Helm chart) never stall a rollout on a due replica
/// change: after one refused write the change is reported as a scaling error (and the feature as disabled) and the
/// rollout goes on.
#[tokio::test]
async fn a_forbidden_replica_change_is_reported_and_the_rollout_goes_on() {
    let mut pods = pods_of("ingester-zone-a", 5);
    pods.extend((0..3).map(|i| pod("ingester-zone-b", i, "rev-0", true, 0)));
    let follower =
        annotate(sts(GROUP, "ingester-zone-b", 3, "rev-0", REV), keys::ROLLOUT_DOWNSCALE_LEADER, "ingester-zone-a");
    let mut h = Harness::new(FakeCluster::new(vec![zone("ingester-zone-a", 5), follower], pods)).await;
    h.cluster.fail_next_replica_patch(ApiError::Forbidden("statefulsets.apps is forbidden".into()));
    let calls = h.reconcile().await;
    assert_eq!(Harness::replica_patches(&calls), [("ingester-zone-b".to_string(), 5)], "tried once");
    let calls = h.reconcile().await;
    assert!(Harness::replica_patches(&calls).is_empty(), "not tried again meanwhile: {calls:?}");
    assert!(
        calls.iter().any(|c| matches!(c, Call::DeletePod { name, .. } if name.starts_with("ingester-zone-b-"))),
        "the rollout goes on: {calls:?}"
    );
    let text = h.metrics.encode();
    assert!(
        text.contains(
            "rollout_operator_scaling_errors_total{rollout_group=\"ingester\",statefulset=\"ingester-zone-b\"}"
        ),
        "{text}"
    );
    assert!(text.contains("feature=\"scaling\""), "{text}");
}

/// An admission webhook's denial of the controller's replica patch also comes as 403 (without RBAC's
/// reason); it is not a missing permission and does not switch scaling off.
#[tokio::test]
async fn a_webhook_denial_of_a_replica_change_does_not_disable_scaling() {
    let mut pods = pods_of("ingester-zone-a", 5);
    pods.extend(pods_of("ingester-zone-b", 3));
    let follower = annotate(zone("ingester-zone-b", 3), keys::ROLLOUT_DOWNSCALE_LEADER, "ingester-zone-a");
    let mut h = Harness::new(FakeCluster::new(vec![zone("ingester-zone-a", 5), follower], pods)).await;
    let denied = "admission webhook \"no-downscale.grafana.com\" denied the request: not now";
    h.cluster.fail_next_replica_patch(ApiError::Rejected { code: 403, message: denied.into() });
    h.reconcile().await;
    let calls = h.reconcile().await;
    assert_eq!(Harness::replica_patches(&calls), [("ingester-zone-b".to_string(), 5)], "tried again: {calls:?}");
    assert!(!h.metrics.encode().contains("feature=\"scaling\""));
}

/// With the zone tracker forbidden, a follower that must be scaled down (its downscale cannot be
/// claimed) is reported instead of blocking its group: the rollout goes on.
#[tokio::test]
async fn with_the_zone_tracker_forbidden_a_follower_downscale_is_reported_and_the_rollout_goes_on() {
    let mut pods = pods_of("ingester-zone-a", 3);
    pods.extend((0..5).map(|i| pod("ingester-zone-b", i, "rev-0", true, 0)));
    let follower = annotate(
        annotate(sts(GROUP, "ingester-zone-b", 5, "rev-0", REV), keys::ROLLOUT_DOWNSCALE_LEADER, "ingester-zone-a"),
        keys::MIN_TIME_BETWEEN_ZONES_DOWNSCALE,
        "1h",
    );
    let cluster = FakeCluster::new(vec![zone("ingester-zone-a", 3), follower], pods);
    cluster.fail_config_map_reads(Some(ApiError::Forbidden("configmaps is forbidden".into())));
    let mut h = Harness::new(cluster).await;
    let calls = h.reconcile().await;
    assert!(Harness::replica_patches(&calls).is_empty(), "{calls:?}");
    assert!(
        calls.iter().any(|c| matches!(c, Call::DeletePod { name, .. } if name.starts_with("ingester-zone-b-"))),
        "the rollout goes on: {calls:?}"
    );
    assert!(h.metrics.encode().contains("statefulset=\"ingester-zone-b\""), "reported as a scaling error");
}
