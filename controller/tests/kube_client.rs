//! The Kubernetes client's layers over a stand-in API server: request metrics with the reference's path
//! descriptions, and the client-side rate limiter (`-kubernetes.client-qps` / `-burst`), as `main` builds them.
#![cfg(not(madsim))]

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::client::Body;
use rollout_operator::kube::adapter::client_with_layers_and;
use rollout_operator::kube::layers::RateLimits;
use rollout_operator::ops::metrics::Metrics;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

fn api_server(
    seen: Arc<AtomicUsize>,
) -> impl tower::Service<
    http::Request<Body>,
    Response = http::Response<Body>,
    Error = Infallible,
    Future = impl Send + 'static,
> + Send
+ 'static {
    tower::service_fn(move |request: http::Request<Body>| {
        seen.fetch_add(1, Ordering::SeqCst);
        async move {
            let name = request.uri().path().rsplit('/').next().unwrap_or_default().to_string();
            let pod =
                serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns"}});
            Ok::<_, Infallible>(http::Response::new(Body::from(serde_json::to_vec(&pod).unwrap())))
        }
    })
}

#[tokio::test]
async fn requests_are_measured_by_resource_and_limited_per_api_group_without_being_sent() {
    let metrics = Metrics::new();
    let seen = Arc::new(AtomicUsize::new(0));
    let limits = RateLimits { qps: 1.0, burst: 2, max_wait: Duration::from_millis(50) };
    let client = client_with_layers_and(api_server(seen.clone()), "ns", limits, metrics.kube_client.clone()).unwrap();
    let pods: Api<Pod> = Api::namespaced(client, "ns");
    pods.get("a").await.expect("first of the burst");
    pods.get("b").await.expect("second of the burst");
    let err = pods.get("c").await.expect_err("no token within 50 ms at 1 qps");
    assert!(err.to_string().contains("client-side rate limiter for Kubernetes API group \"core\""), "{err}");
    assert_eq!(seen.load(Ordering::SeqCst), 2, "the limited request was not sent");
    let text = metrics.encode_prometheus_text();
    assert!(
        text.contains(
            "rollout_operator_kubernetes_api_client_request_duration_seconds_count{path=\"core/v1/pods object\",method=\"GET\",status_code=\"200\"} 2"
        ),
        "{text}"
    );
    assert!(
        text.contains("rollout_operator_kubernetes_api_client_rate_limited_requests_total{api_group=\"core\"} 1"),
        "{text}"
    );
}

#[tokio::test]
async fn zero_qps_disables_the_limiter() {
    let metrics = Metrics::new();
    let seen = Arc::new(AtomicUsize::new(0));
    let limits = RateLimits { qps: 0.0, burst: 0, max_wait: Duration::ZERO };
    let client = client_with_layers_and(api_server(seen.clone()), "ns", limits, metrics.kube_client.clone()).unwrap();
    let pods: Api<Pod> = Api::namespaced(client, "ns");
    for i in 0..50 {
        pods.get(&format!("p{i}")).await.expect("unlimited");
    }
    assert_eq!(seen.load(Ordering::SeqCst), 50);
}
