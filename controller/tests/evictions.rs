//! `/admission/pod-eviction` and `/admission/zpdb-validation` through the real router over the fake API server:
//! allowed and denied evictions with their codes and metrics, intents written and taken back, dry runs writing
//! nothing, concurrent evictions over one budget, the fallback where pods cannot be patched; and the tasks that
//! feed the webhook: the budget watch and the `grafana.com/ready-time` tracker.

mod support;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use rollout_core::keys;
use rollout_core::zpdb::{Budgets, KnownBudgets, Serialisation};
use rollout_operator::admission::router::{WebhookSettings, Webhooks, router_with_zpdb};
use rollout_operator::cluster::ApiError;
use rollout_operator::ops::feature_gate::Gate;
use rollout_operator::ops::metrics::ZpdbMetrics;
use rollout_operator::pods::client::{PodCallError, PodHttpClient, PodRequest, PodResponse};
use rollout_operator::zpdb::ready_time::Tracker;
use rollout_operator::zpdb::{Zpdb, budgets};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use support::{Call, FakeCluster, pod, sts};
use tower::ServiceExt;

const NOW: &str = "2026-01-01T12:00:00Z";
const ZONES: [&str; 3] = ["ingester-zone-a", "ingester-zone-b", "ingester-zone-c"];

/// The webhooks never call pods for evictions.
#[derive(Clone, Default)]
struct NoPods;

impl PodHttpClient for NoPods {
    async fn call(&self, request: PodRequest) -> Result<PodResponse, PodCallError> {
        panic!("no pod call expected, got {request:?}")
    }
}

fn labelled(mut p: Pod) -> Pod {
    p.metadata.labels.get_or_insert_default().insert(keys::ROLLOUT_GROUP.into(), "ingester".into());
    p
}

/// Three zones of `replicas` ready pods each, labelled for the budget.
fn cluster(replicas: u32) -> FakeCluster {
    let statefulsets = ZONES.iter().map(|z| sts("ingester", z, replicas as i32, "r1", "r1")).collect();
    let pods = ZONES.iter().flat_map(|z| (0..replicas).map(move |i| labelled(pod(z, i, "r1", true, 1)))).collect();
    FakeCluster::new(statefulsets, pods)
}

fn budget(name: &str, generation: i64, spec: Value) -> Value {
    json!({"apiVersion": "rollout-operator.grafana.com/v1", "kind": "ZoneAwarePodDisruptionBudget",
           "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"), "generation": generation},
           "spec": spec})
}

fn zone_budget(max: i64) -> Value {
    budget(
        "ingester-rollout",
        1,
        json!({"maxUnavailable": max, "selector": {"matchLabels": {"rollout-group": "ingester"}}}),
    )
}

fn zpdb_with(budget: Value) -> Zpdb {
    let (budgets, invalid) = Budgets::from_objects([&budget]);
    assert!(invalid.is_empty(), "{invalid:?}");
    Zpdb::with_budgets(budgets)
}

fn app(cluster: &FakeCluster, zpdb: &Zpdb) -> axum::Router {
    let now: Timestamp = NOW.parse().unwrap();
    router_with_zpdb(
        Webhooks {
            api: cluster.clone(),
            pods: NoPods,
            settings: WebhookSettings::new("ns", "cluster.local.", None, Duration::from_secs(10)),
            clock: Arc::new(move || now),
        },
        zpdb.clone(),
    )
}

fn eviction(pod: &str) -> Value {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": format!("uid-{pod}"), "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "subResource": "eviction",
        "name": pod, "namespace": "ns", "operation": "CREATE", "userInfo": {"username": "kubectl"},
        "object": {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod}}}})
}

async fn post(app: &axum::Router, path: &str, body: Vec<u8>) -> (StatusCode, Vec<u8>) {
    let request = Request::post(path).header("content-type", "application/json").body(Body::from(body)).unwrap();
    let response = app.clone().oneshot(request).await.expect("infallible");
    let status = response.status();
    (status, response.into_body().collect().await.unwrap().to_bytes().to_vec())
}

async fn answer(app: &axum::Router, path: &str, review: &Value) -> Value {
    let (status, body) = post(app, path, serde_json::to_vec(review).unwrap()).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    let out: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(out["response"]["uid"], review["request"]["uid"]);
    out["response"].clone()
}

