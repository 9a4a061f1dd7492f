//! The plain HTTP server on `-server.port`: `/ready` and `/metrics`, as in the reference.
//!
//! `/metrics` is served as OpenMetrics 1.0 text: that is the format prometheus-client's encoder writes (counter
//! families declared without their `_total` suffix, a final `# EOF`), so the content type says exactly that.
//! Labelling it Prometheus text 0.0.4 would make a strict 0.0.4 parser see counter samples whose names do not match
//! their `# TYPE` line. Prometheus negotiates OpenMetrics by default, and the sample names
//! (`rollout_operator_group_reconciles_total`, ...) are the reference's either way.
//!
//! Like the reference's router, both paths answer every method and match exactly; anything else is 404.

use crate::ops::health::ReadyFlag;
use crate::ops::metrics::Metrics;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use std::sync::Arc;

pub const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The Prometheus text format, served unless the scraper asks for OpenMetrics (as the reference does).
pub const PROMETHEUS_TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[derive(Clone)]
struct AppState {
    metrics: Arc<Metrics>,
    ready: ReadyFlag,
}

/// Routes of the plain HTTP server.
pub fn router(metrics: Arc<Metrics>, ready: ReadyFlag) -> Router {
    router_with(metrics, ready, None)
}

/// [`router`], with server-side cluster validation when `validation` is given (`/metrics` and `/ready` are always
/// exempt, so in practice it only answers unknown paths with 511 instead of 404, as the reference does).
pub fn router_with(
    metrics: Arc<Metrics>,
    ready: ReadyFlag,
    validation: Option<Arc<crate::ops::cluster_validation::ClusterValidation>>,
) -> Router {
    let http = metrics.http.clone();
    let mut router = Router::new()
        .route("/ready", any(ready_handler))
        .route("/metrics", any(metrics_handler))
        .with_state(AppState { metrics, ready });
    if let Some(validation) = validation {
        router = crate::ops::cluster_validation::validate(router, validation);
    }
    crate::ops::http_metrics::instrument(router, http)
}

/// 200 once the controller's caches have synced, 500 before; empty body either way (as the reference).
async fn ready_handler(State(state): State<AppState>) -> StatusCode {
    if state.ready.is_ready() { StatusCode::OK } else { StatusCode::INTERNAL_SERVER_ERROR }
}

async fn metrics_handler(State(state): State<AppState>, headers: axum::http::HeaderMap) -> Response {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or_default();
    if accept.contains("application/openmetrics-text") {
        ([(header::CONTENT_TYPE, METRICS_CONTENT_TYPE)], state.metrics.encode()).into_response()
    } else {
        ([(header::CONTENT_TYPE, PROMETHEUS_TEXT_CONTENT_TYPE)], state.metrics.encode_prometheus_text()).into_response()
    }
}

