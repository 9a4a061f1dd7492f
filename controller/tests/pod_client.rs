//! The pod HTTP client against real pod-like endpoints on 127.0.0.1, and `call_all`'s fan-out rules.
#![cfg(not(madsim))]

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{delete, post};
use prometheus_client::registry::Registry;
use rollout_operator::pods::client::{
    PodCallError, PodClientMetrics, PodHttpClient, PodRequest, PodResponse, call_all,
};
use rollout_operator::pods::hyper_client::HyperPodClient;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const NS: &str = "test-ns";

/// Serves `router` on an ephemeral 127.0.0.1 port until the test's runtime stops.
async fn serve(router: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, router).await.unwrap();
    });
    format!("http://{addr}")
}

fn pod_router() -> Router {
    Router::new()
        .route("/prepare", post(|| async { (StatusCode::OK, r#"{"timestamp":1700000000}"#) }))
        .route("/fail", post(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "boom") }))
        .route(
            "/slow",
            post(|| async {
                tokio::time::sleep(Duration::from_secs(30)).await;
                "late"
            }),
        )
        .route("/locked", delete(|| async { (StatusCode::CONFLICT, "partition state locked") }))
        .route(
            "/headers",
            post(|headers: HeaderMap| async move {
                let cluster: Vec<_> = headers.get_all("x-cluster").iter().map(|v| v.to_str().unwrap()).collect();
                let content_type = headers.get("content-type").map(|v| v.to_str().unwrap().to_string());
                serde_json::json!({ "cluster": cluster, "contentType": content_type }).to_string()
            }),
        )
        .route(
            "/reject",
            post(|| async {
                (
                    StatusCode::NETWORK_AUTHENTICATION_REQUIRED,
                    [("content-type", "application/json")],
                    r#"{"cluster_validation_error_message":"wrong cluster","route":"prepare"}"#,
                )
            }),
        )
        .route("/plain511", post(|| async { (StatusCode::NETWORK_AUTHENTICATION_REQUIRED, "not validation") }))
}

fn client(timeout: Duration) -> (HyperPodClient, Registry) {
    let mut registry = Registry::with_prefix("rollout_operator");
    let metrics = PodClientMetrics::register(&mut registry);
    (HyperPodClient::new(timeout, NS, metrics).unwrap(), registry)
}

fn encode(registry: &Registry) -> String {
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, registry).unwrap();
    out
}

#[tokio::test]
async fn post_returns_status_and_body_and_sends_the_cluster_header() {
    let base = serve(pod_router()).await;
    let (client, registry) = client(Duration::from_secs(5));

    let ok = client.call(PodRequest::post(format!("{base}/prepare"))).await.unwrap();
    assert_eq!(ok, PodResponse { status: 200, body: br#"{"timestamp":1700000000}"#.to_vec() });

    let echoed = client.call(PodRequest::post(format!("{base}/headers"))).await.unwrap();
    let echoed: serde_json::Value = serde_json::from_slice(&echoed.body).unwrap();
    assert_eq!(echoed["cluster"], serde_json::json!([NS]));
    assert_eq!(echoed["contentType"], serde_json::Value::Null, "delayed downscale POSTs have no content type");

    let mut json = PodRequest::post(format!("{base}/headers"));
    json.json_content_type = true;
    let echoed: serde_json::Value = serde_json::from_slice(&client.call(json).await.unwrap().body).unwrap();
    assert_eq!(echoed["contentType"], "application/json");

    let text = encode(&registry);
    assert!(
        text.contains(
            r#"rollout_operator_pod_http_client_request_duration_seconds_count{path="/prepare",method="POST",status_code="200"} 1"#
        ),
        "{text}"
    );
}

#[tokio::test]
async fn non_2xx_answers_are_responses_not_errors() {
    let base = serve(pod_router()).await;
    let (client, registry) = client(Duration::from_secs(5));
    let failed = client.call(PodRequest::post(format!("{base}/fail"))).await.unwrap();
    assert_eq!(failed.status, 500);
    assert_eq!(failed.body_text(), "boom");
    assert!(!failed.is_success());
    let locked = client.call(PodRequest::delete(format!("{base}/locked"))).await.unwrap();
    assert_eq!(locked.status, 409);
    let plain = client.call(PodRequest::post(format!("{base}/plain511"))).await.unwrap();
    assert_eq!(plain.status, 511, "a 511 without the JSON rejection body is an ordinary answer");
    let text = encode(&registry);
    assert!(text.contains(r#"path="/locked",method="DELETE",status_code="409"} 1"#), "{text}");
}

#[tokio::test]
async fn slow_pod_times_out_and_is_counted_as_error() {
    let base = serve(pod_router()).await;
    let (client, registry) = client(Duration::from_millis(200));
    let err = client.call(PodRequest::post(format!("{base}/slow"))).await.unwrap_err();
    assert!(matches!(err, PodCallError::Timeout { .. }), "{err:?}");
    assert!(err.to_string().contains("-pods.client-timeout"), "{err}");
    let text = encode(&registry);
    assert!(text.contains(r#"path="/slow",method="POST",status_code="error"} 1"#), "{text}");
}

#[tokio::test]
async fn cluster_validation_rejection_is_a_typed_error_and_counted() {
    let base = serve(pod_router()).await;
    let (client, registry) = client(Duration::from_secs(5));
    let err = client.call(PodRequest::post(format!("{base}/reject"))).await.unwrap_err();
    assert!(matches!(err, PodCallError::ClusterValidation { .. }), "{err:?}");
    assert!(err.to_string().contains("request rejected by the server: wrong cluster"), "{err}");
    let text = encode(&registry);
    assert!(
        text.contains(&format!(
            r#"rollout_operator_client_invalid_cluster_validation_label_requests_total{{method="/reject",protocol="http",request_cluster="{NS}"}} 1"#
        )),
        "{text}"
    );
}

#[tokio::test]
async fn connection_refused_and_bad_urls_are_typed_errors() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let (client, _registry) = client(Duration::from_secs(5));
    let err = client.call(PodRequest::post(format!("http://{addr}/prepare"))).await.unwrap_err();
    assert!(matches!(err, PodCallError::Connect { .. }), "{err:?}");
    let err = client.call(PodRequest::post("not a url")).await.unwrap_err();
    assert!(matches!(err, PodCallError::InvalidUrl { .. }), "{err:?}");
    let err = client.call(PodRequest::post("/relative/path")).await.unwrap_err();
    assert!(matches!(err, PodCallError::InvalidUrl { .. }), "{err:?}");
    let err = client.call(PodRequest::post("ftp://pod/x")).await.unwrap_err();
    assert!(matches!(err, PodCallError::UnsupportedScheme { .. }), "{err:?}");
}

#[tokio::test]
async fn call_all_against_real_pods_keeps_request_order() {
    let base = serve(pod_router()).await;
    let (client, _registry) = client(Duration::from_secs(5));
    let requests = vec![
        PodRequest::post(format!("{base}/prepare")),
        PodRequest::post(format!("{base}/fail")),
        PodRequest::delete(format!("{base}/locked")),
    ];
    let results = call_all(&client, requests, 32, false).await;
    let statuses: Vec<u16> = results.iter().map(|r| r.as_ref().unwrap().status).collect();
    assert_eq!(statuses, [200, 500, 409]);
}

/// A scripted client: URLs ending in `/fail` fail, `/hang` never answers, anything else answers 200 after yielding.
#[derive(Clone, Default)]
struct Scripted {
    in_flight: Arc<AtomicUsize>,
    max_in_flight: Arc<AtomicUsize>,
    calls: Arc<AtomicUsize>,
}

impl PodHttpClient for Scripted {
    async fn call(&self, request: PodRequest) -> Result<PodResponse, PodCallError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        for _ in 0..5 {
            tokio::task::yield_now().await;
        }
        if request.url.ends_with("/hang") {
            std::future::pending::<()>().await;
        }
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        if request.url.ends_with("/fail") {
            return Ok(PodResponse { status: 500, body: b"boom".to_vec() });
        }
        Ok(PodResponse { status: 200, body: Vec::new() })
    }
}

#[tokio::test]
async fn call_all_never_exceeds_the_concurrency_limit() {
    let client = Scripted::default();
    let requests = (0..100).map(|i| PodRequest::post(format!("http://pod-{i}/ok"))).collect();
    let results = call_all(&client, requests, 7, false).await;
    assert_eq!(results.len(), 100);
    assert!(results.iter().all(|r| r.as_ref().unwrap().status == 200));
    assert_eq!(client.max_in_flight.load(Ordering::SeqCst), 7);
}

#[tokio::test]
async fn call_all_stops_at_the_first_failure_and_cancels_the_rest() {
    let client = Scripted::default();
    let mut requests = vec![PodRequest::post("http://pod-0/fail")];
    requests.extend((1..10).map(|i| PodRequest::post(format!("http://pod-{i}/hang"))));
    requests.extend((10..50).map(|i| PodRequest::post(format!("http://pod-{i}/ok"))));
    let results = call_all(&client, requests, 10, true).await;
    assert_eq!(results[0].as_ref().unwrap().status, 500);
    for result in &results[1..] {
        assert!(matches!(result, Err(PodCallError::Cancelled { .. })), "{result:?}");
    }
    assert_eq!(client.calls.load(Ordering::SeqCst), 10, "nothing is sent after the first failure");

    // Without early stop every request gets its own answer.
    let client = Scripted::default();
    let requests = vec![PodRequest::post("http://pod-0/fail"), PodRequest::post("http://pod-1/ok")];
    let results = call_all(&client, requests, 1, false).await;
    assert_eq!(results[0].as_ref().unwrap().status, 500);
    assert_eq!(results[1].as_ref().unwrap().status, 200);
}