async fn evict(app: &axum::Router, pod: &str) -> Value {
    answer(app, "/admission/pod-eviction", &eviction(pod)).await
}

/// The pod's eviction intent (the latest, if several decisions left theirs).
fn intent(cluster: &FakeCluster, pod: &str) -> Option<String> {
    let annotations = cluster.pod(pod)?.metadata.annotations?;
    annotations.into_iter().filter(|(key, _)| keys::is_eviction_intent(key)).map(|(_, value)| value).max()
}

/// The eviction intents kept on `statefulset`: their values (`<expiry> <pod> <uid>`).
fn statefulset_intents(cluster: &FakeCluster, statefulset: &str) -> Vec<String> {
    let annotations = cluster.statefulset(statefulset).and_then(|s| s.metadata.annotations).unwrap_or_default();
    annotations.into_iter().filter(|(key, _)| keys::is_eviction_intent(key)).map(|(_, value)| value).collect()
}

fn forbidden(what: &str) -> Option<ApiError> {
    Some(ApiError::Forbidden(format!("{what} is forbidden")))
}

fn pod_patches(cluster: &FakeCluster) -> Vec<(String, Option<String>)> {
    cluster
        .calls()
        .into_iter()
        .filter_map(|c| match c {
            Call::PatchPodAnnotations { name, changes, .. } => {
                let intent = changes.into_iter().find(|(key, _)| keys::is_eviction_intent(key));
                intent.map(|(_, value)| (name, value))
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn an_allowed_eviction_leaves_its_intent_and_the_next_one_is_denied_with_429() {
    let cluster = cluster(3);
    let zpdb = zpdb_with(zone_budget(1));
    let app = app(&cluster, &zpdb);
    let response = evict(&app, "ingester-zone-a-0").await;
    assert_eq!(response["allowed"], true, "{response}");
    assert_eq!(response["status"]["message"], "zpdb met across 3 zones");
    // The rest of the request (9 s) and the commit margin (10 s) after NOW.
    assert_eq!(intent(&cluster, "ingester-zone-a-0").as_deref(), Some("2026-01-01T12:00:19Z"));
    let response = evict(&app, "ingester-zone-b-0").await;
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(response["status"]["code"], 429);
    assert_eq!(response["status"]["message"], "1 pod not ready in ingester-zone-a");
    assert_eq!(pod_patches(&cluster), [("ingester-zone-a-0".to_string(), Some("2026-01-01T12:00:19Z".to_string()))]);
    assert_eq!(zpdb.metrics.evictions("allowed", 200), 1);
    assert_eq!(zpdb.metrics.evictions("denied", 429), 1);
}

/// With Events on, a denied eviction is told on the pod with the webhook's message; an allowed one and a denied dry
/// run (by the Eviction's `deleteOptions`) tell nothing.
#[tokio::test]
async fn a_denied_eviction_is_told_on_the_pod_but_a_dry_run_is_not() {
    use rollout_operator::ops::events::{EventRecorder, EventType};
    use rollout_operator::ops::metrics::Metrics;
    let cluster = cluster(3);
    let zpdb = zpdb_with(zone_budget(1));
    let (events, mut queue) = EventRecorder::new(16, Arc::new(Metrics::new()));
    let now: Timestamp = NOW.parse().unwrap();
    let app = router_with_zpdb(
        Webhooks {
            api: cluster.clone(),
            pods: NoPods,
            settings: WebhookSettings::new("ns", "cluster.local.", None, Duration::from_secs(10)).with_events(events),
            clock: Arc::new(move || now),
        },
        zpdb.clone(),
    );
    let mut told = || std::iter::from_fn(|| queue.try_recv()).collect::<Vec<_>>();
    assert_eq!(evict(&app, "ingester-zone-a-0").await["allowed"], true);
    assert!(told().is_empty(), "an allowed eviction is no news");
    let mut dry = eviction("ingester-zone-b-0");
    dry["request"]["object"]["deleteOptions"] = json!({"dryRun": ["All"]});
    assert_eq!(answer(&app, "/admission/pod-eviction", &dry).await["allowed"], false);
    assert!(told().is_empty(), "a dry run tells nothing");
    let response = evict(&app, "ingester-zone-b-0").await;
    assert_eq!(response["allowed"], false, "{response}");
    let events = told();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!((events[0].reason, events[0].type_), ("EvictionDenied", EventType::Warning));
    assert_eq!((events[0].regarding.kind, events[0].regarding.name.as_str()), ("Pod", "ingester-zone-b-0"));
    assert_eq!(events[0].note, "eviction by kubectl denied: 1 pod not ready in ingester-zone-a");
}

#[tokio::test]
async fn a_dry_run_eviction_writes_nothing() {
    let cluster = cluster(2);
    let zpdb = zpdb_with(zone_budget(1));
    let app = app(&cluster, &zpdb);
    let mut by_request = eviction("ingester-zone-a-0");
    by_request["request"]["dryRun"] = json!(true);
    let mut by_options = eviction("ingester-zone-a-1");
    by_options["request"]["object"]["deleteOptions"] = json!({"dryRun": ["All"]});
    for review in [by_request, by_options] {
        let response = answer(&app, "/admission/pod-eviction", &review).await;
        assert_eq!(response["allowed"], true, "{response}");
    }
    assert!(pod_patches(&cluster).is_empty(), "{:?}", cluster.calls());
    assert_eq!(zpdb.metrics.evictions("allowed", 200), 2);
}

#[tokio::test(start_paused = true)]
async fn two_concurrent_evictions_over_one_budget_allow_exactly_one() {
    for (first, second) in [
        ("ingester-zone-a-0", "ingester-zone-a-1"),
        ("ingester-zone-a-1", "ingester-zone-a-0"),
        ("ingester-zone-a-0", "ingester-zone-b-0"),
        ("ingester-zone-c-1", "ingester-zone-a-1"),
    ] {
        let cluster = cluster(2);
        let zpdb = zpdb_with(zone_budget(1));
        let app = app(&cluster, &zpdb);
        let (a, b) = tokio::join!(evict(&app, first), evict(&app, second));
        let allowed: Vec<&str> =
            [(first, &a), (second, &b)].iter().filter(|(_, r)| r["allowed"] == true).map(|(p, _)| *p).collect();
        assert_eq!(allowed.len(), 1, "{first} {a} / {second} {b}");
        // The winner's intent stays; the loser's was taken back (or never written).
        for pod in [first, second] {
            assert_eq!(intent(&cluster, pod).is_some(), allowed.contains(&pod), "{pod}: {:?}", cluster.calls());
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_burst_of_evictions_never_exceeds_the_budget() {
    let cluster = cluster(6);
    let zpdb = zpdb_with(zone_budget(2));
    let app = app(&cluster, &zpdb);
    let pods: Vec<String> =
        (0..6).map(|i| format!("ingester-zone-a-{i}")).chain(["ingester-zone-b-0".into()]).collect();
    let answers = futures::future::join_all(pods.iter().map(|p| evict(&app, p))).await;
    let allowed: Vec<&String> =
        pods.iter().zip(&answers).filter(|(_, r)| r["allowed"] == true).map(|(p, _)| p).collect();
    assert!(!allowed.is_empty() && allowed.len() <= 2, "{allowed:?}");
    assert!(allowed.iter().all(|p| p.starts_with("ingester-zone-a")), "{allowed:?}");
    let intents: Vec<&String> = pods.iter().filter(|p| intent(&cluster, p).is_some()).collect();
    assert_eq!(intents, allowed, "only allowed evictions leave intents");
    for (pod, response) in pods.iter().zip(&answers) {
        if response["allowed"] == false {
            assert_eq!(response["status"]["code"], 429, "{pod}: {response}");
        }
    }
}

/// A burst in one process: each decision's first judgement counts the pods of the others under way there, so only
/// the one that can be allowed writes an intent (before, every decision that read the pods before the first intent
/// wrote one and took it back), and a second eviction of a pod whose eviction is under way is told to retry.
#[tokio::test(start_paused = true)]
async fn a_burst_in_one_process_writes_only_the_intent_it_allows() {
    let cluster = cluster(3);
    let zpdb = zpdb_with(zone_budget(1));
    let app = app(&cluster, &zpdb);
    // Each pod twice: whichever decision claims first is allowed; the rest are denied before writing anything.
    let pods = ["ingester-zone-a-0", "ingester-zone-b-0", "ingester-zone-c-0"];
    let asked: Vec<&str> = pods.iter().chain(&pods).copied().collect();
    let answers = futures::future::join_all(asked.iter().map(|p| evict(&app, p))).await;
    let allowed: Vec<&str> =
        asked.iter().zip(&answers).filter(|(_, r)| r["allowed"] == true).map(|(p, _)| *p).collect();
    let [winner] = allowed[..] else { panic!("one eviction allowed, got {allowed:?}") };
    let zone = winner.trim_end_matches("-0");
    for (pod, response) in asked.iter().zip(&answers).filter(|(_, r)| r["allowed"] == false) {
        let message = response["status"]["message"].as_str().unwrap_or_default();
        let expected = if *pod == winner {
            format!("another eviction of pod {winner} is being decided; retry")
        } else {
            format!("1 pod not ready in {zone}")
        };
        assert_eq!((message, &response["status"]["code"]), (expected.as_str(), &json!(429)), "{pod}");
    }
    assert_eq!(pod_patches(&cluster), [(winner.to_string(), Some("2026-01-01T12:00:19Z".to_string()))]);
    assert_eq!(zpdb.under_way.count("ingester-rollout"), 0, "every claim ends with its answer");
}

/// Older Helm charts grant no `patch` on pods but do on StatefulSets: the intent goes on the pod's StatefulSet, and
/// another replica (a process that remembers nothing) sees it.
#[tokio::test]
async fn without_patch_on_pods_intents_go_on_the_statefulset_and_another_replica_sees_them() {
    let cluster = cluster(2);
    cluster.fail_pod_patches(forbidden("pods"));
    let zpdb = Zpdb { metrics: ZpdbMetrics::default(), ..zpdb_with(zone_budget(1)) };
    let app = app(&cluster, &zpdb);
    let response = evict(&app, "ingester-zone-a-0").await;
    assert_eq!(response["allowed"], true, "{response}");
    assert_eq!(zpdb.serialisation_mode(), Serialisation::StatefulSetIntents);
    assert!(zpdb.metrics.is_feature_disabled("zpdb-eviction-intents", "patch pods"));
    assert!(!zpdb.metrics.is_feature_disabled("zpdb-eviction-intents-on-statefulsets", "patch statefulsets"));
    let kept = statefulset_intents(&cluster, "ingester-zone-a");
    assert!(matches!(kept.as_slice(), [v] if v.ends_with(" ingester-zone-a-0 uid-ingester-zone-a-0-1")), "{kept:?}");
    // Another replica, which remembers nothing: the intent on the StatefulSet holds the budget.
    let other = zpdb_with(zone_budget(1));
    let response = evict(&self::app(&cluster, &other), "ingester-zone-a-1").await;
    assert_eq!(
        (response["allowed"].clone(), response["status"]["message"].clone()),
        (json!(false), json!("1 pod not ready in ingester-zone-a"))
    );
    assert_eq!(statefulset_intents(&cluster, "ingester-zone-a").len(), 1, "the denied decision took its intent back");
    // Two replicas deciding at once over the same budget: one goes through.
    let cluster = self::cluster(2);
    cluster.fail_pod_patches(forbidden("pods"));
    let (one, two) = (zpdb_with(zone_budget(1)), zpdb_with(zone_budget(1)));
    let (app_one, app_two) = (self::app(&cluster, &one), self::app(&cluster, &two));
    let (a, b) = tokio::join!(evict(&app_one, "ingester-zone-a-0"), evict(&app_two, "ingester-zone-b-1"));
    assert_eq!([&a, &b].iter().filter(|r| r["allowed"] == true).count(), 1, "{a} / {b}");
}

/// An intent on a StatefulSet outlives the pod's eviction: expired ones are removed with the next intent written
/// there, so they do not pile up.
#[tokio::test]
async fn expired_intents_on_a_statefulset_go_with_the_next_one_written_there() {
    let cluster = cluster(2);
    cluster.fail_pod_patches(forbidden("pods"));
    let mut sts = cluster.statefulset("ingester-zone-a").unwrap();
    let annotations = sts.metadata.annotations.get_or_insert_with(Default::default);
    annotations.insert(keys::eviction_intent_key("old"), "2020-01-01T00:00:00Z ingester-zone-a-1 gone".into());
    annotations.insert(keys::eviction_intent_key("garbled"), "not an intent".into());
    cluster.put_statefulset(sts);
    let zpdb = zpdb_with(zone_budget(1));
    let response = evict(&app(&cluster, &zpdb), "ingester-zone-a-0").await;
    assert_eq!(response["allowed"], true, "an expired intent holds nothing: {response}");
    let kept = statefulset_intents(&cluster, "ingester-zone-a");
    assert!(matches!(kept.as_slice(), [v] if v.contains("ingester-zone-a-0")), "{kept:?}");
}

#[tokio::test]
async fn without_patch_on_pods_and_statefulsets_evictions_are_serialised_in_process_and_it_says_so() {
    let cluster = cluster(2);
    cluster.fail_pod_patches(forbidden("pods"));
    cluster.fail_statefulset_annotation_patches(forbidden("statefulsets"));
    let zpdb = Zpdb { metrics: ZpdbMetrics::default(), ..zpdb_with(zone_budget(1)) };
    let app = app(&cluster, &zpdb);
    let response = evict(&app, "ingester-zone-a-0").await;
    assert_eq!(response["allowed"], true, "{response}");
    assert_eq!(zpdb.serialisation_mode(), Serialisation::InProcess);
    assert!(zpdb.metrics.is_feature_disabled("zpdb-eviction-intents", "patch pods"));
    assert!(zpdb.metrics.is_feature_disabled("zpdb-eviction-intents-on-statefulsets", "patch statefulsets"));
    // This process remembers it.
    let response = evict(&app, "ingester-zone-a-1").await;
    assert_eq!(
        (response["allowed"].clone(), response["status"]["message"].clone()),
        (json!(false), json!("1 pod not ready in ingester-zone-a"))
    );
    assert_eq!(pod_patches(&cluster).len(), 1, "only the first tried: {:?}", cluster.calls());
    assert!(intent(&cluster, "ingester-zone-a-0").is_none());
    // Concurrent decisions of one budget, under the lock: one goes through.
    let cluster = self::cluster(2);
    cluster.fail_pod_patches(forbidden("pods"));
    cluster.fail_statefulset_annotation_patches(forbidden("statefulsets"));
    let zpdb = zpdb_with(zone_budget(1));
    zpdb.metrics.gates.refused(Gate::PodIntents, &"pods is forbidden");
    assert!(zpdb.metrics.gates.refused(Gate::StatefulSetIntents, &"statefulsets is forbidden"));
    let app = self::app(&cluster, &zpdb);
    let (a, b) = tokio::join!(evict(&app, "ingester-zone-a-0"), evict(&app, "ingester-zone-b-1"));
    assert_eq!([&a, &b].iter().filter(|r| r["allowed"] == true).count(), 1, "{a} / {b}");
    assert!(pod_patches(&cluster).is_empty(), "in-process mode writes nothing");
    assert!(statefulset_intents(&cluster, "ingester-zone-a").is_empty());
}

#[tokio::test]
async fn early_answers_carry_the_reference_messages_codes_and_outcomes() {
    let cluster = cluster(2);
    cluster.put_pod(pod("web", 0, "r1", true, 1));
    let zpdb = zpdb_with(zone_budget(1));
    let app = app(&cluster, &zpdb);
    let response = evict(&app, "nope").await;
    assert_eq!((response["allowed"].clone(), response["status"]["code"].clone()), (json!(false), json!(400)));
    assert_eq!(response["status"]["message"], "pods \"nope\" not found");
    let response = evict(&app, "web-0").await;
    assert_eq!(response["allowed"], true, "not in scope: {response}");
    let mut update = eviction("ingester-zone-a-0");
    update["request"]["operation"] = json!("UPDATE");
    let response = answer(&app, "/admission/pod-eviction", &update).await;
    assert_eq!(response["status"], json!({"code": 400, "message": "request operation is not create, got: UPDATE"}));
    let mut status = eviction("ingester-zone-a-0");
    status["request"]["subResource"] = json!("status");
    let response = answer(&app, "/admission/pod-eviction", &status).await;
    assert_eq!(response["status"]["message"], "request SubResource is not eviction, got: status");
    let (code, _) = post(&app, "/admission/pod-eviction", b"{}".to_vec()).await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "not an AdmissionReview");
    for (reason, status, count) in
        [("pod-not-found", 400, 1), ("pod-not-in-scope", 200, 1), ("invalid-request", 400, 2), ("allowed", 200, 0)]
    {
        assert_eq!(zpdb.metrics.evictions(reason, status), count, "{reason}/{status}");
    }
    // Budgets not listed yet: 429, the client retries.
    let loading = Zpdb::new(ZpdbMetrics::default());
    let response = evict(&self::app(&cluster, &loading), "ingester-zone-a-0").await;
    assert_eq!(response["status"]["code"], 429, "{response}");
    assert_eq!(loading.metrics.evictions("cfg-not-loaded", 429), 1);
    // Reads failing: 400 for the pod, as the reference.
    cluster.fail_reads(Some(ApiError::Unavailable("connection refused".into())));
    let response = evict(&app, "ingester-zone-a-0").await;
    assert_eq!(response["status"]["code"], 400, "{response}");
    assert!(response["status"]["message"].as_str().unwrap().contains("connection refused"), "{response}");
}

#[tokio::test]
async fn the_validating_webhook_answers_with_the_first_failure_and_code_400() {
    let cluster = cluster(1);
    let app = app(&cluster, &Zpdb::default());
    let review = |version: &str, object: Value| {
        json!({"apiVersion": version, "kind": "AdmissionReview", "request": {
            "uid": "z1",
            "kind": {"group": "rollout-operator.grafana.com", "version": "v1", "kind": "ZoneAwarePodDisruptionBudget"},
            "resource": {
                "group": "rollout-operator.grafana.com", "version": "v1", "resource": "zoneawarepoddisruptionbudgets"
            },
            "name": "ingester-rollout", "namespace": "ns", "operation": "CREATE", "object": object}})
    };
    let response = answer(&app, "/admission/zpdb-validation", &review("admission.k8s.io/v1", zone_budget(1))).await;
    assert_eq!(response["allowed"], true, "{response}");
    let invalid =
        budget("x", 1, json!({"maxUnavailable": 1, "maxUnavailablePercentage": 5, "selector": {"matchLabels": {}}}));
    let response = answer(&app, "/admission/zpdb-validation", &review("admission.k8s.io/v1beta1", invalid)).await;
    assert_eq!(
        response["status"],
        json!({
            "code": 400,
            "message": "invalid value: only one of maxUnavailable or maxUnavailablePercentage may be set"
        })
    );
    let response = answer(&app, "/admission/zpdb-validation", &review("admission.k8s.io/v1", Value::Null)).await;
    assert_eq!(response["status"]["message"], "unexpected end of JSON input");
}

/// Waits (polling) until `check` holds, or fails with what it saw last.
async fn eventually<T: std::fmt::Debug>(what: &str, mut check: impl FnMut() -> (bool, T)) {
    for _ in 0..200 {
        if check().0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("{what}: {:?}", check().1);
}

fn known(zpdb: &Zpdb) -> Option<Vec<i64>> {
    match zpdb.budgets.snapshot() {
        KnownBudgets::Known(budgets) => Some(budgets.iter().map(|b| b.max_unavailable).collect()),
        _ => None,
    }
}

#[tokio::test]
async fn the_budget_watch_keeps_the_known_budgets_by_generation_and_counts_what_it_saw() {
    let cluster = cluster(1);
    cluster.put_budget(zone_budget(1));
    let zpdb = Zpdb::new(ZpdbMetrics::default());
    assert!(matches!(zpdb.budgets.snapshot(), KnownBudgets::NotLoaded(_)));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(budgets::run(cluster.clone(), zpdb.budgets.clone(), zpdb.metrics.clone(), async {
        let _ = stopped.await;
    }));
    eventually("listed", || (known(&zpdb) == Some(vec![1]), known(&zpdb))).await;
    // A new generation replaces it; an invalid one is counted and leaves the last valid one in force.
    let selector = json!({"matchLabels": {"rollout-group": "ingester"}});
    cluster.put_budget(budget("ingester-rollout", 2, json!({"maxUnavailable": 2, "selector": selector.clone()})));
    eventually("updated", || (known(&zpdb) == Some(vec![2]), known(&zpdb))).await;
    cluster.put_budget(budget("ingester-rollout", 3, json!({"maxUnavailable": -1, "selector": selector})));
    eventually("invalid counted", || (zpdb.metrics.configurations("invalid") == 1, known(&zpdb))).await;
    assert_eq!(known(&zpdb), Some(vec![2]));
    cluster.delete_budget("ingester-rollout");
    eventually("deleted", || (known(&zpdb) == Some(vec![]), known(&zpdb))).await;
    assert_eq!(
        ["updated", "invalid", "deleted"].map(|r| zpdb.metrics.configurations(r)),
        [2, 1, 1],
        "the first list and the update; the invalid one; the delete"
    );
    let _ = stop.send(());
    task.await.unwrap();
}

#[tokio::test]
async fn a_refused_or_missing_budget_crd_is_reported_and_decided_on() {
    let zpdb = Zpdb::new(ZpdbMetrics::default());
    let metrics = zpdb.metrics.clone();
    zpdb.budgets.failed(&ApiError::Forbidden("forbidden".into()), &metrics);
    assert!(
        matches!(zpdb.budgets.snapshot(), KnownBudgets::Unreadable(why) if why.contains("grant get, list and watch"))
    );
    assert!(metrics.is_feature_disabled("zpdb", "list zoneawarepoddisruptionbudgets"));
    let cluster = cluster(1);
    let response = evict(&app(&cluster, &zpdb), "ingester-zone-a-0").await;
    assert_eq!((response["allowed"].clone(), response["status"]["code"].clone()), (json!(false), json!(500)));
    // No CRD: no budget can exist; evictions are out of scope.
    zpdb.budgets.failed(&ApiError::NotFound("the server could not find the requested resource".into()), &metrics);
    assert_eq!(known(&zpdb), Some(vec![]));
    let response = evict(&app(&cluster, &zpdb), "ingester-zone-a-0").await;
    assert_eq!(response["allowed"], true, "{response}");
    // A transient failure before the first list keeps them "not loaded".
    let loading = Zpdb::new(ZpdbMetrics::default());
    loading.budgets.failed(&ApiError::Unavailable("timeout".into()), &metrics);
    assert!(matches!(loading.budgets.snapshot(), KnownBudgets::NotLoaded(why) if why.contains("timeout")));
}

fn ready_time(cluster: &FakeCluster, pod: &str) -> Option<String> {
    cluster.pod(pod)?.metadata.annotations?.get(keys::READY_TIME).cloned()
}

/// Runs the ready-time tracker over `cluster` and `zpdb`'s budgets, at the fixed time `NOW`, until the sender fires.
fn start_tracker(
    cluster: &FakeCluster,
    zpdb: &Zpdb,
) -> (tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let now: Timestamp = NOW.parse().unwrap();
    let tracker = Tracker::new(
        cluster.clone(),
        zpdb.budgets.clone(),
        Duration::from_secs(5),
        Arc::new(move || now),
        zpdb.metrics.clone(),
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(tracker.run(async {
        let _ = stopped.await;
    }));
    (stop, task)
}

#[tokio::test]
async fn the_ready_time_tracker_stamps_pods_in_scope_and_removes_stamps_of_unready_ones() {
    let cluster = cluster(2);
    cluster.put_pod(pod("web", 0, "r1", true, 1));
    let zpdb = Zpdb::new(ZpdbMetrics::default());
    let (stop, task) = start_tracker(&cluster, &zpdb);
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(ready_time(&cluster, "ingester-zone-a-0"), None, "no budget known yet");
    // The budget arrives: every pod it selects is stamped, others are not.
    let watched = Zpdb { budgets: zpdb.budgets.clone(), ..Zpdb::default() };
    watched.budgets.apply(rollout_operator::cluster::WatchEvent::Init, &zpdb.metrics);
    watched.budgets.apply(rollout_operator::cluster::WatchEvent::InitApply(zone_budget(1)), &zpdb.metrics);
    watched.budgets.apply(rollout_operator::cluster::WatchEvent::InitDone, &zpdb.metrics);
    eventually("stamped", || {
        let stamped = ZONES.iter().all(|z| ready_time(&cluster, &format!("{z}-1")).as_deref() == Some(NOW));
        (stamped, cluster.calls())
    })
    .await;
    assert_eq!(ready_time(&cluster, "web-0"), None, "not in scope");
    // Not ready: the stamp goes; ready again: a new one.
    cluster.set_pod_ready("ingester-zone-b-0", false);
    eventually("removed", || (ready_time(&cluster, "ingester-zone-b-0").is_none(), cluster.calls())).await;
    let patches_before = cluster.calls().len();
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(cluster.calls().len(), patches_before, "nothing more to write");
    let _ = stop.send(());
    task.await.unwrap();
}

#[tokio::test]
async fn the_ready_time_tracker_stops_writing_when_pods_cannot_be_patched() {
    let cluster = cluster(1);
    cluster.fail_pod_patches(Some(ApiError::Forbidden("pods is forbidden".into())));
    let zpdb = zpdb_with(zone_budget(1));
    let (stop, task) = start_tracker(&cluster, &zpdb);
    eventually("disabled", || (zpdb.metrics.is_feature_disabled("zpdb-ready-time", "patch pods"), cluster.calls()))
        .await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let patches = cluster.calls().iter().filter(|c| matches!(c, Call::PatchPodAnnotations { .. })).count();
    assert_eq!(patches, 1, "one refusal, then no more attempts");
    let _ = stop.send(());
    task.await.unwrap();
}

/// Sim seed 264 of `--drains partition` in miniature: a stamp that failed (the API unavailable) used to be only
/// logged, and a Ready pod has no further event to retry on, so under a partition budget with
/// `crossZoneEvictionDelay` its partition stayed denied forever. The tracker now tries again.
#[tokio::test(start_paused = true)]
async fn the_ready_time_tracker_tries_a_failed_stamp_again() {
    let cluster = cluster(1);
    cluster.fail_pod_patches(Some(ApiError::Unavailable("etcd leader changed".into())));
    let zpdb = zpdb_with(zone_budget(1));
    let (stop, task) = start_tracker(&cluster, &zpdb);
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(ready_time(&cluster, "ingester-zone-a-0"), None, "the first stamp failed");
    // The API is back; no event comes for the pod, yet it is stamped.
    cluster.fail_pod_patches(None);
    tokio::time::sleep(rollout_operator::zpdb::ready_time::RETRY_AFTER + Duration::from_millis(20)).await;
    assert!(ZONES.iter().all(|z| ready_time(&cluster, &format!("{z}-0")).as_deref() == Some(NOW)));
    let _ = stop.send(());
    task.await.unwrap();
}

/// A decision that started before its process learnt that intents are refused (another decision's refusal came in
/// meanwhile) sends no intent of its own: it falls back to the lock without a request bound to be refused.
#[tokio::test]
async fn a_decision_sends_no_intent_once_its_process_knows_they_are_refused() {
    use rollout_core::zpdb::{EvictPod, EvictionRequest, EvictionSettings, Requester};
    let cluster = cluster(2);
    cluster.fail_pod_patches(Some(ApiError::Forbidden("pods is forbidden".into())));
    let zpdb = zpdb_with(zone_budget(1));
    let settings = EvictionSettings {
        namespace: "ns".into(),
        serialisation: Serialisation::Intents,
        intent_lifetime: Duration::from_secs(30),
    };
    let request = EvictionRequest {
        pod: "ingester-zone-a-0".into(),
        namespace: "ns".into(),
        dry_run: false,
        max_unavailable_override: None,
        requester: Requester::Webhook,
        decider: "uid-1".into(),
    };
    let now: Timestamp = NOW.parse().unwrap();
    let clock = move || now;
    let decide = |flow| {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        rollout_operator::zpdb::decide::decide(&cluster, &zpdb, flow, &clock, deadline, Duration::from_secs(5))
    };
    let flow = EvictPod::new(request.clone(), settings.clone());
    assert!(zpdb.metrics.gates.refused(Gate::PodIntents, &"pods is forbidden"), "the other decision's refusal");
    let verdict = decide(flow).await;
    assert!(verdict.allowed(), "{verdict:?}");
    assert!(pod_patches(&cluster).is_empty(), "no intent sent on the pod: {:?}", cluster.calls());
    assert_eq!(statefulset_intents(&cluster, "ingester-zone-a").len(), 1, "on its StatefulSet instead");
    // Intents on StatefulSets refused too: nothing is sent at all.
    let flow = EvictPod::new(EvictionRequest { pod: "ingester-zone-b-0".into(), ..request }, settings);
    assert!(zpdb.metrics.gates.refused(Gate::StatefulSetIntents, &"statefulsets is forbidden"));
    cluster.take_calls();
    let verdict = decide(flow).await;
    assert!(!verdict.allowed(), "zone a's intent holds the budget: {verdict:?}");
    let writes: Vec<Call> = cluster
        .calls()
        .into_iter()
        .filter(|c| matches!(c, Call::PatchPodAnnotations { .. } | Call::MergeStatefulSetAnnotations { .. }))
        .collect();
    assert!(writes.is_empty(), "{writes:?}");
}