/// Serves `router` on `listener` until `shutdown` resolves, then stops accepting and lets in-flight requests
/// finish. Real sockets only: inside the simulator the router is driven directly with `tower::ServiceExt`.
#[cfg(not(madsim))]
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router).with_graceful_shutdown(shutdown).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    async fn call(router: Router, method: &str, path: &str) -> (StatusCode, Option<String>, String) {
        let request = Request::builder().method(method).uri(path).body(Body::empty()).expect("valid request");
        let response = router.oneshot(request).await.expect("the router is infallible");
        let status = response.status();
        let content_type =
            response.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_string);
        let body = response.into_body().collect().await.expect("body").to_bytes();
        (status, content_type, String::from_utf8(body.to_vec()).expect("utf-8 body"))
    }

    #[tokio::test]
    async fn ready_is_500_until_the_flag_is_set_then_200() {
        let ready = ReadyFlag::new();
        let app = router(Arc::new(Metrics::new()), ready.clone());
        let (status, _, body) = call(app.clone(), "GET", "/ready").await;
        assert_eq!((status, body.as_str()), (StatusCode::INTERNAL_SERVER_ERROR, ""));
        ready.set_ready();
        let (status, _, body) = call(app, "GET", "/ready").await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, ""));
    }

    #[tokio::test]
    async fn metrics_serves_openmetrics_when_asked_and_prometheus_text_otherwise() {
        let metrics = Arc::new(Metrics::new());
        metrics.group_reconcile_started("ingester");
        let app = router(metrics, ReadyFlag::new());
        let request = Request::get("/metrics")
            .header(header::ACCEPT, "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5")
            .body(Body::empty())
            .unwrap();
        let response = app.clone().oneshot(request).await.unwrap();
        assert_eq!(response.headers()[header::CONTENT_TYPE], METRICS_CONTENT_TYPE);
        let body = String::from_utf8(response.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap();
        assert!(body.contains("# TYPE rollout_operator_group_reconciles counter"), "{body}");
        assert!(body.ends_with("# EOF\n"), "{body}");

        let (status, content_type, body) = call(app.clone(), "GET", "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(content_type.as_deref(), Some(PROMETHEUS_TEXT_CONTENT_TYPE));
        assert!(body.contains("# TYPE rollout_operator_group_reconciles_total counter"), "{body}");
        assert!(body.contains("rollout_operator_group_reconciles_total{rollout_group=\"ingester\"} 1"), "{body}");
        assert!(!body.contains("# EOF"), "{body}");
        // The scrape itself is measured (with the route label of the reference).
        let (_, _, body) = call(app, "GET", "/metrics").await;
        assert!(
            body.contains(
                "rollout_operator_request_duration_seconds_count{method=\"GET\",route=\"metrics\",status_code=\"200\",ws=\"false\"} 2"
            ),
            "{body}"
        );
    }

    #[tokio::test]
    async fn metrics_has_the_build_info_in_both_formats() {
        use crate::ops::build_info::{REVISION, RUST_VERSION, VERSION};
        let app = router(Arc::new(Metrics::new()), ReadyFlag::new());
        let labels = format!("version=\"{VERSION}\",revision=\"{REVISION}\",rustversion=\"{RUST_VERSION}\"");
        let series = format!("rollout_operator_build_info{{{labels}}} 1");
        let (_, _, body) = call(app.clone(), "GET", "/metrics").await;
        assert!(body.contains("# TYPE rollout_operator_build_info gauge"), "{body}");
        assert!(body.lines().any(|line| line == series), "{series} not in\n{body}");
        let request = Request::get("/metrics")
            .header(header::ACCEPT, "application/openmetrics-text;version=1.0.0")
            .body(Body::empty())
            .unwrap();
        let response = app.oneshot(request).await.unwrap();
        let body = String::from_utf8(response.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap();
        assert!(body.lines().any(|line| line == series), "{series} not in\n{body}");
    }

    /// Prometheus's own linter accepts what `/metrics` serves (scripts/tools.sh installs promtool).
    #[cfg(not(madsim))]
    #[tokio::test]
    async fn promtool_accepts_the_metrics() {
        use std::io::Write;
        let metrics = Arc::new(Metrics::new());
        metrics.group_reconcile_started("ingester");
        metrics.group_reconcile_finished("ingester", std::time::Duration::from_millis(3), true, 1.0);
        metrics.scaling_error("ingester", "ingester-zone-b");
        metrics.gates().refused(crate::ops::feature_gate::Gate::ZoneTracker, &"configmaps is forbidden");
        metrics.webhook_failure_policy("ValidatingWebhook", "pod-eviction.grafana.com", "Fail");
        let app = router(metrics, ReadyFlag::new());
        call(app.clone(), "GET", "/ready").await;
        call(app.clone(), "GET", "/nope").await;
        let (_, _, body) = call(app, "GET", "/metrics").await;
        let mut child = match std::process::Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
        {
            Ok(child) => child,
            Err(e) => panic!("promtool is needed by this test ({e}); run scripts/tools.sh to install it"),
        };
        child.stdin.take().unwrap().write_all(body.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        let report = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success() && report.trim().is_empty(), "promtool: {report}\n{body}");
    }

    #[tokio::test]
    async fn unknown_and_non_exact_paths_are_404() {
        let app = router(Arc::new(Metrics::new()), ReadyFlag::new());
        for path in ["/", "/nope", "/ready/", "/metrics/x", "/debug/pprof/"] {
            let (status, _, _) = call(app.clone(), "GET", path).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
        }
    }

    #[tokio::test]
    async fn endpoints_answer_any_method_like_the_reference() {
        let ready = ReadyFlag::new();
        ready.set_ready();
        let app = router(Arc::new(Metrics::new()), ready);
        assert_eq!(call(app.clone(), "POST", "/metrics").await.0, StatusCode::OK);
        assert_eq!(call(app.clone(), "HEAD", "/ready").await.0, StatusCode::OK);
    }

    /// A real socket on localhost: the server answers, then stops when told to.
    #[cfg(not(madsim))]
    #[tokio::test]
    async fn serves_on_a_real_socket_and_shuts_down() {
        use std::time::Duration;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};

        let ready = ReadyFlag::new();
        ready.set_ready();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind localhost");
        let addr = listener.local_addr().expect("local address");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, router(Arc::new(Metrics::new()), ready), async {
            let _ = stopped.await;
        }));

        let exchange = async {
            let mut stream = tokio::net::TcpStream::connect(addr).await?;
            stream.write_all(b"GET /ready HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").await?;
            let mut response = Vec::new();
            stream.read_to_end(&mut response).await?;
            Ok::<_, std::io::Error>(String::from_utf8_lossy(&response).into_owned())
        };
        let response = tokio::time::timeout(Duration::from_secs(10), exchange)
            .await
            .expect("the server answers in time")
            .expect("the exchange succeeds");
        assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");

        let _ = stop.send(());
        let result = tokio::time::timeout(Duration::from_secs(10), server).await.expect("the server stops in time");
        assert!(matches!(result, Ok(Ok(()))), "{result:?}");
    }
}
