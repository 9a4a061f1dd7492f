//! `/admission/rollouthealthcheck-validation` through the real router: the example's RolloutHealthCheck is admitted,
//! one with an unknown policy is refused (400) with the field named, in both AdmissionReview versions.

mod support;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use rollout_operator::admission::health_checks::HEALTH_CHECK_VALIDATION_PATH;
use rollout_operator::admission::router::{WebhookSettings, Webhooks, router};
use rollout_operator::pods::client::{PodCallError, PodHttpClient, PodRequest, PodResponse};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use support::FakeCluster;
use tower::ServiceExt;

#[derive(Clone, Default)]
struct NoPods;

impl PodHttpClient for NoPods {
    async fn call(&self, request: PodRequest) -> Result<PodResponse, PodCallError> {
        panic!("no pod call expected, got {request:?}")
    }
}

fn health_check(on_failure: &str) -> Value {
    json!({"apiVersion": "rollout-operator.grafana.com/v1", "kind": "RolloutHealthCheck",
           "metadata": {"name": "ingester-health", "namespace": "ns"},
           "spec": {"selector": {"matchLabels": {"rollout-group": "ingester"}},
                    "prometheusURL": "http://prometheus:9090",
                    "checks": [{"name": "errors", "onFailure": on_failure,
                                "query": "sum(rate(errors{${targetMatchers}}[${range}]))",
                                "successQuery": "${current} <= bool 2 * ${baseline}"}]}})
}

async fn answer(version: &str, object: Value) -> Value {
    let now: jiff::Timestamp = "2026-01-01T12:00:00Z".parse().unwrap();
    let app = router(Webhooks {
        api: FakeCluster::new(Vec::new(), Vec::new()),
        pods: NoPods,
        settings: WebhookSettings::new("ns", "cluster.local.", None, Duration::from_secs(10)),
        clock: Arc::new(move || now),
    });
    let review = json!({"apiVersion": version, "kind": "AdmissionReview", "request": {
        "uid": "h1",
        "kind": {"group": "rollout-operator.grafana.com", "version": "v1", "kind": "RolloutHealthCheck"},
        "resource": {"group": "rollout-operator.grafana.com", "version": "v1", "resource": "rollouthealthchecks"},
        "name": "ingester-health", "namespace": "ns", "operation": "CREATE", "object": object}});
    let request = Request::post(HEALTH_CHECK_VALIDATION_PATH)
        .header("content-type", "application/json")
        .body(Body::from(serde_json::to_vec(&review).unwrap()))
        .unwrap();
    let response = app.oneshot(request).await.expect("infallible");
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value = serde_json::from_slice(&response.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!(body["response"]["uid"], "h1");
    body["response"].clone()
}

#[tokio::test]
async fn a_valid_health_check_is_admitted_and_an_invalid_one_refused_naming_the_field() {
    assert_eq!(answer("admission.k8s.io/v1", health_check("Pause")).await["allowed"], true);
    for version in ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"] {
        let response = answer(version, health_check("Stop")).await;
        assert_eq!(response["allowed"], false, "{response}");
        assert_eq!(response["status"]["code"], 400);
        let message = response["status"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("invalid RolloutHealthCheck: spec.checks[0].onFailure: unknown variant `Stop`"),
            "{message}"
        );
    }
}
